package tokens

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"testing"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
)

// BenchmarkTenantAccessMemory reports the heap that one tenant's workspace access keeps
// (B/tenant): the Minter's cached credential and the tenant's Access built from it,
// for 500 tenants at once. "shared" builds the Access the way the runtime does, from
// the credential's REST config with the kubeconfig bytes shared; "parsed-copy" the way
// it did before, parsing a copy of the kubeconfig. The CA is a self-signed serving
// certificate and its CA as kcp generates them, the token a random string of a
// ServiceAccount token's length.
func BenchmarkTenantAccessMemory(b *testing.B) {
	ca, _, err := certutil.GenerateSelfSignedCertKey("kcp.example", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	direct := &rest.Config{Host: "https://kcp.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	for _, bc := range []struct {
		name  string
		build func(*Credential) (*cluster.Access, error)
	}{
		{"parsed-copy", func(c *Credential) (*cluster.Access, error) {
			return access.FromKubeconfig(bytes.Clone(c.Kubeconfig), nil, nil)
		}},
		{"shared", func(c *Credential) (*cluster.Access, error) {
			return access.FromConfig(c.RESTConfig(), c.Kubeconfig, nil, nil)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const tenants = 500
			for b.Loop() {
				kept := make([]any, 0, 2*tenants)
				before := liveHeap()
				for i := range tenants {
					name := fmt.Sprintf("tenant-%03d", i)
					kc, cfg, err := render(direct, direct.Host+"/clusters/"+name, name, randomToken(b))
					if err != nil {
						b.Fatal(err)
					}
					cred := &Credential{Kubeconfig: kc, config: cfg} // the Minter's cache entry
					a, err := bc.build(cred)
					if err != nil {
						b.Fatal(err)
					}
					kept = append(kept, cred, a)
				}
				b.ReportMetric(float64(liveHeap()-before)/tenants, "B/tenant")
				runtime.KeepAlive(kept)
			}
		})
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// randomToken is as long as a kcp ServiceAccount token (a JWT of about 1 KB).
func randomToken(b *testing.B) string {
	raw := make([]byte, 768)
	if _, err := rand.Read(raw); err != nil {
		b.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}
