// Package kubeconfig renders the token kubeconfigs the runtime and its local stand-ins
// hand out, and states when such a token is renewed.
//
// Tenant credentials, platform-service grants, the runtime's own direct-call token,
// the local platform's access Secrets and the local environment's kubeconfigs all
// carry a bearer token to one server; writing that shape, and the 80 % renewal rule
// openMCP uses for its access tokens, in one place keeps them from drifting apart.
// The package imports only client-go, so every layer may use it.
package kubeconfig
