#!/usr/bin/env bash
# The demo `make demo` runs: the best main job that exists so far, on emulated drives.
set -euo pipefail
cd "$(dirname "$0")/.."
ZAPRAID=target/release/zapraid
DEMO_DIR=target/demo

section() { printf '\n== %s ==\n' "$*"; }

# A second run starts from nothing: an earlier run that died midway may have left its
# array's server running (it holds the drive files locked), so stop it before erasing.
export ZAPRAID_RUN_DIR="$DEMO_DIR/run"
if [ -d "$ZAPRAID_RUN_DIR" ]; then
    "$ZAPRAID" stop demo >/dev/null 2>&1 || true
    "$ZAPRAID" stop selftest >/dev/null 2>&1 || true
fi
rm -rf "$DEMO_DIR"
# If a step fails after the array started, do not leave its server behind.
trap '"$ZAPRAID" stop demo >/dev/null 2>&1 || true; "$ZAPRAID" stop selftest >/dev/null 2>&1 || true' EXIT
section "Create four emulated ZNS drives (QEMU-like geometry, sparse files)"
"$ZAPRAID" emu create --dir "$DEMO_DIR/drives" --drives 4
section "Inspect them"
"$ZAPRAID" emu info "$DEMO_DIR/drives/drive0.zns"
section "Device conformance suite on drive 0 (what real NVMe drives must pass too)"
"$ZAPRAID" device conformance "$DEMO_DIR/drives/drive0.zns" --erase
section "Timing model vs the ZapRAID paper (Figure 2, WD ZN540)"
"$ZAPRAID" emu calibrate
section "The RAID engine: (3+1)-RAID-5 over four emulated drives, write, verify, fail a drive, read degraded"
"$ZAPRAID" simulate --level raid5 --drives 4 --size 64M --fail 1
section "RAID-6 with two failed drives, then a power cut mid-write and recovery from the drives alone"
"$ZAPRAID" simulate --level raid6 --drives 6 --size 16M --fail 2 --crash
section "Bench headline: the paper's Exp#1 (writes) in virtual time"
"$ZAPRAID" bench --quick --writes-only
section "The paper's Exp#4 (RAID levels) with its figure and report"
"$ZAPRAID" bench exp4 --quick --plot "$DEMO_DIR/plots"
ls "$DEMO_DIR/plots"
section "The engine on drive files, end to end: write, stop, start, verify, fail a drive, degraded I/O"
# Its own drives: selftest formats them as an array named "selftest", and the array below
# must not have to overwrite another array's drives.
"$ZAPRAID" emu create --dir "$DEMO_DIR/selftest-drives" --drives 4
"$ZAPRAID" selftest --size 32M --erase "$DEMO_DIR"/selftest-drives/drive*.zns
section "An array on the drive files: format, start (engine and control socket), status, fail, stop"
"$ZAPRAID" format --level raid5 --group-size 16 --name demo "$DEMO_DIR"/drives/drive*.zns
if [ -e /dev/ublk-control ]; then
    echo "ublk is available: the array is exported as a block device"
    "$ZAPRAID" start --daemon "$DEMO_DIR"/drives/drive*.zns
else
    echo "This kernel has no ublk (/dev/ublk-control is missing; it needs the ublk_drv module, Linux >= 6.0),"
    echo "so there is no /dev/ublkbN here: the array runs without a block device (--no-device)."
    echo "make e2e shows the block device with ext4 and fio in a QEMU guest."
    "$ZAPRAID" start --daemon --no-device "$DEMO_DIR"/drives/drive*.zns
fi
"$ZAPRAID" status demo
"$ZAPRAID" fail demo 2
"$ZAPRAID" status demo --json
"$ZAPRAID" stop demo
# sed reads to the end (head would close the pipe early and fail the demo under pipefail).
"$ZAPRAID" inspect "$DEMO_DIR/drives/drive0.zns" | sed -n 1,4p
section "A failed drive replaced online, the rebuild followed, then a scrub of every block"
# The self-test left its array with drive 1 failed and its data on the others.
"$ZAPRAID" start --daemon --no-device "$DEMO_DIR"/selftest-drives/drive*.zns
"$ZAPRAID" emu create --dir "$DEMO_DIR/new-drive" --drives 1
"$ZAPRAID" replace selftest 1 "$DEMO_DIR/new-drive/drive0.zns" --rebuild-rate 512M
for _ in $(seq 600); do
    "$ZAPRAID" status selftest --json | grep -q '"rebuilding":false' && break
    sleep 0.2
done
"$ZAPRAID" status selftest
"$ZAPRAID" scrub selftest --wait
"$ZAPRAID" stop selftest
section "Replaying real Alibaba cloud block trace lines in the simulator"
"$ZAPRAID" replay crates/trace/tests/data/alibaba2020_sample.csv
section "Not built yet"
echo "Restarting a dead server by itself: after a crash the block device waits, held by the"
echo "kernel, until someone runs \`zapraid start\` (see README)."
