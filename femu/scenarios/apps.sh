#!/bin/sh
# The ZapRAID paper's real applications on ext4 over the array's block device (RAID-5 over
# the guest's 4 ZNS drives), for each scheme (ZapRAID, ZoneWrite-Only, ZoneAppend-Only)
# and each of the paper's four open-segment settings (one segment of 4 KiB chunks, one of
# 16 KiB, (Ns, Nl) = (2, 2) and (1, 3) with Cs = 8 KiB, Cl = 16 KiB), all in one run:
#  - fileio (Exp#11): sysbench fileio prepares files, then writes 64 KiB blocks at random
#    offsets of them for a while, one thread, asynchronous I/O, O_DIRECT, fsync at the end;
#    throughput in MiB/s.
#  - tpcc (Exp#12): PostgreSQL 15 under a TPC-C-like load (femu/apps/tpcc: the five TPC-C
#    transactions at the standard mix, pgbench as the driver; not an audited TPC-C),
#    loaded once on tmpfs and copied onto each array; transactions per second.
# Each result is one line `APPS-RESULT <exp11|exp12> <scheme> <setting> <value>` for
# femu/apps.sh to collect. Everything is scaled to the guest (2 GiB of memory, 2 GiB
# drives) and emulated: the ratios between schemes, not the absolute figures, are what
# this says. Fails on errors, never on timings.
#
#   apps.sh [fileio] [tpcc] [KEY=VALUE...]
#     fileio_s=20 fileio_files=8 fileio_size=256M   (sysbench: seconds, files, total size)
#     tpcc_s=30 warehouses=1 clients=8              (pgbench: seconds, warehouses, connections)
#     schemes="zapraid zone-write zone-append" settings="4k 16k 2-2 1-3" (space-separated)
set -eu
export ZAPRAID_RUN_DIR=/tmp/run
D="/dev/ng0n1 /dev/ng1n1 /dev/ng2n1 /dev/ng3n1"
MKFS="/usr/bin/mke2fs -q -t ext4 -F"
PG=/usr/lib/postgresql/15/bin
TPCC=/apps/tpcc
fileio=0 tpcc=0
fileio_s=20 fileio_files=8 fileio_size=256M
tpcc_s=30 warehouses=1 clients=8
schemes="zapraid zone-write zone-append" settings="4k 16k 2-2 1-3"
for arg in "$@"; do
    case $arg in
        fileio) fileio=1 ;;
        tpcc) tpcc=1 ;;
        fileio_s=* | fileio_files=* | fileio_size=* | tpcc_s=* | warehouses=* | clients=*) eval "$arg" ;;
        schemes=*) schemes=$(echo "${arg#schemes=}" | tr '+' ' ') ;;
        settings=*) settings=$(echo "${arg#settings=}" | tr '+' ' ') ;;
        *) echo "apps: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done
[ $((fileio + tpcc)) -gt 0 ] || { echo "apps: name fileio, tpcc or both" >&2; exit 2; }
step() { echo "--- $*"; }
fail() { echo "FAILED: $*"; [ ! -f /tmp/run/a.log ] || tail -n 30 /tmp/run/a.log; exit 1; }
# A run's figure, from the file its function writes it to.
result() { cat /tmp/result 2>/dev/null; }

setting_options() {
    case $1 in
        4k) echo "--small-chunk 4K" ;;
        16k) echo "--small-chunk 16K" ;;
        2-2) echo "--small-chunk 8K --large-chunk 16K --small-segments 2 --large-segments 2" ;;
        1-3) echo "--small-chunk 8K --large-chunk 16K --small-segments 1 --large-segments 3" ;;
        *) fail "unknown setting '$1'" ;;
    esac
}

# A fresh array of scheme $1 and setting $2 with ext4 mounted on /mnt/a.
array_up() {
    # shellcheck disable=SC2046 # the options are words
    zapraid format --level raid5 --name a --force --mode "$1" $(setting_options "$2") $D >/dev/null 2>/tmp/format.err \
        || { cat /tmp/format.err; fail "format --mode $1 ($2)"; }
    dev=$(zapraid start --daemon --name a $D | tail -n 1)
    [ -b "$dev" ] || fail "start printed '$dev', not a block device"
    $MKFS "$dev"
    mkdir -p /mnt/a
    mount -t ext4 "$dev" /mnt/a
}
array_down() {
    umount /mnt/a
    zapraid stop a >/dev/null
}

# Exp#11 on the mounted array: MiB/s written, to /tmp/result.
run_fileio() {
    mkdir /mnt/a/fileio
    cd /mnt/a/fileio
    common="--file-num=$fileio_files --file-total-size=$fileio_size --file-block-size=65536"
    # shellcheck disable=SC2086
    sysbench fileio $common prepare > /tmp/sysbench-prepare.out || { cat /tmp/sysbench-prepare.out; fail "sysbench prepare"; }
    sync
    # shellcheck disable=SC2086
    sysbench fileio $common --file-test-mode=rndwr --file-io-mode=async --file-extra-flags=direct \
        --file-fsync-freq=0 --file-fsync-end=on --threads=1 --time="$fileio_s" run > /tmp/sysbench.out \
        || { cat /tmp/sysbench.out; fail "sysbench run"; }
    cd /
    sed -n 's/.*written, MiB\/s: *\([0-9.]*\).*/\1/p' /tmp/sysbench.out > /tmp/result
}

# PostgreSQL as the user postgres: the server refuses to run as root.
as_pg() { su -s /bin/sh postgres -c "$*"; }
PG_OPTS="-c listen_addresses='' -k /tmp -c jit=off -c shared_buffers=256MB -c max_wal_size=1GB \
-c checkpoint_timeout=30s -c synchronous_commit=off -c wal_writer_delay=1000ms -c wal_level=minimal \
-c max_wal_senders=0 -c wal_sync_method=open_datasync -c max_connections=$((clients + 5))"
psql_q() { as_pg "$PG/psql -h /tmp -d postgres -q -v ON_ERROR_STOP=1 $*"; }

# The TPC-C-like database, loaded once on tmpfs (/tmp/pgdata), copied onto each array.
load_tpcc() {
    mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
    mkdir -p /tmp/pgdata && chown postgres /tmp/pgdata
    as_pg "$PG/initdb -D /tmp/pgdata --locale=C -E UTF8 -A trust" > /tmp/initdb.out 2>&1 \
        || { cat /tmp/initdb.out; fail "initdb"; }
    as_pg "$PG/pg_ctl -D /tmp/pgdata -w -l /tmp/pg-load.log -o \"$PG_OPTS\" start" >/dev/null \
        || { cat /tmp/pg-load.log; fail "postgres start (load)"; }
    t0=$(date +%s)
    psql_q "-f $TPCC/schema.sql -f $TPCC/transactions.sql" || fail "TPC-C schema"
    psql_q "-v warehouses=$warehouses -f $TPCC/load.sql" || fail "TPC-C load"
    echo "loaded $warehouses warehouse(s) in $(($(date +%s) - t0)) s: $(du -sm /tmp/pgdata | cut -f1) MiB"
    as_pg "$PG/pg_ctl -D /tmp/pgdata -w stop" >/dev/null
}

# Exp#12 on the mounted array: transactions per second, to /tmp/result.
run_tpcc() {
    cp -a /tmp/pgdata /mnt/a/pgdata
    sync
    as_pg "$PG/pg_ctl -D /mnt/a/pgdata -w -l /tmp/pg.log -o \"$PG_OPTS\" start" >/dev/null \
        || { cat /tmp/pg.log; fail "postgres start"; }
    as_pg "cd $TPCC && $PG/pgbench -h /tmp -n -c $clients -j 2 -T $tpcc_s -D warehouses=$warehouses \
        -f new_order.pgb@45 -f payment.pgb@43 -f order_status.pgb@4 -f delivery.pgb@4 -f stock_level.pgb@4 postgres" \
        > /tmp/pgbench.out 2>&1 || { cat /tmp/pgbench.out; fail "pgbench"; }
    as_pg "$PG/pg_ctl -D /mnt/a/pgdata -w stop" >/dev/null
    grep -q "number of failed transactions: 0 " /tmp/pgbench.out || { cat /tmp/pgbench.out; fail "pgbench: failed transactions"; }
    sed -n 's/^tps = \([0-9.]*\) .*/\1/p' /tmp/pgbench.out > /tmp/result
}

[ "$tpcc" -eq 0 ] || { step "TPC-C-like database: $warehouses warehouse(s) on tmpfs"; load_tpcc; }
for setting in $settings; do
    for scheme in $schemes; do
        if [ "$fileio" -eq 1 ]; then
            step "Exp#11 $scheme $setting: sysbench fileio, $fileio_files files of $fileio_size in all, 64 KiB random writes, ${fileio_s} s"
            array_up "$scheme" "$setting"
            run_fileio
            mibps=$(result)
            [ -n "$mibps" ] || { cat /tmp/sysbench.out; fail "no throughput in sysbench's output"; }
            array_down
            echo "APPS-RESULT exp11 $scheme $setting $mibps"
        fi
        if [ "$tpcc" -eq 1 ]; then
            step "Exp#12 $scheme $setting: PostgreSQL, TPC-C-like, $clients connections, ${tpcc_s} s"
            array_up "$scheme" "$setting"
            run_tpcc
            tps=$(result)
            [ -n "$tps" ] || { cat /tmp/pgbench.out; fail "no TPS in pgbench's output"; }
            array_down
            echo "APPS-RESULT exp12 $scheme $setting $tps"
        fi
    done
done
echo "apps scenario done"
