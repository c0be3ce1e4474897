package echo

import (
	"embed"
	"fmt"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
)

const (
	// DefaultName is the provider's name when the platform does not pass another:
	// the ServiceProvider's and ProviderConfig's name, the managed-by label of every
	// request, the prefix of leader election IDs.
	DefaultName = "echo"
	// ExportName is the APIExport tenants bind to in the provider workspace. Named after
	// the API group, so exports of several providers never collide.
	ExportName = "echo.services.open-control-plane.io"
)

// WorkloadPermissions are what CreateOrUpdate and Delete do on the workload cluster:
// the tenant namespace, the worker's kubeconfig and pull Secrets and its Deployment
// (applied server-side, hence patch).
func WorkloadPermissions() cluster.Permissions {
	return cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
	}}}}
}

// MCPPermissions are the provider's own rights on the end-user cluster: writing the
// one ConfigMap it publishes to the tenant (InfoConfigMap), in its namespace only
// (a Role there, in both modes). create cannot be narrowed to a name; the others are.
// The worker does not get them (WorkerMCPPermissions).
func MCPPermissions() cluster.Permissions {
	return cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Namespace: InfoNamespace, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update", "delete"}, ResourceNames: []string{InfoConfigMap}},
	}}}}
}

// WorkerMCPPermissions are what the worker's kubeconfig may do on the end-user
// cluster: read Echo objects. In kcp mode that is the tenant's own object in its
// workspace and nothing else; on a ControlPlane the resource is not served and the
// grant is inert. A real service lists here what its worker manages for the tenant.
func WorkerMCPPermissions() cluster.Permissions {
	return cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"echoes"}, Verbs: []string{"get", "list", "watch"}},
	}}}}
}

// NewScheme returns a scheme with the Kubernetes types and the echo API.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the echo scheme: %w", err)
		}
	}
	return s, nil
}

// crds are the CRDs `make generate` writes from api/v1alpha1: Echo (onboarding
// cluster, and the source of the kcp schema) and ProviderConfig (platform cluster).
//
//go:embed config/crd/*.yaml
var crds embed.FS

// Description is the echo provider as the shared commands (init, run, local,
// kcp-manifests) know it; cmd/kcp-serviceprovider hands it to command.Main.
func Description() command.Provider {
	return command.Provider{
		Name:       DefaultName,
		CRDs:       crds,
		ExportName: ExportName,
		NewRuntime: func(name string, kcp apiexport.Provisionable) (command.Runner, error) {
			return NewRuntime(name, kcp)
		},
		Local: &command.Local{
			RuntimeRBAC:    "examples/echo/config/kcp/runtime-rbac.yaml",
			ProviderConfig: "examples/echo/config/samples/echo_v1alpha1_providerconfig_kcp.yaml",
			Quickstart:     Quickstart,
		},
	}
}

// NewRuntime declares the echo provider to the runtime under the given name. It serves
// standard mode whenever the runtime gets an onboarding cluster, and kcp mode whenever
// the ProviderConfig has spec.kcp; kcp is the surface run derives from the same
// generated CRD init installs on the onboarding cluster.
func NewRuntime(name string, kcp apiexport.Provisionable) (*builder.Runtime[*v1alpha1.Echo], error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	return builder.ServiceProvider[*v1alpha1.Echo](name, scheme).
		For(&v1alpha1.Echo{}).
		WithProviderConfig(&v1alpha1.ProviderConfig{}).
		WorkloadCluster(WorkloadPermissions()).
		MCPPermissions(MCPPermissions()).
		WorkerMCPPermissions(WorkerMCPPermissions()).
		KCP(kcp).
		Complete(Provider{})
}
