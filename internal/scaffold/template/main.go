// Command notes is a service provider on kcp-serviceprovider: a tenant's Note becomes a
// ConfigMap on the workload cluster. The commands: init and run (as the openmcp-operator
// calls them), kcp-manifests, platform-rbac and local (a whole platform on this machine).
package main

import (
	"embed"

	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/command/local"
)

// providerName names the provider: its ServiceProvider, its ProviderConfig and the
// workspace it serves kcp mode from (root:providers:<name>).
const providerName = "notes"

//go:embed crd/*.yaml
var crds embed.FS

func main() {
	p := description()
	command.Main(p, local.Command(p))
}

// description is the provider as the commands and the tests know it.
func description() command.Provider {
	return command.Provider{Name: providerName, CRDs: crds, NewRuntime: newRuntime, Local: &command.Local{
		ProviderConfig: "config/samples/noteconfig.yaml", Quickstart: quickstart}}
}
