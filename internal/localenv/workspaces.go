package localenv

import (
	"context"
	"fmt"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	kcpcorev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// kcpWaitTimeout bounds each wait on kcp. An idle kcp makes a workspace Ready in well
// under a second; a kcp busy with hundreds of workspaces takes a few seconds.
const kcpWaitTimeout = 2 * time.Minute

// kcpScheme knows the kcp types the helpers below read and write.
func kcpScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, tenancyv1alpha1.AddToScheme, apisv1alpha1.AddToScheme, apisv1alpha2.AddToScheme} {
		utilruntime.Must(add(s))
	}
	return s
}

// CreateWorkspace creates the workspace name (of the parent's default type) in the
// workspace parent and waits until it is Ready. It returns the new workspace's path
// (parent:name) and its logical cluster name, which is what the APIExport virtual
// workspace and multicluster-runtime call the cluster. A workspace that exists is
// waited for, not created again.
func (k *KCP) CreateWorkspace(ctx context.Context, parent logicalcluster.Path, name string) (logicalcluster.Path, logicalcluster.Name, error) {
	return k.CreateWorkspaceOn(ctx, parent, name, "")
}

// CreateWorkspaceOn is CreateWorkspace placing the workspace on the named shard of a
// sharded kcp (ShardName); "" lets kcp choose.
func (k *KCP) CreateWorkspaceOn(ctx context.Context, parent logicalcluster.Path, name, shard string) (logicalcluster.Path, logicalcluster.Name, error) {
	c, err := client.New(k.ConfigFor(parent), client.Options{Scheme: kcpScheme()})
	if err != nil {
		return logicalcluster.Path{}, "", fmt.Errorf("client for workspace %s: %w", parent, err)
	}
	// Right after kcp reports ready, its admission may not know the root workspace
	// type yet ("parent type cannot be resolved"): refusals are retried for a while.
	err = Poll(ctx, time.Minute, "creating workspace "+name+" in "+parent.String(), func(ctx context.Context) error {
		ws := &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if shard != "" {
			// Each shard labels its Shard object name=<shard name>.
			ws.Spec.Location = &tenancyv1alpha1.WorkspaceLocation{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": shard}}}
		}
		err := c.Create(ctx, ws)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return logicalcluster.Path{}, "", err
	}
	ws := &tenancyv1alpha1.Workspace{}
	err = Poll(ctx, kcpWaitTimeout, "workspace "+parent.Join(name).String()+" Ready", func(ctx context.Context) error {
		if err := c.Get(ctx, types.NamespacedName{Name: name}, ws); err != nil {
			return err // transient: kcp may be busy
		}
		if ws.Status.Phase != kcpcorev1alpha1.LogicalClusterPhaseReady || ws.Spec.Cluster == "" {
			return fmt.Errorf("phase %q, conditions %v", ws.Status.Phase, ws.Status.Conditions)
		}
		return nil
	})
	if err != nil {
		return logicalcluster.Path{}, "", err
	}
	return parent.Join(name), logicalcluster.Name(ws.Spec.Cluster), nil
}

// CreateWorkspacePath creates every missing workspace of path (root:a:b creates a in
// root and b in root:a) and returns the logical cluster name of the last one.
func (k *KCP) CreateWorkspacePath(ctx context.Context, path logicalcluster.Path) (logicalcluster.Name, error) {
	parent, name := path.Split()
	if parent.Empty() {
		return "", fmt.Errorf("workspace path %s has no parent", path)
	}
	if parent.String() != "root" {
		if _, err := k.CreateWorkspacePath(ctx, parent); err != nil {
			return "", err
		}
	}
	_, lc, err := k.CreateWorkspace(ctx, parent, name)
	return lc, err
}

// CreateAPIBinding binds the APIExport exportName of the workspace exportPath in the
// workspace consumer, accepting the given permission claims, and waits until the
// binding is Bound. It returns the bound APIBinding.
func (k *KCP) CreateAPIBinding(ctx context.Context, consumer logicalcluster.Path, bindingName string,
	exportPath logicalcluster.Path, exportName string, claims []apisv1alpha2.AcceptablePermissionClaim,
) (*apisv1alpha2.APIBinding, error) {
	c, err := client.New(k.ConfigFor(consumer), client.Options{Scheme: kcpScheme()})
	if err != nil {
		return nil, fmt.Errorf("client for workspace %s: %w", consumer, err)
	}
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
		return nil, fmt.Errorf("creating APIBinding %s in %s: %w", bindingName, consumer, err)
	}
	what := fmt.Sprintf("APIBinding %s in %s to %s:%s bound", bindingName, consumer, exportPath, exportName)
	err = Poll(ctx, kcpWaitTimeout, what, func(ctx context.Context) error {
		if err := c.Get(ctx, types.NamespacedName{Name: bindingName}, binding); err != nil {
			return err
		}
		if binding.Status.Phase != apisv1alpha2.APIBindingPhaseBound {
			return fmt.Errorf("phase %q, conditions %v", binding.Status.Phase, binding.Status.Conditions)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return binding, nil
}

// VirtualWorkspaceURLs waits until the APIExportEndpointSlice endpointSliceName in
// the workspace provider lists endpoints and returns their URLs. kcp creates a slice
// named like each APIExport; it lists a shard only once a binding to the export
// exists there.
func (k *KCP) VirtualWorkspaceURLs(ctx context.Context, provider logicalcluster.Path, endpointSliceName string) ([]string, error) {
	c, err := client.New(k.ConfigFor(provider), client.Options{Scheme: kcpScheme()})
	if err != nil {
		return nil, fmt.Errorf("client for workspace %s: %w", provider, err)
	}
	slice := &apisv1alpha1.APIExportEndpointSlice{}
	err = Poll(ctx, kcpWaitTimeout, "endpoints of APIExportEndpointSlice "+endpointSliceName+" in "+provider.String(), func(ctx context.Context) error {
		if err := c.Get(ctx, types.NamespacedName{Name: endpointSliceName}, slice); err != nil {
			return err
		}
		if len(slice.Status.APIExportEndpoints) == 0 {
			return fmt.Errorf("no endpoints (conditions %v)", slice.Status.Conditions)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	urls := make([]string, 0, len(slice.Status.APIExportEndpoints))
	for _, e := range slice.Status.APIExportEndpoints {
		urls = append(urls, e.URL)
	}
	return urls, nil
}

// ServiceAccountToken mints a token of the ServiceAccount ns/name with the admin
// config cfg, retrying while the account does not exist yet (it may come from a
// manifest just applied).
func ServiceAccountToken(ctx context.Context, cfg *rest.Config, ns, name string, ttl time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("clientset: %w", err)
	}
	var token string
	err = Poll(ctx, time.Minute, "token of "+ns+"/"+name, func(ctx context.Context) error {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		token = tr.Status.Token
		return nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// ServiceAccountKubeconfig is ServiceAccountToken as a kubeconfig for the server (and
// workspace) of cfg: what a platform team hands a component.
func ServiceAccountKubeconfig(ctx context.Context, cfg *rest.Config, ns, name string, ttl time.Duration) ([]byte, error) {
	token, err := ServiceAccountToken(ctx, cfg, ns, name, ttl)
	if err != nil {
		return nil, err
	}
	return kubeconfig.Render(name, kubeconfig.Server{URL: cfg.Host, CAData: cfg.CAData}, token)
}
