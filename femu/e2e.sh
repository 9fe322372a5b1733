#!/usr/bin/env bash
# `make e2e`: every scenario in the QEMU guest with emulated NVMe ZNS drives. Installs
# what it needs (femu/setup.sh), builds the release binaries and the initramfs, runs the
# scenarios, and closes with a count of passed and failed scenarios. Not here, for their
# length: the comparison with md RAID-5 (`make vsmd`, about 6 minutes) and the paper's
# applications (`make apps`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./femu/setup.sh
cargo build --release --locked -p zapraid-cli
mkdir -p target/femu
initramfs=target/femu/initramfs.gz
./femu/build-initramfs.sh "$initramfs" target/release/zapraid

passed=0 failed=0 failures=()
# Each scenario's output is also kept, so that the end of a failed one is printed again
# last: CI keeps only the end of what `make e2e` prints.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
scenario() {
    local name=$1; shift
    local log="$logs/$((passed + failed)).log"
    echo "=== e2e: $name"
    if ./femu/run.sh "$@" 2>&1 | tee "$log"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$name")
        cp "$log" "$logs/failed-${#failures[@]}.log"
    fi
}
scenario "conformance, 2 drives, 64 B metadata" --drives 2 --metadata 64 "$initramfs" conformance
scenario "conformance, 16 B metadata" --drives 1 --metadata 16 "$initramfs" conformance
scenario "conformance, no metadata" --drives 1 --metadata 0 "$initramfs" conformance
scenario "conformance, 64 B metadata interleaved (extended LBAs, as NVMe over Fabrics carries it)" --drives 1 --metadata 64 --metadata-interleaved "$initramfs" conformance
scenario "engine alone over NVMe with interleaved metadata: write, stop/start, fail, degraded, restart" --drives 4 --metadata 64 --metadata-interleaved "$initramfs" engine
scenario "conformance, small zone limits" --drives 1 --max-open 4 --max-active 6 --zone-capacity 48M "$initramfs" conformance
scenario "device benchmark vs fio" --drives 1 --metadata 0 --timeout 900 "$initramfs" bench
scenario "engine alone over NVMe: write, stop/start, fail, degraded, restart" --drives 4 --metadata 64 "$initramfs" engine
scenario "block device: ext4, stop/start, fail, kill -9, fio verify, RAID-6" --drives 4 --metadata 64 --timeout 1200 "$initramfs" blockdev
scenario "hybrid open segments (2 x 8K + 2 x 16K chunks): limits, selftest, ext4, fio verify, failed drive" --drives 4 --metadata 64 --timeout 1200 "$initramfs" hybrid
scenario "bounded L2P table: checkpointed starts, ext4, fio verify, kill -9 replay, degraded start" --drives 4 --metadata 64 --timeout 1200 "$initramfs" l2p
scenario "replace a failed drive under ext4 and fio verify (5 drives), then fail another" --drives 5 --metadata 64 --timeout 1800 "$initramfs" replace
scenario "declustered: RAID-5 (4+1) over 8 drives, 1 distributed spare, ext4, fio verify, 2 drives failed into spare space, grown onto 2 more" --drives 10 --metadata 64 --drive-size 1G --timeout 1800 "$initramfs" declustered
scenario "trace replay onto the block device and the drives, then scrub and verify" --drives 4 --metadata 64 --timeout 1200 "$initramfs" replay
scenario "format refuses drives without metadata" --drives 4 --metadata 0 "$initramfs" refuse-bare
scenario "block device throughput vs a raw drive" --drives 4 --bare-drives 1 --metadata 64 --timeout 900 "$initramfs" blockperf
for ((i = 1; i <= ${#failures[@]}; i++)); do
    echo "=== e2e: the end of what the failed scenario '${failures[i - 1]}' printed"
    tail -n 60 "$logs/failed-$i.log"
done
[ "$failed" -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
echo "e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
