#!/usr/bin/env bash
# Builds egressd's container image (Dockerfile) with buildah, offline from registries:
# the debian:bookworm base is made with debootstrap from apt's own mirror, once.
#   tools/image.sh [TAG]     # default egressd:latest; prints the image's size
# Needs root. Installs buildah, podman, runc and debootstrap first.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-egressd:latest}"
tools/install_deps.sh buildah podman runc debootstrap

base="docker.io/library/debian:bookworm"  # what the Dockerfile's FROM resolves to
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
  # The mirror apt uses for bookworm itself (deb822 stanzas, or one-line sources).
  mirror="$(awk '/^URIs:/ { uri = $2 } /^Suites:.*[ ]bookworm( |$)/ { print uri; exit }' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [[ -n "$mirror" ]] || mirror="$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' \
    /etc/apt/sources.list 2>/dev/null || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  echo "=== debootstrap --variant=minbase bookworm from $mirror, as $base"
  container="$(buildah from scratch)"
  rootfs="$(buildah mount "$container")"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > /dev/null
  # What an image needs no copy of: downloaded packages, package lists, docs, locales.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/{doc,man,info,locale}/*
  buildah umount "$container" > /dev/null
  buildah commit -q "$container" "$base" > /dev/null
  buildah rm "$container" > /dev/null
fi

echo "=== buildah bud -t $tag"
buildah bud --isolation chroot --pull=never --network host --layers -t "$tag" -f Dockerfile .
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag"
