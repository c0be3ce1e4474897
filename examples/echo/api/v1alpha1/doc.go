// Package v1alpha1 is the API of the echo service: the Service API a tenant creates
// (Echo, group echo.services.open-control-plane.io) and the ProviderConfig the platform
// team writes.
//
// One Go type serves both delivery surfaces: controller-gen turns Echo into the CRD
// installed on the onboarding cluster, and the runtime converts that same CRD into the
// APIResourceSchema it exports into kcp. Keeping a single type is what lets the
// provider's code stay identical in both modes.
//
// +kubebuilder:object:generate=true
// +groupName=echo.services.open-control-plane.io
// +versionName=v1alpha1
package v1alpha1
