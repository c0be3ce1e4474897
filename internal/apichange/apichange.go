package apichange

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/version"
)

// ReleaseAnnotation records, on a CRD, the release of the provider's API it carries
// (command.Provider.APIRelease): an older binary never moves it back.
const ReleaseAnnotation = "services.open-control-plane.io/api-release"

// Kind is what happened to one version.
type Kind string

const (
	// Unchanged: the version's schema is the same.
	Unchanged Kind = "Unchanged"
	// Compatible: the version gained optional fields or documentation only; every
	// stored object stays valid and loses nothing.
	Compatible Kind = "Compatible"
	// Added: a new version, served beside the others.
	Added Kind = "Added"
	// Breaking: a served version lost a field, changed a type or tightened what it
	// accepts; stored objects would be pruned or become invalid.
	Breaking Kind = "Breaking"
	// Removed: a version is no longer served.
	Removed Kind = "Removed"
)

// Change is what happened to one version.
type Change struct {
	Version string
	Kind    Kind
	// Why names the first difference that decided the kind, or why it is refused.
	Why string
	// Refused says the change may not be applied.
	Refused bool
}

// Verdict is the result of Compare.
type Verdict struct {
	Changes []Change
	// StorageFrom and StorageTo are the storage versions before and after; they
	// differ when the storage version changes, after which every stored object must be
	// rewritten before the old version can be removed.
	StorageFrom, StorageTo string
}

// Err is nil when every change may be applied, else one error naming each refusal.
func (v Verdict) Err() error {
	var errs []error
	for _, c := range v.Changes {
		if c.Refused {
			errs = append(errs, fmt.Errorf("version %s: %s: %s", c.Version, strings.ToLower(string(c.Kind)), c.Why))
		}
	}
	return errors.Join(errs...)
}

// Compare classifies the change from served (nil when the CRD is not installed yet) to
// want. Refused are: a breaking change within a version served before; a version
// removed while the CRD's status.storedVersions still names it (objects may be stored
// in it); a new version whose schema differs from every served one when the CRD has no
// conversion webhook (with conversion None the API server would serve the same
// objects through both schemas and prune what one lacks).
func Compare(served, want *apiextensionsv1.CustomResourceDefinition) Verdict {
	var v Verdict
	v.StorageTo = StorageVersion(want)
	if served == nil {
		for _, w := range want.Spec.Versions {
			v.Changes = append(v.Changes, Change{Version: w.Name, Kind: Added, Why: "the CRD is new"})
		}
		return v
	}
	v.StorageFrom = StorageVersion(served)
	webhook := want.Spec.Conversion != nil && want.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
	old := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range served.Spec.Versions {
		if served.Spec.Versions[i].Served {
			old[served.Spec.Versions[i].Name] = &served.Spec.Versions[i]
		}
	}
	for i := range want.Spec.Versions {
		w := &want.Spec.Versions[i]
		o, ok := old[w.Name]
		switch {
		case !w.Served && ok:
			v.Changes = append(v.Changes, removed(served, w.Name))
		case !w.Served:
		case !ok:
			v.Changes = append(v.Changes, added(w, old, webhook))
		default:
			why := diff("", schemaOf(o), schemaOf(w))
			switch {
			case why == "" && equality.Semantic.DeepEqual(schemaOf(o), schemaOf(w)):
				v.Changes = append(v.Changes, Change{Version: w.Name, Kind: Unchanged})
			case why == "":
				v.Changes = append(v.Changes, Change{Version: w.Name, Kind: Compatible, Why: "optional fields or documentation added"})
			default:
				v.Changes = append(v.Changes, Change{Version: w.Name, Kind: Breaking, Why: why, Refused: true})
			}
		}
	}
	for _, name := range sortedKeys(old) {
		if !slices.ContainsFunc(want.Spec.Versions, func(w apiextensionsv1.CustomResourceDefinitionVersion) bool { return w.Name == name }) {
			v.Changes = append(v.Changes, removed(served, name))
		}
	}
	return v
}

func removed(served *apiextensionsv1.CustomResourceDefinition, name string) Change {
	if slices.Contains(served.Status.StoredVersions, name) {
		return Change{Version: name, Kind: Removed, Refused: true,
			Why: fmt.Sprintf("objects may still be stored in it (status.storedVersions %v): rewrite them in the storage version first: init does so after a release that stores in another version", served.Status.StoredVersions)}
	}
	return Change{Version: name, Kind: Removed, Why: "no object is stored in it"}
}

func added(w *apiextensionsv1.CustomResourceDefinitionVersion, old map[string]*apiextensionsv1.CustomResourceDefinitionVersion, webhook bool) Change {
	if webhook {
		return Change{Version: w.Name, Kind: Added, Why: "converted by the CRD's webhook"}
	}
	for _, name := range sortedKeys(old) {
		if equality.Semantic.DeepEqual(schemaOf(old[name]), schemaOf(w)) {
			return Change{Version: w.Name, Kind: Added, Why: "the same schema as " + name + ": no conversion needed"}
		}
	}
	return Change{Version: w.Name, Kind: Added, Refused: true,
		Why: "its schema differs from every served version and the CRD has no conversion webhook: objects read through one version would lose what the other lacks"}
}

// diff names the first change from o to w that stored objects would not survive, or
// "" when there is none (w only adds optional properties or changes documentation).
func diff(path string, o, w *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case o == nil:
		return ""
	case w == nil:
		return at(path) + " lost its schema"
	case o.Type != w.Type:
		return fmt.Sprintf("%s changed type from %q to %q", at(path), o.Type, w.Type)
	case ptrTrue(o.XPreserveUnknownFields) && !ptrTrue(w.XPreserveUnknownFields):
		return at(path) + " no longer preserves unknown fields: they would be pruned"
	case !equality.Semantic.DeepEqual(validation(o), validation(w)):
		return at(path) + " changed what it accepts (format, pattern, enum, bounds or lengths): stored objects may no longer be valid"
	}
	for _, r := range w.Required {
		if !slices.Contains(o.Required, r) {
			return fmt.Sprintf("%s requires %q, which stored objects may lack", at(path), r)
		}
	}
	for _, name := range sortedKeys(o.Properties) {
		wp, ok := w.Properties[name]
		if !ok {
			if ptrTrue(w.XPreserveUnknownFields) {
				continue
			}
			return fmt.Sprintf("%s lost property %q: stored values would be pruned", at(path), name)
		}
		op := o.Properties[name]
		if why := diff(path+"."+name, &op, &wp); why != "" {
			return why
		}
	}
	if o.Items != nil {
		var wi *apiextensionsv1.JSONSchemaProps
		if w.Items != nil {
			wi = w.Items.Schema
		}
		if why := diff(path+"[]", o.Items.Schema, wi); why != "" {
			return why
		}
	}
	if o.AdditionalProperties != nil && o.AdditionalProperties.Schema != nil {
		var wa *apiextensionsv1.JSONSchemaProps
		if w.AdditionalProperties != nil {
			wa = w.AdditionalProperties.Schema
		}
		if why := diff(path+"{}", o.AdditionalProperties.Schema, wa); why != "" {
			return why
		}
	}
	return ""
}

// validation is what a schema node accepts beyond its type and properties.
func validation(s *apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Format: s.Format, Pattern: s.Pattern, Enum: s.Enum, Maximum: s.Maximum, Minimum: s.Minimum,
		ExclusiveMaximum: s.ExclusiveMaximum, ExclusiveMinimum: s.ExclusiveMinimum,
		MaxLength: s.MaxLength, MinLength: s.MinLength, MaxItems: s.MaxItems, MinItems: s.MinItems,
		MaxProperties: s.MaxProperties, MinProperties: s.MinProperties, UniqueItems: s.UniqueItems,
		MultipleOf: s.MultipleOf, Nullable: s.Nullable, XValidations: s.XValidations,
		XListType: s.XListType, XListMapKeys: s.XListMapKeys, XMapType: s.XMapType,
	}
}

func at(path string) string {
	if path == "" {
		return "the object"
	}
	return strings.TrimPrefix(path, ".")
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func schemaOf(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Hold says whether to leave a served CRD as it is because it carries a newer release
// of the API than want: an old replica's init, a rollback or an old init Job retried
// must not move the API back, unless allowDowngrade. The older binary then runs
// through the newer CRD (the runtime writes merge patches of the fields it owns, so it
// keeps fields it does not know), which works only while the CRD still serves every
// version want serves: when it does not, the error says so. held is the message to
// log; empty when want may be applied. A CRD without the annotation, or a binary that
// declares no release, is not guarded.
func Hold(served, want *apiextensionsv1.CustomResourceDefinition, allowDowngrade bool) (held string, err error) {
	if served == nil || allowDowngrade {
		return "", nil
	}
	have, ours := served.Annotations[ReleaseAnnotation], want.Annotations[ReleaseAnnotation]
	newer, err := Newer(have, ours)
	if err != nil || !newer {
		return "", err
	}
	var missing []string
	for _, w := range want.Spec.Versions {
		if w.Served && !slices.ContainsFunc(served.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == w.Name && v.Served }) {
			missing = append(missing, w.Name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("CRD %s carries API release %s, newer than this binary's %s, and no longer serves %v, which this binary needs: roll forward, or pass --allow-api-downgrade to move the API back on purpose", served.Name, have, ours, missing)
	}
	return fmt.Sprintf("CRD %s carries API release %s, newer than this binary's %s: left as it is, and served through (pass --allow-api-downgrade to move the API back on purpose)", served.Name, have, ours), nil
}

// Newer reports whether the release served is newer than ours. Either empty, or a
// served release that is no semantic version (not ours to judge), is not newer; ours
// must be one.
func Newer(served, ours string) (bool, error) {
	if served == "" || ours == "" {
		return false, nil
	}
	h, err := version.ParseSemantic(served)
	if err != nil {
		return false, nil
	}
	w, err := version.ParseSemantic(ours)
	if err != nil {
		return false, fmt.Errorf("API release %q is not a semantic version", ours)
	}
	return w.LessThan(h), nil
}

// StorageVersion is crd's storage version; empty when no version is marked as stored.
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
