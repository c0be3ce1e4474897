// Package apiexport provisions a service provider's API surface in its kcp provider
// workspace: one APIResourceSchema per Service API CRD, an APIExport (apis.kcp.io/v1alpha2)
// that exports those resources and carries the permission claims the runtime needs
// ([RequiredPermissionClaims]), and the APIExportEndpointSlice a multicluster provider
// watches. The export derives from the same CRD the provider installs on the onboarding
// cluster: one API type, two delivery surfaces.
//
// [Provision] is safe on every start and from several replicas at once: schemas are
// named after a hash of their content (kcp never changes one), the export is merged
// with what others added and written with optimistic concurrency, and nothing is
// written when nothing changed. Its client needs, in the provider workspace, get and
// create on apiresourceschemas and apiexportendpointslices, get, create and update on
// apiexports, and bind on the export.
//
// The decisions and the tests: docs/design/tenant-credentials.md ("Provisioning the
// export").
package apiexport
