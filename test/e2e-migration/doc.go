// Package e2emigration is the end-to-end test of swapping a live provider from
// opencontrolplane-runtime to this runtime and back, under the real openmcp-operator
// on the local platform. It is a module of its own because the old binary links
// opencontrolplane-runtime, which the product module must not.
package e2emigration
