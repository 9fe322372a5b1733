#!/bin/sh
# The engine alone on 4 QEMU ZNS drives through the NVMe passthrough backend, no block
# device: RAID-5 format, write, read back, stop, start, verify, fail a drive, degraded
# read and write, restart with the failure recorded, verify.
set -e
export ZAPRAID_RUN_DIR=/tmp/run
zapraid selftest --level raid5 --size 64M --erase /dev/ng0n1 /dev/ng1n1 /dev/ng2n1 /dev/ng3n1
