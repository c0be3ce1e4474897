// Package local is the local command: a whole openMCP platform on this machine (kcp,
// the API servers, the real openmcp-operator, stand-ins for the cluster provider and the
// kubelet) serving a provider in both modes, for `make run` and a provider author's
// first try. It is the only shipped package that starts servers (through
// internal/localenv), so a binary built for a platform leaves it out:
// command.Main(p) has init, run and kcp-manifests; command.Main(p, local.Command(p))
// adds local (cmd/kcp-serviceprovider-local).
package local
