// Command kcp-serviceprovider runs the reference service provider (examples/echo) on
// the kcp-aware runtime. The openmcp-operator starts it as `init` (a Job) and `run`
// (a Deployment); `local` starts a whole platform on this machine for trying it out.
package main

import (
	"os"

	"github.com/openmcp-project/kcp-serviceprovider/cmd/kcp-serviceprovider/app"
)

func main() {
	os.Exit(app.Main(os.Args[0], os.Args[1:], os.Stdout, os.Stderr,
		app.InitCommand(),
		app.RunCommand(),
		app.LocalCommand(),
		app.KCPManifestsCommand(),
	))
}
