package ops_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/ops"
)

func TestMain(m *testing.M) { harness.Main(m) }

// TestSecureMetrics serves metrics with Secure against a real platform API server,
// which authenticates and authorizes every scrape: a ServiceAccount allowed get on
// /metrics reads them (200), one without that right is refused (403), and a scrape
// without a token is not authenticated (401).
func TestSecureMetrics(t *testing.T) {
	ctx := t.Context()
	pf := harness.StartAPIServer(t, harness.PurposePlatform)
	cs, err := kubernetes.NewForConfig(pf.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "scraper"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ports, err := localenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- ops.Serve(serveCtx, ops.Options{MetricsBindAddress: addr, Metrics: ops.MetricsServing{Secure: true, CertDir: t.TempDir()}, Config: pf.Config})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// The certificate is self-signed (no tls.crt in CertDir): the scrapes do not
	// check it; that it is HTTPS at all is what the test asks.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(ctx context.Context, bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"a token allowed get on /metrics", scraper, http.StatusOK},
		{"a token without the right", stranger, http.StatusForbidden},
		{"no token", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			harness.Eventually(ctx, t, 30*time.Second, fmt.Sprintf("/metrics answering %d", tc.want), func(ctx context.Context) error {
				code, body, err := scrape(ctx, tc.token)
				if err != nil {
					return err
				}
				if code != tc.want {
					return fmt.Errorf("answered %d: %.200s", code, body)
				}
				if code == http.StatusOK && !strings.Contains(body, "# HELP") {
					return fmt.Errorf("200 without metrics: %.200s", body)
				}
				return nil
			})
		})
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the secure endpoint serves metrics over plain HTTP")
		}
	}
}
