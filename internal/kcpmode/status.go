package kcpmode

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// This file holds how the Supervisor tells the platform team what became of
// spec.kcp: why a configuration fails (kcpError, classify), and the ProviderConfig's
// KCPMode condition and events (report).

// kcpError is a failure of a spec.kcp with the KCPMode reason that names its cause.
// Its message says which Secret or workspace and what to do; it never quotes the
// kubeconfig.
type kcpError struct {
	reason string
	err    error
}

func (e *kcpError) Error() string { return e.err.Error() }
func (e *kcpError) Unwrap() error { return e.err }

// reasonOf is err's KCPMode reason.
func reasonOf(err error) string {
	var ke *kcpError
	if errors.As(err, &ke) {
		return ke.reason
	}
	return v1alpha1.ReasonKCPStartFailed
}

// probeWorkspace asks the provider workspace who the credentials are: the first
// request of a new run, and the one whose answer tells the causes of a broken spec.kcp
// apart (an error from deeper in the start, a discovery error say, no longer does).
// kcp answers a bad credential with 401, and a workspace that does not exist or that
// the identity may not enter alike with 403.
func probeWorkspace(ctx context.Context, providerCfg *rest.Config, want kcpSettings) error {
	cs, err := kubernetes.NewForConfig(providerCfg)
	if err != nil {
		return &kcpError{reason: v1alpha1.ReasonKCPKubeconfigInvalid, err: fmt.Errorf("the kubeconfig in Secret %s is not usable: %w", want.secret, err)}
	}
	_, err = cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	var urlErr *url.Error
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return &kcpError{reason: v1alpha1.ReasonKCPCredentialsInvalid, err: fmt.Errorf(
			"kcp refuses the credentials of the kubeconfig in Secret %s (401 Unauthorized): put a valid kubeconfig of the runtime's kcp identity there", want.secret)}
	case apierrors.IsForbidden(err), apierrors.IsNotFound(err):
		return &kcpError{reason: v1alpha1.ReasonProviderWorkspaceInaccessible, err: fmt.Errorf(
			"kcp refuses the identity of the kubeconfig in Secret %s the provider workspace %s: the workspace does not exist, or the identity may not use it (kcp answers both alike); check spec.kcp.providerWorkspace and that the kubeconfig is of the identity config/kcp/runtime-rbac.yaml sets up there (%w)",
			want.secret, want.workspace, err)}
	case errors.As(err, &urlErr):
		return &kcpError{reason: v1alpha1.ReasonKCPUnreachable, err: fmt.Errorf(
			"the kcp server of the kubeconfig in Secret %s does not answer: %w", want.secret, err)}
	}
	return fmt.Errorf("provider workspace %s: %w", want.workspace, err)
}

// classify gives an error of a new run its KCPMode reason, unless it has one.
func classify(err error, want kcpSettings) error {
	var ke *kcpError
	if errors.As(err, &ke) {
		return err
	}
	var urlErr *url.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return &kcpError{reason: v1alpha1.ReasonKCPCredentialsInvalid, err: err}
	case apierrors.IsForbidden(err):
		return &kcpError{reason: v1alpha1.ReasonKCPPermissionDenied, err: fmt.Errorf(
			"the identity of the kubeconfig in Secret %s lacks a permission in %s (config/kcp/runtime-rbac.yaml lists what it needs): %w", want.secret, want.workspace, err)}
	case errors.As(err, &urlErr):
		return &kcpError{reason: v1alpha1.ReasonKCPUnreachable, err: err}
	}
	return &kcpError{reason: v1alpha1.ReasonKCPStartFailed, err: err}
}

// startEvents starts the recorder of the supervisor's events on the ProviderConfig
// (events.k8s.io, like the engine's on Service objects; a cluster-scoped object's
// events land in namespace default) and returns its stop.
func (s *Supervisor) startEvents(ctx context.Context) func() {
	c, err := eventsv1client.NewForConfig(s.opts.PlatformConfig)
	if err != nil {
		log.FromContext(ctx).Error(err, "kcp supervisor: no events on the ProviderConfig")
		return func() {}
	}
	b := events.NewBroadcaster(engine.ReportingAs(&events.EventSinkImpl{Interface: c}, s.opts.Replica))
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		log.FromContext(ctx).Error(err, "kcp supervisor: no events on the ProviderConfig")
		return func() {}
	}
	s.events = b.NewRecorder(s.opts.Scheme, s.opts.EventSource)
	return b.Shutdown
}

// report sets the ProviderConfig's KCPMode condition, when its type has the status
// (provider.ProviderConfigStatuser), and records an event when the condition's status
// or reason changes: Warning for a failure, Normal otherwise. The condition on the
// object is the memory, so a restarted process or a second replica does not repeat an
// event for a state the ProviderConfig already shows.
func (s *Supervisor) report(ctx context.Context, pc provider.ProviderConfig, status metav1.ConditionStatus, reason, message string) {
	if len(message) > maxConditionMessage {
		message = message[:maxConditionMessage-3] + "..."
	}
	want := metav1.Condition{Type: v1alpha1.ConditionKCPMode, Status: status, Reason: reason, Message: message, ObservedGeneration: pc.GetGeneration()}
	// What was reported: the condition on the object, else (a type without status, or
	// a status write that failed) what this process reported.
	var prev *metav1.Condition
	st, hasStatus := pc.(provider.ProviderConfigStatuser)
	if hasStatus {
		prev = meta.FindStatusCondition(st.GetProviderConfigStatus().Conditions, v1alpha1.ConditionKCPMode)
	}
	if prev == nil {
		prev = s.reported
	}
	if prev == nil && reason == v1alpha1.ReasonKCPNotConfigured {
		return // kcp mode was never on: nothing to say
	}
	changed := prev == nil || prev.Status != status || prev.Reason != reason
	if !changed && prev.Message == message && prev.ObservedGeneration == want.ObservedGeneration &&
		(!hasStatus || st.GetProviderConfigStatus().ObservedGeneration == want.ObservedGeneration) {
		return
	}
	s.reported = &want
	if hasStatus {
		orig := pc.DeepCopyObject().(client.Object)
		ps := st.GetProviderConfigStatus()
		ps.ObservedGeneration = pc.GetGeneration()
		meta.SetStatusCondition(&ps.Conditions, want)
		if !equality.Semantic.DeepEqual(orig, pc) {
			if err := s.opts.Platform.Status().Patch(ctx, pc, client.MergeFrom(orig)); err != nil {
				log.FromContext(ctx).Error(err, "writing the ProviderConfig's KCPMode condition", "reason", reason)
			}
		}
	}
	if changed && s.events != nil {
		eventType := corev1.EventTypeWarning
		if reason == v1alpha1.ReasonKCPActive || reason == v1alpha1.ReasonKCPNotConfigured {
			eventType = corev1.EventTypeNormal
		}
		note := message
		if len(note) > maxEventNote {
			note = note[:maxEventNote-3] + "..."
		}
		s.events.Eventf(pc, nil, eventType, reason, "KCPMode", "%s", note)
	}
}

// The API's limits of a condition message and an event note.
const (
	maxConditionMessage = 32768
	maxEventNote        = 1024
)

// secretWatch watches the one kubeconfig Secret spec.kcp names (its metadata only:
// the data is read when a pass needs it), so that a fixed or rotated Secret is applied
// within seconds.
type secretWatch struct {
	ref    client.ObjectKey
	cancel context.CancelFunc
}

// follow makes the watch follow ref (nil: no watch). It reports false when the watch
// could not be set up: the caller then re-reads the Secret at its read-retry pace, and
// follow tries the watch again on that pass.
func (w *secretWatch) follow(ctx context.Context, cfg *rest.Config, ref *client.ObjectKey, poke func()) bool {
	if ref != nil && w.cancel != nil && *ref == w.ref {
		return true
	}
	w.stop()
	if ref == nil {
		return true
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	c, err := cache.New(cfg, cache.Options{
		DefaultNamespaces: map[string]cache.Config{ref.Namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{secret: {Field: fields.OneTermEqualSelector("metadata.name", ref.Name)}},
	})
	if err == nil {
		err = onChange(ctx, c, secret, poke)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "watching the kcp kubeconfig Secret; it is re-read every "+kcpReadRetry.String()+" instead", "secret", ref)
		return false
	}
	wctx, cancel := context.WithCancel(ctx)
	w.ref, w.cancel = *ref, cancel
	go func() { _ = c.Start(wctx) }()
	return true
}

func (w *secretWatch) stop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}
