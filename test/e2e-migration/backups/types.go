// Package backups is the test provider of the migration suite, modelled on
// service-provider-velero: a Backup per ControlPlane, a ConfigMap on the workload
// cluster per tenant, and a status.resources of its own shape beside the runtime's
// fields. One Go type serves both binaries: opencontrolplane-runtime reads it through
// the accessors of its API interface, this runtime through GetServiceStatus.
package backups

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// GroupVersion of the Backup API.
var GroupVersion = schema.GroupVersion{Group: "backups.e2e.openmcp.cloud", Version: "v1alpha1"}

// Backup is the Service API.
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BackupSpec   `json:"spec,omitempty"`
	Status            BackupStatus `json:"status,omitempty"`
}

// BackupSpec says what to back up.
type BackupSpec struct {
	Schedule string `json:"schedule,omitempty"`
}

// BackupStatus has the runtime's fields and, as velero's, resources of its own shape:
// encoding/json takes the shallower Resources, so ServiceStatus.Resources never
// reaches the wire.
type BackupStatus struct {
	v1alpha1.ServiceStatus `json:",inline"`
	Resources              []ManagedObject `json:"resources,omitempty"`
}

// ManagedObject is velero's shape of an installed object.
type ManagedObject struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Phase     string `json:"phase"`
	Message   string `json:"message,omitempty"`
}

// BackupList lists Backups.
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

// BackupConfig is the ProviderConfig.
type BackupConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BackupConfigSpec `json:"spec,omitempty"`
}

// BackupConfigSpec configures every tenant's backups.
type BackupConfigSpec struct {
	Bucket string `json:"bucket,omitempty"`
}

// BackupConfigList lists BackupConfigs.
type BackupConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupConfig `json:"items"`
}

// GetServiceStatus is this runtime's accessor.
func (b *Backup) GetServiceStatus() *v1alpha1.ServiceStatus { return &b.Status.ServiceStatus }

// GetStatus, GetConditions, SetPhase, SetObservedGeneration and Finalizer are
// opencontrolplane-runtime's.
func (b *Backup) GetStatus() any                     { return b.Status }
func (b *Backup) GetConditions() *[]metav1.Condition { return &b.Status.Conditions }
func (b *Backup) SetPhase(p string)                  { b.Status.Phase = v1alpha1.Phase(p) }
func (b *Backup) SetObservedGeneration(g int64)      { b.Status.ObservedGeneration = g }
func (b *Backup) Finalizer() string                  { return GroupVersion.Group + "/finalizer" }

// PollInterval is opencontrolplane-runtime's: no periodic requeue.
func (c *BackupConfig) PollInterval() time.Duration { return 0 }

// The deep copies go through JSON: these types are small and only tests use them.
func deepCopy[T any](in *T) *T {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

func (b *Backup) DeepCopyObject() runtime.Object           { return deepCopy(b) }
func (l *BackupList) DeepCopyObject() runtime.Object       { return deepCopy(l) }
func (c *BackupConfig) DeepCopyObject() runtime.Object     { return deepCopy(c) }
func (l *BackupConfigList) DeepCopyObject() runtime.Object { return deepCopy(l) }

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Backup{}, &BackupList{}, &BackupConfig{}, &BackupConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
