// Package conversion serves the conversion webhook of a Service API whose versions have
// different schemas, for the onboarding cluster's CRD and for the kcp schema alike.
//
// The provider brings the conversions as Go code, in controller-runtime's pattern: one
// version is the hub (conversion.Hub), every other converts to and from it
// (conversion.Convertible). The runtime does the rest:
//
//   - init keeps the webhook's serving certificate in a Secret in the provider's
//     namespace on the platform cluster ([EnsureCertificate]; openMCP's own
//     controller-utils generates it, self-signed, like the operator's webhooks), and
//     installs the CRD with conversion Webhook, the URL and the certificate as its CA
//     bundle ([Configure]);
//   - the runtime's Start (builder.Options.Conversion, which run fills in) reads the
//     same Secret and serves the webhook ([Start]) for as long as it runs, in every
//     mode, and provisions the kcp schema from the CRD configured the same way, so
//     kcp's bound CRDs call the same URL (kcp has no Service references for webhooks,
//     only URLs).
//
// Every replica serves with the same certificate, so the API servers may call any of
// them; the CA bundle in the CRD and in the schema changes only when the Secret is
// replaced, which for kcp means a new schema and a move of every binding.
package conversion
