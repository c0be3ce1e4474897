package localenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSimulatedNodes checks that an API server of the local platform behaves as a
// cluster does for what providers install: a Deployment on a simulated node becomes
// Available, a new namespace gets its default ServiceAccount and kube-root-ca.crt,
// a Deployment deleted with orphan propagation leaves its ReplicaSet and pods, and
// deleting the namespace then removes them and the namespace itself.
func TestSimulatedNodes(t *testing.T) {
	env := newTestEnv(t, "nodes")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	workload, err := env.StartAPIServer(PurposeWorkload, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := env.StartSimulatedNodes(ctx, workload, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(workload.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "greeter"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "greeter"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "greeter"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "greeter", Image: "example.com/greeter:1"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, time.Minute, "Deployment Available", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 2 || conditionStatus(d.Status, appsv1.DeploymentAvailable) != corev1.ConditionTrue {
			return fmt.Errorf("status %+v", d.Status)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != nodes[0] || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q, phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-root-ca.crt"}},
	} {
		if err := Poll(ctx, time.Minute, fmt.Sprintf("%T %s", o, o.GetName()), func(ctx context.Context) error {
			return c.Get(ctx, client.ObjectKeyFromObject(o), o)
		}); err != nil {
			t.Error(err)
		}
	}

	if err := c.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, time.Minute, "Deployment gone, its ReplicaSet orphaned", func(ctx context.Context) error {
		if err := Gone(c.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})); err != nil {
			return err
		}
		rss := &appsv1.ReplicaSetList{}
		if err := c.List(ctx, rss, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(rss.Items) != 1 || len(rss.Items[0].OwnerReferences) != 0 {
			return fmt.Errorf("ReplicaSets %+v", rss.Items)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods after the orphaning delete: %d (%v)", len(pods.Items), err)
	}
	if err := DeleteAndWait(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, time.Minute); err != nil {
		t.Fatalf("the namespace controller did not finish the namespace: %v", err)
	}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &appsv1.ReplicaSetList{}} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if n := apimeta.LenList(list); n > 0 {
			t.Errorf("%T: %d left", list, n)
		}
	}
}
