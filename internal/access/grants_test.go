package access

import (
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// A granted access is read again at its token's renewal time, not every Recheck; a
// credential that names no expiry is read again every Recheck.
func TestGrantedAccessIsReadAgainAtItsRenewal(t *testing.T) {
	const recheck = 10 * time.Minute
	checked := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	renewing := grantedAccess{checkedAt: checked, access: &cluster.Access{RenewAt: checked.Add(48 * time.Minute)}}
	noExpiry := grantedAccess{checkedAt: checked, access: &cluster.Access{}}
	cases := []struct {
		name string
		g    grantedAccess
		at   time.Duration // after checked
		want bool
	}{
		{"renewing, past Recheck", renewing, 11 * time.Minute, false},
		{"renewing, just before its renewal", renewing, 48*time.Minute - time.Second, false},
		{"renewing, at its renewal", renewing, 48 * time.Minute, true},
		{"no expiry, within Recheck", noExpiry, 9 * time.Minute, false},
		{"no expiry, past Recheck", noExpiry, 10 * time.Minute, true},
	}
	for _, c := range cases {
		if got := c.g.stale(checked.Add(c.at), recheck); got != c.want {
			t.Errorf("%s: stale %v, want %v", c.name, got, c.want)
		}
	}
}
