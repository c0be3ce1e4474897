package v1alpha1

// Condition types the runtime writes.
const (
	// ConditionReady is the summary condition every Service object carries.
	ConditionReady = "Ready"
)

// Reasons of the Ready condition. They are part of the API: tenants and alert rules
// match on them.
const (
	ReasonReady                  = "Ready"
	ReasonProgressing            = "Progressing"
	ReasonProviderConfigMissing  = "ProviderConfigMissing"
	ReasonProviderConfigInvalid  = "ProviderConfigInvalid"
	ReasonWaitingForAccess       = "WaitingForAccess"
	ReasonAccessDenied           = "AccessDenied"
	ReasonWaitingForWorkload     = "WaitingForWorkloadCluster"
	ReasonWorkloadDenied         = "WorkloadClusterDenied"
	ReasonProviderError          = "ProviderError"
	ReasonRuntimeError           = "RuntimeError"
	ReasonNotSingleton           = "NotSingleton"
	ReasonPermissionClaimMissing = "PermissionClaimNotAccepted"
	ReasonDeleting               = "Deleting"
	ReasonIgnored                = "Ignored"
	// ReasonControlPlaneNotFound (standard mode): the ControlPlane the object is named
	// after does not exist on the platform (there is no ClusterRequest for it), so
	// nothing is ordered for the object. It is served once the ControlPlane exists; to
	// act, create the ControlPlane, or delete the object and create it under the name of
	// an existing ControlPlane of its namespace.
	ReasonControlPlaneNotFound = "ControlPlaneNotFound"
)
