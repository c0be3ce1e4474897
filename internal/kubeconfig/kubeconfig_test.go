package kubeconfig

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func TestRenderRoundTrips(t *testing.T) {
	out, err := Render("platform", Server{URL: "https://example:6443/clusters/a", CAData: []byte("ca"), TLSServerName: "kcp", Insecure: false}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://example:6443/clusters/a" || cfg.BearerToken != "tok" || string(cfg.CAData) != "ca" || cfg.ServerName != "kcp" {
		t.Fatalf("kubeconfig does not carry server, token, CA and server name: %+v", cfg)
	}
}

// TestRESTConfigIsRenderParsed: Server.RESTConfig is what parsing the rendered
// kubeconfig gives, for a verified and an insecure server.
func TestRESTConfigIsRenderParsed(t *testing.T) {
	for _, s := range []Server{
		{URL: "https://example:6443/clusters/a", CAData: []byte("ca"), TLSServerName: "kcp"},
		{URL: "https://example:6443/clusters/b", Insecure: true},
	} {
		out, err := Render("x", s, "tok")
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := clientcmd.RESTConfigFromKubeConfig(out)
		if err != nil {
			t.Fatal(err)
		}
		got := s.RESTConfig("tok")
		if got.Host != parsed.Host || got.BearerToken != parsed.BearerToken || !bytes.Equal(got.CAData, parsed.CAData) ||
			got.ServerName != parsed.ServerName || got.Insecure != parsed.Insecure {
			t.Errorf("RESTConfig %+v, parsed kubeconfig %+v", got, parsed)
		}
	}
}

func TestRenderContexts(t *testing.T) {
	out, err := RenderContexts("admin", "tok", map[string]Server{"a": {URL: "https://x/clusters/a"}, "b": {URL: "https://x/clusters/b"}}, "b")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != "b" || len(raw.Contexts) != 2 || raw.Contexts["a"].AuthInfo != "admin" || raw.Clusters["b"].Server != "https://x/clusters/b" {
		t.Fatalf("unexpected kubeconfig: %+v", raw)
	}
}

func TestRenewAtIsFourFifths(t *testing.T) {
	issued := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if got, want := RenewAt(issued, issued.Add(10*time.Hour)), issued.Add(8*time.Hour); !got.Equal(want) {
		t.Fatalf("RenewAt = %s, want %s", got, want)
	}
	if !RenewAt(time.Time{}, issued).IsZero() || !RenewAt(issued, time.Time{}).IsZero() {
		t.Fatal("RenewAt of a zero time must be zero")
	}
}

// TestRenderNamespace: a worker's kubeconfig can name the namespace it works in, which
// clientcmd hands clients as the default namespace.
func TestRenderNamespace(t *testing.T) {
	out, err := Render("worker", Server{URL: "https://x/clusters/a", Namespace: "tenant-ns"}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := clientcmd.NewClientConfigFromBytes(out)
	if err != nil {
		t.Fatal(err)
	}
	if ns, _, err := cc.Namespace(); err != nil || ns != "tenant-ns" {
		t.Errorf("namespace %q, %v; want tenant-ns", ns, err)
	}
	plain, err := Render("worker", Server{URL: "https://x/clusters/a"}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	cc, err = clientcmd.NewClientConfigFromBytes(plain)
	if err != nil {
		t.Fatal(err)
	}
	if ns, _, err := cc.Namespace(); err != nil || ns != "default" {
		t.Errorf("namespace without one set %q, %v; want default", ns, err)
	}
}
