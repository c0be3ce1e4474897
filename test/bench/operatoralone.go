package main

import (
	"context"
	"fmt"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// operatorAlone is the real operator's own throughput, with no runtime: how long its
// scheduler and access-request controller take for n requests created at once, the
// local platform granting as the cluster provider.
type operatorAlone struct {
	n int
	// clusterRequests: n workload ClusterRequests, creation to the last Granted.
	clusterRequests time.Duration
	// byRequest: n AccessRequests naming a granted ClusterRequest (requestRef, as
	// openMCP's clusteraccess library orders them), creation to the last Granted.
	byRequest time.Duration
	// byCluster: n AccessRequests created with the Cluster and the provider and
	// profile labels already set, which the access-request controller only marks
	// Pending; creation to the last Granted.
	byCluster time.Duration
}

const aloneNamespace = "operator-alone"

// measureOperatorAlone measures operatorAlone on fresh servers.
func measureOperatorAlone(ctx context.Context, env *localenv.Env, n int) (operatorAlone, error) {
	res := operatorAlone{n: n}
	lp, err := env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters:      []string{localenv.PurposeWorkload},
		LocalPlatform: localplatform.Options{MaxConcurrentReconciles: 16},
		ClientQPS:     1000, ClientBurst: 2000,
	})
	if err != nil {
		return res, err
	}
	pf, err := client.New(fast(lp.Platform.Config), client.Options{Scheme: benchScheme()})
	if err != nil {
		return res, err
	}
	if err := ensureNS(ctx, pf, aloneNamespace); err != nil {
		return res, err
	}
	name := func(kind string, i int) string { return fmt.Sprintf("%s-%03d", kind, i) }
	granted := func(obj client.Object) bool {
		switch o := obj.(type) {
		case *clustersv1alpha1.ClusterRequest:
			return o.Status.IsGranted()
		case *clustersv1alpha1.AccessRequest:
			return o.Status.IsGranted()
		}
		return false
	}
	// timed creates n objects 8 at a time and waits until every one is granted.
	timed := func(newObj func(i int) client.Object) (time.Duration, error) {
		start := time.Now()
		if err := parallel(n, concurrency, func(i int) error { return pf.Create(ctx, newObj(i)) }); err != nil {
			return 0, err
		}
		deadline := time.Now().Add(10 * time.Minute)
		for i := 0; i < n; {
			obj := newObj(i)
			if err := pf.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return 0, err
			}
			if granted(obj) {
				i++
				continue
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%s %s not granted within 10 minutes", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start), nil
	}
	if res.clusterRequests, err = timed(func(i int) client.Object {
		return &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: aloneNamespace, Name: name("cr", i)},
			Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: localenv.PurposeWorkload}}
	}); err != nil {
		return res, fmt.Errorf("ClusterRequests: %w", err)
	}
	token := &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}}}
	if res.byRequest, err = timed(func(i int) client.Object {
		return &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: aloneNamespace, Name: name("ar-req", i)},
			Spec: clustersv1alpha1.AccessRequestSpec{RequestRef: &commonapi.ObjectReference{Namespace: aloneNamespace, Name: name("cr", i)}, Token: token}}
	}); err != nil {
		return res, fmt.Errorf("AccessRequests by request: %w", err)
	}
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := pf.Get(ctx, client.ObjectKey{Namespace: aloneNamespace, Name: name("cr", 0)}, cr); err != nil {
		return res, err
	}
	c := &clustersv1alpha1.Cluster{}
	if err := pf.Get(ctx, client.ObjectKey{Namespace: cr.Status.Cluster.Namespace, Name: cr.Status.Cluster.Name}, c); err != nil {
		return res, err
	}
	profile := &clustersv1alpha1.ClusterProfile{}
	if err := pf.Get(ctx, client.ObjectKey{Name: c.Spec.Profile}, profile); err != nil {
		return res, err
	}
	if res.byCluster, err = timed(func(i int) client.Object {
		return &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: aloneNamespace, Name: name("ar-cluster", i), Labels: map[string]string{
				clustersv1alpha1.ProviderLabel: profile.Spec.ProviderRef.Name, clustersv1alpha1.ProfileLabel: profile.Name}},
			Spec: clustersv1alpha1.AccessRequestSpec{ClusterRef: &commonapi.ObjectReference{Namespace: c.Namespace, Name: c.Name}, Token: token}}
	}); err != nil {
		return res, fmt.Errorf("AccessRequests by cluster: %w", err)
	}
	return res, nil
}

func (r *report) aloneSection(w func(string, ...any)) {
	w("## The real openmcp-operator alone")
	w("")
	w("No runtime: the benchmark creates the requests, 8 at a time, on a platform with the real openmcp-operator " +
		"v1.3.0 and the local platform as cluster provider, and times the creation of the first to the grant of the last. " +
		"This is what the operator's own pace costs any requester: its clients keep client-go's default limit of " +
		"5 requests per second and read past any cache. Workload ClusterRequests go through its scheduler; " +
		"AccessRequests naming a granted ClusterRequest (spec.requestRef, as openMCP's clusteraccess library orders " +
		"them) through its access-request controller, which resolves the Cluster, its profile and provider; routed " +
		"AccessRequests (spec.clusterRef and the provider and profile labels set on creation, as this runtime orders " +
		"them) leave that controller nothing to resolve.")
	w("")
	w("| requests | workload ClusterRequests | AccessRequests by ClusterRequest | routed AccessRequests |")
	w("|---|---|---|---|")
	for _, a := range r.alone {
		w("| %d | %s (%s each) | %s (%s each) | %s (%s each) |", a.n,
			secs(a.clusterRequests), ms(a.clusterRequests/time.Duration(a.n)),
			secs(a.byRequest), ms(a.byRequest/time.Duration(a.n)),
			secs(a.byCluster), ms(a.byCluster/time.Duration(a.n)))
	}
	w("")
}
