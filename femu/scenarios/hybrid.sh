#!/bin/sh
# Hybrid segment management on 4 QEMU ZNS drives (14 open / 14 active zones each): more
# open segments than the drives allow are refused with the numbers; the engine alone
# (selftest) and then the block device on a RAID-5 array of 2 open segments of 8 KiB
# chunks and 2 of 16 KiB chunks (8 open, 9 active zones per drive): ext4 with small and
# large files, stop/start, fio --verify with small and large writes, fsck, a failed
# drive, restart, every file verified.
NAME=h
. /scenarios/prelude.sh
HYBRID="--small-chunk 8K --large-chunk 16K --small-segments 2 --large-segments 2"
verify() { verify_sums "$1"; }

step "the drives' zone limits"
zapraid device info /dev/ng0n1 | grep limits
step "4 + 4 open segments need 16 open zones: refused"
if zapraid format --level raid5 --name h --small-chunk 8K --large-chunk 16K --small-segments 4 \
    --large-segments 4 $D > /tmp/refused.out 2>&1; then
    fail "format took 8 open segments on drives of 14 open zones"
fi
cat /tmp/refused.out
grep -q "refused: it allows 14 open zones; 4 small + 4 large open segments need 16 (.*): 2 short" /tmp/refused.out \
    || fail "the refusal does not say the limit and the shortfall"

step "the engine alone on a hybrid array (selftest)"
zapraid selftest --level raid5 --size 16M --erase $HYBRID $D

step "format RAID-5, $HYBRID"
zapraid format --level raid5 --group-size 16 --name h --force $HYBRID $D
zapraid inspect /dev/ng0n1 | head -n 3
dev=$(start $D)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
zapraid status h | tee /tmp/status.out
grep -q "open segments: 2 of 8 KiB chunks + 2 of 16 KiB chunks" /tmp/status.out || fail "status lacks the open segments"
zapraid status h --json | grep -q '"small_segments":2' || fail "status --json lacks small_segments"

step "ext4: small and large files"
$MKFS "$dev"
mkdir -p /mnt/h
mount -t ext4 "$dev" /mnt/h
mkdir /mnt/h/small
i=0
while [ $i -lt 200 ]; do dd if=/dev/urandom of=/mnt/h/small/f$i bs=4k count=1 2>/dev/null; i=$((i + 1)); done
for i in 1 2 3 4; do dd if=/dev/urandom of=/mnt/h/large$i bs=64k count=$((i * 16)) 2>/dev/null; done
md5sum /mnt/h/small/f* /mnt/h/large* > /tmp/sums
sync
umount /mnt/h
step "stop, start, verify"
zapraid stop h
dev=$(start $D)
mount -t ext4 "$dev" /mnt/h
verify "after stop and start"
umount /mnt/h
$FSCK -fn "$dev" || fail "fsck found errors"
echo "fsck clean"

step "fio --verify=crc32c, 4 KiB and 64 KiB random writes, on the block device"
/usr/bin/fio --name=verify --filename="$dev" --ioengine=io_uring --direct=1 --rw=randwrite \
    --bssplit=4k/50:64k/50 --iodepth=16 --size=64m --verify=crc32c --do_verify=1 --verify_fatal=1 \
    --randrepeat=0 --output-format=terse --minimal >/tmp/fio.out || { cat /tmp/fio.out; fail "fio verify"; }
echo "fio verify passed"
zapraid stop h

step "ext4 again, a failed drive, restart"
dev=$(start $D)
$MKFS "$dev"
mount -t ext4 "$dev" /mnt/h
mkdir /mnt/h/small
i=0
while [ $i -lt 100 ]; do dd if=/dev/urandom of=/mnt/h/small/f$i bs=8k count=1 2>/dev/null; i=$((i + 1)); done
for i in 1 2; do dd if=/dev/urandom of=/mnt/h/large$i bs=64k count=32 2>/dev/null; done
md5sum /mnt/h/small/f* /mnt/h/large* > /tmp/sums
sync
zapraid fail h /dev/ng2n1
echo 3 > /proc/sys/vm/drop_caches
verify "with drive 2 failed"
umount /mnt/h
zapraid stop h
dev=$(start $D)
mount -t ext4 "$dev" /mnt/h
verify "after restart with drive 2 still failed"
umount /mnt/h
$FSCK -fn "$dev" || fail "fsck found errors after the restart"
zapraid status h
zapraid stop h
echo "hybrid scenario passed"
