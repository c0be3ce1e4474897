// Package workload orders workload clusters for tenants: a ClusterRequest with purpose
// `workload` and an AccessRequest with the permissions the provider declared, in the
// tenant's platform namespace, through openmcp-operator's clusteraccess library.
//
// The platform decides which cluster is granted; workload clusters are shared, so
// several tenants may get access to the same one. The engine waits until the access is
// granted at its current generation before calling the provider, and releases it after
// the provider's Delete.
package workload
