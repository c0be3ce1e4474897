package access

import (
	"context"
	"fmt"
	"maps"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// adopt gives the tenant's existing requests the labels this Requester adds beyond
// the library's (Options.Labels), when they are the library's requests under the same
// controller and registration: what a binary on opencontrolplane-runtime ordered
// without them. The library refuses a request that lacks any label it expects ("not
// managed by this controller"), so without this every tenant of a migrated provider
// would fail. A request under another controller or purpose is left alone, and the
// library's refusal reaches the tenant as before. The reads are the informer cache's;
// a request already labelled costs nothing.
func (r *Requester) adopt(ctx context.Context, key Key, reg advanced.ParameterizedClusterRegistration, namespace string) error {
	want := r.managedLabels(key, reg)
	name := r.requestName(key, reg)
	objs := []client.Object{&clustersv1alpha1.AccessRequest{}}
	if r.opts.Registration.ClusterRequestAvailable() {
		objs = append(objs, &clustersv1alpha1.ClusterRequest{})
	}
	for _, obj := range objs {
		if err := r.platform.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading %T %s/%s to adopt it: %w", obj, namespace, name, err)
		}
		have := obj.GetLabels()
		if have[openmcpconst.ManagedByLabel] != want[openmcpconst.ManagedByLabel] ||
			have[openmcpconst.ManagedPurposeLabel] != want[openmcpconst.ManagedPurposeLabel] {
			continue
		}
		missing := map[string]string{}
		for k, v := range want {
			if _, ok := have[k]; !ok {
				missing[k] = v
			}
		}
		if len(missing) == 0 {
			continue
		}
		base := obj.DeepCopyObject().(client.Object)
		labels := maps.Clone(have)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, missing)
		obj.SetLabels(labels)
		if err := r.platform.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("adopting %T %s/%s (adding labels %v): %w", obj, namespace, name, missing, err)
		}
	}
	return nil
}
