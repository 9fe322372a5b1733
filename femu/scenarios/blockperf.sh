#!/bin/sh
# Throughput through the block device next to one raw drive, in the same run: fio 4 KiB
# random writes at queue depth 32 on /dev/ublkb0 (RAID-5 over four drives with metadata), and
# fio's io_uring_cmd engine writing sequentially at queue depth 1 on the fifth drive (a drive
# without per-block metadata, which fio 3.33's NVMe engine needs). Both are emulated under
# TCG: the ratio, not the absolute figures, is what this says. Reports only: it fails on
# errors, never on timings.
set -eu
export ZAPRAID_RUN_DIR=/tmp/run
size=${1:-48M}  # within one 62 MiB zone of the raw drive
# The kernel probes controllers in parallel, so names follow no fixed order: find each
# drive by the serial run.sh gave it (zns0..zns3 with metadata, zns4 without).
by_serial() {
    for c in /sys/class/nvme/nvme*; do
        if [ "$(tr -d ' ' < "$c/serial")" = "$1" ]; then echo "/dev/ng${c##*/nvme}n1"; return; fi
    done
    echo "no NVMe controller with serial $1" >&2
    exit 1
}
d0=$(by_serial zns0) d1=$(by_serial zns1) d2=$(by_serial zns2) d3=$(by_serial zns3) bare=$(by_serial zns4)
bw() { tr -d '\n' < "$1" | sed 's/.*"write" *: *{[^}]*"bw_bytes" *: *\([0-9]*\).*/\1/'; }
zapraid format --level raid5 --name p "$d0" "$d1" "$d2" "$d3" >/dev/null
dev=$(zapraid start --daemon --name p "$d0" "$d1" "$d2" "$d3" | tail -n 1)
/usr/bin/fio --name=ublk-randwrite --filename="$dev" --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
    --iodepth=32 --size="$size" --randrepeat=0 --output-format=json > /tmp/ublk.json
zapraid status p
zapraid stop p
zapraid device reset "$bare" --erase >/dev/null
/usr/bin/fio --name=raw-seqwrite --filename="$bare" --ioengine=io_uring_cmd --cmd_type=nvme --rw=write \
    --bs=4k --iodepth=1 --size="$size" --output-format=json > /tmp/raw.json
ublk=$(bw /tmp/ublk.json)
raw=$(bw /tmp/raw.json)
awk -v u="$ublk" -v r="$raw" 'BEGIN {
    printf "fio /dev/ublkb0 4 KiB random write QD 32 (RAID-5, 4 drives): %.1f MiB/s\n", u / 1048576
    printf "fio io_uring_cmd 4 KiB sequential write QD 1, one raw drive:  %.1f MiB/s\n", r / 1048576
    printf "ratio block device / raw drive: %.3f\n", u / r
}'
