package localplatform

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
)

// TestPool runs two MCP API servers as one pool of targets sharing a ClusterProfile,
// first under the platform's own scheduler, then as the cluster provider behind the
// real scheduler (whose part the test plays), and checks which server backs each
// Cluster and that the access granted to it reaches that server and no other.
func TestPool(t *testing.T) {
	platformCfg := startAPIServer(t, "platform", true)
	servers := map[string]*rest.Config{"mcp": startAPIServer(t, "mcp", false), "mcp-b": startAPIServer(t, "mcp-b", false)}
	platform := newClient(t, platformCfg)
	mcp := []string{clustersv1alpha1.PURPOSE_MCP}
	addPool := func(t *testing.T, p *Platform) {
		for _, name := range []string{"mcp", "mcp-b"} {
			addTarget(t, p, TargetCluster{Name: name, Profile: "mcp", Purposes: mcp, Tenancy: clustersv1alpha1.TENANCY_EXCLUSIVE, Config: servers[name]})
		}
	}

	t.Run("Validation", func(t *testing.T) {
		p := newPlatform(t, platformCfg, Options{})
		addPool(t, p)
		for _, tc := range []TargetCluster{
			{Name: "shared", Profile: "mcp", Purposes: mcp, Config: servers["mcp"]},
			{Name: "other", Profile: "mcp", Purposes: []string{clustersv1alpha1.PURPOSE_WORKLOAD}, Tenancy: clustersv1alpha1.TENANCY_EXCLUSIVE, Config: servers["mcp"]},
			{Name: "bad", Profile: "Not_A_Label", Purposes: mcp, Config: servers["mcp"]},
		} {
			if err := p.AddCluster(tc); err == nil {
				t.Errorf("AddCluster(%s, profile %q, %s, %v) succeeded", tc.Name, tc.Profile, tc.Tenancy, tc.Purposes)
			}
		}
		for _, name := range []string{"mcp", "mcp-b"} {
			if got, want := p.ClusterProfileName(name), DefaultProfile+"-mcp"; got != want {
				t.Errorf("ClusterProfileName(%s) = %q, want %q", name, got, want)
			}
		}
	})

	t.Run("StandInScheduler", func(t *testing.T) {
		p := newPlatform(t, platformCfg, Options{})
		addPool(t, p)
		runPlatform(t, p)
		ctx := testContext(t)

		// Named by RegisterControlPlane: the second target, which is not the first
		// of the pool.
		if err := p.RegisterControlPlane(ctx, "cp1", "project-x", "mcp-b"); err != nil {
			t.Fatalf("RegisterControlPlane: %v", err)
		}
		ns, err := libutils.StableMCPNamespace("cp1", "project-x")
		if err != nil {
			t.Fatal(err)
		}
		c := expectBackedBy(t, platform, p, client.ObjectKey{Namespace: ns, Name: "cp1"}, "mcp-b")
		ar := poolAccessRequest(ns, "sp-access")
		ar.Spec.ClusterRef = &commonapi.ObjectReference{Name: c.Name, Namespace: c.Namespace}
		mustCreate(t, platform, ar)
		waitGranted(t, platform, ar)
		expectReachesOnly(t, platform, ar, servers, "mcp-b")

		// Unnamed: the least used, the first added among equals.
		crNS := createNamespace(t, platform, "pool")
		for i, want := range []string{"mcp", "mcp", "mcp-b"} {
			cr := &clustersv1alpha1.ClusterRequest{}
			cr.Name, cr.Namespace = fmt.Sprintf("unnamed-%d", i), crNS
			cr.Spec.Purpose = clustersv1alpha1.PURPOSE_MCP
			mustCreate(t, platform, cr)
			expectBackedBy(t, platform, p, client.ObjectKeyFromObject(cr), want)
		}
		mustDelete(t, platform, ar)
		waitGone(t, platform, ar)
	})

	t.Run("ClusterProviderOnly", func(t *testing.T) {
		// Another provider name and profile: nothing of the stand-in's above is ours.
		p := newPlatform(t, platformCfg, Options{ClusterProviderOnly: true, ProviderName: "pool", Profile: "pool"})
		addPool(t, p)
		profile := p.ClusterProfileName("mcp")
		ctx := testContext(t)
		ns := createNamespace(t, platform, "scheduled")

		// What RegisterControlPlane and the real scheduler create: the request naming
		// its target, the Cluster with the request's finalizer, and the AccessRequest
		// routed by the access-request controller. The platform does not run yet.
		named := scheduledRequest(t, platform, ns, "named", map[string]string{TargetAnnotation: "mcp-b"})
		namedCluster := scheduledCluster(t, platform, ns, "mcp-named", profile, named.FinalizerForCluster())
		ar := poolAccessRequest(ns, "early")
		ar.Labels = map[string]string{clustersv1alpha1.ProviderLabel: "pool", clustersv1alpha1.ProfileLabel: profile}
		ar.Spec.ClusterRef = &commonapi.ObjectReference{Name: namedCluster.Name, Namespace: ns}
		mustCreate(t, platform, ar)

		// Arriving before its Cluster is assigned, the AccessRequest waits.
		res, err := p.reconcileAccessRequest(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ar)})
		if err != nil || res.RequeueAfter <= 0 {
			t.Fatalf("reconciling an AccessRequest to an unassigned Cluster: result %+v, error %v; want a requeue and no error", res, err)
		}
		mustGet(t, platform, client.ObjectKeyFromObject(ar), ar)
		if ar.Status.Phase != clustersv1alpha1.REQUEST_PENDING || conditionReason(ar.Status.Conditions) != ReasonClusterNotAssigned {
			t.Fatalf("AccessRequest to an unassigned Cluster: phase %q, reason %q; want Pending, %s", ar.Status.Phase, conditionReason(ar.Status.Conditions), ReasonClusterNotAssigned)
		}

		start := time.Now()
		runPlatform(t, p)
		expectClusterBackedBy(t, platform, p, client.ObjectKeyFromObject(namedCluster), "mcp-b")
		waitGranted(t, platform, ar)
		t.Logf("AccessRequest granted %v after the platform started", time.Since(start).Round(time.Millisecond))
		expectReachesOnly(t, platform, ar, servers, "mcp-b")

		prof := &clustersv1alpha1.ClusterProfile{}
		mustGet(t, platform, client.ObjectKey{Name: profile}, prof)
		if prof.Labels[PoolLabel] != "mcp" || prof.Labels[TargetLabel] != "" || len(prof.Spec.SupportedVersions) != 1 || prof.Spec.ProviderRef.Name != "pool" {
			t.Errorf("ClusterProfile %s: labels %v, spec %+v; want one for the pool mcp", profile, prof.Labels, prof.Spec)
		}

		// Found through the request's status.cluster: named again, and not what the
		// least used (mcp) would be.
		viaStatus := scheduledRequest(t, platform, ns, "via-status", map[string]string{TargetAnnotation: "mcp-b"})
		before := viaStatus.DeepCopy()
		viaStatus.Status.Cluster = &commonapi.ObjectReference{Name: "mcp-via-status", Namespace: ns}
		viaStatus.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
		viaStatus.Status.ObservedGeneration = viaStatus.Generation
		if err := platform.Status().Patch(ctx, viaStatus, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		c := scheduledCluster(t, platform, ns, "mcp-via-status", profile, "")
		expectClusterBackedBy(t, platform, p, client.ObjectKeyFromObject(c), "mcp-b")

		// Unnamed: the least used.
		unnamed := scheduledRequest(t, platform, ns, "unnamed", nil)
		c = scheduledCluster(t, platform, ns, "mcp-unnamed", profile, unnamed.FinalizerForCluster())
		expectClusterBackedBy(t, platform, p, client.ObjectKeyFromObject(c), "mcp")

		mustDelete(t, platform, ar)
		waitGone(t, platform, ar)
	})
}

// poolAccessRequest asks for access to ConfigMaps in namespace pool-test.
func poolAccessRequest(ns, name string) *clustersv1alpha1.AccessRequest {
	ar := &clustersv1alpha1.AccessRequest{}
	ar.Name, ar.Namespace = name, ns
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Namespace: "pool-test",
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}}}}}}
	return ar
}

// scheduledRequest creates a ClusterRequest for purpose mcp.
func scheduledRequest(t *testing.T, c client.Client, ns, name string, annotations map[string]string) *clustersv1alpha1.ClusterRequest {
	t.Helper()
	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace, cr.Annotations = name, ns, annotations
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_MCP
	mustCreate(t, c, cr)
	return cr
}

// scheduledCluster creates an exclusive Cluster the way the openmcp-operator's
// scheduler does, with the finalizer of its request unless empty.
func scheduledCluster(t *testing.T, c client.Client, ns, name, profile, finalizer string) *clustersv1alpha1.Cluster {
	t.Helper()
	cl := &clustersv1alpha1.Cluster{}
	cl.Name, cl.Namespace = name, ns
	cl.Labels = map[string]string{clustersv1alpha1.DeleteWithoutRequestsLabel: "true"}
	if finalizer != "" {
		cl.Finalizers = []string{finalizer}
	}
	cl.Spec = clustersv1alpha1.ClusterSpec{Profile: profile, Purposes: []string{clustersv1alpha1.PURPOSE_MCP}, Tenancy: clustersv1alpha1.TENANCY_EXCLUSIVE}
	mustCreate(t, c, cl)
	return cl
}

// expectBackedBy waits until the ClusterRequest at key is granted and returns its
// Cluster, which must be backed by the target called want.
func expectBackedBy(t *testing.T, c client.Client, p *Platform, key client.ObjectKey, want string) *clustersv1alpha1.Cluster {
	t.Helper()
	cr := &clustersv1alpha1.ClusterRequest{}
	waitFor(t, 30*time.Second, "ClusterRequest "+key.String()+" granted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, cr)
		return cr.Status.IsGranted() && cr.Status.Cluster != nil, err
	})
	return expectClusterBackedBy(t, c, p, cr.Status.Cluster.NamespacedName(), want)
}

// expectClusterBackedBy waits until the Cluster at key is Ready with the endpoint of
// the target called want, recorded in its target label.
func expectClusterBackedBy(t *testing.T, c client.Client, p *Platform, key client.ObjectKey, want string) *clustersv1alpha1.Cluster {
	t.Helper()
	cl := &clustersv1alpha1.Cluster{}
	host := p.target(want).host
	waitFor(t, 30*time.Second, fmt.Sprintf("Cluster %s Ready, backed by target %s", key, want), func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, cl); err != nil {
			return false, err
		}
		ep, _ := cl.Status.Endpoints.Get(clustersv1alpha1.APISERVER_ENDPOINT_EXTERNAL)
		if got := cl.Labels[TargetLabel]; got != want || ep != host || cl.Status.Phase != clustersv1alpha1.CLUSTER_PHASE_READY {
			return false, fmt.Errorf("target %q, endpoint %q, phase %q", got, ep, cl.Status.Phase)
		}
		return true, nil
	})
	return cl
}

// expectReachesOnly creates a ConfigMap with the granted kubeconfig of ar and finds it
// on the server called want and on none of the others.
func expectReachesOnly(t *testing.T, c client.Client, ar *clustersv1alpha1.AccessRequest, servers map[string]*rest.Config, want string) {
	t.Helper()
	user := kubeconfigClient(t, accessSecret(t, c, ar))
	name := "from-" + ar.Name
	expectAllowed(t, "creating a ConfigMap with the access of "+ar.Name, func(ctx context.Context) error {
		_, err := user.CoreV1().ConfigMaps("pool-test").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	for server, cfg := range servers {
		err := newClient(t, cfg).Get(t.Context(), client.ObjectKey{Namespace: "pool-test", Name: name}, &corev1.ConfigMap{})
		switch {
		case server == want && err != nil:
			t.Errorf("ConfigMap created with the access of %s is not on server %s: %v", ar.Name, server, err)
		case server != want && !apierrors.IsNotFound(err):
			t.Errorf("ConfigMap created with the access of %s on server %s, want only on %s (err %v)", ar.Name, server, want, err)
		}
	}
}
