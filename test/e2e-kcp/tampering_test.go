package e2ekcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestTampering is a hostile but legitimate tenant, and one that changes its mind: it
// rejects a claim, takes the runtime's objects over or deletes and changes them. The
// runtime must never leave a working credential behind an object that is gone, must
// never let deletion depend on repairing anything, and must repair what it keeps in
// a workspace within seconds, saying so on the object meanwhile.
func TestTampering(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	harness.LogToTest(t)
	// Two credentials per workspace, as a provider with broad install-time rights
	// declares them: the provider's own (<name>-workload: it may also read ConfigMaps)
	// and the worker's (<name>-worker: its widgets only), which the widget hands its
	// worker. Each is tampered with below.
	e := startKCPEnv(ctx, t, builder.Options{}, func(b *builder.Builder[*widget.Widget]) {
		b.MCPPermissions(providerRights).WorkerMCPPermissions(widget.KCPMCPPermissions)
	})
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	provider, worker := e.name+"-workload", e.name+"-worker"

	readyTenant := func(t *testing.T, name string) tenant {
		t.Helper()
		tn := e.newTenant(ctx, t, name)
		newWidget(ctx, t, tn.c, main.Name, "blue")
		waitReady(ctx, t, tn.c, main)
		if err := workerWorks(ctx, e, tn); err != nil {
			t.Fatalf("worker's credential of a Ready widget: %v", err)
		}
		return tn
	}
	// nothingLeft counts what the runtime made for a tenant, on every cluster.
	nothingLeft := func(t *testing.T, tn tenant) {
		t.Helper()
		if n := countManaged(ctx, t, tn.c, e.name); n != 0 {
			t.Errorf("%d ServiceAccounts, ClusterRoles and bindings of the runtime left in the workspace", n)
		}
		if n := platformRequests(ctx, t, e.pf, tn.lc); n != 0 {
			t.Errorf("%d platform requests left", n)
		}
		ns := tenantNamespace(tn)
		for name, o := range map[string]client.Object{"widget": &corev1.ConfigMap{}, "widget-kubeconfig": &corev1.Secret{}} {
			if err := e.wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
				t.Errorf("worker %T %s/%s on the workload cluster: %v, want gone", o, ns, name, err)
			}
		}
	}

	t.Run("a claim rejected before deletion: the token dies at once, deletion waits for the claim", func(t *testing.T) {
		tn := readyTenant(t, "tamper-claim")
		token := workerToken(ctx, t, e, tn)
		setClaimState(ctx, t, tn, e.name, "clusterrolebindings", apisv1alpha2.ClaimRejected)

		deleted := time.Now()
		if err := tn.c.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: main.Namespace, Name: main.Name}}); err != nil {
			t.Fatal(err)
		}
		waitRefused(ctx, t, e, tn, token, deleted)

		msg := waitReason(ctx, t, tn.c, main, v1alpha1.ReasonCleanupBlocked)
		for _, want := range []string{"ClusterRoleBinding " + provider, "ClusterRoleBinding " + e.name + "-token-requester",
			"ClusterRoleBinding " + worker, "ClusterRoleBinding " + worker + "-token-requester",
			`"clusterrolebindings.rbac.authorization.k8s.io"`, "accept it again", "tokens no longer work"} {
			if !strings.Contains(msg, want) {
				t.Errorf("CleanupBlocked message %q does not say %q", msg, want)
			}
		}
		wantEvents(ctx, t, tn.c, e.name, main, v1alpha1.ReasonCleanupBlocked)
		// Everything else is released meanwhile.
		harness.Eventually(ctx, t, time.Minute, "platform requests released", func(ctx context.Context) error {
			if n := platformRequests(ctx, t, e.pf, tn.lc); n != 0 {
				return fmt.Errorf("%d left", n)
			}
			return nil
		})

		// Accepting the claim again lets the runtime finish.
		setClaimState(ctx, t, tn, e.name, "clusterrolebindings", apisv1alpha2.ClaimAccepted)
		harness.Eventually(ctx, t, time.Minute, "the widget gone after the claim is accepted again", func(ctx context.Context) error {
			return localenv.Gone(tn.c.Get(ctx, main, &widget.Widget{}))
		})
		nothingLeft(t, tn)
	})

	t.Run("a binding the tenant took over: the object says what to do, deletion finishes and reports it", func(t *testing.T) {
		tn := readyTenant(t, "tamper-label")
		token := workerToken(ctx, t, e, tn)
		binding := &rbacv1.ClusterRoleBinding{}
		if err := tn.c.Get(ctx, client.ObjectKey{Name: provider}, binding); err != nil {
			t.Fatal(err)
		}
		base := binding.DeepCopy()
		delete(binding.Labels, apiexport.ManagedByLabel)
		if err := tn.c.Patch(ctx, binding, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		msg := waitReasonWithin(ctx, t, tn.c, main, v1alpha1.ReasonConflictingObject, 10*time.Second)
		for _, want := range []string{"clusterrolebindings.rbac.authorization.k8s.io " + provider, "delete it", apiexport.ManagedByLabel + "=" + e.name} {
			if !strings.Contains(msg, want) {
				t.Errorf("ConflictingObject message %q does not say %q", msg, want)
			}
		}

		deleted := time.Now()
		harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main))
		t.Logf("measured: widget with a taken-over binding gone %s after the deletion", time.Since(deleted).Round(100*time.Millisecond))
		waitRefused(ctx, t, e, tn, token, deleted)
		wantEvents(ctx, t, tn.c, e.name, main, "LeftBehind")
		nothingLeft(t, tn)
		// The taken-over binding is the tenant's: left, and named in the event.
		if err := tn.c.Get(ctx, client.ObjectKey{Name: provider}, &rbacv1.ClusterRoleBinding{}); err != nil {
			t.Errorf("the tenant's unlabelled binding: %v, want left in place", err)
		}
		if text := string(eventText(ctx, t, tn.c)); !strings.Contains(text, "ClusterRoleBinding "+provider) {
			t.Errorf("no event names the binding left behind")
		}
	})

	t.Run("tampering is repaired within seconds, and the object says so meanwhile", func(t *testing.T) {
		tn := readyTenant(t, "tamper-drift")
		workerRole, providerRole := &rbacv1.ClusterRole{}, &rbacv1.ClusterRole{}
		for name, role := range map[string]*rbacv1.ClusterRole{worker: workerRole, provider: providerRole} {
			if err := tn.c.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
				t.Fatal(err)
			}
		}
		exists := func(o client.Object) func(context.Context) error {
			return func(ctx context.Context) error { return tn.c.Get(ctx, client.ObjectKeyFromObject(o), o) }
		}
		emptyRole := func(want *rbacv1.ClusterRole) func(context.Context) error {
			return func(ctx context.Context) error {
				role := want.DeepCopy()
				if err := tn.c.Get(ctx, client.ObjectKeyFromObject(role), role); err != nil {
					return err
				}
				role.Rules = nil
				return tn.c.Update(ctx, role)
			}
		}
		sameRules := func(want *rbacv1.ClusterRole) func(context.Context) error {
			return func(ctx context.Context) error {
				role := &rbacv1.ClusterRole{}
				if err := tn.c.Get(ctx, client.ObjectKeyFromObject(want), role); err != nil {
					return err
				}
				if len(role.Rules) != len(want.Rules) {
					return fmt.Errorf("rules %v", role.Rules)
				}
				return nil
			}
		}
		deleteObj := func(o client.Object) func(context.Context) error {
			return func(ctx context.Context) error { return tn.c.Delete(ctx, o.DeepCopyObject().(client.Object)) }
		}
		sa := func(name string) *corev1.ServiceAccount {
			return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		}
		crb := func(name string) *rbacv1.ClusterRoleBinding {
			return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		// Each case: the change, and what says it is undone besides a working worker.
		cases := []struct {
			what     string
			tamper   func(context.Context) error
			repaired func(context.Context) error
		}{
			{"delete the worker's ServiceAccount", deleteObj(sa(worker)), nil}, // set below: the worker holds a new token
			{"empty the worker's ClusterRole", emptyRole(workerRole), sameRules(workerRole)},
			{"delete the worker's ClusterRoleBinding", deleteObj(crb(worker)), exists(crb(worker))},
			{"delete the worker's token-minting binding", deleteObj(crb(worker + "-token-requester")), exists(crb(worker + "-token-requester"))},
			{"delete the provider's ServiceAccount", deleteObj(sa(provider)), exists(sa(provider))},
			{"empty the provider's ClusterRole", emptyRole(providerRole), sameRules(providerRole)},
			{"delete the provider's ClusterRoleBinding", deleteObj(crb(provider)), exists(crb(provider))},
			{"delete the provider's token-minting binding", deleteObj(crb(e.name + "-token-requester")), exists(crb(e.name + "-token-requester"))},
		}
		oldToken := workerToken(ctx, t, e, tn)
		cases[0].repaired = func(ctx context.Context) error {
			if workerToken(ctx, t, e, tn) == oldToken {
				return errors.New("the worker still holds the deleted account's token")
			}
			return nil
		}
		for _, tc := range cases {
			reasons := recordReasons(ctx, t, e, tn, main)
			start := time.Now()
			if err := tc.tamper(ctx); err != nil {
				t.Fatalf("%s: %v", tc.what, err)
			}
			harness.Eventually(ctx, t, 10*time.Second, tc.what+": repaired", func(ctx context.Context) error {
				if err := tc.repaired(ctx); err != nil {
					return err
				}
				return workerWorks(ctx, e, tn)
			})
			took := time.Since(start)
			t.Logf("measured: %s: repaired, worker's credential working, after %s", tc.what, took.Round(100*time.Millisecond))
			if took > 5*time.Second {
				t.Errorf("%s: repaired after %s, target 5s", tc.what, took.Round(100*time.Millisecond))
			}
			// Not Ready while it was broken, Ready again after.
			harness.Eventually(ctx, t, 10*time.Second, tc.what+": the object reported the repair", func(context.Context) error {
				seen := reasons()
				i := slices.Index(seen, v1alpha1.ReasonAccessRepaired)
				if i < 0 || !slices.Contains(seen[i+1:], v1alpha1.ReasonReady) {
					return fmt.Errorf("Ready reasons seen: %v", seen)
				}
				return nil
			})
		}
		wantEvents(ctx, t, tn.c, e.name, main, v1alpha1.ReasonAccessRepaired)
		harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main))
		nothingLeft(t, tn)
	})

	t.Run("a ServiceAccount of the runtime's name made by the tenant: a message that says what to do", func(t *testing.T) {
		tn := e.newTenant(ctx, t, "tamper-foreign")
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: provider}}
		harness.Eventually(ctx, t, 30*time.Second, "the tenant's own ServiceAccount", func(ctx context.Context) error { return tn.c.Create(ctx, sa) })
		newWidget(ctx, t, tn.c, main.Name, "blue")
		msg := waitReason(ctx, t, tn.c, main, v1alpha1.ReasonConflictingObject)
		for _, want := range []string{"serviceaccounts default/" + provider, "delete it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("ConflictingObject message %q does not say %q", msg, want)
			}
		}
		// Doing what it says serves the tenant.
		if err := tn.c.Delete(ctx, sa); err != nil {
			t.Fatal(err)
		}
		waitReady(ctx, t, tn.c, main)
		harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main))
		nothingLeft(t, tn)
	})
}

// providerRights are the provider's own rights in TestTampering's workspaces: more
// than its worker's (widget.KCPMCPPermissions), as a provider that installs things has.
var providerRights = cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{widget.GroupVersion.Group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
}}}}

func tenantNamespace(tn tenant) string { return cluster.KCPIdentity(tn.lc.String()).TenantNamespace() }

// workerToken is the bearer token in the kubeconfig the provider handed the worker.
func workerToken(ctx context.Context, t testing.TB, e *kcpEnv, tn tenant) string {
	t.Helper()
	return workerConfig(ctx, t, e.wl, tn.lc).BearerToken
}

// workerWorks says whether the kubeconfig the worker holds now reads its widget.
func workerWorks(ctx context.Context, e *kcpEnv, tn tenant) error {
	s := &corev1.Secret{}
	if err := e.wl.Get(ctx, client.ObjectKey{Namespace: tenantNamespace(tn), Name: "widget-kubeconfig"}, s); err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["kubeconfig"])
	if err != nil {
		return err
	}
	return listWidgetsAs(ctx, e, tn, cfg.BearerToken)
}

// waitRefused waits until the worker's token is refused: within 10 s of the deletion
// for anything (the runtime deleted its rights), and a while later as unauthenticated
// (its ServiceAccount is gone; the API server caches a token's authentication for 10 s).
func waitRefused(ctx context.Context, t *testing.T, e *kcpEnv, tn tenant, token string, deleted time.Time) {
	t.Helper()
	harness.Eventually(ctx, t, 10*time.Second, "the worker's token refused after deletion", func(ctx context.Context) error {
		if err := listWidgetsAs(ctx, e, tn, token); !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("worker's token: %v", err)
		}
		return nil
	})
	t.Logf("measured: worker's token refused (403 or 401) %s after the deletion", time.Since(deleted).Round(100*time.Millisecond))
	harness.Eventually(ctx, t, 30*time.Second, "the worker's token unauthenticated after deletion", func(ctx context.Context) error {
		if err := listWidgetsAs(ctx, e, tn, token); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("worker's token: %v", err)
		}
		return nil
	})
	t.Logf("measured: worker's token unauthenticated (401) %s after the deletion", time.Since(deleted).Round(100*time.Millisecond))
}

// listWidgetsAs lists the workspace's widgets with a bearer token.
func listWidgetsAs(ctx context.Context, e *kcpEnv, tn tenant, token string) error {
	cfg := e.k.ConfigFor(tn.path)
	cfg.BearerToken, cfg.BearerTokenFile, cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = token, "", nil, nil, "", ""
	c, err := client.New(cfg, client.Options{Scheme: e.scheme, Mapper: tn.c.RESTMapper()})
	if err != nil {
		return err
	}
	return c.List(ctx, &widget.WidgetList{})
}

// setClaimState sets the state of the tenant's claim on resource in its APIBinding.
func setClaimState(ctx context.Context, t testing.TB, tn tenant, binding, resource string, state apisv1alpha2.AcceptablePermissionClaimState) {
	t.Helper()
	b := &apisv1alpha2.APIBinding{}
	if err := tn.c.Get(ctx, client.ObjectKey{Name: binding}, b); err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range b.Spec.PermissionClaims {
		if b.Spec.PermissionClaims[i].Resource == resource {
			b.Spec.PermissionClaims[i].State, found = state, true
		}
	}
	if !found {
		t.Fatalf("no claim on %s in the APIBinding", resource)
	}
	if err := tn.c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// waitReasonWithin is waitReason with a deadline of the caller's.
func waitReasonWithin(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, reason string, timeout time.Duration) string {
	t.Helper()
	harness.Eventually(ctx, t, timeout, key.String()+" "+reason, func(ctx context.Context) error { return reasonErr(ctx, c, key, reason) })
	return waitReason(ctx, t, c, key, reason)
}

// recordReasons watches the object and returns the Ready reasons it has gone through
// since, in order: a transition too brief for polling still shows.
func recordReasons(ctx context.Context, t *testing.T, e *kcpEnv, tn tenant, key client.ObjectKey) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(e.k.ConfigFor(tn.path), client.Options{Scheme: e.scheme, Mapper: tn.c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &widget.WidgetList{}, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			wd, ok := ev.Object.(*widget.Widget)
			if !ok {
				continue
			}
			if c := meta.FindStatusCondition(wd.Status.Conditions, v1alpha1.ConditionReady); c != nil {
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != c.Reason {
					seen = append(seen, c.Reason)
				}
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
