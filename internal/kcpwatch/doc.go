// Package kcpwatch is kcp mode's machinery for watching through the APIExport's virtual
// workspaces, which package workspaces assembles: one watch of the Service objects of
// every bound workspace (SharedWatch), the watch of what the runtime keeps in each
// workspace (AccessWatch: its ServiceAccounts and RBAC, for the Minters' reads and the
// repair of tampering), and one REST mapper per virtual workspace (SharedDiscovery).
//
// None of it is a provider's or another module's business: the runtime's rooms name
// kcp mode through workspaces.NewMode alone.
package kcpwatch
