package e2ekcp

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
	"strconv"
)

// A replica is this test binary started again as the widget provider's process: the
// same runtime a provider binary runs, with its own metrics, probes, leases and log,
// so that tests can run two of them and kill one like a pod. The environment says
// what it serves.
const (
	replicaEnv           = "KSP_E2E_REPLICA" // the replica's name; unset in the test process
	replicaPlatformEnv   = "KSP_E2E_REPLICA_PLATFORM_KUBECONFIG"
	replicaOnboardingEnv = "KSP_E2E_REPLICA_ONBOARDING_KUBECONFIG"
	replicaMetricsEnv    = "KSP_E2E_REPLICA_METRICS_ADDR"
	replicaProbesEnv     = "KSP_E2E_REPLICA_PROBE_ADDR"
	replicaProviderEnv   = "KSP_E2E_REPLICA_PROVIDER" // the provider's name; default spName
	// replicaReleaseEnv is the API release the replica's Service API carries
	// (apichange.ReleaseAnnotation); replicaWithoutEnv names a spec property its
	// schema lacks: together, a replica of an older release.
	replicaReleaseEnv = "KSP_E2E_REPLICA_API_RELEASE"
	replicaWithoutEnv = "KSP_E2E_REPLICA_WITHOUT_SPEC_FIELD"
)

// Leader election of the replicas: short, so that a failover fits in a test, and
// loose enough for a loaded 2-core machine to renew in time.
const (
	replicaLeaseDuration = 8 * time.Second
	replicaRenewDeadline = 5 * time.Second
	replicaRetryPeriod   = time.Second
)

// init turns the test binary into a replica when the environment says so; the test
// functions never run then.
func init() {
	if os.Getenv(replicaEnv) == "" {
		return
	}
	if err := runReplica(); err != nil {
		fmt.Fprintf(os.Stderr, "replica %s: %v\n", os.Getenv(replicaEnv), err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runReplica() error {
	// JSON lines at V(2), so that the secret-leak check also covers debug output.
	var zopts zap.Options
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	zopts.BindFlags(fs)
	if err := fs.Parse([]string{"--zap-log-level=2"}); err != nil {
		return err
	}
	log.SetLogger(zap.New(zap.UseFlagOptions(&zopts), zap.WriteTo(os.Stderr)))
	platform, err := clientcmd.BuildConfigFromFlags("", os.Getenv(replicaPlatformEnv))
	if err != nil {
		return fmt.Errorf("platform kubeconfig: %w", err)
	}
	// Without an onboarding kubeconfig the replica serves kcp mode only.
	var onboarding *rest.Config
	if kc := os.Getenv(replicaOnboardingEnv); kc != "" {
		if onboarding, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			return fmt.Errorf("onboarding kubeconfig: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme, widget.AddToScheme, apisv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		return err
	}
	if release := os.Getenv(replicaReleaseEnv); release != "" {
		widgetCRD.Annotations = map[string]string{apichange.ReleaseAnnotation: release}
	}
	if field := os.Getenv(replicaWithoutEnv); field != "" {
		for _, v := range widgetCRD.Spec.Versions {
			delete(v.Schema.OpenAPIV3Schema.Properties["spec"].Properties, field)
		}
	}
	name := spName
	if n := os.Getenv(replicaProviderEnv); n != "" {
		name = n
	}
	recorded, err := withRecording(widget.Provider{}, os.Getenv(replicaEnv))
	if err != nil {
		return err
	}
	rt, err := widgetbuilder.New(name, scheme, widget.KCPMCPPermissions).
		KCP(apiexport.FromCRD(name, widgetCRD)).
		Complete(recorded)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return rt.Start(log.IntoContext(ctx, log.Log.WithValues("replica", os.Getenv(replicaEnv))), builder.Options{
		Platform: platform, Onboarding: onboarding, Namespace: "default", Replica: os.Getenv(replicaEnv),
		LeaderElection: true, LeaseDuration: replicaLeaseDuration, RenewDeadline: replicaRenewDeadline, RetryPeriod: replicaRetryPeriod,
		MetricsBindAddress:     os.Getenv(replicaMetricsEnv),
		HealthProbeBindAddress: os.Getenv(replicaProbesEnv),
		RetryInterval:          time.Second,
	})
}

// replica is a running replica process.
type replica struct {
	*harness.Process
	name            string
	metrics, probes string // base URLs
}

// startReplica starts a replica serving the platform and onboarding clusters whose
// kubeconfig files are given (no onboarding file: kcp mode only), with env added to its
// environment. t.Cleanup stops it (SIGTERM, then SIGKILL).
func startReplica(t *testing.T, name, platformKubeconfig, onboardingKubeconfig string, env ...string) *replica {
	t.Helper()
	ports, err := localenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, probeAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	r := &replica{name: name, metrics: "http://" + metricsAddr, probes: "http://" + probeAddr}
	r.Process = harness.StartProcess(t, "replica-"+name, os.Args[0], []string{"-test.run=^$"}, 30*time.Second, append([]string{
		replicaEnv + "=" + name,
		replicaPlatformEnv + "=" + platformKubeconfig,
		replicaOnboardingEnv + "=" + onboardingKubeconfig,
		replicaMetricsEnv + "=" + metricsAddr,
		replicaProbesEnv + "=" + probeAddr,
	}, env...)...)
	t.Logf("replica %s: pid %d, metrics %s, probes %s", name, r.Pid(), r.metrics, r.probes)
	return r
}

// stop signals the replica and waits for it to exit, killing it after grace.
func (r *replica) stop(sig syscall.Signal, grace time.Duration) {
	_ = r.StopWith(sig, grace)
}

func (r *replica) log(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(r.Log)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startReplicaPlatform prepares what replica processes serve on the package's shared
// platform of the given number of kcp shards: a provider of the test's own (its
// workspace, identity and kubeconfig Secret) and the widget ProviderConfig with
// spec.kcp; it returns the environment (without an in-process runtime) and the
// platform kubeconfig file a replica reads. Start replicas with e.startReplica.
func startReplicaPlatform(ctx context.Context, t *testing.T, shards int) (e *kcpEnv, platformKubeconfig string) {
	t.Helper()
	e = newKCPEnvOn(ctx, t, envPlatform{shards: shards})
	platformKubeconfig = filepath.Join(t.TempDir(), "platform.kubeconfig")
	if err := os.WriteFile(platformKubeconfig, e.platform.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	e.setConfig(ctx, t, "hello", &v1alpha1.KCP{ProviderWorkspace: e.providerWS.String(),
		KubeconfigSecret: v1alpha1.SecretReference{Name: e.secret.Name, Namespace: e.secret.Namespace}})
	return e, platformKubeconfig
}

// startReplica starts a replica serving e's provider in kcp mode (startReplica).
func (e *kcpEnv) startReplica(t *testing.T, name, platformKubeconfig string, env ...string) *replica {
	t.Helper()
	return startReplica(t, name, platformKubeconfig, "", append([]string{replicaProviderEnv + "=" + e.name}, env...)...)
}
