// Command kcp-serviceprovider-servers builds the real servers that testkit, the local
// platform and this repository's tests start, into a cache outside any repository, and
// prints as its last line the folder holding them:
//
//	KSP_TEST_ASSETS=/home/me/.cache/kcp-serviceprovider/assets/3f2a...
//
// From a provider's own module (which requires this one):
//
//	eval "export $(go run github.com/openmcp-project/kcp-serviceprovider/cmd/kcp-serviceprovider-servers | tail -1)"
//
// The first run builds them from pinned Go modules (20 to 40 minutes on two cores, one
// line per step); later runs answer at once. An argument builds one part only: kcp,
// kube, operator or flux. KSP_CACHE_DIR moves the cache.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/openmcp-project/kcp-serviceprovider/internal/testservers"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "test-binaries:", err)
		os.Exit(1)
	}
}

func run(parts []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(parts) == 1 && parts[0] == "all" {
		parts = nil
	}
	for _, p := range parts {
		if p == "-h" || p == "--help" {
			fmt.Fprintln(os.Stderr, "usage: kcp-serviceprovider-servers [all|kcp|kube|cluster|operator|flux]")
			return nil
		}
	}
	dir, err := testservers.Ensure(ctx, testservers.Options{}, parts...)
	if err != nil {
		return err
	}
	if dir != "" {
		fmt.Println("KSP_TEST_ASSETS=" + dir)
	}
	return nil
}
