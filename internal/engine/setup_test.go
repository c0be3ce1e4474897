package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// listingCluster answers the cache's List from a fake client.
type listingCluster struct {
	ctrlcluster.Cluster
	objects ctrlclient.Client
}

type listingCache struct {
	cache.Cache
	objects ctrlclient.Client
}

func (c *listingCluster) GetCache() cache.Cache { return &listingCache{objects: c.objects} }
func (c *listingCache) List(ctx context.Context, list ctrlclient.ObjectList, opts ...ctrlclient.ListOption) error {
	return c.objects.List(ctx, list, opts...)
}

// TestServiceObjectsQueue checks what one event of a Service object queues: the
// object itself when its spec, labels or annotations change or it comes or goes, and
// with the singleton rule every object of its workspace when one arrives or leaves.
func TestServiceObjectsQueue(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := widget.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	w := func(name string, gen int64, mutate ...func(*widget.Widget)) *widget.Widget {
		o := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Generation: gen}}
		for _, m := range mutate {
			m(o)
		}
		return o
	}
	deleting := func(o *widget.Widget) { o.DeletionTimestamp = &metav1.Time{Time: time.Now()} }
	labelled := func(o *widget.Widget) { o.Labels = map[string]string{"team": "a"} }
	statusOnly := func(o *widget.Widget) { o.Status.Phase = "Ready" }

	send := func(singleton bool, deliver func(context.Context, workqueue.TypedRateLimitingInterface[mcreconcile.Request], *clusterSet)) []string {
		set := newClusterSet(func() ctrlclient.ObjectList { return &widget.WidgetList{} }, nil)
		set.clusters["ws"] = &engagedCluster{cl: &listingCluster{objects: fake.NewClientBuilder().WithScheme(scheme).WithObjects(w("a", 1), w("b", 1)).Build()}, ctx: t.Context()}
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
		defer q.ShutDown()
		deliver(t.Context(), q, set)
		var got []string
		for q.Len() > 0 {
			r, _ := q.Get()
			if r.ClusterName != "ws" {
				t.Errorf("queued %v for cluster %q, want ws", r, r.ClusterName)
			}
			got = append(got, r.Name)
			q.Done(r)
		}
		slices.Sort(got)
		return got
	}
	update := func(old, cur *widget.Widget) func(context.Context, workqueue.TypedRateLimitingInterface[mcreconcile.Request], *clusterSet) {
		return func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request], set *clusterSet) {
			serviceObjects(set, true)("ws", nil).Update(ctx, event.TypedUpdateEvent[ctrlclient.Object]{ObjectOld: old, ObjectNew: cur}, q)
		}
	}
	create := func(singleton bool) func(context.Context, workqueue.TypedRateLimitingInterface[mcreconcile.Request], *clusterSet) {
		return func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request], set *clusterSet) {
			serviceObjects(set, singleton)("ws", nil).Create(ctx, event.TypedCreateEvent[ctrlclient.Object]{Object: w("c", 1)}, q)
		}
	}
	for _, tc := range []struct {
		name      string
		singleton bool
		deliver   func(context.Context, workqueue.TypedRateLimitingInterface[mcreconcile.Request], *clusterSet)
		want      []string
	}{
		{"arrival, singleton: the newcomer and every object of the workspace", true, create(true), []string{"a", "b", "c"}},
		{"arrival without the singleton rule (standard mode): the newcomer only", false, create(false), []string{"c"}},
		{"status write: nothing", true, update(w("a", 1), w("a", 1, statusOnly)), nil},
		{"spec change: the object", true, update(w("a", 1), w("a", 2)), []string{"a"}},
		{"label change: the object", true, update(w("a", 1), w("a", 1, labelled)), []string{"a"}},
		{"deletion starts: the object and every object of the workspace", true, update(w("a", 1), w("a", 1, deleting)), []string{"a", "b"}},
		{"departure: the object and every object of the workspace", true, func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request], set *clusterSet) {
			serviceObjects(set, true)("ws", nil).Delete(ctx, event.TypedDeleteEvent[ctrlclient.Object]{Object: w("gone", 1)}, q)
		}, []string{"a", "b", "gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := send(tc.singleton, tc.deliver); !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}
