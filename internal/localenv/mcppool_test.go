package localenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// TestMCPPool starts three MCP servers under the real openmcp-operator, registers a
// ControlPlane on each and checks that the access granted for each ControlPlane's
// request reaches its own server and no other.
func TestMCPPool(t *testing.T) {
	const n = 3
	env := newTestEnv(t, "mcppool")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var cps []types.NamespacedName
	for i := range n {
		cps = append(cps, types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("cp-%d", i)})
	}
	start := time.Now()
	p, err := env.StartPlatform(ctx, PlatformOptions{
		Clusters:      []string{PurposeMCP},
		MCPClusters:   n,
		LocalPlatform: localplatform.Options{Logger: testr.New(t)},
		ControlPlanes: cps,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("platform with %d MCP servers and %d ControlPlanes up in %s", n, n, time.Since(start).Round(100*time.Millisecond))
	if len(p.MCPs) != n || p.MCPs[0] != p.MCP {
		t.Fatalf("Platform.MCPs has %d servers (first is MCP: %t), want %d", len(p.MCPs), len(p.MCPs) > 0 && p.MCPs[0] == p.MCP, n)
	}
	for i, s := range p.MCPs {
		if got := p.TargetServer(MCPTargetName(i)); got != s {
			t.Errorf("TargetServer(%s) = %v, want MCPs[%d]", MCPTargetName(i), got, i)
		}
	}
	c, err := client.New(p.Platform.Config, client.Options{Scheme: localplatform.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}

	// One ClusterProfile for the pool: the one the operator's mapping for mcp names.
	profiles := &clustersv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, profiles, client.MatchingLabels{localplatform.PoolLabel: PurposeMCP}); err != nil {
		t.Fatal(err)
	}
	if len(profiles.Items) != 1 || profiles.Items[0].Name != p.Local.ClusterProfileName(PurposeMCP) {
		t.Errorf("ClusterProfiles of the pool mcp: %d, want just %s", len(profiles.Items), p.Local.ClusterProfileName(PurposeMCP))
	}

	perms := []clustersv1alpha1.PermissionsRequest{{Namespace: "demo", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create"}},
	}}}
	for i, cp := range cps {
		// The scheduler's Cluster for the ControlPlane, backed by the i-th server.
		ns, err := libutils.StableMCPNamespace(cp.Name, cp.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		cr := &clustersv1alpha1.ClusterRequest{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cp.Name}, cr); err != nil {
			t.Fatal(err)
		}
		if !cr.Status.IsGranted() || cr.Status.Cluster == nil {
			t.Fatalf("ClusterRequest of %s: phase %q, cluster %v", cp, cr.Status.Phase, cr.Status.Cluster)
		}
		host := waitClusterReady(ctx, t, c, cr.Status.Cluster.NamespacedName(), p.MCPs[i])
		cl := &clustersv1alpha1.Cluster{}
		if err := c.Get(ctx, cr.Status.Cluster.NamespacedName(), cl); err != nil {
			t.Fatal(err)
		}
		if got := cl.Labels[localplatform.TargetLabel]; got != MCPTargetName(i) || cl.Spec.Profile != p.Local.ClusterProfileName(PurposeMCP) {
			t.Errorf("Cluster of %s: target %q, profile %q; want %q, %q", cp, got, cl.Spec.Profile, MCPTargetName(i), p.Local.ClusterProfileName(PurposeMCP))
		}

		// Access to it, as the runtime orders for a tenant.
		ar := newAccessRequest(ns, "sp-access", cp.Name, perms)
		if err := c.Create(ctx, ar); err != nil {
			t.Fatal(err)
		}
		waitGranted(ctx, t, c, ar)
		s := &corev1.Secret{}
		if err := c.Get(ctx, ar.Status.SecretRef.NamespacedName(ar.Namespace), s); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[clustersv1alpha1.SecretKeyKubeconfig])
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSuffix(cfg.Host, "/") != host {
			t.Errorf("kubeconfig of %s points at %s, want %s", cp, cfg.Host, host)
		}
		name := "from-" + cp.Name
		tenant := kubernetes.NewForConfigOrDie(cfg)
		// Polled: the granted RBAC reaches the authorizer through an informer.
		if err := Poll(ctx, 20*time.Second, "creating ConfigMap "+name+" with the kubeconfig granted for "+cp.String(), func(ctx context.Context) error {
			_, err := tenant.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for j, srv := range p.MCPs {
			_, err := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().ConfigMaps("demo").Get(ctx, name, metav1.GetOptions{})
			switch {
			case j == i && err != nil:
				t.Errorf("ConfigMap %s is not on %s: %v", name, srv.Name, err)
			case j != i && !apierrors.IsNotFound(err):
				t.Errorf("ConfigMap %s of %s on %s too (err %v)", name, cp, srv.Name, err)
			}
		}
	}
}
