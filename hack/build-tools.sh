#!/usr/bin/env bash
# Build the end-to-end suite's control plane (kube-apiserver, etcd) and helm from the pinned Go
# modules in hack/kapi and hack/helm, into a cache folder outside the checkout keyed by the hash
# of the go.sum files. Does nothing when that folder already holds every binary.
#
#   hack/build-tools.sh          build (or reuse) and print the folder
#   hack/build-tools.sh --check  print the folder if it is built, else exit 3 (builds nothing)
#   KARTA_TOOLS_DIR=DIR          build into (and the tests look in) DIR instead
#
# Test infrastructure only: the product is Python. Nothing built here is committed or shipped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
key="$(cat "$here/kapi/go.sum" "$here/kapi/go.mod" "$here/helm/go.sum" "$here/helm/go.mod" | sha256sum | cut -c1-16)"
out="${KARTA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karta-webhook/tools-$key}"
want=(kube-apiserver etcd helm)
have=1
for b in "${want[@]}"; do [[ -x "$out/$b" ]] || have=0; done
if [[ $have == 1 ]]; then echo "$out"; exit 0; fi
if [[ "${1:-}" == --check ]]; then echo "build-tools: $out is not built" >&2; exit 3; fi
command -v go >/dev/null || { echo "build-tools: no 'go' on PATH (Go 1.26 is needed to build the e2e control plane)" >&2; exit 2; }
mkdir -p "$out.tmp"
start=$(date +%s)
V=v1.37.2
LD="-s -w -X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitVersion=$V"
( cd "$here/kapi"
  go build -trimpath -pgo=off -ldflags "$LD" -o "$out.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3 ) >&2
( cd "$here/helm"
  go build -trimpath -ldflags "-s -w" -o "$out.tmp/helm" helm.sh/helm/v4/cmd/helm ) >&2
rm -rf "$out"; mv "$out.tmp" "$out"
echo "build-tools: built ${want[*]} in $(( $(date +%s) - start )) s into $out" >&2
echo "$out"
