package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// writer writes what one reconcile changed on the object, once, at its end: the labels
// the provider set in one patch, then the whole status subresource in another. Labels
// go first so that whoever sees the status the provider reported (Ready=True, say)
// also sees the labels it set along with it.
//
// The status is the object's as the provider left it, with the runtime's fields
// (Ready, phase, observed generation, identity) set by the engine: a provider that
// embeds v1alpha1.ServiceStatus in a status type of its own owns the other fields,
// and they go out in the same write as the runtime's conditions. The patch is a merge
// patch from the status as the server holds it (as read, or as this engine last wrote
// it) to the status now, so it names only the fields that changed.
type writer[T provider.Object] struct {
	client client.Client
	obj    T
	// read is the object as the reconcile read it: the status the server holds
	// unless the cache lags behind the engine's own last write (see finish).
	read T
	// identity is the tenant identity the status names.
	identity string
	// written remembers what was written; readVersion is the resourceVersion the
	// reconcile read the object at.
	written     *writtenStatuses
	readVersion string
	// labels are the object's labels just before the provider was called; nil when
	// it was not.
	labels map[string]string
	called bool
	// reason, when set, is the Ready reason written for the engine's (Options.WrittenReason).
	reason func(string) string
}

// providerCalled notes the labels the provider is handed, so that finish writes the
// ones it changes.
func (w *writer[T]) providerCalled() {
	w.labels, w.called = maps.Clone(w.obj.GetLabels()), true
}

func (w *writer[T]) finish(ctx context.Context, res reconcile.Result, err error) (reconcile.Result, error) {
	if errors.Is(err, errGone) {
		return reconcile.Result{}, nil
	}
	lerr := w.writeLabels(ctx)
	// The status goes out even when the labels did not: its conditions say what the
	// provider reported, and the failed label write comes back with the retry.
	if werr := w.writeStatus(ctx); werr != nil {
		return reconcile.Result{}, errors.Join(err, lerr, werr)
	}
	if lerr != nil {
		return reconcile.Result{}, errors.Join(err, lerr)
	}
	return res, err
}

// writeLabels patches the labels the provider changed, if any. The patch answers on a
// copy: the server's answer holds the status as stored, and the object in memory must
// keep the status the provider left for writeStatus. Only the new resourceVersion is
// taken over, the version the status is then written over.
func (w *writer[T]) writeLabels(ctx context.Context) error {
	patch, err := w.labelPatch()
	if err != nil || patch == nil {
		return err
	}
	answer := w.obj.DeepCopyObject().(T)
	if err := w.client.Patch(ctx, answer, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the provider's labels: %w", err)
	}
	w.obj.SetResourceVersion(answer.GetResourceVersion())
	return nil
}

// writeStatus patches the status when it changed.
func (w *writer[T]) writeStatus(ctx context.Context) error {
	st := w.obj.GetServiceStatus()
	// Set here, not when the reconcile starts: a patch of the object on the way (the
	// finalizer) replaces the status in memory with the server's.
	st.Identity = w.identity
	defer w.writeReason()()
	bare, err := statusOf(w.obj, true)
	if err != nil {
		return err
	}
	// The cache may lag behind this engine's own last write: if this reconcile wrote
	// nothing else, the object is still the version read, and the server holds that
	// write, not the status read. Compare with it, and patch from it.
	var held map[string]any
	if last, ok := w.written.lastOver(w.obj.GetUID(), w.readVersion); ok && w.obj.GetResourceVersion() == w.readVersion {
		if equality.Semantic.DeepEqual(last.status, bare) {
			return nil
		}
		held = last.status
		retime(st, last.service, metav1.Now())
	} else {
		if held, err = statusOf(w.read, false); err != nil {
			return err
		}
		now, err := statusOf(w.obj, false)
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(held, now) {
			return nil
		}
	}
	base, err := withStatus(w.obj, held)
	if err != nil {
		return err
	}
	over := w.obj.GetResourceVersion()
	if perr := w.client.Status().Patch(ctx, w.obj, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
		return fmt.Errorf("%w: %w", errWritingStatus, perr)
	}
	return w.written.record(w.obj, over)
}

// writeReason puts the written form of the Ready reason on the object for the status
// write and returns what puts the engine's own back (on the server's answer, too), so
// that what the engine observes after the write (events, metrics) is in its own terms.
func (w *writer[T]) writeReason() (restore func()) {
	if w.reason == nil {
		return func() {}
	}
	c := meta.FindStatusCondition(w.obj.GetServiceStatus().Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return func() {}
	}
	own, written := c.Reason, w.reason(c.Reason)
	c.Reason = written
	return func() {
		if c := meta.FindStatusCondition(w.obj.GetServiceStatus().Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == written {
			c.Reason = own
		}
	}
}

// labelPatch is a merge patch of the labels the provider added, changed or removed;
// nil when it changed none. It names only those keys, so labels the user set (or sets
// meanwhile) stay as they are.
func (w *writer[T]) labelPatch() ([]byte, error) {
	if !w.called {
		return nil, nil
	}
	now := w.obj.GetLabels()
	changed := map[string]any{}
	for k, v := range now {
		if old, ok := w.labels[k]; !ok || old != v {
			changed[k] = v
		}
	}
	for k := range w.labels {
		if _, ok := now[k]; !ok {
			changed[k] = nil
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	p, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": changed}})
	if err != nil {
		return nil, fmt.Errorf("the provider's labels: %w", err)
	}
	return p, nil
}

// statusOf is obj's whole status as the API server holds it; bare drops the
// transition times of the runtime's conditions (see withoutTransitionTimes). Only the
// status field is converted: the engine compares statuses once or twice a reconcile,
// and converting the whole object was a tenth of the runtime's allocations while
// objects converged. bare changes obj's conditions for the duration of the call, so
// obj must be the reconcile's own copy, never the cache's.
func statusOf(obj provider.Object, bare bool) (map[string]any, error) {
	if bare {
		conds := obj.GetServiceStatus().Conditions
		times := make([]metav1.Time, len(conds))
		for i := range conds {
			times[i], conds[i].LastTransitionTime = conds[i].LastTransitionTime, metav1.Time{}
		}
		defer func() {
			for i := range conds {
				conds[i].LastTransitionTime = times[i]
			}
		}()
	}
	field, found := statusField(obj)
	if !found {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		st, _ := u["status"].(map[string]any)
		return st, nil
	}
	if field == nil {
		return nil, nil
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(field)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return st, nil
}

// statusField returns a pointer to obj's status field (the one whose JSON name is
// "status"), or nil when it is a nil pointer; found is false when obj has no such
// field, for the whole object's conversion to decide.
func statusField(obj provider.Object) (field any, found bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	v = v.Elem()
	for i := range v.NumField() {
		if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); name != "status" {
			continue
		}
		switch f := v.Field(i); {
		case f.Kind() == reflect.Struct:
			return f.Addr().Interface(), true
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			if f.IsNil() {
				return nil, true
			}
			return f.Interface(), true
		}
		return nil, false
	}
	return nil, false
}

// withStatus returns a copy of obj holding status, the base of a status patch.
func withStatus[T provider.Object](obj T, status map[string]any) (T, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return obj, fmt.Errorf("status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	if status == nil {
		delete(u, "status")
	} else {
		u["status"] = runtime.DeepCopyJSONValue(status)
	}
	base := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, base); err != nil {
		return obj, fmt.Errorf("status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return base, nil
}
