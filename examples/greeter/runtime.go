package greeter

import (
	"embed"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter/api/v1alpha1"
)

// PlatformPermissions are what the provider writes in each tenant's platform namespace:
// the Flux objects that install the chart.
var PlatformPermissions = []rbacv1.PolicyRule{
	{APIGroups: []string{sourcev1.GroupVersion.Group}, Resources: []string{"ocirepositories"}, Verbs: []string{"get", "create", "update", "delete"}},
	{APIGroups: []string{helmv2.GroupVersion.Group}, Resources: []string{"helmreleases"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
}

// installRules are what Helm does on a cluster the chart is installed on, through
// Flux with the kubeconfig the runtime hands the provider: the target namespace, the
// chart's objects, and Helm's release records (Secrets). Helm applies server-side,
// hence patch, the target namespace included; the provider deletes the namespace
// after the uninstall (Delete). Helm's wait judges a Deployment by its ReplicaSets and
// pods too, which it lists and watches: without them it waits until its timeout.
var installRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
}

// MCPPermissions are what Helm does on the end-user cluster through Flux: the chart's
// API is a CRD there, and its objects.
var MCPPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: append([]rbacv1.PolicyRule{
	{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
}, installRules...)}}}

// workerPermissions: the controller serves Greetings in the tenant's workspace.
var workerPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{"greeter.example.open-control-plane.io"}, Resources: []string{"greetings"}, Verbs: []string{"get", "list", "watch"}},
}}}}

var workloadPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: installRules}}}

// NewScheme has the Kubernetes types, the greeter API and Flux's source and helm APIs.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, sourcev1.AddToScheme, helmv2.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// DefaultName is the provider's name when the platform passes none.
const DefaultName = "greeter"

//go:embed crd/*.yaml
var crds embed.FS

// Description is the greeter provider as the shared commands know it.
func Description() command.Provider {
	return command.Provider{
		Name: DefaultName,
		CRDs: crds,
		NewRuntime: func(name string, kcp apiexport.Provisionable) (command.Runner, error) {
			return NewRuntime(name, kcp)
		},
		Local: &command.Local{
			ProviderConfig: "examples/greeter/config/samples/greeterconfig_kcp.yaml",
			Quickstart:     Quickstart,
			Charts: []command.LocalChart{{Dir: "examples/greeter/chart/greeter", Versions: []string{"0.1.0", "0.2.0"},
				URLField: []string{"spec", "chartURL"}}},
		},
	}
}

// NewRuntime declares the greeter provider to the runtime.
func NewRuntime(name string, kcp apiexport.Provisionable) (*builder.Runtime[*v1alpha1.Greeter], error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	return builder.ServiceProvider[*v1alpha1.Greeter](name, s).
		For(&v1alpha1.Greeter{}).WithProviderConfig(&v1alpha1.GreeterConfig{}).
		WorkloadCluster(workloadPermissions).
		MCPPermissions(MCPPermissions).WorkerMCPPermissions(workerPermissions).
		PlatformPermissions(PlatformPermissions...).
		// Flux's changes to what the provider wrote call it again: it waits for them
		// instead of polling (installed, Delete).
		WatchesPlatform(&sourcev1.OCIRepository{}, &helmv2.HelmRelease{}).
		KCP(kcp).
		Complete(Provider{})
}
