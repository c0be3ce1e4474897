#!/usr/bin/env bash
# Builds the real servers the tests start (kcp with its cache server and front-proxy,
# kube-apiserver, etcd, kubectl) and the real openmcp-operator from the tools modules
# under hack/tools/, into a cache folder outside the repository keyed by each tools
# module's go.sum. A warm machine skips the build entirely.
#
# Prints, as its last line, the folder holding the binaries, for example:
#   KSP_TEST_ASSETS=/root/.cache/kcp-serviceprovider/assets/3f2a...
#
# Environment:
#   KSP_CACHE_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider)
#
# A cold build runs in two lanes at once, kcp's in one and everything else in the
# other: each `go build` compiles on both cores but links its binaries one core each,
# so a lane linking (a minute or more for kcp and kube-apiserver) leaves a core to the
# other lane's compiles. Each lane builds a tools module's binaries in one `go build`,
# which compiles their shared packages once and links them side by side (a link peaks
# at about 2.5 GB; the machines here have 24). The modules of every lane are downloaded
# first, all at once, so that no compile waits on the network.
set -euo pipefail

# Everything runs inside main so that bash has parsed the whole file before the long
# builds start: editing this file during a build cannot break the running one.
main() {
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KSP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider}

# The forks' pseudo-versions are not in the checksum database; the committed go.sum
# files pin them instead.
export GONOSUMDB=${GONOSUMDB:-github.com/kcp-dev}
export GOFLAGS=-mod=mod

# Bump when the build recipe below changes, so cached binaries are rebuilt.
recipe=2
key() { { cat "$repo/hack/tools/$1/go.mod" "$repo/hack/tools/$1/go.sum" "$repo/hack/tools/$1"/patches/*.patch 2>/dev/null; echo "$recipe"; } | sha256sum | cut -c1-16; }

kcp_dir="$cache/kcp-$(key kcp)"
# kcp's cache server and front-proxy, for a sharded kcp (localenv's KCPOptions.Shards).
# A folder of their own, so that adding them did not rebuild kcp.
kcp_sharding_dir="$cache/kcp-sharding-$(key kcp)"
kube_dir="$cache/kube-$(key kube)"
operator_dir="$cache/operator-$(key operator)"
# Flux's source-controller and helm-controller with their CRDs, the helm CLI and the
# OCI registry: one folder keyed by the three tools modules.
flux_key=$({ key flux-source; key flux-helm; key registry; } | sha256sum | cut -c1-16)
flux_dir="$cache/flux-$flux_key"
assets="$cache/assets/$(key kcp)-$(key kube)-$(key operator)-$flux_key"

log() { echo "test-binaries: $*" >&2; }

# timed NAME CMD... runs CMD and says how long it took, so that a cold run's log shows
# what each step costs.
timed() {
  local name=$1 start=$SECONDS; shift
  "$@"
  local took=$((SECONDS - start))
  [ "$took" -gt 1 ] && log "$name: $((took / 60)) min $((took % 60)) s"
  return 0
}

# download_all fetches the modules of every tools module at once (network, not CPU).
download_all() {
  local m pids=()
  for m in kcp kube operator flux-source flux-helm registry; do
    (cd "$repo/hack/tools/$m" && go mod download) &
    pids+=($!)
  done
  local p
  for p in "${pids[@]}"; do wait "$p"; done
}

# build_kcp_cmds OUT CMD... builds kcp v0.30.0's commands CMD (under cmd/) into the
# folder OUT: kcp's source with hack/tools/kcp/patches/ applied (each file says why),
# built through a copy of the tools module that replaces kcp with it. With -trimpath
# the source's folder is not part of the build cache's keys, so a second call reuses
# the packages the first compiled.
build_kcp_cmds() {
  local out=$1; shift
  local ver="v1.34.2+kcp-v0.30.0" date
  date=$(date -u +'%Y-%m-%dT%H:%M:%SZ')
  local ld=""
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld+=" -X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=34"
    ld+=" -X $pkg.gitCommit=v0.30.0 -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  rm -rf "$out.tmp" && mkdir -p "$out.tmp/mod"
  local src patched="$out.tmp/src"
  (cd "$repo/hack/tools/kcp" && go mod download github.com/kcp-dev/kcp)
  src=$(cd "$repo/hack/tools/kcp" && go list -m -f '{{.Dir}}' github.com/kcp-dev/kcp)
  cp -r "$src" "$patched" && chmod -R u+w "$patched"
  for p in "$repo"/hack/tools/kcp/patches/*.patch; do
    [ -e "$p" ] || continue
    log "applying $(basename "$p")"
    if command -v patch >/dev/null; then
      patch -d "$patched" -p1 --quiet --forward < "$p"
    else
      (cd "$patched" && git apply -p1 "$p")
    fi
  done
  cp "$repo/hack/tools/kcp/go.mod" "$repo/hack/tools/kcp/go.sum" "$out.tmp/mod/"
  go mod edit -replace "github.com/kcp-dev/kcp=$patched" "$out.tmp/mod/go.mod"
  local cmd pkgs=()
  for cmd in "$@"; do pkgs+=("github.com/kcp-dev/kcp/cmd/$cmd"); done
  (cd "$repo/hack/tools/kcp" && go build -modfile="$out.tmp/mod/go.mod" -trimpath -ldflags "-s -w $ld" -o "$out.tmp/" "${pkgs[@]}")
  rm -rf "$out.tmp/src" "$out.tmp/mod"
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# build_kcp builds kcp and, for a sharded kcp (localenv's KCPOptions.Shards), its
# cache-server and kcp-front-proxy: in one go build when both folders are missing.
build_kcp() {
  local have_kcp=0 have_sharding=0
  [ -x "$kcp_dir/kcp" ] && have_kcp=1
  [ -x "$kcp_sharding_dir/cache-server" ] && [ -x "$kcp_sharding_dir/kcp-front-proxy" ] && have_sharding=1
  if [ $have_kcp = 0 ] && [ $have_sharding = 0 ]; then
    log "building kcp v0.30.0 (patched, see hack/tools/kcp/patches) with its cache-server and kcp-front-proxy into $kcp_dir and $kcp_sharding_dir"
    build_kcp_cmds "$kcp_dir.all" kcp cache-server kcp-front-proxy
    rm -rf "$kcp_sharding_dir" && mkdir -p "$kcp_sharding_dir.tmp"
    mv "$kcp_dir.all/cache-server" "$kcp_dir.all/kcp-front-proxy" "$kcp_sharding_dir.tmp/"
    mv "$kcp_sharding_dir.tmp" "$kcp_sharding_dir"
    rm -rf "$kcp_dir" && mv "$kcp_dir.all" "$kcp_dir"
  elif [ $have_kcp = 0 ]; then
    log "building kcp v0.30.0 (patched, see hack/tools/kcp/patches) into $kcp_dir"
    build_kcp_cmds "$kcp_dir" kcp
  elif [ $have_sharding = 0 ]; then
    log "building kcp v0.30.0's cache-server and kcp-front-proxy into $kcp_sharding_dir"
    build_kcp_cmds "$kcp_sharding_dir" cache-server kcp-front-proxy
  fi
}

build_kube() {
  [ -x "$kube_dir/kube-apiserver" ] && [ -x "$kube_dir/etcd" ] && [ -x "$kube_dir/kubectl" ] && return 0
  log "building kube-apiserver, kubectl v1.36.0 and etcd v3.6.8 into $kube_dir"
  local ver="v1.36.0" date
  date=$(date -u +'%Y-%m-%dT%H:%M:%SZ')
  local ld=""
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld+=" -X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
    ld+=" -X $pkg.gitCommit=v1.36.0 -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  rm -rf "$kube_dir.tmp" && mkdir -p "$kube_dir.tmp"
  # One build: etcd ignores the version variables, which it does not have; go build
  # names its binary after the module's last element before the major version.
  (
    cd "$repo/hack/tools/kube"
    go build -trimpath -ldflags "-s -w $ld" -o "$kube_dir.tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl go.etcd.io/etcd/server/v3
  )
  mv "$kube_dir.tmp/server" "$kube_dir.tmp/etcd"
  rm -rf "$kube_dir" && mv "$kube_dir.tmp" "$kube_dir"
}

build_operator() {
  [ -x "$operator_dir/openmcp-operator" ] && return 0
  log "building openmcp-operator v1.3.0 into $operator_dir"
  mkdir -p "$operator_dir.tmp"
  (cd "$repo/hack/tools/operator" && go build -trimpath -ldflags "-s -w" -o "$operator_dir.tmp/openmcp-operator" github.com/openmcp-project/openmcp-operator/cmd/openmcp-operator)
  rm -rf "$operator_dir" && mv "$operator_dir.tmp" "$operator_dir"
}

build_flux() {
  [ -x "$flux_dir/source-controller" ] && [ -x "$flux_dir/helm-controller" ] && [ -x "$flux_dir/helm" ] && [ -x "$flux_dir/registry" ] && return 0
  log "building Flux source-controller v1.9.3, helm-controller v1.6.2, helm v4.2.2 and registry v3.1.2 into $flux_dir"
  rm -rf "$flux_dir.tmp" && mkdir -p "$flux_dir.tmp/crds"
  local src
  (
    cd "$repo/hack/tools/flux-source"
    go build -trimpath -ldflags "-s -w" -o "$flux_dir.tmp/source-controller" github.com/fluxcd/source-controller
    src=$(go list -m -f '{{.Dir}}' github.com/fluxcd/source-controller)
    cp "$src"/config/crd/bases/*.yaml "$flux_dir.tmp/crds/"
  )
  (
    cd "$repo/hack/tools/flux-helm"
    go build -trimpath -ldflags "-s -w" -o "$flux_dir.tmp/" github.com/fluxcd/helm-controller helm.sh/helm/v4/cmd/helm
    src=$(go list -m -f '{{.Dir}}' github.com/fluxcd/helm-controller)
    cp "$src"/config/crd/bases/*.yaml "$flux_dir.tmp/crds/"
  )
  (cd "$repo/hack/tools/registry" && go build -trimpath -ldflags "-s -w" -o "$flux_dir.tmp/registry" github.com/distribution/distribution/v3/cmd/registry)
  chmod -R u+w "$flux_dir.tmp/crds"
  rm -rf "$flux_dir" && mv "$flux_dir.tmp" "$flux_dir"
}

case "${1:-all}" in
  kcp) timed kcp build_kcp ;;
  kube) timed kube build_kube ;;
  operator) timed operator build_operator ;;
  flux) timed flux build_flux ;;
  all)
    if ! [ -x "$kcp_dir/kcp" ] || ! [ -x "$kcp_sharding_dir/kcp-front-proxy" ] || ! [ -x "$kube_dir/kube-apiserver" ] ||
      ! [ -x "$operator_dir/openmcp-operator" ] || ! [ -x "$flux_dir/registry" ]; then
      timed "module downloads" download_all
      # The lanes: kcp's (the longest build) beside all the others. Each is a
      # subshell under set -e, so a failed build stops its lane before anything is
      # moved into the cache.
      local kcp_lane rest_lane failed=0
      (timed kcp build_kcp) &
      kcp_lane=$!
      (timed kube build_kube; timed operator build_operator; timed flux build_flux) &
      rest_lane=$!
      wait "$kcp_lane" || failed=1
      wait "$rest_lane" || failed=1
      [ "$failed" = 0 ] || { log "a build failed (its output is above)"; exit 1; }
    fi
    ;;
  *) echo "usage: $0 [all|kcp|kube|operator|flux]" >&2; exit 2 ;;
esac

# One folder with every binary, in the layout controller-runtime's envtest expects
# (KUBEBUILDER_ASSETS), plus kcp, openmcp-operator and Flux (its CRDs under flux-crds/).
if [ -x "$kcp_dir/kcp" ] && [ -x "$kcp_sharding_dir/kcp-front-proxy" ] && [ -x "$kube_dir/kube-apiserver" ] && [ -x "$operator_dir/openmcp-operator" ] && [ -x "$flux_dir/registry" ]; then
  mkdir -p "$assets"
  for b in "$kcp_dir/kcp" "$kcp_sharding_dir/cache-server" "$kcp_sharding_dir/kcp-front-proxy" \
    "$kube_dir/kube-apiserver" "$kube_dir/etcd" "$kube_dir/kubectl" "$operator_dir/openmcp-operator" \
    "$flux_dir/source-controller" "$flux_dir/helm-controller" "$flux_dir/helm" "$flux_dir/registry"; do
    ln -sf "$b" "$assets/$(basename "$b")"
  done
  ln -sfn "$flux_dir/crds" "$assets/flux-crds"
  echo "KSP_TEST_ASSETS=$assets"
fi
}

main "$@"
