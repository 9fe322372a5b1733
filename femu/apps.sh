#!/usr/bin/env bash
# `make apps`: the ZapRAID paper's real-application experiments in the QEMU guest, Exp#11
# (sysbench fileio on ext4) and Exp#12 (PostgreSQL under a TPC-C-like load), every scheme
# and open-segment setting in one boot (femu/scenarios/apps.sh says what each runs).
# Installs what it needs (femu/setup.sh --apps), builds the release CLI and an initramfs
# with the applications, runs the guest, keeps its console and the results in
# target/femu/apps/, and prints the tables with the paper's figures beside ours
# (`zapraid apps-report`), with --plot DIR also the figures. Long (about half an hour
# under TCG): not part of `make e2e`.
#
#   femu/apps.sh [--plot DIR] [SCENARIO-ARG...]   (default: fileio tpcc)
set -euo pipefail
cd "$(dirname "$0")/.."
plot=()
if [ "${1:-}" = --plot ]; then plot=(--plot "$2"); shift 2; fi
args=("$@")
[ "${#args[@]}" -gt 0 ] || args=(fileio tpcc)
./scripts/install-deps.sh
./femu/setup.sh --apps
cargo build --release --locked -p zapraid-cli
out=target/femu/apps
mkdir -p "$out"
./femu/build-initramfs.sh --apps "$out/initramfs.gz" target/release/zapraid
./femu/run.sh --drives 4 --metadata 64 --timeout 5400 "$out/initramfs.gz" apps "${args[@]}" | tee "$out/console.log"
sed -n 's/^APPS-RESULT //p' "$out/console.log" > "$out/results.txt"
echo "apps: results in $out/results.txt"
target/release/zapraid apps-report "$out/results.txt" "${plot[@]}"
