package widget

import (
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// The permissions below are the widget's, as a provider's main package would declare
// them to the builder (widgetbuilder.New does); they sit apart from
// provider.go so that the provider stays mode-free.

// WorkloadPermissions are what the widget's worker needs on the workload cluster.
var WorkloadPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "secrets"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
}}}}

// MCPPermissions are what the widget's worker needs on a ControlPlane's cluster
// (standard mode): reading ConfigMaps.
var MCPPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
}}}}

// KCPMCPPermissions are the same in kcp mode, where the end-user cluster is the
// tenant workspace: the worker may read its widgets there and nothing else.
var KCPMCPPermissions = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{GroupVersion.Group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}},
}}}}
