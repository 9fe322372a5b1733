#!/usr/bin/env bash
# Installs what zapraid's build and tests need on a Debian machine. Idempotent: it checks
# first and does nothing when everything is present.
#
#   scripts/install-deps.sh          # what `make test` and `make demo` need
#
# The Rust toolchain itself (cargo >= 1.95 with rustfmt and clippy) is expected to be on
# the machine: Debian's own rustc is too old, and toolchains cannot be downloaded here.
set -euo pipefail

MIN_RUST_MINOR=95

# Debian packages the build needs: a C compiler and make for crates that build C code;
# libnvme-dev, the kernel's NVMe ioctl header (linux-libc-dev) and libclang-dev for the
# bindgen-generated NVMe bindings (crates/nvme-sys).
BUILD_PACKAGES=(gcc make pkg-config libnvme-dev libclang-dev linux-libc-dev)

die() { echo "install-deps: $*" >&2; exit 1; }

missing_packages() {
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
    done
}

install_packages() {
    local missing
    mapfile -t missing < <(missing_packages "$@")
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "need Debian packages ${missing[*]} but apt-get is not available"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "install-deps: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

check_rust() {
    command -v cargo >/dev/null || die "cargo not found: install Rust 1.$MIN_RUST_MINOR or newer (rustup) with rustfmt and clippy"
    local minor
    minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
    [ "$minor" -ge "$MIN_RUST_MINOR" ] || die "rustc 1.$minor is too old: zapraid needs 1.$MIN_RUST_MINOR or newer"
    cargo fmt --version >/dev/null 2>&1 || die "rustfmt missing: rustup component add rustfmt"
    cargo clippy --version >/dev/null 2>&1 || die "clippy missing: rustup component add clippy"
}

install_packages "${BUILD_PACKAGES[@]}"
check_rust
