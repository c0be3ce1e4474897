package kcpmode

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestKCPModeReport walks the ProviderConfig's KCPMode condition through kcp mode's
// states and checks that an event is recorded once per change of status or reason,
// also by a second supervisor (another replica, or the process restarted) that finds
// the state already on the object.
func TestKCPModeReport(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := widget.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pf := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&widget.WidgetConfig{}).
		WithObjects(&widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: "widgets", Generation: 3}}).Build()
	newSup := func() (*Supervisor, *events.FakeRecorder) {
		rec := events.NewFakeRecorder(10)
		return &Supervisor{opts: Options{Platform: pf}, events: rec}, rec
	}
	read := func() provider.ProviderConfig {
		pc := &widget.WidgetConfig{}
		if err := pf.Get(t.Context(), client.ObjectKey{Name: "widgets"}, pc); err != nil {
			t.Fatal(err)
		}
		return pc
	}
	want := func(rec *events.FakeRecorder, status metav1.ConditionStatus, reason, message string, events ...string) {
		t.Helper()
		pc := read().(*widget.WidgetConfig)
		c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionKCPMode)
		if c == nil || c.Status != status || c.Reason != reason || c.Message != message || c.ObservedGeneration != 3 || pc.Status.ObservedGeneration != 3 {
			t.Errorf("condition %+v, status generation %d; want %s/%s %q at generation 3", c, pc.Status.ObservedGeneration, status, reason, message)
		}
		for _, e := range events {
			select {
			case got := <-rec.Events:
				if got != e {
					t.Errorf("event %q, want %q", got, e)
				}
			default:
				t.Errorf("no event, want %q", e)
			}
		}
		select {
		case got := <-rec.Events:
			t.Errorf("unexpected event %q", got)
		default:
		}
	}
	ctx := t.Context()
	sup, rec := newSup()

	sup.report(ctx, read(), metav1.ConditionFalse, v1alpha1.ReasonKCPNotConfigured, "off")
	if c := meta.FindStatusCondition(read().(*widget.WidgetConfig).Status.Conditions, v1alpha1.ConditionKCPMode); c != nil || len(rec.Events) > 0 {
		t.Errorf("kcp mode that was never on is reported: %+v, %d events", c, len(rec.Events))
	}

	sup.report(ctx, read(), metav1.ConditionTrue, v1alpha1.ReasonKCPActive, "serves root:a")
	want(rec, metav1.ConditionTrue, v1alpha1.ReasonKCPActive, "serves root:a", "Normal Active serves root:a")
	sup.report(ctx, read(), metav1.ConditionTrue, v1alpha1.ReasonKCPActive, "serves root:a")
	want(rec, metav1.ConditionTrue, v1alpha1.ReasonKCPActive, "serves root:a")

	// Degraded: a new message for the same reason updates the condition only.
	sup.report(ctx, read(), metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid, "401 (1)")
	want(rec, metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid, "401 (1)", "Warning KCPCredentialsInvalid 401 (1)")
	sup.report(ctx, read(), metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid, "401 (2)")
	want(rec, metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid, "401 (2)")

	// Another supervisor finds the state on the object and says nothing new.
	other, otherRec := newSup()
	other.report(ctx, read(), metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid, "401 (2)")
	want(otherRec, metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid, "401 (2)")

	// An event note is cut to the API's limit; the condition keeps the whole message.
	long := strings.Repeat("x", 2*maxEventNote)
	other.report(ctx, read(), metav1.ConditionTrue, v1alpha1.ReasonKCPUnreachable, long)
	want(otherRec, metav1.ConditionTrue, v1alpha1.ReasonKCPUnreachable, long, "Warning KCPUnreachable "+long[:maxEventNote-3]+"...")

	other.report(ctx, read(), metav1.ConditionFalse, v1alpha1.ReasonKCPNotConfigured, "off")
	want(otherRec, metav1.ConditionFalse, v1alpha1.ReasonKCPNotConfigured, "off", "Normal NotConfigured off")
}

// TestReportHeldRelease: a run whose export is of a newer API release says so on the
// ProviderConfig (APIReleaseHeld, a Warning) and, once a re-check finds the export at
// its own release, is Active again; a re-check that fails keeps the run serving and
// says why.
func TestReportHeldRelease(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := widget.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pf := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&widget.WidgetConfig{}).
		WithObjects(&widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}}).Build()
	rec := events.NewFakeRecorder(10)
	sup := &Supervisor{opts: Options{Platform: pf}, events: rec}
	ctx := t.Context()
	condition := func() *metav1.Condition {
		pc := &widget.WidgetConfig{}
		if err := pf.Get(ctx, client.ObjectKey{Name: "widgets"}, pc); err != nil {
			t.Fatal(err)
		}
		sup.reportActive(ctx, pc, sup.current)
		if err := pf.Get(ctx, client.ObjectKey{Name: "widgets"}, pc); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionKCPMode)
	}
	export := &apiexport.Provisioned{Held: "APIExport widgets carries API release v1.2.0, newer than this binary's v1.1.0"}
	var provisionErr error
	sup.current = &kcpRun{workspace: "root:widgets", held: export.Held,
		provision: func(context.Context) (*apiexport.Provisioned, error) { return export, provisionErr }}

	if c := condition(); c.Reason != v1alpha1.ReasonAPIReleaseHeld || !strings.Contains(c.Message, "newer than this binary's v1.1.0") {
		t.Errorf("condition %+v, want APIReleaseHeld naming the releases", c)
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Warning APIReleaseHeld") {
		t.Errorf("event %q, want a Warning APIReleaseHeld", e)
	}
	export = &apiexport.Provisioned{}
	sup.current.recheckExport(ctx)
	if c := condition(); c.Reason != v1alpha1.ReasonKCPActive {
		t.Errorf("condition %+v after the export is at this binary's release, want Active", c)
	}
	provisionErr = errors.New("kcp unreachable")
	sup.current.recheckExport(ctx)
	if c := condition(); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "re-checking the APIExport failed: kcp unreachable") {
		t.Errorf("condition %+v after a failed re-check, want True saying why", c)
	}
}

// TestClassify: what kcp answers decides the KCPMode reason, and a reason given
// earlier is kept.
func TestClassify(t *testing.T) {
	want := kcpSettings{workspace: "root:p", secret: client.ObjectKey{Namespace: "ns", Name: "kcp"}}
	gr := schema.GroupResource{Group: "apis.kcp.io", Resource: "apiexports"}
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{apierrors.NewUnauthorized("no"), v1alpha1.ReasonKCPCredentialsInvalid},
		{fmt.Errorf("provisioning: %w", apierrors.NewForbidden(gr, "x", errors.New("no"))), v1alpha1.ReasonKCPPermissionDenied},
		{&url.Error{Op: "Get", URL: "https://kcp", Err: errors.New("connection refused")}, v1alpha1.ReasonKCPUnreachable},
		{&kcpError{reason: v1alpha1.ReasonProviderWorkspaceInaccessible, err: errors.New("403")}, v1alpha1.ReasonProviderWorkspaceInaccessible},
		{errors.New("something else"), v1alpha1.ReasonKCPStartFailed},
	} {
		if got := reasonOf(classify(tc.err, want)); got != tc.reason {
			t.Errorf("%v: reason %s, want %s", tc.err, got, tc.reason)
		}
	}
}

// TestSecretWatchSaysWhenItIsMissing: a Secret watch that cannot be set up is
// reported, so that the supervisor re-reads the Secret at its read-retry pace instead
// of the five-minute safety net; no Secret to follow needs no watch.
func TestSecretWatchSaysWhenItIsMissing(t *testing.T) {
	ref := client.ObjectKey{Namespace: "ns", Name: "kcp-kubeconfig"}
	unusable := &rest.Config{Host: "https://platform.invalid", TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(t.TempDir(), "missing-ca.crt")}}
	w := &secretWatch{}
	if w.follow(t.Context(), unusable, &ref, func() {}) {
		t.Error("follow reported a watch it could not set up")
	}
	if !w.follow(t.Context(), unusable, nil, func() {}) {
		t.Error("follow of no Secret reported a missing watch")
	}
}
