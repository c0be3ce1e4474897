package main

import (
	"context"
	"fmt"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/internal/scaffold/template/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// ConfigMapName is what the provider keeps in the tenant's namespace on the workload
// cluster: a ConfigMap holding the Note's text under the key "text".
const ConfigMapName = "note"

// workloadPermissions are what CreateOrUpdate and Delete do on the workload cluster.
var workloadPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
}}}}

// newRuntime declares the provider to the runtime: its Service API, its ProviderConfig,
// the workload cluster it needs and the reconciler; the runtime does the rest.
func newRuntime(name string, kcp apiexport.Provisionable) (command.Runner, error) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return builder.ServiceProvider[*v1alpha1.Note](name, s).
		For(&v1alpha1.Note{}).WithProviderConfig(&v1alpha1.NoteConfig{}).
		WorkloadCluster(workloadPermissions).KCP(kcp).
		Complete(Provider{})
}

// Provider keeps each Note's text in a ConfigMap on the workload cluster.
type Provider struct{}

var _ provider.Reconciler[*v1alpha1.Note] = Provider{}

// CreateOrUpdate writes the ConfigMap, creating the tenant's namespace when missing.
func (Provider) CreateOrUpdate(ctx context.Context, n *v1alpha1.Note) (provider.Result, error) {
	wl, ns := cluster.WorkloadFromCtx(ctx), cluster.IdentityFromCtx(ctx).TenantNamespace()
	if err := wl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return provider.Result{}, fmt.Errorf("creating namespace %s on the workload cluster: %w", ns, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, wl, cm, func() error {
		cm.Data = map[string]string{"text": n.Spec.Text}
		return nil
	}); err != nil {
		return provider.Result{}, fmt.Errorf("writing ConfigMap %s/%s on the workload cluster: %w", ns, ConfigMapName, err)
	}
	n.Status.Resources = []rtv1alpha1.ManagedResource{{Cluster: "workload", APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: ConfigMapName}}
	return provider.Done(), nil
}

// Delete removes the ConfigMap and reports done once it is gone.
func (Provider) Delete(ctx context.Context, _ *v1alpha1.Note) (provider.Result, error) {
	if cluster.DeletionFromCtx(ctx).Workload != cluster.Reachable {
		return provider.Done(), nil // no workload access held: nothing to remove with it
	}
	wl := cluster.WorkloadFromCtx(ctx)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.IdentityFromCtx(ctx).TenantNamespace(), Name: ConfigMapName}}
	if err := wl.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return provider.Result{}, fmt.Errorf("deleting ConfigMap %s/%s on the workload cluster: %w", cm.Namespace, cm.Name, err)
	}
	if err := wl.Get(ctx, client.ObjectKeyFromObject(cm), cm); !apierrors.IsNotFound(err) {
		return provider.Pending("waiting for the ConfigMap to be removed", time.Second), nil
	}
	return provider.Done(), nil
}
