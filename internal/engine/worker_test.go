package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// workerTenancy gives the worker a credential of its own.
type workerTenancy struct {
	recordingTenancy
	revoked int
}

func (*workerTenancy) EndUser(context.Context, Target[*widget.Widget]) (*cluster.Access, error) {
	return &cluster.Access{Kubeconfig: []byte("provider")}, nil
}

func (*workerTenancy) EndUserWorker(context.Context, Target[*widget.Widget]) (*cluster.Access, error) {
	return &cluster.Access{Kubeconfig: []byte("worker")}, nil
}

func (w *workerTenancy) RevokeWorker(context.Context, Target[*widget.Widget]) error {
	w.revoked++
	return nil
}

// kubeconfigProvider records the kubeconfigs it is handed.
type kubeconfigProvider struct{ provider, worker string }

func (p *kubeconfigProvider) CreateOrUpdate(ctx context.Context, _ *widget.Widget) (provider.Result, error) {
	p.provider, p.worker = string(cluster.MCPKubeconfigFromCtx(ctx)), string(cluster.WorkerKubeconfigFromCtx(ctx))
	return provider.Done(), nil
}

func (p *kubeconfigProvider) Delete(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Done(), nil
}

// TestWorkerCredential: a mode that mints the worker a credential of its own hands it
// to the provider apart from the provider's; a mode that does not hands the provider's.
func TestWorkerCredential(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tenancy Tenancy[*widget.Widget]
		want    string
	}{
		{"apart", &workerTenancy{}, "worker"},
		{"shared", &sharedTenancy{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1", Finalizers: []string{testFinalizer}}}
			server := fake.NewClientBuilder().WithScheme(widgetScheme(t)).WithObjects(obj).WithStatusSubresource(&widget.Widget{}).Build()
			p := &kubeconfigProvider{}
			opts := testOptions(t, p)
			opts.Tenancy = tc.tenancy
			e := New(opts, widgetClusters(server))
			req := mcreconcile.Request{ClusterName: "ws", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "w"}}}
			if _, err := e.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = p.provider
			}
			if p.worker != want || p.provider == "" {
				t.Errorf("provider was handed %q, worker %q; want the worker's %q", p.provider, p.worker, want)
			}
		})
	}
}

// sharedTenancy has no worker credential of its own.
type sharedTenancy struct{ recordingTenancy }

func (*sharedTenancy) EndUser(context.Context, Target[*widget.Widget]) (*cluster.Access, error) {
	return &cluster.Access{Kubeconfig: []byte("provider")}, nil
}
