package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	kcpcorev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
)

const (
	// pollInterval is how often helpers look at the object they wait for.
	pollInterval = 200 * time.Millisecond
	// waitTimeout bounds each wait of the kcp helpers. An idle kcp makes a workspace
	// Ready in well under a second; a kcp busy with hundreds of workspaces takes a
	// few seconds.
	waitTimeout = 2 * time.Minute
)

// ClientFor returns a controller-runtime client with admin access to the workspace
// at path, using the harness Scheme.
func (k *KCP) ClientFor(t testing.TB, path logicalcluster.Path) client.Client {
	t.Helper()
	c, err := client.New(k.ConfigFor(path), client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatalf("client for workspace %s: %v", path, err)
	}
	return c
}

// CreateWorkspace creates the workspace name (of the parent's default type) in the
// workspace parent and waits until it is Ready. It returns the new workspace's path
// (parent:name) and its logical cluster name, which is what the APIExport virtual
// workspace and multicluster-runtime call the cluster.
func (k *KCP) CreateWorkspace(ctx context.Context, t testing.TB, parent logicalcluster.Path, name string) (logicalcluster.Path, logicalcluster.Name) {
	t.Helper()
	c := k.ClientFor(t, parent)
	ws := &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ws); err != nil {
		t.Fatalf("creating workspace %s in %s: %v", name, parent, err)
	}
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Name: name}, ws); err != nil {
			return false, nil // transient: kcp may be busy
		}
		return ws.Status.Phase == kcpcorev1alpha1.LogicalClusterPhaseReady && ws.Spec.Cluster != "", nil
	})
	if err != nil {
		t.Fatalf("workspace %s:%s not ready (phase %q, conditions %v): %v", parent, name, ws.Status.Phase, ws.Status.Conditions, err)
	}
	return parent.Join(name), logicalcluster.Name(ws.Spec.Cluster)
}

// CreateAPIBinding binds the APIExport exportName of the workspace exportPath in the
// workspace consumer, accepting the given permission claims, and waits until the
// binding is Bound. It returns the bound APIBinding.
func (k *KCP) CreateAPIBinding(ctx context.Context, t testing.TB, consumer logicalcluster.Path, bindingName string,
	exportPath logicalcluster.Path, exportName string, claims []apisv1alpha2.AcceptablePermissionClaim,
) *apisv1alpha2.APIBinding {
	t.Helper()
	c := k.ClientFor(t, consumer)
	binding := &apisv1alpha2.APIBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bindingName},
		Spec: apisv1alpha2.APIBindingSpec{
			Reference: apisv1alpha2.BindingReference{
				Export: &apisv1alpha2.ExportBindingReference{Path: exportPath.String(), Name: exportName},
			},
			PermissionClaims: claims,
		},
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatalf("creating APIBinding %s in %s: %v", bindingName, consumer, err)
	}
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Name: bindingName}, binding); err != nil {
			return false, nil
		}
		return binding.Status.Phase == apisv1alpha2.APIBindingPhaseBound, nil
	})
	if err != nil {
		t.Fatalf("APIBinding %s in %s to %s:%s not bound (phase %q, conditions %v): %v",
			bindingName, consumer, exportPath, exportName, binding.Status.Phase, binding.Status.Conditions, err)
	}
	return binding
}

// VirtualWorkspaceURLs waits until the APIExportEndpointSlice endpointSliceName in
// the workspace provider lists endpoints and returns their URLs. kcp creates a slice
// named like each APIExport; it lists a shard only once a binding to the export
// exists there.
func (k *KCP) VirtualWorkspaceURLs(ctx context.Context, t testing.TB, provider logicalcluster.Path, endpointSliceName string) []string {
	t.Helper()
	c := k.ClientFor(t, provider)
	slice := &apisv1alpha1.APIExportEndpointSlice{}
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Name: endpointSliceName}, slice); err != nil {
			return false, nil
		}
		return len(slice.Status.APIExportEndpoints) > 0, nil
	})
	if err != nil {
		t.Fatalf("APIExportEndpointSlice %s in %s has no endpoints (conditions %v): %v",
			endpointSliceName, provider, slice.Status.Conditions, err)
	}
	urls := make([]string, 0, len(slice.Status.APIExportEndpoints))
	for _, e := range slice.Status.APIExportEndpoints {
		urls = append(urls, e.URL)
	}
	return urls
}

// poll calls cond every pollInterval until it returns true, an error, or waitTimeout
// (or ctx) runs out.
func poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, cond); err != nil {
		return fmt.Errorf("waited up to %s: %w", waitTimeout, err)
	}
	return nil
}
