package provider_test

import (
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// A provider reports work that is not finished with Pending: the object stays
// Progressing (or keeps its finalizer while deleting) with the message as its Ready
// condition's, and the runtime calls again after the duration.
func ExamplePending() {
	r := provider.Pending("waiting for Deployment echo-worker to be available", 10*time.Second)
	fmt.Println(r.InProgress, r.RequeueAfter)
	fmt.Println(r.Message)
	// Output:
	// true 10s
	// waiting for Deployment echo-worker to be available
}

// Bad input that no retry can fix is wrapped with Terminal: the object shows
// Ready=False with reason ProviderRejected and the error's message, and the provider is
// called again only when the object or the ProviderConfig changes.
func ExampleTerminal() {
	validate := func(size int) error {
		if size > 10 {
			return provider.Terminal(fmt.Errorf("spec.size %d is above the limit of 10", size))
		}
		return nil
	}
	err := validate(12)
	fmt.Println(errors.Is(err, reconcile.TerminalError(nil)))
	fmt.Println(err)
	// Output:
	// true
	// terminal error: spec.size 12 is above the limit of 10
}
