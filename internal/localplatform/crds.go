package localplatform

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/api/crds"
)

// NewScheme returns a scheme with the Kubernetes built-in types and openMCP's
// clusters.openmcp.cloud/v1alpha1 types, what a manager running a Platform needs.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Both only fail on programming errors (conflicting registrations).
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("adding client-go types to scheme: %v", err))
	}
	if err := clustersv1alpha1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("adding openMCP cluster types to scheme: %v", err))
	}
	return s
}

// CRDs returns the openMCP CRDs that belong on a platform cluster (those labelled
// openmcp.cloud/cluster=platform in openmcp-operator's api module).
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.CRDs()
	if err != nil {
		return nil, fmt.Errorf("localplatform: reading openMCP CRDs: %w", err)
	}
	var platform []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if crd.Labels["openmcp.cloud/cluster"] == "platform" {
			platform = append(platform, crd)
		}
	}
	return platform, nil
}

// InstallCRDs installs (or updates) CRDs() on the cluster behind cfg and waits until
// they are served.
func InstallCRDs(cfg *rest.Config) error {
	platformCRDs, err := CRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: platformCRDs}); err != nil {
		return fmt.Errorf("localplatform: installing openMCP CRDs: %w", err)
	}
	return nil
}
