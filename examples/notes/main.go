// Command notes is the skeleton of a provider on the command package: its types, its
// provider.go and this file. Copy it to start one; test/e2e-binary runs it.
package main

import (
	"embed"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/notes/api/v1alpha1"
)

//go:embed crd/*.yaml
var crds embed.FS

func main() { command.Main(command.Provider{Name: "notes", CRDs: crds, NewRuntime: newRuntime}) }

func newRuntime(name string, kcp apiexport.Provisionable) (command.Runner, error) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return builder.ServiceProvider[*v1alpha1.Note](name, s).
		For(&v1alpha1.Note{}).WithProviderConfig(&v1alpha1.NoteConfig{}).
		WorkloadCluster(workloadPermissions).KCP(kcp).
		Complete(Provider{})
}
