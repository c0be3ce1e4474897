// Package ownresources is a Service API type whose status has a resources field of its
// own shape beside the embedded v1alpha1.ServiceStatus, as openMCP's providers on
// opencontrolplane-runtime have (velero's, for example). Its CRD under crd/ is what
// `make generate` (controller-gen) makes of it; the test applies that CRD to a real API
// server and round-trips an object with the runtime's status and the type's own
// resources.
//
// +kubebuilder:object:generate=true
// +groupName=ownresources.test.open-control-plane.io
// +versionName=v1alpha1
package ownresources
