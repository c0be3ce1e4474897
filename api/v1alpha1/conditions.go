package v1alpha1

// Condition types the runtime writes.
const (
	// ConditionReady is the summary condition every Service object carries.
	ConditionReady = "Ready"
	// ConditionWorkspaceAccess, in kcp mode, says that the runtime keeps the worker's
	// ServiceAccount and RBAC in the tenant's workspace. Deletion waits until they are
	// gone; it stays True until the object is.
	ConditionWorkspaceAccess = "WorkspaceAccess"
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
	// ReasonAccessRepaired: someone changed or deleted what the runtime keeps in the
	// tenant's workspace for the worker; the runtime restored it and is handing the
	// worker its access again.
	ReasonAccessRepaired = "AccessRepaired"
	// ReasonConflictingObject: an object of the name the runtime needs exists without
	// the runtime's managed-by label; the message says what to do.
	ReasonConflictingObject = "ConflictingObject"
	// ReasonCleanupBlocked: deletion cannot finish removing what the runtime created
	// (a permission claim was rejected, say); the message names what is left and how
	// to let the runtime finish.
	ReasonCleanupBlocked = "CleanupBlocked"
)

// Reasons of the WorkspaceAccess condition.
const (
	// ReasonProvisioned: the ServiceAccount and its RBAC exist in the workspace.
	ReasonProvisioned = "Provisioned"
)
