#!/usr/bin/env bash
# Builds egressd's container image (Dockerfile) with buildah, offline from registries:
# the debian:bookworm base is made with debootstrap from apt's own mirror, once. The image
# holds the egressd this machine's Bazel builds (-c opt, against Debian 12's libraries).
#   tools/image.sh [TAG]                  # default egressd:latest; prints the image's size
#   EGRESSD=path/to/egressd tools/image.sh  # that binary (built -c opt, not under a sanitizer);
#                                         # otherwise it runs bazel build //service:egressd
# Needs root. Installs buildah, podman, runc and debootstrap first.
set -euo pipefail
egressd="${EGRESSD:+$(realpath "$EGRESSD")}"  # before cd: a path relative to the caller
cd "$(dirname "$0")/.."
tag="${1:-egressd:latest}"
tools/install_deps.sh buildah podman runc debootstrap
if [[ -z "$egressd" ]]; then
  bazel build //service:egressd
  egressd="$(bazel info bazel-bin 2>/dev/null)/service/egressd"
fi
[[ -x "$egressd" ]] || { echo "image.sh: no egressd binary at $egressd" >&2; exit 1; }
# The build context: the binary alone (the Dockerfile copies nothing else).
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
install -m 0755 "$egressd" "$context/egressd"

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
buildah bud --isolation chroot --pull=never --network host --layers -t "$tag" -f Dockerfile "$context"
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag"
