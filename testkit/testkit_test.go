package testkit

import (
	"context"
	"os"
	"testing"

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
	p := ProviderOf("notes", os.DirFS("../examples/notes/crd"), func(kcp apiexport.Provisionable) (command.Runner, error) {
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
