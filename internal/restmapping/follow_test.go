package restmapping_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/restmapping"
)

func TestMain(m *testing.M) { harness.Main(m) }

// TestKindsFollowAKubeAPIServer: a provider's client of an end-user, workload or
// platform cluster (a Kubernetes API server) sees a CRD that appears after it was
// built, sees it gone once it is removed, and sees another one added later.
func TestKindsFollowAKubeAPIServer(t *testing.T) {
	s := harness.StartAPIServer(t, harness.PurposeMCP)
	followCRDs(t, s.Config, s.Client)
}

// TestKindsFollowAKCPWorkspace: the same in a kcp workspace, the end-user cluster of
// kcp mode, where Flux installs a tenant's CRDs.
func TestKindsFollowAKCPWorkspace(t *testing.T) {
	k := harness.StartKCP(t)
	path, _ := k.CreateWorkspace(t.Context(), t, logicalcluster.NewPath("root"), "mappings")
	followCRDs(t, k.ConfigFor(path), k.ClientFor(t, path))
}

const group = "mappings.test.open-control-plane.io"

var (
	gadget  = schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Gadget"}
	doodad  = schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Doodad"}
	missing = schema.GroupKind{Group: "never.test.open-control-plane.io", Kind: "Nothing"}
)

// followCRDs runs the scenario on the cluster of cfg, with admin installing and
// removing the CRDs. The client under test is built as the runtime builds every
// cluster access it hands a provider.
func followCRDs(t *testing.T, cfg *rest.Config, admin client.Client) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var discovery atomic.Int32
	a, err := access.FromConfig(rest.CopyConfig(cfg), nil, nil, func(c *rest.Config) {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countDiscovery{rt, &discovery} })
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx = cluster.WithTenant(ctx, &cluster.Tenant{MCP: a})
	serves := func(gk schema.GroupKind) bool {
		ok, err := cluster.EndUserServes(ctx, gk)
		if err != nil {
			t.Fatalf("EndUserServes(%s): %v", gk, err)
		}
		return ok
	}
	list := func(gvk schema.GroupVersionKind) (int, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := a.Client.List(ctx, l, client.InNamespace("default"))
		return len(l.Items), err
	}

	// Asked before the CRD exists, as a provider asks before its first install.
	if serves(gadget.GroupKind()) {
		t.Fatal("EndUserServes says Gadget is served before its CRD exists")
	}
	if _, err := list(gadget); !meta.IsNoMatchError(err) {
		t.Fatalf("listing Gadgets before their CRD exists: %v, want no match for kind", err)
	}

	create(ctx, t, admin, crd(gadget))
	harness.Eventually(ctx, t, 30*time.Second, "Gadget served after its CRD was created", func(context.Context) error {
		if !serves(gadget.GroupKind()) {
			return fmt.Errorf("EndUserServes(Gadget) is false")
		}
		return nil
	})
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(gadget)
	g.SetNamespace("default")
	g.SetName("one")
	harness.Eventually(ctx, t, 30*time.Second, "creating a Gadget", func(ctx context.Context) error { return a.Client.Create(ctx, g) })
	if n, err := list(gadget); err != nil || n != 1 {
		t.Fatalf("listing Gadgets: %d, %v; want 1", n, err)
	}

	// The steady state: kinds served, an object not found and a kind never served,
	// asked again and again as reconciles do, send no discovery request; the kind
	// never served is asked for again once per Recheck (two requests: /api and /apis).
	serves(missing)
	discovery.Store(0)
	start := time.Now()
	for range 20 {
		if !serves(gadget.GroupKind()) || serves(missing) {
			t.Fatal("EndUserServes changed its answer in the steady state")
		}
		if _, err := list(gadget); err != nil {
			t.Fatal(err)
		}
		absent := &unstructured.Unstructured{}
		absent.SetGroupVersionKind(gadget)
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "absent"}, absent); !apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			t.Fatalf("reading an absent Gadget: %v, want the object's NotFound", err)
		}
	}
	if n, allowed := discovery.Load(), 2*int32(time.Since(start)/restmapping.DefaultRecheck); n > allowed {
		t.Errorf("the steady state sent %d discovery requests in %s, want at most %d", n, time.Since(start), allowed)
	}

	// The CRD removed while the provider lists the kind: each list answers what is
	// there, the server's 404 for a while, then "no matches for kind" for good.
	if err := admin.Delete(ctx, crd(gadget)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 30*time.Second, "Gadget CRD gone", func(ctx context.Context) error {
		if err := admin.Get(ctx, client.ObjectKey{Name: crd(gadget).Name}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	harness.Eventually(ctx, t, 30*time.Second, "listing Gadgets answers no match for kind", func(context.Context) error {
		_, err := list(gadget)
		if meta.IsNoMatchError(err) {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("listing Gadgets after their CRD was removed: %v", err)
		}
		return fmt.Errorf("list answered %v", err)
	})
	if serves(gadget.GroupKind()) {
		t.Error("EndUserServes says Gadget is served after its CRD was removed")
	}
	if _, err := list(gadget); !meta.IsNoMatchError(err) {
		t.Errorf("listing Gadgets again: %v, want no match for kind", err)
	}

	// Another CRD of the same group, added later.
	create(ctx, t, admin, crd(doodad))
	harness.Eventually(ctx, t, 30*time.Second, "Doodad served after its CRD was created", func(context.Context) error {
		if !serves(doodad.GroupKind()) {
			return fmt.Errorf("EndUserServes(Doodad) is false")
		}
		if _, err := list(doodad); err != nil {
			return fmt.Errorf("listing Doodads: %w", err)
		}
		return nil
	})
	if serves(gadget.GroupKind()) {
		t.Error("EndUserServes says Gadget is served again")
	}
}

func create(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// crd is a namespaced CRD of gvk that keeps whatever it is given.
func crd(gvk schema.GroupVersionKind) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(gvk.Kind) + "s"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.ToLower(gvk.Kind), Kind: gvk.Kind, ListKind: gvk.Kind + "List",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// countDiscovery counts the discovery requests that pass: /api, /apis and their
// group and version documents, in a kcp workspace below /clusters/<name>.
type countDiscovery struct {
	rt http.RoundTripper
	n  *atomic.Int32
}

func (c countDiscovery) RoundTrip(r *http.Request) (*http.Response, error) {
	p := strings.Trim(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "clusters/"); ok {
		_, p, _ = strings.Cut(rest, "/")
	}
	parts := strings.Split(p, "/")
	if (parts[0] == "api" && len(parts) <= 2) || (parts[0] == "apis" && len(parts) <= 3) {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}
