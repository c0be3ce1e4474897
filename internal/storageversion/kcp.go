package storageversion

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	mcprovider "github.com/kcp-dev/multicluster-provider/pkg/provider"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RecordAnnotationPrefix starts the annotation on an APIExport that records, per
// resource ("<prefix><resource>.<group>"), the version in which every object of that
// resource is stored in every bound workspace. kcp keeps its own record in each
// APIBinding's status.boundResources[].storageVersions, which only kcp may write and
// which never shrinks; this one is written by MigrateExport once every object was
// rewritten, and package apiexport reads it before it lets a version go.
const RecordAnnotationPrefix = "storage.services.open-control-plane.io/"

// RecordKey is the annotation recording the storage version of gr's objects.
func RecordKey(gr schema.GroupResource) string { return RecordAnnotationPrefix + gr.String() }

// MigrateExport moves the objects of every resource of the APIExport named export to
// the storage version of the schema it serves, in every bound workspace, through the
// export's virtual workspaces (vw is a credential for them), and records each
// resource's version on the export. provider reads the provider workspace. A resource
// whose record names its storage version already is skipped, and one whose schema has
// a single version is recorded without a rewrite. Before it lists, it waits
// until every binding serves the current schema, so that no workspace still writes in
// the old version. Objects are rewritten as in Migrate: an empty merge patch each.
func MigrateExport(ctx context.Context, provider client.Client, vw *rest.Config, export string, opts Options) ([]Result, error) {
	opts.PageSize, opts.Workers = opts.pageSize(), opts.workers()
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	ex := &apisv1alpha2.APIExport{}
	if err := provider.Get(ctx, client.ObjectKey{Name: export}, ex); err != nil {
		return nil, fmt.Errorf("reading APIExport %s: %w", export, err)
	}
	var out []Result
	for _, r := range ex.Spec.Resources {
		if r.Storage.CRD == nil {
			continue
		}
		s := &apisv1alpha1.APIResourceSchema{}
		if err := provider.Get(ctx, client.ObjectKey{Name: r.Schema}, s); err != nil {
			return out, fmt.Errorf("reading APIResourceSchema %s: %w", r.Schema, err)
		}
		gr := schema.GroupResource{Group: r.Group, Resource: r.Name}
		res := Result{To: schemaStorage(s)}
		if rec := ex.Annotations[RecordKey(gr)]; rec != "" {
			res.From = []string{rec}
		}
		if res.To == "" || slices.Equal(res.From, []string{res.To}) {
			continue
		}
		if len(s.Spec.Versions) == 1 {
			// An object stored in another version would be unreadable through this
			// schema already, and rewriting cannot help it: record, do not list.
			if err := record(ctx, provider, export, gr, r.Schema, res.To); err != nil {
				return out, err
			}
			continue
		}
		urls, err := endpointURLs(ctx, provider, export)
		if err != nil {
			return out, err
		}
		m, err := newVWMigration(vw, urls)
		if err != nil {
			return out, err
		}
		if err := m.waitForBindings(ctx, gr, r.Schema, opts.PollInterval); err != nil {
			return out, fmt.Errorf("%s: %w", gr, err)
		}
		if res.Listed, res.Rewritten, err = m.rewrite(ctx, gr.WithVersion(res.To), opts); err != nil {
			return out, fmt.Errorf("rewriting %s in %s: %w", gr, res.To, err)
		}
		if err := record(ctx, provider, export, gr, r.Schema, res.To); err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func schemaStorage(s *apisv1alpha1.APIResourceSchema) string {
	for _, v := range s.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func endpointURLs(ctx context.Context, provider client.Client, slice string) ([]string, error) {
	es := &apisv1alpha1.APIExportEndpointSlice{}
	if err := provider.Get(ctx, client.ObjectKey{Name: slice}, es); err != nil {
		return nil, fmt.Errorf("reading APIExportEndpointSlice %s: %w", slice, err)
	}
	return mcprovider.DefaultExtractURLsFromEndpointSlice(es)
}

// vwMigration reaches the export's virtual workspaces, one per kcp shard.
type vwMigration struct {
	cfg  *rest.Config
	http *http.Client
	urls []string
}

func newVWMigration(vw *rest.Config, urls []string) (*vwMigration, error) {
	hc, err := rest.HTTPClientFor(vw)
	if err != nil {
		return nil, fmt.Errorf("virtual workspace client: %w", err)
	}
	return &vwMigration{cfg: vw, http: hc, urls: urls}, nil
}

// client is a dynamic client of one virtual workspace for cluster (a logical
// cluster name, or * for all).
func (m *vwMigration) client(url, cluster string) (*dynamic.DynamicClient, error) {
	cfg := rest.CopyConfig(m.cfg)
	cfg.Host = url + "/clusters/" + cluster
	return dynamic.NewForConfigAndClient(cfg, m.http)
}

var apiBindings = schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha1", Resource: "apibindings"}

// waitForBindings polls until every binding the virtual workspaces list serves gr
// through schemaName.
func (m *vwMigration) waitForBindings(ctx context.Context, gr schema.GroupResource, schemaName string, interval time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, interval, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		behind := 0
		for _, url := range m.urls {
			c, err := m.client(url, "*")
			if err != nil {
				return false, err
			}
			list, err := c.Resource(apiBindings).List(ctx, metav1.ListOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, item := range list.Items {
				b := &apisv1alpha1.APIBinding{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, b); err != nil {
					return false, fmt.Errorf("decoding APIBinding: %w", err)
				}
				if !slices.ContainsFunc(b.Status.BoundResources, func(r apisv1alpha1.BoundAPIResource) bool {
					return r.Group == gr.Group && r.Resource == gr.Resource && r.Schema.Name == schemaName
				}) {
					behind++
				}
			}
		}
		last = fmt.Sprintf("%d binding(s) not on APIResourceSchema %s yet", behind, schemaName)
		return behind == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until every binding serves %s (%s): %w", schemaName, last, err)
	}
	return nil
}

// rewrite lists every object of gvr in every workspace and gives each an empty merge
// patch in its own workspace.
func (m *vwMigration) rewrite(ctx context.Context, gvr schema.GroupVersionResource, opts Options) (listed, rewritten int, err error) {
	return rewriteEach(ctx, opts.Workers, func(ctx context.Context, emit emitFunc) error {
		for _, url := range m.urls {
			all, err := m.client(url, "*")
			if err != nil {
				return err
			}
			var perr error
			err = pages(ctx, all.Resource(gvr), opts.PageSize, func(item *unstructured.Unstructured) bool {
				c, err := m.client(url, logicalcluster.From(item).String())
				if err != nil {
					perr = err
					return false
				}
				ns, name := item.GetNamespace(), item.GetName()
				return emit(item.GetResourceVersion(), func(ctx context.Context) (*unstructured.Unstructured, error) {
					return c.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte("{}"), metav1.PatchOptions{})
				})
			})
			if err := errors.Join(err, perr); err != nil {
				return err
			}
		}
		return nil
	})
}

// record writes the storage version of gr on the export, unless the export no longer
// serves gr through schemaName.
func record(ctx context.Context, provider client.Client, export string, gr schema.GroupResource, schemaName, version string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ex := &apisv1alpha2.APIExport{}
		if err := provider.Get(ctx, client.ObjectKey{Name: export}, ex); err != nil {
			return err
		}
		if !slices.ContainsFunc(ex.Spec.Resources, func(r apisv1alpha2.ResourceSchema) bool {
			return r.Group == gr.Group && r.Name == gr.Resource && r.Schema == schemaName
		}) {
			return fmt.Errorf("the export moved off APIResourceSchema %s while objects were rewritten; run the migration again", schemaName)
		}
		if ex.Annotations == nil {
			ex.Annotations = map[string]string{}
		}
		ex.Annotations[RecordKey(gr)] = version
		return provider.Update(ctx, ex)
	})
	if err != nil {
		return fmt.Errorf("recording the storage version of %s on APIExport %s: %w", gr, export, err)
	}
	return nil
}
