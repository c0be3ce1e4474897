package command_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
)

// newRuntime would declare the provider on the builder (package builder); the commands
// of these examples do not start it.
func newRuntime(string, apiexport.Provisionable) (command.Runner, error) {
	return nil, errors.New("not started in this example")
}

// The commands derive what they serve from the provider's generated CRD files (a
// provider embeds them with go:embed; here the skeleton's, read from disk): the CRD
// labelled openmcp.cloud/cluster=onboarding is the Service API, and its group names the
// APIExport tenants bind.
func ExampleProvider_Surface() {
	p := command.Provider{Name: "notes", CRDs: os.DirFS("../internal/scaffold/template"), NewRuntime: newRuntime}
	s, err := p.Surface()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Service API:", s.ServiceCRD.Spec.Names.Kind, s.ServiceCRD.Labels[command.ClusterLabel])
	for _, crd := range s.PlatformCRDs {
		fmt.Println("platform:", crd.Spec.Names.Kind, crd.Labels[command.ClusterLabel])
	}
	fmt.Println("APIExport:", s.ExportName)
	// Output:
	// Service API: Note onboarding
	// platform: NoteConfig platform
	// APIExport: notes.scratch.open-control-plane.io
}

// A binary's main hands Main its Provider; Execute is Main without the process: the
// commands, their flags and the exit code, for a test or another program. Here the
// reference provider's kcp-manifests prints what run provisions in the provider
// workspace, for review.
func ExampleExecute() {
	var out, errs bytes.Buffer
	code := command.Execute("echo", []string{"kcp-manifests"}, &out, &errs, command.Commands(echo.Description())...)
	fmt.Println("exit code", code)
	fmt.Print(errs.String())
	// The schema's name is a hash of its content (kcp never changes a schema), so
	// only the kinds are shown.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "kind: ") {
			fmt.Println(line)
		}
	}
	// Output:
	// exit code 0
	// kind: APIResourceSchema
	// kind: APIExport
}
