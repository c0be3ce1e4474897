// Package v1alpha1 is the greeter provider's API: the Service API a tenant creates
// (Greeter) and the ProviderConfig the platform team writes (GreeterConfig).
//
// +kubebuilder:object:generate=true
// +groupName=greeter.services.open-control-plane.io
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// GroupVersion of the greeter API.
var GroupVersion = schema.GroupVersion{Group: "greeter.services.open-control-plane.io", Version: "v1alpha1"}

var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Greeter{}, &GreeterList{}, &GreeterConfig{}, &GreeterConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds Greeter and GreeterConfig to a scheme.
func AddToScheme(s *runtime.Scheme) error { return schemeBuilder.AddToScheme(s) }

// GreeterSpec is what a tenant asks for: the greeter chart installed for it, greeting
// with Message.
type GreeterSpec struct {
	// Message is the chart's greeting (its ConfigMap's "message").
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// Greeter is the Service API.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
type Greeter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GreeterSpec              `json:"spec,omitempty"`
	Status rtv1alpha1.ServiceStatus `json:"status,omitempty"`
}

// GetServiceStatus implements provider.Object.
func (g *Greeter) GetServiceStatus() *rtv1alpha1.ServiceStatus { return &g.Status }

// GreeterList is a list of Greeters.
//
// +kubebuilder:object:root=true
type GreeterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Greeter `json:"items"`
}

// GreeterConfigSpec is the platform team's configuration: which chart every tenant
// gets. Changing ChartVersion rolls every tenant to it.
type GreeterConfigSpec struct {
	// KCP switches kcp mode on.
	KCP *rtv1alpha1.KCP `json:"kcp,omitempty"`
	// ChartURL is the chart's OCI repository, oci://<registry>/<path>/greeter.
	// +kubebuilder:validation:Pattern=`^oci://.+`
	ChartURL string `json:"chartURL"`
	// ChartVersion is the chart version (the OCI tag) every tenant is installed with.
	// +kubebuilder:validation:MinLength=1
	ChartVersion string `json:"chartVersion"`
	// Insecure pulls the chart over plain HTTP (a registry without TLS).
	Insecure bool `json:"insecure,omitempty"`
	// Interval is how often Flux looks at the chart and the release again. Default 1m.
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// GreeterConfig is the ProviderConfig, named like the provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
type GreeterConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GreeterConfigSpec               `json:"spec,omitempty"`
	Status rtv1alpha1.ProviderConfigStatus `json:"status,omitempty"`
}

// KCPConfig implements provider.KCPConfigurer.
func (c *GreeterConfig) KCPConfig() *rtv1alpha1.KCP { return c.Spec.KCP }

// GetProviderConfigStatus implements provider.ProviderConfigStatuser.
func (c *GreeterConfig) GetProviderConfigStatus() *rtv1alpha1.ProviderConfigStatus { return &c.Status }

// GreeterConfigList is a list of GreeterConfigs.
//
// +kubebuilder:object:root=true
type GreeterConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GreeterConfig `json:"items"`
}
