package apiexport

import (
	"errors"
	"fmt"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
)

// Provisionable is implemented by a provider that can be served to kcp tenants. It is
// optional: a provider without it runs in standard mode only.
type Provisionable interface {
	// APISurface returns what the runtime exports on the provider's behalf.
	APISurface() (Surface, error)
}

// Surface is a provider's API surface in kcp.
type Surface struct {
	// ExportName names the APIExport in the provider workspace; tenants bind to it.
	ExportName string
	// CRDs are exported as resources of the APIExport, one APIResourceSchema each.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// PermissionClaims are the provider's own claims, merged with
	// [RequiredPermissionClaims].
	PermissionClaims []apisv1alpha2.PermissionClaim
	// WatchedGVK is the Service API kind the runtime reconciles; it must be served by
	// one of CRDs.
	WatchedGVK schema.GroupVersionKind
}

// Claims are the permission claims of the surface's export: RequiredPermissionClaims
// merged with the provider's own.
func (s Surface) Claims() []apisv1alpha2.PermissionClaim {
	return mergeClaims(RequiredPermissionClaims(), s.PermissionClaims)
}

// SurfaceFunc adapts a function to [Provisionable].
type SurfaceFunc func() (Surface, error)

// APISurface implements [Provisionable].
func (f SurfaceFunc) APISurface() (Surface, error) { return f() }

// FromCRD is the common case: one exported CRD whose storage version is the watched
// kind, and no claims beyond the runtime's own.
func FromCRD(exportName string, crd *apiextensionsv1.CustomResourceDefinition) Provisionable {
	return SurfaceFunc(func() (Surface, error) {
		if crd == nil {
			return Surface{}, errors.New("apiexport.FromCRD: nil CRD")
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: apichange.StorageVersion(crd), Kind: crd.Spec.Names.Kind}
		if gvk.Version == "" {
			return Surface{}, fmt.Errorf("apiexport.FromCRD: CRD %s has no storage version", crd.Name)
		}
		return Surface{ExportName: exportName, CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}, WatchedGVK: gvk}, nil
	})
}

// validate checks what Provision relies on, so a provider's mistake surfaces as one
// clear error at start-up rather than as a kcp validation message.
func (s Surface) validate() error {
	if s.ExportName == "" {
		return errors.New("surface has no export name")
	}
	if len(s.CRDs) == 0 {
		return errors.New("surface has no CRDs")
	}
	watched := false
	for i, crd := range s.CRDs {
		if crd == nil {
			return fmt.Errorf("surface CRD %d is nil", i)
		}
		if crd.Spec.Group != s.WatchedGVK.Group || crd.Spec.Names.Kind != s.WatchedGVK.Kind {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == s.WatchedGVK.Version && v.Served {
				watched = true
			}
		}
	}
	if !watched {
		return fmt.Errorf("watched kind %s is not served by any of the surface's CRDs", s.WatchedGVK)
	}
	return nil
}
