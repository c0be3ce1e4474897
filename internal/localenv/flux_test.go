package localenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestFluxHelmRelease has the real Flux on the platform cluster install a chart,
// pushed with the real helm CLI to the local OCI registry, into the workload cluster
// named by a kubeconfig Secret: an OCIRepository and a HelmRelease, as a service
// provider would create them. The registry serves TLS with the local platform's CA,
// which the source-controller trusts as a platform's own: the OCIRepository needs no
// spec.insecure; a second registry serves plain HTTP for one that sets it.
func TestFluxHelmRelease(t *testing.T) {
	if os.Getenv(AssetsEnv) == "" {
		t.Skipf("%s is not set (run hack/test-binaries.sh)", AssetsEnv)
	}
	env := newTestEnv(t, "flux")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	p, err := env.StartPlatform(ctx, PlatformOptions{
		Clusters: []string{PurposeWorkload},
		Flux:     &FluxOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("platform with registry and Flux ready after %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			for _, proc := range []*Process{p.Flux.SourceController, p.Flux.HelmController} {
				t.Logf("%s:\n%s", proc.Log, LogTail(proc.Log, 30))
			}
		}
	})

	const version = "1.2.3"
	start = time.Now()
	chartURL, err := p.Registry.PushChart(ctx, "testdata/hello-chart", "charts", version)
	if err != nil {
		t.Fatal(err)
	}
	if want := "oci://" + p.Registry.Host + "/charts/hello"; chartURL != want {
		t.Fatalf("PushChart = %q, want %q", chartURL, want)
	}
	t.Logf("chart pushed to %s after %s", chartURL, time.Since(start).Round(time.Millisecond))

	c, err := client.New(p.Platform.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "apps"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload-kubeconfig"},
			Data:       map[string][]byte{"kubeconfig": p.Workload.Kubeconfig()},
		},
		fluxObject("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "hello", map[string]any{
			"url":      chartURL,
			"ref":      map[string]any{"tag": version},
			"interval": "1m",
			"layerSelector": map[string]any{
				"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
				"operation": "copy",
			},
		}),
		fluxObject("helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, "hello", map[string]any{
			"chartRef":    map[string]any{"kind": "OCIRepository", "name": "hello"},
			"interval":    "1m",
			"releaseName": "hello",
			// The Secret's kubeconfig reaches the workload server at 127.0.0.1,
			// where Flux, a process on this machine, connects.
			"kubeConfig":       map[string]any{"secretRef": map[string]any{"name": "workload-kubeconfig", "key": "kubeconfig"}},
			"targetNamespace":  "default",
			"storageNamespace": "default",
			"install":          map[string]any{"remediation": map[string]any{"retries": 3}},
			"upgrade":          map[string]any{"remediation": map[string]any{"retries": 3}},
			"values":           map[string]any{"greeting": "installed by Flux"},
		}),
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	start = time.Now()

	workload, err := client.New(p.Workload.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := Poll(ctx, 3*time.Minute, "HelmRelease installed on the workload cluster", func(ctx context.Context) error {
		for _, proc := range []*Process{p.Flux.SourceController, p.Flux.HelmController} {
			if proc.Exited() {
				return fmt.Errorf("%s ended: %w", proc.Name, proc.Ended())
			}
		}
		for _, kind := range []string{"OCIRepository", "HelmRelease"} {
			if err := fluxReady(ctx, c, kind, ns, "hello"); err != nil {
				return err
			}
		}
		return workload.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello-hello"}, cm)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("HelmRelease Ready and its ConfigMap on the workload cluster after %s", time.Since(start).Round(time.Millisecond))
	if got := cm.Data["greeting"]; got != "installed by Flux" {
		t.Errorf("ConfigMap greeting %q, want the HelmRelease's value %q", got, "installed by Flux")
	}
	// With a chartRef to an OCIRepository, helm-controller appends the first 12
	// digits of the artifact's digest to the chart version as build metadata.
	if got := cm.Data["chartVersion"]; !strings.HasPrefix(got, version+"+") {
		t.Errorf("ConfigMap chartVersion %q, want %s+<digest>", got, version)
	}
	if cm.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("ConfigMap labels %v, want Helm's", cm.Labels)
	}

	// The OCIRepository above pulled over TLS with no setting of its own; a registry
	// without TLS is still there for a source with spec.insecure.
	plain, err := env.StartRegistry(ctx, RegistryOptions{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	plainURL, err := plain.PushChart(ctx, "testdata/hello-chart", "charts", version)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, fluxObject("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "hello-http", map[string]any{
		"url": plainURL, "ref": map[string]any{"tag": version}, "insecure": true, "interval": "1m",
	})); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, time.Minute, "OCIRepository over plain HTTP Ready", func(ctx context.Context) error {
		return fluxReady(ctx, c, "OCIRepository", ns, "hello-http")
	}); err != nil {
		t.Fatal(err)
	}
}

func fluxObject(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
}

// fluxReady is nil once a Flux object reports Ready=True for its current generation.
func fluxReady(ctx context.Context, c client.Client, kind, ns, name string) error {
	apiVersion := "source.toolkit.fluxcd.io/v1"
	if kind == "HelmRelease" {
		apiVersion = "helm.toolkit.fluxcd.io/v2"
	}
	u := fluxObject(apiVersion, kind, ns, name, nil)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return err
	}
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] != "Ready" {
			continue
		}
		if cond["status"] == "True" && observed == u.GetGeneration() {
			return nil
		}
		return fmt.Errorf("%s %s/%s: Ready=%v (%v): %v", kind, ns, name, cond["status"], cond["reason"], cond["message"])
	}
	return errors.New(kind + " " + ns + "/" + name + ": no Ready condition yet")
}
