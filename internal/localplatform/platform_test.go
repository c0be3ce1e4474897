package localplatform

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
)

// The tests run the platform against real kube-apiservers started by envtest from the
// binaries in $KSP_TEST_ASSETS (see hack/test-binaries.sh).

const (
	// Requests carrying denyLabel are denied by the test policy, requests carrying
	// delayAnnotation (an RFC 3339 time) are delayed until then.
	denyLabel       = "test.localplatform/deny"
	delayAnnotation = "test.localplatform/delay-until"
	// libFinalizer is the finalizer the requesting side (advanced clusteraccess) puts
	// on its requests; tests that create requests by hand add it too.
	libFinalizer = advanced.Finalizer
)

func TestMain(m *testing.M) {
	// The platform logs through Options.Logger; libraries that log through
	// controller-runtime's global logger (advanced clusteraccess) stay quiet.
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

func TestPlatform(t *testing.T) {
	workloadCfg := startAPIServer(t, "workload", false)

	t.Run("default", func(t *testing.T) {
		platformCfg := startAPIServer(t, "platform", true)
		mcpCfg := startAPIServer(t, "mcp", false)
		p := newPlatform(t, platformCfg, Options{
			ClusterRequestPolicy: func(_ context.Context, cr *clustersv1alpha1.ClusterRequest) Decision {
				return testPolicy(cr)
			},
			AccessRequestPolicy: func(_ context.Context, ar *clustersv1alpha1.AccessRequest) Decision {
				return testPolicy(ar)
			},
		})
		addTarget(t, p, TargetCluster{Name: "workload", Purposes: []string{clustersv1alpha1.PURPOSE_WORKLOAD}, Config: workloadCfg})
		addTarget(t, p, TargetCluster{Name: "mcp", Purposes: []string{clustersv1alpha1.PURPOSE_MCP}, Tenancy: clustersv1alpha1.TENANCY_EXCLUSIVE, Config: mcpCfg})
		e := &env{p: p, platform: newClient(t, platformCfg), workload: workloadCfg, mcp: mcpCfg}
		runPlatform(t, p)

		t.Run("ClusterRequest", e.testClusterRequest)
		t.Run("AccessRequest", e.testAccessRequest)
		t.Run("Denied", e.testDenied)
		t.Run("Delayed", e.testDelayed)
		t.Run("ControlPlane", e.testControlPlane)
		t.Run("AdvancedClusterAccess", e.testAdvancedClusterAccess)
	})

	// A platform of its own, so that its short token lifetime touches nothing else.
	t.Run("ShortTokenTTL", func(t *testing.T) {
		platformCfg := startAPIServer(t, "platform", true)
		p := newPlatform(t, platformCfg, Options{TokenTTL: 15 * time.Second})
		addTarget(t, p, TargetCluster{Name: "workload", Purposes: []string{clustersv1alpha1.PURPOSE_WORKLOAD}, Config: workloadCfg})
		e := &env{p: p, platform: newClient(t, platformCfg), workload: workloadCfg}
		runPlatform(t, p)
		e.testShortTokenTTL(t)
	})
}

// env is what the subtests share.
type env struct {
	p        *Platform
	platform client.Client
	workload *rest.Config
	mcp      *rest.Config
}

func (e *env) testClusterRequest(t *testing.T) {
	ns := createNamespace(t, e.platform, "cr")

	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = "wl", ns
	cr.Finalizers = []string{libFinalizer}
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_WORKLOAD
	mustCreate(t, e.platform, cr)
	waitFor(t, 30*time.Second, "ClusterRequest granted", func(ctx context.Context) (bool, error) {
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(cr), cr)
		return cr.Status.IsGranted(), err
	})
	want := commonapi.ObjectReference{Name: "workload", Namespace: DefaultNamespace}
	if cr.Status.Cluster == nil || *cr.Status.Cluster != want {
		t.Fatalf("status.cluster = %+v, want %+v", cr.Status.Cluster, want)
	}
	if !slices.Contains(cr.Finalizers, clustersv1alpha1.ClusterRequestFinalizer) {
		t.Errorf("finalizers %v lack %s", cr.Finalizers, clustersv1alpha1.ClusterRequestFinalizer)
	}
	if cr.Status.ObservedGeneration != cr.Generation {
		t.Errorf("observedGeneration %d, generation %d", cr.Status.ObservedGeneration, cr.Generation)
	}

	c := &clustersv1alpha1.Cluster{}
	mustGet(t, e.platform, want.NamespacedName(), c)
	if !slices.Equal(c.Spec.Purposes, []string{clustersv1alpha1.PURPOSE_WORKLOAD}) || c.Spec.Tenancy != clustersv1alpha1.TENANCY_SHARED || c.Spec.Profile != DefaultProfile {
		t.Errorf("Cluster spec = %+v", c.Spec)
	}
	if url, _ := c.Status.Endpoints.Get(clustersv1alpha1.APISERVER_ENDPOINT_EXTERNAL); url != e.p.target("workload").host || c.Status.Phase != clustersv1alpha1.CLUSTER_PHASE_READY {
		t.Errorf("Cluster status = %+v, want endpoint %s and phase Ready", c.Status, e.p.target("workload").host)
	}
	if !slices.Contains(c.Finalizers, cr.FinalizerForCluster()) {
		t.Errorf("Cluster finalizers %v lack %s", c.Finalizers, cr.FinalizerForCluster())
	}

	// A purpose nobody serves stays pending, as with the real scheduler.
	odd := &clustersv1alpha1.ClusterRequest{}
	odd.Name, odd.Namespace = "odd", ns
	odd.Spec.Purpose = "onboarding"
	mustCreate(t, e.platform, odd)
	waitFor(t, 30*time.Second, "ClusterRequest for unserved purpose pending", func(ctx context.Context) (bool, error) {
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(odd), odd)
		return conditionReason(odd.Status.Conditions) == ReasonNoTarget && odd.Status.IsPending(), err
	})
	mustDelete(t, e.platform, odd)
	waitGone(t, e.platform, odd)

	// Deletion: the platform releases the Cluster and its own finalizer and leaves the
	// requester's, which the requester then removes, as advanced clusteraccess does.
	releaseLikeRequester(t, e.platform, cr)
	mustGet(t, e.platform, want.NamespacedName(), c)
	if slices.Contains(c.Finalizers, cr.FinalizerForCluster()) {
		t.Errorf("shared Cluster still carries the finalizer of the deleted request: %v", c.Finalizers)
	}
}

func (e *env) testAccessRequest(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, e.platform, "ar")
	admin := kubernetes.NewForConfigOrDie(e.workload)

	// A Role the request binds by reference, and a Secret it should then be able to read.
	mustCreateTyped(t, func() error {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}, metav1.CreateOptions{})
		return err
	})
	mustCreateTyped(t, func() error {
		_, err := admin.RbacV1().Roles("tenant-b").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreateTyped(t, func() error {
		_, err := admin.CoreV1().Secrets("tenant-b").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
		return err
	})

	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = "wl", ns
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_WORKLOAD
	mustCreate(t, e.platform, cr)

	ar := &clustersv1alpha1.AccessRequest{}
	ar.Name, ar.Namespace = "wl-access", ns
	ar.Finalizers = []string{libFinalizer}
	ar.Spec.RequestRef = &commonapi.ObjectReference{Name: cr.Name, Namespace: cr.Namespace}
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{
		Permissions: []clustersv1alpha1.PermissionsRequest{
			{Namespace: "tenant-a", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}},
			{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}}}},
		},
		RoleRefs: []commonapi.RoleRef{{Kind: "Role", Name: "secret-reader", Namespace: "tenant-b"}},
	}
	created := time.Now()
	mustCreate(t, e.platform, ar)
	waitGranted(t, e.platform, ar)
	t.Logf("AccessRequest granted %v after creation", time.Since(created).Round(time.Millisecond))

	if ar.Spec.ClusterRef == nil || *ar.Spec.ClusterRef != (commonapi.ObjectReference{Name: "workload", Namespace: DefaultNamespace}) {
		t.Errorf("spec.clusterRef = %+v, want the workload Cluster", ar.Spec.ClusterRef)
	}
	if ar.Labels[clustersv1alpha1.ProviderLabel] != DefaultProviderName || ar.Labels[clustersv1alpha1.ProfileLabel] != DefaultProfile {
		t.Errorf("labels = %v, want provider and profile", ar.Labels)
	}

	s := accessSecret(t, e.platform, ar)
	for _, k := range []string{clustersv1alpha1.SecretKeyKubeconfig, clustersv1alpha1.SecretKeyToken, clustersv1alpha1.SecretKeyHost,
		clustersv1alpha1.SecretKeyCA, clustersv1alpha1.SecretKeyCreationTimestamp, clustersv1alpha1.SecretKeyExpirationTimestamp} {
		if len(s.Data[k]) == 0 {
			t.Errorf("access Secret lacks key %q", k)
		}
	}
	if got := string(s.Data[clustersv1alpha1.SecretKeyHost]); got != e.p.target("workload").host {
		t.Errorf("host = %q, want %q", got, e.p.target("workload").host)
	}
	if life := tokenLifetime(t, s); life != DefaultTokenTTL {
		t.Errorf("token lifetime %v, want %v", life, DefaultTokenTTL)
	}

	// The kubeconfig authenticates as the ServiceAccount and can do exactly what was
	// asked for: real requests against the workload API server.
	user := kubeconfigClient(t, s)
	review, err := user.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the granted kubeconfig: %v", err)
	}
	wantUser := "system:serviceaccount:" + DefaultAccessNamespace + ":access-" + AccessID(ar)
	if got := review.Status.UserInfo.Username; got != wantUser {
		t.Errorf("authenticated as %q, want %q", got, wantUser)
	}
	listCMs := func(ns string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := user.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err
		}
	}
	createCM := func(ctx context.Context) error {
		_, err := user.CoreV1().ConfigMaps("tenant-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}}, metav1.CreateOptions{})
		return err
	}
	listNamespaces := func(ctx context.Context) error {
		_, err := user.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err
	}
	getSecret := func(ns string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := user.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
			return err
		}
	}
	expectAllowed(t, "list configmaps in tenant-a", listCMs("tenant-a"))
	expectAllowed(t, "list namespaces", listNamespaces)
	expectAllowed(t, "get secret in tenant-b (roleRef)", getSecret("tenant-b"))
	expectForbidden(t, "create configmap in tenant-a", createCM)
	expectForbidden(t, "list configmaps in default", listCMs("default"))
	expectForbidden(t, "get secret in default", getSecret("default"))

	// Exactly the requested RBAC exists on the target.
	rbac := rbacOf(t, e.workload, ar)
	wantRBAC := []string{
		"ClusterRole//openmcp:" + AccessID(ar) + ":1",
		"ClusterRoleBinding//openmcp:" + AccessID(ar) + ":1",
		"Role/tenant-a/openmcp:" + AccessID(ar) + ":0",
		"RoleBinding/tenant-a/openmcp:" + AccessID(ar) + ":0",
		"RoleBinding/tenant-b/openmcp:" + AccessID(ar) + ":ref:0",
	}
	if !slices.Equal(rbac, wantRBAC) {
		t.Errorf("RBAC on target = %v, want %v", rbac, wantRBAC)
	}

	// A new generation: configmaps become writable, namespaces invisible.
	oldGen := ar.Generation
	patchSpec(t, e.platform, ar, func(ar *clustersv1alpha1.AccessRequest) {
		ar.Spec.Token.Permissions = []clustersv1alpha1.PermissionsRequest{
			{Namespace: "tenant-a", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create"}}}},
		}
		ar.Spec.Token.RoleRefs = nil
	})
	if ar.Generation == oldGen {
		t.Fatalf("spec change did not move the generation")
	}
	waitGranted(t, e.platform, ar)
	expectAllowed(t, "create configmap in tenant-a after update", createCM)
	expectForbidden(t, "list namespaces after update", listNamespaces)
	expectForbidden(t, "get secret in tenant-b after roleRef removal", getSecret("tenant-b"))
	if rbac, want := rbacOf(t, e.workload, ar), wantRBAC[2:4]; !slices.Equal(rbac, want) {
		t.Errorf("RBAC on target after update = %v, want %v", rbac, want)
	}

	// Deletion removes everything on both sides and the token stops working.
	releaseLikeRequester(t, e.platform, ar)
	if rbac := rbacOf(t, e.workload, ar); len(rbac) != 0 {
		t.Errorf("RBAC left on target after deletion: %v", rbac)
	}
	if _, err := admin.CoreV1().ServiceAccounts(DefaultAccessNamespace).Get(ctx, "access-"+AccessID(ar), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ServiceAccount after deletion: err = %v, want NotFound", err)
	}
	if err := e.platform.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("access Secret after deletion: err = %v, want NotFound", err)
	}
	deleted := time.Now()
	expectUnauthorized(t, "list configmaps after deletion", listCMs("tenant-a"))
	t.Logf("token rejected %v after the request was released", time.Since(deleted).Round(time.Millisecond))
}

func (e *env) testDenied(t *testing.T) {
	ns := createNamespace(t, e.platform, "deny")

	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = "wl", ns
	cr.Labels = map[string]string{denyLabel: "true"}
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_WORKLOAD
	mustCreate(t, e.platform, cr)
	waitFor(t, 30*time.Second, "ClusterRequest denied", func(ctx context.Context) (bool, error) {
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(cr), cr)
		return cr.Status.IsDenied(), err
	})
	if cr.Status.Cluster != nil || conditionReason(cr.Status.Conditions) != "TestDenied" {
		t.Errorf("denied ClusterRequest status = %+v", cr.Status)
	}

	ar := &clustersv1alpha1.AccessRequest{}
	ar.Name, ar.Namespace = "wl-access", ns
	ar.Labels = map[string]string{denyLabel: "true"}
	ar.Spec.ClusterRef = &commonapi.ObjectReference{Name: "workload", Namespace: DefaultNamespace}
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{
		{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}},
	}}
	mustCreate(t, e.platform, ar)
	waitFor(t, 30*time.Second, "AccessRequest denied", func(ctx context.Context) (bool, error) {
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(ar), ar)
		return ar.Status.IsDenied() && ar.Status.ObservedGeneration == ar.Generation, err
	})
	c := conditionOf(ar.Status.Conditions)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "TestDenied" || c.Message == "" || ar.Status.SecretRef != nil {
		t.Errorf("denied AccessRequest status = %+v", ar.Status)
	}
	if rbac := rbacOf(t, e.workload, ar); len(rbac) != 0 {
		t.Errorf("RBAC created for a denied request: %v", rbac)
	}
	if err := e.platform.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: secretName(ar)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("access Secret of denied request: err = %v, want NotFound", err)
	}

	// OIDC is beyond a stand-in.
	oidc := &clustersv1alpha1.AccessRequest{}
	oidc.Name, oidc.Namespace = "oidc", ns
	oidc.Spec.ClusterRef = ar.Spec.ClusterRef
	oidc.Spec.OIDC = &clustersv1alpha1.OIDCConfig{OIDCProviderConfig: commonapi.OIDCProviderConfig{
		Name: "idp", Issuer: "https://idp.example", ClientID: "c", RoleBindings: []commonapi.RoleBindings{},
	}}
	mustCreate(t, e.platform, oidc)
	waitFor(t, 30*time.Second, "OIDC AccessRequest denied", func(ctx context.Context) (bool, error) {
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(oidc), oidc)
		return oidc.Status.IsDenied() && conditionReason(oidc.Status.Conditions) == ReasonUnsupported, err
	})
}

func (e *env) testDelayed(t *testing.T) {
	ns := createNamespace(t, e.platform, "delay")
	until := time.Now().Add(4 * time.Second)
	ar := &clustersv1alpha1.AccessRequest{}
	ar.Name, ar.Namespace = "later", ns
	ar.Annotations = map[string]string{delayAnnotation: until.Format(time.RFC3339Nano)}
	ar.Spec.ClusterRef = &commonapi.ObjectReference{Name: "workload", Namespace: DefaultNamespace}
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{}
	mustCreate(t, e.platform, ar)
	waitFor(t, 30*time.Second, "AccessRequest pending while delayed", func(ctx context.Context) (bool, error) {
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(ar), ar)
		return conditionReason(ar.Status.Conditions) == ReasonDelayed, err
	})
	if ar.Status.IsGranted() || time.Now().After(until) {
		t.Fatalf("expected a pending request before %v, got %+v", until, ar.Status)
	}
	waitGranted(t, e.platform, ar)
	if time.Now().Before(until) {
		t.Errorf("granted before the delay ended")
	}
}

func (e *env) testControlPlane(t *testing.T) {
	ctx := testContext(t)
	if err := e.p.RegisterControlPlane(ctx, "cp1", "project-x", "workload"); err == nil {
		t.Errorf("RegisterControlPlane on a target without purpose mcp succeeded")
	}
	if err := e.p.RegisterControlPlane(ctx, "cp1", "project-x", "mcp"); err != nil {
		t.Fatalf("RegisterControlPlane: %v", err)
	}
	// Idempotent, as a restarted local setup would call it again.
	if err := e.p.RegisterControlPlane(ctx, "cp1", "project-x", "mcp"); err != nil {
		t.Fatalf("RegisterControlPlane again: %v", err)
	}
	ns, err := libutils.StableMCPNamespace("cp1", "project-x")
	if err != nil {
		t.Fatal(err)
	}
	cr := &clustersv1alpha1.ClusterRequest{}
	mustGet(t, e.platform, client.ObjectKey{Namespace: ns, Name: "cp1"}, cr)
	if !cr.Status.IsGranted() || cr.Spec.Purpose != clustersv1alpha1.PURPOSE_MCP || cr.Status.Cluster == nil {
		t.Fatalf("ControlPlane ClusterRequest = %+v / %+v", cr.Spec, cr.Status)
	}
	c := &clustersv1alpha1.Cluster{}
	mustGet(t, e.platform, cr.Status.Cluster.NamespacedName(), c)
	if c.Namespace != ns || c.Spec.Tenancy != clustersv1alpha1.TENANCY_EXCLUSIVE || !slices.Equal(c.Spec.Purposes, []string{clustersv1alpha1.PURPOSE_MCP}) {
		t.Errorf("ControlPlane Cluster = %s/%s %+v", c.Namespace, c.Name, c.Spec)
	}

	// An AccessRequest to the ControlPlane's request reaches the MCP API server.
	ar := &clustersv1alpha1.AccessRequest{}
	ar.Name, ar.Namespace = "sp-access", ns
	ar.Spec.RequestRef = &commonapi.ObjectReference{Name: "cp1", Namespace: ns}
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{
		{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}}}},
	}}
	mustCreate(t, e.platform, ar)
	waitGranted(t, e.platform, ar)
	user := kubeconfigClient(t, accessSecret(t, e.platform, ar))
	expectAllowed(t, "create namespace on the MCP cluster", func(ctx context.Context) error {
		_, err := user.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "made-by-sp"}}, metav1.CreateOptions{})
		return err
	})
	mcpAdmin := kubernetes.NewForConfigOrDie(e.mcp)
	if _, err := mcpAdmin.CoreV1().Namespaces().Get(ctx, "made-by-sp", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace created through the granted access is not on the MCP API server: %v", err)
	}

	// Deregistration releases the ControlPlane's own Cluster object.
	mustDelete(t, e.platform, ar)
	waitGone(t, e.platform, ar)
	if err := e.p.DeregisterControlPlane(ctx, "cp1", "project-x"); err != nil {
		t.Fatalf("DeregisterControlPlane: %v", err)
	}
	waitGone(t, e.platform, cr)
	waitGone(t, e.platform, c)
}

// testAdvancedClusterAccess drives the platform with the requesting side the runtime
// uses, openmcp-operator lib's advanced clusteraccess, through grant and deletion.
func (e *env) testAdvancedClusterAccess(t *testing.T) {
	ctx := testContext(t)
	if err := e.p.RegisterControlPlane(ctx, "cp2", "project-y", "mcp"); err != nil {
		t.Fatalf("RegisterControlPlane: %v", err)
	}
	token := &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{
		{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}}}},
	}}
	scheme := NewScheme()
	car := advanced.NewClusterAccessReconciler(e.platform, "ServiceProviderTest").WithRetryInterval(200 * time.Millisecond)
	car.Register(advanced.NewClusterRequest("workload", "workload",
		advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PURPOSE_WORKLOAD})).
		WithTokenAccess(token).WithScheme(scheme).WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).Build())
	car.Register(advanced.ExistingClusterRequest("mcp", "mcp",
		func(req reconcile.Request, _ ...any) (*commonapi.ObjectReference, error) {
			ns, err := libutils.StableMCPNamespace(req.Name, req.Namespace)
			return &commonapi.ObjectReference{Name: req.Name, Namespace: ns}, err
		}).
		WithTokenAccess(token).WithScheme(scheme).WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).Build())
	// The reconcile request is the ControlPlane, as in a service provider.
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "cp2", Namespace: "project-y"}}

	waitFor(t, 60*time.Second, "advanced clusteraccess reconciled", func(ctx context.Context) (bool, error) {
		res, err := car.Reconcile(ctx, req)
		return res.RequeueAfter == 0, err
	})
	for id, cfg := range map[string]*rest.Config{"workload": e.workload, "mcp": e.mcp} {
		access, err := car.Access(ctx, req, id)
		if err != nil {
			t.Fatalf("Access(%s): %v", id, err)
		}
		if access.RESTConfig().Host != e.p.target(id).host || e.p.target(id).Config.Host != cfg.Host {
			t.Errorf("Access(%s) points at %s", id, access.RESTConfig().Host)
		}
		if err := access.Client().List(ctx, &corev1.NamespaceList{}); err != nil {
			t.Errorf("listing namespaces with Access(%s): %v", id, err)
		}
		if err := access.Client().List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
			t.Errorf("listing secrets with Access(%s): err = %v, want Forbidden", id, err)
		}
	}

	ar, err := car.AccessRequest(ctx, req, "workload")
	if err != nil {
		t.Fatal(err)
	}
	cr, err := car.ClusterRequest(ctx, req, "workload")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "advanced clusteraccess deleted its requests", func(ctx context.Context) (bool, error) {
		res, err := car.ReconcileDelete(ctx, req)
		return res.RequeueAfter == 0, err
	})
	for _, obj := range []client.Object{ar, cr} {
		if err := e.platform.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s/%s after ReconcileDelete: err = %v, want NotFound", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if rbac := rbacOf(t, e.workload, ar); len(rbac) != 0 {
		t.Errorf("RBAC left on the workload cluster: %v", rbac)
	}
}

func (e *env) testShortTokenTTL(t *testing.T) {
	ns := createNamespace(t, e.platform, "ttl")
	ar := &clustersv1alpha1.AccessRequest{}
	ar.Name, ar.Namespace = "short", ns
	// Served through a ClusterRequest made by the platform's own scheduler half.
	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = "wl", ns
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_WORKLOAD
	mustCreate(t, e.platform, cr)
	ar.Spec.RequestRef = &commonapi.ObjectReference{Name: cr.Name, Namespace: ns}
	ar.Spec.Token = &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{
		{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}},
	}}
	mustCreate(t, e.platform, ar)
	waitGranted(t, e.platform, ar)

	first := accessSecret(t, e.platform, ar)
	if life := tokenLifetime(t, first); life != 15*time.Second {
		t.Fatalf("token lifetime %v, want 15s", life)
	}
	firstToken := string(first.Data[clustersv1alpha1.SecretKeyToken])
	oldUser := kubeconfigClient(t, first)
	listNamespaces := func(c kubernetes.Interface) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}
	}
	expectAllowed(t, "list namespaces with the first token", listNamespaces(oldUser))

	// Renewed at 80 % of the lifetime, i.e. after about 12 s.
	var second *corev1.Secret
	waitFor(t, 30*time.Second, "token renewed", func(ctx context.Context) (bool, error) {
		second = &corev1.Secret{}
		err := e.platform.Get(ctx, client.ObjectKeyFromObject(first), second)
		return err == nil && string(second.Data[clustersv1alpha1.SecretKeyToken]) != firstToken, err
	})
	renewedAt := time.Now()
	expires := unixField(t, first, clustersv1alpha1.SecretKeyExpirationTimestamp)
	t.Logf("token renewed %v after its creation", renewedAt.Sub(unixField(t, first, clustersv1alpha1.SecretKeyCreationTimestamp)).Round(time.Millisecond))
	if renewedAt.After(expires) {
		t.Errorf("token renewed at %v, after the old one expired at %v", renewedAt, expires)
	}
	if life := tokenLifetime(t, second); life != 15*time.Second {
		t.Errorf("renewed token lifetime %v, want 15s", life)
	}
	expectAllowed(t, "list namespaces with the renewed token", listNamespaces(kubeconfigClient(t, second)))
	mustGet(t, e.platform, client.ObjectKeyFromObject(ar), ar)
	if !ar.Status.IsGranted() || ar.Status.ObservedGeneration != ar.Generation {
		t.Errorf("status after renewal = %+v", ar.Status)
	}

	// The old token really ends at its expiration time (plus the API server's token
	// cache), although the TokenRequest API cannot issue tokens this short.
	expectUnauthorized(t, "list namespaces with the expired first token", listNamespaces(oldUser))
	t.Logf("first token rejected %v after its expiration", time.Since(expires).Round(time.Millisecond))
	if time.Now().Before(expires) {
		t.Errorf("first token rejected before its expiration %v", expires)
	}
	expectAllowed(t, "list namespaces with the renewed token after the first expired", listNamespaces(kubeconfigClient(t, second)))
}

// testPolicy denies requests labelled denyLabel and delays those annotated with
// delayAnnotation.
func testPolicy(obj client.Object) Decision {
	if obj.GetLabels()[denyLabel] == "true" {
		return Denied("TestDenied", "denied by the test")
	}
	if s, ok := obj.GetAnnotations()[delayAnnotation]; ok {
		until, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return Denied("BadDelay", err.Error())
		}
		return Delayed(until)
	}
	return Decision{}
}

// startAPIServer starts etcd and a kube-apiserver through envtest, with the platform
// CRDs if asked to, and stops them when the test ends.
func startAPIServer(t *testing.T, name string, withCRDs bool) *rest.Config {
	t.Helper()
	assets := os.Getenv("KSP_TEST_ASSETS")
	if assets == "" {
		t.Fatal(`KSP_TEST_ASSETS is not set: export "$(hack/test-binaries.sh)"`)
	}
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	if withCRDs {
		crds, err := CRDs()
		if err != nil {
			t.Fatal(err)
		}
		te.CRDInstallOptions = envtest.CRDInstallOptions{CRDs: crds}
	}
	start := time.Now()
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("starting %s API server: %v", name, err)
	}
	t.Logf("%s API server %s up in %v", name, cfg.Host, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping %s API server: %v", name, err)
		}
	})
	return cfg
}

func newPlatform(t *testing.T, cfg *rest.Config, opts Options) *Platform {
	t.Helper()
	opts.Logger = testr.New(t)
	opts.RetryInterval = 200 * time.Millisecond
	p, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addTarget(t *testing.T, p *Platform, tc TargetCluster) {
	t.Helper()
	if err := p.AddCluster(tc); err != nil {
		t.Fatal(err)
	}
}

// runPlatform starts p and stops it, waiting for it, when the test ends.
func runPlatform(t *testing.T, p *Platform) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("platform: %v", err)
		}
	})
}

func testContext(t *testing.T) context.Context {
	return ctrl.LoggerInto(t.Context(), testr.New(t))
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	mustCreate(t, c, ns)
	return ns.Name
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

func mustCreateTyped(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := c.Get(t.Context(), key, obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, key, err)
	}
}

func mustDelete(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Delete(t.Context(), obj); err != nil {
		t.Fatalf("deleting %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// waitFor polls cond until it holds; errors count as "not yet" and the last one is
// reported on timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v (last error: %v)", what, timeout, last)
	}
}

// waitGranted waits until ar's current generation is granted, the contract the
// requesting side relies on.
func waitGranted(t *testing.T, c client.Client, ar *clustersv1alpha1.AccessRequest) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("AccessRequest %s/%s granted", ar.Namespace, ar.Name), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ar), ar)
		return ar.Status.IsGranted() && ar.Status.ObservedGeneration == ar.Generation, err
	})
}

func waitGone(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%T %s/%s gone", obj, obj.GetNamespace(), obj.GetName()), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// releaseLikeRequester deletes obj the way advanced clusteraccess does: delete, wait
// until its own finalizer is the only one left, remove it, and see the object go.
func releaseLikeRequester(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	mustDelete(t, c, obj)
	waitFor(t, 30*time.Second, "platform finalizers released", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return slices.Equal(obj.GetFinalizers(), []string{libFinalizer}), err
	})
	if err := c.Patch(t.Context(), obj, client.RawPatch(types.JSONPatchType, []byte(`[{"op": "remove", "path": "/metadata/finalizers"}]`))); err != nil {
		t.Fatalf("removing requester finalizer: %v", err)
	}
	waitGone(t, c, obj)
}

func patchSpec(t *testing.T, c client.Client, ar *clustersv1alpha1.AccessRequest, mutate func(*clustersv1alpha1.AccessRequest)) {
	t.Helper()
	before := ar.DeepCopy()
	mutate(ar)
	if err := c.Patch(t.Context(), ar, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching AccessRequest %s/%s: %v", ar.Namespace, ar.Name, err)
	}
}

func accessSecret(t *testing.T, c client.Client, ar *clustersv1alpha1.AccessRequest) *corev1.Secret {
	t.Helper()
	if ar.Status.SecretRef == nil {
		t.Fatalf("AccessRequest %s/%s has no secretRef", ar.Namespace, ar.Name)
	}
	s := &corev1.Secret{}
	mustGet(t, c, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, s)
	return s
}

func unixField(t *testing.T, s *corev1.Secret, key string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(string(s.Data[key]), 10, 64)
	if err != nil {
		t.Fatalf("access Secret key %s: %v", key, err)
	}
	return time.Unix(n, 0)
}

func tokenLifetime(t *testing.T, s *corev1.Secret) time.Duration {
	t.Helper()
	return unixField(t, s, clustersv1alpha1.SecretKeyExpirationTimestamp).Sub(unixField(t, s, clustersv1alpha1.SecretKeyCreationTimestamp))
}

// kubeconfigClient builds a client from nothing but the Secret's kubeconfig, as a
// consumer would.
func kubeconfigClient(t *testing.T, s *corev1.Secret) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatalf("parsing granted kubeconfig: %v", err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// expectAllowed polls, since RBAC reaches the authorizer through an informer.
func expectAllowed(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	waitFor(t, 20*time.Second, what+" allowed", func(ctx context.Context) (bool, error) {
		return true, call(ctx)
	})
}

func expectForbidden(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	waitFor(t, 20*time.Second, what+" forbidden", func(ctx context.Context) (bool, error) {
		err := call(ctx)
		if apierrors.IsForbidden(err) {
			return true, nil
		}
		return false, fmt.Errorf("got %w", err)
	})
}

// expectUnauthorized allows for the API server's token authentication cache (10 s).
func expectUnauthorized(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	waitFor(t, 40*time.Second, what+" unauthorized", func(ctx context.Context) (bool, error) {
		err := call(ctx)
		if apierrors.IsUnauthorized(err) {
			return true, nil
		}
		return false, fmt.Errorf("got %w", err)
	})
}

// rbacOf lists the RBAC objects on a target made for ar, as "Kind/namespace/name".
func rbacOf(t *testing.T, cfg *rest.Config, ar *clustersv1alpha1.AccessRequest) []string {
	t.Helper()
	c := newClient(t, cfg)
	var out []string
	for kind, list := range map[string]client.ObjectList{
		"ClusterRole": &rbacv1.ClusterRoleList{}, "ClusterRoleBinding": &rbacv1.ClusterRoleBindingList{},
		"Role": &rbacv1.RoleList{}, "RoleBinding": &rbacv1.RoleBindingList{},
	} {
		if err := c.List(t.Context(), list, client.MatchingLabels{AccessIDLabel: AccessID(ar)}); err != nil {
			t.Fatalf("listing %ss: %v", kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			out = append(out, refKey(kind, o.GetNamespace(), o.GetName()))
		}
	}
	slices.Sort(out)
	return out
}

func conditionOf(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == ConditionGranted {
			return &conds[i]
		}
	}
	return nil
}

func conditionReason(conds []metav1.Condition) string {
	if c := conditionOf(conds); c != nil {
		return c.Reason
	}
	return ""
}
