package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
	"github.com/openmcp-project/kcp-serviceprovider/migration"
)

// ClusterLabel names the openMCP cluster purpose a CRD is installed on: onboarding for
// the Service API, platform for the ProviderConfig. controller-gen writes it from the
// types' `+kubebuilder:metadata:labels` marker.
const ClusterLabel = "openmcp.cloud/cluster"

// Provider is everything the commands know about a service provider. A provider's
// main package fills it in once and hands it to [Main].
type Provider struct {
	// Name is the provider's name when the platform passes none (--provider-name,
	// $OPENMCP_PROVIDER_NAME): the ServiceProvider's and ProviderConfig's name, the
	// managed-by label of what the runtime creates, the prefix of leader election IDs.
	Name string
	// CRDs holds the provider's generated CRD files (controller-gen's output, usually
	// embedded with go:embed; see [ReadCRDs]); YAML files that are not CRDs, such as a
	// kustomization.yaml, are skipped. Each CRD carries ClusterLabel: exactly one is
	// for the onboarding cluster, the Service API (also the source of the kcp schema);
	// the others, the ProviderConfig among them, are for the platform cluster.
	CRDs fs.FS
	// ExportName names the APIExport in the provider workspace, which tenants bind.
	// Empty means the Service API's group, so exports of providers never collide.
	ExportName string
	// NewRuntime declares the provider to the runtime under the name run was given.
	// kcp is the kcp surface derived from CRDs and ExportName: handing it to the
	// builder's KCP keeps what run provisions equal to what kcp-manifests prints.
	NewRuntime func(name string, kcp apiexport.Provisionable) (Runner, error)
	// APIRelease, when set, is the release of the provider's API this binary brings
	// (a semantic version, e.g. v1.4.0): init records it on every CRD it installs and
	// refuses to replace a CRD that carries a newer one, so an older binary (a rollback,
	// an old init Job retried) never moves the API back.
	APIRelease string
	// Migration, when set, is what the provider's previous binary, built on
	// opencontrolplane-runtime, named: the runtime keeps those names and takes its
	// tenants over in place when the ServiceProvider's image is swapped (package
	// migration, docs/migrating-from-opencontrolplane-runtime.md).
	Migration *migration.FromOCR
	// Conversion, when set, holds the Go types of every version of the Service API,
	// one a hub (controller-runtime's conversion.Hub) and the others convertible to it
	// (conversion.Convertible), for versions whose schemas differ. init then installs
	// the Service CRD with a conversion webhook, and run hands it to the runtime
	// (builder.Options.Conversion), which serves it and points the kcp schema at it
	// (--conversion-webhook-url, --conversion-webhook-bind-address).
	Conversion *runtime.Scheme
	// Local, when set, adds the local command, which starts a whole platform on this
	// machine with the provider in both modes.
	Local *Local
}

// Local is what the local command applies and prints besides the runtime's own
// manifests. Paths are relative to the repository root.
type Local struct {
	// RuntimeRBAC is applied in the provider workspace: the runtime's kcp identity
	// (ServiceAccount kcp-serviceprovider/runtime) and its RBAC there. Empty: the
	// generic one for the provider's APIExport (config.KCPRuntimeRBAC).
	RuntimeRBAC string
	// ProviderConfig is applied on the platform cluster: a ProviderConfig with spec.kcp
	// naming workspace root:providers:<Name> and Secret openmcp-system/kcp-kubeconfig
	// (the openmcp-operator's namespace, where the provider runs).
	ProviderConfig string
	// Quickstart returns the commands local prints for a tenant in kcp mode, in
	// standard mode, and for a look at the workload cluster; state names what local
	// wrote into its state folder, as the commands name it.
	Quickstart func(state LocalState) (kcp, standard, workers []string)
	// Charts, when set, are pushed to an OCI registry local starts, with Flux's
	// source-controller and helm-controller on the platform cluster, before the
	// ProviderConfig is applied: for a provider that installs through Flux.
	Charts []LocalChart
}

// LocalState is local's state folder as the printed commands name it ("$PWD/.local-platform"
// for the default): what local writes there, for a provider's Quickstart.
type LocalState string

// Shell is the line that points a shell at the local platform: its kubectl on PATH, the
// kcp kubeconfig (contexts root, tenant and provider) and kubectl's cache in the state
// folder. The kcp commands of a Quickstart start with it.
func (s LocalState) Shell() string {
	return fmt.Sprintf(`export PATH="%s:$PATH" KUBECONFIG="%s" KUBECACHEDIR="%s"`,
		filepath.Join(string(s), "bin"), s.Kubeconfig("kcp"), filepath.Join(string(s), "kube-cache"))
}

// Kubeconfig is the path of the admin kubeconfig local writes for a cluster: platform,
// onboarding, workload, mcp or kcp.
func (s LocalState) Kubeconfig(cluster string) string {
	return filepath.Join(string(s), "kubeconfigs", cluster+".kubeconfig")
}

// LocalChart is a Helm chart local pushes for a provider that installs through Flux.
type LocalChart struct {
	// Dir is the chart's folder (Chart.yaml, templates), relative to the repository
	// root; Versions are pushed, each as the chart's version.
	Dir      string
	Versions []string
	// URLField is the ProviderConfig field local sets to the pushed chart's OCI URL
	// (oci://<registry>/charts/<chart name>), e.g. spec.chartURL as
	// []string{"spec", "chartURL"}.
	URLField []string
}

// Runner is what run starts: the provider declared to the runtime, usually the
// builder's *Runtime.
type Runner interface {
	Start(ctx context.Context, opts builder.Options) error
}

// described is a Provider with what the commands derive from its CRDs.
type described struct {
	Provider
	// crds are every CRD init installs.
	crds []*apiextensionsv1.CustomResourceDefinition
	// service is the Service API's CRD.
	service *apiextensionsv1.CustomResourceDefinition
	// serviceGVK is the kind init registers at the ServiceProvider.
	serviceGVK schema.GroupVersionKind
	// serviceResource is the Service API's resource (plural) on the onboarding cluster.
	serviceResource schema.GroupResource
	// exportName is ExportName or its default.
	exportName string
}

// describe reads the CRDs and derives the rest. It fails on a description the commands
// could not act on, so a provider author's mistake shows as one clear error.
func (p Provider) describe() (*described, error) {
	if p.Name == "" {
		return nil, errors.New("command.Provider: Name is empty")
	}
	if p.CRDs == nil || p.NewRuntime == nil {
		return nil, fmt.Errorf("command.Provider %s: CRDs and NewRuntime are required", p.Name)
	}
	crds, err := ReadCRDs(p.CRDs)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name, err)
	}
	if p.APIRelease != "" {
		if _, err := version.ParseSemantic(p.APIRelease); err != nil {
			return nil, fmt.Errorf("provider %s: APIRelease %q: %w", p.Name, p.APIRelease, err)
		}
		for _, c := range crds {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[apichange.ReleaseAnnotation] = p.APIRelease
		}
	}
	d := &described{Provider: p, crds: crds}
	for _, c := range crds {
		switch purpose := c.Labels[ClusterLabel]; purpose {
		case clustersv1alpha1.PURPOSE_ONBOARDING:
			if d.service != nil {
				return nil, fmt.Errorf("provider %s: CRDs %s and %s are both labelled %s=%s; one Service API per provider", p.Name, d.service.Name, c.Name, ClusterLabel, purpose)
			}
			d.service = c
		case clustersv1alpha1.PURPOSE_PLATFORM:
		default:
			return nil, fmt.Errorf("provider %s: CRD %s: label %s=%q names no cluster init knows (%s or %s)",
				p.Name, c.Name, ClusterLabel, purpose, clustersv1alpha1.PURPOSE_ONBOARDING, clustersv1alpha1.PURPOSE_PLATFORM)
		}
	}
	if d.service == nil {
		return nil, fmt.Errorf("provider %s: no CRD is labelled %s=%s: which is the Service API?", p.Name, ClusterLabel, clustersv1alpha1.PURPOSE_ONBOARDING)
	}
	spec := d.service.Spec
	d.serviceGVK = schema.GroupVersionKind{Group: spec.Group, Version: apichange.StorageVersion(d.service), Kind: spec.Names.Kind}
	if d.serviceGVK.Version == "" {
		return nil, fmt.Errorf("provider %s: CRD %s has no storage version", p.Name, d.service.Name)
	}
	d.serviceResource = schema.GroupResource{Group: spec.Group, Resource: spec.Names.Plural}
	if p.Conversion != nil {
		if err := conversion.Check(p.Conversion, d.service); err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
	}
	d.exportName = p.ExportName
	if d.exportName == "" {
		d.exportName = spec.Group
	}
	return d, nil
}

// convertThrough makes the Service API's CRD, and the kcp schema derived from it,
// convert through the webhook at url trusting caBundle; nothing for a provider without
// Conversion.
func (d *described) convertThrough(url string, caBundle []byte) {
	if d.Conversion != nil {
		conversion.Configure(d.service, url, caBundle)
	}
}

// kcp is the surface run provisions and kcp-manifests prints.
func (d *described) kcp() apiexport.Provisionable {
	return apiexport.FromCRD(d.exportName, d.service)
}

// Surface is what the commands derive from a Provider's CRDs, for code that serves the
// provider outside them (the test kit): which CRD goes where, and the kcp surface.
type Surface struct {
	// ServiceCRD is the Service API (onboarding cluster, and the kcp schema's source);
	// PlatformCRDs are the others, the ProviderConfig among them.
	ServiceCRD   *apiextensionsv1.CustomResourceDefinition
	PlatformCRDs []*apiextensionsv1.CustomResourceDefinition
	// ExportName is the APIExport tenants bind; KCP is what run provisions for it.
	ExportName string
	KCP        apiexport.Provisionable
}

// Surface describes the provider as run would serve it; the error is describe's.
func (p Provider) Surface() (Surface, error) {
	d, err := p.describe()
	if err != nil {
		return Surface{}, err
	}
	s := Surface{ServiceCRD: d.service, ExportName: d.exportName, KCP: d.kcp()}
	for _, c := range d.crds {
		if c != d.service {
			s.PlatformCRDs = append(s.PlatformCRDs, c)
		}
	}
	return s, nil
}

// ReadCRDs decodes every CustomResourceDefinition in the YAML files of fsys, in any
// folder (`//go:embed crd/*.yaml` holds them under crd/), in path order, skipping other
// objects.
func ReadCRDs(fsys fs.FS) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var names []string
	err := fs.WalkDir(fsys, ".", func(name string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing CRD files: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("reading CRD file %s: %w", name, err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", name, i+1, err)
			}
			if meta.Kind != "CustomResourceDefinition" || meta.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return nil, fmt.Errorf("parsing CRD in %s: %w", name, err)
			}
			out = append(out, crd)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no CustomResourceDefinition among the CRD files")
	}
	return out, nil
}

// onboardingRunPermissions are what run needs on the onboarding cluster: watch the
// Service objects, keep the finalizer and the operation annotation, write status, and
// record events.
func (d *described) onboardingRunPermissions() []clustersv1alpha1.PermissionsRequest {
	r := d.serviceResource
	perms := []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{r.Group}, Resources: []string{r.Resource + "/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}}
	if l := d.Migration.OldLease(); l != nil && l.Cluster == migration.LeaseOnOnboarding {
		// Standard mode elects on the old binary's lease, which is there.
		perms = append(perms, clustersv1alpha1.PermissionsRequest{Namespace: l.Namespace, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		}})
	}
	return perms
}

// onboardingInitPermissions are what init needs on the onboarding cluster: install
// and update the Service API's CRD, and after a change of its storage version rewrite
// every stored object (an empty patch) and record that in the CRD's status
// (package storageversion).
func (d *described) onboardingInitPermissions() []clustersv1alpha1.PermissionsRequest {
	r := d.serviceResource
	return []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{"list", "patch"}},
	}}}
}
