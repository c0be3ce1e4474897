package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// RecordAnnotation, on one of a tenant's AccessRequests, holds the last Service object
// (metadata and spec) the engine handed the provider for that tenant (a record). A tenant whose object
// vanishes without the deletion sequence (its finalizer removed by hand, its kcp
// workspace force-removed) leaves its requests behind; the orphan sweep finds them and,
// with this record, calls the provider's Delete for the tenant before it revokes its
// access (DeleteOrphan). Without the record the provider's objects on the workload
// cluster would stay for good. Kept on the request, it goes when the request goes.
const RecordAnnotation = "services.open-control-plane.io/reconciled-object"

// maxRecord bounds a record. Annotations of an object may hold 256 KiB in all; a
// Service object beyond this is not recorded (and not deleted by the sweep).
const maxRecord = 128 << 10

// Recorder keeps a value with a tenant's platform-side request:
// access.Requester.Record.
type Recorder interface {
	Record(ctx context.Context, key access.Key, annotation, value string) error
}

// record is what RecordAnnotation holds.
type record struct {
	// Cluster is the multicluster name of the cluster the object was in (the
	// onboarding cluster, the logical cluster of a workspace).
	Cluster string `json:"cluster"`
	// Object is the Service object's metadata and spec, as recordOf trims them.
	Object json.RawMessage `json:"object"`
}

// recordKeeper is where the engine keeps its record: on the workload AccessRequest, the
// access the provider's Delete needs most, or, for a provider without workload
// cluster, on the end-user AccessRequest if the mode has one (standard mode). nil: the
// tenant has no request to keep it with (kcp mode without workload cluster), and then
// the sweep has nothing to find either.
func (e *Engine[T]) recordKeeper() Recorder {
	if r, ok := e.opts.Workload.(Recorder); ok {
		return r
	}
	if r, ok := e.opts.Tenancy.(Recorder); ok {
		return r
	}
	return nil
}

// remember records the object the provider is about to be handed, before it is, so
// that whatever the provider creates has a record. It writes only when the record
// changed: a steady object costs a cached read of its request and nothing else, and a
// new tenant's record is written with its workload AccessRequest (access.Requester
// keeps it until then). The sweep may so find a record of a tenant whose access was
// never granted and call the provider's Delete for an object it never saw: Delete
// tolerates nothing to delete, as it must after any interrupted CreateOrUpdate.
func (e *Engine[T]) remember(ctx context.Context, t Target[T]) error {
	rec := e.recordKeeper()
	if rec == nil {
		return nil
	}
	value, err := recordOf(t.ClusterName, t.Object)
	if err != nil {
		log.FromContext(ctx).Info("Not recording the object for the orphan sweep", "reason", err.Error())
		return nil
	}
	if err := rec.Record(ctx, t.Key, RecordAnnotation, value); err != nil {
		return fmt.Errorf("recording the object for the orphan sweep: %w", err)
	}
	return nil
}

// recordOf encodes the object's metadata and spec, without what changes on every write
// or means nothing to a Delete (resourceVersion, managed fields, the last-applied
// configuration). The status is left out: it is the runtime's and the provider's
// report, not what the tenant asked for, and with it a tenant would cost a record write
// whenever its status changed (at least once more per object, when the provider first
// lists its resources). An unchanged object gives the same record (encoding/json
// writes struct fields in order and map keys sorted).
func recordOf(clusterName string, obj provider.Object) (string, error) {
	o, ok := obj.DeepCopyObject().(provider.Object)
	if !ok {
		return "", fmt.Errorf("%T is not a Service object", obj)
	}
	o.SetResourceVersion("")
	o.SetManagedFields(nil)
	if anns := o.GetAnnotations(); anns != nil {
		delete(anns, "kubectl.kubernetes.io/last-applied-configuration")
		o.SetAnnotations(anns)
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return "", fmt.Errorf("encoding: %w", err)
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return "", fmt.Errorf("encoding: %w", err)
	}
	delete(fields, "status")
	if raw, err = json.Marshal(fields); err != nil {
		return "", fmt.Errorf("encoding: %w", err)
	}
	out, err := json.Marshal(record{Cluster: clusterName, Object: raw})
	if err != nil {
		return "", fmt.Errorf("encoding: %w", err)
	}
	if len(out) > maxRecord {
		return "", fmt.Errorf("the object takes %d bytes, more than %d", len(out), maxRecord)
	}
	return string(out), nil
}

// DeleteOrphan calls the provider's Delete for a tenant whose Service object is gone
// without the deletion sequence; the orphan sweep calls it with the tenant's
// AccessRequests before it revokes them. done is true once Delete reported done, or
// when there is nothing to call it with (no usable record: a tenant recorded by an
// older runtime, or one whose object went before its workload access was ordered); false with or without an
// error means "call again on the next sweep", and the sweep keeps the requests until
// then.
//
// The provider gets the recorded object (metadata and spec, an empty status), marked
// as being deleted, and a context like
// the deletion path's, except that the end-user access is nil: the end-user cluster
// may be gone (a deleted workspace), and the runtime does not order or re-create
// access for a tenant without object. The workload access is there while the platform
// still grants it.
func (e *Engine[T]) DeleteOrphan(ctx context.Context, ars []*clustersv1alpha1.AccessRequest) (bool, error) {
	logger := log.FromContext(ctx)
	rec, from, ok := recordIn(ars)
	if !ok {
		logger.Info("No record of the tenant's last object: its access is revoked, the provider's Delete is not called", "requests", requestNames(ars))
		return true, nil
	}
	obj := e.opts.NewObject()
	if err := json.Unmarshal(rec.Object, obj); err != nil {
		logger.Info("Unreadable record of the tenant's last object: its access is revoked, the provider's Delete is not called", "accessRequest", from, "error", err.Error())
		return true, nil
	}
	cl, _ := e.clusters.Get(rec.Cluster) // nil when no longer engaged: only Target's names are used
	t := e.opts.Tenancy.Target(rec.Cluster, cl, obj)
	if ns := t.Identity.TenantNamespace(); !strings.HasPrefix(from, ns+"/") {
		// Each tenant's requests live in its own platform namespace; a record that
		// names another tenant was not written by the engine for this one.
		logger.Info("Record names another tenant: the provider's Delete is not called", "accessRequest", from, "identity", t.Identity.String())
		return true, nil
	}
	logger = logger.WithValues("identity", t.Identity.String(), "object", obj.GetNamespace()+"/"+obj.GetName())
	ctx = log.IntoContext(ctx, logger)

	pc, err := e.opts.ProviderConfig.Load(ctx)
	if err != nil {
		// As in the deletion path: without its configuration the provider cannot tell
		// what to remove.
		return false, err
	}
	tenant := e.newTenant(t.Identity, pc)
	if e.opts.Workload != nil {
		wl, err := e.opts.Workload.Lookup(ctx, t.Key)
		if err != nil {
			return false, fmt.Errorf("workload access: %w", err)
		}
		tenant.Workload = wl
	}
	now := metav1.NewTime(time.Now())
	obj.SetDeletionTimestamp(&now)
	tenant.Deletion = &cluster.Deletion{Orphaned: true, EndUser: cluster.Gone, Workload: reachOf(tenant.Workload != nil, e.opts.Workload != nil)}
	res, err := e.callProvider(ctx, "Delete", func() (provider.Result, error) {
		return e.opts.Reconciler.Delete(cluster.WithTenant(ctx, tenant), obj)
	})
	if err != nil {
		return false, fmt.Errorf("provider Delete: %w", err)
	}
	if res.InProgress {
		logger.Info("Provider Delete of a gone tenant in progress", "message", res.Message)
		return false, nil
	}
	logger.Info("Provider Delete of a gone tenant done", "workloadAccess", tenant.Workload != nil)
	if err := e.secrets.remove(ctx, t.Identity.TenantNamespace()); err != nil {
		return false, err
	}
	return true, nil
}

// recordIn returns the record on the tenant's AccessRequests (the first by namespace
// and name that carries one) and the request it came from.
func recordIn(ars []*clustersv1alpha1.AccessRequest) (record, string, bool) {
	sorted := slices.Clone(ars)
	slices.SortFunc(sorted, func(a, b *clustersv1alpha1.AccessRequest) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, ar := range sorted {
		v := ar.Annotations[RecordAnnotation]
		if v == "" {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(v), &rec); err != nil || len(rec.Object) == 0 {
			continue
		}
		return rec, ar.Namespace + "/" + ar.Name, true
	}
	return record{}, "", false
}

func requestNames(ars []*clustersv1alpha1.AccessRequest) []string {
	var names []string
	for _, ar := range ars {
		names = append(names, ar.Namespace+"/"+ar.Name)
	}
	return names
}
