package harness

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	kcpcorev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev2alpha1 "github.com/openmcp-project/openmcp-operator/api/core/v2alpha1"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
)

// Scheme returns a new scheme with every type the harness and its callers read from
// the servers: Kubernetes built-ins and CRDs, kcp's apis (APIExport, APIBinding,
// APIResourceSchema, APIExportEndpointSlice), tenancy (Workspace) and core
// (LogicalCluster) groups, and openMCP's clusters, provider and core APIs. Each call
// returns a fresh scheme, so a test may add its own types to it.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		apisv1alpha1.AddToScheme,
		apisv1alpha2.AddToScheme,
		kcpcorev1alpha1.AddToScheme,
		tenancyv1alpha1.AddToScheme,
		clustersv1alpha1.AddToScheme,
		corev2alpha1.AddToScheme,
		providerv1alpha1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}
