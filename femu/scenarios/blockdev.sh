#!/bin/sh
# The array as a block device on 4 QEMU ZNS drives: RAID-5 of 2 engine shards (each its
# own thread over its own zones of every drive, requests split between them) with ext4 (files survive
# stop/start, a failed drive, and kill -9 of the server during writes: the restarted
# server takes the same device over under the mounted file system, every file verifies,
# fsck clean), fio with verification, then RAID-6 with two failed drives.
NAME=z
. /scenarios/prelude.sh
REVERSED="/dev/ng3n1 /dev/ng2n1 /dev/ng1n1 /dev/ng0n1"
verify() {
    if ! md5sum -c /tmp/sums > /tmp/verify.out 2>&1; then
        grep -v ': OK$' /tmp/verify.out
        if [ -f /mnt/a/dir/copy ]; then  # a copy of file3: which blocks differ, and how
            cmp -l /mnt/a/file3 /mnt/a/dir/copy | awk '{ b = int(($1 - 1) / 4096); if (b != last) { print "block", b; last = b } }' | tr '\n' ' ' | head -c 2000; echo
            first=$(cmp -l /mnt/a/file3 /mnt/a/dir/copy | head -1 | awk '{print int(($1-1)/4096)}')
            echo "copy block $first:"; dd if=/mnt/a/dir/copy bs=4096 skip=$first count=1 2>/dev/null | od -A d -t x1 | head -5
            echo "file3 block $first:"; dd if=/mnt/a/file3 bs=4096 skip=$first count=1 2>/dev/null | od -A d -t x1 | head -3
            /usr/bin/debugfs -R "blocks /dir/copy" "$dev" 2>/dev/null | head -c 300; echo
            zapraid status z
        fi
        echo "--- server log"; tail -n 40 /tmp/run/z.log
        fail "checksums differ ($1)"
    fi
    echo "all files verify ($1)"
}

step "format RAID-5 over 4 drives, 2 engine shards"
zapraid format --level raid5 --shards 2 --name z $D
step "start (drives named in reverse order)"
dev=$(start $REVERSED)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
echo "block device: $dev ($(cat /sys/block/${dev#/dev/}/size) sectors)"
$MKFS "$dev"
mkdir -p /mnt/a
mount -t ext4 "$dev" /mnt/a
for i in 1 2 3 4 5 6; do dd if=/dev/urandom of=/mnt/a/file$i bs=64k count=$((i * 8)) 2>/dev/null; done
mkdir /mnt/a/dir && cp /mnt/a/file3 /mnt/a/dir/copy
md5sum /mnt/a/file* /mnt/a/dir/copy > /tmp/sums
sync
umount /mnt/a
zapraid status z
zapraid status z --json | grep -Eq '"shard_count": ?2' || fail "status does not show 2 shards"
step "stop, start, verify"
zapraid stop z
dev=$(start $D)
mount -t ext4 "$dev" /mnt/a
verify "after stop and start"
step "fail drive 1, read everything degraded"
zapraid fail z /dev/ng1n1
echo 3 > /proc/sys/vm/drop_caches
verify "with drive 1 failed"
zapraid status z --json
umount /mnt/a
zapraid stop z

step "kill -9 of the server during writes, the file system mounted"
dev=$(start $D)
mount -t ext4 "$dev" /mnt/a
verify "after restart with all drives"
dd if=/dev/urandom of=/mnt/a/synced bs=64k count=64 2>/dev/null
sync
md5sum /mnt/a/file* /mnt/a/dir/copy /mnt/a/synced > /tmp/sums
dd if=/dev/urandom of=/tmp/across bs=64k count=4 2>/dev/null
# Each copy is synced, so writes reach the device all along; the ones the killed server
# held are requeued by the kernel and run on the next server: no error reaches the writer.
( i=0; while [ $i -lt 60 ]; do cp /tmp/across /mnt/a/across$i && sync || exit 1; i=$((i + 1)); done ) &
writer=$!
sleep 2
pid=$(pidof zapraid)
kill -0 $writer 2>/dev/null && echo "the writer is still writing"
echo "killing server pid $pid"
kill -9 $pid
sleep 1
again=$(start $D)
echo "restarted: $again"
[ "$again" = "$dev" ] || fail "the restarted server exported $again, not $dev again"
grep "took over" /tmp/run/z.log || fail "the restarted server did not take the device over"
wait $writer || fail "a write failed across the server's crash"
sync
echo 3 > /proc/sys/vm/drop_caches
verify "after kill -9 and restart under the mounted file system"
i=0
while [ $i -lt 60 ]; do cmp -s /tmp/across /mnt/a/across$i || fail "across$i differs"; i=$((i + 1)); done
echo "all 60 files written across the crash verify"
umount /mnt/a
$FSCK -fn "$dev" || fail "fsck found errors after kill -9"
echo "fsck clean after kill -9"

step "fio --verify=crc32c random writes and reads on the block device"
/usr/bin/fio --name=verify --filename="$dev" --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k --iodepth=16 \
    --size=64m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 --output-format=terse \
    --minimal >/tmp/fio.out || { cat /tmp/fio.out; fail "fio verify"; }
echo "fio verify passed"
zapraid stop z

step "RAID-6 over the same drives, two failed drives"
zapraid format --level raid6 --name z --force $D
dev=$(start $D)
$MKFS "$dev"
mount -t ext4 "$dev" /mnt/a
for i in 1 2 3; do dd if=/dev/urandom of=/mnt/a/r6file$i bs=64k count=32 2>/dev/null; done
md5sum /mnt/a/r6file* > /tmp/sums
sync
zapraid fail z 0
zapraid fail z 3
echo 3 > /proc/sys/vm/drop_caches
verify "RAID-6 with drives 0 and 3 failed"
umount /mnt/a
zapraid stop z
echo "blockdev scenario passed"
