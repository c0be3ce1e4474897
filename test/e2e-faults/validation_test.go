package e2efaults

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestMalformedKCPRejected: a real API server with the generated ProviderConfig CRD
// refuses a malformed spec.kcp with the message of the CRD's CEL rule, and the
// runtime's own check (v1alpha1.KCP.Validate, which the kcp supervisor applies) agrees with
// the API server on every case.
func TestMalformedKCPRejected(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	srv := harness.StartAPIServer(t, harness.PurposePlatform, harness.WithCRDs(configCRD))
	c, err := client.New(srv.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	good := v1alpha1.KCP{ProviderWorkspace: "root:org:services", KubeconfigSecret: v1alpha1.SecretReference{Name: "kcp-kubeconfig", Namespace: "openmcp-system"}}
	for i, tc := range []struct {
		name   string
		mutate func(*v1alpha1.KCP)
		// want is a part of the message; empty means accepted.
		want string
	}{
		{"valid", func(*v1alpha1.KCP) {}, ""},
		{"valid logical cluster name and key", func(k *v1alpha1.KCP) {
			k.ProviderWorkspace = "2x5abc7qjyh1wq"
			k.KubeconfigSecret.Key = "admin.kubeconfig"
		}, ""},
		{"upper case workspace", func(k *v1alpha1.KCP) { k.ProviderWorkspace = "Root:Org" }, "providerWorkspace must be a kcp workspace path"},
		{"empty path segment", func(k *v1alpha1.KCP) { k.ProviderWorkspace = "root::services" }, "providerWorkspace must be a kcp workspace path"},
		{"slash instead of colon", func(k *v1alpha1.KCP) { k.ProviderWorkspace = "root/org" }, "providerWorkspace must be a kcp workspace path"},
		{"segment too long", func(k *v1alpha1.KCP) { k.ProviderWorkspace = "root:" + strings.Repeat("a", 64) }, "at most 63 characters"},
		{"secret name with slash", func(k *v1alpha1.KCP) { k.KubeconfigSecret.Name = "a/b" }, "kubeconfigSecret.name must be a Secret name"},
		{"namespace with dot", func(k *v1alpha1.KCP) { k.KubeconfigSecret.Namespace = "openmcp.system" }, "kubeconfigSecret.namespace must be a namespace name"},
		{"key with slash", func(k *v1alpha1.KCP) { k.KubeconfigSecret.Key = "dir/kubeconfig" }, "kubeconfigSecret.key must be a Secret data key"},
		{"key dot-dot (found by FuzzValidateKCP)", func(k *v1alpha1.KCP) { k.KubeconfigSecret.Key = ".." }, "kubeconfigSecret.key must be a Secret data key"},
		{"key starting with dot-dot (found by FuzzValidateKCP)", func(k *v1alpha1.KCP) { k.KubeconfigSecret.Key = "..0" }, "kubeconfigSecret.key must be a Secret data key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := good
			tc.mutate(&k)
			pc := &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pc-%d", i)}, Spec: widget.WidgetConfigSpec{KCP: &k}}
			err := c.Create(ctx, pc)
			local := k.Validate()
			if tc.want == "" {
				if err != nil || local != nil {
					t.Fatalf("want accepted; API server: %v; Validate: %v", err, local)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("API server: want Invalid with %q, got %v", tc.want, err)
			}
			if local == nil || !strings.Contains(local.Error(), tc.want) {
				t.Fatalf("Validate: want %q, got %v", tc.want, local)
			}
			t.Logf("API server says: %v", err)
		})
	}
}
