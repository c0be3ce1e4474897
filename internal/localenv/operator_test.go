package localenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// TestRealOperator runs the real openmcp-operator's scheduler and access-request
// controller with the local platform as the cluster provider, and follows a workload
// cluster from request to a working kubeconfig and back.
func TestRealOperator(t *testing.T) {
	env := newTestEnv(t, "operator")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	p, err := env.StartPlatform(ctx, PlatformOptions{
		Clusters:      []string{PurposeWorkload, PurposeMCP},
		LocalPlatform: localplatform.Options{Logger: testr.New(t)},
		ControlPlanes: []types.NamespacedName{{Namespace: "default", Name: "demo"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(p.Platform.Config, client.Options{Scheme: localplatform.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The ControlPlane's request, granted by the scheduler with an exclusive Cluster
	// that the local platform backs with the MCP server.
	mcpNS, err := libutils.StableMCPNamespace("demo", "default")
	if err != nil {
		t.Fatal(err)
	}
	mcpReq := &clustersv1alpha1.ClusterRequest{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: "demo"}, mcpReq); err != nil {
		t.Fatal(err)
	}
	if !mcpReq.Status.IsGranted() || mcpReq.Status.Cluster == nil || mcpReq.Status.Cluster.Namespace != mcpNS || !strings.HasPrefix(mcpReq.Status.Cluster.Name, "mcp-") {
		t.Fatalf("ControlPlane's ClusterRequest: phase %q, cluster %v; want Granted with an exclusive Cluster mcp-* in %s", mcpReq.Status.Phase, mcpReq.Status.Cluster, mcpNS)
	}
	waitClusterReady(ctx, t, c, mcpReq.Status.Cluster.NamespacedName(), p.MCP)
	const ns = "tenant-a"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// The scheduler grants the request by creating the Cluster, labelled to go with
	// its last request; the local platform reports it Ready at the workload server.
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"}}
	cr.Spec.Purpose = PurposeWorkload
	start := time.Now()
	if err := c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	waitGranted(ctx, t, c, cr)
	t.Logf("ClusterRequest granted by the scheduler after %s", time.Since(start).Round(time.Millisecond))
	cl := &clustersv1alpha1.Cluster{}
	clusterKey := cr.Status.Cluster.NamespacedName()
	if err := c.Get(ctx, clusterKey, cl); err != nil {
		t.Fatal(err)
	}
	if cl.Labels[clustersv1alpha1.DeleteWithoutRequestsLabel] != "true" || cl.Spec.Profile != p.Local.ClusterProfileName(PurposeWorkload) {
		t.Fatalf("Cluster %s: labels %v, profile %q; want %s=true and profile %q", clusterKey, cl.Labels,
			cl.Spec.Profile, clustersv1alpha1.DeleteWithoutRequestsLabel, p.Local.ClusterProfileName(PurposeWorkload))
	}
	workloadHost := waitClusterReady(ctx, t, c, clusterKey, p.Workload)

	// Created after the grant: routed by the access-request controller at once.
	perms := []clustersv1alpha1.PermissionsRequest{{Namespace: "demo", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create"}},
	}}}
	ar := newAccessRequest(ns, "wl-access", cr.Name, perms)
	start = time.Now()
	if err := c.Create(ctx, ar); err != nil {
		t.Fatal(err)
	}
	waitGranted(ctx, t, c, ar)
	t.Logf("AccessRequest created after the grant: granted after %s", time.Since(start).Round(time.Millisecond))
	if got := ar.Labels[clustersv1alpha1.ProviderLabel]; got != localplatform.DefaultProviderName {
		t.Errorf("provider label %q, want %q", got, localplatform.DefaultProviderName)
	}
	if ar.Spec.ClusterRef == nil || ar.Spec.ClusterRef.NamespacedName() != clusterKey {
		t.Errorf("spec.clusterRef %v, want %s", ar.Spec.ClusterRef, clusterKey)
	}

	s := &corev1.Secret{}
	if err := c.Get(ctx, ar.Status.SecretRef.NamespacedName(ar.Namespace), s); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{clustersv1alpha1.SecretKeyCreationTimestamp, clustersv1alpha1.SecretKeyExpirationTimestamp, clustersv1alpha1.SecretKeyKubeconfig}
	if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, wantKeys) {
		t.Errorf("access Secret keys %v, want %v", got, wantKeys)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSuffix(cfg.Host, "/") != workloadHost {
		t.Errorf("kubeconfig server %q, want the workload server %q", cfg.Host, workloadHost)
	}
	tenant := kubernetes.NewForConfigOrDie(cfg)
	if _, err := tenant.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a ConfigMap in demo with the granted kubeconfig: %v", err)
	}
	if _, err := tenant.CoreV1().ConfigMaps("demo").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing ConfigMaps in demo: %v", err)
	}
	for what, call := range map[string]func() error{
		"deleting the ConfigMap": func() error {
			return tenant.CoreV1().ConfigMaps("demo").Delete(ctx, "hello", metav1.DeleteOptions{})
		},
		"listing Secrets in demo": func() error { _, err := tenant.CoreV1().Secrets("demo").List(ctx, metav1.ListOptions{}); return err },
		"listing ConfigMaps in default": func() error {
			_, err := tenant.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
		}
	}

	// The access-request controller does not watch ClusterRequests: an AccessRequest
	// whose ClusterRequest is not granted yet fails and is retried with exponential
	// backoff (5 ms doubling). Measured, not asserted; each case creates the
	// ClusterRequest once the controller has failed on the AccessRequest so often.
	for _, m := range []struct {
		name     string
		failures int
		nudge    bool
	}{
		{"early", 0, false},       // both created at once
		{"late", 11, false},       // created ~5 s apart: the next retry is ~5 s later
		{"late-nudged", 11, true}, // the same, with the reconcile annotation at the grant
	} {
		d := measureEarlyAccess(ctx, t, c, p.Operator, ns, m.name, perms, m.failures, m.nudge)
		t.Logf("AccessRequest %s (ClusterRequest created after %d failures, nudged: %t): granted %s after its ClusterRequest",
			m.name, m.failures, m.nudge, d.Round(time.Millisecond))
	}

	// Releasing: the local platform revokes the access, the scheduler deletes the
	// Cluster with its last request.
	if err := DeleteAndWait(ctx, c, ar, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, 30*time.Second, "granted kubeconfig revoked", func(ctx context.Context) error {
		_, err := tenant.CoreV1().ConfigMaps("demo").List(ctx, metav1.ListOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("listing ConfigMaps: %v", err)
	}); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"wl", "early-wl", "late-wl", "late-nudged-wl"} {
		if err := DeleteAndWait(ctx, c, &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := Poll(ctx, 30*time.Second, "Cluster "+clusterKey.String()+" deleted with its last request", func(ctx context.Context) error {
		return Gone(c.Get(ctx, clusterKey, cl))
	}); err != nil {
		t.Error(err)
	}
}

// waitClusterReady waits until the local platform reports the Cluster Ready at the
// server's URL, and returns that URL.
func waitClusterReady(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, server *APIServer) string {
	t.Helper()
	u, _, err := rest.DefaultServerUrlFor(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(u.String(), "/")
	cl := &clustersv1alpha1.Cluster{}
	if err := Poll(ctx, 30*time.Second, "Cluster "+key.String()+" Ready", func(ctx context.Context) error {
		if err := c.Get(ctx, key, cl); err != nil {
			return err
		}
		ep, _ := cl.Status.Endpoints.Get(clustersv1alpha1.APISERVER_ENDPOINT_EXTERNAL)
		if cl.Status.Phase != clustersv1alpha1.CLUSTER_PHASE_READY || ep != host {
			return fmt.Errorf("phase %q, endpoint %q (want %q)", cl.Status.Phase, ep, host)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return host
}

// measureEarlyAccess creates an AccessRequest (named after prefix), waits until the
// operator's log shows failures of it, creates its ClusterRequest and returns how long
// after the ClusterRequest's grant the access is granted; with nudge it annotates
// the AccessRequest for a reconcile at the grant.
func measureEarlyAccess(ctx context.Context, t *testing.T, c client.Client, op *Operator, ns, prefix string, perms []clustersv1alpha1.PermissionsRequest, failures int, nudge bool) time.Duration {
	t.Helper()
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-wl"}}
	cr.Spec.Purpose = PurposeWorkload
	ar := newAccessRequest(ns, prefix+"-access", cr.Name, perms)
	if err := c.Create(ctx, ar); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, time.Minute, fmt.Sprintf("%d failures of AccessRequest %s in the operator's log", failures, ar.Name), func(context.Context) error {
		if n := reconcileErrors(op, ar.Name); n < failures {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	waitGranted(ctx, t, c, cr)
	granted := time.Now()
	if nudge {
		before := ar.DeepCopy()
		if ar.Annotations == nil {
			ar.Annotations = map[string]string{}
		}
		ar.Annotations["openmcp.cloud/operation"] = "reconcile"
		if err := c.Patch(ctx, ar, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	waitGranted(ctx, t, c, ar)
	return time.Since(granted)
}

// reconcileErrors counts the access-request controller's failed reconciles of the
// AccessRequest called name in the operator's log.
func reconcileErrors(op *Operator, name string) int {
	errs, _ := op.ReconcilerErrors("accessrequest")
	n := 0
	for _, e := range errs {
		if e.Name == name {
			n++
		}
	}
	return n
}

func newAccessRequest(ns, name, request string, perms []clustersv1alpha1.PermissionsRequest) *clustersv1alpha1.AccessRequest {
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ar.Spec.RequestRef = &commonapi.ObjectReference{Namespace: ns, Name: request}
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{Permissions: perms}
	return ar
}

// waitGranted polls a ClusterRequest or AccessRequest until its phase is Granted,
// every 20 ms: the times the test reports are measured with it.
func waitGranted(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	phase := ""
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			return false, nil // retried until the deadline
		}
		switch o := obj.(type) {
		case *clustersv1alpha1.ClusterRequest:
			phase = o.Status.Phase
		case *clustersv1alpha1.AccessRequest:
			phase = o.Status.Phase
		}
		return phase == clustersv1alpha1.REQUEST_GRANTED, nil
	})
	if err != nil {
		t.Fatalf("%T %s not granted (phase %q): %v", obj, key, phase, err)
	}
}
