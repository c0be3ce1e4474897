package localenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestKubeletDeploymentStrategy changes the pod template of running Deployments on a
// real kube-apiserver with kube-controller-manager and watches the real deployment
// controller replace the pods the kubelet stand-in runs as processes: a RollingUpdate
// (the API's default, as the openmcp-operator's Deployments get it) starts the new pod
// first and stops the old one only once the new one is ready, within maxSurge and
// maxUnavailable; Recreate never runs both, which needs the stand-in to stop a deleted
// pod's process before it removes the pod.
func TestKubeletDeploymentStrategy(t *testing.T) {
	env := newTestEnv(t, "kubelet-rollout")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	platform, err := env.StartAPIServer(PurposePlatform, nil)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "openmcp-system"
	c, err := client.New(platform.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A watch sees every status the stand-in writes; the controller-runtime client
	// has no watch of its own.
	cs, err := kubernetes.NewForConfig(platform.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The image: a script that records the greeting it was given, then runs until
	// stopped.
	out := t.TempDir()
	serve := filepath.Join(out, "serve.sh")
	if err := os.WriteFile(serve, []byte("#!/bin/sh\nprintf '%s\\n' \"$GREETING\" > \""+out+"/$POD_NAME.out\"\nexec sleep 600\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	k, err := env.StartKubelet(ctx, platform, KubeletOptions{Images: map[string]string{"serve:1": serve}})
	if err != nil {
		t.Fatal(err)
	}

	deployment := func(name string, replicas int32, strategy appsv1.DeploymentStrategy) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas), Strategy: strategy,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						// No token: the process needs none.
						AutomountServiceAccountToken: ptr.To(false),
						Containers: []corev1.Container{{Name: "c", Image: "serve:1", Env: []corev1.EnvVar{
							{Name: "GREETING", Value: "first"},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						}}},
					},
				},
			},
		}
	}
	// podsOf lists the ready pods of Deployment name.
	podsOf := func(name string) []string {
		var pods []string
		for _, p := range k.Running() {
			if strings.HasPrefix(p, ns+"/"+name+"-") {
				pods = append(pods, p)
			}
		}
		return pods
	}
	rolledOut := func(d *appsv1.Deployment, s appsv1.DeploymentStatus) bool {
		want := *d.Spec.Replicas
		return s.ObservedGeneration == d.Generation && s.Replicas == want && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.AvailableReplicas == want
	}
	// start creates d and waits until its pods run; it returns them.
	start := func(t *testing.T, d *appsv1.Deployment) []string {
		t.Helper()
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		var pods []string
		if err := Poll(ctx, time.Minute, "Deployment "+d.Name+" rolled out", func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			if pods = podsOf(d.Name); !rolledOut(d, d.Status) || len(pods) != int(*d.Spec.Replicas) {
				return fmt.Errorf("status %+v, running %v (refused: %v)", d.Status, pods, k.Refused())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return pods
	}
	// rollout changes the greeting of d's pods and observes the rollout until it is
	// complete, from before the change on: every status the Deployment is written with
	// (a watch misses none) and, sampled every few milliseconds, d's ready pods as
	// Kubelet.Running lists them. It returns both, and the pods that run in the end
	// (none of old).
	rollout := func(t *testing.T, d *appsv1.Deployment, old []string, greeting string) (statuses []appsv1.DeploymentStatus, samples [][]string, final []string) {
		t.Helper()
		w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", d.Name).String(),
			ResourceVersion: d.ResourceVersion,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		d.Spec.Template.Spec.Containers[0].Env[0].Value = greeting
		if err := c.Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		samples = append(samples, podsOf(d.Name))
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(time.Minute)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch of the Deployment ended")
				}
				cur, isDeployment := ev.Object.(*appsv1.Deployment)
				if ev.Type == watch.Error || !isDeployment {
					t.Fatalf("watch: %s %+v", ev.Type, ev.Object)
				}
				statuses = append(statuses, cur.Status)
			case <-tick.C:
				samples = append(samples, podsOf(d.Name))
			case <-deadline:
				t.Fatalf("not rolled out within a minute: statuses %+v, running %v (refused: %v)", statuses, podsOf(d.Name), k.Refused())
			}
			final = podsOf(d.Name)
			if len(statuses) > 0 && rolledOut(d, statuses[len(statuses)-1]) && len(final) == int(*d.Spec.Replicas) &&
				!slices.ContainsFunc(final, func(p string) bool { return slices.Contains(old, p) }) {
				samples = append(samples, final)
				break
			}
		}
		// The pods that run are of the new template.
		for _, p := range final {
			path := filepath.Join(out, strings.TrimPrefix(p, ns+"/")+".out")
			if err := Poll(ctx, time.Minute, "pod "+p+" records its greeting", func(context.Context) error {
				raw, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if got := strings.TrimSpace(string(raw)); got != greeting {
					return fmt.Errorf("greeting %q, want %q", got, greeting)
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}
		last := statuses[len(statuses)-1]
		if last.UpdatedReplicas != *d.Spec.Replicas {
			t.Errorf("updatedReplicas %d, want %d", last.UpdatedReplicas, *d.Spec.Replicas)
		}
		if got := conditionReason(last, appsv1.DeploymentProgressing); got != "NewReplicaSetAvailable" {
			t.Errorf("Progressing reason %q at the end, want NewReplicaSetAvailable", got)
		}
		var seen []string
		for _, s := range statuses {
			seen = append(seen, fmt.Sprintf("%d/%d/%d", s.Replicas, s.UpdatedReplicas, s.ReadyReplicas))
		}
		t.Logf("statuses (replicas/updated/ready) %v, %d samples of the running pods; pods %v replaced by %v", seen, len(samples), old, final)
		return statuses, samples, final
	}
	// within checks every observation of a rollout against the bounds of ready and
	// running pods, and says how many showed old and new pods side by side.
	within := func(t *testing.T, statuses []appsv1.DeploymentStatus, samples [][]string, minReady, maxPods int32) (overlaps int) {
		t.Helper()
		for _, s := range statuses {
			if s.ReadyReplicas < minReady || s.AvailableReplicas < minReady || s.Replicas > maxPods {
				t.Errorf("status %+v: want at least %d ready and at most %d pods", s, minReady, maxPods)
			}
			if s.Replicas > s.UpdatedReplicas && s.UpdatedReplicas > 0 {
				overlaps++
			}
		}
		for _, pods := range samples {
			if n := int32(len(pods)); n < minReady || n > maxPods {
				t.Errorf("running %v: want at least %d and at most %d", pods, minReady, maxPods)
			}
		}
		return overlaps
	}

	t.Run("RollingUpdate by default: the new pod is ready before the old one stops", func(t *testing.T) {
		d := deployment("rolling", 1, appsv1.DeploymentStrategy{})
		old := start(t, d)
		if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
			t.Fatalf("the API defaulted the strategy to %+v", d.Spec.Strategy)
		}
		statuses, samples, _ := rollout(t, d, old, "second")
		// maxSurge 1, maxUnavailable 0: never fewer than one ready, never more than two.
		if within(t, statuses, samples, 1, 2) == 0 {
			t.Errorf("no status showed the old pod running next to the new one: %+v", statuses)
		}
		for _, s := range statuses {
			if conditionStatus(s, appsv1.DeploymentAvailable) != corev1.ConditionTrue {
				t.Errorf("not Available during the rollout: %+v", s)
			}
			if s.Replicas == 2 && s.ObservedGeneration == d.Generation && conditionReason(s, appsv1.DeploymentProgressing) != "ReplicaSetUpdated" {
				t.Errorf("Progressing during the rollout: %+v", s.Conditions)
			}
		}
	})

	t.Run("RollingUpdate within maxSurge and maxUnavailable", func(t *testing.T) {
		d := deployment("budget", 3, appsv1.DeploymentStrategy{
			Type:          appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("34%"))},
		})
		old := start(t, d)
		statuses, samples, _ := rollout(t, d, old, "second")
		// 34 % of 3 rounds down to 1 unavailable: at least two ready, at most four pods.
		if within(t, statuses, samples, 2, 4) == 0 {
			t.Errorf("no status showed old pods running next to new ones: %+v", statuses)
		}
		if !slices.ContainsFunc(statuses, func(s appsv1.DeploymentStatus) bool { return s.Replicas == 4 }) {
			t.Errorf("the rollout never used its surge: %+v", statuses)
		}
	})

	t.Run("Recreate: the old pod stops before the new one starts", func(t *testing.T) {
		d := deployment("recreate", 1, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType})
		old := start(t, d)
		statuses, samples, _ := rollout(t, d, old, "second")
		if within(t, statuses, samples, 0, 1) != 0 {
			t.Errorf("a status showed old and new pods side by side: %+v", statuses)
		}
	})

	t.Run("a deleted Deployment stops its pods", func(t *testing.T) {
		d := deployment("rolling", 1, appsv1.DeploymentStrategy{})
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := Poll(ctx, time.Minute, "pods of the deleted Deployment stopped", func(context.Context) error {
			if pods := podsOf(d.Name); len(pods) > 0 {
				return fmt.Errorf("%v run", pods)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func conditionStatus(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func conditionReason(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Reason
		}
	}
	return ""
}
