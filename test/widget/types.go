package widget

import (
	"errors"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// GroupVersion of the test Service API.
var GroupVersion = schema.GroupVersion{Group: "widgets.services.open-control-plane.io", Version: "v1alpha1"}

// schemeBuilder registers the types with apimachinery alone, so the API package stays
// cheap to import (no controller-runtime).
var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{}, &WidgetConfig{}, &WidgetConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds the Widget types.
func AddToScheme(s *runtime.Scheme) error { return schemeBuilder.AddToScheme(s) }

// WidgetSpec is what a tenant asks for.
type WidgetSpec struct {
	// Color of the widget.
	Color string `json:"color,omitempty"`
	// Fail makes the provider fail with this message (tests the error path).
	// +optional
	Fail string `json:"fail,omitempty"`
	// Terminal makes Fail a terminal error (provider.Terminal): not retried until the
	// widget or its configuration changes.
	// +optional
	Terminal bool `json:"terminal,omitempty"`
	// Panic makes the provider panic with this value (tests the runtime's recovery).
	// +optional
	Panic string `json:"panic,omitempty"`
}

// Widget is the test Service API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.identity`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetStatus is the runtime's status and the widget's own: the runtime writes both
// in one write, the provider fills Parts.
type WidgetStatus struct {
	v1alpha1.ServiceStatus `json:",inline"`

	// Parts are what the provider installed for the widget, each with a phase of the
	// provider's own words.
	// +optional
	// +listType=map
	// +listMapKey=name
	Parts []WidgetPart `json:"parts,omitempty"`
}

// WidgetPart is one installed part of a widget.
type WidgetPart struct {
	// Name of the part.
	Name string `json:"name"`
	// Phase of the part: Installed, Copied or Skipped.
	Phase string `json:"phase"`
	// Message says more, for humans.
	// +optional
	Message string `json:"message,omitempty"`
}

// GetServiceStatus implements provider.Object.
func (w *Widget) GetServiceStatus() *v1alpha1.ServiceStatus { return &w.Status.ServiceStatus }

// WidgetList is a list of Widgets.
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// WidgetConfigSpec is the platform team's configuration.
type WidgetConfigSpec struct {
	// Greeting is written into every tenant's widget ConfigMap.
	Greeting string `json:"greeting,omitempty"`
	// PullSecret names a Secret in the provider's namespace on the platform cluster that
	// every tenant's widget gets a copy of, as real providers copy image pull secrets.
	// +optional
	PullSecret string `json:"pullSecret,omitempty"`
	// PollInterval between reconciles of Ready objects.
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// KCP switches kcp mode on.
	// +optional
	KCP *v1alpha1.KCP `json:"kcp,omitempty"`
}

// WidgetConfig is the test ProviderConfig.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="KCP Workspace",type=string,JSONPath=`.spec.kcp.providerWorkspace`
// +kubebuilder:printcolumn:name="KCP Mode",type=string,JSONPath=`.status.conditions[?(@.type=="KCPMode")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="KCPMode")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WidgetConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetConfigSpec              `json:"spec,omitempty"`
	Status v1alpha1.ProviderConfigStatus `json:"status,omitempty"`
}

// GetProviderConfigStatus implements provider.ProviderConfigStatuser.
func (c *WidgetConfig) GetProviderConfigStatus() *v1alpha1.ProviderConfigStatus {
	return &c.Status
}

// PollInterval implements provider.PollIntervaler.
func (c *WidgetConfig) PollInterval() time.Duration {
	if c.Spec.PollInterval == nil {
		return 0
	}
	return c.Spec.PollInterval.Duration
}

// Validate implements provider.Validator: a widget needs a greeting.
func (c *WidgetConfig) Validate() error {
	if strings.TrimSpace(c.Spec.Greeting) == "" {
		return errors.New("spec.greeting is empty")
	}
	return nil
}

// KCPConfig implements provider.KCPConfigurer.
func (c *WidgetConfig) KCPConfig() *v1alpha1.KCP { return c.Spec.KCP }

// WidgetConfigList is a list of WidgetConfigs.
// +kubebuilder:object:root=true
type WidgetConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WidgetConfig `json:"items"`
}
