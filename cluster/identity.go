package cluster

import (
	"fmt"

	ctrlutils "github.com/openmcp-project/controller-utils/pkg/controller"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
)

// Mode says where a Service object came from.
type Mode string

const (
	// ModeStandard serves objects on the onboarding cluster; the end-user cluster is the
	// tenant's MCP.
	ModeStandard Mode = "standard"
	// ModeKCP serves objects in kcp workspaces bound to the provider's APIExport; the
	// end-user cluster is the tenant's workspace.
	ModeKCP Mode = "kcp"
	// ModePlatform serves objects on the platform cluster itself (a service provider run
	// as a platform service); the end-user cluster is the platform cluster.
	ModePlatform Mode = "platform"
)

// Identity is the stable identity of one tenant. Names derived from it survive
// backup/restore (unlike UIDs) and are unique across tenants and modes.
type Identity struct {
	// Mode the tenant is served in.
	Mode Mode
	// Namespace and Name of the tenant's ControlPlane in standard mode (the Service object
	// is named like it); empty Namespace in kcp mode; the Service object's namespace in
	// platform mode (empty for a cluster-scoped Service API).
	Namespace string
	// Name is the ControlPlane name in standard mode, the logical cluster name in kcp
	// mode, and the Service object's name in platform mode.
	Name string
}

// StandardIdentity is the identity of a tenant's ControlPlane namespace/name.
func StandardIdentity(namespace, name string) Identity {
	return Identity{Mode: ModeStandard, Namespace: namespace, Name: name}
}

// KCPIdentity is the identity of a tenant workspace, by logical cluster name.
func KCPIdentity(logicalCluster string) Identity {
	return Identity{Mode: ModeKCP, Name: logicalCluster}
}

// PlatformIdentity is the identity of a Service object on the platform cluster (a
// service provider run as a platform service), by the object's namespace and name.
// The platform cluster is the one end-user cluster of that mode and serves one object at
// a time, so the object is the tenant: names derived from it are stable for the object's
// life, survive backup/restore (no UIDs), and a successor object gets fresh ones.
func PlatformIdentity(namespace, name string) Identity {
	return Identity{Mode: ModePlatform, Namespace: namespace, Name: name}
}

// String is what status and logs show: "namespace/name" or the logical cluster name.
func (i Identity) String() string {
	if i.Namespace == "" {
		return i.Name
	}
	return i.Namespace + "/" + i.Name
}

// IsZero says whether the identity is unset.
func (i Identity) IsZero() bool { return i.Name == "" }

// UUID is the SHAKE128-based UUIDv8 of the identity (the namespace ADR's scheme).
// Standard mode hashes "namespace/name" exactly as openMCP does for the ControlPlane,
// kcp mode hashes "kcp:<logical cluster>" so that a workspace can never collide with a
// ControlPlane; platform mode hashes "platform:<namespace>/<name>" (":" cannot occur in a
// Kubernetes namespace, so neither mode can collide with a ControlPlane, nor with each
// other).
func (i Identity) UUID() string {
	var parts []string
	switch i.Mode {
	case ModeStandard:
		parts = []string{i.Namespace, i.Name}
	case ModePlatform:
		parts = []string{string(ModePlatform) + ":" + i.Namespace + "/" + i.Name}
	default:
		parts = []string{string(i.Mode) + ":" + i.Name}
	}
	u, err := ctrlutils.K8sNameUUID(parts...)
	if err != nil {
		// K8sNameUUID only fails for empty input, which a valid identity never is.
		panic(fmt.Sprintf("identity %q: %v", i, err))
	}
	return u
}

// TenantNamespace is the tenant's namespace on the platform cluster (and the default for
// per-tenant namespaces elsewhere). In standard mode it equals openMCP's
// StableMCPNamespace, the namespace where the ControlPlane's requests already live.
func (i Identity) TenantNamespace() string {
	if i.Mode == ModeStandard {
		ns, err := libutils.StableMCPNamespace(i.Name, i.Namespace)
		if err != nil {
			panic(fmt.Sprintf("identity %q: %v", i, err))
		}
		return ns
	}
	return string(i.Mode) + "--" + i.UUID()
}

// StableName derives a name for a per-tenant object from prefix: "<prefix>-<uuid>",
// shortened with a hash to the 63 characters Kubernetes allows.
func (i Identity) StableName(prefix string) string {
	if prefix == "" {
		return i.UUID()
	}
	return ctrlutils.ShortenToXCharactersUnsafe(prefix+"-"+i.UUID(), ctrlutils.K8sMaxNameLength)
}
