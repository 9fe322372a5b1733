#!/bin/sh
# Replacing a failed drive under a mounted file system, on 5 QEMU ZNS drives: RAID-5 over
# the first 4, ext4 on its block device with files of known checksums; fio with
# verification writes file after file in the background; drive 1 fails and is replaced by
# the fifth drive while fio runs, and the rebuild completes under that load; then drive 2
# fails, so every block drive 1 held must come from the new drive: every file verifies
# (md5, and fio's own verification of its last file), fsck clean, and again after a stop
# and a start with the new drive in the drive list.
NAME=z
. /scenarios/prelude.sh
AFTER="/dev/ng3n1 /dev/ng4n1 /dev/ng0n1 /dev/ng2n1"   # drive 1 replaced by ng4n1; any order
NEW=/dev/ng4n1
FIO=/usr/bin/fio
REBUILD_TIMEOUT=900
# Each fio pass: a new file, random 4 KiB and 64 KiB direct writes, verified as they go
# (the backlog) and all again at the end. A new file per pass, so that a stale block of an
# earlier pass (right offset and checksum, old data) cannot pass for a new one. At 1 MiB/s,
# to leave the rebuild room: it writes the new drive one zone at a time (queue depth 1, a
# few chunks per write), and under TCG beside unthrottled fio it wrote 0.2-0.3 MiB/s when
# it wrote a chunk per command (docs/manual/failures.md). Printed: the rebuild's MiB/s beside the new
# drive's own Zone Write MiB/s at queue depth 1, measured before it joins.
FIO_SIZE_MIB=32
FIO_OPTS="--ioengine=io_uring --direct=1 --rw=randwrite --bssplit=4k/50:64k/50 --iodepth=16 --size=${FIO_SIZE_MIB}m \
--rate=1m --verify=crc32c --verify_fatal=1 --output-format=terse --minimal"
log_tail() { echo "--- server log"; tail -n 60 /tmp/run/z.log; }
fail() {
    echo "FAILED: $*"
    zapraid status z 2>&1 || true
    log_tail
    exit 1
}
verify() {
    if ! md5sum -c /tmp/sums > /tmp/verify.out 2>&1; then
        grep -v ': OK$' /tmp/verify.out
        fail "checksums differ ($1)"
    fi
    echo "all $(wc -l < /tmp/sums) files verify ($1)"
}
# The array's state ("z: rebuilding (uuid), ..."), and the rebuilds completed since start.
array_state() { zapraid status z | sed -n '1s/^z: \([a-z]*\) .*/\1/p'; }
rebuilds_completed() { zapraid status z --json | grep -o '"rebuilds_completed":[0-9]*' | cut -d: -f2; }

step "format RAID-5 over 4 of the 5 drives"
zapraid format --level raid5 --name z $D
dev=$(start $D)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
echo "block device: $dev ($(cat /sys/block/${dev#/dev/}/size) sectors)"
$MKFS "$dev"
mkdir -p /mnt/r
mount -t ext4 "$dev" /mnt/r
step "files of known checksums"
for i in 1 2 3 4 5 6; do dd if=/dev/urandom of=/mnt/r/file$i bs=64k count=$((i * 16)) 2>/dev/null; done
mkdir /mnt/r/small
i=0
while [ $i -lt 100 ]; do dd if=/dev/urandom of=/mnt/r/small/f$i bs=4k count=$((i % 4 + 1)) 2>/dev/null; i=$((i + 1)); done
# Enough data that several segments are sealed before the drive fails: the rebuild has
# more than the open segment's worth to put on the new drive.
for i in 1 2; do dd if=/dev/urandom of=/mnt/r/big$i bs=1M count=96 2>/dev/null; done
md5sum /mnt/r/file* /mnt/r/big* /mnt/r/small/f* > /tmp/sums
sync
zapraid status z

step "fio --verify=crc32c in the background, a new file per pass"
fio_passes_in_background /mnt/r

step "fail drive 1 while fio runs"
zapraid fail z /dev/ng1n1
[ "$(array_state)" = degraded ] || fail "the array is not degraded after drive 1 failed"
sleep 3
kill -0 $fio_pid 2>/dev/null || { wait $fio_pid || true; fail "fio ended before the replace"; }

step "the new drive's own Zone Write MiB/s at queue depth 1, before it joins"
# drive_mib BS: MiB/s of 8 MiB of sequential BS writes to the emptied new drive.
drive_mib() {
    zapraid device reset "$NEW" --erase >/dev/null
    $FIO --name="zw$1" --filename="$NEW" --ioengine=io_uring_cmd --cmd_type=nvme --rw=write --bs="$1" --iodepth=1 \
        --size=8m --output-format=json > "/tmp/zw$1.json" || fail "fio on $NEW"
    tr -d '\n' < "/tmp/zw$1.json" | sed 's/.*"write" *: *{[^}]*"bw_bytes" *: *\([0-9]*\).*/\1/' \
        | awk '{ printf "%.1f", $1 / 1048576 }'
}
# The chunk size, and the largest write the rebuild makes: the drive's transfer limit as
# `device info` gives it (a page of the 64 B-per-block metadata on these drives).
largest=$(zapraid device info "$NEW" | sed -n 's/.*, transfer \([0-9]*\) \([KM]\)iB.*/\1\2/p')
[ -n "$largest" ] || fail "no transfer limit in zapraid device info $NEW"
drive_4k=$(drive_mib 4k)
drive_largest=$(drive_mib "$largest")
zapraid device reset "$NEW" --erase >/dev/null
echo "$NEW alone: $drive_4k MiB/s of 4 KiB Zone Writes, $drive_largest MiB/s of ${largest}iB"

step "replace drive 1 by $NEW while fio runs"
zapraid replace z /dev/ng1n1 $NEW || fail "replace"
replaced_at=$(date +%s)
zapraid status z
kill -0 $fio_pid 2>/dev/null && echo "fio is running: the rebuild runs under its load"
step "wait for the rebuild (at most $REBUILD_TIMEOUT s)"
last_print=0
while :; do
    now=$(date +%s)
    state=$(array_state)
    completed=$(rebuilds_completed)
    if [ "$state" = optimal ] && [ "$completed" = 1 ]; then
        echo "rebuild complete after $((now - replaced_at)) s"
        break
    fi
    case $state in
        rebuilding) ;;
        *) zapraid status z --json; fail "the array is '$state' during the rebuild (rebuilds completed: $completed)" ;;
    esac
    [ $((now - replaced_at)) -lt $REBUILD_TIMEOUT ] || { zapraid status z --json; fail "no rebuild after $REBUILD_TIMEOUT s"; }
    if [ $((now - last_print)) -ge 15 ]; then
        zapraid status z | grep 'rebuild of' || true
        last_print=$now
    fi
    sleep 2
done
zapraid status z | tee /tmp/status.out
echo "server log:"; grep -E 'replaced|rebuild' /tmp/run/z.log | tail -n 6
# What the rebuild wrote and how fast, as the server logged it at the end (the blocks of
# headers, chunks and footers; seconds from the swap to the end, timed by the server).
done_line=$(grep 'rebuild complete' /tmp/run/z.log | tail -n 1)
mib_per_s=$(echo "$done_line" | sed -n 's/.*mib_per_s=\([0-9.]*\).*/\1/p')
if [ -n "$mib_per_s" ]; then
    echo "rebuild: $(echo "$done_line" | sed -n 's/.*\(blocks_written=[0-9]*\).*\(seconds=[0-9.]*\).*/\1 \2/p')," \
        "$mib_per_s MiB/s under fio's load; $NEW alone: $drive_4k MiB/s of 4 KiB Zone Writes (the chunk" \
        "size), $drive_largest MiB/s of ${largest}iB (its largest write)"
else
    echo "rebuild: the server logged no MiB/s for it ('$done_line'): unknown"
fi
grep -q "drive 1: $NEW ok" /tmp/status.out || fail "drive 1 is not $NEW and ok"
zapraid status z --json | grep -q "\"path\":\"$NEW\"" || fail "status --json does not give drive 1 as $NEW"
kill -0 $fio_pid 2>/dev/null && echo "fio still running after the rebuild: let it finish its pass"

step "wait for fio (every pass verified)"
wait_for_fio_passes

step "fail drive 2: what drive 1 held now comes from $NEW"
zapraid fail z /dev/ng2n1
echo 3 > /proc/sys/vm/drop_caches
verify "drive 1 rebuilt onto $NEW, drive 2 failed"
verify_last_fio_pass
umount /mnt/r
$FSCK -fn "$dev" || fail "fsck found errors with drive 2 failed"
echo "fsck clean"
zapraid status z

step "stop, start over ng0, ng4 (drive 1), ng2 (failed), ng3; verify"
zapraid stop z
zapraid inspect $NEW | head -n 2 | tee /tmp/inspect.out
grep -q "^superblock: .*failed drive 2" /tmp/inspect.out || fail "$NEW's superblock does not record drive 2 failed"
! grep -q rebuilding /tmp/inspect.out || fail "$NEW's superblock still records a rebuild"
dev=$(start $AFTER)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
zapraid status z | tee /tmp/status.out
grep -q "drive 1: $NEW ok" /tmp/status.out || fail "after the restart drive 1 is not $NEW and ok"
grep -q "drive 2: .* failed" /tmp/status.out || fail "after the restart drive 2 is not failed"
mount -t ext4 "$dev" /mnt/r
verify "after stop and start, drive 2 still failed"
umount /mnt/r
$FSCK -fn "$dev" || fail "fsck found errors after the restart"
echo "fsck clean"
zapraid stop z
echo "replace scenario passed"
