package engine

import (
	"context"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A provider's platform writer reaches its tenant's namespace and nothing else: every
// other write fails with an error naming the namespace, and reaches no server.
func TestTenantWriterStaysInTheTenantNamespace(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, kind := range []string{"ConfigMap", "Secret"} {
		mapper.Add(corev1.SchemeGroupVersion.WithKind(kind), meta.RESTScopeNamespace)
	}
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	mapper.Add(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), meta.RESTScopeRoot)
	base := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).Build()
	labels := map[string]string{"openmcp.cloud/managed-by": "widgets", "tenant": "a"}
	w := newTenantWriter(base, "mcp--tenant-a", labels, platformCache{})

	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "values", Labels: map[string]string{"app": "widget"}}}
	if err := w.Create(ctx, own); err != nil {
		t.Fatalf("create in the tenant's namespace: %v", err)
	}
	if own.Namespace != "mcp--tenant-a" {
		t.Errorf("namespace filled in = %q, want the tenant's", own.Namespace)
	}
	// What the writer writes names the provider and the tenant, beside its own labels.
	stored := &corev1.ConfigMap{}
	if err := base.Get(ctx, client.ObjectKey{Namespace: "mcp--tenant-a", Name: "values"}, stored); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"openmcp.cloud/managed-by": "widgets", "tenant": "a", "app": "widget"}; !maps.Equal(stored.Labels, want) {
		t.Errorf("labels of a created object %v, want %v", stored.Labels, want)
	}
	if err := w.Get(ctx, client.ObjectKey{Name: "values"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("get in the tenant's namespace: %v", err)
	}

	refused := []struct {
		name string
		call func() error
	}{
		{"create in another tenant's namespace", func() error {
			return w.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp--tenant-b", Name: "values"}})
		}},
		{"delete in the provider's namespace", func() error {
			return w.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openmcp-system", Name: "kcp-kubeconfig"}})
		}},
		{"read another tenant's Secret", func() error {
			return w.Get(ctx, client.ObjectKey{Namespace: "mcp--tenant-b", Name: "kubeconfig"}, &corev1.Secret{})
		}},
		{"create a cluster-scoped object", func() error {
			return w.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalate"}})
		}},
		{"patch a cluster-scoped object's status", func() error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcp--tenant-b"}}
			return w.Status().Patch(ctx, ns, client.MergeFrom(ns.DeepCopy()))
		}},
		{"list cluster-scoped objects", func() error { return w.List(ctx, &corev1.NamespaceList{}) }},
		{"list another namespace", func() error { return w.List(ctx, &corev1.SecretList{}, client.InNamespace("mcp--tenant-b")) }},
	}
	for _, r := range refused {
		err := r.call()
		if err == nil {
			t.Errorf("%s: succeeded, want refused", r.name)
			continue
		}
		if !strings.Contains(err.Error(), "mcp--tenant-a") {
			t.Errorf("%s: error %q does not name the tenant's namespace", r.name, err)
		}
	}
	var mine corev1.ConfigMapList
	if err := w.List(ctx, &mine); err != nil || len(mine.Items) != 1 {
		t.Errorf("list in the tenant's namespace: %d items (err %v), want 1", len(mine.Items), err)
	}
	// Nothing reached the server: the other namespaces hold nothing.
	var all corev1.ConfigMapList
	if err := base.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 1 {
		t.Errorf("server holds %d ConfigMaps, want the tenant's one", len(all.Items))
	}
	var roles rbacv1.ClusterRoleList
	if err := base.List(ctx, &roles); err != nil || len(roles.Items) != 0 {
		t.Errorf("ClusterRoles on the server: %d (err %v), want 0", len(roles.Items), err)
	}
}
