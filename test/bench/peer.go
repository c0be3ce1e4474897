package main

import (
	"context"
	"fmt"

	"github.com/openmcp-project/controller-utils/pkg/clusters"
	ocpruntime "github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider"
	"github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider/clusteraccess"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// peerWidget is the Widget as opencontrolplane-runtime wants its API type: the same
// object on the wire, with the status accessors and finalizer it asks for.
type peerWidget struct {
	widget.Widget
}

func (w *peerWidget) GetStatus() any                     { return w.Status }
func (w *peerWidget) GetConditions() *[]metav1.Condition { return &w.Status.Conditions }
func (w *peerWidget) SetPhase(p string)                  { w.Status.Phase = v1alpha1.Phase(p) }
func (w *peerWidget) SetObservedGeneration(g int64)      { w.Status.ObservedGeneration = g }
func (w *peerWidget) Finalizer() string                  { return widget.GroupVersion.Group + "/finalizer" }
func (w *peerWidget) DeepCopyObject() runtime.Object {
	out := &peerWidget{}
	w.DeepCopyInto(&out.Widget)
	return out
}

type peerWidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []peerWidget `json:"items"`
}

func (l *peerWidgetList) DeepCopyObject() runtime.Object {
	out := &peerWidgetList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*peerWidget))
	}
	return out
}

func peerOnboardingScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	s.AddKnownTypeWithName(widget.GroupVersion.WithKind("Widget"), &peerWidget{})
	s.AddKnownTypeWithName(widget.GroupVersion.WithKind("WidgetList"), &peerWidgetList{})
	metav1.AddToGroupVersion(s, widget.GroupVersion)
	return s
}

// peerNoop is the no-op provider for opencontrolplane-runtime: it reports Ready.
type peerNoop struct{}

func (peerNoop) CreateOrUpdate(_ context.Context, obj *peerWidget, _ *widget.WidgetConfig, _ clusteraccess.ClusterContext) (ctrl.Result, error) {
	ocpruntime.StatusReady(obj)
	return ctrl.Result{}, nil
}

func (peerNoop) Delete(context.Context, *peerWidget, *widget.WidgetConfig, clusteraccess.ClusterContext) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// startPeer wires opencontrolplane-runtime v1.2.0 the way a provider's main does:
// an onboarding manager, the platform cluster added to it, the advanced cluster
// access reconciler ordering MCP access (the ControlPlane's existing request) and a
// workload cluster, both with token access, and the APIReconciler. Its settings
// match this runtime's (see benchOptions) so that the figures compare designs.
func startPeer(ctx context.Context, platformCfg, onboardingCfg *rest.Config, opts benchOptions, wrap func(cfg *rest.Config)) (func(), error) {
	pcfg, ocfg := rest.CopyConfig(platformCfg), rest.CopyConfig(onboardingCfg)
	for _, c := range []*rest.Config{pcfg, ocfg} {
		c.QPS, c.Burst = opts.qps, opts.burst
		wrap(c)
	}
	platformScheme := benchScheme()
	onboardingScheme := peerOnboardingScheme()
	platformCluster := clusters.New("platform").WithRESTConfig(pcfg)
	if err := platformCluster.InitializeClient(platformScheme); err != nil {
		return nil, fmt.Errorf("peer platform cluster: %w", err)
	}
	onboardingCluster := clusters.New("onboarding").WithRESTConfig(ocfg)
	if err := onboardingCluster.InitializeClient(onboardingScheme); err != nil {
		return nil, fmt.Errorf("peer onboarding cluster: %w", err)
	}
	mcpReg := advanced.ExistingClusterRequest(clusteraccess.MCPClusterID, "mcp", func(req reconcile.Request, _ ...any) (*commonapi.ObjectReference, error) {
		ns, err := libutils.StableMCPNamespace(req.Name, req.Namespace)
		if err != nil {
			return nil, err
		}
		return &commonapi.ObjectReference{Name: req.Name, Namespace: ns}, nil
	}).
		WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{Permissions: stdMCPPerms.Rules}).
		WithScheme(platformScheme).
		Build()
	wlReg := advanced.NewClusterRequest(clusteraccess.WorkloadClusterID, "wl",
		advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PURPOSE_WORKLOAD})).
		WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{Permissions: workloadPerms.Rules}).
		WithScheme(platformScheme).
		Build()
	car := advanced.NewClusterAccessReconciler(platformCluster.Client(), providerName).
		WithRetryInterval(opts.retry).
		Register(mcpReg).
		Register(wlReg)
	rec := ocpruntime.NewAPIReconcilerBuilder[*peerWidget, *widget.WidgetConfig]().
		EmptyObjectProvider(func() *peerWidget { return &peerWidget{} }).
		EmptyConfigProvider(func() *widget.WidgetConfig { return &widget.WidgetConfig{} }).
		OnboardingCluster(onboardingCluster).
		PlatformCluster(platformCluster).
		AdvancedClusterAccessReconciler(car).
		Reconciler(peerNoop{}).
		WorkloadCluster(true).
		MustBuild()
	mgr, err := ctrl.NewManager(ocfg, ctrl.Options{
		Scheme:     onboardingScheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{MaxConcurrentReconciles: opts.concurrency, SkipNameValidation: ptrBool(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := rec.SetupWithManager(mgr, providerName); err != nil {
		return nil, err
	}
	if err := mgr.Add(platformCluster.Cluster()); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			logf("peer manager stopped: %v", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		<-done
		return nil, fmt.Errorf("peer cache did not sync")
	}
	return func() { cancel(); <-done }, nil
}

func ptrBool(b bool) *bool { return &b }
