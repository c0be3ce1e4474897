package cluster

import (
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
)

// Permissions are what a provider asks for on one cluster: the workload cluster
// (builder.Builder.WorkloadCluster), the end-user cluster for itself and for its
// worker (MCPPermissions, WorkerMCPPermissions), or an additional cluster. The runtime
// grants them through the platform's AccessRequests in standard mode and on workload
// clusters, and as the ClusterRoles and Roles of the workspace's ServiceAccounts in
// kcp mode.
type Permissions struct {
	// Rules are granted through Roles/ClusterRoles created for the access.
	Rules []clustersv1alpha1.PermissionsRequest
	// RoleRefs bind existing (Cluster)Roles.
	RoleRefs []commonapi.RoleRef
}
