#!/usr/bin/env bash
# Collect the CustomResourceDefinitions of the catalog's workload kinds for the end-to-end suite,
# from the Go modules pinned in hack/workload-crds.txt (MODULE VERSION PATH-IN-MODULE a line).
#
#   hack/workload-crds.sh DIR     fetch (or reuse) and print DIR
#
# Each module is fetched with `go mod download` into the Go module cache; only the listed data
# files are read from it (nothing is built or run) and copied into DIR under their base names.
# DIR/.done holds the sha256 of the list once every file is there: a later run with the same
# list does nothing. Files that an earlier list put in DIR (named in DIR/.files) are removed
# first; other files in DIR are left alone. Test infrastructure only: nothing here is committed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
list="$here/workload-crds.txt"
die() { echo "workload-crds: $*" >&2; exit 1; }
[[ $# -eq 1 && -n $1 ]] || die "usage: hack/workload-crds.sh DIR"
out="$1"
sum="$(sha256sum "$list" | cut -d' ' -f1)"
if [[ -f "$out/.done" && "$(cat "$out/.done")" == "$sum" ]]; then echo "$out"; exit 0; fi

command -v go >/dev/null || die "no 'go' on PATH (the CRDs come from the Go module proxy)"
export GOTOOLCHAIN=local GOFLAGS= GOWORK=off GO111MODULE=on
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
rm -f "$out/.done"
if [[ -f "$out/.files" ]]; then
  while IFS= read -r f; do
    if [[ -n $f && $f != */* ]]; then rm -f "$out/$f"; fi
  done <"$out/.files"
fi
: >"$out/.files"

declare -A dirs=() names=()
n=0
while read -r mod ver path rest || [[ -n ${mod:-} ]]; do
  n=$((n + 1))
  [[ -z ${mod:-} || $mod == \#* ]] && continue
  [[ -n ${ver:-} && -n ${path:-} && -z ${rest:-} ]] || die "$list:$n: want MODULE VERSION PATH"
  [[ $path != /* && /$path/ != */../* ]] || die "$list:$n: $mod@$ver: bad path $path"
  key="$mod@$ver"
  if [[ -z ${dirs[$key]:-} ]]; then
    # Outside any module, so that no go.mod or go.work is read or written.
    if ! json="$(cd "$tmp" && go mod download -json "$key" 2>&1)"; then
      err="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' | head -n1 | sed 's/\\[nt]/ /g; s/  */ /g')"
      die "$key: go mod download failed: ${err:-$(printf '%s' "$json" | tr '\n' ' ' | cut -c1-300)}"
    fi
    dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -n $dir && -d $dir ]] || die "$key: go mod download gave no module directory"
    dirs[$key]="$dir"
  fi
  src="${dirs[$key]}/$path"
  base="${path##*/}"
  [[ -f $src ]] || die "$key: no file $path in the module"
  grep -q '^kind: CustomResourceDefinition' "$src" || die "$key: $path is not a CustomResourceDefinition"
  [[ -z ${names[$base]:-} ]] || die "$key: $base: same base name as ${names[$base]}"
  names[$base]="$key"
  install -m 0644 "$src" "$out/.$base.tmp"
  mv -f "$out/.$base.tmp" "$out/$base"
  echo "$base" >>"$out/.files"
done <"$list"

echo "$sum" >"$out/.done.tmp"
mv -f "$out/.done.tmp" "$out/.done"
echo "$out"
