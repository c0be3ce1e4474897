package command

import (
	"context"
	"flag"
	"fmt"
	"io"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
)

// RollbackCleanupCommand removes what this runtime leaves after a ServiceProvider went
// back to the provider's binary on opencontrolplane-runtime: the list is
// docs/migrating-from-opencontrolplane-runtime.md's, and nothing else is touched.
func RollbackCleanupCommand(p Provider) *Command {
	o := &commonOptions{provider: p}
	return &Command{
		Name:  "rollback-cleanup",
		Short: "after swapping back to the provider's previous binary, remove what this runtime left",
		Long: `Run once the ServiceProvider runs the provider's previous binary (on
opencontrolplane-runtime) again, with a kubeconfig of the platform cluster. Removes what
only this runtime created, and nothing the previous binary uses:
  - its onboarding requests: the ClusterRequests and AccessRequests <provider>--onboarding-run
    and <provider>--onboarding-init in --namespace (the previous binary has its own);
  - its standard-mode leader Lease <provider>-standard in --namespace, if it ran replicas;
  - the annotation services.open-control-plane.io/reconciled-object it keeps on the tenants'
    AccessRequests (the requests themselves are the previous binary's and stay).
Prints each removal. Requests of tenants and the Service objects are never deleted.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, io.Writer) error {
			o.addFlags(fs, p.Name)
			return o.rollbackCleanup
		},
	}
}

func (o *commonOptions) rollbackCleanup(ctx context.Context, out io.Writer) error {
	if _, _, err := o.start("rollback-cleanup"); err != nil {
		return err
	}
	if o.namespace == "" {
		return fmt.Errorf("the provider's namespace is unknown: pass --namespace")
	}
	cfg, _, err := o.platformConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clustersv1alpha1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("platform client: %w", err)
	}
	for _, local := range []string{runOnboardingName, initOnboardingName} {
		if err := releaseAccess(ctx, c, o.providerName, o.namespace, local, out); err != nil {
			return err
		}
	}
	if err := deleteIfPresent(ctx, c, &coordinationv1.Lease{}, o.namespace, o.providerName+"-standard", out); err != nil {
		return err
	}
	// The tenants' requests carry the managed-by label of the previous binary's
	// controller name, which the migration declaration kept.
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := c.List(ctx, ars, client.MatchingLabels{openmcpconst.ManagedByLabel: o.provider.Migration.RequestController(o.providerName)}); err != nil {
		return fmt.Errorf("listing the tenants' AccessRequests: %w", err)
	}
	for i := range ars.Items {
		ar := &ars.Items[i]
		if _, ok := ar.Annotations[engine.RecordAnnotation]; !ok {
			continue
		}
		base := ar.DeepCopy()
		delete(ar.Annotations, engine.RecordAnnotation)
		if err := c.Patch(ctx, ar, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing annotation %s from AccessRequest %s/%s: %w", engine.RecordAnnotation, ar.Namespace, ar.Name, err)
		}
		fmt.Fprintf(out, "removed annotation %s from AccessRequest %s/%s\n", engine.RecordAnnotation, ar.Namespace, ar.Name)
	}
	return nil
}

// deleteIfPresent deletes namespace/name of obj's kind and says so; absent is fine.
func deleteIfPresent(ctx context.Context, c client.Client, obj client.Object, namespace, name string, out io.Writer) error {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	if err := c.Delete(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting %T %s/%s: %w", obj, namespace, name, err)
	}
	fmt.Fprintf(out, "deleted %T %s/%s\n", obj, namespace, name)
	return nil
}
