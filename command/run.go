package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
)

// runOnboardingName is the local name of run's onboarding access request.
const runOnboardingName = "onboarding-run"

type runOptions struct {
	commonOptions
	leaderElect             bool
	allowDowngrade          bool
	metricsBindAddress      string
	metricsSecure           bool
	metricsCertDir          string
	healthProbeBindAddress  string
	standardMode            bool
	retryInterval           time.Duration
	maxConcurrentReconciles int
	clientQPS               float64
	clientBurst             int
	accessTimeout           time.Duration
	grantTimeout            time.Duration
	mode                    string
	conversionBindAddress   string
}

// RunCommand runs the provider until it is stopped.
func RunCommand(p Provider) *Command {
	o := &runOptions{commonOptions: commonOptions{provider: p}}
	return &Command{
		Name:  "run",
		Short: "run the provider in standard mode and, while spec.kcp is set, kcp mode",
		Long: `Runs the provider until SIGTERM or SIGINT, as the openmcp-operator's Deployment.

Standard mode serves the Service objects on the onboarding cluster (unless
--standard-mode=false). kcp mode serves them in kcp workspaces bound to the provider's
APIExport; it runs while the ProviderConfig (named --provider-name, on the platform
cluster) has spec.kcp, and starts, restarts and stops with it, without a restart of the
process. Each mode has its own manager. With --leader-elect, standard mode elects a
leader and kcp mode shares the bound workspaces among the replicas, each served by one
of them (leases in --namespace).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, io.Writer) error {
			o.addFlags(fs, p.Name)
			fs.BoolVar(&o.leaderElect, "leader-elect", false, "run as one of several replicas: standard mode elects a leader, kcp mode shares the workspaces (leases in --namespace); the openmcp-operator sets it for more than one replica")
			fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", "0", "address of the Prometheus metrics endpoint, e.g. :8080; 0 turns it off")
			fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "serve metrics over HTTPS, only to a bearer token the platform cluster authenticates and allows get on /metrics (TokenReview and SubjectAccessReview; 401 without a token, 403 without the right); the openmcp-operator passes false")
			fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key of the HTTPS metrics endpoint; without them a self-signed certificate is made at start")
			fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns them off")
			fs.BoolVar(&o.allowDowngrade, "allow-api-downgrade", false, "let kcp mode move the APIExport back to this binary's schemas when it carries a newer API release (a deliberate rollback of the API); without it an older binary serves through the newer schemas")
			if p.Conversion != nil {
				fs.StringVar(&o.conversionBindAddress, "conversion-webhook-bind-address", ":9443", "address the Service API's conversion webhook listens on (host:port); --conversion-webhook-url must reach it")
			}
			fs.BoolVar(&o.standardMode, "standard-mode", true, "serve the onboarding cluster; false runs kcp mode only")
			fs.DurationVar(&o.retryInterval, "retry-interval", 10*time.Second, "how often pending access requests are looked at again (grants also arrive through watches)")
			fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 8, "parallel reconciles per mode")
			fs.Float64Var(&o.clientQPS, "client-qps", 50, "queries per second of each client the runtime creates")
			fs.IntVar(&o.clientBurst, "client-burst", 100, "burst of each client the runtime creates")
			fs.StringVar(&o.mode, "mode", os.Getenv(builder.DeploymentModeEnv), "deployment mode: "+builder.DeploymentModeStandard+
				" (a ServiceProvider: onboarding cluster and kcp workspaces) or "+builder.DeploymentModePlatformService+
				" (a PlatformService: the platform cluster itself is the one tenant); default from $"+builder.DeploymentModeEnv)
			fs.DurationVar(&o.grantTimeout, "grant-timeout", access.DefaultGrantTimeout, "how long a tenant's ClusterRequest or AccessRequest may stay pending before its object says it is not granted and the platform is asked again")
			// A Deployment that fails sooner than the platform grants (minutes on a real
			// platform) only restarts into the same wait.
			fs.DurationVar(&o.accessTimeout, "onboarding-access-timeout", 30*time.Minute, "how long to wait for the platform to grant onboarding access at start-up")
			return o.run
		},
	}
}

func (o *runOptions) run(ctx context.Context, _ io.Writer) error {
	d, log, err := o.start("run")
	if err != nil {
		return err
	}
	if o.leaderElect && o.namespace == "" {
		return errors.New("--leader-elect needs the provider's namespace (--namespace or POD_NAMESPACE) for its leases")
	}
	platformService, err := builder.ParseDeploymentMode(o.mode)
	if err != nil {
		return err
	}
	platformCfg, how, err := o.platformConfig()
	if err != nil {
		return err
	}
	log.Info("platform cluster", "from", how, "host", platformCfg.Host)

	var onboardingCfg *rest.Config
	switch {
	case platformService:
		log.Info("platform-service mode: serving the platform cluster itself")
	case !o.standardMode:
		log.Info("standard mode off: serving kcp workspaces only")
	case o.onboardingKubeconfig != "":
		if onboardingCfg, err = clientcmd.BuildConfigFromFlags("", o.onboardingKubeconfig); err != nil {
			return fmt.Errorf("onboarding kubeconfig %s: %w", o.onboardingKubeconfig, err)
		}
	default:
		scheme, err := PlatformScheme()
		if err != nil {
			return err
		}
		platform, err := client.New(platformCfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("platform client: %w", err)
		}
		access, err := requestOnboardingAccess(ctx, log, platform, o.providerName, o.namespace, runOnboardingName, d.onboardingRunPermissions(), o.accessTimeout)
		if err != nil {
			return err
		}
		onboardingCfg = access.Config
	}

	var conversionWebhook *builder.ConversionWebhook
	if d.Conversion != nil {
		endpoint, err := o.conversionEndpoint()
		if err != nil {
			return err
		}
		conversionWebhook = &builder.ConversionWebhook{Scheme: d.Conversion, URL: endpoint.URL, BindAddress: o.conversionBindAddress}
	}

	rt, err := d.NewRuntime(o.providerName, d.kcp())
	if err != nil {
		return fmt.Errorf("declaring provider %s to the runtime: %w", o.providerName, err)
	}
	err = rt.Start(ctx, builder.Options{
		Platform:                platformCfg,
		Onboarding:              onboardingCfg,
		PlatformService:         platformService,
		Namespace:               o.namespace,
		LeaderElection:          o.leaderElect,
		MetricsBindAddress:      o.metricsBindAddress,
		MetricsSecure:           o.metricsSecure,
		MetricsCertDir:          o.metricsCertDir,
		HealthProbeBindAddress:  o.healthProbeBindAddress,
		RetryInterval:           o.retryInterval,
		GrantTimeout:            o.grantTimeout,
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		ClientQPS:               float32(o.clientQPS),
		ClientBurst:             o.clientBurst,
		Migration:               d.Migration,
		AllowAPIDowngrade:       o.allowDowngrade,
		Conversion:              conversionWebhook,
	})
	if err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
