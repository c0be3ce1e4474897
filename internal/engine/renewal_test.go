package engine

import (
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

func TestUntilRenewal(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *cluster.Access { return &cluster.Access{RenewAt: now.Add(d)} }
	for _, tc := range []struct {
		name   string
		d      time.Duration
		tenant *cluster.Tenant
		want   time.Duration
	}{
		{"no tenant", time.Minute, nil, time.Minute},
		{"no expiry", time.Minute, &cluster.Tenant{MCP: &cluster.Access{}}, time.Minute},
		{"renewal later than poll", time.Minute, &cluster.Tenant{MCP: at(time.Hour)}, time.Minute},
		{"mcp renews first", time.Minute, &cluster.Tenant{MCP: at(10 * time.Second), Workload: at(30 * time.Second)}, 10*time.Second + renewalSlack},
		{"workload renews first", time.Minute, &cluster.Tenant{MCP: at(40 * time.Second), Workload: at(20 * time.Second)}, 20*time.Second + renewalSlack},
		{"renewal overdue: retry, no hot loop", time.Minute, &cluster.Tenant{Workload: at(-time.Second)}, 5 * time.Second},
		{"no poll interval", 0, &cluster.Tenant{MCP: at(time.Hour)}, time.Hour + renewalSlack},
	} {
		if got := untilRenewal(tc.d, 5*time.Second, now, tc.tenant); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
