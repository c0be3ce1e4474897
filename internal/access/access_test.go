package access

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// TestGrantsIgnoreBookkeeping: a poll compares grants, so the platform's writes after
// a grant (a new resource version, another annotation) do not count as a change, while
// a new generation, a new Secret or a deletion do.
func TestGrantsIgnoreBookkeeping(t *testing.T) {
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 2, ResourceVersion: "10"}}
	ar.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
	ar.Status.ObservedGeneration = 2
	ar.Status.SecretRef = &commonapi.LocalObjectReference{Name: "s1"}
	g := accessGrant(ar)
	if !g.granted || g.to != "s1" {
		t.Fatalf("grant %+v", g)
	}
	book := ar.DeepCopy()
	book.ResourceVersion, book.Annotations = "11", map[string]string{"x": "y"}
	if accessGrant(book) != g {
		t.Error("a bookkeeping write changed the grant")
	}
	for name, change := range map[string]func(*clustersv1alpha1.AccessRequest){
		"new generation not granted yet": func(a *clustersv1alpha1.AccessRequest) { a.Generation = 3 },
		"another Secret":                 func(a *clustersv1alpha1.AccessRequest) { a.Status.SecretRef.Name = "s2" },
		"being deleted":                  func(a *clustersv1alpha1.AccessRequest) { a.DeletionTimestamp = &metav1.Time{Time: time.Now()} },
		"recreated":                      func(a *clustersv1alpha1.AccessRequest) { a.UID = "u2" },
	} {
		c := ar.DeepCopy()
		change(c)
		if accessGrant(c) == g {
			t.Errorf("%s: the grant reads unchanged", name)
		}
	}
	if accessGrant(nil) != (grant{}) || clusterGrant(nil) != (grant{}) {
		t.Error("no request has a grant")
	}
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{UID: "c1"}}
	cr.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
	cr.Status.Cluster = &commonapi.ObjectReference{Namespace: "clusters", Name: "workload-1"}
	if g := clusterGrant(cr); !g.granted || g.to != "clusters/workload-1" {
		t.Errorf("cluster grant %+v", g)
	}
}

// TestPlatformProblem names the request and the platform's reason, skipping what only
// says it waits.
func TestPlatformProblem(t *testing.T) {
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "kcp--x", Name: "wl"}}
	cr.Status.Conditions = []metav1.Condition{
		{Type: "Scheduled", Status: metav1.ConditionFalse, Reason: "WaitingForScheduler"},
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoMatchingProfile", Message: "no profile serves purpose workload"},
	}
	if got := platformProblem(cr, nil); got != "ClusterRequest kcp--x/wl: NoMatchingProfile: no profile serves purpose workload" {
		t.Errorf("problem %q", got)
	}
	cr.Status.Conditions = cr.Status.Conditions[:1]
	if got := platformProblem(cr, nil); got != "" {
		t.Errorf("a request only waiting reads as a problem: %q", got)
	}
	if got := deniedMessage([]metav1.Condition{{Status: metav1.ConditionTrue, Message: "ok"}, {Status: metav1.ConditionFalse, Message: "quota exceeded"}}); got != "quota exceeded" {
		t.Errorf("denied message %q", got)
	}
	if got := deniedMessage(nil); got != "no reason given" {
		t.Errorf("denied message without conditions %q", got)
	}
}

// TestRenewAtFromSecret reads the platform's timestamps; a Secret without them has no
// renewal time.
func TestRenewAtFromSecret(t *testing.T) {
	created, expires := time.Unix(1_000_000, 0), time.Unix(1_000_000+3600, 0)
	data := map[string][]byte{
		clustersv1alpha1.SecretKeyCreationTimestamp:   []byte(strconv.FormatInt(created.Unix(), 10)),
		clustersv1alpha1.SecretKeyExpirationTimestamp: []byte(strconv.FormatInt(expires.Unix(), 10)),
	}
	if got, want := RenewAt(data), created.Add(48*time.Minute); !got.Equal(want) {
		t.Errorf("RenewAt %s, want %s (80 %% of an hour)", got, want)
	}
	if !RenewAt(map[string][]byte{}).IsZero() {
		t.Error("a Secret without timestamps has a renewal time")
	}
}

// TestFromKubeconfig builds a client, and its error never quotes the kubeconfig.
func TestFromKubeconfig(t *testing.T) {
	a, err := FromKubeconfig([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://mcp.example:6443"}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), nil, nil)
	if err != nil || a.Config.Host != "https://mcp.example:6443" || a.Client == nil {
		t.Fatalf("access %v, %v", a, err)
	}
	if _, err := FromKubeconfig([]byte("secret-token: not a kubeconfig ["), nil, nil); err == nil || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("error %v", err)
	}
	// The client is built on its first use; a transport the kubeconfig cannot make
	// is refused at once.
	if l := a.Client.(*lazyClient); l.c != nil {
		t.Error("the client was built before its first use")
	}
	if gvk, err := a.Client.GroupVersionKindFor(&corev1.Secret{}); err != nil || gvk.Kind != "Secret" {
		t.Errorf("GroupVersionKindFor without building the client: %v, %v", gvk, err)
	}
	if _, err := FromKubeconfig([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://mcp.example:6443", certificate-authority-data: bm90IGEgY2VydGlmaWNhdGU=}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), nil, nil); err == nil || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("a kubeconfig with a CA that does not parse: error %v", err)
	}
}

// TestWaitingRetryBacksOff doubles the look-again interval of a tenant that keeps
// waiting, from RetryInterval up to the cap, per tenant.
func TestWaitingRetryBacksOff(t *testing.T) {
	r := &Requester{opts: Options{RetryInterval: time.Second}, tenants: map[string]*tenantState{}}
	key := Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: "a"}}, Identity: cluster.KCPIdentity("2x8c")}
	var got []time.Duration
	for range 4 {
		got = append(got, r.waitingRetry(key))
	}
	if got[0] != time.Second || got[1] != 2*time.Second || got[3] != 8*time.Second {
		t.Errorf("waits %v, want 1s doubling", got)
	}
	for range 30 {
		if d := r.waitingRetry(key); d > maxWaitingRetry {
			t.Fatalf("wait %s over the cap %s", d, maxWaitingRetry)
		}
	}
	other := Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: "b"}}, Identity: cluster.KCPIdentity("3y9d")}
	if d := r.waitingRetry(other); d != time.Second {
		t.Errorf("another tenant starts at %s, want 1s", d)
	}
}

// TestLazyBuildsOnFirstUseOnce: a client no one uses is never built, a used one is
// built once, and the error of a build that failed answers every call.
func TestLazyBuildsOnFirstUseOnce(t *testing.T) {
	builds := 0
	built := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}).Build()
	c := Lazy(built.Scheme(), func() (client.Client, error) { builds++; return built, nil })
	if _, err := c.GroupVersionKindFor(&corev1.Secret{}); err != nil || builds != 0 {
		t.Fatalf("GroupVersionKindFor: %v, %d builds, want none", err, builds)
	}
	for range 2 {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "s"}, &corev1.Secret{}); err != nil {
			t.Fatalf("Get: %v", err)
		}
	}
	if builds != 1 {
		t.Errorf("%d builds for two reads, want 1", builds)
	}

	failed := Lazy(built.Scheme(), func() (client.Client, error) { return nil, errors.New("no client") })
	if err := failed.Create(context.Background(), &corev1.Secret{}); err == nil || err.Error() != "no client" {
		t.Errorf("Create: %v, want the build's error", err)
	}
	if err := failed.Status().Update(context.Background(), &corev1.Secret{}); err == nil || err.Error() != "no client" {
		t.Errorf("Status().Update: %v, want the build's error", err)
	}
}
