#!/bin/sh
# Our RAID-5 block device against Linux md RAID-5, in one boot, on the same emulated
# hardware: ours (/dev/ublkbN, 2 ublk queues) over the four ZNS drives with 64 B metadata
# (serials zns0..zns3), md over four conventional NVMe namespaces of the same QEMU device,
# size and block size (serials conv0..conv3; femu/run.sh --conv-drives 4). Each array runs
# the same fio jobs, in this order: a 1 MiB sequential fill of the region (1 job, QD 16:
# what the random jobs then read and overwrite), then for RUNTIME seconds each 4 KiB random
# writes, random reads, and random reads with one member failed (2 jobs, one pinned to each
# of the guest's CPUs, QD 16 each, direct, io_uring, all over the region). Ours runs twice,
# formatted with 1 and with 2 engine shards. Then two floors: a ublk server that stores
# nothing (`ublk_null`, the server crate's example: 2 queues, user copy as ours), with the
# fill and the 4 KiB random jobs (no ublk server fills or writes faster than it), and fio's
# own NVMe passthrough reads of the four ZNS drives (what each of our reads sends a drive);
# a ublk server sending one passthrough read per 4 KiB read pays both, so
# 1 / (1 / null + 1 / raw) is its ceiling in this boot (1.5 drive reads per read with a
# member failed), printed beside md's figures. Printed: MiB/s, IOPS and p99 completion
# latency of every job, and the ratio ours / md RAID-5. Everything is emulated under TCG:
# the ratios, not the absolute figures, are what this says. Reports only: it fails on
# errors, never on timings.
#
# md is set up through sysfs, not mdadm: the host has no mdadm, Debian's is linked against
# libudev and expects udev, which the guest does not run, and the kernel's own interface
# needs nothing more in the initramfs. The array has no superblocks (metadata_version
# none), mdadm's default geometry (512 KiB chunks, left-symmetric), md's default stripe
# cache and no write-intent bitmap, and starts clean without a resync (resync_start none,
# what mdadm --assume-clean does): the members are fresh, all zeros, so parity holds. A
# member is failed as mdadm --fail does it, by writing "faulty" to its state.
#
#   vsmd.sh [RUNTIME_SECONDS] [REGION]
NAME=v
. /scenarios/prelude.sh
runtime=${1:-25}
region=${2:-1024M}
started=$(date +%s)
zns="" conv=""
for i in 0 1 2 3; do
    zns="$zns /dev/ng$(nvme_index "zns$i")n1"
    conv="$conv nvme$(nvme_index "conv$i")n1"
done

# fio_figures FILE DIR: "MiB/s IOPS p99_ms" of the read or write side of fio's JSON (one
# group: --group_reporting); p99 is the completion latency's 99th percentile.
fio_figures() {
    awk -v dir="$2" '
        $0 ~ "^ *\"" dir "\" *: *\\{" { inside = 1 }
        inside && /"bw_bytes" *:/ && bw == "" { bw = $3 + 0 }
        inside && /"iops" *:/ && iops == "" { iops = $3 + 0 }
        inside && /"99.000000" *:/ && p99 == "" { p99 = $3 + 0 }
        END {
            if (bw == "" || iops == "" || p99 == "") { print "no " dir " figures in " FILENAME; exit 1 }
            printf "%.1f %.0f %.2f\n", bw / 1048576, iops, p99 / 1e6
        }' "$1"
}

# run_jobs LABEL DEVICE FAIL_COMMAND: the four fio jobs on DEVICE, FAIL_COMMAND (a shell
# command) between the random reads and the degraded ones; the figures to /tmp/LABEL.
run_jobs() {
    common="--filename=$2 --ioengine=io_uring --direct=1 --size=$region --iodepth=16 --randrepeat=0 --group_reporting --output-format=json"
    random="--bs=4k --numjobs=2 --cpus_allowed=0-1 --cpus_allowed_policy=split --time_based --runtime=$runtime"
    # shellcheck disable=SC2086 # the option lists are meant to split
    {
        /usr/bin/fio --name=seqfill $common --rw=write --bs=1M --numjobs=1 > "/tmp/$1-seqfill.json"
        /usr/bin/fio --name=randwrite $common $random --rw=randwrite > "/tmp/$1-randwrite.json"
        /usr/bin/fio --name=randread $common $random --rw=randread > "/tmp/$1-randread.json"
        eval "$3"
        /usr/bin/fio --name=degraded $common $random --rw=randread > "/tmp/$1-degraded.json"
    }
    : > "/tmp/$1"
    for job in seqfill:write randwrite:write randread:read degraded:read; do
        # An assignment, so that set -e stops on a JSON without the figures.
        figures=$(fio_figures "/tmp/$1-${job%:*}.json" "${job#*:}") || fail "$figures"
        echo "${job%:*} $figures" >> "/tmp/$1"
    done
    echo "vsmd: $1 done ($(($(date +%s) - started)) s in)"
}

step "md RAID-5 over$(for c in $conv; do printf ' /dev/%s' "$c"; done)"
for m in $(cat /lib/modules/md/load-order); do insmod "/lib/modules/md/$m"; done
echo md0 > /sys/module/md_mod/parameters/new_array
md=/sys/block/md0/md
echo none > $md/metadata_version
echo raid5 > $md/level
echo 2 > $md/layout
echo 524288 > $md/chunk_size
echo 4 > $md/raid_disks
slot=0
for c in $conv; do
    cat "/sys/block/$c/dev" > $md/new_dev
    echo $slot > "$md/dev-$c/slot"
    slot=$((slot + 1))
done
# Without superblocks md knows no member size: the members' (512 B sectors to KiB), whole
# chunks of it.
first_conv=$(echo "$conv" | awk '{ print $1 }')
echo $(($(cat "/sys/block/$first_conv/size") / 2 / 512 * 512)) > $md/component_size
echo none > $md/resync_start
echo active > $md/array_state
cat /proc/mdstat
[ "$(cat $md/array_state)" != inactive ] || fail "md0 did not start"
[ -b /dev/md0 ] || fail "no /dev/md0"
failed_conv=$(echo "$conv" | awk '{ print $2 }')
run_jobs md /dev/md0 "echo faulty > $md/dev-$failed_conv/state; cat /proc/mdstat"
grep -q '\[U_UU\]' /proc/mdstat || fail "md0 is not degraded after failing $failed_conv"

failed_zns=$(echo "$zns" | awk '{ print $2 }')
for shards in 1 2; do
    step "ours: RAID-5 over$zns, $shards engine shard(s), 2 ublk queues"
    # shellcheck disable=SC2086 # the drive list is meant to split
    zapraid format --force --level raid5 --shards $shards --name $NAME $zns
    # shellcheck disable=SC2086
    dev=$(start --queues 2 $zns)
    queues=$(cat "/sys/block/${dev#/dev/}/mq/"*/nr_tags 2>/dev/null | wc -l)
    [ "$queues" -eq 2 ] || fail "asked for 2 ublk queues, the kernel shows $queues"
    run_jobs "ours$shards" "$dev" "zapraid fail $NAME $failed_zns"
    zapraid status $NAME
    zapraid stop $NAME
done

# The floors: a ublk server doing nothing but copy, and the drives' own passthrough reads
# (of what ours wrote last; unwritten blocks would read faster).
step "floors: ublk_null (2 queues), fio io_uring_cmd reads of$zns"
ublk_null --queues 2 > /tmp/null.dev &
null_pid=$!
for _ in $(seq 50); do [ -s /tmp/null.dev ] && break; sleep 0.1; done
null_dev=$(cat /tmp/null.dev)
[ -b "$null_dev" ] || fail "ublk_null made no device"
floor_random="--bs=4k --numjobs=2 --cpus_allowed=0-1 --cpus_allowed_policy=split --iodepth=16 --time_based --runtime=$runtime --randrepeat=0 --group_reporting --output-format=json"
# shellcheck disable=SC2086 # the option list is meant to split
/usr/bin/fio --name=null-seqfill --filename="$null_dev" --ioengine=io_uring --direct=1 --size=$region --iodepth=16 \
    --group_reporting --output-format=json --rw=write --bs=1M --numjobs=1 > /tmp/null-seqfill.json
# shellcheck disable=SC2086
for rw in randwrite randread; do
    /usr/bin/fio --name=null-$rw --filename="$null_dev" --ioengine=io_uring --direct=1 --size=$region --rw=$rw $floor_random > "/tmp/null-$rw.json"
done
kill "$null_pid"
wait "$null_pid" || true
# shellcheck disable=SC2086
/usr/bin/fio --name=raw-randread --filename="$(echo $zns | tr ' ' ':')" --ioengine=io_uring_cmd --cmd_type=nvme \
    --size=256M --rw=randread $floor_random > /tmp/raw-randread.json
null_fill=$(fio_figures /tmp/null-seqfill.json write) || fail "$null_fill"
null_write=$(fio_figures /tmp/null-randwrite.json write) || fail "$null_write"
null_read=$(fio_figures /tmp/null-randread.json read) || fail "$null_read"
raw_read=$(fio_figures /tmp/raw-randread.json read) || fail "$raw_read"

step "figures (fio, 4 KiB random jobs: 2 jobs x QD 16, ${runtime} s each, over the first $region; fill: 1 MiB sequential, 1 job, QD 16)"
paste /tmp/md /tmp/ours1 /tmp/ours2 | awk '
    BEGIN {
        name["seqfill"] = "1 MiB sequential fill"
        name["randwrite"] = "4 KiB random write"
        name["randread"] = "4 KiB random read"
        name["degraded"] = "4 KiB random read, 1 member failed"
        printf "%-36s %-30s %-30s %-30s\n", "job", "md RAID-5", "ours, 1 shard", "ours, 2 shards"
    }
    {
        # $1 job, then MiB/s IOPS p99 for md ($2-$4), ours 1 shard ($6-$8), ours 2 shards ($10-$12)
        fig = "%7.1f MiB/s %7.0f IOPS p99 %6.2f ms"
        printf "%-36s " fig "  " fig "  " fig "\n", name[$1], $2, $3, $4, $6, $7, $8, $10, $11, $12
        ratio[NR] = sprintf("%-36s 1 shard %.2f, 2 shards %.2f", name[$1], $6 / $2, $10 / $2)
    }
    END {
        print "ratio ours / md RAID-5 (MiB/s):"
        for (i = 1; i <= NR; i++) print "  " ratio[i]
    }'
md_read_iops=$(awk '$1 == "randread" { print $3 }' /tmp/md)
md_degraded_iops=$(awk '$1 == "degraded" { print $3 }' /tmp/md)
md_fill=$(awk '$1 == "seqfill" { print $2 }' /tmp/md)
echo "floors (same jobs; MiB/s IOPS p99 ms):"
echo "  ublk_null, 1 MiB sequential fill:       $null_fill"
echo "$null_fill $md_fill" | awk '{ printf "  so no ublk server fills faster than %.1f MiB/s = %.2f of md RAID-5\n", $1, $1 / $4 }'
echo "  ublk_null, 4 KiB random write:          $null_write"
echo "  ublk_null, 4 KiB random read:           $null_read"
echo "  NVMe passthrough reads, 4 ZNS drives:   $raw_read"
# With one of four RAID-5 members failed, a quarter of the blocks (parity rotates) are
# rebuilt from the other three: 3/4 x 1 + 1/4 x 3 = 1.5 drive reads per read.
echo "$null_read $raw_read $md_read_iops $md_degraded_iops" | awk '{
    ceiling = 1 / (1 / $2 + 1 / $5)
    printf "  a ublk server reading each 4 KiB through passthrough: at most %.0f IOPS = %.2f of md RAID-5 reads\n", ceiling, ceiling / $7
    ceiling = 1 / (1 / $2 + 1.5 / $5)
    printf "  the same with 1 of 4 members failed (1.5 drive reads per read): at most %.0f IOPS = %.2f of md degraded\n", ceiling, ceiling / $8
}'
echo "vsmd: $(($(date +%s) - started)) s in all"
