#!/usr/bin/env bash
# Build the end-to-end suite's control plane (kube-apiserver, etcd), its scheduling plane
# (kube-scheduler, kube-controller-manager) and helm from the pinned Go modules in hack/kapi and
# hack/helm, into a cache folder outside the checkout keyed by the hash of the go.sum files; and
# into the same folder upstream's Karta library as a test oracle (karta-oracle, from the pinned
# module in hack/karta-oracle, with upstream's CRD beside it) and the JobSet and LeaderWorkerSet
# controller managers (jobset-manager, lws-manager, from the pinned modules in hack/operators/*,
# with their CRDs and webhook manifests in jobset/ and lws/ beside them), each kept current by a
# stamp of its go.mod, go.sum (and sources) in NAME.key. Does nothing when that folder already
# holds every binary.
#
#   hack/build-tools.sh                build (or reuse) and print the folder
#   hack/build-tools.sh --check        print the folder if the control plane (kube-apiserver,
#                                      etcd, helm) is built, else exit 3 (builds nothing)
#   hack/build-tools.sh --check NAME.. the same for the binaries named (karta-oracle,
#                                      jobset-manager, lws-manager: built from the current
#                                      hack/karta-oracle, hack/operators/*)
#   KARTA_TOOLS_DIR=DIR                build into (and the tests look in) DIR instead
#
# Test infrastructure only: the product is Python. Nothing built here is committed or shipped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
key="$(cat "$here/kapi/go.sum" "$here/kapi/go.mod" "$here/helm/go.sum" "$here/helm/go.mod" | sha256sum | cut -c1-16)"
out="${KARTA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karta-webhook/tools-$key}"
oracle_key="$(cd "$here/karta-oracle" && cat go.mod go.sum *.go | sha256sum | cut -c1-16)"
op_key() { cat "$here/operators/$1/go.mod" "$here/operators/$1/go.sum" | sha256sum | cut -c1-16; }
want=(kube-apiserver etcd helm)
plane=(kube-scheduler kube-controller-manager)  # from hack/kapi, built with the control plane
built() {  # built NAME: is NAME in $out, and current
  [[ -x "$out/$1" ]] || return 1
  case $1 in
    karta-oracle)
      [[ -f "$out/run.ai_kartas.yaml" && "$(cat "$out/karta-oracle.key" 2>/dev/null)" == "$oracle_key" ]] ;;
    jobset-manager|lws-manager)
      [[ "$(cat "$out/$1.key" 2>/dev/null)" == "$(op_key "${1%-manager}")" ]] ;;
  esac
}
# build_operator NAME PACKAGE CRDS WEBHOOK: NAME-manager from hack/operators/NAME, and from its
# module's config/ the CRDs (folder CRDS) and webhook manifests (folder WEBHOOK) into $out/NAME/.
build_operator() {
  local name=$1 pkg=$2 crds=$3 hooks=$4 start src
  start=$(date +%s)
  mkdir -p "$out"
  rm -rf "$out/$name.tmp"; mkdir -p "$out/$name.tmp"
  ( cd "$here/operators/$name"
    go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp/$name-manager" "$pkg"
    src="$(go list -m -f '{{.Dir}}' "${pkg%/cmd}")"
    cp "$src/$crds"/*.yaml "$out/$name.tmp/"
    cp -r "$src/$hooks" "$out/$name.tmp/webhook" ) >&2
  chmod -R u+w "$out/$name.tmp"
  rm -rf "$out/$name"; mv "$out/$name.tmp/$name-manager" "$out/$name-manager"; mv "$out/$name.tmp" "$out/$name"
  op_key "$name" > "$out/$name-manager.key"
  echo "build-tools: built $name-manager in $(( $(date +%s) - start )) s into $out" >&2
}
if [[ "${1:-}" == --check ]]; then
  shift
  (( $# )) || set -- "${want[@]}"
  for b in "$@"; do built "$b" || { echo "build-tools: $out has no current $b" >&2; exit 3; }; done
  echo "$out"; exit 0
fi
have=1
for b in "${want[@]}" "${plane[@]}" karta-oracle jobset-manager lws-manager; do built "$b" || have=0; done
if [[ $have == 1 ]]; then echo "$out"; exit 0; fi
command -v go >/dev/null || { echo "build-tools: no 'go' on PATH (Go 1.26 is needed to build the e2e control plane)" >&2; exit 2; }
have=1
for b in "${want[@]}" "${plane[@]}"; do built "$b" || have=0; done
if [[ $have == 0 ]]; then
  mkdir -p "$out.tmp"
  start=$(date +%s)
  V=v1.37.2
  LD="-s -w -X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitVersion=$V"
  ( cd "$here/kapi"
    go build -trimpath -pgo=off -ldflags "$LD" -o "$out.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
    go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
    for b in "${plane[@]}"; do
      s=$(date +%s)
      go build -trimpath -pgo=off -ldflags "$LD" -o "$out.tmp/$b" "k8s.io/kubernetes/cmd/$b"
      echo "build-tools: built $b in $(( $(date +%s) - s )) s" >&2
    done ) >&2
  ( cd "$here/helm"
    go build -trimpath -ldflags "-s -w" -o "$out.tmp/helm" helm.sh/helm/v4/cmd/helm ) >&2
  rm -rf "$out"; mv "$out.tmp" "$out"
  echo "build-tools: built ${want[*]} ${plane[*]} in $(( $(date +%s) - start )) s into $out" >&2
fi
if ! built karta-oracle; then
  start=$(date +%s)
  mkdir -p "$out"
  ( cd "$here/karta-oracle"
    go build -trimpath -ldflags "-s -w" -o "$out/karta-oracle.tmp" .
    crd="$(go list -m -f '{{.Dir}}' github.com/run-ai/karta)/charts/karta/crds/run.ai_kartas.yaml"
    cp "$crd" "$out/run.ai_kartas.yaml.tmp" && chmod u+w "$out/run.ai_kartas.yaml.tmp" ) >&2
  mv -f "$out/run.ai_kartas.yaml.tmp" "$out/run.ai_kartas.yaml"
  mv -f "$out/karta-oracle.tmp" "$out/karta-oracle"
  echo "$oracle_key" > "$out/karta-oracle.key"
  echo "build-tools: built karta-oracle in $(( $(date +%s) - start )) s into $out" >&2
fi
built jobset-manager || build_operator jobset sigs.k8s.io/jobset config/components/crd/bases config/components/webhook
built lws-manager || build_operator lws sigs.k8s.io/lws/cmd config/crd/bases config/webhook
echo "$out"
