package harness

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// LocalConversionWebhook makes, as init does, the certificate of the conversion webhook
// of the provider called provider, in its namespace on the platform cluster, for a
// webhook on a free local port: the onboarding cluster and kcp call it at the returned
// endpoint's URL (localhost, which the certificate names) and the runtime listens on
// bindAddress. caBundle is what the CRDs pointed at it trust.
func LocalConversionWebhook(ctx context.Context, t testing.TB, platform client.Client, namespace, provider string) (endpoint conversion.Endpoint, bindAddress string, caBundle []byte) {
	t.Helper()
	ports, err := localenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	endpoint = conversion.Endpoint{
		URL:    fmt.Sprintf("https://localhost:%d/convert", ports[0]),
		Secret: types.NamespacedName{Namespace: namespace, Name: conversion.SecretName(provider)},
	}
	if caBundle, err = conversion.EnsureCertificate(ctx, platform, endpoint); err != nil {
		t.Fatal(err)
	}
	return endpoint, fmt.Sprintf("127.0.0.1:%d", ports[0]), caBundle
}
