// Command greeter is the greeter provider's binary: init and run as the
// openmcp-operator calls them, kcp-manifests, platform-rbac, and local, which starts a
// whole platform on this machine with real Flux (`go run ./examples/greeter/cmd/greeter
// local` from the repository root).
package main

import (
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/command/local"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter"
)

func main() {
	p := greeter.Description()
	command.Main(p, local.Command(p))
}
