#!/usr/bin/env bash
# Builds the real servers the tests start (kcp with its cache server and front-proxy,
# kube-apiserver, etcd, kubectl, the openmcp-operator, Flux's controllers, helm and the
# registry) into the cache outside the repository, or finds them there, and prints as
# its last line the folder holding them, for example:
#   KSP_TEST_ASSETS=/root/.cache/kcp-serviceprovider/assets/3f2a...
# An argument builds one part only: kcp, kube, cluster, operator or flux.
#
# The recipe is Go code of the module, internal/testservers, so that a provider in its
# own repository runs the same one: go run
# github.com/openmcp-project/kcp-serviceprovider/cmd/kcp-serviceprovider-servers.
#
# Environment:
#   KSP_CACHE_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./cmd/kcp-serviceprovider-servers "$@"
