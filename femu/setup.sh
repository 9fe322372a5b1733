#!/usr/bin/env bash
# Installs what the QEMU guest needs on the host (Debian packages) and unpacks a Linux
# 6.12 kernel (Debian's bookworm 6.1 has no ublk) into femu/.cache without installing
# it. Idempotent: does nothing when everything is there. With --apps, also the
# applications of the apps scenario (Exp#11 and Exp#12, `make apps`): sysbench and
# PostgreSQL 15, copied into the guest by build-initramfs.sh --apps.
#
#   femu/setup.sh [--apps]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/.cache"
HOST_PACKAGES=(qemu-system-x86 busybox-static cpio xz-utils fio e2fsprogs linux-perf iproute2)
if [ "${1:-}" = --apps ]; then
    HOST_PACKAGES+=(sysbench postgresql-15)
fi

missing=()
for pkg in "${HOST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "femu/setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$cache"
if ! ls "$cache"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
    # The newest Debian 6.12 kernel the package lists offer.
    pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | cut -d' ' -f1 | sort -V | tail -1)
    if [ -z "$pkg" ]; then
        apt-get update -qq
        pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | cut -d' ' -f1 | sort -V | tail -1)
    fi
    [ -n "$pkg" ] || { echo "femu/setup: no linux-image-6.12 package found" >&2; exit 1; }
    echo "femu/setup: fetching $pkg"
    rm -rf "$cache/deb" "$cache/kernel"
    mkdir -p "$cache/deb"
    (cd "$cache/deb" && apt-get download "$pkg" >/dev/null 2>&1)
    dpkg-deb -x "$cache"/deb/*.deb "$cache/kernel"
    rm -rf "$cache/deb"
fi
