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

root=
container=
cleanup() {
  if [ -n "$container" ]; then buildah rm "$container" >/dev/null 2>&1 || true; fi
  if [ -n "$root" ] && [ -d "$root" ]; then
    # What a stopped debootstrap may have left mounted in the root (proc, sys) goes first.
    awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT

mkdir -p "$cache/debs"
exec 9>"$cache/base.lock"  # one build of the base at a time (two test runs may start together)
flock 9
if buildah inspect --type image "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
if [ ! -s "$tarball" ]; then
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  # Both stages by hand, so that dpkg skips its fsyncs in the second (it is the slow one);
  # the downloaded packages are kept for the next time.
  # shellcheck disable=SC2086 # DEBIAN_MIRROR is one optional argument
  debootstrap --foreign --variant=minbase --include=python3,python3-venv,ca-certificates \
    --cache-dir="$cache/debs" bookworm "$root" ${DEBIAN_MIRROR:-} >&2
  echo force-unsafe-io > "$root/etc/dpkg/dpkg.cfg.d/debootstrap-unsafe-io"
  chroot "$root" /debootstrap/debootstrap --second-stage >&2
  rm "$root/etc/dpkg/dpkg.cfg.d/debootstrap-unsafe-io"
  chroot "$root" /usr/bin/python3 -m venv /usr/local >&2
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
  tar -C "$root" --one-file-system --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
fi

# Import: an empty container, the tarball unpacked into it, the slim image's environment.
container=$(buildah from scratch)
buildah add --quiet "$container" "$tarball" / >/dev/null
buildah config \
  --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --cmd python3 \
  "$container"
buildah commit --quiet --rm "$container" "$image" >/dev/null
container=
echo "$image"
