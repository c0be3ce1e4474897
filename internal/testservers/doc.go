// Package testservers builds the real servers that the tests, testkit and the local
// platform start, and finds them once built: kcp v0.30.0 (patched, see
// modules/kcp/patches) with its cache-server and kcp-front-proxy, kube-apiserver,
// kubectl and etcd, the openmcp-operator, Flux's source-controller and helm-controller
// with their CRDs, the helm CLI and the CNCF distribution registry.
//
// Each server comes from a pinned Go module: modules/<name>/go.mod.txt and go.sum.txt
// are the go.mod and go.sum of a module that requires it (kept as text so that they are
// part of this module, and of its zip, rather than modules of their own). The binaries
// go into a cache outside any repository, $KSP_CACHE_DIR or
// $XDG_CACHE_HOME/kcp-serviceprovider, in folders keyed by a hash of those files, so
// this repository, a provider's own repository and a CI machine share one build, and a
// pin that changes builds anew. Ensure builds what is missing (20 to 40 minutes on two
// cores, once) and returns the folder that KSP_TEST_ASSETS names; a warm cache answers
// at once. cmd/kcp-serviceprovider-servers and hack/test-binaries.sh run it.
package testservers
