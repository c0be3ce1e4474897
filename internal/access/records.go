package access

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Record keeps value in the annotation of the tenant's AccessRequest, patching it only
// when it differs, so a tenant whose value does not change costs no writes. Before the
// AccessRequest exists the value is kept in memory and written with the request when
// this Requester creates it (routeAccessRequest): a tenant's first object then costs no
// patch of its own. While the request is being deleted there is nothing to keep it with
// and Record does nothing. The engine keeps its record of the object it hands the
// provider this way (engine.RecordAnnotation): it goes when the request goes.
func (r *Requester) Record(ctx context.Context, key Key, annotation, value string) error {
	ar, err := r.accessRequest(libContext(ctx), key)
	if err != nil {
		return fmt.Errorf("reading AccessRequest: %w", err)
	}
	if ar == nil {
		r.mu.Lock()
		if r.records[tenantKey(key)] == nil {
			r.records[tenantKey(key)] = map[string]string{}
		}
		r.records[tenantKey(key)][annotation] = value
		r.mu.Unlock()
		return nil
	}
	// The request exists: what was kept for its create has served (or the library
	// created it without), and from here on the request holds the value.
	r.mu.Lock()
	delete(r.records, tenantKey(key))
	r.mu.Unlock()
	if !ar.DeletionTimestamp.IsZero() || ar.Annotations[annotation] == value {
		return nil
	}
	base := ar.DeepCopy()
	if ar.Annotations == nil {
		ar.Annotations = map[string]string{}
	}
	ar.Annotations[annotation] = value
	if err := r.platform.Patch(ctx, ar, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("annotating AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	return nil
}

// recordsOf returns a copy of what Record keeps for the tenant's next AccessRequest.
func (r *Requester) recordsOf(key Key) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.records[tenantKey(key)])
}
