// Package command holds the commands every provider binary shares: init and run, as
// the openmcp-operator calls them (flags --environment, --verbosity, --provider-name,
// --leader-elect, --metrics-bind-address, ...; environment POD_NAMESPACE and friends),
// and kcp-manifests, which prints the kcp objects the runtime provisions. The local
// command, which starts a whole platform on this machine, is package command/local: a
// binary that wants it passes it to Main, and one built for a platform does not link it.
//
// A provider describes itself once, as a [Provider] (its name, its generated CRD files
// and the runtime it builds), and its main function is command.Main(p). Everything else
// is derived from the CRDs: the Service API is the one labelled for the onboarding
// cluster, its storage version is the kind init registers at the ServiceProvider, its
// resource what run asks the platform for on the onboarding cluster, its group the
// default APIExport name. The reference provider's binary is cmd/kcp-serviceprovider
// (examples/echo); the provider cmd/kcp-serviceprovider-new writes is one from scratch.
// The flags use the standard library: a provider binary has no other command-line
// dependency.
package command
