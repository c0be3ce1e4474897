package main

import (
	"context"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// noop is the provider both runtimes serve: it does nothing, so every request
// measured is the runtime's own.
type noop struct{}

func (noop) CreateOrUpdate(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Done(), nil
}
func (noop) Delete(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Done(), nil
}

// The no-op provider still declares what a typical provider needs: a workload
// cluster (kcp mode requires one) and read access to its objects on the end-user
// cluster, so that both runtimes order the same cluster access.
var (
	wlRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}
	// In kcp mode the end-user cluster is the tenant workspace.
	kcpMCPPerms   = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{{APIGroups: []string{widget.GroupVersion.Group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}}}}}}
	stdMCPPerms   = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: wlRules}}}
	workloadPerms = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: wlRules}}}
)
