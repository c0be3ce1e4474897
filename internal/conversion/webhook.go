package conversion

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/openmcp-project/controller-utils/pkg/init/webhooks"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// Endpoint is where the API servers reach the webhook, and where its certificate is
// kept.
type Endpoint struct {
	// URL is the webhook's address as the API servers call it: https, a host the
	// certificate names, the path the runtime serves it on (e.g.
	// https://echo-conversion.example.com/convert). The onboarding cluster and kcp
	// both call it, so it must be reachable from both.
	URL string
	// Secret holds the serving certificate (tls.crt, tls.key), in the provider's
	// namespace on the platform cluster.
	Secret types.NamespacedName
}

// SecretName is the name of the Secret that holds the certificate of the webhook of the
// provider called provider, in its namespace on the platform cluster: init writes it,
// every replica's runtime reads it.
func SecretName(provider string) string { return provider + "-conversion-webhook" }

// parse checks the URL and returns it.
func (e Endpoint) parse() (*url.URL, error) {
	u, err := url.Parse(e.URL)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook URL %q: %w", e.URL, err)
	}
	if u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("conversion webhook URL %q: want https://<host>[:port]/<path>", e.URL)
	}
	if net.ParseIP(u.Hostname()) != nil {
		// openMCP's certificate generator names DNS names only.
		return nil, fmt.Errorf("conversion webhook URL %q: want a DNS name, not an IP address (the certificate names DNS names)", e.URL)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// EnsureCertificate creates the webhook's certificate in its Secret unless the Secret
// already holds one, and returns the certificate (PEM), the CA bundle the CRD and the
// kcp schema carry. A Secret made for another host is an error, not replaced: every
// CRD and schema that trusts it would have to change with it.
func EnsureCertificate(ctx context.Context, c client.Client, e Endpoint) ([]byte, error) {
	u, err := e.parse()
	if err != nil {
		return nil, err
	}
	err = webhooks.GenerateCertificate(ctx, c,
		webhooks.WithWebhookSecret(e.Secret),
		// The Service names only make the certificate's first names; the URL's host
		// is what the API servers check.
		webhooks.WithWebhookService(e.Secret),
		webhooks.WithAdditionalDNSNames{u.Hostname()})
	if err != nil {
		return nil, fmt.Errorf("conversion webhook certificate in Secret %s: %w", e.Secret, err)
	}
	_, bundle, err := LoadCertificate(ctx, c, e)
	return bundle, err
}

// LoadCertificate reads the webhook's certificate from its Secret and checks that it
// names the URL's host and is valid now. It returns the serving certificate and its
// PEM, the CA bundle.
func LoadCertificate(ctx context.Context, c client.Client, e Endpoint) (tls.Certificate, []byte, error) {
	u, err := e.parse()
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, e.Secret, s); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("reading the conversion webhook's Secret %s (init creates it): %w", e.Secret, err)
	}
	certPEM, keyPEM := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("conversion webhook's Secret %s: %w", e.Secret, err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return tls.Certificate{}, nil, fmt.Errorf("conversion webhook's Secret %s: tls.crt holds no PEM certificate", e.Secret)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("conversion webhook's Secret %s: %w", e.Secret, err)
	}
	if err := leaf.VerifyHostname(u.Hostname()); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("conversion webhook's Secret %s was made for another host (%w): delete it and run init again", e.Secret, err)
	}
	if now := time.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return tls.Certificate{}, nil, fmt.Errorf("conversion webhook's Secret %s holds a certificate valid from %s to %s: delete it and run init again", e.Secret, leaf.NotBefore, leaf.NotAfter)
	}
	cert.Leaf = leaf
	return cert, certPEM, nil
}

// Configure makes crd convert between its versions through the webhook at url,
// trusting caBundle. It changes nothing for a CRD of one version: there is nothing to
// convert, and kcp refuses a schema of one version with a conversion.
func Configure(crd *apiextensionsv1.CustomResourceDefinition, url string, caBundle []byte) {
	if len(crd.Spec.Versions) < 2 {
		return
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
		},
	}
}

// Check reports whether scheme can convert every version of crd: each is registered,
// and one is the hub and the others convert to it.
func Check(scheme *runtime.Scheme, crd *apiextensionsv1.CustomResourceDefinition) error {
	var errs []error
	for _, v := range crd.Spec.Versions {
		obj, err := scheme.New(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
		if err != nil {
			errs = append(errs, fmt.Errorf("version %s: %w", v.Name, err))
			continue
		}
		if len(crd.Spec.Versions) < 2 {
			continue
		}
		ok, err := crconversion.IsConvertible(scheme, obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("version %s: %w", v.Name, err))
		} else if !ok {
			errs = append(errs, fmt.Errorf("version %s: neither the hub nor convertible to it", v.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("converting %s: %w", crd.Name, err)
	}
	return nil
}

// Start reads the certificate init made (LoadCertificate) and serves the webhook with
// it in the background (Serve). It returns the CA bundle the CRD and the kcp schema
// carry, and a context derived from ctx that ends when the webhook stops, with the
// reason as its cause: a runtime that goes on serving without its webhook would leave
// every client of the other versions failing.
func Start(ctx context.Context, log logr.Logger, c client.Client, e Endpoint, bindAddress string, scheme *runtime.Scheme) (context.Context, []byte, error) {
	cert, caBundle, err := LoadCertificate(ctx, c, e)
	if err != nil {
		return ctx, nil, err
	}
	served, stop := context.WithCancelCause(ctx)
	go func() {
		err := Serve(served, bindAddress, e.URL, cert, scheme)
		if err == nil {
			err = errors.New("the conversion webhook stopped")
		}
		if served.Err() == nil {
			log.Error(err, "conversion webhook")
		}
		stop(err)
	}()
	log.Info("serving the Service API's conversion webhook", "address", bindAddress, "url", e.URL)
	return served, caBundle, nil
}

// Serve serves the webhook on bindAddress (host:port) with cert, converting through
// scheme's types, at the path of url, until ctx ends.
func Serve(ctx context.Context, bindAddress, url string, cert tls.Certificate, scheme *runtime.Scheme) error {
	u, err := Endpoint{URL: url}.parse()
	if err != nil {
		return err
	}
	host, portText, err := net.SplitHostPort(bindAddress)
	if err != nil {
		return fmt.Errorf("conversion webhook bind address %q: %w", bindAddress, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("conversion webhook bind address %q: %w", bindAddress, err)
	}
	server := webhook.NewServer(webhook.Options{
		Host: host,
		Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
		}},
	})
	server.Register(u.Path, crconversion.NewWebhookHandler(scheme, crconversion.NewRegistry()))
	if err := server.Start(ctx); err != nil {
		return fmt.Errorf("serving the conversion webhook on %s: %w", bindAddress, err)
	}
	return nil
}
