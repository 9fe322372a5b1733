#!/bin/sh
# Drives without per-block metadata cannot hold an array: format refuses them and says why.
export ZAPRAID_RUN_DIR=/tmp/run
if out=$(zapraid format --level raid5 /dev/ng0n1 /dev/ng1n1 /dev/ng2n1 /dev/ng3n1 2>&1); then
    echo "format accepted drives without metadata: $out"; exit 1
fi
echo "$out"
echo "$out" | grep -q "per-block metadata" || { echo "the refusal does not say why"; exit 1; }
