// Package app holds the subcommands of the kcp-serviceprovider binary: init and run,
// as the openmcp-operator calls them (flags --environment, --verbosity,
// --provider-name, --leader-elect, --metrics-bind-address, ...; environment
// POD_NAMESPACE and friends), local, which starts a whole platform on this machine,
// and kcp-manifests, which prints the kcp objects the runtime provisions.
//
// The commands are generic over what a provider declares (examples/echo's NewRuntime
// and CRDs); a provider author copying the binary changes provider.go in this package
// and nothing else. The flags use the standard library: the binary has no other
// command-line dependency.
package command
