#!/bin/sh
# A bounded L2P table with checkpoints on 4 QEMU ZNS drives: format --l2p-memory (a few
# pages), ext4 with files, a clean stop leaves a checkpoint (written to the reserved zones
# over NVMe) and the next start begins from it, reading only headers and the checkpoint;
# a kill -9 (the start begins from the newest checkpoint, the stop's or one taken while
# running, and replays only the segments written after it or open at it); a failed
# drive, a clean stop and a degraded start from the checkpoint; every file verified each time; fio
# --verify on the degraded device and one more checkpointed start.
NAME=l
. /scenarios/prelude.sh
verify() { verify_sums "$1"; }
# The status line saying what the start read: "start: from checkpoint N, ...", "start:
# from checkpoint N and the S segments written after it, ..." or "start: replayed every
# segment, ...".
start_line() {
    zapraid status l | grep "start: " > /tmp/start.out || true
    cat /tmp/start.out >&2
    cat /tmp/start.out
}
# The checkpoint generation the last start began from (empty if none). The engine also
# takes checkpoints while it runs (every few segments, and before garbage collection
# resets a segment), so the generations a stop leaves are not known in advance: only
# that each is newer than the last.
start_generation() {
    start_line | sed -n 's/.*start: from checkpoint \([0-9]*\).*/\1/p'
}

step "format RAID-5 with a 64 KiB L2P budget (16 pages of the table)"
zapraid format --level raid5 --group-size 16 --name l --force --l2p-memory 64K $D
dev=$(start $D)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
start_line | grep -q "replayed every segment" || fail "a fresh array has no checkpoint yet"

step "ext4 with files, more than the budget's pages touched"
$MKFS "$dev"
mkdir -p /mnt/l
mount -t ext4 "$dev" /mnt/l
i=0
while [ $i -lt 150 ]; do dd if=/dev/urandom of=/mnt/l/f$i bs=16k count=1 2>/dev/null; i=$((i + 1)); done
dd if=/dev/urandom of=/mnt/l/big bs=1M count=24 2>/dev/null
md5sum /mnt/l/f* /mnt/l/big > /tmp/sums
sync
umount /mnt/l
zapraid status l --json | grep -q '"mapping_writes":[1-9]' || fail "no mapping block was written"

step "clean stop, start from the checkpoint"
zapraid stop l
dev=$(start $D)
start_line | grep -q "from checkpoint [0-9]*," || fail "the start did not begin from the stop's checkpoint"
g1=$(start_generation)
mount -t ext4 "$dev" /mnt/l
verify "after a start from the checkpoint"
umount /mnt/l
$FSCK -fn "$dev" || fail "fsck found errors"
echo "fsck clean"

step "stop and start again: the next checkpoint"
zapraid stop l
dev=$(start $D)
start_line | grep -q "from checkpoint [0-9]*," || fail "the second start did not begin from the stop's checkpoint"
g2=$(start_generation)
[ "$g2" -gt "$g1" ] || fail "the second stop left checkpoint $g2, not newer than $g1"
mount -t ext4 "$dev" /mnt/l
verify "after the second checkpointed start"

step "kill -9 of the server, the file system mounted: the start replays what came after the checkpoint"
dd if=/dev/urandom of=/mnt/l/late bs=64k count=8 2>/dev/null
sync
md5sum /mnt/l/f* /mnt/l/big /mnt/l/late > /tmp/sums
pid=$(pidof zapraid)
echo "killing server pid $pid"
kill -9 $pid
sleep 1
again=$(start $D)
[ "$again" = "$dev" ] || fail "the restarted server exported $again, not $dev again"
start_line | grep -q "from checkpoint [0-9]*" || fail "the start after kill -9 did not begin from a checkpoint"
g3=$(start_generation)
[ "$g3" -ge "$g2" ] || fail "the start after kill -9 began from checkpoint $g3, older than the stop's $g2"
if [ "$g3" -gt "$g2" ]; then
    echo "after kill -9: from checkpoint $g3, taken while running (the last stop left $g2)"
else
    echo "after kill -9: from checkpoint $g3, the last stop's"
fi
echo 3 > /proc/sys/vm/drop_caches
verify "after kill -9 and a replay of what came after the checkpoint"
umount /mnt/l
$FSCK -fn "$dev" || fail "fsck found errors after the replay"

step "a failed drive, a clean stop, a degraded start from the checkpoint"
zapraid fail l /dev/ng2n1
zapraid stop l
dev=$(start $D)
start_line | grep -q "from checkpoint" || fail "the degraded start did not begin from the checkpoint"
mount -t ext4 "$dev" /mnt/l
echo 3 > /proc/sys/vm/drop_caches
verify "degraded, from the checkpoint"
umount /mnt/l
$FSCK -fn "$dev" || fail "fsck found errors on the degraded array"
step "fio --verify=crc32c on the degraded block device (the file system goes), stop, start"
/usr/bin/fio --name=verify --filename="$dev" --ioengine=io_uring --direct=1 --rw=randwrite \
    --bs=4k --iodepth=16 --size=32m --verify=crc32c --do_verify=1 --verify_fatal=1 \
    --randrepeat=0 --output-format=terse --minimal >/tmp/fio.out || { cat /tmp/fio.out; fail "fio verify"; }
echo "fio verify passed"
zapraid stop l
dev=$(start $D)
start_line | grep -q "from checkpoint" || fail "the start after fio did not begin from the checkpoint"
zapraid status l
zapraid stop l
echo "l2p scenario passed"
