// Command kcp-serviceprovider-local is the reference provider (examples/echo) with the
// local command: `make run` starts a whole platform on this machine with it, and there
// the openmcp-operator runs this same binary's init and run. A platform deploys
// cmd/kcp-serviceprovider, which does not link the local platform.
package main

import (
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/command/local"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
)

func main() {
	p := echo.Description()
	command.Main(p, local.Command(p))
}
