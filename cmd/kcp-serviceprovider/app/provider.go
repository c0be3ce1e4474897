package app

import (
	"context"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/config/crd"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
)

// This file is everything the commands know about the provider they run. A provider
// author copying the binary replaces it.

// DefaultProviderName is --provider-name's default.
const DefaultProviderName = echo.DefaultName

// exportName is the provider's APIExport in its kcp workspace.
const exportName = echo.ExportName

// serviceGVK is the Service API kind init registers at the ServiceProvider.
var serviceGVK = v1alpha1.GroupVersion.WithKind("Echo")

// serviceResource is the Service API's resource (plural) on the onboarding cluster.
var serviceResource = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "echoes"}

// providerCRDs are the CRDs init installs, each on the cluster its
// openmcp.cloud/cluster label names.
func providerCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) { return crd.All() }

// serviceCRD is the Service API's CRD, the source of the kcp schema.
func serviceCRD() (*apiextensionsv1.CustomResourceDefinition, error) { return crd.Echo() }

// runner is what run starts: the provider declared to the runtime.
type runner interface {
	Start(ctx context.Context, opts builder.Options) error
}

func newRunner(name string) (runner, error) { return echo.NewRuntime(name) }

// onboardingRunPermissions are what run needs on the onboarding cluster: watch the
// Service objects, keep the finalizer and the operation annotation, write status, and
// record events.
func onboardingRunPermissions() []clustersv1alpha1.PermissionsRequest {
	return []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{serviceResource.Group}, Resources: []string{serviceResource.Resource}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{serviceResource.Group}, Resources: []string{serviceResource.Resource + "/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}}
}

// onboardingInitPermissions are what init needs on the onboarding cluster: install
// and update the Service API's CRD.
func onboardingInitPermissions() []clustersv1alpha1.PermissionsRequest {
	return []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	}}}
}
