#!/usr/bin/env bash
# The demo `make demo` runs: the best main job that exists so far, on emulated drives.
set -euo pipefail
cd "$(dirname "$0")/.."
ZAPRAID=target/release/zapraid
DEMO_DIR=target/demo

section() { printf '\n== %s ==\n' "$*"; }

rm -rf "$DEMO_DIR"
section "Create four emulated ZNS drives (QEMU-like geometry, sparse files)"
"$ZAPRAID" emu create --dir "$DEMO_DIR/drives" --drives 4
section "Inspect them"
"$ZAPRAID" emu info "$DEMO_DIR/drives/drive0.zns"
section "Device conformance suite on drive 0 (what real NVMe drives must pass too)"
"$ZAPRAID" device conformance "$DEMO_DIR/drives/drive0.zns" --erase
section "Timing model vs the ZapRAID paper (Figure 2, WD ZN540)"
"$ZAPRAID" emu calibrate
section "Not built yet"
echo "The RAID engine and the ublk block device are the next milestones (see README)."
echo "Real NVMe ZNS drives work through io_uring passthrough: make e2e proves it in a QEMU guest."
