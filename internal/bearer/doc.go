// Package bearer holds a bearer token that expires: it fetches the token (a
// TokenRequest, or a Secret the platform keeps current), renews it by the one renewal
// rule of kubeconfig.RenewAt, and hands out a REST config whose every request carries
// the current token. Request is the one TokenRequest call of the runtime: every place
// that mints a ServiceAccount token builds it there, over its own transport.
package bearer
