package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase summarises a Service object's state for humans and printer columns.
// +kubebuilder:validation:Enum=Ready;Progressing;Terminating
type Phase string

const (
	// PhaseReady means the provider's last CreateOrUpdate finished without pending work.
	PhaseReady Phase = "Ready"
	// PhaseProgressing means the runtime or the provider is still working (waiting for
	// access, install in progress, or an error that is being retried).
	PhaseProgressing Phase = "Progressing"
	// PhaseTerminating means the object is being deleted.
	PhaseTerminating Phase = "Terminating"
)

// ServiceStatus is the status of a Service API object. The runtime owns its phase,
// Ready condition, observed generation and identity; providers report through their
// Result, the Resources they installed and conditions of their own. A provider that
// needs more embeds it inline in a status type of its own:
//
//	type EchoStatus struct {
//		v1alpha1.ServiceStatus `json:",inline"`
//		Installed []InstalledResource `json:"installed,omitempty"`
//	}
//
// The runtime writes that whole status in one patch per reconcile, and only when it
// changed.
type ServiceStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Ready, Progressing or Terminating: the runtime's summary. A provider
	// with phases of its own keeps them in fields of its own status type.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions hold the runtime's Ready condition and any the provider adds.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Identity is the stable tenant identity this object is served under: the
	// ControlPlane's namespace/name in standard mode, the logical cluster in kcp mode.
	// +optional
	Identity string `json:"identity,omitempty"`

	// The schema of Resources is anything, with no type: a Service type may declare a
	// resources field of its own shape beside the embedded ServiceStatus (openMCP's
	// providers do), which encoding/json takes instead of this one; controller-gen,
	// which merges the two, then generates that type's array and items alone rather
	// than a schema that requires both shapes (docs/design/status-resources.md).

	// Resources lists what the provider installed for this object.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Resources []ManagedResource `json:"resources,omitempty"`
}

// ManagedResource names one object a provider installed for a tenant.
type ManagedResource struct {
	// Cluster is where the object lives: "workload" or "mcp".
	Cluster string `json:"cluster"`
	// APIVersion of the object.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object, empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

// KCP is the `spec.kcp` section a kcp-capable provider embeds in its ProviderConfig.
// Its presence switches kcp mode on; removing it stops kcp mode. Classic providers
// (whose worker runs on the end-user cluster) leave it out of their schema entirely.
type KCP struct {
	// ProviderWorkspace is the path of the kcp workspace that holds the provider's
	// APIExport, e.g. root:my-org:services.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="providerWorkspace must be a kcp workspace path such as root:my-org:services: colon-separated names of lowercase letters, digits and '-', each starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.split(':').all(s, size(s) <= 63)",message="providerWorkspace: each workspace name in the path must be at most 63 characters"
	ProviderWorkspace string `json:"providerWorkspace"`

	// KubeconfigSecret holds the kubeconfig of the runtime's kcp identity.
	KubeconfigSecret SecretReference `json:"kubeconfigSecret"`
}

// SecretReference points at a Secret on the platform cluster.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="kubeconfigSecret.name must be a Secret name: lowercase letters, digits, '-' and '.'"
	Name string `json:"name"`
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="kubeconfigSecret.namespace must be a namespace name: lowercase letters, digits and '-', at most 63 characters"
	Namespace string `json:"namespace"`
	// Key in the Secret's data holding the kubeconfig.
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$') && self != '.' && !self.startsWith('..')",message="kubeconfigSecret.key must be a Secret data key: letters, digits, '-', '_' and '.', not '.' and not starting with '..'"
	// +optional
	Key string `json:"key,omitempty"`
}

// KubeconfigKey returns the data key of the kubeconfig, defaulting to "kubeconfig".
func (s SecretReference) KubeconfigKey() string {
	if s.Key == "" {
		return "kubeconfig"
	}
	return s.Key
}

// ProviderConfigStatus is the status a kcp-capable provider embeds in its
// ProviderConfig (like ServiceStatus in its Service objects). The runtime owns it: it
// reports there whether kcp mode serves the configured `spec.kcp`, so that the platform
// team sees a broken `spec.kcp` on the object it edited rather than in the runtime's log.
type ProviderConfigStatus struct {
	// ObservedGeneration is the metadata.generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions hold the runtime's KCPMode condition.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
