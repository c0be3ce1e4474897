package engine

import (
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// renewalSlack is how long after a credential's RenewAt the engine looks at the object
// again. The platform (or the token Minter, on the next Ensure) renews at RenewAt; the
// slack lets the new access Secret land first, so one reconcile picks it up.
const renewalSlack = time.Second

// untilRenewal bounds a requeue interval d by the earliest renewal time of the tenant's
// credentials, so that the provider is called again with a fresh kubeconfig before the
// one it handed to its workers expires. A renewal time already passed (the platform has
// not renewed yet) gives retry, not zero, so a late platform causes no hot loop.
func untilRenewal(d, retry time.Duration, now time.Time, tenant *cluster.Tenant) time.Duration {
	if tenant == nil {
		return d
	}
	for _, a := range []*cluster.Access{tenant.MCP, tenant.Worker, tenant.Workload} {
		if a == nil || a.RenewAt.IsZero() {
			continue
		}
		next := a.RenewAt.Sub(now) + renewalSlack
		if next <= renewalSlack {
			next = retry
		}
		if d <= 0 || next < d {
			d = next
		}
	}
	return d
}
