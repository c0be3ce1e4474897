// Package v1alpha1 is the scratch provider's API: the Service API a tenant creates
// (Note) and the ProviderConfig the platform team writes (NoteConfig).
//
// +kubebuilder:object:generate=true
// +groupName=notes.scratch.open-control-plane.io
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// GroupVersion of the notes API.
var GroupVersion = schema.GroupVersion{Group: "notes.scratch.open-control-plane.io", Version: "v1alpha1"}

// schemeBuilder registers the types with apimachinery alone, so the API package stays
// cheap to import.
var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Note{}, &NoteList{}, &NoteConfig{}, &NoteConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds Note and NoteConfig to a scheme.
func AddToScheme(s *runtime.Scheme) error { return schemeBuilder.AddToScheme(s) }

// NoteSpec is what a tenant asks for: a text, kept for it on the workload cluster.
type NoteSpec struct {
	// +kubebuilder:validation:MaxLength=1024
	Text string `json:"text,omitempty"`
}

// Note is the Service API.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
type Note struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NoteSpec                 `json:"spec,omitempty"`
	Status rtv1alpha1.ServiceStatus `json:"status,omitempty"`
}

// GetServiceStatus implements provider.Object.
func (n *Note) GetServiceStatus() *rtv1alpha1.ServiceStatus { return &n.Status }

// NoteList is a list of Notes.
//
// +kubebuilder:object:root=true
type NoteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Note `json:"items"`
}

// NoteConfigSpec is the platform team's configuration.
type NoteConfigSpec struct {
	// KCP switches kcp mode on.
	KCP *rtv1alpha1.KCP `json:"kcp,omitempty"`
}

// NoteConfig is the ProviderConfig, named like the provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
type NoteConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NoteConfigSpec                  `json:"spec,omitempty"`
	Status rtv1alpha1.ProviderConfigStatus `json:"status,omitempty"`
}

// KCPConfig implements provider.KCPConfigurer.
func (c *NoteConfig) KCPConfig() *rtv1alpha1.KCP { return c.Spec.KCP }

// GetProviderConfigStatus implements provider.ProviderConfigStatuser.
func (c *NoteConfig) GetProviderConfigStatus() *rtv1alpha1.ProviderConfigStatus { return &c.Status }

// NoteConfigList is a list of NoteConfigs.
//
// +kubebuilder:object:root=true
type NoteConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NoteConfig `json:"items"`
}
