package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"strings"

	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// PanicError is a recovered panic of a provider method.
type PanicError struct {
	// Method is CreateOrUpdate or Delete.
	Method string
	// Value is what the provider panicked with.
	Value any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("provider %s panicked: %v", e.Method, e.Value)
}

// callProvider runs one provider method. A panic there must not skip the status write
// and the metrics of the reconcile (the tenant would see nothing) nor end the process
// (every other tenant would lose the service): it becomes a PanicError, logged with
// its stack and counted.
func (e *Engine[T]) callProvider(ctx context.Context, method string, fn func() (provider.Result, error)) (res provider.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.FromContext(ctx).Error(nil, "provider panicked; recovered", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			metrics.ProviderPanicsTotal.WithLabelValues(e.opts.Provider, string(e.opts.Tenancy.Mode()), method).Inc()
			res, err = provider.Result{}, &PanicError{Method: method, Value: r}
		}
	}()
	return fn()
}

// callWith calls a method of the provider on the reconciled object, with the tenant in
// ctx, after noting the labels the provider starts from.
func (e *Engine[T]) callWith(ctx context.Context, w *writer[T], tenant *cluster.Tenant, method string,
	fn func(context.Context, T) (provider.Result, error)) (provider.Result, error) {
	w.providerCalled()
	return e.callProvider(ctx, method, func() (provider.Result, error) {
		return fn(cluster.WithTenant(ctx, tenant), w.obj)
	})
}

// providerFailed records a provider error on the object's status and says what the
// reconcile returns: a terminal error is not retried (the object's or the
// ProviderConfig's next change brings it back), anything else is, with backoff.
func providerFailed(st *v1alpha1.ServiceStatus, gen int64, method string, err error, phase v1alpha1.Phase) (reconcile.Result, error) {
	reason := v1alpha1.ReasonProviderError
	var panicked *PanicError
	switch {
	case errors.As(err, &panicked):
		reason = v1alpha1.ReasonProviderPanic
	case errors.Is(err, reconcile.TerminalError(nil)):
		reason = v1alpha1.ReasonProviderRejected
	}
	// The tenant reads the provider's own words: controller-runtime's prefix of a
	// terminal error says nothing to them (the reason says it is final).
	setReady(st, gen, metav1.ConditionFalse, reason, strings.TrimPrefix(err.Error(), "terminal error: "), phase)
	return reconcile.Result{}, fmt.Errorf("provider %s: %w", method, err)
}

// newTenant is what every provider call is handed before the clusters are resolved.
func (e *Engine[T]) newTenant(id cluster.Identity, pc provider.ProviderConfig) *cluster.Tenant {
	t := &cluster.Tenant{Mode: e.opts.Tenancy.Mode(), Identity: id, ProviderConfig: pc,
		Platform: e.opts.PlatformReader, ProviderNamespace: e.opts.ProviderNamespace}
	if e.opts.PlatformWriter != nil {
		t.PlatformWriter = newTenantWriter(e.opts.PlatformWriter, id.TenantNamespace(), e.platformLabels(id), e.platformCache)
	}
	return t
}

// platformLabels are the labels of what the provider writes on the platform for the
// tenant id: the provider's managed-by label and the tenant's labels, with which the
// watches of Options.PlatformWatches select the objects and find their tenant.
func (e *Engine[T]) platformLabels(id cluster.Identity) map[string]string {
	l := map[string]string{openmcpconst.ManagedByLabel: e.opts.Provider}
	if e.opts.TenantLabels != nil {
		maps.Copy(l, e.opts.TenantLabels(id))
	}
	return l
}

// reachOf is what Delete is told about one cluster.
func reachOf(granted, declared bool) cluster.Reach {
	switch {
	case !declared:
		return cluster.NotDeclared
	case granted:
		return cluster.Reachable
	default:
		return cluster.NotGranted
	}
}
