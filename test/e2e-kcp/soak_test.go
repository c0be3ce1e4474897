package e2ekcp

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// Soak size: KSP_SOAK_WORKSPACES (default 8) workspaces churning for KSP_SOAK_DURATION
// (default 2m). docs/reliability.md records a larger run.
func soakSize(t *testing.T) (int, time.Duration) {
	n, d := 8, 2*time.Minute
	if v := os.Getenv("KSP_SOAK_WORKSPACES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("KSP_SOAK_WORKSPACES=%q: want a number of at least 2", v)
		}
	}
	if v := os.Getenv("KSP_SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("KSP_SOAK_DURATION=%q: %v", v, err)
		}
	}
	return n, d
}

// TestSoak: many workspaces create and delete objects at once for a bounded time. Each
// cycle creates an object; every second cycle also creates a second one (which must
// wait as NotSingleton, then be promoted), every third deletes the object before it
// could become Ready. When the time is up, odd workspaces keep one Ready object and
// even ones none; then nothing may be left on the platform, in the workspaces or on the
// workload cluster beyond what those objects hold.
func TestSoak(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	logs := captureLogs(t)
	n, duration := soakSize(t)
	e := startKCPEnv(ctx, t, builder.Options{})

	all := make([]tenant, n)
	for i := range all {
		all[i] = e.newTenant(ctx, t, fmt.Sprintf("soak-%d", i))
	}

	var (
		mu       sync.Mutex
		cycles   int
		toReady  []time.Duration
		failures []error
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(duration)
	for i, w := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keep := i%2 == 1
			for cycle := 0; ; cycle++ {
				last := !time.Now().Before(deadline)
				if last && !keep {
					return
				}
				took, err := soakCycle(ctx, w.c, cycle, last)
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Errorf("workspace %d (%s) cycle %d: %w", i, w.lc, cycle, err))
				} else {
					cycles++
					if took > 0 {
						toReady = append(toReady, took)
					}
				}
				mu.Unlock()
				if err != nil || last {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		if f, err := os.CreateTemp("", "ksp-soak-*.log"); err == nil {
			_, _ = f.WriteString(logs.tail(1 << 30))
			_ = f.Close()
			t.Logf("the runtime's whole log: %s", f.Name())
		}
		for _, err := range failures {
			t.Error(err)
		}
		t.FailNow()
	}
	slices.Sort(toReady)
	t.Logf("soak: %d workspaces, %s, %d cycles; time to Ready p50 %s, p99 %s, max %s", n, time.Since(start).Round(time.Second),
		cycles, percentile(toReady, 50), percentile(toReady, 99), percentile(toReady, 100))

	// What remains: odd workspaces hold one Ready object and its accesses, even ones
	// nothing.
	for i, w := range all {
		keep := i%2 == 1
		wantRequests := 0
		if keep {
			wantRequests = 1
		}
		harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("leftovers of workspace %d", i), func(ctx context.Context) error {
			ars, crs, err := listRequests(ctx, e.pf, w.lc)
			if err != nil {
				return err
			}
			if len(ars.Items) != wantRequests || len(crs.Items) != wantRequests {
				return fmt.Errorf("%d AccessRequests and %d ClusterRequests, want %d each", len(ars.Items), len(crs.Items), wantRequests)
			}
			if keep {
				return nil
			}
			if m := countManaged(ctx, t, w.c, e.name); m != 0 {
				return fmt.Errorf("%d ServiceAccounts/ClusterRoles/ClusterRoleBindings of ours in the workspace", m)
			}
			ns := cluster.KCPIdentity(w.lc.String()).TenantNamespace()
			if err := e.wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("worker ConfigMap on the workload cluster: %v", err)
			}
			return nil
		})
		if keep {
			list := &widget.WidgetList{}
			if err := w.c.List(ctx, list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 || !isReady(&list.Items[0]) {
				t.Errorf("workspace %d: want one Ready widget, got %d", i, len(list.Items))
			}
		}
	}
}

// soakCycle runs one cycle in a workspace and returns how long its object took to
// become Ready (zero when it was deleted before). The last cycle leaves the object.
func soakCycle(ctx context.Context, c client.Client, cycle int, last bool) (time.Duration, error) {
	name := fmt.Sprintf("w-%d", cycle)
	key := client.ObjectKey{Namespace: "default", Name: name}
	created := time.Now()
	if err := c.Create(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: widget.WidgetSpec{Color: "blue"}}); err != nil {
		return 0, fmt.Errorf("creating %s: %w", name, err)
	}
	earlyDelete := !last && cycle%3 == 2
	second := !last && !earlyDelete && cycle%2 == 1
	var secondKey client.ObjectKey
	if second {
		secondKey = client.ObjectKey{Namespace: "default", Name: name + "-b"}
		if err := c.Create(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: secondKey.Name}, Spec: widget.WidgetSpec{Color: "red"}}); err != nil {
			return 0, fmt.Errorf("creating %s: %w", secondKey.Name, err)
		}
	}
	var took time.Duration
	if !earlyDelete {
		if err := localenv.Poll(ctx, 2*time.Minute, name+" Ready", func(ctx context.Context) error { return readyErr(ctx, c, key) }); err != nil {
			return 0, err
		}
		took = time.Since(created)
	}
	if last {
		return took, nil
	}
	if second {
		if err := localenv.Poll(ctx, time.Minute, secondKey.Name+" NotSingleton", func(ctx context.Context) error {
			return reasonErr(ctx, c, secondKey, v1alpha1.ReasonNotSingleton)
		}); err != nil {
			return 0, err
		}
	}
	if err := localenv.DeleteAndWait(ctx, c, widgetAt(key), 2*time.Minute); err != nil {
		return 0, err
	}
	if second {
		if err := localenv.Poll(ctx, 2*time.Minute, secondKey.Name+" promoted and Ready", func(ctx context.Context) error { return readyErr(ctx, c, secondKey) }); err != nil {
			return 0, err
		}
		if err := localenv.DeleteAndWait(ctx, c, widgetAt(secondKey), 2*time.Minute); err != nil {
			return 0, err
		}
	}
	return took, nil
}

func readyErr(ctx context.Context, c client.Client, key client.ObjectKey) error {
	w := &widget.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		return err
	}
	if !isReady(w) {
		return fmt.Errorf("status %+v", w.Status)
	}
	return nil
}

func reasonErr(ctx context.Context, c client.Client, key client.ObjectKey, reason string) error {
	w := &widget.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		return err
	}
	if cond := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); cond == nil || cond.Reason != reason {
		return fmt.Errorf("status %+v", w.Status)
	}
	return nil
}

func isReady(w *widget.Widget) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && w.Status.ObservedGeneration == w.Generation
}

// percentile of sorted durations; zero for none.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i].Round(100 * time.Millisecond)
}
