package command

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// initOnboardingName is the local name of init's onboarding access request.
const initOnboardingName = "onboarding-init"

type initOptions struct {
	commonOptions
	timeout        time.Duration
	mode           string
	allowDowngrade bool
}

// refusedError is a CRD change the pre-flight check refused: retrying cannot help.
type refusedError struct{ error }

func (e *refusedError) Unwrap() error { return e.error }

// InitCommand installs the provider's CRDs and registers its Service API.
func InitCommand(p Provider) *Command {
	o := &initOptions{commonOptions: commonOptions{provider: p}}
	return &Command{
		Name:  "init",
		Short: "install the CRDs and register the Service API at the ServiceProvider",
		Long: `Runs once per deployment, as the openmcp-operator's init Job. Installs (or updates) the
provider's CRDs, each on the cluster its openmcp.cloud/cluster label names: the Service API
on the onboarding cluster, the ProviderConfig on the platform cluster. Then adds the
Service API's group/version/kind to status.resources of the ServiceProvider named
--provider-name, so that the openmcp-operator deletes a ControlPlane's Service object
with the ControlPlane. The kcp side needs no init: run provisions the APIExport itself.

In platform-service mode (the image deployed as a PlatformService) every CRD goes on the
platform cluster, the one cluster that mode serves, and nothing is registered: a
PlatformService has no status.resources.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, io.Writer) error {
			o.addFlags(fs, p.Name)
			// The init Job fails after this and is retried (backoffLimit 4): the wait must
			// fit a real platform's grant, which takes minutes.
			fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long to wait for the onboarding access and for the CRDs to be served")
			fs.BoolVar(&o.allowDowngrade, "allow-api-downgrade", false, "replace CRDs that carry a newer API release than this binary's (a deliberate rollback of the API)")
			fs.StringVar(&o.mode, "mode", os.Getenv(builder.DeploymentModeEnv), "deployment mode: "+builder.DeploymentModeStandard+
				" or "+builder.DeploymentModePlatformService+" (every CRD on the platform cluster); default from $"+builder.DeploymentModeEnv)
			return o.run
		},
	}
}

// PlatformScheme knows what the commands read and write on the platform cluster:
// Kubernetes' types, CRDs and openMCP's clusters and provider APIs.
func PlatformScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clustersv1alpha1.AddToScheme, providerv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (o *initOptions) run(ctx context.Context, _ io.Writer) error {
	d, log, err := o.start("init")
	if err != nil {
		return err
	}
	platformService, err := builder.ParseDeploymentMode(o.mode)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	platformCfg, how, err := o.platformConfig()
	if err != nil {
		return err
	}
	log.Info("platform cluster", "from", how, "host", platformCfg.Host)
	scheme, err := PlatformScheme()
	if err != nil {
		return err
	}
	platform, err := client.New(platformCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("platform client: %w", err)
	}

	if d.Conversion != nil {
		// Before any CRD is installed: the Service API's CRD trusts the certificate.
		if err := o.prepareConversion(ctx, log, d, platform); err != nil {
			return err
		}
	}

	if platformService {
		// One cluster serves everything; the image is the same.
		err := o.installCRDs(ctx, log, d, func(string) (string, client.Client, *rest.Config) {
			return clustersv1alpha1.PURPOSE_PLATFORM, platform, platformCfg
		})
		reportAPIUpgrade(ctx, log, platformCfg, d, o.providerName, err)
		if err != nil {
			return err
		}
		log.Info("init done (platform-service mode)")
		return nil
	}

	var onboardingCfg *rest.Config
	if o.onboardingKubeconfig != "" {
		if onboardingCfg, err = clientcmd.BuildConfigFromFlags("", o.onboardingKubeconfig); err != nil {
			return fmt.Errorf("onboarding kubeconfig %s: %w", o.onboardingKubeconfig, err)
		}
	} else {
		access, err := requestOnboardingAccess(ctx, log, platform, o.providerName, o.namespace, initOnboardingName, d.onboardingInitPermissions(), o.timeout)
		if err != nil {
			return err
		}
		onboardingCfg = access.Config
		defer func() {
			// Installing CRDs is init's business only: drop the right with the Job.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer rcancel()
			if err := releaseAccess(rctx, platform, o.providerName, o.namespace, initOnboardingName, io.Discard); err != nil {
				log.Error(err, "releasing init's onboarding access")
			}
		}()
	}
	onboarding, err := client.New(onboardingCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("onboarding client: %w", err)
	}

	onCluster := func(purpose string) (string, client.Client, *rest.Config) {
		if purpose == clustersv1alpha1.PURPOSE_ONBOARDING {
			return purpose, onboarding, onboardingCfg
		}
		return clustersv1alpha1.PURPOSE_PLATFORM, platform, platformCfg
	}
	installed := o.installCRDs(ctx, log, d, onCluster)
	reportAPIUpgrade(ctx, log, platformCfg, d, o.providerName, installed)
	if installed != nil {
		return installed
	}

	gvk := metav1.GroupVersionKind{Group: d.serviceGVK.Group, Version: d.serviceGVK.Version, Kind: d.serviceGVK.Kind}
	if err := registerGVK(ctx, log, platform, o.providerName, gvk, d.groups()); err != nil {
		return err
	}
	log.Info("init done")
	return nil
}

// installCRDs installs every CRD of the provider on the cluster on names for its
// ClusterLabel purpose (describe accepts only onboarding and platform): one loop for
// both deployment modes, so that both report on the ProviderConfig.
func (o *initOptions) installCRDs(ctx context.Context, log logr.Logger, d *described, on func(purpose string) (cluster string, c client.Client, cfg *rest.Config)) error {
	for _, c := range d.crds {
		cluster, target, cfg := on(c.Labels[ClusterLabel])
		if err := installCRD(ctx, log, target, cfg, c, o.allowDowngrade); err != nil {
			return fmt.Errorf("installing CRD %s on the %s cluster: %w", c.Name, cluster, err)
		}
		log.Info("CRD installed", "crd", c.Name, "cluster", cluster)
	}
	return nil
}

// prepareConversion makes the conversion webhook's certificate unless its Secret holds
// one, and points the Service API's CRD at the webhook, trusting it.
func (o *commonOptions) prepareConversion(ctx context.Context, log logr.Logger, d *described, platform client.Client) error {
	endpoint, err := o.conversionEndpoint()
	if err != nil {
		return err
	}
	caBundle, err := conversion.EnsureCertificate(ctx, platform, endpoint)
	if err != nil {
		return err
	}
	d.convertThrough(endpoint.URL, caBundle)
	log.Info("Service API converts through the webhook", "url", endpoint.URL, "secret", endpoint.Secret)
	return nil
}

// installCRD creates want or updates the installed CRD to it, and waits until it is
// established. A change the pre-flight check refuses (package apichange: a breaking
// change within a served version, a version removed with objects stored in it, a new
// version that needs a conversion the CRD lacks, an older API release) leaves the
// installed CRD as it is and fails init with the reason. Once the CRD is served, its
// objects are moved to its storage version when some may be stored in another (package
// storageversion), so a later release may remove that version.
func installCRD(ctx context.Context, log logr.Logger, c client.Client, cfg *rest.Config, want *apiextensionsv1.CustomResourceDefinition, allowDowngrade bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
		if apierrors.IsNotFound(err) {
			return c.Create(ctx, want.DeepCopy())
		}
		if err != nil {
			return err
		}
		held, err := apichange.Hold(have, want, allowDowngrade)
		if err != nil {
			return &refusedError{err}
		}
		if held != "" {
			log.Info(held)
			return nil
		}
		if err := apichange.Compare(have, want).Err(); err != nil {
			return &refusedError{fmt.Errorf("refusing the change of CRD %s, which stays as it is: %w", want.Name, err)}
		}
		have.Spec = want.Spec
		if have.Labels == nil {
			have.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			have.Labels[k] = v
		}
		if have.Annotations == nil {
			have.Annotations = map[string]string{}
		}
		for k, v := range want.Annotations {
			have.Annotations[k] = v
		}
		return c.Update(ctx, have)
	})
	if err != nil {
		return err
	}
	var last string
	have := &apiextensionsv1.CustomResourceDefinition{}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range have.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		last = "not established yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until it is established (%s): %w", last, err)
	}
	if err := storageversion.WaitDiscoverable(ctx, cfg, have, 100*time.Millisecond); err != nil {
		return err
	}
	if !storageversion.Needed(have) {
		return nil
	}
	log.Info("moving stored objects to the storage version", "crd", want.Name, "storedVersions", have.Status.StoredVersions)
	res, err := storageversion.Migrate(ctx, cfg, want.Name, storageversion.Options{})
	if err != nil {
		return err
	}
	log.Info("stored objects moved", "crd", want.Name, "from", res.From, "to", res.To, "objects", res.Listed, "rewritten", res.Rewritten)
	return nil
}

// registerGVK makes the ServiceProvider's status.resources name exactly the kinds of
// the provider's own groups that it serves now: gvk is added, other versions and kinds
// of ownGroups (what an earlier version served) are dropped, and kinds of other groups
// are kept (not this provider's to judge). For each registered kind, the
// openmcp-operator deletes the object named like a ControlPlane when the ControlPlane
// goes; a stale entry would make it look for a kind nobody serves. The status is
// updated with optimistic locking, so the operator's own status writes are never lost.
func registerGVK(ctx context.Context, log logr.Logger, platform client.Client, name string, gvk metav1.GroupVersionKind, ownGroups []string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sp := &providerv1alpha1.ServiceProvider{}
		if err := platform.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("ServiceProvider %q not found on the platform cluster: init runs as its init Job, or after it was created (see config/deploy/serviceprovider)", name)
			}
			return err
		}
		want := servedResources(sp.Status.Resources, gvk, ownGroups)
		if slices.Equal(want, sp.Status.Resources) {
			log.Info("Service API already registered at the ServiceProvider", "gvk", gvk)
			return nil
		}
		dropped := slices.DeleteFunc(slices.Clone(sp.Status.Resources), func(r metav1.GroupVersionKind) bool { return slices.Contains(want, r) })
		sp.Status.Resources = want
		if err := platform.Status().Update(ctx, sp); err != nil {
			return err
		}
		log.Info("Service API registered at the ServiceProvider", "gvk", gvk, "dropped", dropped)
		return nil
	})
	if err != nil {
		return fmt.Errorf("registering %s/%s %s at ServiceProvider %q: %w", gvk.Group, gvk.Version, gvk.Kind, name, err)
	}
	return nil
}

// groups are the API groups of the provider's CRDs: its own.
func (d *described) groups() []string {
	var out []string
	for _, c := range d.crds {
		if !slices.Contains(out, c.Spec.Group) {
			out = append(out, c.Spec.Group)
		}
	}
	return out
}

// servedResources is status.resources as registerGVK leaves it: have without the
// entries of ownGroups other than gvk, with gvk (once) at the end.
func servedResources(have []metav1.GroupVersionKind, gvk metav1.GroupVersionKind, ownGroups []string) []metav1.GroupVersionKind {
	var out []metav1.GroupVersionKind
	for _, r := range have {
		if r == gvk || !slices.Contains(ownGroups, r.Group) {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	if !slices.Contains(out, gvk) {
		out = append(out, gvk)
	}
	return out
}

// ProviderConfigReporter is a Runner that names its ProviderConfig type, so that init
// can say on the ProviderConfig what became of the API; the builder's Runtime is one.
type ProviderConfigReporter interface {
	NewProviderConfig() (provider.ProviderConfig, *runtime.Scheme)
}

// reportAPIUpgrade sets the ProviderConfig's APIUpgrade condition from init's result:
// False with the refusal when the pre-flight check refused a change, True when the
// CRDs are installed; nothing on another failure (which says nothing about the API).
// A ProviderConfig that does not exist yet, or a type without the runtime's status,
// gets nothing: the Job's log says it all the same. Failing to write is logged, never
// fatal.
func reportAPIUpgrade(ctx context.Context, log logr.Logger, platformCfg *rest.Config, d *described, name string, installed error) {
	cond := metav1.Condition{Type: v1alpha1.ConditionAPIUpgrade, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAPIInstalled,
		Message: "the CRDs of API release " + cmp.Or(d.APIRelease, "(unnamed)") + " are installed, or newer ones kept"}
	var refused *refusedError
	switch {
	case errors.As(installed, &refused):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonAPIChangeRefused, installed.Error()
	case installed != nil:
		return
	}
	runner, err := d.NewRuntime(name, d.kcp())
	if err != nil {
		return
	}
	reporter, ok := runner.(ProviderConfigReporter)
	if !ok {
		return
	}
	pc, scheme := reporter.NewProviderConfig()
	if _, ok := pc.(provider.ProviderConfigStatuser); !ok {
		return
	}
	c, err := client.New(platformCfg, client.Options{Scheme: scheme})
	if err == nil {
		// Optimistic: the running replicas write the KCPMode condition beside it.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, pc); err != nil {
				return err
			}
			orig := pc.DeepCopyObject().(client.Object)
			meta.SetStatusCondition(&pc.(provider.ProviderConfigStatuser).GetProviderConfigStatus().Conditions, cond)
			return c.Status().Patch(ctx, pc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
	}
	if apierrors.IsNotFound(err) {
		log.Info("no ProviderConfig yet to report the API upgrade on", "name", name)
		return
	}
	if err != nil {
		log.Error(err, "writing the ProviderConfig's APIUpgrade condition", "reason", cond.Reason)
	}
}
