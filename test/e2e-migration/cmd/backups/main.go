// Command backups is the Backup provider on this runtime: the same business logic as
// cmd/backups-ocr in CreateOrUpdate and Delete, and the migration declaration that
// names what cmd/backups-ocr chose, so that swapping the ServiceProvider's image from
// one to the other (and back) keeps every tenant.
package main

import (
	"context"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/migration"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/e2e-migration/backups"
)

// Migration is what cmd/backups-ocr's main chose, read from it as a provider author
// reads their old main.go.
var Migration = &migration.FromOCR{
	ControllerName:     "Backups",
	OnboardingRequests: []string{"backups.backups.e2e.openmcp.cloud--onboarding-init", "backups.backups.e2e.openmcp.cloud--onboarding-run"},
	Reasons:            migration.OCRReasons,
	// With more than one replica the operator passes --leader-elect=true, and the old
	// binary elected on this lease on the onboarding cluster.
	Lease: &migration.Lease{Cluster: migration.LeaseOnOnboarding, Namespace: "openmcp-system", Name: "services.open-control-plane.io.backups"},
	Flags: append(slices.Clone(migration.OCRFlags), migration.Flag{Name: "leader-election-id"}),
}

func main() {
	command.Main(command.Provider{Name: "backups", CRDs: backups.CRDs, NewRuntime: newRuntime, Migration: Migration})
}

func newRuntime(name string, _ apiexport.Provisionable) (command.Runner, error) {
	s := runtime.NewScheme()
	if err := backups.AddToScheme(s); err != nil {
		return nil, err
	}
	return builder.ServiceProvider[*backups.Backup](name, s).
		For(&backups.Backup{}).WithProviderConfig(&backups.BackupConfig{}).
		// The same rights the old binary asked for, so the adopted requests keep theirs.
		MCPPermissions(cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}}}).
		WorkloadCluster(cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}}}}}}).
		Complete(installer{})
}

// installer is the provider's business logic on this runtime.
type installer struct{}

func (installer) CreateOrUpdate(ctx context.Context, b *backups.Backup) (provider.Result, error) {
	pc := cluster.ProviderConfigFromCtx[*backups.BackupConfig](ctx)
	if err := backups.Install(ctx, cluster.WorkloadFromCtx(ctx), cluster.IdentityFromCtx(ctx).TenantNamespace(), b, pc.Spec.Bucket); err != nil {
		return provider.Result{}, err
	}
	return provider.Done(), nil
}

func (installer) Delete(ctx context.Context, b *backups.Backup) (provider.Result, error) {
	wl := cluster.WorkloadFromCtx(ctx)
	if wl == nil {
		return provider.Done(), nil
	}
	return provider.Done(), backups.Uninstall(ctx, wl, cluster.IdentityFromCtx(ctx).TenantNamespace())
}
