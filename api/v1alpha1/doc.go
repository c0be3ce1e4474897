// Package v1alpha1 holds the API types the runtime shares with every provider: the
// status block a Service API object carries (written only by the runtime), and the
// `spec.kcp` section a kcp-capable provider embeds in its ProviderConfig.
//
// Providers embed these types instead of declaring their own so that the runtime can
// read and write them without reflection, and so that every provider's objects look the
// same to tenants and operators (same phases, same Ready condition, same kcp settings).
//
// +kubebuilder:object:generate=true
package v1alpha1
