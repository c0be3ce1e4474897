package testkit

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/command"
)

type startedRuntime struct{ kcp apiexport.Provisionable }

func (startedRuntime) Start(context.Context, builder.Options) error { return nil }

// A provider that starts its own builder.Runtime, not built on command.Provider, is
// described for the kit from its name, CRDs and runtime: the kit derives the same
// surface run would, and hands its kcp part to the runtime.
func TestProviderOfAProviderWithoutCommand(t *testing.T) {
	p := ProviderOf("notes", os.DirFS("../internal/scaffold/template/crd"), func(kcp apiexport.Provisionable) (command.Runner, error) {
		return startedRuntime{kcp: kcp}, nil
	})
	s, err := p.Surface()
	if err != nil {
		t.Fatal(err)
	}
	if s.ServiceCRD.Spec.Names.Kind != "Note" || len(s.PlatformCRDs) != 1 || s.ExportName != "notes.scratch.open-control-plane.io" {
		t.Errorf("surface = %s, %d platform CRDs, export %q", s.ServiceCRD.Spec.Names.Kind, len(s.PlatformCRDs), s.ExportName)
	}
	rt, err := p.NewRuntime(p.Name, s.KCP)
	if err != nil || rt.(startedRuntime).kcp == nil {
		t.Errorf("runtime %v, %v: want one with the kit's kcp surface", rt, err)
	}
}

// TestWaitGoneSaysWhereTheObjectStands: a deletion that does not finish fails with
// the object's finalizers and Ready condition, not with the error of the read that
// the wait's own deadline cut short.
func TestWaitGoneSaysWhereTheObjectStands(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetFinalizers([]string{"echo.open-control-plane.io/finalizer"})
	u.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(0, 0)})
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{
		"type": "Ready", "status": "False", "reason": "Deleting", "message": "waiting for the tenant's HelmReleases", "lastTransitionTime": "2026-01-01T00:00:00Z",
	}}, "status", "conditions")
	get := func(ctx context.Context) (*unstructured.Unstructured, error) {
		// A read that outlives the wait fails as a rate-limited client's does.
		<-ctx.Done()
		return nil, fmt.Errorf("client rate limiter Wait returned an error: %w", ctx.Err())
	}
	first := true
	err := waitGone(t.Context(), 500*time.Millisecond, "Echo default/demo", func(ctx context.Context) (*unstructured.Unstructured, error) {
		if first {
			first = false
			return u, nil
		}
		return get(ctx)
	})
	if err == nil {
		t.Fatal("an object that stays reported gone")
	}
	for _, want := range []string{"Echo default/demo gone", "finalizers [echo.open-control-plane.io/finalizer]", "deletion requested 1970-01-01T00:00:00Z",
		"Ready=False, reason Deleting: waiting for the tenant's HelmReleases"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("the failure quotes the read its own deadline cut short: %v", err)
	}
}
