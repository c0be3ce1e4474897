package greeter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Names of what the provider writes: on the platform, in the tenant's namespace, an
// OCIRepository and one HelmRelease per target; on the targets, what the chart holds.
const (
	// SourceName is the OCIRepository every release of a tenant installs from.
	SourceName = "greeter"
	// ReleaseName is standard mode's one release: API and controller on the ControlPlane.
	ReleaseName = "greeter"
	// APIReleaseName and ControllerReleaseName are kcp mode's two: the API in the
	// workspace, the controller on the workload cluster (a workspace runs no pods).
	APIReleaseName        = "greeter-api"
	ControllerReleaseName = "greeter-controller"
	// TargetNamespace holds the chart's namespaced objects on the end-user cluster.
	TargetNamespace = "greeter-system"
	// WorkerSecretName is the controller's kubeconfig for the tenant's workspace, on the
	// workload cluster beside it (kcp mode).
	WorkerSecretName = "greeter-kubeconfig"
)

// Provider installs the greeter chart for each tenant through Flux on the platform
// cluster, as openMCP's Flux-based providers do.
type Provider struct{}

var _ provider.Reconciler[*v1alpha1.Greeter] = Provider{}

// release is one HelmRelease: which kubeconfig Secret Flux installs with, into which
// namespace of that cluster, with which values.
type release struct {
	name      string
	secret    *cluster.SecretRef
	namespace string
	values    map[string]any
}

// releases are the tenant's HelmReleases in the mode it is served in. Standard mode
// installs everything on the ControlPlane. kcp mode splits the chart: its API goes to
// the workspace with the provider's end-user kubeconfig, its controller to the tenant's
// namespace on the workload cluster with the workload kubeconfig, and the controller
// reaches the workspace with the worker's kubeconfig, which CreateOrUpdate copies next
// to it (docs/design/flux-providers.md says why).
func releases(ctx context.Context, g *v1alpha1.Greeter) []release {
	msg := g.Spec.Message
	if msg == "" {
		msg = "hello"
	}
	if cluster.ModeFromCtx(ctx) != cluster.ModeKCP {
		return []release{{name: ReleaseName, secret: cluster.MCPSecretFromCtx(ctx), namespace: TargetNamespace,
			values: map[string]any{"message": msg}}}
	}
	return []release{
		{name: APIReleaseName, secret: cluster.MCPSecretFromCtx(ctx), namespace: TargetNamespace,
			values: map[string]any{"message": msg, "controller": map[string]any{"enabled": false}}},
		{name: ControllerReleaseName, secret: cluster.WorkloadSecretFromCtx(ctx), namespace: cluster.IdentityFromCtx(ctx).TenantNamespace(),
			values: map[string]any{"message": msg, "api": map[string]any{"enabled": false},
				"controller": map[string]any{"kubeconfigSecret": WorkerSecretName}}},
	}
}

// CreateOrUpdate writes the OCIRepository and the HelmReleases, and reports Ready once
// Flux has installed the configured chart version in every release.
func (Provider) CreateOrUpdate(ctx context.Context, g *v1alpha1.Greeter) (provider.Result, error) {
	pc := cluster.ProviderConfigFromCtx[*v1alpha1.GreeterConfig](ctx)
	platform := cluster.PlatformWriterFromCtx(ctx)
	if pc == nil || platform == nil {
		return provider.Result{}, errors.New("no ProviderConfig or platform writer: the greeter provider declares PlatformPermissions")
	}
	if cluster.ModeFromCtx(ctx) == cluster.ModeKCP {
		if err := writeWorkerKubeconfig(ctx); err != nil {
			return provider.Result{}, err
		}
	}
	ns := cluster.IdentityFromCtx(ctx).TenantNamespace()
	if err := writeSource(ctx, platform, ns, pc); err != nil {
		return provider.Result{}, err
	}
	rels := releases(ctx, g)
	g.Status.Resources = []rtv1alpha1.ManagedResource{{Cluster: "platform", APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.OCIRepositoryKind,
		Namespace: ns, Name: SourceName}}
	for _, r := range rels {
		if err := writeRelease(ctx, platform, ns, pc, r); err != nil {
			return provider.Result{}, err
		}
		g.Status.Resources = append(g.Status.Resources, rtv1alpha1.ManagedResource{Cluster: "platform", APIVersion: helmv2.GroupVersion.String(),
			Kind: helmv2.HelmReleaseKind, Namespace: ns, Name: r.name})
	}
	return installed(ctx, platform, ns, pc, rels)
}

// writeWorkerKubeconfig keeps the worker's workspace kubeconfig beside the controller
// on the workload cluster; a renewed token replaces it on the next call.
func writeWorkerKubeconfig(ctx context.Context) error {
	wl, ns := cluster.WorkloadFromCtx(ctx), cluster.IdentityFromCtx(ctx).TenantNamespace()
	if err := wl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s on the workload cluster: %w", ns, err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: WorkerSecretName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, wl, s, func() error {
		s.Data = map[string][]byte{"kubeconfig": cluster.WorkerKubeconfigFromCtx(ctx)}
		return nil
	}); err != nil {
		return fmt.Errorf("writing the worker's kubeconfig on the workload cluster: %w", err)
	}
	return nil
}

func interval(pc *v1alpha1.GreeterConfig) metav1.Duration {
	if pc.Spec.Interval != nil && pc.Spec.Interval.Duration > 0 {
		return *pc.Spec.Interval
	}
	return metav1.Duration{Duration: time.Minute}
}

// writeSource points the tenant's OCIRepository at the configured chart version.
func writeSource(ctx context.Context, platform client.Client, ns string, pc *v1alpha1.GreeterConfig) error {
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SourceName}}
	_, err := controllerutil.CreateOrUpdate(ctx, platform, repo, func() error {
		repo.Spec.URL = pc.Spec.ChartURL
		repo.Spec.Reference = &sourcev1.OCIRepositoryRef{Tag: pc.Spec.ChartVersion}
		repo.Spec.Insecure = pc.Spec.Insecure
		repo.Spec.Interval = interval(pc)
		// A Helm chart pushed to a registry is one layer of this type; Flux hands the
		// chart archive on as it is.
		repo.Spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip", Operation: sourcev1.OCILayerCopy}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing OCIRepository %s: %w", SourceName, err)
	}
	return nil
}

// writeRelease writes one HelmRelease installing from the tenant's OCIRepository with
// the kubeconfig Secret the runtime keeps current.
func writeRelease(ctx context.Context, platform client.Client, ns string, pc *v1alpha1.GreeterConfig, r release) error {
	if r.secret == nil {
		return fmt.Errorf("no kubeconfig Secret on the platform for release %s", r.name)
	}
	values, err := json.Marshal(r.values)
	if err != nil {
		return err
	}
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name}}
	_, err = controllerutil.CreateOrUpdate(ctx, platform, hr, func() error {
		hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: SourceName}
		hr.Spec.Interval = interval(pc)
		hr.Spec.KubeConfig = &fluxmeta.KubeConfigReference{SecretRef: &fluxmeta.SecretKeyReference{Name: r.secret.Name, Key: r.secret.Key}}
		hr.Spec.ReleaseName = r.name
		hr.Spec.TargetNamespace = r.namespace
		// Helm keeps its release records beside the release, on the target: the
		// platform namespace does not exist there.
		hr.Spec.StorageNamespace = r.namespace
		// Helm waits for what it installed to be ready (its Deployments available), as
		// a real provider's release does.
		hr.Spec.Install = &helmv2.Install{CreateNamespace: true}
		// The uninstall orphans what the chart's objects own (the Deployment's
		// ReplicaSets and pods): Delete removes the namespaces the releases went
		// into, and the namespace controller removes those with them, so the uninstall
		// waits for no cascade it cannot see.
		hr.Spec.Uninstall = &helmv2.Uninstall{DeletionPropagation: ptr.To("orphan")}
		hr.Spec.Values = &apiextensionsv1.JSON{Raw: values}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing HelmRelease %s: %w", r.name, err)
	}
	return nil
}

// resync is how long the provider waits for Flux without being called: the runtime
// calls it as soon as Flux changes the source or a release (WatchesPlatform), so this
// only bounds a change it could not see, such as one to an object written before the
// runtime labelled what the provider writes.
const resync = 10 * time.Minute

// installed reports Ready when every release is Ready at the configured chart version,
// Flux's own reason and message when the source or a release failed, and progress
// otherwise.
func installed(ctx context.Context, platform client.Client, ns string, pc *v1alpha1.GreeterConfig, rels []release) (provider.Result, error) {
	repo := &sourcev1.OCIRepository{}
	if err := platform.Get(ctx, client.ObjectKey{Namespace: ns, Name: SourceName}, repo); err != nil {
		return provider.Result{}, fmt.Errorf("reading OCIRepository %s: %w", SourceName, err)
	}
	// The condition's generation, not the status's: Flux moves status.observedGeneration
	// only when a reconcile succeeds.
	if c := apimeta.FindStatusCondition(repo.Status.Conditions, fluxmeta.ReadyCondition); c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == repo.Generation {
		return provider.Result{}, fmt.Errorf("chart %s:%s: Flux says %s: %s", pc.Spec.ChartURL, pc.Spec.ChartVersion, c.Reason, c.Message)
	}
	for _, r := range rels {
		hr := &helmv2.HelmRelease{}
		if err := platform.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.name}, hr); err != nil {
			return provider.Result{}, fmt.Errorf("reading HelmRelease %s: %w", r.name, err)
		}
		c := apimeta.FindStatusCondition(hr.Status.Conditions, fluxmeta.ReadyCondition)
		switch {
		case c == nil || hr.Status.ObservedGeneration != hr.Generation || c.Status == metav1.ConditionUnknown:
			return provider.Pending(fmt.Sprintf("Flux is installing release %s", r.name), resync), nil
		case c.Status == metav1.ConditionFalse:
			return provider.Result{}, fmt.Errorf("release %s: Flux says %s: %s", r.name, c.Reason, c.Message)
		}
		if latest := hr.Status.History.Latest(); latest == nil || chartVersion(latest.ChartVersion) != pc.Spec.ChartVersion {
			return provider.Pending(fmt.Sprintf("Flux is rolling release %s to chart version %s", r.name, pc.Spec.ChartVersion), resync), nil
		}
	}
	return provider.Result{Message: fmt.Sprintf("chart version %s is installed", pc.Spec.ChartVersion)}, nil
}

// Delete removes the HelmReleases, waits until Flux has uninstalled them (the
// kubeconfig Secrets they name stay valid until Delete is done), then removes the
// source and the worker's kubeconfig.
func (Provider) Delete(ctx context.Context, g *v1alpha1.Greeter) (provider.Result, error) {
	platform := cluster.PlatformWriterFromCtx(ctx)
	if platform == nil {
		return provider.Result{}, errors.New("no platform writer: the greeter provider declares PlatformPermissions")
	}
	d, ns := cluster.DeletionFromCtx(ctx), cluster.IdentityFromCtx(ctx).TenantNamespace()
	var pending []string
	for _, name := range []string{ReleaseName, APIReleaseName, ControllerReleaseName} {
		hr := &helmv2.HelmRelease{}
		err := platform.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hr)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return provider.Result{}, fmt.Errorf("reading HelmRelease %s: %w", name, err)
		}
		pending = append(pending, uninstalling(hr))
		if d.EndUser == cluster.Gone && name != ControllerReleaseName && !hr.Spec.Suspend {
			// The tenant's end-user cluster may be gone with it (a deleted workspace):
			// Helm could not uninstall there, and Flux skips the uninstall of a
			// suspended release.
			base := hr.DeepCopy()
			hr.Spec.Suspend = true
			if err := platform.Patch(ctx, hr, client.MergeFrom(base)); err != nil {
				return provider.Result{}, fmt.Errorf("suspending HelmRelease %s: %w", name, err)
			}
		}
		if hr.DeletionTimestamp.IsZero() {
			if err := platform.Delete(ctx, hr); err != nil && !apierrors.IsNotFound(err) {
				return provider.Result{}, fmt.Errorf("deleting HelmRelease %s: %w", name, err)
			}
		}
	}
	if len(pending) > 0 {
		// Flux's own word on each release goes to the tenant: an uninstall can wait
		// minutes on the target's API server (a CRD whose instances it cannot list
		// yet), and "waiting" alone does not say on what.
		return provider.Pending("waiting for Flux to uninstall the chart: "+strings.Join(pending, "; "), resync), nil
	}
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SourceName}}
	if err := platform.Delete(ctx, repo); err != nil && !apierrors.IsNotFound(err) {
		return provider.Result{}, fmt.Errorf("deleting OCIRepository %s: %w", SourceName, err)
	}
	// The namespaces the releases went into, with what the uninstall orphaned and, on
	// the workload cluster, the worker's kubeconfig.
	targets := []struct {
		reach   cluster.Reach
		c       func(context.Context) client.Client
		ns, its string
	}{
		{d.EndUser, cluster.MCPFromCtx, TargetNamespace, "end-user"},
		{d.Workload, cluster.WorkloadFromCtx, ns, "workload"},
	}
	for _, t := range targets {
		if t.reach != cluster.Reachable {
			continue
		}
		gone, err := deleteNamespace(ctx, t.c(ctx), t.ns)
		if err != nil {
			return provider.Result{}, fmt.Errorf("deleting namespace %s on the %s cluster: %w", t.ns, t.its, err)
		}
		if !gone {
			return provider.Pending(fmt.Sprintf("waiting for namespace %s on the %s cluster to be deleted", t.ns, t.its), 2*time.Second), nil
		}
	}
	return provider.Done(), nil
}

// deleteNamespace deletes a namespace and says whether it is gone: the namespace
// controller deletes what it holds first.
func deleteNamespace(ctx context.Context, c client.Client, name string) (bool, error) {
	n := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	if n.DeletionTimestamp.IsZero() {
		if err := c.Delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	return false, nil
}

// uninstalling describes a release being uninstalled: its name, and Flux's Ready
// condition when Flux has said something.
func uninstalling(hr *helmv2.HelmRelease) string {
	c := apimeta.FindStatusCondition(hr.Status.Conditions, fluxmeta.ReadyCondition)
	if c == nil {
		return "HelmRelease " + hr.Name
	}
	return fmt.Sprintf("HelmRelease %s (%s: %s)", hr.Name, c.Reason, c.Message)
}

// chartVersion is the version a release was installed at: Flux appends the OCI
// artifact's digest to a chart from an OCIRepository (0.1.0+0123456789ab).
func chartVersion(v string) string {
	version, _, _ := strings.Cut(v, "+")
	return version
}
