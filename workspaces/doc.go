// Package workspaces is kcp mode: Service objects in tenant workspaces bound to the
// provider's APIExport, served through the export's virtual workspace.
//
// The workspaces arrive through kcp mode's cluster provider (internal/kcpprovider),
// which engages a workspace when its APIBinding is ready and disengages it when the
// binding or the workspace goes. Each workspace is one tenant: its identity is its logical
// cluster name, and only its oldest Service object is served (the singleton rule); the
// others are told which object is active. The end-user cluster is the workspace itself,
// reached with a ServiceAccount token the runtime mints there (package tokens).
//
// NewMode assembles it for one kcp connection and Mode.Register hands it to the engine,
// as onboarding and platform-service mode do theirs; what it watches through the virtual
// workspaces is internal/kcpwatch's.
package workspaces
