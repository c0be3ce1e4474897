package harness_test

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kcp-dev/logicalcluster/v3"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// TestAPIServers starts a platform and an onboarding API server side by side and
// checks what every later test relies on: the purpose's openMCP CRDs and only those,
// extra CRDs, TokenRequest, SelfSubjectReview, and a kubeconfig usable elsewhere.
func TestAPIServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	platform := harness.StartAPIServer(t, harness.PurposePlatform)
	onboarding := harness.StartAPIServer(t, harness.PurposeOnboarding, harness.WithCRDs(gadgetCRD()))

	t.Run("platform has the platform CRDs only", func(t *testing.T) {
		assertCRDs(ctx, t, platform, map[string]bool{
			"clusterrequests.clusters.openmcp.cloud":   true,
			"accessrequests.clusters.openmcp.cloud":    true,
			"clusters.clusters.openmcp.cloud":          true,
			"serviceproviders.openmcp.cloud":           true,
			"controlplanes.core.open-control-plane.io": false,
			"gadgets.test.open-control-plane.io":       false,
		})
		// The CRDs are served and the harness scheme knows their types.
		cr := &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: harness.PurposeWorkload},
		}
		if err := platform.Client.Create(ctx, cr); err != nil {
			t.Fatalf("creating a ClusterRequest: %v", err)
		}
	})

	t.Run("onboarding has the ControlPlane CRD and extra CRDs", func(t *testing.T) {
		assertCRDs(ctx, t, onboarding, map[string]bool{
			"controlplanes.core.open-control-plane.io": true,
			"gadgets.test.open-control-plane.io":       true,
			"clusterrequests.clusters.openmcp.cloud":   false,
		})
	})

	t.Run("TokenRequest and SelfSubjectReview", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"}}
		if err := platform.Client.Create(ctx, sa); err != nil {
			t.Fatalf("creating ServiceAccount: %v", err)
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
		if err := platform.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		if tr.Status.Token == "" {
			t.Fatal("TokenRequest returned no token")
		}
		// Only the server address and CA, the token does the rest.
		cfg := &rest.Config{
			Host:            platform.Config.Host,
			BearerToken:     tr.Status.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: platform.Config.CAData},
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatalf("clientset: %v", err)
		}
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectReview with the minted token: %v", err)
		}
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:default:probe"; got != want {
			t.Errorf("SelfSubjectReview user = %q, want %q", got, want)
		}
		// RBAC is on: the fresh ServiceAccount may not read Secrets.
		if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); err == nil {
			t.Error("a ServiceAccount without roles listed Secrets: RBAC is not enforced")
		}
	})

	t.Run("Kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(onboarding.Kubeconfig())
		if err != nil {
			t.Fatalf("parsing kubeconfig: %v", err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatalf("clientset: %v", err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("reading through the kubeconfig: %v", err)
		}
	})
}

// TestKCPRestart checks that a kcp restarted by the harness keeps its workspaces and
// that configs handed out before the restart keep working.
func TestKCPRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	kcp := harness.StartKCP(t, harness.WithFeatureGates("GlobalServiceAccount=true"))
	path, cluster := kcp.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "survivor")
	if cluster.Empty() {
		t.Fatal("CreateWorkspace returned no logical cluster name")
	}
	before := kcp.ConfigFor(path)

	kcp.Restart(t)

	cs, err := kubernetes.NewForConfig(before)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "after-restart"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("using a pre-restart config: %v", err)
	}
	// The logical cluster name addresses the same workspace as its path.
	byName := kcp.ClientFor(t, cluster.Path())
	if err := byName.Get(ctx, types.NamespacedName{Namespace: "default", Name: "after-restart"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("reading through the logical cluster name: %v", err)
	}
	ws := &tenancyv1alpha1.Workspace{}
	if err := kcp.ClientFor(t, logicalcluster.NewPath("root")).Get(ctx, types.NamespacedName{Name: "survivor"}, ws); err != nil {
		t.Fatalf("workspace after restart: %v", err)
	}
}

func assertCRDs(ctx context.Context, t *testing.T, s *harness.APIServer, want map[string]bool) {
	t.Helper()
	for name, present := range want {
		err := s.Client.Get(ctx, types.NamespacedName{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		switch {
		case present && err != nil:
			t.Errorf("%s API server: CRD %s missing: %v", s.Purpose, name, err)
		case !present && err == nil:
			t.Errorf("%s API server: CRD %s installed, but it belongs elsewhere", s.Purpose, name)
		}
	}
}

// gadgetCRD is a minimal namespaced CRD standing in for a provider's Service API.
func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.test.open-control-plane.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "test.open-control-plane.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type:                   "object",
						XPreserveUnknownFields: ptr.To(true),
					},
				},
			}},
		},
	}
}

// TestShardedKCP starts a kcp of two shards with its cache server and front-proxy,
// places a workspace on each shard and checks that the front-proxy reaches both
// while each shard serves only its own.
func TestShardedKCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	kcp := harness.StartKCP(t, harness.WithShards(2))
	for i, shard := range []string{"root", "shard-1"} {
		path, lc := kcp.CreateWorkspaceOn(ctx, t, logicalcluster.NewPath("root"), "on-"+shard, shard)
		// Through the front-proxy, by path.
		cs, err := kubernetes.NewForConfig(kcp.ConfigFor(path))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "placed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s through the front-proxy: %v", path, err)
		}
		// Directly on its shard, by logical cluster name; the other shard does not
		// have it.
		for j := range 2 {
			direct := kcp.ShardConfig(j)
			direct.Host += lc.Path().RequestPath()
			cs, err := kubernetes.NewForConfig(direct)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "placed", metav1.GetOptions{})
			if j == i && err != nil {
				t.Errorf("%s on its shard %s: %v", path, shard, err)
			}
			if j != i && err == nil {
				t.Errorf("%s (on %s) is served by shard %d too", path, shard, j)
			}
		}
	}
}
