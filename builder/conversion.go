// One file, one idea: the Service API's conversion webhook, served for as long as the
// runtime runs, in every mode.

package builder

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
)

// ConversionWebhook serves a Service API whose versions have different schemas: the
// onboarding cluster's API server and kcp call it to convert an object between
// versions. The command's init makes its certificate (Secret
// <provider>-conversion-webhook in the provider's namespace on the platform cluster)
// and points the onboarding CRD at URL; Start reads the certificate, serves the
// webhook and points the kcp schema at the same URL.
type ConversionWebhook struct {
	// Scheme holds the Go types of every version of the Service API, one the hub
	// (controller-runtime's conversion.Hub) and the others convertible to it
	// (conversion.Convertible).
	Scheme *runtime.Scheme
	// URL is where the API servers reach the webhook: https, a DNS name the
	// certificate names, and the path it is served on (e.g.
	// https://echo-conversion.example.com/convert).
	URL string
	// BindAddress is where the webhook listens (host:port). Default ":9443".
	BindAddress string
}

// serveConversion starts the webhook of opts.Conversion. It returns a context that ends
// when the webhook stops, and the kcp surface with its Service API converting through
// the webhook (nil when surface is nil).
func (r *Runtime[T]) serveConversion(ctx context.Context, opts Options, surface apiexport.Provisionable) (context.Context, apiexport.Provisionable, error) {
	w := opts.Conversion
	if w.Scheme == nil {
		return ctx, nil, errors.New("Options.Conversion: no Scheme holds the Service API's versions")
	}
	if opts.Namespace == "" {
		return ctx, nil, errors.New("Options.Conversion: the webhook's certificate is kept in the provider's namespace, and Options.Namespace is empty")
	}
	bind := w.BindAddress
	if bind == "" {
		bind = ":9443"
	}
	cfg := rest.CopyConfig(opts.Platform)
	opts.tune(cfg)
	platform, err := client.New(cfg, client.Options{})
	if err != nil {
		return ctx, nil, fmt.Errorf("platform client: %w", err)
	}
	endpoint := conversion.Endpoint{URL: w.URL, Secret: types.NamespacedName{Namespace: opts.Namespace, Name: conversion.SecretName(r.decl.name)}}
	served, caBundle, err := conversion.Start(ctx, log.FromContext(ctx), platform, endpoint, bind, w.Scheme)
	if err != nil {
		return ctx, nil, err
	}
	if surface == nil {
		return served, nil, nil
	}
	converting := convertingSurface(surface, w.Scheme, w.URL, caBundle)
	if _, err := converting.APISurface(); err != nil {
		return ctx, nil, err
	}
	return served, converting, nil
}

// convertingSurface is surface with the CRD of its watched kind converting through the
// webhook at url, trusting caBundle, after a check that scheme converts every version
// of it. The provider's CRD is copied, not changed.
func convertingSurface(surface apiexport.Provisionable, scheme *runtime.Scheme, url string, caBundle []byte) apiexport.Provisionable {
	return apiexport.SurfaceFunc(func() (apiexport.Surface, error) {
		s, err := surface.APISurface()
		if err != nil {
			return s, err
		}
		crds := make([]*apiextensionsv1.CustomResourceDefinition, len(s.CRDs))
		for i, crd := range s.CRDs {
			if crd != nil && crd.Spec.Group == s.WatchedGVK.Group && crd.Spec.Names.Kind == s.WatchedGVK.Kind {
				if err := conversion.Check(scheme, crd); err != nil {
					return s, fmt.Errorf("Options.Conversion: %w", err)
				}
				crd = crd.DeepCopy()
				conversion.Configure(crd, url, caBundle)
			}
			crds[i] = crd
		}
		s.CRDs = crds
		return s, nil
	})
}
