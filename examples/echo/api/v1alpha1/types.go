package v1alpha1

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// GroupVersion of the echo service API.
var GroupVersion = schema.GroupVersion{Group: "echo.services.open-control-plane.io", Version: "v1alpha1"}

// schemeBuilder registers the types with apimachinery alone, so the API package stays
// cheap to import (no controller-runtime).
var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Echo{}, &EchoList{}, &ProviderConfig{}, &ProviderConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds Echo and ProviderConfig to a scheme.
func AddToScheme(s *runtime.Scheme) error { return schemeBuilder.AddToScheme(s) }

// EchoSpec is what a tenant asks for.
type EchoSpec struct {
	// Version of the echo worker, one of the names in the ProviderConfig's
	// spec.versions. Empty means the first (the platform team's default).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Version string `json:"version,omitempty"`

	// Message is what the worker answers every request with. The worker reads it from
	// this object through its kubeconfig, so a change takes effect without a redeploy.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// Echo is the echo service's Service API: a tenant creates one to get an echo worker.
// In standard mode it lives on the onboarding cluster, named like the tenant's
// ControlPlane; in kcp mode it lives in the tenant's workspace (one per workspace).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.identity`
type Echo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EchoSpec `json:"spec,omitempty"`
	// Status is written by the runtime: its own fields and the provider's.
	Status EchoStatus `json:"status,omitempty"`
}

// EchoStatus is the runtime's status and echo's own: the runtime writes both in one
// write per reconcile.
type EchoStatus struct {
	rtv1alpha1.ServiceStatus `json:",inline"`

	// Installed lists what the provider installed for this Echo, each with a phase.
	// +optional
	Installed []InstalledResource `json:"installed,omitempty"`
}

// InstalledResource is one object the echo provider installed for a tenant.
type InstalledResource struct {
	// Cluster is where it lives: workload or end-user.
	Cluster string `json:"cluster"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object, empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Phase in echo's words: Applied or Copied.
	Phase string `json:"phase"`
	// Message says more, for humans.
	// +optional
	Message string `json:"message,omitempty"`
}

// GetServiceStatus implements provider.Object.
func (e *Echo) GetServiceStatus() *rtv1alpha1.ServiceStatus { return &e.Status.ServiceStatus }

// EchoList is a list of Echo objects.
//
// +kubebuilder:object:root=true
type EchoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Echo `json:"items"`
}

// WorkerVersion is one version of the echo worker the platform team offers.
type WorkerVersion struct {
	// Name tenants put into spec.version, e.g. v1.2.0.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Image of the worker at this version.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// Replicas of the worker Deployment. Default 1.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Env are extra environment variables of the worker container (settings of this
	// version, e.g. a log level).
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`
}

// EnvVar is a plain name/value environment variable.
type EnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the variable.
	// +optional
	Value string `json:"value,omitempty"`
}

// ProviderConfigSpec is the platform team's configuration of the echo provider.
type ProviderConfigSpec struct {
	// Versions of the worker tenants may choose; the first is the default.
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=name
	Versions []WorkerVersion `json:"versions"`

	// ImagePullSecret names a Secret in the provider's namespace on the platform
	// cluster (e.g. of type kubernetes.io/dockerconfigjson) that the worker pulls its
	// image with: the provider copies it next to every tenant's worker.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ImagePullSecret string `json:"imagePullSecret,omitempty"`

	// PollInterval is how often a Ready object is reconciled again to repair drift on
	// the workload cluster. Default 1m.
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// KCP switches kcp mode on: tenants in kcp workspaces bind the provider's APIExport
	// and create Echo objects there. Without it only the onboarding cluster is served.
	// +optional
	KCP *rtv1alpha1.KCP `json:"kcp,omitempty"`
}

// ProviderConfig configures the echo provider. It is cluster-scoped, lives on the
// platform cluster and is named after the provider (the ServiceProvider's name).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:printcolumn:name="Default",type=string,JSONPath=`.spec.versions[0].name`
// +kubebuilder:printcolumn:name="KCP",type=string,JSONPath=`.spec.kcp.providerWorkspace`
// +kubebuilder:printcolumn:name="KCP Mode",type=string,JSONPath=`.status.conditions[?(@.type=="KCPMode")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="KCPMode")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProviderConfigSpec `json:"spec,omitempty"`
	// Status is written by the runtime only: whether kcp mode serves spec.kcp.
	Status rtv1alpha1.ProviderConfigStatus `json:"status,omitempty"`
}

// GetProviderConfigStatus implements provider.ProviderConfigStatuser.
func (c *ProviderConfig) GetProviderConfigStatus() *rtv1alpha1.ProviderConfigStatus {
	return &c.Status
}

// ProviderConfigList is a list of ProviderConfigs.
//
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// PollInterval implements provider.PollIntervaler.
func (c *ProviderConfig) PollInterval() time.Duration {
	if c.Spec.PollInterval == nil {
		return 0
	}
	return c.Spec.PollInterval.Duration
}

// KCPConfig implements provider.KCPConfigurer.
func (c *ProviderConfig) KCPConfig() *rtv1alpha1.KCP { return c.Spec.KCP }

// Validate implements provider.Validator: what the CRD schema cannot say.
func (c *ProviderConfig) Validate() error {
	if len(c.Spec.Versions) == 0 {
		return errors.New("spec.versions is empty: tenants would have no worker to run")
	}
	seen := map[string]bool{}
	var errs []error
	for i, v := range c.Spec.Versions {
		if v.Name == "" || v.Image == "" {
			errs = append(errs, fmt.Errorf("spec.versions[%d] needs name and image", i))
		}
		if seen[v.Name] {
			errs = append(errs, fmt.Errorf("spec.versions[%d]: version %q is listed twice", i, v.Name))
		}
		seen[v.Name] = true
	}
	return errors.Join(errs...)
}

// Version returns the worker version called name, or the default version for "".
func (c *ProviderConfig) Version(name string) (WorkerVersion, bool) {
	if name == "" && len(c.Spec.Versions) > 0 {
		return c.Spec.Versions[0], true
	}
	for _, v := range c.Spec.Versions {
		if v.Name == name {
			return v, true
		}
	}
	return WorkerVersion{}, false
}

// VersionNames lists the offered versions, for messages to tenants.
func (c *ProviderConfig) VersionNames() []string {
	names := make([]string, 0, len(c.Spec.Versions))
	for _, v := range c.Spec.Versions {
		names = append(names, v.Name)
	}
	return names
}
