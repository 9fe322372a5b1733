# What the scenarios share, sourced by them (`. /scenarios/prelude.sh`), not a scenario:
# strict shell, the run directory, the four array drives, e2fsprogs' tools by path,
# step and fail lines, and starting an array. A scenario sets NAME (its array's name)
# before sourcing this.
set -eu
export ZAPRAID_RUN_DIR=/tmp/run
D="/dev/ng0n1 /dev/ng1n1 /dev/ng2n1 /dev/ng3n1"
# busybox sh runs its own applets before PATH: name e2fsprogs' tools by path.
MKFS="/usr/bin/mke2fs -q -t ext4 -F"
FSCK=/usr/bin/fsck.ext4
step() { echo "--- $*"; }
fail() { echo "FAILED: $*"; exit 1; }
# start [ARG...]: starts array $NAME as a daemon; prints its block device.
start() { zapraid start --daemon --name "$NAME" "$@" | tail -n 1; }
# verify_sums WHAT: every file in /tmp/sums still has its checksum; else the files that
# differ and the end of the server's log, then fail.
verify_sums() {
    md5sum -c /tmp/sums > /tmp/verify.out 2>&1 || {
        grep -v ': OK$' /tmp/verify.out
        echo "--- server log"; tail -n 40 "$ZAPRAID_RUN_DIR/$NAME.log"
        fail "checksums differ ($1)"
    }
    echo "all files verify ($1)"
}
# nvme_index SERIAL: the number N of the NVMe controller whose serial run.sh made SERIAL
# (its namespace is /dev/ngNn1, as a block device nvmeNn1): the kernel probes controllers
# in parallel, so names follow no fixed order once run.sh adds drives of other kinds.
nvme_index() {
    for c in /sys/class/nvme/nvme*; do
        if [ "$(tr -d ' ' < "$c/serial")" = "$1" ]; then echo "${c##*/nvme}"; return; fi
    done
    fail "no NVMe controller with serial $1"
}
