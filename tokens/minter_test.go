package tokens_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	exportName  = "widgets"
	widgetGroup = "example.services.open-control-plane.io"
	managedBy   = "services.open-control-plane.io/managed-by"
)

// workloadRules is what the example provider declares for its workload: its own
// Service API objects in the tenant workspace, nothing else.
var workloadRules = []rbacv1.PolicyRule{
	{APIGroups: []string{widgetGroup}, Resources: []string{"widgets", "widgets/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
}

// TestMinterGlobalServiceAccounts runs the credential flow on a kcp with the
// GlobalServiceAccount feature gate, where the runtime is bound by its own name.
func TestMinterGlobalServiceAccounts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := setup(ctx, t, harness.WithFeatureGates("GlobalServiceAccount=true"))
	a := e.tenant(ctx, t, "tenant-a", nil)
	b := e.tenant(ctx, t, "tenant-b", nil)
	e.vwURL = e.k.VirtualWorkspaceURLs(ctx, t, e.providerPath, exportName)[0]

	clock := clocktesting.NewFakePassiveClock(time.Now())
	direct, tokenRequests := e.directConfig(ctx, t)
	m := tokens.New(tokens.Options{
		Direct:       direct,
		ProviderName: "widgets",
		Rules:        workloadRules,
		Labels:       map[string]string{managedBy: "widgets"},
		Clock:        clock,
	})
	vwToken := e.runtimeToken(ctx, t)
	wsA, writesA := e.vwClient(t, a.lc, vwToken)
	wsB, _ := e.vwClient(t, b.lc, vwToken)

	t.Run("identity of the runtime", func(t *testing.T) {
		id, err := tokens.DetectIdentity(ctx, direct)
		if err != nil {
			t.Fatalf("DetectIdentity: %v", err)
		}
		if id.Username != "system:serviceaccount:sp:runtime" || !id.IsServiceAccount || id.ClusterName != e.providerLC {
			t.Errorf("identity %+v, want sp/runtime of cluster %s", id, e.providerLC)
		}
		// kcp's base URL (no /clusters) answers the SelfSubjectReview alike.
		base := rest.CopyConfig(direct)
		base.Host = e.k.URL()
		if atBase, err := tokens.DetectIdentity(ctx, base); err != nil || atBase.Username != id.Username || atBase.ClusterName != id.ClusterName {
			t.Errorf("DetectIdentity at the base URL: %+v, %v; want %+v", atBase, err, id)
		}
	})

	var credA *tokens.Credential
	t.Run("Ensure creates the objects and returns a working credential", func(t *testing.T) {
		var err error
		credA, err = m.Ensure(ctx, wsA, a.lc)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if enabled, known := m.GlobalServiceAccounts(); !enabled || !known {
			t.Errorf("GlobalServiceAccounts() = %v, %v; want detected as enabled", enabled, known)
		}
		if n := tokenRequests.Load(); n != 1 {
			t.Errorf("%d TokenRequests, want 1", n)
		}
		if n := writesA.Load(); n != 5 {
			t.Errorf("%d writes through the virtual workspace, want 5 (ServiceAccount, 2 ClusterRoles, 2 bindings)", n)
		}
		if credA.Token == "" || !credA.RenewAt.After(clock.Now()) || !credA.ExpiresAt.After(credA.RenewAt) {
			t.Errorf("credential times: now %s, renew %s, expires %s", clock.Now(), credA.RenewAt, credA.ExpiresAt)
		}
		admin := e.k.ClientFor(t, a.path)
		binding := &rbacv1.ClusterRoleBinding{}
		if err := admin.Get(ctx, client.ObjectKey{Name: "widgets-token-requester"}, binding); err != nil {
			t.Fatalf("reading requester binding: %v", err)
		}
		want := "system:kcp:serviceaccount:" + e.providerLC.String() + ":sp:runtime"
		if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != rbacv1.UserKind || binding.Subjects[0].Name != want {
			t.Errorf("requester binding subjects %+v, want User %s", binding.Subjects, want)
		}
		for _, o := range createdObjects(m) {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				t.Fatalf("reading %T %s: %v", o, o.GetName(), err)
			}
			if o.GetLabels()[managedBy] != "widgets" {
				t.Errorf("%T %s lacks label %s: %v", o, o.GetName(), managedBy, o.GetLabels())
			}
		}
	})

	t.Run("the workload credential is confined to its workspace and rules", func(t *testing.T) {
		e.createWidget(ctx, t, a.path, "w1")
		e.createWidget(ctx, t, b.path, "w1")
		cfg := restConfigFrom(t, credA.Kubeconfig)
		if want := strings.TrimSuffix(e.k.URL(), "/") + "/clusters/" + a.lc.String(); cfg.Host != want {
			t.Errorf("kubeconfig server %s, want %s", cfg.Host, want)
		}
		if n := listWidgets(ctx, t, cfg); n != 1 {
			t.Errorf("workload sees %d widgets in its workspace, want 1", n)
		}
		// The REST config handed to the tenant's client is the kubeconfig's, unparsed.
		rc := credA.RESTConfig()
		if rc == nil {
			t.Fatal("RESTConfig() of a minted credential is nil")
		}
		if rc.Host != cfg.Host || rc.BearerToken != cfg.BearerToken || !bytes.Equal(rc.CAData, cfg.CAData) ||
			rc.ServerName != cfg.ServerName || rc.Insecure != cfg.Insecure {
			t.Errorf("RESTConfig() differs from the parsed kubeconfig (host %q against %q)", rc.Host, cfg.Host)
		} else if n := listWidgets(ctx, t, rc); n != 1 {
			t.Errorf("workload through RESTConfig() sees %d widgets in its workspace, want 1", n)
		}
		neighbour := rest.CopyConfig(cfg)
		neighbour.Host = strings.TrimSuffix(e.k.URL(), "/") + "/clusters/" + b.lc.String()
		err := listWidgetsErr(ctx, neighbour)
		if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Errorf("workload listing widgets in the neighbour workspace: %v, want 403/401", err)
		}
		t.Logf("measured: workload token in a neighbour workspace -> %v", statusCode(err))
		cs := clientset(t, cfg)
		if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("workload listing secrets: %v, want 403", err)
		}
		sa := m.ServiceAccount()
		if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("workload requesting its own token: %v, want 403", err)
		}
	})

	t.Run("the runtime may mint tokens for the workload account only", func(t *testing.T) {
		admin := e.k.ClientFor(t, a.path)
		other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}}
		if err := admin.Create(ctx, other); err != nil {
			t.Fatalf("creating ServiceAccount other: %v", err)
		}
		// A fresh token, never used on the virtual workspace (see the v0.30 bug below).
		cs := clientset(t, e.directTo(a.lc, e.runtimeToken(ctx, t)))
		_, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "other", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("runtime requesting a token for another ServiceAccount: %v, want 403", err)
		}
		if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("runtime listing secrets directly: %v, want 403", err)
		}
		sa := m.ServiceAccount()
		if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); err != nil {
			t.Errorf("runtime requesting a token for the workload account: %v", err)
		}
		// Another ServiceAccount of the provider workspace is not the runtime.
		cs = clientset(t, e.directTo(a.lc, e.saToken(ctx, t, "sp", "bystander")))
		if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("another provider ServiceAccount requesting the workload's token: %v, want 403", err)
		}
	})

	t.Run("the virtual workspace serves no TokenRequest", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: m.ServiceAccount().Namespace, Name: m.ServiceAccount().Name}}
		err := wsA.SubResource("token").Create(ctx, sa, &authenticationv1.TokenRequest{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("TokenRequest through the virtual workspace: %v, want 404", err)
		}
	})

	t.Run("a second Ensure returns the cached token and writes nothing", func(t *testing.T) {
		writesA.Store(0)
		before := tokenRequests.Load()
		cred, err := m.Ensure(ctx, wsA, a.lc)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if cred.Token != credA.Token {
			t.Errorf("second Ensure returned a new token")
		}
		if n := tokenRequests.Load() - before; n != 0 {
			t.Errorf("%d TokenRequests, want 0", n)
		}
		if n := writesA.Load(); n != 0 {
			t.Errorf("%d writes, want 0", n)
		}
	})

	t.Run("drift is repaired without a new token", func(t *testing.T) {
		admin := e.k.ClientFor(t, a.path)
		role := &rbacv1.ClusterRole{}
		if err := admin.Get(ctx, client.ObjectKey{Name: "widgets-workload"}, role); err != nil {
			t.Fatalf("reading workload role: %v", err)
		}
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		if err := admin.Update(ctx, role); err != nil {
			t.Fatalf("widening workload role: %v", err)
		}
		writesA.Store(0)
		before := tokenRequests.Load()
		// Within Recheck of the last look, the objects are trusted without a read.
		if _, err := m.Ensure(ctx, wsA, a.lc); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if n := writesA.Load(); n != 0 {
			t.Errorf("%d writes within Recheck of the last look, want 0", n)
		}
		clock.SetTime(clock.Now().Add(2*time.Minute + time.Second))
		cred, err := m.Ensure(ctx, wsA, a.lc)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if n := writesA.Load(); n != 1 {
			t.Errorf("%d writes, want 1 (the role)", n)
		}
		if n := tokenRequests.Load() - before; n != 0 || cred.Token != credA.Token {
			t.Errorf("repairing a role minted a new token (%d TokenRequests)", n)
		}
		if err := admin.Get(ctx, client.ObjectKey{Name: "widgets-workload"}, role); err != nil {
			t.Fatalf("reading workload role: %v", err)
		}
		if len(role.Rules) != len(workloadRules) {
			t.Errorf("workload role not restored: %+v", role.Rules)
		}
	})

	t.Run("a token past 80 percent of its lifetime is renewed", func(t *testing.T) {
		clock.SetTime(credA.RenewAt.Add(time.Second))
		before := tokenRequests.Load()
		cred, err := m.Ensure(ctx, wsA, a.lc)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if n := tokenRequests.Load() - before; n != 1 || cred.Token == credA.Token {
			t.Errorf("renewal: %d TokenRequests, same token %v; want 1 and a new token", n, cred.Token == credA.Token)
		}
		credA = cred
	})

	t.Run("a second tenant gets its own credential", func(t *testing.T) {
		credB, err := m.Ensure(ctx, wsB, b.lc)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if credB.Token == credA.Token || credB.Cluster != b.lc {
			t.Errorf("tenant b credential %v shares tenant a's token or names another cluster", credB)
		}
		if n := listWidgets(ctx, t, restConfigFrom(t, credB.Kubeconfig)); n != 1 {
			t.Errorf("tenant b workload sees %d widgets, want 1", n)
		}
	})

	t.Run("Remove deletes what Ensure created", func(t *testing.T) {
		writesA.Store(0)
		if r, err := m.Remove(ctx, wsA, a.lc); err != nil || !r.Done() || len(r.Left) != 0 {
			t.Fatalf("Remove: %+v, %v; want done with nothing left", r, err)
		}
		if n := writesA.Load(); n != 5 {
			t.Errorf("%d deletes, want 5", n)
		}
		admin := e.k.ClientFor(t, a.path)
		for _, o := range createdObjects(m) {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s after Remove: %v, want NotFound", o, o.GetName(), err)
			}
		}
		if r, err := m.Remove(ctx, wsA, a.lc); err != nil || !r.Done() || len(r.Left) != 0 {
			t.Errorf("second Remove: %+v, %v; want done with nothing left", r, err)
		}
		// The deleted ServiceAccount's tokens stop working.
		cfg := restConfigFrom(t, credA.Kubeconfig)
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsUnauthorized(listWidgetsErr(ctx, cfg)), nil
		})
		if err != nil {
			t.Errorf("workload token still accepted after Remove: %v", listWidgetsErr(ctx, cfg))
		}
	})

	t.Run("claims accepted only for the managed-by label suffice", func(t *testing.T) {
		d := e.tenantWithSelector(ctx, t, "tenant-d", nil, apisv1alpha2.PermissionClaimSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{managedBy: "widgets"}},
		})
		wsD, _ := e.vwClient(t, d.lc, vwToken)
		cred, err := m.Ensure(ctx, wsD, d.lc)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		e.createWidget(ctx, t, d.path, "w1")
		if n := listWidgets(ctx, t, restConfigFrom(t, cred.Kubeconfig)); n != 1 {
			t.Errorf("workload sees %d widgets, want 1", n)
		}
		// The selector hides the tenant's own RBAC from the runtime...
		if err := wsD.Get(ctx, client.ObjectKey{Name: "cluster-admin"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
			t.Errorf("reading the unlabelled ClusterRole cluster-admin with a label-selected claim: %v, want 404", err)
		}
		// ...but does not stop new bindings: kcp labels them on the way in, and the
		// virtual workspace writes with the workspace's authority. Accepting the RBAC
		// claims is trusting the runtime's identity with the workspace.
		probe := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "escalation-probe"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}},
		}
		if err := wsD.Create(ctx, probe); err != nil {
			t.Errorf("binding cluster-admin through the VW with a label-selected claim was refused (%v): kcp changed, update docs/design/tenant-credentials.md", err)
		} else if probe.Labels[managedBy] != "widgets" {
			t.Errorf("kcp did not label the binding: %v", probe.Labels)
		}
		if err := wsD.Delete(ctx, probe); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the probe: %v", err)
		}
	})

	t.Run("a rejected serviceaccounts claim yields ClaimNotAcceptedError", func(t *testing.T) {
		c := e.tenant(ctx, t, "tenant-c", map[string]apisv1alpha2.AcceptablePermissionClaimState{"serviceaccounts": apisv1alpha2.ClaimRejected})
		wsC, _ := e.vwClient(t, c.lc, vwToken)
		_, err := m.Ensure(ctx, wsC, c.lc)
		var claimErr *tokens.ClaimNotAcceptedError
		if !errors.Is(err, tokens.ErrClaimNotAccepted) || !errors.As(err, &claimErr) || claimErr.Resource.Resource != "serviceaccounts" {
			t.Fatalf("Ensure with the serviceaccounts claim rejected: %v, want ClaimNotAcceptedError for serviceaccounts", err)
		}
		t.Logf("measured: virtual workspace answer for an unaccepted claim: %d %v", statusCode(claimErr.Cause), claimErr.Cause)
	})

	t.Run("kcp#3855: a token just used on the virtual workspace gains nothing directly", func(t *testing.T) {
		// The Minter's VW client just used vwToken. Unpatched kcp v0.30.0 then let the
		// same token read tenant b's secrets directly (the VW's warrant stayed in the
		// cached user, kcp-dev/kcp#3855); the kcp of these tests carries the fix
		// (docs/design/test-kcp-patch.md), as kcp v0.31.0 does. Direct stays another
		// credential for deployments on unpatched kcp.
		sa := m.ServiceAccount()
		if err := wsB.Get(ctx, sa, &corev1.ServiceAccount{}); err != nil {
			t.Fatalf("reading the workload ServiceAccount through the virtual workspace: %v", err)
		}
		cs := clientset(t, e.directTo(b.lc, vwToken))
		if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the VW token used directly right after a VW request listing secrets: %v, want forbidden (is the kcp patch applied?)", err)
		}
	})
}

// TestMinterDefaultGates runs the flow on a kcp with default feature gates: the Minter
// must find out that only the provider workspace's group subject works.
func TestMinterDefaultGates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := setup(ctx, t)
	a := e.tenant(ctx, t, "tenant-a", nil)
	e.vwURL = e.k.VirtualWorkspaceURLs(ctx, t, e.providerPath, exportName)[0]
	direct, tokenRequests := e.directConfig(ctx, t)
	m := tokens.New(tokens.Options{Direct: direct, ProviderName: "widgets", Rules: workloadRules})
	wsA, _ := e.vwClient(t, a.lc, e.runtimeToken(ctx, t))

	start := time.Now()
	cred, err := m.Ensure(ctx, wsA, a.lc)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Logf("measured: first Ensure with gate detection took %s and %d TokenRequests", time.Since(start).Round(time.Millisecond), tokenRequests.Load())
	if enabled, known := m.GlobalServiceAccounts(); enabled || !known {
		t.Errorf("GlobalServiceAccounts() = %v, %v; want detected as disabled", enabled, known)
	}
	admin := e.k.ClientFor(t, a.path)
	binding := &rbacv1.ClusterRoleBinding{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "widgets-token-requester"}, binding); err != nil {
		t.Fatalf("reading requester binding: %v", err)
	}
	want := "system:cluster:" + e.providerLC.String()
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != rbacv1.GroupKind || binding.Subjects[0].Name != want {
		t.Errorf("requester binding subjects %+v, want Group %s", binding.Subjects, want)
	}
	e.createWidget(ctx, t, a.path, "w1")
	if n := listWidgets(ctx, t, restConfigFrom(t, cred.Kubeconfig)); n != 1 {
		t.Errorf("workload sees %d widgets, want 1", n)
	}

	// The trust consequence of the group subject: any ServiceAccount of the provider
	// workspace, not only the runtime, can mint the workload's tokens.
	cs := clientset(t, e.directTo(a.lc, e.saToken(ctx, t, "sp", "bystander")))
	sa := m.ServiceAccount()
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); err != nil {
		t.Errorf("expected another provider ServiceAccount to be able to mint the workload token without the gate, got %v", err)
	}

	// A new Minter (a restarted runtime) keeps the group subject the first one chose
	// and knows the gate from it, without a probe: rebinding the User subject to probe
	// raced with kcp's authorizer, which still saw the group binding and granted.
	m2 := tokens.New(tokens.Options{Direct: direct, ProviderName: "widgets", Rules: workloadRules})
	start = time.Now()
	if _, err := m2.Ensure(ctx, wsA, a.lc); err != nil {
		t.Fatalf("Ensure after restart: %v", err)
	}
	t.Logf("measured: Ensure of a restarted Minter took %s", time.Since(start).Round(time.Millisecond))
	if enabled, known := m2.GlobalServiceAccounts(); enabled || !known {
		t.Errorf("restarted Minter: GlobalServiceAccounts() = %v, %v; want detected as disabled", enabled, known)
	}
}

// TestMinterReadsFromCache: with Options.Cache, a workspace's first Ensure reads none
// of the five objects from the server (five creates, no GET), and a cache that is wrong
// costs requests, never a wrong object: one that says "missing" about objects that
// exist (a restarted runtime whose watch has not seen them) still ends with them as
// the Minter wants them, and a working credential.
func TestMinterReadsFromCache(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := setup(ctx, t)
	a := e.tenant(ctx, t, "tenant-a", nil)
	e.vwURL = e.k.VirtualWorkspaceURLs(ctx, t, e.providerPath, exportName)[0]
	direct, _ := e.directConfig(ctx, t)
	vw, writes := e.vwClient(t, a.lc, e.runtimeToken(ctx, t))
	var gets atomic.Int64
	ws := interceptor.NewClient(vw.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	// The gate is given, so that no detection reads on purpose.
	newMinter := func() *tokens.Minter {
		return tokens.New(tokens.Options{Direct: direct, ProviderName: "widgets", Rules: workloadRules,
			Labels: map[string]string{managedBy: "widgets"}, Cache: missingCache{}, GlobalServiceAccounts: ptr(false)})
	}

	cred, err := newMinter().Ensure(ctx, ws, a.lc)
	if err != nil {
		t.Fatalf("Ensure of a new workspace: %v", err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("a new workspace's Ensure read %d objects from the server, want 0", n)
	}
	if n := writes.Load(); n != 5 {
		t.Errorf("a new workspace's Ensure wrote %d times, want 5 creates", n)
	}
	e.createWidget(ctx, t, a.path, "w1")
	if n := listWidgets(ctx, t, restConfigFrom(t, cred.Kubeconfig)); n != 1 {
		t.Errorf("workload sees %d widgets, want 1", n)
	}

	// A restarted Minter whose cache says "missing" about objects that exist.
	gets.Store(0)
	writes.Store(0)
	cred, err = newMinter().Ensure(ctx, ws, a.lc)
	if err != nil {
		t.Fatalf("Ensure with a cache that missed existing objects: %v", err)
	}
	// Each create is refused as AlreadyExists and followed by a read; nothing needed
	// an update.
	if w, g := writes.Load(), gets.Load(); w != 5 || g != 5 {
		t.Errorf("a cache wrong about 5 existing objects cost %d writes and %d reads, want 5 refused creates and 5 reads", w, g)
	}
	role := &rbacv1.ClusterRole{}
	if err := e.k.ClientFor(t, a.path).Get(ctx, client.ObjectKey{Name: "widgets-workload"}, role); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, workloadRules) {
		t.Errorf("workload role rules %+v, want %+v", role.Rules, workloadRules)
	}
	if n := listWidgets(ctx, t, restConfigFrom(t, cred.Kubeconfig)); n != 1 {
		t.Errorf("the restarted Minter's workload sees %d widgets, want 1", n)
	}
}

// missingCache is a complete cache that holds nothing: right for a new workspace,
// wrong for one whose objects exist.
type missingCache struct{}

func (missingCache) Get(_ logicalcluster.Name, key client.ObjectKey, obj client.Object) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, key.Name)
}

// env is the package's kcp with a provider workspace of the test's own serving the
// widgets export and a runtime ServiceAccount sp/runtime there.
type env struct {
	k *harness.KCP
	// root is the test's own workspace on the package's kcp, the parent of its
	// provider and tenant workspaces.
	root         logicalcluster.Path
	providerPath logicalcluster.Path
	providerLC   logicalcluster.Name
	vwURL        string
	// claims are what the export claims and tenants accept; nil: the runtime's
	// required ones.
	claims []apisv1alpha2.PermissionClaim
}

type tenantWS struct {
	path logicalcluster.Path
	lc   logicalcluster.Name
}

func setup(ctx context.Context, t *testing.T, opts ...harness.KCPOption) *env {
	t.Helper()
	e := &env{k: harness.SharedKCP(t, opts...)}
	// The test's own workspaces are under one of its own: the kcp is the package's.
	e.root, _ = e.k.OwnWorkspace(ctx, t)
	e.providerPath, e.providerLC = e.k.CreateWorkspace(ctx, t, e.root, "provider")
	admin := e.k.ClientFor(t, e.providerPath)
	s, err := apiexport.FromCRD(exportName, widgetCRD()).APISurface()
	if err != nil {
		t.Fatalf("surface: %v", err)
	}
	if _, err := apiexport.Provision(ctx, admin, s, apiexport.Options{}); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	// The runtime's minimal RBAC in the provider workspace: find the export's
	// endpoints and use its content through the virtual workspace.
	contentVerbs := []string{"get", "list", "watch", "create", "update", "delete"}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sp"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "sp", Name: "runtime"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "sp", Name: "bystander"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "runtime"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apis.kcp.io"}, Resources: []string{"apiexportendpointslices", "apiexports"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apis.kcp.io"}, Resources: []string{"apiexports/content"}, ResourceNames: []string{exportName}, Verbs: contentVerbs},
		}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "runtime"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "runtime"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "sp", Name: "runtime"}},
		},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return e
}

// tenant creates a workspace binding the export with the runtime's claims accepted,
// except those states overrides.
func (e *env) tenant(ctx context.Context, t *testing.T, name string, states map[string]apisv1alpha2.AcceptablePermissionClaimState) tenantWS {
	t.Helper()
	return e.tenantWithSelector(ctx, t, name, states, apisv1alpha2.PermissionClaimSelector{MatchAll: true})
}

// tenantWithSelector is tenant accepting the claims only for objects matching selector.
func (e *env) tenantWithSelector(ctx context.Context, t *testing.T, name string, states map[string]apisv1alpha2.AcceptablePermissionClaimState, selector apisv1alpha2.PermissionClaimSelector) tenantWS {
	t.Helper()
	path, lc := e.k.CreateWorkspace(ctx, t, e.root, name)
	var claims []apisv1alpha2.AcceptablePermissionClaim
	accept := e.claims
	if accept == nil {
		accept = apiexport.RequiredPermissionClaims()
	}
	for _, c := range accept {
		state := apisv1alpha2.ClaimAccepted
		if s, ok := states[c.Resource]; ok {
			state = s
		}
		claims = append(claims, apisv1alpha2.AcceptablePermissionClaim{
			ScopedPermissionClaim: apisv1alpha2.ScopedPermissionClaim{PermissionClaim: c, Selector: selector},
			State:                 state,
		})
	}
	e.k.CreateAPIBinding(ctx, t, path, exportName, e.providerPath, exportName, claims)
	return tenantWS{path: path, lc: lc}
}

// saToken returns a new token of a ServiceAccount of the provider workspace.
func (e *env) saToken(ctx context.Context, t *testing.T, namespace, name string) string {
	t.Helper()
	cs := clientset(t, e.k.ConfigFor(e.providerPath))
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// runtimeToken returns a new token of sp/runtime.
func (e *env) runtimeToken(ctx context.Context, t *testing.T) string {
	return e.saToken(ctx, t, "sp", "runtime")
}

// directConfig returns the Minter's direct config (a fresh runtime token, pointing at
// the provider workspace so DetectIdentity works) and a counter of its TokenRequests.
func (e *env) directConfig(ctx context.Context, t *testing.T) (*rest.Config, *atomic.Int64) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(e.k.ConfigFor(e.providerPath))
	cfg.BearerToken = e.runtimeToken(ctx, t)
	var n atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/token") {
				n.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, &n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// directTo returns a config for token at <kcp>/clusters/<lc>.
func (e *env) directTo(lc logicalcluster.Name, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(e.k.AdminConfig())
	cfg.Host = strings.TrimSuffix(e.k.URL(), "/") + "/clusters/" + lc.String()
	cfg.BearerToken = token
	return cfg
}

// vwClient returns a client for the tenant lc through the virtual workspace,
// authenticating with token, and a counter of its writes.
func (e *env) vwClient(t *testing.T, lc logicalcluster.Name, token string) (client.Client, *atomic.Int64) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(e.k.AdminConfig())
	cfg.Host = strings.TrimSuffix(e.vwURL, "/") + "/clusters/" + lc.String()
	cfg.BearerToken = token
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: harness.Scheme()})
	if err != nil {
		t.Fatalf("virtual workspace client: %v", err)
	}
	var n atomic.Int64
	count := func() { n.Add(1) }
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, obj, opts...)
		},
	}), &n
}

func (e *env) createWidget(ctx context.Context, t *testing.T, path logicalcluster.Path, name string) {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetAPIVersion(widgetGroup + "/v1alpha1")
	w.SetKind("Widget")
	w.SetNamespace("default")
	w.SetName(name)
	if err := e.k.ClientFor(t, path).Create(ctx, w); err != nil {
		t.Fatalf("creating widget in %s: %v", path, err)
	}
}

// createdObjects lists what Ensure creates, for reading back.
func createdObjects(m *tokens.Minter) []client.Object {
	sa := m.ServiceAccount()
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-workload"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-token-requester"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets-workload"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets-token-requester"}},
	}
}

func restConfigFrom(t *testing.T, kubeconfig []byte) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatalf("parsing the credential's kubeconfig: %v", err)
	}
	return cfg
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

func listWidgetsErr(ctx context.Context, cfg *rest.Config) error {
	_, err := listWidgetsN(ctx, cfg)
	return err
}

func listWidgets(ctx context.Context, t *testing.T, cfg *rest.Config) int {
	t.Helper()
	n, err := listWidgetsN(ctx, cfg)
	if err != nil {
		t.Fatalf("listing widgets: %v", err)
	}
	return n
}

// listWidgetsN lists widgets at the REST level, so that no discovery is involved.
func listWidgetsN(ctx context.Context, cfg *rest.Config) (int, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: widgetMapper()})
	if err != nil {
		return 0, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(widgetGroup + "/v1alpha1")
	list.SetKind("WidgetList")
	if err := c.List(ctx, list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// widgetMapper maps the Widget kind without discovery.
func widgetMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: widgetGroup, Version: "v1alpha1", Kind: "Widget"}, meta.RESTScopeNamespace)
	return m
}

func statusCode(err error) int32 {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code
	}
	return 0
}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:                   "object",
					XPreserveUnknownFields: ptr(true),
				}},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// TestMinterBindsDeclaredClusterRoles: the provider's RoleRefs become bindings of the
// workload to the workspace's own ClusterRoles. A role the workspace lacks is named in
// a *MissingError and nothing is bound to it; once the tenant creates it,
// the credential has its rights; Remove deletes the binding and leaves the role.
func TestMinterBindsDeclaredClusterRoles(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := setup(ctx, t)
	a := e.tenant(ctx, t, "tenant-a", nil)
	e.vwURL = e.k.VirtualWorkspaceURLs(ctx, t, e.providerPath, exportName)[0]
	direct, _ := e.directConfig(ctx, t)
	m := tokens.New(tokens.Options{Direct: direct, ProviderName: "widgets", Rules: workloadRules,
		ClusterRoles: []string{"configmap-admin"}, Labels: map[string]string{managedBy: "widgets"}})
	wsA, _ := e.vwClient(t, a.lc, e.runtimeToken(ctx, t))
	admin := e.k.ClientFor(t, a.path)
	binding := client.ObjectKey{Name: "widgets-workload-configmap-admin"}

	_, err := m.Ensure(ctx, wsA, a.lc)
	var missing *tokens.MissingError
	if !errors.As(err, &missing) || missing.Kind != "ClusterRole" || missing.Name != "configmap-admin" || !strings.Contains(err.Error(), "ClusterRole configmap-admin") {
		t.Fatalf("Ensure without the role: %v, want a MissingError naming the ClusterRole configmap-admin", err)
	}
	if err := admin.Get(ctx, binding, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("a binding to the missing role: %v, want none", err)
	}

	if err := admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "configmap-admin"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	}}); err != nil {
		t.Fatal(err)
	}
	cred, err := m.Ensure(ctx, wsA, a.lc)
	if err != nil {
		t.Fatalf("Ensure with the role: %v", err)
	}
	crb := &rbacv1.ClusterRoleBinding{}
	if err := admin.Get(ctx, binding, crb); err != nil {
		t.Fatalf("the binding to the declared role: %v", err)
	}
	sa := m.ServiceAccount()
	if crb.RoleRef.Name != "configmap-admin" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa.Name || crb.Labels[managedBy] != "widgets" {
		t.Errorf("binding %s: roleRef %s, subjects %+v, labels %v", binding.Name, crb.RoleRef.Name, crb.Subjects, crb.Labels)
	}
	// The role's rights reach the credential (kcp's authorizer may take a moment).
	cs := clientset(t, restConfigFrom(t, cred.Kubeconfig))
	harness.Eventually(ctx, t, 30*time.Second, "the workload creates a ConfigMap through the declared role", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "through-role"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})

	if r, err := m.Remove(ctx, wsA, a.lc); err != nil || !r.Done() || len(r.Left) != 0 {
		t.Fatalf("Remove: %+v, %v", r, err)
	}
	if err := admin.Get(ctx, binding, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("the binding after Remove: %v, want gone", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Name: "configmap-admin"}, &rbacv1.ClusterRole{}); err != nil {
		t.Errorf("the workspace's own role after Remove: %v, want kept", err)
	}

	// A tenant accepting the claims only for the runtime's labelled objects hides its
	// own roles from the runtime: the role is found all the same, and bound.
	b := e.tenantWithSelector(ctx, t, "tenant-b", nil, apisv1alpha2.PermissionClaimSelector{
		LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{managedBy: "widgets"}}})
	adminB := e.k.ClientFor(t, b.path)
	if err := adminB.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "configmap-admin"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	}}); err != nil {
		t.Fatal(err)
	}
	wsB, _ := e.vwClient(t, b.lc, e.runtimeToken(ctx, t))
	if _, err := m.Ensure(ctx, wsB, b.lc); err != nil {
		t.Fatalf("Ensure where the claims hide the role: %v", err)
	}
	if err := adminB.Get(ctx, binding, &rbacv1.ClusterRoleBinding{}); err != nil {
		t.Errorf("the binding where the claims hide the role: %v", err)
	}
}

// TestMinterKeepsNamespacedRightsInTheirNamespace: rules the provider declares for a
// namespace and its Role refs become a Role and RoleBindings in that namespace of the
// workspace, never a ClusterRole: the credential may act there and is refused in
// another namespace. A namespace or Role the workspace lacks is named in a
// *MissingError; a deleted RoleBinding is noticed and repaired; a binding a new
// release no longer declares is deleted; Remove deletes what the Minter made and leaves
// the tenant's Role. The tenant accepts the claims for the
// runtime's labelled objects only, which hides its own Role from the runtime.
func TestMinterKeepsNamespacedRightsInTheirNamespace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := setup(ctx, t)
	// The export claims roles and rolebindings, as the builder makes it for such a
	// declaration; the tenant accepts them.
	s, err := apiexport.FromCRD(exportName, widgetCRD()).APISurface()
	if err != nil {
		t.Fatal(err)
	}
	s.PermissionClaims = apiexport.RoleClaims()
	if _, err := apiexport.Provision(ctx, e.k.ClientFor(t, e.providerPath), s, apiexport.Options{}); err != nil {
		t.Fatalf("Provision with the role claims: %v", err)
	}
	e.claims = s.Claims()
	a := e.tenantWithSelector(ctx, t, "tenant-a", nil, apisv1alpha2.PermissionClaimSelector{
		LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{managedBy: "widgets"}}})
	e.vwURL = e.k.VirtualWorkspaceURLs(ctx, t, e.providerPath, exportName)[0]
	direct, _ := e.directConfig(ctx, t)
	configMaps := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}}}
	m := tokens.New(tokens.Options{Direct: direct, ProviderName: "widgets", Rules: workloadRules, Labels: map[string]string{managedBy: "widgets"},
		Namespaced: []tokens.NamespaceRights{{Namespace: "apps", Rules: configMaps, Roles: []string{"secret-reader"}}}})
	wsA, _ := e.vwClient(t, a.lc, e.runtimeToken(ctx, t))
	admin := e.k.ClientFor(t, a.path)
	expectMissing := func(kind, namespace, name string) {
		t.Helper()
		_, err := m.Ensure(ctx, wsA, a.lc)
		var missing *tokens.MissingError
		if !errors.As(err, &missing) || *missing != (tokens.MissingError{Kind: kind, Namespace: namespace, Name: name}) {
			t.Fatalf("Ensure: %v, want a MissingError naming the %s %s/%s", err, kind, namespace, name)
		}
	}
	expectMissing("Namespace", "", "apps")
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	expectMissing("Role", "apps", "secret-reader")
	if err := admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "secret-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
	}}); err != nil {
		t.Fatal(err)
	}
	cred, err := m.Ensure(ctx, wsA, a.lc)
	if err != nil {
		t.Fatalf("Ensure with namespace and role: %v", err)
	}

	role := &rbacv1.Role{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "widgets-workload"}, role); err != nil || !reflect.DeepEqual(role.Rules, configMaps) || role.Labels[managedBy] != "widgets" {
		t.Fatalf("Role apps/widgets-workload: %v, rules %+v, labels %v", err, role.Rules, role.Labels)
	}
	for _, name := range []string{"widgets-workload", "widgets-workload-secret-reader"} {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, &rbacv1.RoleBinding{}); err != nil {
			t.Errorf("RoleBinding apps/%s: %v", name, err)
		}
	}
	cr := &rbacv1.ClusterRole{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "widgets-workload"}, cr); err != nil || !reflect.DeepEqual(cr.Rules, workloadRules) {
		t.Errorf("the workspace-wide ClusterRole holds %+v (%v), want only the rules without a namespace", cr.Rules, err)
	}

	// What the credential may do: in apps what was declared there, elsewhere nothing
	// of it (kcp's authorizer may take a moment to see new bindings).
	cs := clientset(t, restConfigFrom(t, cred.Kubeconfig))
	harness.Eventually(ctx, t, 30*time.Second, "the workload creates a ConfigMap in apps", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-apps"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	harness.Eventually(ctx, t, 30*time.Second, "the workload reads Secrets in apps through the tenant's Role", func(ctx context.Context) error {
		if _, err := cs.CoreV1().Secrets("apps").Get(ctx, "none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading a Secret in apps: %v, want not found", err)
		}
		return nil
	})
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a ConfigMap in default: %v, want forbidden", err)
	}

	// A tenant deleting a RoleBinding is drift, repaired by the next Ensure.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "widgets-workload"}}
	if err := admin.Delete(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if !m.Drifted(a.lc, rb, true) {
		t.Error("deleting RoleBinding apps/widgets-workload is no drift")
	}
	if m.Drifted(a.lc, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "widgets-workload"}}, true) {
		t.Error("a RoleBinding of that name in another namespace is drift")
	}
	cred, err = m.Ensure(ctx, wsA, a.lc)
	if err != nil || !slices.Contains(cred.Repaired, "RoleBinding apps/widgets-workload was missing") {
		t.Fatalf("Ensure after the deletion: %v, repaired %q", err, cred.Repaired)
	}

	// A new release drops the Role ref: the watch reports the binding it left, which
	// is stale, and the next Ensure deletes it.
	m = tokens.New(tokens.Options{Direct: direct, ProviderName: "widgets", Rules: workloadRules, Labels: map[string]string{managedBy: "widgets"},
		Namespaced: []tokens.NamespaceRights{{Namespace: "apps", Rules: configMaps}}})
	if _, err := m.Ensure(ctx, wsA, a.lc); err != nil {
		t.Fatalf("Ensure of the new release: %v", err)
	}
	dropped := &rbacv1.RoleBinding{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "widgets-workload-secret-reader"}, dropped); err != nil {
		t.Fatal(err)
	}
	if !m.Drifted(a.lc, dropped, false) {
		t.Error("the binding of a dropped Role ref is not reported")
	}
	if _, err := m.Ensure(ctx, wsA, a.lc); err != nil {
		t.Fatalf("Ensure after the report: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(dropped), &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("the binding of the dropped Role ref: %v, want deleted", err)
	}

	if r, err := m.Remove(ctx, wsA, a.lc); err != nil || !r.Done() || len(r.Left) != 0 {
		t.Fatalf("Remove: %+v, %v", r, err)
	}
	left := &rbacv1.RoleBindingList{}
	if err := admin.List(ctx, left, client.InNamespace("apps"), client.MatchingLabels{managedBy: "widgets"}); err != nil || len(left.Items) != 0 {
		t.Errorf("RoleBindings left in apps: %d (%v)", len(left.Items), err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.Role{}); !apierrors.IsNotFound(err) {
		t.Errorf("Role apps/widgets-workload after Remove: %v, want gone", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "secret-reader"}, &rbacv1.Role{}); err != nil {
		t.Errorf("the tenant's own Role after Remove: %v, want kept", err)
	}
}
