// Command backups-ocr is the Backup provider as openMCP providers are built today, on
// opencontrolplane-runtime v1.2.0 and the openmcp-operator library, with
// service-provider-velero's conventions: its main chooses the names (controller name
// "Backups" for the requests, onboarding requests under the API group), onboarding
// access with every right, the manager on the onboarding cluster, and the same two
// commands and flags the operator passes. The migration suite swaps it for
// cmd/backups and back.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/openmcp-project/controller-utils/pkg/clusters"
	ocr "github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider"
	ocrclusteraccess "github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider/clusteraccess"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/test/e2e-migration/backups"
)

// The names this binary chose, as velero's main chooses its own.
const (
	// controllerName prefixes the tenants' requests and is their managed-by label.
	controllerName = "Backups"
	// onboardingManager prefixes the onboarding requests: velero uses its API group.
	onboardingManager = "backups.backups.e2e.openmcp.cloud"
)

var all = []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "init" && os.Args[1] != "run") {
		fmt.Fprintln(os.Stderr, "usage: backups-ocr init|run [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	providerName := fs.String("provider-name", "backups", "")
	fs.String("environment", "", "")
	fs.String("verbosity", "INFO", "")
	metricsAddr := fs.String("metrics-bind-address", "0", "")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "")
	leaderElect := fs.Bool("leader-elect", false, "")
	fs.Bool("metrics-secure", true, "")
	fs.Bool("enable-http2", false, "")
	fs.String("webhook-cert-path", "", "")
	_ = fs.Parse(os.Args[2:])
	ctrl.SetLogger(zap.New())
	ctx := ctrl.SetupSignalHandler()
	var err error
	if os.Args[1] == "init" {
		err = runInit(ctx, *providerName)
	} else {
		err = run(ctx, *providerName, *metricsAddr, *probeAddr, *leaderElect)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func platformScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme,
		providerv1alpha1.AddToScheme, apiextensionsv1.AddToScheme, backups.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// onboarding orders the onboarding cluster with every right, as providers do.
func onboarding(ctx context.Context, platform client.Client, localName string, scheme *runtime.Scheme) (*clusters.Cluster, error) {
	mgr := clusteraccess.NewClusterAccessManager(platform, onboardingManager, os.Getenv(openmcpconst.EnvVariablePodNamespace)).
		WithInterval(time.Second).WithTimeout(10 * time.Minute)
	return mgr.CreateAndWaitForCluster(ctx, localName, clustersv1alpha1.PURPOSE_ONBOARDING, scheme, all)
}

func runInit(ctx context.Context, providerName string) error {
	scheme := platformScheme()
	platform, err := client.New(ctrl.GetConfigOrDie(), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ob, err := onboarding(ctx, platform, "onboarding-init", scheme)
	if err != nil {
		return err
	}
	entries, err := backups.CRDs.ReadDir("crd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		raw, err := backups.CRDs.ReadFile("crd/" + e.Name())
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return err
		}
		target := platform
		if crd.Labels["openmcp.cloud/cluster"] == "onboarding" {
			target = ob.Client()
		}
		want := crd.DeepCopy()
		if _, err := controllerutil.CreateOrUpdate(ctx, target, crd, func() error {
			crd.Labels, crd.Spec = want.Labels, want.Spec
			return nil
		}); err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	return libutils.RegisterGVKsAtServiceProvider(ctx, platform, providerName,
		metav1.GroupVersionKind{Group: backups.GroupVersion.Group, Version: backups.GroupVersion.Version, Kind: "Backup"})
}

func run(ctx context.Context, providerName, metricsAddr, probeAddr string, leaderElect bool) error {
	scheme := platformScheme()
	platformCfg := ctrl.GetConfigOrDie()
	platformCluster := clusters.New("platform").WithRESTConfig(platformCfg)
	if err := platformCluster.InitializeClient(scheme); err != nil {
		return err
	}
	ob, err := onboarding(ctx, platformCluster.Client(), "onboarding-run", scheme)
	if err != nil {
		return err
	}
	car := clusteraccess.NewClusterAccessReconciler(platformCluster.Client(), controllerName).
		WithRetryInterval(2 * time.Second).
		WithMCPPermissions([]clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}}).
		WithMCPScheme(scheme).
		WithWorkloadPermissions([]clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}}}}}).
		WithWorkloadScheme(scheme)
	rec := ocr.NewAPIReconcilerBuilder[*backups.Backup, *backups.BackupConfig]().
		EmptyObjectProvider(func() *backups.Backup { return &backups.Backup{} }).
		EmptyConfigProvider(func() *backups.BackupConfig { return &backups.BackupConfig{} }).
		OnboardingCluster(ob).
		PlatformCluster(platformCluster).
		ClusterAccessReconciler(car).
		Reconciler(installer{}).
		WorkloadCluster(true).
		MustBuild()
	mgr, err := ctrl.NewManager(ob.RESTConfig(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "services.open-control-plane.io.backups",
		// The real mains leave the namespace to the in-cluster namespace file, which
		// names the pod's namespace; the kubelet stand-in mounts no such file, so it is
		// named here, with the same value.
		LeaderElectionNamespace: os.Getenv(openmcpconst.EnvVariablePodNamespace),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(platformCluster.Cluster()); err != nil {
		return err
	}
	if err := rec.SetupWithManager(mgr, providerName); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// installer is the provider's business logic on opencontrolplane-runtime.
type installer struct{}

func (installer) CreateOrUpdate(ctx context.Context, b *backups.Backup, pc *backups.BackupConfig, cc ocrclusteraccess.ClusterContext) (ctrl.Result, error) {
	if cc.WorkloadCluster == nil {
		return ctrl.Result{}, errors.New("no workload cluster")
	}
	ns, err := libutils.StableMCPNamespace(b.Name, b.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := backups.Install(ctx, cc.WorkloadCluster.Client(), ns, b, pc.Spec.Bucket); err != nil {
		return ctrl.Result{}, err
	}
	ocr.StatusReady(b)
	return ctrl.Result{}, nil
}

func (installer) Delete(ctx context.Context, b *backups.Backup, _ *backups.BackupConfig, cc ocrclusteraccess.ClusterContext) (ctrl.Result, error) {
	if cc.WorkloadCluster == nil {
		return ctrl.Result{}, nil
	}
	ns, err := libutils.StableMCPNamespace(b.Name, b.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, backups.Uninstall(ctx, cc.WorkloadCluster.Client(), ns)
}
