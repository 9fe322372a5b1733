#!/usr/bin/env bash
# Builds the guest's initramfs: static busybox, the kernel modules for NVMe (and ublk and
# ext4 for later scenarios, md RAID-5 for the vsmd scenario), fio and e2fsprogs, perf if
# the host has it, the given binaries with every shared library they need, the scenarios,
# and an /init that runs the scenario named on the kernel command line and reports its
# exit status on the console.
# With --apps, also the applications of the apps scenario (Exp#11 and Exp#12): sysbench,
# PostgreSQL 15 (server, initdb, pg_ctl, psql, pgbench, at the host's paths, with its
# library and share directories) and the TPC-C-like kit (femu/apps/tpcc), and a user
# `postgres` for the server, which refuses to run as root (femu/setup.sh --apps installs
# them on the host).
#
#   femu/build-initramfs.sh [--apps] OUTPUT BINARY...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
apps=0
if [ "${1:-}" = --apps ]; then apps=1; shift; fi
out=$1; shift
kernel="$here/.cache/kernel"
kver=$(ls "$kernel/lib/modules")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,mnt,lib/modules,usr/bin,scenarios,etc}
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done

# copy_modules DIR MODULE...: modules into /lib/modules/DIR (`.`: those /init loads; others
# a scenario loads itself) with their load order (dependencies first); those built into
# the kernel are left out.
copy_modules() {
    local dir="$root/lib/modules/$1"; shift
    mkdir -p "$dir"
    : > "$dir/load-order"
    for m in "$@"; do
        src="$kernel/lib/modules/$kver/kernel/$m.ko.xz"
        [ -f "$src" ] || continue   # built into this kernel
        name=$(basename "$m").ko
        xz -dc "$src" > "$dir/$name"
        echo "$name" >> "$dir/load-order"
    done
}

# Modules in load order (dependencies first).
MODULES=(
    drivers/nvme/common/nvme-keyring drivers/nvme/common/nvme-auth
    drivers/nvme/host/nvme-core drivers/nvme/host/nvme
    drivers/block/ublk_drv
    lib/crc16 crypto/crc32c_generic lib/libcrc32c fs/mbcache fs/jbd2/jbd2 fs/ext4/ext4
)
copy_modules . "${MODULES[@]}"

# Linux md RAID-5 (md_mod, raid456 and what raid456 needs), for the vsmd scenario, which
# compares the block device with md: kept apart and loaded by that scenario alone, since
# xor and raid6_pq time their algorithms when they load and the other scenarios need none
# of it. md_mod's file is md-mod.ko.
MD_MODULES=(
    drivers/md/md-mod crypto/xor crypto/async_tx/async_tx crypto/async_tx/async_memcpy
    crypto/async_tx/async_xor lib/raid6/raid6_pq crypto/async_tx/async_pq
    crypto/async_tx/async_raid6_recov drivers/md/raid456
)
copy_modules md "${MD_MODULES[@]}"

# NVMe over TCP, target and host, and what a storage node's network needs (veth pairs, a
# token bucket per link), for the remote scenario (issue 36): loaded by it alone.
NET_MODULES=(
    fs/configfs/configfs drivers/nvme/target/nvmet drivers/nvme/target/nvmet-tcp
    drivers/nvme/host/nvme-fabrics drivers/nvme/host/nvme-tcp drivers/net/veth net/sched/sch_tbf
)
copy_modules net "${NET_MODULES[@]}"

# Binaries and the shared libraries they load, at the same paths as on the host.
copy_with_libs() {
    local bin=$1 dest=$2
    mkdir -p "$root$(dirname "$dest")"
    cp "$bin" "$root$dest"
    # A library that needs no other gives grep nothing to print: not an error.
    { ldd "$bin" 2>/dev/null | grep -oE '/[^ ]+' || true; } | while read -r lib; do
        [ -e "$root$lib" ] && continue
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
}
for bin in "$@"; do
    copy_with_libs "$bin" "/usr/bin/$(basename "$bin")"
done
# e2fsprogs' tools, not busybox's smaller applets of the same names (/usr/bin comes first
# in the guest's PATH).
# iproute2's ip and tc (network namespaces, veth pairs, tbf) for the remote scenario, as
# /usr/bin/ip2 and /usr/bin/tc2: busybox's applets of those names stay what scripts get.
for tool in ip tc; do
    path=$(PATH="$PATH:/sbin:/usr/sbin" command -v "$tool" || true)
    [ -n "$path" ] || { echo "build-initramfs: iproute2's $tool not found on the host" >&2; exit 1; }
    copy_with_libs "$(readlink -f "$path")" "/usr/bin/${tool}2"
done
for tool in fio mke2fs fsck.ext4 e2fsck md5sum debugfs; do
    path=$(PATH="$PATH:/sbin:/usr/sbin" command -v "$tool" || true)
    [ -n "$path" ] || { echo "build-initramfs: $tool not found on the host" >&2; exit 1; }
    copy_with_libs "$path" "/usr/bin/$tool"
done
# fio's engines are built in; it wants to find its own name only.
# perf, when the host has it (femu/setup.sh installs it): the blockperf scenario profiles
# the guest with it, and says so when it is missing.
if perf=$(command -v perf); then
    copy_with_libs "$perf" /usr/bin/perf
fi
if [ "$apps" -eq 1 ]; then
    sysbench=$(command -v sysbench) || { echo "build-initramfs: no sysbench on the host (femu/setup.sh --apps)" >&2; exit 1; }
    copy_with_libs "$sysbench" /usr/bin/sysbench
    pg=/usr/lib/postgresql/15
    [ -x "$pg/bin/postgres" ] || { echo "build-initramfs: no PostgreSQL 15 on the host (femu/setup.sh --apps)" >&2; exit 1; }
    # At the host's paths: PostgreSQL finds its share and library directories relative to
    # its binaries.
    for tool in postgres initdb pg_ctl psql pgbench; do
        copy_with_libs "$pg/bin/$tool" "$pg/bin/$tool"
    done
    # Not the JIT (llvmjit.so links all of LLVM): the server runs with jit = off.
    for lib in "$pg"/lib/*.so; do
        case $lib in */llvmjit*) continue ;; esac
        copy_with_libs "$lib" "$lib"
    done
    mkdir -p "$root/usr/share/postgresql" "$root/usr/share/zoneinfo"
    cp -r /usr/share/postgresql/15 "$root/usr/share/postgresql/"
    cp -L /usr/share/zoneinfo/UTC "$root/usr/share/zoneinfo/UTC"
    mkdir -p "$root/apps"
    cp -r "$here/apps/tpcc" "$root/apps/"
    # mktemp made the root directory 0700: the guest's / must let the user in.
    chmod 755 "$root"
    echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
    echo "postgres:x:70:70:PostgreSQL:/tmp:/bin/sh" >> "$root/etc/passwd"
    printf 'root:x:0:\npostgres:x:70:\n' > "$root/etc/group"
fi
cp "$here"/scenarios/*.sh "$root/scenarios/"
chmod +x "$root"/scenarios/*.sh

cat > "$root/init" <<'INIT'
#!/bin/sh
export PATH=/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
for m in $(cat /lib/modules/load-order); do insmod /lib/modules/$m 2>/dev/null; done
scenario=$(sed -n 's/.*zapraid.scenario=\([^ ]*\).*/\1/p' /proc/cmdline)
args=$(sed -n 's/.*zapraid.args=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
# Wait for the NVMe namespaces to appear.
i=0
while [ $i -lt 100 ] && ! ls /dev/ng*n1 >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
echo "ZAPRAID-E2E-BEGIN $scenario"
if [ -x "/scenarios/$scenario.sh" ]; then
    /scenarios/$scenario.sh $args
    rc=$?
else
    echo "no scenario '$scenario'"
    rc=127
fi
echo "ZAPRAID-E2E-EXIT $rc"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out"
