#!/bin/sh
# A declustered array on 8 QEMU ZNS drives (issue 35): RAID-5 stripes of 4+1 spread over
# all 8, one drive's worth of distributed spare space. ext4 on its block device with files
# of known checksums; fio with verification writes file after file in the background;
# drive 1 fails under fio and is rebuilt into the spare space of the other seven, without a
# new drive, until the array is fully redundant again ("optimal, spare space used"); then
# drive 5 fails and is rebuilt the same way. Every file verifies, fio's own verification
# of its last file passes, fsck is clean, and again after a stop and a start without
# drives 1 and 5, which hold nothing any more. Then the array grows onto two more drives
# (`zapraid grow`, QEMU drives 8 and 9) while mounted: garbage collection moves every zone
# index onto the new placement, every file verifies, fsck is clean, and again after a stop
# and a start on the grown array's drives.
NAME=z
. /scenarios/prelude.sh
D8="/dev/ng0n1 /dev/ng1n1 /dev/ng2n1 /dev/ng3n1 /dev/ng4n1 /dev/ng5n1 /dev/ng6n1 /dev/ng7n1"
AFTER="/dev/ng0n1 /dev/ng2n1 /dev/ng3n1 /dev/ng4n1 /dev/ng6n1 /dev/ng7n1"
GROWN="$AFTER /dev/ng8n1 /dev/ng9n1"
GROW_TIMEOUT=900
FIO=/usr/bin/fio
REBUILD_TIMEOUT=900
# As the replace scenario: a new file per pass, random 4 KiB and 64 KiB direct writes
# verified as they go and all again at the end, at 1 MiB/s to leave the rebuild room.
FIO_SIZE_MIB=32
FIO_OPTS="--ioengine=io_uring --direct=1 --rw=randwrite --bssplit=4k/50:64k/50 --iodepth=16 --size=${FIO_SIZE_MIB}m \
--rate=1m --verify=crc32c --verify_fatal=1 --output-format=terse --minimal"
fail() {
    echo "FAILED: $*"
    zapraid status z 2>&1 || true
    echo "--- server log"; tail -n 60 /tmp/run/z.log
    exit 1
}
# The array's state as the first status line gives it ("z: optimal, spare space used (uuid)...").
array_state() { zapraid status z | sed -n '1s/^z: \([a-z_]*\).*/\1/p'; }
# in_spare_space DRIVE: whether the status says DRIVE's chunks are all in spare space.
in_spare_space() {
    list=$(zapraid status z --json | sed -n 's/.*"drives_in_spare_space":\[\([0-9,]*\)\].*/\1/p')
    case ",$list," in *",$1,"*) return 0 ;; esac
    return 1
}

# wait_in_spare_space DRIVE: waits until DRIVE's rebuild into spare space ends, printing
# progress; then the time, and what the server logged of it (blocks, seconds, MiB/s).
wait_in_spare_space() {
    since=$(date +%s)
    last_print=0
    while :; do
        now=$(date +%s)
        # The state first: the rebuild may end between the two looks.
        state=$(array_state)
        if [ "$state" = optimal ] && in_spare_space "$1"; then
            echo "drive $1 rebuilt into distributed spare space in about $((now - since)) s"
            break
        fi
        case $state in
            rebuilding|degraded|optimal) ;;
            *) zapraid status z --json; fail "the array is '$state' while drive $1 is rebuilt" ;;
        esac
        [ $((now - since)) -lt $REBUILD_TIMEOUT ] || fail "drive $1 not in spare space after $REBUILD_TIMEOUT s"
        if [ $((now - last_print)) -ge 15 ]; then
            zapraid status z | grep 'rebuild of' || true
            last_print=$now
        fi
        sleep 2
    done
    done_line=$(grep 'rebuild into distributed spare space complete' /tmp/run/z.log | tail -n 1)
    echo "server: $(echo "$done_line" | sed -n 's/.*\(segments=[0-9]*\).*\(blocks_written=[0-9]*\).*\(seconds=[0-9.]*\).*\(mib_per_s=[0-9.]*\).*/\1 \2 \3 \4/p')"
}

step "format RAID-5 (4+1) declustered over 8 drives, one distributed spare"
zapraid format --level raid5 --stripe-width 5 --distributed-spares 1 --name z $D8
dev=$(start $D8)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
zapraid status z | tee /tmp/status.out
grep -q "declustered: stripes of 5 over 8 drives" /tmp/status.out || fail "status does not show the placement"
$MKFS "$dev"
mkdir -p /mnt/r
mount -t ext4 "$dev" /mnt/r
step "files of known checksums"
for i in 1 2 3 4 5 6; do dd if=/dev/urandom of=/mnt/r/file$i bs=64k count=$((i * 16)) 2>/dev/null; done
mkdir /mnt/r/small
i=0
while [ $i -lt 100 ]; do dd if=/dev/urandom of=/mnt/r/small/f$i bs=4k count=$((i % 4 + 1)) 2>/dev/null; i=$((i + 1)); done
# A sealed segment or more before the drive fails: 4 x 62 MiB of data fill one.
for i in 1 2 3; do dd if=/dev/urandom of=/mnt/r/big$i bs=1M count=96 2>/dev/null; done
md5sum /mnt/r/file* /mnt/r/big* /mnt/r/small/f* > /tmp/sums
sync

step "fio --verify=crc32c in the background, a new file per pass"
fio_passes_in_background /mnt/r

step "fail drive 1 while fio runs: rebuilt into the others' spare space, no new drive"
zapraid fail z /dev/ng1n1
sleep 1
zapraid status z | grep -E '^z:|rebuild of' || true
wait_in_spare_space 1
zapraid status z | tee /tmp/status.out
grep -q "^z: optimal, spare space used" /tmp/status.out || fail "status does not say 'optimal, spare space used'"
grep -q "drive 1: .* failed (rebuilt into spare space)" /tmp/status.out || fail "drive 1 is not shown in spare space"

step "wait for fio (every pass verified)"
wait_for_fio_passes

step "fail drive 5: rebuilt into spare space too"
zapraid fail z /dev/ng5n1
wait_in_spare_space 5
echo 3 > /proc/sys/vm/drop_caches
verify_sums "drives 1 and 5 failed, both rebuilt into spare space"
verify_last_fio_pass
umount /mnt/r
$FSCK -fn "$dev" || fail "fsck found errors with drives 1 and 5 failed"
echo "fsck clean"
zapraid status z

step "stop, start without drives 1 and 5 (they hold nothing), verify"
zapraid stop z
zapraid inspect /dev/ng0n1 | head -n 2
dev=$(start $AFTER)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
zapraid status z | tee /tmp/status.out
grep -q "^z: optimal, spare space used" /tmp/status.out || fail "after the restart the array is not optimal"
mount -t ext4 "$dev" /mnt/r
verify_sums "after stop and start without drives 1 and 5"

step "grow onto drives 8 and 9 while mounted: the zone indexes move onto the new placement"
since=$(date +%s)
zapraid grow z /dev/ng8n1 /dev/ng9n1 || fail "grow refused"
last_print=0
while :; do
    left=$(zapraid status z --json | sed -n 's/.*"zone_indexes_to_grow":\([0-9]*\).*/\1/p')
    now=$(date +%s)
    [ -n "$left" ] || fail "status --json has no zone_indexes_to_grow"
    [ "$left" -eq 0 ] && break
    [ $((now - since)) -lt $GROW_TIMEOUT ] || fail "$left zone indexes still to move after $GROW_TIMEOUT s"
    if [ $((now - last_print)) -ge 15 ]; then
        zapraid status z | grep 'declustered:' || true
        last_print=$now
    fi
    sleep 2
done
echo "every zone index on the grown placement in about $(($(date +%s) - since)) s"
zapraid status z | tee /tmp/status.out
grep -q "declustered: stripes of 5 over 10 drives" /tmp/status.out || fail "status does not show 10 drives"
echo 3 > /proc/sys/vm/drop_caches
verify_sums "after the grow"
umount /mnt/r
$FSCK -fn "$dev" || fail "fsck found errors after the grow"
echo "fsck clean"
zapraid stop z
zapraid inspect /dev/ng9n1 | head -n 2

step "start on the grown array's drives, verify"
dev=$(start $GROWN)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
mount -t ext4 "$dev" /mnt/r
verify_sums "after a stop and a start of the grown array"
umount /mnt/r
$FSCK -fn "$dev" || fail "fsck found errors after the grown array's restart"
echo "fsck clean"
zapraid stop z
echo "declustered scenario passed"
