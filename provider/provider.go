package provider

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// Object is a Service API object: what a tenant creates to request the service.
type Object interface {
	client.Object
	// GetServiceStatus returns the object's status block, which the runtime writes.
	GetServiceStatus() *v1alpha1.ServiceStatus
}

// Reconciler is all a provider writes.
type Reconciler[T Object] interface {
	// CreateOrUpdate installs or updates the service for obj. It is called again when
	// obj, the ProviderConfig or the tenant's credentials change, so it must be
	// idempotent. It may record what it installed in obj's status Resources, add
	// conditions of its own, fill status fields of its own type and set labels on obj;
	// the runtime writes the labels first, then the status, its own with the
	// provider's in one write (so a Ready object already carries the labels). An
	// error is retried with backoff, unless it is Terminal. A panic is recovered: the
	// object shows Ready=False with reason ProviderPanic and the runtime retries with
	// backoff.
	CreateOrUpdate(ctx context.Context, obj T) (Result, error)
	// Delete removes what CreateOrUpdate installed. The runtime removes the tenant's
	// cluster access and the finalizer after Delete reports done, and does not call it
	// again while it releases that access (a replica that takes the object over, or a
	// restart, calls it once more: it must be idempotent).
	//
	// The orphan sweep calls Delete too, for a tenant whose object vanished without the
	// deletion sequence (its finalizer removed by hand, its kcp workspace force-removed):
	// obj is then the object as the runtime last recorded it (metadata and spec, as it
	// was last handed to CreateOrUpdate or, for a tenant whose access was never granted,
	// as it was when its workload access was ordered: Delete may find nothing to
	// delete; the status is empty), marked as being deleted, and the tenant's access is revoked
	// only after Delete reports done; an error or InProgress is retried at the next
	// sweep. In that call cluster.MCPFromCtx is nil (the end-user cluster may be gone,
	// and no access is ordered for a tenant without object); cluster.WorkloadFromCtx is
	// there while the platform still grants it. So Delete must cope with a nil end-user
	// cluster, and with a nil workload cluster (never granted, or already revoked):
	// cluster.DeletionFromCtx says which, per cluster (Reachable, NotGranted,
	// NotDeclared, Gone), and whether the call is the orphan sweep's.
	Delete(ctx context.Context, obj T) (Result, error)
}

// Result is what a provider reports besides an error.
type Result struct {
	// InProgress says the work is not finished (an install still rolling out, a delete
	// still waiting for children). The object stays Progressing (or keeps its finalizer
	// when deleting) and the runtime calls again after RequeueAfter.
	InProgress bool
	// Message explains InProgress to the tenant; it becomes the Ready condition's message.
	Message string
	// Reason, with InProgress, is the Ready condition's reason instead of Progressing
	// (or Deleting): the provider's word for what it waits for, such as
	// UserResourcesExist for a deletion the tenant's own objects hold up (what
	// opencontrolplane-runtime's StatusTerminatingWithReason wrote). It must be a
	// condition reason (CamelCase, letters first); anything else is ignored.
	Reason string
	// RequeueAfter asks to be called again after this duration. Zero means the
	// ProviderConfig's poll interval (or a short default while InProgress).
	RequeueAfter time.Duration
}

// Terminal marks err as bad input that retrying cannot fix (a version the platform does
// not offer, a name already taken elsewhere): the object shows Ready=False with reason
// ProviderRejected and err's message, and the runtime calls the provider again only
// when the object or the ProviderConfig changes, not with backoff. It is
// controller-runtime's reconcile.TerminalError, so errors.Is(err,
// reconcile.TerminalError(nil)) tells it apart.
func Terminal(err error) error { return reconcile.TerminalError(err) }

// Done is the Result of finished work.
func Done() Result { return Result{} }

// Pending is the Result of unfinished work, with a message for the tenant.
func Pending(message string, after time.Duration) Result {
	return Result{InProgress: true, Message: message, RequeueAfter: after}
}

// ProviderConfig is the provider's configuration object: cluster-scoped, on the
// platform cluster, named after the provider.
type ProviderConfig interface {
	client.Object
}

// Validator is implemented by ProviderConfigs that check themselves beyond their CRD
// schema. An error shows as Ready=False (ProviderConfigInvalid) on every Service object.
type Validator interface {
	Validate() error
}

// PollIntervaler is implemented by ProviderConfigs with a `spec.pollInterval`: how often
// a Ready object is reconciled again to catch drift.
type PollIntervaler interface {
	PollInterval() time.Duration
}

// KCPConfigurer is implemented by ProviderConfigs that embed the runtime's `spec.kcp`
// section. A nil result means kcp mode is off.
type KCPConfigurer interface {
	KCPConfig() *v1alpha1.KCP
}

// ProviderConfigStatuser is implemented by ProviderConfigs that embed the runtime's
// v1alpha1.ProviderConfigStatus (with the status subresource): the runtime reports kcp
// mode's state there. Without it the state shows only in events and the log.
type ProviderConfigStatuser interface {
	GetProviderConfigStatus() *v1alpha1.ProviderConfigStatus
}
