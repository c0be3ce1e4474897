package v1alpha1

// Condition types the runtime writes.
const (
	// ConditionReady is the summary condition every Service object carries.
	ConditionReady = "Ready"
	// ConditionWorkspaceAccess, in kcp mode, says that the runtime keeps the worker's
	// ServiceAccount and RBAC in the tenant's workspace. Deletion waits until they are
	// gone; it stays True until the object is.
	ConditionWorkspaceAccess = "WorkspaceAccess"

	// ConditionKCPMode is the ProviderConfig's condition about kcp mode (see
	// ProviderConfigStatus). Its status says whether kcp mode serves tenants; its reason
	// whether it does so with the current `spec.kcp`:
	//   - True, ReasonKCPActive: serving with the current spec.kcp.
	//   - True, a failure reason below: serving with the configuration that last worked,
	//     while the current one fails for that reason (kcp mode is degraded: a change of
	//     spec.kcp or its Secret is not applied).
	//   - True, ReasonVirtualWorkspaceNotWatched: serving, except the tenants of a kcp
	//     shard whose virtual workspace cannot be watched yet (retried).
	//   - True, ReasonAPIReleaseHeld: serving through an APIExport of a newer API
	//     release, whose schemas this binary left as they are.
	//   - False, a failure reason: not serving; the current spec.kcp never worked in
	//     this process.
	//   - False, ReasonKCPNotConfigured: spec.kcp is not set.
	ConditionKCPMode = "KCPMode"

	// ConditionAPIUpgrade is the ProviderConfig's condition about the provider's API,
	// written by init each time it runs (each rollout):
	//   - True, ReasonAPIInstalled: init installed this release's CRDs (or left newer
	//     ones as they are).
	//   - False, ReasonAPIChangeRefused: the pre-flight check refused a change (package
	//     apichange); the CRDs stay as they were, init fails, and the running replicas
	//     keep serving.
	ConditionAPIUpgrade = "APIUpgrade"
)

// Reasons of the APIUpgrade condition.
const (
	ReasonAPIInstalled     = "APIInstalled"
	ReasonAPIChangeRefused = "APIChangeRefused"
)

// Reasons of the KCPMode condition, and of the events on the ProviderConfig. Alert rules
// match on them.
const (
	ReasonKCPActive        = "Active"
	ReasonKCPNotConfigured = "NotConfigured"
	// ReasonKCPKubeconfigInvalid: the kubeconfig Secret is missing, lacks the key, or
	// holds no usable kubeconfig.
	ReasonKCPKubeconfigInvalid = "KCPKubeconfigInvalid"
	// ReasonKCPCredentialsInvalid: kcp refuses the kubeconfig's credentials (401).
	ReasonKCPCredentialsInvalid = "KCPCredentialsInvalid"
	// ReasonProviderWorkspaceInaccessible: kcp refuses the identity the provider
	// workspace. kcp answers a workspace that does not exist and one the identity may
	// not enter alike (403), so the reason covers both: a typo in
	// spec.kcp.providerWorkspace, a deleted workspace, or a kubeconfig of another
	// workspace's identity.
	ReasonProviderWorkspaceInaccessible = "ProviderWorkspaceInaccessible"
	// ReasonKCPPermissionDenied: the identity enters the provider workspace but lacks a
	// permission the runtime needs there (e.g. on APIExports).
	ReasonKCPPermissionDenied = "KCPPermissionDenied"
	// ReasonKCPUnreachable: no answer from the kcp server in the kubeconfig.
	ReasonKCPUnreachable = "KCPUnreachable"
	// ReasonKCPStartFailed: any other failure to start kcp mode (e.g. provisioning the
	// APIExport).
	ReasonKCPStartFailed = "KCPStartFailed"
	// ReasonAPIReleaseHeld (status True): kcp mode serves, through an APIExport that
	// carries a newer API release than this binary's, whose schemas it left as they
	// are (an older replica mid-rollout, a rollback without --allow-api-downgrade);
	// also when re-checking the export failed.
	ReasonAPIReleaseHeld = "APIReleaseHeld"
	// ReasonVirtualWorkspaceNotWatched (with status True): kcp mode runs, but a
	// virtual workspace the APIExportEndpointSlice lists (one kcp shard's) cannot be
	// watched yet, so the tenants on that shard are not served; the runtime retries
	// with backoff, and the message names the URL and the last error.
	ReasonVirtualWorkspaceNotWatched = "VirtualWorkspaceNotWatched"
)

// Reasons of the Ready condition. They are part of the API: tenants and alert rules
// match on them.
const (
	ReasonReady                 = "Ready"
	ReasonProgressing           = "Progressing"
	ReasonProviderConfigMissing = "ProviderConfigMissing"
	ReasonProviderConfigInvalid = "ProviderConfigInvalid"
	ReasonWaitingForAccess      = "WaitingForAccess"
	ReasonAccessDenied          = "AccessDenied"
	ReasonWaitingForWorkload    = "WaitingForWorkloadCluster"
	ReasonWorkloadDenied        = "WorkloadClusterDenied"
	// ReasonAccessNotGranted and ReasonWorkloadNotGranted: the platform has left the
	// request pending for longer than a grant takes (openMCP's controllers write no
	// Denied phase: a request they cannot serve stays Pending). The message quotes what
	// the platform says; the runtime keeps waiting and asks the platform again.
	ReasonAccessNotGranted   = "AccessNotGranted"
	ReasonWorkloadNotGranted = "WorkloadClusterNotGranted"
	ReasonProviderError      = "ProviderError"
	// ReasonProviderRejected: the provider returned a terminal error (provider.Terminal):
	// bad input that retrying cannot fix; the runtime waits for the object or the
	// ProviderConfig to change.
	ReasonProviderRejected = "ProviderRejected"
	// ReasonProviderPanic: the provider panicked; the runtime recovered, keeps serving
	// everyone else and retries this object with backoff.
	ReasonProviderPanic          = "ProviderPanic"
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
	// ReasonRoleMissing (kcp mode): a ClusterRole or Role the provider binds its
	// credential to (a RoleRef of its declared permissions) does not exist in the
	// workspace; the message names it. Served once it exists.
	ReasonRoleMissing = "RoleMissing"
	// ReasonNamespaceMissing (kcp mode): the provider declares permissions for a
	// namespace the workspace does not have; the message names it. The runtime
	// creates no namespace in a tenant's workspace. Served once it exists.
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonCleanupBlocked: deletion cannot finish removing what the runtime created
	// (a permission claim was rejected, say); the message names what is left and how
	// to let the runtime finish.
	ReasonCleanupBlocked = "CleanupBlocked"
	// ReasonControlPlaneNotFound (standard mode): the ControlPlane the object is named
	// after does not exist on the platform (there is no ClusterRequest for it), so
	// nothing is ordered for the object. It is served once the ControlPlane exists; to
	// act, create the ControlPlane, or delete the object and create it under the name of
	// an existing ControlPlane of its namespace.
	ReasonControlPlaneNotFound = "ControlPlaneNotFound"
)

// Reasons of the WorkspaceAccess condition.
const (
	// ReasonProvisioned: the ServiceAccount and its RBAC exist in the workspace.
	ReasonProvisioned = "Provisioned"
)
