#!/bin/sh
# Throughput through the block device next to one raw drive, in the same run: fio 4 KiB
# random writes on /dev/ublkb0 (RAID-5 over four drives with metadata) served by 1 and then
# 2 ublk queues, and fio's io_uring_cmd engine writing sequentially at queue depth 1 on the
# fifth drive (a drive without per-block metadata, which fio 3.33's NVMe engine needs).
# Both runs on the block device are the same fio job: two jobs, one pinned to each of the
# guest's two CPUs, at queue depth 16 each (32 in all), each writing its own half of the
# range; with 2 queues each CPU's requests go to a queue of its own, with 1 both share it.
# The array is formatted with one engine shard for the 1- and 2-queue runs, then again with
# 2 shards (a thread each, requests split between them) for a third run with 2 queues.
# Then, where the time goes: a shorter run with 2 queues and 2 shards under `perf record -a`
# (the whole guest, so the kernel, fio and zapraid's threads are all in it), if the
# initramfs has perf. Everything is emulated under TCG: the ratios, not the absolute
# figures, are what this says. Reports only: it fails on errors, never on timings.
set -eu
export ZAPRAID_RUN_DIR=/tmp/run
size=${1:-48M}  # within one 62 MiB zone of the raw drive
jobs=2          # the guest's CPUs (run.sh: -smp 2)
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
mib() { echo "$1" | sed 's/M$//'; }
zapraid format --level raid5 --name p "$d0" "$d1" "$d2" "$d3" >/dev/null

# fio on the block device with the array started with $1 queues; JSON to $2, job size $3.
ublk_fio() {
    dev=$(zapraid start --daemon --name p --queues "$1" "$d0" "$d1" "$d2" "$d3" | tail -n 1)
    queues=$(cat "/sys/block/${dev#/dev/}/mq/"*/nr_tags 2>/dev/null | wc -l)
    echo "blockperf: $dev with $queues hardware queue(s)"
    [ "$queues" -eq "$1" ] || { echo "blockperf: asked for $1 queue(s), the kernel shows $queues" >&2; exit 1; }
    half=$(($(mib "$3") / jobs))M
    /usr/bin/fio --name=ublk-randwrite --filename="$dev" --ioengine=io_uring --direct=1 --rw=randwrite \
        --bs=4k --iodepth=16 --numjobs=$jobs --cpus_allowed=0-$((jobs - 1)) --cpus_allowed_policy=split \
        --size="$half" --offset_increment="$half" --group_reporting --randrepeat=0 --output-format=json > "$2"
    zapraid status p
    zapraid stop p
}
ublk_fio 1 /tmp/ublk1.json "$size"
ublk_fio 2 /tmp/ublk2.json "$size"
zapraid format --force --level raid5 --shards 2 --name p "$d0" "$d1" "$d2" "$d3" >/dev/null
ublk_fio 2 /tmp/ublk2s.json "$size"

zapraid device reset "$bare" --erase >/dev/null
/usr/bin/fio --name=raw-seqwrite --filename="$bare" --ioengine=io_uring_cmd --cmd_type=nvme --rw=write \
    --bs=4k --iodepth=1 --size="$size" --output-format=json > /tmp/raw.json

if command -v perf >/dev/null; then
    # Kernel symbols and system-wide sampling for root in the guest.
    echo 0 > /proc/sys/kernel/kptr_restrict
    echo -1 > /proc/sys/kernel/perf_event_paranoid
    perf record -a -F 499 -N -o /tmp/perf.data 2>/tmp/perf-record.log &
    perf_pid=$!
    sleep 1  # perf has opened its events
    ublk_fio 2 /tmp/ublk-profiled.json "$(($(mib "$size") / 2))M" >/dev/null
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    # perf's report pads its last columns: drop the padding and comments.
    report() {
        perf report -i /tmp/perf.data --stdio --sort "$1" 2>/dev/null | grep -v -e '^#' -e '^$' \
            | sed -e 's/[ -]*$//' | head -n "$2"
    }
    echo "blockperf: perf record -a during fio with 2 queues, whole guest (swapper: idle), by thread:"
    report comm 8
    echo "blockperf: by thread and binary:"
    report comm,dso 12
    echo "blockperf: top symbols:"
    report comm,dso,symbol 25
else
    echo "blockperf: no perf in the initramfs (the host has none): no profile"
fi

ublk1=$(bw /tmp/ublk1.json)
ublk2=$(bw /tmp/ublk2.json)
ublk2s=$(bw /tmp/ublk2s.json)
raw=$(bw /tmp/raw.json)
awk -v u1="$ublk1" -v u2="$ublk2" -v u2s="$ublk2s" -v r="$raw" 'BEGIN {
    printf "fio /dev/ublkb0 4 KiB random write, 2 jobs x QD 16, 1 ublk queue (RAID-5, 4 drives):  %.1f MiB/s\n", u1 / 1048576
    printf "fio /dev/ublkb0 4 KiB random write, 2 jobs x QD 16, 2 ublk queues (RAID-5, 4 drives): %.1f MiB/s\n", u2 / 1048576
    printf "fio /dev/ublkb0 4 KiB random write, 2 jobs x QD 16, 2 ublk queues, 2 engine shards:  %.1f MiB/s\n", u2s / 1048576
    printf "fio io_uring_cmd 4 KiB sequential write QD 1, one raw drive: %.1f MiB/s\n", r / 1048576
    printf "ratio block device / raw drive: 1 queue %.3f, 2 queues %.3f, 2 queues and 2 shards %.3f\n", u1 / r, u2 / r, u2s / r
    printf "ratio 2 queues and 2 shards / 1 queue and 1 shard: %.3f\n", u2s / u1
}'
