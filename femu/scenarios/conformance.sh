#!/bin/sh
# The device conformance suite on every NVMe ZNS namespace of the guest, through the
# NVMe passthrough backend.
set -e
found=0
for dev in /dev/ng*n1; do
    [ -e "$dev" ] || continue
    found=1
    zapraid device info "$dev"
    zapraid device conformance "$dev" --erase
done
[ "$found" = 1 ] || { echo "no NVMe namespaces in the guest"; exit 1; }
