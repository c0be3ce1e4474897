// Package providerconfig loads the provider's ProviderConfig: cluster-scoped, on the
// platform cluster, named after the provider. It is read from the informer cache on
// every reconcile (cheap, always current) and its problems are typed, so the engine can
// show "missing" and "invalid" as distinct reasons on every Service object.
package providerconfig
