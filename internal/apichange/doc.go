// Package apichange is the pre-flight check of a Service API change: it compares the
// CRD a cluster serves with the one a new binary brings, version by version, and
// says what the change is and whether it may be applied. init runs it before it
// replaces a CRD; a refusal leaves the served CRD as it was, so the running replicas
// keep serving.
//
// The rules, and why each one protects stored objects: docs/design/api-upgrades.md.
package apichange
