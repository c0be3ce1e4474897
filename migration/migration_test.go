package migration

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// TestRegistrations: metrics-operator's MCP requests end in "cp" under the library's
// ID "mcp", which stays part of their managed-purpose label; an ID of its own is its
// suffix too; nothing declared is the library's defaults.
func TestRegistrations(t *testing.T) {
	for _, c := range []struct {
		name string
		m    *FromOCR
		mcp  Registration
		wl   Registration
	}{
		{"none declared", nil, Registration{"mcp", "mcp"}, Registration{"workload", "wl"}},
		{"metrics-operator's cp suffix", &FromOCR{MCP: Registration{Suffix: "cp"}}, Registration{"mcp", "cp"}, Registration{"workload", "wl"}},
		{"an ID of its own", &FromOCR{Workload: Registration{ID: "runtime"}}, Registration{"mcp", "mcp"}, Registration{"runtime", "runtime"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.m.MCPRegistration(); got != c.mcp {
				t.Errorf("MCP registration %+v, want %+v", got, c.mcp)
			}
			if got := c.m.WorkloadRegistration(); got != c.wl {
				t.Errorf("workload registration %+v, want %+v", got, c.wl)
			}
		})
	}
}

// TestNames: the controller name keeps its case (flux's managed-by label is "Flux";
// the library lowercases it only in request names), the ProviderConfig keeps its old
// name (metrics-operator's "metricsoperator"), and nothing declared is the provider's.
func TestNames(t *testing.T) {
	var none *FromOCR
	if none.RequestController("flux") != "flux" || none.ProviderConfig("flux") != "flux" {
		t.Error("without a declaration the names are the provider's")
	}
	m := &FromOCR{ControllerName: "Flux", ProviderConfigName: "metricsoperator"}
	if got := m.RequestController("flux"); got != "Flux" {
		t.Errorf("controller name %q, want Flux with its capital F", got)
	}
	if got := m.ProviderConfig("metrics-operator"); got != "metricsoperator" {
		t.Errorf("ProviderConfig name %q, want metricsoperator", got)
	}
}

// TestReasons: with OCRReasons a tenant's alert rules read the old vocabulary; a
// reason the map does not name, and every reason without a map, is this runtime's.
func TestReasons(t *testing.T) {
	m := &FromOCR{Reasons: OCRReasons}
	for own, want := range map[string]string{
		v1alpha1.ReasonReady:            "ReconcileSuccess",
		v1alpha1.ReasonDeleting:         "Terminating",
		v1alpha1.ReasonWaitingForAccess: "Reconciling",
		v1alpha1.ReasonProviderError:    "ReconcileError",
		v1alpha1.ReasonProgressing:      v1alpha1.ReasonProgressing,
		v1alpha1.ReasonNotSingleton:     v1alpha1.ReasonNotSingleton,
	} {
		if got := m.Reason(own); got != want {
			t.Errorf("reason %s written as %q, want %q", own, got, want)
		}
	}
	if got := (&FromOCR{}).Reason(v1alpha1.ReasonReady); got != v1alpha1.ReasonReady {
		t.Errorf("without a map Ready is written as %q", got)
	}
}

// TestOldFlags: the flags an old binary took (from the ServiceProvider's runCommand,
// which an image swap keeps) are accepted: bool flags without a value, a mapped one
// sets this binary's flag, each use is a warning; a flag neither binary knows still
// stops the process, and a flag this binary defines stays its own.
func TestOldFlags(t *testing.T) {
	m := &FromOCR{Flags: append(slices.Clone(OCRFlags), Flag{Name: "verbosity", Use: "x"})}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	certDir := fs.String("metrics-cert-dir", "", "")
	verbosity := fs.String("verbosity", "INFO", "")
	used := m.AddFlags(fs)
	args := []string{"--enable-http2", "--webhook-cert-path", "/tmp/k8s-webhook-server/serving-certs",
		"--metrics-cert-path=/certs", "-v", "DEBUG", "--disable-stacktrace=false", "--dev"}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("old flags %q: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Errorf("arguments left over: %q (a bool flag took the next one?)", fs.Args())
	}
	if *certDir != "/certs" || *verbosity != "DEBUG" {
		t.Errorf("--metrics-cert-dir %q, --verbosity %q: want /certs and DEBUG, set by the old flags", *certDir, *verbosity)
	}
	warnings := used()
	if len(warnings) != 6 {
		t.Errorf("%d warnings, want one per old flag given (6): %q", len(warnings), warnings)
	}
	for _, w := range warnings {
		if !strings.Contains(w, "previous binary") {
			t.Errorf("warning %q does not say where the flag comes from", w)
		}
	}

	fs = flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m.AddFlags(fs)
	if err := fs.Parse([]string{"--leader-election-namespace=x"}); err == nil {
		t.Error("a flag neither binary knows was accepted")
	}
}

// TestValidate: a declaration the runtime could not act on is refused as a whole,
// naming each mistake.
func TestValidate(t *testing.T) {
	var none *FromOCR
	if err := none.Validate(); err != nil {
		t.Errorf("no declaration: %v", err)
	}
	if err := (&FromOCR{ControllerName: "Flux", MCP: Registration{Suffix: "cp"}, Flags: OCRFlags,
		Lease: &Lease{Cluster: LeaseOnOnboarding, Namespace: "openmcp-system", Name: "services.open-control-plane.io.velero"}}).Validate(); err != nil {
		t.Errorf("a real provider's declaration: %v", err)
	}
	err := (&FromOCR{ControllerName: "has space", MCP: Registration{ID: "workload"},
		Lease: &Lease{Cluster: "elsewhere", Name: "github.com/openmcp-project/service-provider-argocd"},
		Flags: []Flag{{Name: "x"}, {Name: "x"}}}).Validate()
	if err == nil {
		t.Fatal("an invalid declaration was accepted")
	}
	for _, want := range []string{"controller name", "share the ID", "lease cluster", "lease namespace", "lease name", `flag "x"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
