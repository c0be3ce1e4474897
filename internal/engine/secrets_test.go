package engine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// In kcp mode the runtime keeps each end-user kubeconfig in a platform Secret a
// HelmRelease can name: written once, rewritten when the token is renewed, untouched
// while it is not, and removed with the tenant's access.
func TestKubeconfigSecretsFollowTheToken(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	writes := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes++
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	s := newKubeconfigSecrets(c, "greeter")
	const ns = "kcp--tenant"
	mcp := &cluster.Access{Kubeconfig: []byte("token-1")}
	worker := &cluster.Access{Kubeconfig: []byte("worker-token-1")}
	tenant := &cluster.Tenant{MCP: mcp, Worker: worker}
	if err := s.publish(ctx, ns, tenant); err != nil {
		t.Fatal(err)
	}
	if tenant.MCP.Secret == nil || *tenant.MCP.Secret != (cluster.SecretRef{Namespace: ns, Name: "greeter--mcp-kubeconfig", Key: "kubeconfig"}) {
		t.Fatalf("MCP Secret = %+v", tenant.MCP.Secret)
	}
	if tenant.Worker.Secret == nil || tenant.Worker.Secret.Name != "greeter--worker-kubeconfig" {
		t.Fatalf("worker Secret = %+v", tenant.Worker.Secret)
	}
	if mcp.Secret != nil {
		t.Error("the mode's shared Access was changed; publish must copy it")
	}
	read := func(name string) string {
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
			t.Fatal(err)
		}
		return string(sec.Data["kubeconfig"])
	}
	if got := read("greeter--mcp-kubeconfig"); got != "token-1" || writes != 2 {
		t.Fatalf("after the first publish: Secret holds %q after %d writes, want token-1 after 2", got, writes)
	}

	// An unchanged token costs nothing.
	if err := s.publish(ctx, ns, &cluster.Tenant{MCP: mcp, Worker: worker}); err != nil || writes != 2 {
		t.Fatalf("steady publish: err %v, %d writes, want 2", err, writes)
	}
	// A renewed one reaches the Secret.
	if err := s.publish(ctx, ns, &cluster.Tenant{MCP: &cluster.Access{Kubeconfig: []byte("token-2")}, Worker: worker}); err != nil {
		t.Fatal(err)
	}
	if got := read("greeter--mcp-kubeconfig"); got != "token-2" || writes != 3 {
		t.Fatalf("after renewal: Secret holds %q after %d writes, want token-2 after 3", got, writes)
	}
	// A restarted runtime reads before it writes.
	if err := newKubeconfigSecrets(c, "greeter").publish(ctx, ns, &cluster.Tenant{MCP: &cluster.Access{Kubeconfig: []byte("token-2")}}); err != nil || writes != 3 {
		t.Fatalf("publish after a restart: err %v, %d writes, want 3", err, writes)
	}
	// An access the platform already keeps in a Secret (standard mode) is left alone.
	own := &cluster.Access{Kubeconfig: []byte("ar"), Secret: &cluster.SecretRef{Namespace: ns, Name: "ar-secret", Key: "kubeconfig"}}
	std := &cluster.Tenant{MCP: own, Worker: own}
	if err := s.publish(ctx, ns, std); err != nil || std.MCP != own || writes != 3 {
		t.Fatalf("standard access: err %v, changed %v, %d writes", err, std.MCP != own, writes)
	}

	if err := s.remove(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"greeter--mcp-kubeconfig", "greeter--worker-kubeconfig"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s after remove: %v, want NotFound", name, err)
		}
	}
	if err := s.remove(ctx, ns); err != nil {
		t.Errorf("removing twice: %v", err)
	}
}
