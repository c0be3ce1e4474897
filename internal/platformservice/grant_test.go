package platformservice_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/platformservice"
)

func TestMain(m *testing.M) { harness.Main(m) }

// within polls cond until it returns nil: RBAC changes reach the API server's
// authorizer through its informers, a moment after the write.
func within(t *testing.T, what string, cond func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	}); err != nil {
		t.Errorf("%s: %v", what, last)
	}
}

func rules(resource string, verbs ...string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: verbs}}
}

// TestGrant drives a Grant against a real kube-apiserver: what it creates, that the
// access is exactly the declared one, caching, repair, a changed declaration and release.
func TestGrant(t *testing.T) {
	ctx := t.Context()
	srv := harness.StartAPIServer(t, harness.PurposePlatform)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(srv.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	id := cluster.PlatformIdentity("openmcp-system", "eso")
	key := access.Key{Request: reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "openmcp-system", Name: "eso"}}, Identity: id}
	tenantNS := id.TenantNamespace()

	newGrant := func(t *testing.T, purpose string, perms cluster.Permissions) *platformservice.Grant {
		t.Helper()
		g, err := platformservice.NewGrant(admin, srv.Config, platformservice.GrantOptions{
			ProviderName: "eso", Purpose: purpose, Permissions: perms, Scheme: scheme,
		})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	v1 := cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{
		{Rules: rules("configmaps", "get", "list")},
		{Namespace: "team-a", Rules: rules("secrets", "get", "list")},
	}}
	count := func(t *testing.T, list client.ObjectList, purpose string) int {
		t.Helper()
		if err := admin.List(ctx, list, client.MatchingLabels{platformservice.TenantLabel: tenantNS, platformservice.PurposeLabel: purpose}); err != nil {
			t.Fatal(err)
		}
		return meta.LenList(list)
	}

	g := newGrant(t, platformservice.PurposeEndUser, v1)
	var first *cluster.Access
	t.Run("ensure grants exactly the declared permissions", func(t *testing.T) {
		before := time.Now()
		a, err := g.Ensure(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		first = a
		review := &authenticationv1.SelfSubjectReview{}
		if err := a.Client.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if want := "system:serviceaccount:" + tenantNS + ":eso--mcp"; review.Status.UserInfo.Username != want {
			t.Errorf("authenticates as %q, want %q", review.Status.UserInfo.Username, want)
		}
		within(t, "listing ConfigMaps", func() error { return a.Client.List(ctx, &corev1.ConfigMapList{}) })
		within(t, "listing Secrets in team-a", func() error {
			return a.Client.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a"))
		})
		if err := a.Client.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantNS)); !apierrors.IsForbidden(err) {
			t.Errorf("listing Secrets outside team-a: want forbidden, got %v", err)
		}
		// Renewal at 80 % of the default hour, which the engine requeues for.
		if lo, hi := before.Add(47*time.Minute), time.Now().Add(49*time.Minute); a.RenewAt.Before(lo) || a.RenewAt.After(hi) {
			t.Errorf("RenewAt %s not in [%s, %s]", a.RenewAt, lo, hi)
		}
		if len(a.Kubeconfig) == 0 {
			t.Error("no kubeconfig")
		}
	})

	t.Run("a fresh token is reused", func(t *testing.T) {
		a, err := g.Ensure(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if a != first {
			t.Error("Ensure minted again although the token is fresh")
		}
		if l, err := g.Lookup(ctx, key); err != nil || l != first {
			t.Errorf("Lookup = %p, %v; want the cached access %p", l, err, first)
		}
	})

	t.Run("a recreated ServiceAccount gets a new token", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: g.ServiceAccountName()}}
		if err := admin.Delete(ctx, sa); err != nil {
			t.Fatal(err)
		}
		a, err := g.Ensure(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if a == first {
			t.Fatal("the access of the deleted ServiceAccount was reused")
		}
		within(t, "listing ConfigMaps with the new token", func() error { return a.Client.List(ctx, &corev1.ConfigMapList{}) })
	})

	wl := newGrant(t, platformservice.PurposeWorkload, cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: rules("pods", "get")}}})
	if _, err := wl.Ensure(ctx, key); err != nil {
		t.Fatal(err)
	}

	t.Run("a changed declaration removes what is no longer declared", func(t *testing.T) {
		// A new provider version is a new process: a new Grant with the new declaration.
		v2 := cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: rules("configmaps", "get", "list")}}}
		a, err := newGrant(t, platformservice.PurposeEndUser, v2).Ensure(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, &rbacv1.RoleList{}, platformservice.PurposeEndUser) + count(t, &rbacv1.RoleBindingList{}, platformservice.PurposeEndUser); n != 0 {
			t.Errorf("%d Roles/RoleBindings of the old declaration left", n)
		}
		if n := count(t, &rbacv1.ClusterRoleList{}, platformservice.PurposeEndUser); n != 1 {
			t.Errorf("%d ClusterRoles, want 1", n)
		}
		within(t, "listing Secrets in team-a after the declaration dropped it", func() error {
			if err := a.Client.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a")); !apierrors.IsForbidden(err) {
				return fmt.Errorf("want forbidden, got %v", err)
			}
			return nil
		})
		if n := count(t, &rbacv1.ClusterRoleList{}, platformservice.PurposeWorkload); n != 1 {
			t.Errorf("the workload grant lost its ClusterRole: %d", n)
		}
	})

	t.Run("release removes the grant and nothing else", func(t *testing.T) {
		done, err := g.Release(ctx, key)
		if err != nil || !done {
			t.Fatalf("Release = %v, %v", done, err)
		}
		for what, list := range map[string]client.ObjectList{
			"ServiceAccounts": &corev1.ServiceAccountList{}, "ClusterRoles": &rbacv1.ClusterRoleList{},
			"ClusterRoleBindings": &rbacv1.ClusterRoleBindingList{}, "Roles": &rbacv1.RoleList{}, "RoleBindings": &rbacv1.RoleBindingList{},
		} {
			if n := count(t, list, platformservice.PurposeEndUser); n != 0 {
				t.Errorf("%d %s left", n, what)
			}
		}
		if a, err := g.Lookup(ctx, key); err != nil || a != nil {
			t.Errorf("Lookup after release = %v, %v; want nothing", a, err)
		}
		if n := count(t, &corev1.ServiceAccountList{}, platformservice.PurposeWorkload); n != 1 {
			t.Errorf("releasing the end-user grant touched the workload grant: %d ServiceAccounts", n)
		}
	})

	t.Run("a lifetime below the TokenRequest minimum is refused", func(t *testing.T) {
		_, err := platformservice.NewGrant(admin, srv.Config, platformservice.GrantOptions{
			ProviderName: "eso", Purpose: platformservice.PurposeEndUser, TokenTTL: time.Minute,
		})
		if err == nil {
			t.Fatal("NewGrant accepted a one-minute token lifetime")
		}
	})
}
