package widget

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Provider installs a widget: on the workload cluster, in the tenant's namespace, a
// ConfigMap with the widget's settings and a Secret with the end-user kubeconfig its
// worker would use.
type Provider struct{}

var _ provider.Reconciler[*Widget] = Provider{}

// CreateOrUpdate installs or updates the widget.
func (Provider) CreateOrUpdate(ctx context.Context, w *Widget) (provider.Result, error) {
	switch {
	case w.Spec.Panic != "":
		panic(w.Spec.Panic)
	case w.Spec.Fail != "" && w.Spec.Terminal:
		return provider.Result{}, provider.Terminal(errors.New(w.Spec.Fail))
	case w.Spec.Fail != "":
		return provider.Result{}, errors.New(w.Spec.Fail)
	}
	wl, ns := cluster.WorkloadFromCtx(ctx), cluster.IdentityFromCtx(ctx).TenantNamespace()
	config := cluster.ProviderConfigFromCtx[*WidgetConfig](ctx)
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "widget", Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "widget-kubeconfig", Namespace: ns}},
	}
	// A worker configured by parts (host, port, path) rather than by kubeconfig.
	endUser, err := cluster.TenantFromCtx(ctx).MCP.Endpoint()
	if err != nil {
		return provider.Result{}, err
	}
	// What the end-user cluster can run differs by mode (a kcp workspace serves no
	// Deployments): the worker's settings say which it found.
	deployments, err := cluster.EndUserServes(ctx, schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil {
		return provider.Result{}, err
	}
	// A copy of the pull secret the platform team names, read on the platform cluster.
	var pullData map[string][]byte
	if config.Spec.PullSecret != "" {
		pull := &corev1.Secret{}
		key := client.ObjectKey{Namespace: cluster.ProviderNamespaceFromCtx(ctx), Name: config.Spec.PullSecret}
		if err := cluster.PlatformFromCtx(ctx).Get(ctx, key, pull); err != nil {
			return provider.Result{}, fmt.Errorf("reading the pull secret %s on the platform cluster: %w", key, err)
		}
		pullData = pull.Data
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "widget-pull-secret", Namespace: ns}})
	}
	w.Status.Resources, w.Status.Parts = nil, nil
	for _, o := range objs {
		if _, err := controllerutil.CreateOrUpdate(ctx, wl, o, func() error {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				o.Data = map[string]string{"color": w.Spec.Color, "greeting": config.Spec.Greeting,
					"server-host": endUser.Host, "server-port": endUser.Port, "server-path": endUser.Path,
					"end-user-serves-deployments": strconv.FormatBool(deployments)}
			case *corev1.Secret:
				if o.Name == "widget-pull-secret" {
					o.Data = pullData
					return nil
				}
				o.Data = map[string][]byte{"kubeconfig": cluster.WorkerKubeconfigFromCtx(ctx)}
			}
			return nil
		}); err != nil {
			return provider.Result{}, err
		}
		gvk, _ := wl.GroupVersionKindFor(o)
		w.Status.Resources = append(w.Status.Resources, v1alpha1.ManagedResource{
			Cluster: "workload", APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		if o.GetName() != ns {
			w.Status.Parts = append(w.Status.Parts, WidgetPart{Name: o.GetName(), Phase: partPhase(o)})
		}
	}
	if config.Spec.PullSecret == "" {
		w.Status.Parts = append(w.Status.Parts, WidgetPart{Name: "widget-pull-secret", Phase: "Skipped", Message: "the WidgetConfig names no pull secret"})
	}
	// The widget's own label on its own object, for selecting widgets by color: the
	// runtime writes it, leaving the tenant's labels as they are.
	labels := w.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ColorLabel] = w.Spec.Color
	if w.Spec.Color == "" || len(validation.IsValidLabelValue(w.Spec.Color)) > 0 {
		delete(labels, ColorLabel)
	}
	w.SetLabels(labels)
	return provider.Done(), nil
}

// ColorLabel is the label the provider keeps on each Widget: its color.
const ColorLabel = "widgets.services.open-control-plane.io/color"

// partPhase is a part's phase in the widget's own words.
func partPhase(o client.Object) string {
	if o.GetName() == "widget-pull-secret" {
		return "Copied"
	}
	return "Installed"
}

// Delete removes the widget's objects. The tenant namespace stays: the workload
// clusters of the tests run no namespace controller, so a deleted namespace would stay
// Terminating and block the tenant's next widget.
func (Provider) Delete(ctx context.Context, w *Widget) (provider.Result, error) {
	if cluster.DeletionFromCtx(ctx).Workload != cluster.Reachable {
		return provider.Done(), nil // no workload access held: nothing to remove with it
	}
	wl, ns := cluster.WorkloadFromCtx(ctx), cluster.IdentityFromCtx(ctx).TenantNamespace()
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "widget", Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "widget-kubeconfig", Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "widget-pull-secret", Namespace: ns}},
	} {
		if err := wl.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return provider.Result{}, err
		}
	}
	return provider.Done(), nil
}
