// Command kcp-serviceprovider-new starts a provider of your own: a Go module with its
// Service API and ProviderConfig types (DeepCopy and CRDs generated), provider.go, a
// main.go on command.Main, a Makefile (test, run, generate, image), .ci/run and an
// end-to-end test in both modes on testkit. From any folder:
//
//	go run github.com/openmcp-project/kcp-serviceprovider/cmd/kcp-serviceprovider-new@latest example.com/acme/backups
//	cd backups && make test
//
// Flags: -dir (default: the module path's last element), -name (the provider's name,
// default the same), -group (the Service API's group, default
// <name>.services.open-control-plane.io), -replace (a checkout of the runtime to build
// against instead of the released version).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/openmcp-project/kcp-serviceprovider/internal/scaffold"
)

func main() {
	o := scaffold.Options{Tidy: true}
	flag.StringVar(&o.Dir, "dir", "", "folder to write the module to; must not exist or be empty (default: the module path's last element)")
	flag.StringVar(&o.Name, "name", "", "the provider's name (default: the module path's last element)")
	flag.StringVar(&o.Group, "group", "", "the Service API's group (default: <name>.services.open-control-plane.io)")
	flag.StringVar(&o.Replace, "replace", "", "a checkout of "+scaffold.RuntimeModule+" to build against instead of a released version")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: kcp-serviceprovider-new [flags] <module path>\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	o.Module = flag.Arg(0)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "kcp-serviceprovider-new:", err)
		os.Exit(1)
	}
}

func run(o scaffold.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := scaffold.New(ctx, o, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("next: cd %s && make test (the first run builds the test servers, once) and make run\n", dir)
	return nil
}
