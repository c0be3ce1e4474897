package localenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// TestKubelet runs Jobs and Deployments through the kubelet stand-in on a real
// kube-apiserver: a pod sees its rendered args and env and the identity of its
// ServiceAccount; Job and Deployment status read as the real controllers write it.
func TestKubelet(t *testing.T) {
	env := newTestEnv(t, "kubelet")
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
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Images: scripts that record what they were given, then succeed, fail or run.
	out := t.TempDir()
	script := func(name, tail string) string {
		path := filepath.Join(out, name+".sh")
		body := "#!/bin/sh\n" +
			`printf '%s\n' "$*" "$POD_NAME" "$POD_NAMESPACE" "$POD_SERVICE_ACCOUNT_NAME" "$POD_IP" "$GREETING" "$KUBECONFIG" "$SECRET_OF_THE_STARTER" > "` + out + `/$POD_NAME.out"` + "\n" + tail + "\n"
		if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Setenv("SECRET_OF_THE_STARTER", "leaked")
	k, err := env.StartKubelet(ctx, platform, KubeletOptions{
		RestartBackoff: 100 * time.Millisecond,
		Images:         map[string]string{"ok:1": script("ok", "exit 0"), "fail:1": script("fail", "exit 3"), "serve:1": script("serve", "exec sleep 600")},
	})
	if err != nil {
		t.Fatal(err)
	}
	podEnv := []corev1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_SERVICE_ACCOUNT_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
	}
	podSpec := func(image string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{
				ServiceAccountName: "worker", RestartPolicy: restart,
				Containers: []corev1.Container{{Name: "c", Image: image, Args: []string{"init", "--flag=1"}, Env: podEnv}},
			},
		}
	}
	job := func(name, image string, backoffLimit int32) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       batchv1.JobSpec{BackoffLimit: ptr.To(backoffLimit), Template: podSpec(image, corev1.RestartPolicyNever)},
		}
	}
	waitJob := func(name string, cond batchv1.JobConditionType) *batchv1.Job {
		t.Helper()
		j := &batchv1.Job{}
		if err := Poll(ctx, time.Minute, "Job "+name+" "+string(cond), func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
				return err
			}
			for _, jc := range j.Status.Conditions {
				if jc.Type == cond && jc.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("status %+v (refused: %v)", j.Status, k.Refused())
		}); err != nil {
			t.Fatal(err)
		}
		return j
	}

	t.Run("a Job that succeeds", func(t *testing.T) {
		if err := c.Create(ctx, job("init", "ok:1", 4)); err != nil {
			t.Fatal(err)
		}
		j := waitJob("init", batchv1.JobComplete)
		if j.Status.Succeeded != 1 || j.Status.Failed != 0 || j.Status.StartTime == nil || j.Status.CompletionTime == nil || j.Status.Active != 0 {
			t.Errorf("status %+v", j.Status)
		}
		matches, _ := filepath.Glob(filepath.Join(out, "init-*.out"))
		if len(matches) != 1 {
			t.Fatalf("pods run: %v", matches)
		}
		raw, err := os.ReadFile(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		podName := strings.TrimSuffix(filepath.Base(matches[0]), ".out")
		want := []string{"init --flag=1", podName, ns, "worker", "127.0.0.1", "hello"}
		for i, w := range want {
			if lines[i] != w {
				t.Errorf("line %d: %q, want %q", i, lines[i], w)
			}
		}
		if lines[7] != "" {
			t.Errorf("the starter's environment reached the pod: %q", lines[7])
		}
		// The kubeconfig is the ServiceAccount's.
		cfg, err := clientcmd.BuildConfigFromFlags("", lines[6])
		if err != nil {
			t.Fatal(err)
		}
		id, err := tokens.DetectIdentity(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := id.Username; got != "system:serviceaccount:"+ns+":worker" {
			t.Errorf("pod authenticates as %q", got)
		}
	})

	t.Run("a Job that fails up to its backoff limit", func(t *testing.T) {
		// The job controller waits 10 s before the second pod.
		if err := c.Create(ctx, job("broken", "fail:1", 1)); err != nil {
			t.Fatal(err)
		}
		j := waitJob("broken", batchv1.JobFailed)
		if j.Status.Failed != 2 || j.Status.Succeeded != 0 || j.Status.CompletionTime != nil {
			t.Errorf("status %+v", j.Status)
		}
		var reasons []string
		for _, jc := range j.Status.Conditions {
			reasons = append(reasons, string(jc.Type)+"="+jc.Reason)
		}
		if strings.Join(reasons, ",") != "FailureTarget=BackoffLimitExceeded,Failed=BackoffLimitExceeded" {
			t.Errorf("conditions %v", reasons)
		}
	})

	t.Run("a pod the stand-in cannot run is refused", func(t *testing.T) {
		j := job("volumes", "ok:1", 0)
		j.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := Poll(ctx, time.Minute, "refusal", func(context.Context) error {
			if err := errors.Join(k.Refused()...); err != nil && strings.Contains(err.Error(), "volumes are not supported") {
				return nil
			}
			return errors.New("not refused")
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a Deployment runs, restarts with a new template and stops with its deletion", func(t *testing.T) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: podSpec("serve:1", corev1.RestartPolicyAlways),
			},
		}
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		waitAvailable := func(generation int64) []string {
			t.Helper()
			if err := Poll(ctx, time.Minute, "Deployment available", func(ctx context.Context) error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
					return err
				}
				s := d.Status
				if s.ObservedGeneration != generation || s.Replicas != 1 || s.UpdatedReplicas != 1 || s.ReadyReplicas != 1 || s.AvailableReplicas != 1 {
					return fmt.Errorf("status %+v (refused: %v)", s, k.Refused())
				}
				for _, dc := range s.Conditions {
					if dc.Type == appsv1.DeploymentAvailable && dc.Status == corev1.ConditionTrue {
						return nil
					}
				}
				return fmt.Errorf("conditions %+v", s.Conditions)
			}); err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, p := range k.Running() {
				if strings.HasPrefix(p, ns+"/run-") {
					pods = append(pods, p)
				}
			}
			if len(pods) != 1 {
				t.Fatalf("running pods %v", pods)
			}
			return pods
		}
		first := waitAvailable(1)
		d.Spec.Template.Spec.Containers[0].Args = []string{"run", "--v=2"}
		if err := c.Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		second := waitAvailable(2)
		if first[0] == second[0] {
			t.Errorf("the pod %s was not replaced after a template change", first[0])
		}
		if err := c.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := Poll(ctx, time.Minute, "pods of the deleted Deployment stopped", func(context.Context) error {
			for _, p := range k.Running() {
				if strings.HasPrefix(p, ns+"/run-") {
					return fmt.Errorf("%s runs", p)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
