#!/usr/bin/env bash
# Build the karta-webhook image with podman, from nothing on a Debian machine without a
# registry, reusing what is cached: podman, buildah, skopeo, runc and mmdebstrap from apt (when
# missing); a Debian minbase with Python made by mmdebstrap from the archive apt uses, imported
# as localhost/karta-base:bookworm (once); the image from the Dockerfile; `podman save` of it to
# an OCI archive; and the image's `pip list` and Debian package list beside it.
#
#   hack/build-image.sh           build (or reuse) and print the image name
#   hack/build-image.sh --check   print the image name if it is built from this checkout's
#                                 Dockerfile, constraints.txt, pyproject.toml, README.md,
#                                 webhook/ and catalog/, else exit 3 (builds nothing)
#   KARTA_IMAGE=NAME:TAG          the image's name (default ghcr.io/karta-webhook/karta-webhook
#                                 tagged with pyproject.toml's version)
#   KARTA_BASE_IMAGE=IMAGE        build on IMAGE (e.g. python:3.11-slim, pulled) instead
#   KARTA_IMAGE_DIR=DIR           where the base tar, the archive and the lists go (default
#                                 ~/.cache/karta-webhook/image)
#   CONTAINERS_CONF               podman's settings (default hack/containers.conf: what the
#                                 host forces, runc, cgroupfs, ulimits)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd -P)"
root="$(dirname "$here")"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/pyproject.toml")"
image="${KARTA_IMAGE:-ghcr.io/karta-webhook/karta-webhook:$version}"
dir="${KARTA_IMAGE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karta-webhook/image}"
base_name=localhost/karta-base:bookworm
base="${KARTA_BASE_IMAGE:-$base_name}"
log() { echo "build-image: $*" >&2; }

# What the image is built from: its key is a label of the image, so an image built from other
# sources (or on another base) is rebuilt.
key="$(cd "$root" && {
  echo "$base"
  find Dockerfile .dockerignore constraints.txt pyproject.toml README.md webhook catalog \
    -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-16)"
current() {
  command -v podman > /dev/null &&
    [[ "$(podman image inspect --format '{{index .Labels "karta.build-key"}}' "$image" 2>/dev/null)" == "$key" ]]
}
if [[ "${1:-}" == --check ]]; then
  current || { log "$image is not built from this checkout (run hack/build-image.sh)"; exit 3; }
  echo "$image"; exit 0
fi
archive="$dir/karta-webhook-$version.oci.tar"
if current && [[ -f "$archive" && "$(cat "$archive.key" 2>/dev/null)" == "$key" ]]; then
  echo "$image"; exit 0
fi
mkdir -p "$dir"
start=$(date +%s)

# 1. The tools, from the archive apt uses.
need=()
for cmd in podman buildah skopeo runc mmdebstrap newuidmap fuse-overlayfs iptables; do
  command -v "$cmd" > /dev/null || need+=("$cmd")
done
if (( ${#need[@]} )); then
  command -v apt-get > /dev/null || { log "missing ${need[*]} and no apt-get: install podman, buildah, skopeo, runc and mmdebstrap"; exit 2; }
  [[ $(id -u) == 0 ]] || { log "missing ${need[*]}: run as root to install them with apt-get"; exit 2; }
  log "installing podman, buildah, skopeo, runc, mmdebstrap (missing: ${need[*]})"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    podman buildah skopeo runc crun conmon netavark aardvark-dns catatonit uidmap \
    fuse-overlayfs slirp4netns iptables mmdebstrap umoci ca-certificates > /dev/null
fi

# 2. The base: Debian minbase with python3 (and venv for the build stages) from the archive
# apt uses, docs, man pages and locales left out; kept as a tar until deleted (delete it,
# and `podman rmi localhost/karta-base:bookworm`, to make a new one from the archive's current
# packages).
if [[ -z "${KARTA_BASE_IMAGE:-}" ]] && ! podman image exists "$base_name"; then
  tar="$dir/base-bookworm.tar"
  if [[ ! -s "$tar" ]]; then
    # The Debian archives apt uses (deb822 URIs: lines or one-line deb entries).
    uris="$({ grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources || true
              grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list || true; } |
            grep -o 'https\?://[^ ]*' || true)"
    mirror="$(grep -m 1 'debian/\?$' <<< "$uris" || echo http://deb.debian.org/debian)"
    security="$(grep -m 1 'debian-security/\?$' <<< "$uris" || echo http://deb.debian.org/debian-security)"
    log "making the base with mmdebstrap from $mirror (a few minutes)"
    # The merged-usr hook makes the /usr merge itself: without it apt pulls in usrmerge, and
    # with it the whole of perl (50 MB).
    mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --include=python3,python3-venv,ca-certificates \
      --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
      bookworm "$tar.tmp" \
      "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $security bookworm-security main" >&2
    mv "$tar.tmp" "$tar"
  fi
  podman import --quiet --change 'CMD ["/bin/bash"]' "$tar" "$base_name" > /dev/null
  log "imported $tar as $base_name"
fi

# 3. The image (podman's layer cache makes an unchanged step instant), its archive and lists.
# The host's CA bundle is mounted into the build only, so pip trusts what the host trusts.
ca=()
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && ca=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
podman build --quiet --format docker "${ca[@]}" --build-arg "BASE_IMAGE=$base" \
  --label "karta.build-key=$key" --label "org.opencontainers.image.version=$version" \
  -t "$image" "$root" > /dev/null
podman save --quiet --format oci-archive -o "$archive.tmp" "$image"
mv "$archive.tmp" "$archive"
echo "$key" > "$archive.key"
for list in pip-list dpkg-list; do
  podman run --rm --no-healthcheck --entrypoint cat "$image" "/opt/karta-webhook/share/$list.txt" > "$dir/$list.txt"
done
size=$(podman image inspect --format '{{.Size}}' "$image")
log "built $image ($(( size / 1000000 )) MB; $(wc -l < "$dir/pip-list.txt") Python distributions) in $(( $(date +%s) - start )) s; archive $archive"
echo "$image"
