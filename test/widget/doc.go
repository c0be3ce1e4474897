// Package widget is the test provider shared by the standard-mode integration tests and
// the kcp e2e tests: a Service API (Widget), a ProviderConfig (WidgetConfig) and a
// provider of a few lines. That one code serves both modes is part of what the tests
// prove, so the provider holds no finalizer, ProviderConfig, access, status or mode
// code.
//
// +kubebuilder:object:generate=true
// +groupName=widgets.services.open-control-plane.io
// +versionName=v1alpha1
package widget
