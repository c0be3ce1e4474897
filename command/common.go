package command

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
)

// Environment variables besides openMCP's POD_* ones.
const (
	envProviderName      = "OPENMCP_PROVIDER_NAME"
	envPlatformNamespace = "OPENMCP_PLATFORM_CLUSTER_NAMESPACE"
	// envConversionWebhookURL is --conversion-webhook-url's default, so that the
	// ServiceProvider's spec.env sets it for init and run at once.
	envConversionWebhookURL = "KSP_CONVERSION_WEBHOOK_URL"
)

// commonOptions are the flags every operator-started command takes.
type commonOptions struct {
	provider             Provider
	environment          string
	providerName         string
	verbosity            string
	namespace            string
	platformKubeconfig   string
	onboardingKubeconfig string
	conversionWebhookURL string
	// oldFlagsUsed lists the flags of the provider's previous binary that were given
	// (Provider.Migration), logged as warnings once the logger is set up.
	oldFlagsUsed func() []string
}

// addFlags registers the flags; defaultName is the provider's name when neither the flag
// nor the environment names one.
func (o *commonOptions) addFlags(fs *flag.FlagSet, defaultName string) {
	fs.StringVar(&o.environment, "environment", "", "name of the openMCP landscape, passed by the openmcp-operator; logged")
	fs.StringVar(&o.providerName, "provider-name", envOr(envProviderName, defaultName),
		"the ServiceProvider's name: names the ProviderConfig, the requests on the platform cluster and the leader election leases")
	fs.StringVar(&o.verbosity, "verbosity", "INFO", "log level: DEBUG, INFO or ERROR")
	fs.StringVar(&o.namespace, "namespace", envOr(openmcpconst.EnvVariablePodNamespace, os.Getenv(envPlatformNamespace)),
		"the provider's namespace on the platform cluster (leases, onboarding access requests)")
	fs.StringVar(&o.platformKubeconfig, "platform-kubeconfig", "",
		"kubeconfig of the platform cluster; default: the in-cluster config, outside a pod $KUBECONFIG")
	fs.StringVar(&o.onboardingKubeconfig, "onboarding-kubeconfig", "",
		"kubeconfig of the onboarding cluster; default: access requested from the platform (a ClusterRequest with purpose onboarding and an AccessRequest), as openMCP providers do")
	if o.provider.Conversion != nil {
		fs.StringVar(&o.conversionWebhookURL, "conversion-webhook-url", os.Getenv(envConversionWebhookURL),
			"https URL at which the onboarding cluster and kcp reach the Service API's conversion webhook, which run serves (--conversion-webhook-bind-address); its host is named in the certificate init keeps in Secret <provider-name>-conversion-webhook")
	}
	// Last: an old flag of a name this binary defines is this binary's.
	o.oldFlagsUsed = o.provider.Migration.AddFlags(fs)
}

// logger sets up controller-runtime's and client-go's logging at the chosen verbosity
// and returns the command's logger.
func (o *commonOptions) logger(command string) (logr.Logger, error) {
	var level zapcore.Level
	switch strings.ToUpper(o.verbosity) {
	case "DEBUG":
		level = zapcore.DebugLevel
	case "INFO":
		level = zapcore.InfoLevel
	case "ERROR":
		level = zapcore.ErrorLevel
	default:
		return logr.Discard(), fmt.Errorf("--verbosity %q: want DEBUG, INFO or ERROR", o.verbosity)
	}
	l := zap.New(zap.Level(level), zap.WriteTo(os.Stderr))
	ctrl.SetLogger(l)
	klog.SetLogger(l.WithName("client-go"))
	l = l.WithName(command)
	l.Info("starting", "provider", o.providerName, "environment", o.environment,
		"namespace", o.namespace, "pod", os.Getenv(openmcpconst.EnvVariablePodName),
		"podIP", os.Getenv(openmcpconst.EnvVariablePodIP),
		"serviceAccount", os.Getenv(openmcpconst.EnvVariablePodServiceAccountName))
	if o.oldFlagsUsed != nil {
		for _, w := range o.oldFlagsUsed() {
			l.Info("Warning: " + w)
		}
	}
	return l, nil
}

// start is what init and run do first: describe the provider from its CRDs, build the
// command's logger, and check the common flags.
func (o *commonOptions) start(command string) (*described, logr.Logger, error) {
	d, err := o.provider.describe()
	if err != nil {
		return nil, logr.Logger{}, err
	}
	log, err := o.logger(command)
	if err != nil {
		return nil, logr.Logger{}, err
	}
	return d, log, o.validate()
}

func (o *commonOptions) validate() error {
	if o.providerName == "" {
		return errors.New("--provider-name is empty")
	}
	return nil
}

// platformConfig is the platform cluster: the flag's kubeconfig, the in-cluster config
// (how the openmcp-operator runs providers), or $KUBECONFIG / ~/.kube/config.
func (o *commonOptions) platformConfig() (*rest.Config, string, error) {
	if o.platformKubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.platformKubeconfig)
		if err != nil {
			return nil, "", fmt.Errorf("platform kubeconfig %s: %w", o.platformKubeconfig, err)
		}
		return cfg, "kubeconfig " + o.platformKubeconfig, nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, "in-cluster config", nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no platform cluster: not in a pod, no --platform-kubeconfig, and $KUBECONFIG does not work: %w", err)
	}
	return cfg, "$KUBECONFIG", nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// conversionEndpoint is where the Service API's conversion webhook is reached and its
// certificate kept; it fails without the URL or the namespace.
func (o *commonOptions) conversionEndpoint() (conversion.Endpoint, error) {
	if o.conversionWebhookURL == "" {
		return conversion.Endpoint{}, fmt.Errorf("provider %s converts between versions of its Service API: --conversion-webhook-url (or $%s) must name where the API servers reach the webhook", o.providerName, envConversionWebhookURL)
	}
	if o.namespace == "" {
		return conversion.Endpoint{}, errors.New("the conversion webhook's certificate is kept in the provider's namespace: --namespace or POD_NAMESPACE")
	}
	return conversion.Endpoint{
		URL:    o.conversionWebhookURL,
		Secret: types.NamespacedName{Namespace: o.namespace, Name: conversion.SecretName(o.providerName)},
	}, nil
}
