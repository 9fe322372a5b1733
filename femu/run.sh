#!/usr/bin/env bash
# Boots the guest (QEMU under TCG) with N emulated NVMe ZNS drives and runs one scenario
# in it; prints the guest's console and exits with the scenario's exit status.
#
#   femu/run.sh [--drives N] [--metadata BYTES] [--metadata-interleaved] [--zone-size 64M] [--zone-capacity 62M]
#               [--drive-size 2G] [--max-open 14] [--max-active 14] [--zasl 5]
#               (--metadata-interleaved: the zoned drives' metadata interleaved with data,
#                extended LBAs, as NVMe over Fabrics carries it; QEMU's mset=1)
#               [--bare-drives N]   (N more drives without per-block metadata, after the others)
#               [--conv-drives N]   (N conventional NVMe namespaces, not zoned, after those: each
#                                    on its own controller like the zoned ones, of the same size
#                                    and block size, without metadata; serials conv0..convN-1)
#               [--conv-metadata BYTES]  (per-block metadata of the conventional namespaces:
#                                    QEMU then reads and writes it with a second backend I/O
#                                    per command, as it does for the zoned drives')
#               [--timeout SECONDS] INITRAMFS SCENARIO [ARG...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mset=0 drives=4 bare_drives=0 conv_drives=0 conv_metadata=0 metadata=64 zone_size=64M zone_capacity=62M drive_size=2G max_open=14 max_active=14 zasl=5 timeout=900
while [ $# -gt 0 ]; do
    case $1 in
        --drives) drives=$2; shift 2 ;;
        --bare-drives) bare_drives=$2; shift 2 ;;
        --conv-drives) conv_drives=$2; shift 2 ;;
        --conv-metadata) conv_metadata=$2; shift 2 ;;
        --metadata) metadata=$2; shift 2 ;;
        --metadata-interleaved) mset=1; shift ;;
        --zone-size) zone_size=$2; shift 2 ;;
        --zone-capacity) zone_capacity=$2; shift 2 ;;
        --drive-size) drive_size=$2; shift 2 ;;
        --max-open) max_open=$2; shift 2 ;;
        --max-active) max_active=$2; shift 2 ;;
        --zasl) zasl=$2; shift 2 ;;
        --timeout) timeout=$2; shift 2 ;;
        *) break ;;
    esac
done
initramfs=$1 scenario=$2; shift 2
args=$(IFS=,; echo "$*")
kernel=$(ls "$here"/.cache/kernel/boot/vmlinuz-* | head -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

qemu_args=()
for ((i = 0; i < drives + bare_drives; i++)); do
    truncate -s "$drive_size" "$work/d$i.img"
    ms=$metadata ext=$mset
    [ "$i" -lt "$drives" ] || { ms=0; ext=0; }
    qemu_args+=(
        -drive "file=$work/d$i.img,id=z$i,format=raw,if=none"
        -device "nvme,id=nvme$i,serial=zns$i,zoned.zasl=$zasl"
        -device "nvme-ns,drive=z$i,bus=nvme$i,nsid=1,logical_block_size=4096,physical_block_size=4096,zoned=true,zoned.zone_size=$zone_size,zoned.zone_capacity=$zone_capacity,zoned.max_open=$max_open,zoned.max_active=$max_active,ms=$ms,mset=$ext"
    )
done
for ((i = 0; i < conv_drives; i++)); do
    truncate -s "$drive_size" "$work/c$i.img"
    qemu_args+=(
        -drive "file=$work/c$i.img,id=c$i,format=raw,if=none"
        -device "nvme,id=nvmec$i,serial=conv$i"
        -device "nvme-ns,drive=c$i,bus=nvmec$i,nsid=1,logical_block_size=4096,physical_block_size=4096,ms=$conv_metadata"
    )
done
log="$work/console.log"
# A guest that dies before its scenario begins (seen once: a kernel panic in the timer
# code 1.3 s into boot under TCG) says nothing about zapraid: boot it again, at most
# twice, on fresh drives. A guest that dies after the scenario began is not retried.
boot_attempts=3
# How long a guest may take to begin its scenario (the init's ZAPRAID-E2E-BEGIN, printed
# once the drives are there) before it counts as hung and is booted again; not on the
# last attempt, which has the whole --timeout. A boot takes about 5 s here; on
# 2026-11-28 two boots in a row hung at "Booting from ROM.." and each took the whole
# --timeout (15 minutes) to be given up.
boot_timeout=${FEMU_BOOT_TIMEOUT:-120}
for ((attempt = 1; attempt <= boot_attempts; attempt++)); do
    echo "femu: booting with $drives ZNS drive(s) (metadata $metadata B/block)$([ "$conv_drives" -eq 0 ] || echo ", $conv_drives conventional"), scenario '$scenario' $*" >&2
    set +e
    timeout "$timeout" qemu-system-x86_64 -machine q35 -cpu max -m 2G -smp 2 \
        -kernel "$kernel" -initrd "$initramfs" \
        -append "console=ttyS0 quiet panic=-1 zapraid.scenario=$scenario zapraid.args=$args" \
        -nographic -no-reboot "${qemu_args[@]}" < /dev/null > "$log" 2>&1 &
    qemu_pid=$!
    stopped=0
    if [ "$attempt" -lt "$boot_attempts" ]; then
        for ((waited = 0; waited < boot_timeout; waited++)); do
            grep -q ZAPRAID-E2E-BEGIN "$log" && break
            kill -0 "$qemu_pid" 2>/dev/null || break
            sleep 1
        done
        if ! grep -q ZAPRAID-E2E-BEGIN "$log" && kill -0 "$qemu_pid" 2>/dev/null; then
            kill "$qemu_pid" # timeout passes the signal on to QEMU
            stopped=1
        fi
    fi
    wait "$qemu_pid"
    qemu_status=$?
    [ "$stopped" -eq 0 ] || qemu_status="stopped: no scenario after $boot_timeout s"
    set -e
    if grep -q ZAPRAID-E2E-BEGIN "$log" || [ "$attempt" -eq "$boot_attempts" ]; then
        break
    fi
    tr -d '\r' < "$log" | tail -n 40
    echo "femu: the guest did not begin its scenario (qemu status $qemu_status); booting again" >&2
    for ((i = 0; i < drives + bare_drives; i++)); do
        rm -f "$work/d$i.img" && truncate -s "$drive_size" "$work/d$i.img"
    done
    for ((i = 0; i < conv_drives; i++)); do
        rm -f "$work/c$i.img" && truncate -s "$drive_size" "$work/c$i.img"
    done
done
rc=$(sed -n 's/.*ZAPRAID-E2E-EXIT \([0-9]*\).*/\1/p' "$log" | tail -1)
if [ -z "$rc" ]; then
    # No result: show the whole console (firmware and kernel messages) to tell why.
    tr -d '\r' < "$log"
    echo "femu: the guest ended without a scenario result (qemu status $qemu_status)" >&2
    exit 1
fi
# The scenario's own output, without firmware noise and the boot's terminal escapes.
tr -d '\r' < "$log" | sed -n 's/.*\(ZAPRAID-E2E-BEGIN\)/\1/; /ZAPRAID-E2E-BEGIN/,/ZAPRAID-E2E-EXIT/p' 
exit "$rc"
