#!/bin/sh
# Is the guest sane: NVMe namespaces present, zapraid runs.
ls -l /dev/ng* /dev/nvme* 2>&1
uname -r
zapraid --version
