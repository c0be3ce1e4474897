package migration

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// FromOCR is what the old binary named. Every field is optional: the zero value means
// the old binary used what this runtime uses too (the names opencontrolplane-runtime
// and the openmcp-operator library default to, with the provider's name).
type FromOCR struct {
	// ControllerName is the controller name the old main passed to the library's
	// cluster access reconciler: the prefix of every request name (the library
	// lowercases it there) and the value of the openmcp.cloud/managed-by label (the
	// library keeps its case, e.g. "Flux"). Empty: the provider name.
	ControllerName string
	// MCP and Workload are the old registrations of the end-user cluster and of the
	// workload cluster. Zero fields: the library's IDs and suffixes (mcp/mcp,
	// workload/wl).
	MCP, Workload Registration
	// Finalizer is the old binary's finalizer on Service objects (its API type's
	// Finalizer()). Empty: `<service group>/finalizer`, which is this runtime's.
	Finalizer string
	// ProviderConfigName is the name of the ProviderConfig the old binary loaded.
	// Empty: the provider name.
	ProviderConfigName string
	// Lease is where the old binary elected its leader; nil when it ran without
	// leader election. With it, standard mode elects on that lease instead of its
	// own, so an old pod and a new one never both reconcile during the rollout.
	Lease *Lease
	// OnboardingRequests are the names of the old binary's onboarding ClusterRequests
	// and AccessRequests in the provider's namespace (e.g. "velero--onboarding-run").
	// They grant the onboarding cluster to a binary that no longer runs; the runtime
	// deletes them once its own onboarding access is granted, it leads, and the
	// rollout has no old pod left.
	OnboardingRequests []string
	// Reasons maps this runtime's Ready reasons to the reasons written on Service
	// objects in standard mode, for alert rules and dashboards that match on the old
	// ones; a reason not in the map is written as it is. nil writes this runtime's
	// reasons. OCRReasons is opencontrolplane-runtime v1.2.0's vocabulary.
	Reasons map[string]string
	// Flags are flags the old binary took (in the ServiceProvider's runCommand or
	// initCommand, which an image swap leaves as they are) and this one does not:
	// accepted, with a warning, instead of stopping the process.
	Flags []Flag
}

// Registration names one cluster registration of the old binary.
type Registration struct {
	// ID is the registration's ID: part of the requests' managed-purpose label.
	ID string
	// Suffix ends the requests' names.
	Suffix string
}

// LeaseCluster says which cluster holds the old binary's lease.
type LeaseCluster string

const (
	// LeaseOnOnboarding: the old main's manager ran on the onboarding cluster's config,
	// so its lease is there (opencontrolplane-runtime's usual wiring).
	LeaseOnOnboarding LeaseCluster = "onboarding"
	// LeaseOnPlatform: the old main elected on the platform cluster.
	LeaseOnPlatform LeaseCluster = "platform"
)

// Lease is where a binary elected its leader.
type Lease struct {
	Cluster   LeaseCluster
	Namespace string
	// Name is the LeaderElectionID the old main passed to its manager.
	Name string
}

// Flag is a flag the old binary took.
type Flag struct {
	// Name without dashes, e.g. "zap-log-level".
	Name string
	// Bool says the flag takes no value (e.g. --enable-http2).
	Bool bool
	// Use names this binary's flag that takes the value instead; empty ignores it.
	Use string
}

// Defaults of the library and of this runtime, which the zero fields mean.
var (
	defaultMCP      = Registration{ID: "mcp", Suffix: "mcp"}
	defaultWorkload = Registration{ID: "workload", Suffix: "wl"}
)

// RequestController is the controller name of the requests: ControllerName or the
// provider's name.
func (m *FromOCR) RequestController(provider string) string {
	if m == nil || m.ControllerName == "" {
		return provider
	}
	return m.ControllerName
}

// MCPRegistration is the end-user cluster's registration, defaults filled in.
func (m *FromOCR) MCPRegistration() Registration {
	if m == nil {
		return defaultMCP
	}
	return m.MCP.or(defaultMCP)
}

// WorkloadRegistration is the workload cluster's registration, defaults filled in.
func (m *FromOCR) WorkloadRegistration() Registration {
	if m == nil {
		return defaultWorkload
	}
	return m.Workload.or(defaultWorkload)
}

func (r Registration) or(def Registration) Registration {
	if r.ID == "" {
		r.ID = def.ID
	}
	if r.Suffix == "" {
		r.Suffix = r.ID
		if r.ID == def.ID {
			r.Suffix = def.Suffix
		}
	}
	return r
}

// ProviderConfig is the ProviderConfig's name: ProviderConfigName or the provider's.
func (m *FromOCR) ProviderConfig(provider string) string {
	if m == nil || m.ProviderConfigName == "" {
		return provider
	}
	return m.ProviderConfigName
}

// Reason is the Ready reason written for this runtime's reason r.
func (m *FromOCR) Reason(r string) string {
	if m == nil {
		return r
	}
	if old, ok := m.Reasons[r]; ok {
		return old
	}
	return r
}

// OCRReasons maps this runtime's Ready reasons to those opencontrolplane-runtime
// v1.2.0 writes: ReconcileSuccess when ready, Terminating while deleting, Reconciling
// while it waits for cluster access, ReconcileError for every failure. Progressing
// and the reasons of kcp mode (which the old runtime never served) stay.
var OCRReasons = map[string]string{
	v1alpha1.ReasonReady:                 "ReconcileSuccess",
	v1alpha1.ReasonDeleting:              "Terminating",
	v1alpha1.ReasonWaitingForAccess:      "Reconciling",
	v1alpha1.ReasonWaitingForWorkload:    "Reconciling",
	v1alpha1.ReasonProviderConfigMissing: "ReconcileError",
	v1alpha1.ReasonProviderConfigInvalid: "ReconcileError",
	v1alpha1.ReasonAccessDenied:          "ReconcileError",
	v1alpha1.ReasonWorkloadDenied:        "ReconcileError",
	v1alpha1.ReasonAccessNotGranted:      "ReconcileError",
	v1alpha1.ReasonWorkloadNotGranted:    "ReconcileError",
	v1alpha1.ReasonProviderError:         "ReconcileError",
	v1alpha1.ReasonProviderRejected:      "ReconcileError",
	v1alpha1.ReasonProviderPanic:         "ReconcileError",
	v1alpha1.ReasonRuntimeError:          "ReconcileError",
	v1alpha1.ReasonConflictingObject:     "ReconcileError",
	v1alpha1.ReasonCleanupBlocked:        "ReconcileError",
	v1alpha1.ReasonControlPlaneNotFound:  "ReconcileError",
}

// OCRFlags are the flags the mains of openMCP providers on opencontrolplane-runtime
// take (a kubebuilder scaffold plus controller-utils' logging flags) and this binary
// does not: the metrics certificate folder is this binary's --metrics-cert-dir, -v
// its --verbosity; the rest is ignored (webhooks: this binary serves none; log format
// and stack traces: this binary logs one way).
var OCRFlags = []Flag{
	{Name: "enable-http2", Bool: true},
	{Name: "metrics-cert-path", Use: "metrics-cert-dir"},
	{Name: "metrics-cert-name"},
	{Name: "metrics-cert-key"},
	{Name: "webhook-cert-path"},
	{Name: "webhook-cert-name"},
	{Name: "webhook-cert-key"},
	{Name: "v", Use: "verbosity"},
	{Name: "dev", Bool: true},
	{Name: "cli", Bool: true},
	{Name: "format"},
	{Name: "f"},
	{Name: "disable-stacktrace", Bool: true},
	{Name: "disable-caller", Bool: true},
	{Name: "disable-timestamp", Bool: true},
}

// Validate reports a declaration the runtime could not act on.
func (m *FromOCR) Validate() error {
	if m == nil {
		return nil
	}
	var errs []error
	for _, r := range []Registration{m.MCPRegistration(), m.WorkloadRegistration()} {
		if msgs := validation.IsDNS1123Label(strings.ToLower(r.Suffix)); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("registration %s: suffix %q: %s", r.ID, r.Suffix, strings.Join(msgs, "; ")))
		}
	}
	if m.MCPRegistration().ID == m.WorkloadRegistration().ID {
		errs = append(errs, fmt.Errorf("the MCP and workload registrations share the ID %q", m.MCP.ID))
	}
	if msgs := validation.IsValidLabelValue(m.ControllerName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("controller name %q is not a label value: %s", m.ControllerName, strings.Join(msgs, "; ")))
	}
	if l := m.Lease; l != nil {
		if l.Cluster != LeaseOnOnboarding && l.Cluster != LeaseOnPlatform {
			errs = append(errs, fmt.Errorf("lease cluster %q: want %q or %q", l.Cluster, LeaseOnOnboarding, LeaseOnPlatform))
		}
		if l.Namespace == "" {
			errs = append(errs, errors.New("lease namespace is empty"))
		}
		if msgs := validation.IsDNS1123Subdomain(l.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("lease name %q: %s", l.Name, strings.Join(msgs, "; ")))
		}
	}
	seen := map[string]bool{}
	for _, f := range m.Flags {
		if f.Name == "" || strings.HasPrefix(f.Name, "-") || seen[f.Name] {
			errs = append(errs, fmt.Errorf("flag %q: empty, starting with a dash or declared twice", f.Name))
		}
		seen[f.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("migration declaration: %w", err)
	}
	return nil
}

// OldLease is Lease, nil-safe.
func (m *FromOCR) OldLease() *Lease {
	if m == nil {
		return nil
	}
	return m.Lease
}
