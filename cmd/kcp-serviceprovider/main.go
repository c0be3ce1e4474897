// Command kcp-serviceprovider runs the reference service provider (examples/echo) on
// the kcp-aware runtime. The openmcp-operator starts it as `init` (a Job) and `run`
// (a Deployment). It is what a platform deploys: the local platform of `make run` is
// in cmd/kcp-serviceprovider-local, and main_test.go keeps it out of this binary.
package main

import (
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
)

func main() { command.Main(echo.Description()) }
