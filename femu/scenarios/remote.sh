#!/bin/sh
# Drives on other machines (issue 36), through the kernel's NVMe over TCP: each of the
# guest's 5 ZNS drives (metadata interleaved with data, as fabrics carry it) sits behind
# its own "storage node", a network namespace joined to the host's by a veth pair whose
# node side is shaped with tbf, exported there by the kernel's NVMe target (nvmet,
# passthrough, over TCP) and connected back from the host namespace with nvme-tcp. The
# array then runs on the remote /dev/ngXnY exactly as on local ones: the conformance suite
# on one, then RAID-5 over four with ext4, files of known checksums and fio --verify,
# kill -9 of the server under the mounted file system and a start that takes the device
# over, a failed drive replaced by the fifth remote drive, files verify, fsck clean.
# Nothing leaves the guest: its namespaces and addresses exist only inside it.
#
# Not in `make e2e`: Linux's NVMe target (6.12) blanks every LBA format with metadata in
# what it passes on of Identify Namespace, so the array's per-block metadata cannot reach
# a remote drive through it, and this scenario stops at the conformance suite's refusal
# of the remote drive (docs/manual/remote-drives.md). Everything before works: the nodes,
# their links, the target's ports in the nodes' namespaces, the host's connections.
NAME=z
. /scenarios/prelude.sh
IP=/usr/bin/ip2
TC=/usr/bin/tc2
NODES=5
# Each node's link: what a storage node's NIC gives (the host side is left unshaped).
NODE_RATE=2gbit
CFG=/sys/kernel/config/nvmet

step "load NVMe/TCP (target and host), veth and tbf"
for m in $(cat /lib/modules/net/load-order); do insmod "/lib/modules/net/$m" || fail "insmod $m"; done
grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
# Where iproute2 keeps named network namespaces.
mkdir -p /run/netns /var/run/netns

# The host-side generic namespace device of the fabrics subsystem named $1.
remote_ng() {
    for s in /sys/class/nvme-subsystem/nvme-subsys*; do
        if [ "$(cat "$s/subsysnqn")" = "$1" ]; then
            n=${s##*nvme-subsys}
            echo "/dev/ng${n}n1"
            return
        fi
    done
}

REMOTE=""
i=0
while [ $i -lt $NODES ]; do
    ctrl=$(nvme_index zns$i)
    nqn=nqn.2026-11.org.zapraid:node$i
    step "storage node $i: /dev/nvme$ctrl behind 10.9.$i.2, its link $NODE_RATE"
    $IP netns add node$i || fail "netns node$i"
    $IP link add h$i type veth peer name n$i || fail "veth h$i"
    $IP link set n$i netns node$i
    $IP addr add 10.9.$i.1/24 dev h$i
    $IP link set h$i up
    $IP netns exec node$i $IP link set lo up
    $IP netns exec node$i $IP addr add 10.9.$i.2/24 dev n$i
    $IP netns exec node$i $IP link set n$i up
    $IP netns exec node$i $TC qdisc add dev n$i root tbf rate $NODE_RATE burst 256kb latency 50ms || fail "tbf"
    sub=$CFG/subsystems/$nqn
    mkdir "$sub"
    echo 1 > "$sub/attr_allow_any_host"
    echo "/dev/nvme$ctrl" > "$sub/passthru/device_path"
    # The drive's own IDs stay with its local namespace: the host would take the remote
    # one for a duplicate and ignore it.
    echo 1 > "$sub/passthru/clear_ids"
    echo 1 > "$sub/passthru/enable" || { dmesg | tail -n 25; fail "passthrough of /dev/nvme$ctrl"; }
    port=$CFG/ports/$((i + 1))
    mkdir "$port"
    echo tcp > "$port/addr_trtype"
    echo ipv4 > "$port/addr_adrfam"
    echo "10.9.$i.2" > "$port/addr_traddr"
    echo 4420 > "$port/addr_trsvcid"
    # The port listens in the network namespace of whoever links the subsystem to it: the
    # node's (nsenter enters that alone; `ip netns exec` would remount /sys without
    # configfs).
    nsenter --net=/run/netns/node$i ln -s "$sub" "$port/subsystems/$nqn" || fail "port of node $i"
    # The host's own NQN and ID (the kernel's default host): a host NQN given alone would
    # clash with the default host's ID.
    echo "transport=tcp,traddr=10.9.$i.2,trsvcid=4420,nqn=$nqn" > /dev/nvme-fabrics \
        || { dmesg | tail -n 25; fail "nvme-tcp connect to node $i"; }
    ng=""
    tries=0
    while [ -z "$ng" ] || [ ! -e "$ng" ]; do
        [ $tries -lt 100 ] || fail "no namespace device for $nqn"
        sleep 0.1
        tries=$((tries + 1))
        ng=$(remote_ng "$nqn")
    done
    echo "node $i: $nqn is $ng on the host, over TCP"
    REMOTE="$REMOTE $ng"
    i=$((i + 1))
done
set -- $REMOTE
ARRAY="$1 $2 $3 $4"
SPARE=$5

step "conformance of a remote drive"
zapraid device info "$1"
zapraid device conformance "$1" --erase || fail "conformance over NVMe/TCP"

step "format RAID-5 over four remote drives, ext4, files of known checksums"
zapraid format --level raid5 --name z $ARRAY
dev=$(start $ARRAY)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
$MKFS "$dev"
mkdir -p /mnt/r
mount -t ext4 "$dev" /mnt/r
for f in 1 2 3 4; do dd if=/dev/urandom of=/mnt/r/file$f bs=64k count=$((f * 32)) 2>/dev/null; done
md5sum /mnt/r/file* > /tmp/sums
sync
/usr/bin/fio --name=remote --filename=/mnt/r/fio.dat --ioengine=io_uring --direct=1 --rw=randwrite \
    --bssplit=4k/50:64k/50 --iodepth=16 --size=32m --verify=crc32c --do_verify=1 --verify_fatal=1 \
    --output-format=terse --minimal > /tmp/fio.out || { cat /tmp/fio.out; fail "fio verify over NVMe/TCP"; }
echo "fio --verify passed over NVMe/TCP"
md5sum /mnt/r/fio.dat >> /tmp/sums
verify_sums "written over NVMe/TCP"

step "kill -9 of the server under the mounted file system, start again"
pid=$(pidof zapraid)
kill -9 $pid
sleep 1
again=$(start $ARRAY)
[ "$again" = "$dev" ] || fail "the restarted server exported $again, not $dev again"
echo 3 > /proc/sys/vm/drop_caches
verify_sums "after kill -9 and a start"

step "fail a remote drive, replace it by the fifth"
zapraid fail z "$2"
zapraid replace z "$2" "$SPARE" || fail "replace"
tries=0
until zapraid status z | grep -q '^z: optimal'; do
    [ $tries -lt 900 ] || fail "no rebuild after 900 s"
    sleep 1
    tries=$((tries + 1))
done
echo "rebuilt over NVMe/TCP in about $tries s"
grep 'rebuild complete' /tmp/run/z.log | tail -n 1
zapraid fail z "$3"
echo 3 > /proc/sys/vm/drop_caches
verify_sums "drive 1 rebuilt onto $SPARE, drive 2 failed"
umount /mnt/r
$FSCK -fn "$dev" || fail "fsck found errors"
echo "fsck clean"
for i in 0 1 2 3 4; do
    $IP -s link show h$i | sed -n '4p' | awk -v i=$i '{ print "host side of node " i ": " $1 " bytes received" }'
done
zapraid stop z
echo "remote scenario passed"
