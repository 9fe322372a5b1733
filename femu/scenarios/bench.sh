#!/bin/sh
# Device-level benchmark on one QEMU ZNS drive, in one run: Zone Write at queue depth 1
# and Zone Append at queue depth 4 and 8 through zapraid's NVMe passthrough backend, and
# fio's io_uring_cmd engine writing sequentially at queue depth 1 on the same drive
# (fio 3.33 cannot issue Zone Append). Needs a drive without per-block metadata (fio
# 3.33's NVMe engine does not transfer metadata). Under TCG a single run varies by
# +-20%, so the two alternate for several rounds and medians are compared. Reports only:
# it fails on errors, never on timings. A round that fails is reported (with the kernel's
# last messages) and run once more; a second failure fails the scenario.
#
#   bench.sh [DEVICE] [SIZE] [ROUNDS]
set -e
dev=${1:-/dev/ng0n1}
size=${2:-48M}
rounds=${3:-7}
: > /tmp/ours.txt
: > /tmp/fio.txt
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# One round: ours, then fio's; results kept only when both ran.
one_round() {
    zapraid device bench "$dev" --erase --size "$size" > /tmp/round-ours.txt || return 1
    zapraid device reset "$dev" --erase || return 1
    fio --name=zone-write-qd1 --ioengine=io_uring_cmd --cmd_type=nvme --filename="$dev" \
        --rw=write --bs=4k --iodepth=1 --offset=0 --size="$size" --output-format=json > /tmp/fio.json || return 1
    bytes=$(tr -d '\n' < /tmp/fio.json | sed -n 's/.*"write" *: *{[^}]*"bw_bytes" *: *\([0-9]*\).*/\1/p')
    [ -n "$bytes" ] || { echo "no write bandwidth in fio's output"; return 1; }
    zapraid device reset "$dev" --erase || return 1
    cat /tmp/round-ours.txt
    cat /tmp/round-ours.txt >> /tmp/ours.txt
    awk -v b="$bytes" 'BEGIN { printf "%.1f\n", b / 1048576 }' | tee -a /tmp/fio.txt | sed 's/^/fio     io_uring_cmd write QD 1: /; s/$/ MiB\/s/'
}
round=1
while [ "$round" -le "$rounds" ]; do
    if ! one_round; then
        echo "round $round failed; what it printed and the kernel's last messages:"
        cat /tmp/round-ours.txt /tmp/fio.json 2>/dev/null | tail -n 20
        dmesg | tail -n 20
        zapraid device reset "$dev" --erase
        one_round || { echo "round $round failed again"; exit 1; }
    fi
    round=$((round + 1))
done
ours_zw=$(sed -n 's/^zapraid Zone Write  QD 1: *\([0-9.]*\) MiB\/s.*/\1/p' /tmp/ours.txt | median)
ours_za4=$(sed -n 's/^zapraid Zone Append QD 4: *\([0-9.]*\) MiB\/s.*/\1/p' /tmp/ours.txt | median)
ours_za8=$(sed -n 's/^zapraid Zone Append QD 8: *\([0-9.]*\) MiB\/s.*/\1/p' /tmp/ours.txt | median)
fio_zw=$(median < /tmp/fio.txt)
echo "medians of $rounds rounds, 4 KiB requests, MiB/s:"
echo "  zapraid Zone Write QD 1   $ours_zw"
echo "  zapraid Zone Append QD 4  $ours_za4"
echo "  zapraid Zone Append QD 8  $ours_za8"
echo "  fio io_uring_cmd write QD 1  $fio_zw"
awk -v o="$ours_zw" -v f="$fio_zw" 'BEGIN {
    r = o / f
    printf "zapraid / fio, Zone Write QD 1: %.3f (within 10%%: %s)\n", r, (r >= 0.9 && r <= 1.1) ? "yes" : (r > 1.1 ? "no, faster" : "NO, slower")
}'
