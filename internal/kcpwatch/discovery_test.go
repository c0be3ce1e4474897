package kcpwatch

import (
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
)

// workspaceCluster is what kcp's multicluster-provider engages: a cluster whose config
// points at <vw>/clusters/<workspace>.
type workspaceCluster struct {
	ctrlcluster.Cluster
	cfg *rest.Config
}

func (c *workspaceCluster) GetConfig() *rest.Config     { return c.cfg }
func (c *workspaceCluster) GetHTTPClient() *http.Client { return http.DefaultClient }
func (c *workspaceCluster) GetScheme() *runtime.Scheme  { return runtime.NewScheme() }
func (c *workspaceCluster) GetCache() cache.Cache       { return &informertest.FakeInformers{} }

func TestSharedDiscoveryOneMapperPerVirtualWorkspace(t *testing.T) {
	d := NewSharedDiscovery()
	wrap := func(host string) ctrlcluster.Cluster {
		t.Helper()
		cl, err := d.Wrap(&workspaceCluster{cfg: &rest.Config{Host: host}})
		if err != nil {
			t.Fatalf("Wrap(%s): %v", host, err)
		}
		return cl
	}
	a := wrap("https://kcp/services/apiexport/root:sp/widgets/clusters/a")
	b := wrap("https://kcp/services/apiexport/root:sp/widgets/clusters/b")
	other := wrap("https://shard-2/services/apiexport/root:sp/widgets/clusters/c")
	if a.GetRESTMapper() != b.GetRESTMapper() {
		t.Errorf("two workspaces of one virtual workspace got different REST mappers")
	}
	if a.GetRESTMapper() == other.GetRESTMapper() {
		t.Errorf("workspaces of two virtual workspace URLs share a REST mapper")
	}
	if a.GetConfig().Host != "https://kcp/services/apiexport/root:sp/widgets/clusters/a" {
		t.Errorf("the wrapped cluster changed its config: %s", a.GetConfig().Host)
	}
	if _, err := d.Wrap(&workspaceCluster{cfg: &rest.Config{Host: "https://kcp/clusters-less"}}); err == nil {
		t.Errorf("Wrap accepted a URL that names no workspace")
	}
}
