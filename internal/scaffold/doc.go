// Package scaffold starts a new provider module from this module's template, as gonew
// does for a template module: it copies template/ (a provider that compiles as part of
// this module, so vet, lint and TestScratchProvider keep it working) with its import
// path, API group and provider name rewritten, renders the files a module of its own
// needs (go.mod with the runtime's test servers and image builder as tools, a Makefile
// with test, run, generate and image, .ci/run, an end-to-end test on testkit, a README),
// and runs go mod tidy. cmd/kcp-serviceprovider-new runs it.
//
// The template's kinds (Note, NoteConfig) stay as they are: renaming a Go type is the
// author's first edit, and a textual rename of kinds would reach into words it should
// not.
package scaffold
