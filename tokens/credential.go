package tokens

import (
	"fmt"
	"os"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// Credential is a workload's access to its tenant workspace. Token and Kubeconfig are
// secrets: the type's String, GoString and MarshalLog redact them, so printing or
// logging a Credential (or a pointer to one) never reveals them.
type Credential struct {
	// Cluster is the tenant's logical cluster.
	Cluster logicalcluster.Name
	// Token is the workload ServiceAccount's bearer token.
	Token string
	// Kubeconfig holds Token, the server <kcp>/clusters/<cluster> and the CA of the
	// runtime's direct connection. Every copy of a credential shares these bytes with
	// the Minter's cache: read them, never change them.
	Kubeconfig []byte
	// ExpiresAt is when kcp stops accepting Token.
	ExpiresAt time.Time
	// RenewAt is when the Minter hands out a new token (80 % of the lifetime); callers
	// that store the credential should come back by then.
	RenewAt time.Time
	// Repaired says, in a tenant's words, what the Ensure that returned this
	// credential had to restore because someone else changed or deleted it in the
	// workspace after the Minter had it in order. Empty on a first Ensure.
	Repaired []string

	// config is Kubeconfig as a REST config, its CA the bytes of the runtime's direct
	// config, which every tenant's config shares (RESTConfig).
	config *rest.Config
}

// RESTConfig returns a new REST config for the credential, as Kubeconfig would parse
// but without parsing it: each tenant's config would hold its own copy of the CA,
// about a third of the workspace credentials' memory at 500 workspaces
// (docs/design/scale.md). Nil for a Credential the Minter did not mint.
func (c *Credential) RESTConfig() *rest.Config {
	if c == nil || c.config == nil {
		return nil
	}
	return rest.CopyConfig(c.config)
}

const redacted = "<redacted>"

// String implements fmt.Stringer without the secrets.
func (c Credential) String() string {
	return fmt.Sprintf("Credential{Cluster: %s, Token: %s, Kubeconfig: %s, ExpiresAt: %s, RenewAt: %s}",
		c.Cluster, redacted, redacted, c.ExpiresAt.Format(time.RFC3339), c.RenewAt.Format(time.RFC3339))
}

// GoString implements fmt.GoStringer (%#v) without the secrets.
func (c Credential) GoString() string { return "tokens." + c.String() }

// MarshalLog implements logr.Marshaler without the secrets.
func (c Credential) MarshalLog() any {
	return struct {
		Cluster    string    `json:"cluster"`
		Token      string    `json:"token"`
		Kubeconfig string    `json:"kubeconfig"`
		ExpiresAt  time.Time `json:"expiresAt"`
		RenewAt    time.Time `json:"renewAt"`
	}{c.Cluster.String(), redacted, redacted, c.ExpiresAt, c.RenewAt}
}

// clone returns a copy whose fields a caller can set without changing the Minter's
// cache. Kubeconfig is shared, not copied: it is read only, and a copy per tenant
// client would double the memory of every workspace credential.
func (c Credential) clone() *Credential {
	c.Repaired = nil
	return &c
}

// withRepaired is clone with Repaired set.
func (c Credential) withRepaired(repaired []string) *Credential {
	out := c.clone()
	out.Repaired = repaired
	return out
}

// render renders the kubeconfig and the REST config for token at server, trusting what
// direct trusts.
func render(direct *rest.Config, server, cluster, token string) ([]byte, *rest.Config, error) {
	ca := direct.CAData
	if len(ca) == 0 && direct.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(direct.CAFile); err != nil {
			return nil, nil, fmt.Errorf("reading CA file of the direct config: %w", err)
		}
	}
	srv := kubeconfig.Server{URL: server, CAData: ca, TLSServerName: direct.ServerName, Insecure: direct.Insecure}
	kc, err := kubeconfig.Render(cluster, srv, token)
	if err != nil {
		return nil, nil, err
	}
	return kc, srv.RESTConfig(token), nil
}
