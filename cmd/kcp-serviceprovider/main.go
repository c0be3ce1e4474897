// Command kcp-serviceprovider runs the reference service provider (examples/echo) on
// the kcp-aware runtime. The openmcp-operator starts it as `init` (a Job) and `run`
// (a Deployment); `local` starts a whole platform on this machine for trying it out.
package main

import (
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
)

func main() { command.Main(echo.Description()) }
