package e2ekcp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestShardJoinsAndLeaves serves a kcp of two shards while the second shard's
// virtual workspace joins the endpoint slice (its first binding), leaves it (its last
// binding gone) and joins again: the tenants there are served each time, including
// the repair of their credentials, and the root shard's tenant throughout.
func TestShardJoinsAndLeaves(t *testing.T) {
	ctx := t.Context()
	logs := captureLogs(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runtime log:\n%s", logs.tail(150))
		}
	})
	e := startKCPEnvOn(ctx, t, 2, builder.Options{})
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	bind := func(name, shard string) tenant {
		path, lc := e.k.CreateWorkspaceOn(ctx, t, logicalcluster.NewPath("root"), name, shard)
		e.k.CreateAPIBinding(ctx, t, path, spName, logicalcluster.NewPath(providerWS), spName, apiexport.AcceptedClaims(spName))
		tn := tenant{path: path, lc: lc, c: harness.NewClient(t, e.k.ConfigFor(path), e.scheme)}
		newWidget(ctx, t, tn.c, main.Name, "blue")
		waitReady(ctx, t, tn.c, main)
		wantConfigMap(ctx, t, e.wl, lc, "hello", "blue")
		return tn
	}
	wantEndpoints := func(n int) {
		t.Helper()
		harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("%d virtual workspace URLs in the endpoint slice", n), func(ctx context.Context) error {
			urls, err := e.k.KCP.VirtualWorkspaceURLs(ctx, logicalcluster.NewPath(providerWS), spName)
			if err != nil {
				return err
			}
			if len(urls) != n {
				return fmt.Errorf("%v", urls)
			}
			return nil
		})
	}
	// repaired deletes the tenant's workload ServiceAccount and waits for the
	// runtime to put it back: the access watch of the tenant's shard works.
	repaired := func(tn tenant) {
		t.Helper()
		key := types.NamespacedName{Namespace: "default", Name: spName + "-workload"}
		sa := &corev1.ServiceAccount{}
		if err := tn.c.Get(ctx, key, sa); err != nil {
			t.Fatal(err)
		}
		old := sa.UID
		if err := tn.c.Delete(ctx, sa); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, 30*time.Second, "ServiceAccount "+key.Name+" recreated in "+tn.path.String(), func(ctx context.Context) error {
			if err := tn.c.Get(ctx, key, sa); err != nil {
				return err
			}
			if sa.UID == old {
				return fmt.Errorf("still the deleted one")
			}
			return nil
		})
	}

	onRoot := bind("on-root", localenv.ShardName(0))
	wantEndpoints(1)

	t.Run("a shard joining the endpoint slice is served", func(t *testing.T) {
		first := bind("on-shard-1", localenv.ShardName(1))
		wantEndpoints(2)
		repaired(first)

		t.Run("and leaving it stops nothing else", func(t *testing.T) {
			harness.DeleteAndWait(ctx, t, first.c, widgetAt(main))
			if err := first.c.Delete(ctx, &apisv1alpha2.APIBinding{ObjectMeta: metav1.ObjectMeta{Name: spName}}); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(ctx, t, time.Minute, "binding gone", func(ctx context.Context) error {
				err := first.c.Get(ctx, client.ObjectKey{Name: spName}, &apisv1alpha2.APIBinding{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("binding: %v", err)
			})
			wantEndpoints(1)
			harness.Eventually(ctx, t, time.Minute, "no platform requests of the deleted tenant", func(ctx context.Context) error {
				if n := platformRequests(ctx, t, e.pf, first.lc); n != 0 {
					return fmt.Errorf("%d left", n)
				}
				return nil
			})
			harness.Patch(ctx, t, onRoot.c, main, func(w *widget.Widget) { w.Spec.Color = "green" })
			wantConfigMap(ctx, t, e.wl, onRoot.lc, "hello", "green")
		})

		t.Run("and joining again is served again", func(t *testing.T) {
			again := bind("again-on-shard-1", localenv.ShardName(1))
			wantEndpoints(2)
			repaired(again)
			repaired(onRoot)
		})
	})
}
