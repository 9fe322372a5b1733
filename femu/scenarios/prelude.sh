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
# fio_passes_in_background DIR: fio with verification in the background, a new file per
# pass (DIR/fioN.dat, so that a stale block of an earlier pass, right offset and checksum,
# old data, cannot pass for a new one), each written with $FIO_OPTS and verified as it goes
# and all again at the end, until /tmp/fio.stop exists and two passes are done; the passes
# done go to /tmp/fio.passes. Fails if fio ends within 5 s. wait_for_fio_passes stops it
# and fails if a pass's verification failed.
fio_passes_in_background() {
    fio_dir=$1
    rm -f /tmp/fio.stop /tmp/fio.passes
    (
        pass=0
        while :; do
            pass=$((pass + 1))
            started=$(date +%s)
            if ! $FIO --name=pass$pass --filename="$1/fio$pass.dat" $FIO_OPTS --do_verify=1 --verify_backlog=512 \
                --randseed=$pass > /tmp/fio.$pass.out 2>&1; then
                echo "fio pass $pass FAILED:"; cat /tmp/fio.$pass.out
                exit 1
            fi
            echo "fio pass $pass: $FIO_SIZE_MIB MiB written and verified in $(($(date +%s) - started)) s"
            echo $pass > /tmp/fio.passes
            [ -e /tmp/fio.stop ] && [ $pass -ge 2 ] && exit 0
        done
    ) &
    fio_pid=$!
    sleep 5
    kill -0 $fio_pid 2>/dev/null || { wait $fio_pid || true; fail "fio ended within 5 s"; }
}
# It then adds every pass's file to /tmp/sums, and verify_last_fio_pass has fio verify
# the last one again.
wait_for_fio_passes() {
    touch /tmp/fio.stop
    wait $fio_pid || fail "fio's verification failed"
    passes=$(cat /tmp/fio.passes)
    echo "fio: $passes passes written and verified"
    pass=1
    while [ $pass -le "$passes" ]; do md5sum "$fio_dir/fio$pass.dat" >> /tmp/sums; pass=$((pass + 1)); done
    sync
}
verify_last_fio_pass() {
    $FIO --name=pass$passes --filename="$fio_dir/fio$passes.dat" $FIO_OPTS --verify_only --randseed=$passes \
        > /tmp/fio.verify.out 2>&1 || { cat /tmp/fio.verify.out; fail "fio --verify_only of fio$passes.dat"; }
    echo "fio --verify_only of fio$passes.dat passed"
}
