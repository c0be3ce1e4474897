package apiexport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
)

// Options tune [Provision]. The zero value is usable.
type Options struct {
	// Timeout bounds the whole call, including the wait for kcp to set the export's
	// identity hash and to create its endpoint slice. Default 2 minutes.
	Timeout time.Duration
	// PollInterval is how often that wait looks. Default 200 ms.
	PollInterval time.Duration
	// AllowDowngrade lets a binary of an older API release move the export's schemas
	// back to its own (a deliberate rollback of the API). Without it the export keeps
	// the newer schemas, which Provisioned.Held says.
	AllowDowngrade bool
}

// Provisioned describes the provisioned export.
type Provisioned struct {
	// ExportName names the APIExport.
	ExportName string
	// IdentityHash is the export's identity, needed to claim its resources elsewhere.
	IdentityHash string
	// EndpointSliceName names the APIExportEndpointSlice a multicluster provider reads.
	EndpointSliceName string
	// SchemaNames are the APIResourceSchemas of the surface's CRDs, in the same order.
	SchemaNames []string
	// Held, when set, says why the export's schemas were left as they are although
	// they differ from the surface's: the export carries a newer API release
	// (apichange.ReleaseAnnotation) than the surface's CRDs. The export is served
	// through the newer schemas then; a runtime writing merge patches of the fields it
	// owns loses nothing that way.
	Held string
}

// endpointSliceGrace is how long Provision waits for kcp to create the endpoint slice
// named like the export before creating it itself. kcp creates it right after it has
// set the identity (unless the export opts out), so this only matters for servers that
// do not.
const endpointSliceGrace = 10 * time.Second

// conflictBackoff spaces the retries of a write that lost a race against another
// writer (a second replica, an operator). Each retry re-reads, so a few suffice.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: 2 * time.Second}

// SchemaFor converts crd into the APIResourceSchema Provision creates for it, named
// "h<hash>.<plural>.<group>" where hash is a short digest of the schema's content: the
// same CRD always yields the same name, any change to it a different one.
func SchemaFor(crd *apiextensionsv1.CustomResourceDefinition) (*apisv1alpha1.APIResourceSchema, error) {
	if crd.Spec.Conversion == nil && len(crd.Spec.Versions) > 1 {
		// controller-gen writes no spec.conversion and the API server defaults it to
		// None; kcp's converter refuses several versions unless it is said.
		crd = crd.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	// Convert once with a placeholder to get the content, then name it after that.
	probe, err := apisv1alpha1.CRDToAPIResourceSchema(crd, "x")
	if err != nil {
		return nil, fmt.Errorf("converting CRD %s to an APIResourceSchema: %w", crd.Name, err)
	}
	content, err := json.Marshal(probe.Spec)
	if err != nil {
		return nil, fmt.Errorf("hashing APIResourceSchema of CRD %s: %w", crd.Name, err)
	}
	sum := sha256.Sum256(content)
	// 10 hex digits (40 bits): collisions between versions of one CRD are negligible,
	// and the name stays short enough for long plural.group names. kcp wants the
	// prefix to start with a letter.
	s, err := apisv1alpha1.CRDToAPIResourceSchema(crd, "h"+hex.EncodeToString(sum[:5]))
	if err != nil {
		return nil, fmt.Errorf("converting CRD %s to an APIResourceSchema: %w", crd.Name, err)
	}
	return s, nil
}

// Provision makes the provider workspace serve s: schemas created if absent, the
// APIExport created or merged (see the package documentation), and waits until kcp has
// given the export an identity and an endpoint slice exists. c points at the provider
// workspace. It is idempotent and safe to call from several replicas at once.
func Provision(ctx context.Context, c client.Client, s Surface, opts Options) (*Provisioned, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("provisioning APIExport %q: %w", s.ExportName, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 200 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	out := &Provisioned{ExportName: s.ExportName, EndpointSliceName: s.ExportName}
	resources := make([]apisv1alpha2.ResourceSchema, 0, len(s.CRDs))
	for _, crd := range s.CRDs {
		schema, err := ensureSchema(ctx, c, crd)
		if err != nil {
			return nil, fmt.Errorf("provisioning APIExport %q: %w", s.ExportName, err)
		}
		out.SchemaNames = append(out.SchemaNames, schema.Name)
		resources = append(resources, apisv1alpha2.ResourceSchema{
			Name:    schema.Spec.Names.Plural,
			Group:   schema.Spec.Group,
			Schema:  schema.Name,
			Storage: apisv1alpha2.ResourceSchemaStorage{CRD: &apisv1alpha2.ResourceSchemaStorageCRD{}},
		})
	}

	claims := s.Claims()
	held, err := upsertExport(ctx, c, s.ExportName, resources, claims, s.CRDs, opts.AllowDowngrade)
	if err != nil {
		return nil, fmt.Errorf("provisioning APIExport %q: %w", s.ExportName, err)
	}

	out.Held = held

	hash, err := waitForExport(ctx, c, s.ExportName, opts.PollInterval)
	if err != nil {
		return nil, fmt.Errorf("provisioning APIExport %q: %w", s.ExportName, err)
	}
	out.IdentityHash = hash
	return out, nil
}

// ensureSchema creates the content-named schema of crd unless it exists. An existing
// schema of that name is taken as is: the name is derived from the content and kcp
// forbids changing a schema, so it can only hold the same content.
func ensureSchema(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) (*apisv1alpha1.APIResourceSchema, error) {
	want, err := SchemaFor(crd)
	if err != nil {
		return nil, err
	}
	have := &apisv1alpha1.APIResourceSchema{}
	err = c.Get(ctx, client.ObjectKey{Name: want.Name}, have)
	switch {
	case err == nil:
		return want, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading APIResourceSchema %s: %w", want.Name, err)
	}
	if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating APIResourceSchema %s: %w", want.Name, err)
	}
	return want, nil
}

// upsertExport creates the export or merges resources and claims into it, writing only
// when the merge changes something, and records the surface's API release on it. Forward
// only: an export carrying a newer release keeps its schemas unless allowDowngrade, and
// held says so. A lost race (Conflict on update, AlreadyExists on create) is retried from
// a fresh read.
func upsertExport(ctx context.Context, c client.Client, name string, resources []apisv1alpha2.ResourceSchema, claims []apisv1alpha2.PermissionClaim,
	crds []*apiextensionsv1.CustomResourceDefinition, allowDowngrade bool) (held string, err error) {
	ours := releaseOf(crds)
	err = retry.OnError(conflictBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		have := &apisv1alpha2.APIExport{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, have)
		if apierrors.IsNotFound(err) {
			export := &apisv1alpha2.APIExport{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: releaseAnnotation(nil, ours)},
				Spec: apisv1alpha2.APIExportSpec{
					Resources:        mergeResources(nil, resources),
					PermissionClaims: mergeClaims(nil, claims),
				},
			}
			return c.Create(ctx, export)
		}
		if err != nil {
			return fmt.Errorf("reading APIExport: %w", err)
		}
		want := have.DeepCopy()
		want.Spec.Resources = mergeResources(have.Spec.Resources, resources)
		want.Spec.PermissionClaims = mergeClaims(have.Spec.PermissionClaims, claims)
		served := have.Annotations[apichange.ReleaseAnnotation]
		newer, err := apichange.Newer(served, ours)
		if err != nil {
			return err
		}
		held = ""
		switch {
		case newer && !allowDowngrade:
			if !equality.Semantic.DeepEqual(have.Spec.Resources, want.Spec.Resources) {
				held = fmt.Sprintf("APIExport %s carries API release %s, newer than this binary's %s: its schemas stay as they are and this binary serves through them (an older binary does not move the API back unless allowed to downgrade)", name, served, ours)
				want.Spec.Resources = have.Spec.Resources
			}
		case ours != "":
			want.Annotations = releaseAnnotation(want.Annotations, ours)
		}
		if held == "" { // held, nothing moves
			stale, err := checkSchemaMoves(ctx, c, have, resources, crds)
			if err != nil {
				return err
			}
			for _, key := range stale {
				delete(want.Annotations, key)
			}
		}
		if equality.Semantic.DeepEqual(have.Spec, want.Spec) && equality.Semantic.DeepEqual(have.Annotations, want.Annotations) {
			return nil
		}
		// Update carries have's resourceVersion: a concurrent writer makes it fail
		// with Conflict instead of being overwritten.
		return c.Update(ctx, want)
	})
	if err != nil {
		return "", fmt.Errorf("writing APIExport: %w", err)
	}
	return held, nil
}

// releaseOf is the API release the surface's CRDs carry (command.Provider.APIRelease);
// empty when they declare none.
func releaseOf(crds []*apiextensionsv1.CustomResourceDefinition) string {
	for _, c := range crds {
		if r := c.Annotations[apichange.ReleaseAnnotation]; r != "" {
			return r
		}
	}
	return ""
}

// releaseAnnotation returns annotations with the release recorded, unless release is
// empty.
func releaseAnnotation(annotations map[string]string, release string) map[string]string {
	if release == "" {
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[apichange.ReleaseAnnotation] = release
	return annotations
}

// checkSchemaMoves is the pre-flight check of kcp mode (package apichange): an export
// entry that would move to another schema is compared with the schema it points at
// now, and a move that would lose or invalidate what tenants stored is refused before
// anything is written. kcp moves every binding to the export's schema within seconds
// and, with conversion None, prunes objects to the schema they are read through; a
// replica of an older release provisioning its schema back would drop a newer field
// in every workspace. A version counts as unused only when the export's record says
// every object is stored in the schema's storage version (package storageversion); a
// move to another storage version makes that record stale, and checkSchemaMoves
// returns the keys of such records, for the caller to drop in the same write.
func checkSchemaMoves(ctx context.Context, c client.Client, have *apisv1alpha2.APIExport, ours []apisv1alpha2.ResourceSchema,
	crds []*apiextensionsv1.CustomResourceDefinition) (stale []string, err error) {
	for i, r := range ours {
		j := slices.IndexFunc(have.Spec.Resources, func(o apisv1alpha2.ResourceSchema) bool { return o.Group == r.Group && o.Name == r.Name })
		if j < 0 || have.Spec.Resources[j].Schema == r.Schema || i >= len(crds) {
			continue
		}
		current := &apisv1alpha1.APIResourceSchema{}
		if err := c.Get(ctx, client.ObjectKey{Name: have.Spec.Resources[j].Schema}, current); err != nil {
			if apierrors.IsNotFound(err) {
				continue // nothing is served through a schema that does not exist
			}
			return nil, fmt.Errorf("reading APIResourceSchema %s the export serves: %w", have.Spec.Resources[j].Schema, err)
		}
		key := storageversion.RecordKey(schema.GroupResource{Group: r.Group, Resource: r.Name})
		served, err := crdOf(current, have.Annotations[key])
		if err != nil {
			return nil, err
		}
		verdict := apichange.Compare(served, crds[i])
		if err := verdict.Err(); err != nil {
			return nil, fmt.Errorf("refusing to move %s.%s from APIResourceSchema %s to %s, which stays served: %w",
				r.Name, r.Group, current.Name, r.Schema, err)
		}
		if verdict.StorageFrom != verdict.StorageTo {
			stale = append(stale, key)
		}
	}
	return stale, nil
}

// crdOf is a schema as the CRD apichange compares. Every version is taken as stored,
// unless stored (the export's record, package storageversion) says every object is in
// the schema's storage version.
func crdOf(s *apisv1alpha1.APIResourceSchema, stored string) (*apiextensionsv1.CustomResourceDefinition, error) {
	c := &apiextensionsv1.CustomResourceDefinition{}
	c.Name = s.Spec.Names.Plural + "." + s.Spec.Group
	recorded := false
	for _, v := range s.Spec.Versions {
		props := &apiextensionsv1.JSONSchemaProps{}
		if len(v.Schema.Raw) > 0 {
			if err := json.Unmarshal(v.Schema.Raw, props); err != nil {
				return nil, fmt.Errorf("APIResourceSchema %s version %s: %w", s.Name, v.Name, err)
			}
		}
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v.Name, Served: v.Served, Storage: v.Storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props}})
		c.Status.StoredVersions = append(c.Status.StoredVersions, v.Name)
		if v.Storage && v.Name == stored {
			recorded = true
		}
	}
	if recorded {
		c.Status.StoredVersions = []string{stored}
	}
	return c, nil
}

// mergeResources replaces the entries of have that export the same group and resource
// as one of ours and appends the others; entries of other writers stay as they are.
func mergeResources(have, ours []apisv1alpha2.ResourceSchema) []apisv1alpha2.ResourceSchema {
	out := make([]apisv1alpha2.ResourceSchema, len(have))
	for i := range have {
		out[i] = *have[i].DeepCopy()
	}
	for _, r := range ours {
		i := slices.IndexFunc(out, func(o apisv1alpha2.ResourceSchema) bool { return o.Group == r.Group && o.Name == r.Name })
		if i < 0 {
			out = append(out, *r.DeepCopy())
			continue
		}
		if out[i].Schema != r.Schema || out[i].Storage.CRD == nil || out[i].Storage.Virtual != nil {
			out[i] = *r.DeepCopy()
		}
	}
	return out
}

// waitForExport polls until kcp has set the export's identity hash and an endpoint
// slice named like the export exists, creating the slice when kcp has not after
// endpointSliceGrace (or at once when the export asks kcp not to create one).
func waitForExport(ctx context.Context, c client.Client, name string, interval time.Duration) (string, error) {
	start := time.Now()
	var hash string
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		export := &apisv1alpha2.APIExport{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, export); err != nil {
			lastErr = fmt.Errorf("reading APIExport: %w", err)
			return false, nil
		}
		if hash = export.Status.IdentityHash; hash == "" {
			lastErr = errors.New("kcp has not set the identity hash yet")
			return false, nil
		}
		slice := &apisv1alpha1.APIExportEndpointSlice{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, slice)
		switch {
		case err == nil:
			return true, nil
		case !apierrors.IsNotFound(err):
			lastErr = fmt.Errorf("reading APIExportEndpointSlice: %w", err)
			return false, nil
		}
		_, skip := export.Annotations[apisv1alpha2.APIExportEndpointSliceSkipAnnotation]
		if !skip && time.Since(start) < endpointSliceGrace {
			lastErr = errors.New("kcp has not created the APIExportEndpointSlice yet")
			return false, nil
		}
		slice = &apisv1alpha1.APIExportEndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       apisv1alpha1.APIExportEndpointSliceSpec{APIExport: apisv1alpha1.ExportBindingReference{Name: name}},
		}
		err = c.Create(ctx, slice)
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			// Waiting will not help (e.g. the caller may not bind the export).
			return false, fmt.Errorf("creating APIExportEndpointSlice: %w", err)
		default:
			lastErr = fmt.Errorf("creating APIExportEndpointSlice: %w", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil && ctx.Err() != nil {
			return "", fmt.Errorf("waiting for the export to become ready: %w (last: %w)", err, lastErr)
		}
		return "", fmt.Errorf("waiting for the export to become ready: %w", err)
	}
	return hash, nil
}
