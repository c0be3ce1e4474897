package kubeconfig

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Server is an API server endpoint and how to trust it.
type Server struct {
	// URL is the server address, including any path (e.g. <kcp>/clusters/<cluster>).
	URL string
	// CAData is the PEM bundle that signs the server's certificate; empty trusts the
	// system roots.
	CAData []byte
	// TLSServerName overrides the name checked against the server's certificate.
	TLSServerName string
	// Insecure skips certificate verification (development servers only).
	Insecure bool
	// Namespace is the namespace of the server's context: where a kubectl or client
	// without one of its own works. Empty leaves it to the client (default).
	Namespace string
}

// Render returns a kubeconfig in which token reaches server under the context name
// (which also names the cluster and the user).
func Render(name string, server Server, token string) ([]byte, error) {
	return RenderContexts(name, token, map[string]Server{name: server}, name)
}

// RESTConfig is the REST config that parsing Render(name, s, token) gives, built
// without rendering and parsing: a caller that keeps many of them shares s.CAData
// among them instead of holding a parsed copy each.
func (s Server) RESTConfig(token string) *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData, ServerName: s.TLSServerName, Insecure: s.Insecure}}
}

// RenderContexts returns a kubeconfig with one user, named user and holding token, and
// one context per entry of servers (context name -> server; the context's cluster has
// the same name). current names the current context.
func RenderContexts(user, token string, servers map[string]Server, current string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	for name, s := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{
			Server:                   s.URL,
			CertificateAuthorityData: s.CAData,
			TLSServerName:            s.TLSServerName,
			InsecureSkipTLSVerify:    s.Insecure,
		}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: s.Namespace}
	}
	cfg.CurrentContext = current
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering kubeconfig for context %q: %w", current, err)
	}
	return out, nil
}

// RenewAt is when a token issued at issued and expiring at expires is renewed: after
// 80 % of its lifetime, as openMCP renews its access tokens (controller-utils'
// ComputeTokenRenewalTime). Zero when either time is zero.
func RenewAt(issued, expires time.Time) time.Time {
	if issued.IsZero() || expires.IsZero() {
		return time.Time{}
	}
	return issued.Add(expires.Sub(issued) * 4 / 5)
}
