#!/usr/bin/env bash
# Makes a local stand-in for python:3.11-slim from Debian packages, for machines that reach
# package repositories but no image registry: a bookworm minbase with python3 and
# python3-venv, and a venv at /usr/local so that `python` and `pip` are in /usr/local/bin,
# where the official slim image has them. Prints the image's name on its last line.
#
# Usage: tests/image/build_base.sh [IMAGE]   (default localhost/context-proxy-base:bookworm)
# Environment: IMAGE_CACHE_DIR (default /var/tmp/context-proxy-image) keeps the root file
# system as a tarball, so the image can be imported again without debootstrap;
# DEBIAN_MIRROR overrides debootstrap's default mirror.
# Needs root, debootstrap and buildah. Reruns are quick: an image already in buildah's
# storage is kept, and a cached tarball is imported without running debootstrap again.
set -euo pipefail

image=${1:-localhost/context-proxy-base:bookworm}
cache=${IMAGE_CACHE_DIR:-/var/tmp/context-proxy-image}
tarball=$cache/base-bookworm.tar

if buildah inspect --type image "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  # shellcheck disable=SC2086 # DEBIAN_MIRROR is one optional argument
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" ${DEBIAN_MIRROR:-} >&2
  chroot "$root" /usr/bin/python3 -m venv /usr/local >&2
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
  tar -C "$root" --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
fi

# Import: an empty container, the tarball unpacked into it, the slim image's environment.
container=$(buildah from scratch)
trap 'buildah rm "$container" >/dev/null 2>&1 || true; rm -rf "${root:-}"' EXIT
buildah add --quiet "$container" "$tarball" / >/dev/null
buildah config \
  --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --cmd python3 \
  "$container"
buildah commit --quiet --rm "$container" "$image" >/dev/null
echo "$image"
