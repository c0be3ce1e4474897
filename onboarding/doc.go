// Package onboarding is standard mode: Service objects on the onboarding cluster,
// served as one degenerate workspace.
//
// The onboarding cluster is handed to the engine through multicluster-runtime's
// single-cluster provider under the name "onboarding", so the engine that serves kcp
// workspaces serves it unchanged. The tenant is the ControlPlane the object is named
// after; its end-user cluster is reached through an AccessRequest referencing the
// ControlPlane's existing ClusterRequest, exactly as openMCP's providers do today.
//
// NewMode assembles it and Mode.Register hands it to the engine, as workspaces does for
// kcp mode.
package onboarding
