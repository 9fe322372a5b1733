#!/usr/bin/env bash
# Runs the workspace's tests and closes with one line adding up every test binary's
# result ("summary: N passed, N failed, N skipped"), so a reader of the log need not add
# up the per-binary lines (the last of which is often an empty doc-test run).
set -euo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) passed += $i
            if ($(i+1) ~ /^failed/) failed += $i
            if ($(i+1) ~ /^ignored/) ignored += $i
        }
     }
     END { printf "summary: %d passed, %d failed, %d skipped\n", passed, failed, ignored }' "$log"
exit "$status"
