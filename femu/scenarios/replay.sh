#!/bin/sh
# Trace replay on 4 QEMU ZNS drives: an Alibaba trace (the sample lines, and 20,000 lines
# generated here of which a few thousand are replayed: TCG is slow) replayed onto the
# running array's block device (no file system mounted) in closed and open loop, then onto
# the stopped array's NVMe drives through the engine. Afterwards the array verifies: a
# scrub finds no damage, data written after the replay reads back the same across a stop
# and start.
NAME=z
. /scenarios/prelude.sh

cat > /tmp/sample.csv <<'LINES'
0,R,126703661056,4096,1577808000000046
1,W,19496058880,77824,1577808000000426
2,W,9811763200,12288,1577808000000494
3,W,573190144,12288,1577808000000553
4,W,4184444928,4096,1577808000000573
0,R,126703644672,4096,1577808000000626
5,W,19546832896,4096,1577808000000809
419,W,8792731648,16384,1577808144360767
725,R,59110326272,360448,1577808144360813
12,R,350868463616,8192,1577808144360852
725,R,59110686720,466944,1577808144360891
736,R,72323657728,516096,1577808144360996
12,R,348404277248,8192,1577808144361031
LINES
# 20,000 requests, 70% writes, 4-64 KiB, over 1 TiB of offsets, 20 us apart.
awk 'BEGIN { srand(7); for (i = 0; i < 20000; i++) {
    op = (rand() < 0.7) ? "W" : "R"; len = 4096 * (1 + int(rand() * 16));
    printf "7,%s,%.0f,%d,%.0f\n", op, int(rand() * 268435456) * 4096, len, 1577808000000000 + i * 20 } }' > /tmp/gen.csv
[ "$(wc -l < /tmp/gen.csv)" -eq 20000 ] || fail "the generated trace is short"

step "format RAID-5 over 4 drives, start the block device"
zapraid format --level raid5 --name z $D
dev=$(start $D)
[ -b "$dev" ] || fail "start printed '$dev', not a block device"
step "replay the sample lines onto $dev, closed loop"
zapraid replay /tmp/sample.csv --device "$dev" --queue-depth 8 || fail "replay of the sample lines"
step "replay 6,000 of the generated lines onto $dev, closed loop, queue depth 32"
zapraid replay /tmp/gen.csv --device "$dev" --queue-depth 32 --limit 6000 --json > /tmp/closed.json \
    || fail "closed-loop replay"
grep -q '"requests": 6000' /tmp/closed.json || fail "not every request replayed: $(head -c 600 /tmp/closed.json)"
grep -E '"(iops|mib_per_s|p99_us)"' /tmp/closed.json | head -4
step "replay them open loop at 10x the trace's speed"
zapraid replay /tmp/gen.csv --device "$dev" --speed 10 --max-in-flight 64 --limit 5000 \
    || fail "open-loop replay"
zapraid status z
step "the array verifies: scrub, then data written after the replay survives stop and start"
zapraid scrub z --wait | tee /tmp/scrub.out
grep -q "0 damaged blocks, 0 parity mismatches" /tmp/scrub.out || fail "the scrub found damage"
dd if=/dev/urandom of=/tmp/pattern bs=1M count=16 2>/dev/null
dd if=/tmp/pattern of="$dev" bs=1M seek=64 oflag=direct 2>/dev/null
want=$(md5sum < /tmp/pattern)
got=$(dd if="$dev" bs=1M skip=64 count=16 iflag=direct 2>/dev/null | md5sum)
[ "$want" = "$got" ] || fail "16 MiB written after the replay read back differently"
zapraid stop z
dev=$(start $D)
[ -b "$dev" ] || fail "start after the stop printed '$dev'"
got=$(dd if="$dev" bs=1M skip=64 count=16 iflag=direct 2>/dev/null | md5sum)
[ "$want" = "$got" ] || fail "16 MiB written after the replay read back differently after a stop and start"
echo "16 MiB written after the replay read back the same after a stop and start"
zapraid stop z
step "replay onto the stopped array's NVMe drives through the engine"
zapraid replay /tmp/gen.csv --on-drives $D --queue-depth 32 --limit 4000 || fail "replay onto the drives"
dev=$(start $D)
[ -b "$dev" ] || fail "start after the drive replay printed '$dev'"
zapraid scrub z --wait | tee /tmp/scrub.out
grep -q "0 damaged blocks, 0 parity mismatches" /tmp/scrub.out || fail "the scrub after the drive replay found damage"
zapraid stop z
echo "replay scenario passed"
