package e2estandard

import (
	"context"
	"fmt"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
)

// keepClusterAnnotation asks, on a Widget, for a backup cluster that outlives its request.
const keepClusterAnnotation = "e2e.widgets/keep-backup-cluster"

// backupTarget is the widget provider with a further cluster, "backup", where it keeps
// a ConfigMap per tenant.
type backupTarget struct{ widget.Provider }

func (p backupTarget) CreateOrUpdate(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	res, err := p.Provider.CreateOrUpdate(ctx, w)
	if err != nil {
		return res, err
	}
	b := cluster.AdditionalFromCtx(ctx, "backup")
	if b == nil {
		return provider.Result{}, fmt.Errorf("no backup cluster")
	}
	ns := cluster.IdentityFromCtx(ctx).TenantNamespace()
	if err := b.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return provider.Result{}, err
	}
	if err := b.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-target"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return provider.Result{}, err
	}
	return res, nil
}

func (p backupTarget) Delete(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	if b := cluster.AdditionalFromCtx(ctx, "backup"); b != nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.IdentityFromCtx(ctx).TenantNamespace(), Name: "backup-target"}}
		if err := b.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return provider.Result{}, err
		}
	}
	return p.Provider.Delete(ctx, w)
}

// TestAdditionalCluster: a provider that declares a further cluster (as
// opencontrolplane-runtime's custom registrations did) gets it ordered under its own
// registration, next to the workload cluster, reaches it in CreateOrUpdate and Delete,
// and deletion releases its requests.
func TestAdditionalCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := startWidgets(ctx, t, "alpha")
	ob, wl, pf := p.Onboarding.Client, p.Workload.Client, p.Platform.Platform.Client
	if err := pf.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: widget.WidgetConfigSpec{Greeting: "hello"}}); err != nil {
		t.Fatal(err)
	}
	rt, err := widgetbuilder.New(providerName, scheme(t), widget.MCPPermissions).
		AdditionalCluster("backup", builder.AdditionalCluster[*widget.Widget]{
			// The request's spec from the object and the ProviderConfig, as
			// opencontrolplane-runtime's AdditionalDataGenerators fed a registration.
			Spec: func(w *widget.Widget, pc provider.ProviderConfig) (*clustersv1alpha1.ClusterRequestSpec, error) {
				if _, ok := pc.(*widget.WidgetConfig); !ok {
					return nil, fmt.Errorf("no WidgetConfig")
				}
				return &clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PURPOSE_WORKLOAD,
					WaitForClusterDeletion: ptr.To(w.Annotations[keepClusterAnnotation] == "true")}, nil
			},
			Permissions: cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: []string{"get", "create", "delete"}}}}}},
		}).
		Complete(backupTarget{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Background(ctx, t, "runtime", func(ctx context.Context) error {
		return rt.Start(ctx, builder.Options{Platform: p.Platform.Platform.Config, Onboarding: p.Onboarding.Config, Namespace: "default", RetryInterval: time.Second})
	})
	key := client.ObjectKey{Namespace: tenantNamespace, Name: "alpha"}
	if err := ob.Create(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Annotations: map[string]string{keepClusterAnnotation: "true"}}}); err != nil {
		t.Fatal(err)
	}
	wantReady(ctx, t, ob, key)
	ns, _ := libutils.StableMCPNamespace(key.Name, key.Namespace)
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "backup-target"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the provider's ConfigMap on the backup cluster: %v", err)
	}
	for _, obj := range []client.Object{&clustersv1alpha1.ClusterRequest{}, &clustersv1alpha1.AccessRequest{}} {
		if err := pf.Get(ctx, client.ObjectKey{Namespace: ns, Name: providerName + "--alpha--backup"}, obj); err != nil {
			t.Errorf("%T of the backup registration: %v", obj, err)
		} else if got := obj.GetLabels()["openmcp.cloud/managed-purpose"]; got != tenantNamespace+".alpha.backup" {
			t.Errorf("%T managed-purpose %q, want %s.alpha.backup", obj, got, tenantNamespace)
		}
		if cr, ok := obj.(*clustersv1alpha1.ClusterRequest); ok && (cr.Spec.WaitForClusterDeletion == nil || !*cr.Spec.WaitForClusterDeletion) {
			t.Errorf("ClusterRequest spec %+v, want waitForClusterDeletion from the widget's annotation", cr.Spec)
		}
	}

	harness.DeleteAndWait(ctx, t, ob, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "backup-target"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the backup ConfigMap after deletion: %v, want gone (Delete reached the backup cluster)", err)
	}
	harness.Eventually(ctx, t, time.Minute, "the backup registration's requests released", func(ctx context.Context) error {
		for _, obj := range []client.Object{&clustersv1alpha1.AccessRequest{}, &clustersv1alpha1.ClusterRequest{}} {
			if err := pf.Get(ctx, client.ObjectKey{Namespace: ns, Name: providerName + "--alpha--backup"}, obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T: %v", obj, err)
			}
		}
		return nil
	})
}
