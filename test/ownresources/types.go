package ownresources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// GroupVersion of the test type.
var GroupVersion = schema.GroupVersion{Group: "ownresources.test.open-control-plane.io", Version: "v1alpha1"}

// AddToScheme adds the Gizmo types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Gizmo{}, &GizmoList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Gizmo is a Service API object.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=gizmos
// +kubebuilder:subresource:status
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GizmoSpec   `json:"spec,omitempty"`
	Status GizmoStatus `json:"status,omitempty"`
}

// GizmoSpec is what a tenant asks for.
type GizmoSpec struct {
	// Version to install.
	// +optional
	Version string `json:"version,omitempty"`
}

// GizmoStatus is the runtime's status with resources of the provider's own shape:
// encoding/json takes the shallower Resources, so ServiceStatus.Resources never
// reaches the wire.
type GizmoStatus struct {
	v1alpha1.ServiceStatus `json:",inline"`

	// Resources are what the provider installed, in its own words.
	// +optional
	Resources []InstalledObject `json:"resources,omitempty"`
}

// InstalledObject is the provider's shape of an installed object.
type InstalledObject struct {
	// Kind of the object.
	Kind string `json:"kind"`
	// Name of the object.
	Name string `json:"name"`
	// Phase of the object: Installed or Failed.
	// +kubebuilder:validation:Enum=Installed;Failed
	Phase string `json:"phase"`
	// Message says more, for humans.
	// +optional
	Message string `json:"message,omitempty"`
}

// GetServiceStatus implements provider.Object.
func (g *Gizmo) GetServiceStatus() *v1alpha1.ServiceStatus { return &g.Status.ServiceStatus }

// GizmoList is a list of Gizmos.
// +kubebuilder:object:root=true
type GizmoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gizmo `json:"items"`
}
