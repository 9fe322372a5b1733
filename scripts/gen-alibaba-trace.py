#!/usr/bin/env python3
"""Writes a synthetic trace in the Alibaba 2020 block trace format, gzipped, for trying
`zapraid replay` at scale: `device_id,opcode,offset,length,timestamp` lines, a
deterministic mix of reads (1 in 3) and writes of 4 to 32 KiB over 100 devices, about 1%
unaligned, 10 us apart. The same generator as cli/tests/replay.rs.

usage: scripts/gen-alibaba-trace.py LINES OUT.csv.gz
"""
import gzip
import sys

MASK = (1 << 64) - 1


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    lines, out = int(sys.argv[1]), sys.argv[2]
    x = 0x2545F4914F6CDD1D
    with gzip.open(out, "wt", compresslevel=1) as f:
        batch = []
        for i in range(lines):
            x ^= (x << 13) & MASK
            x ^= x >> 7
            x ^= (x << 17) & MASK
            op = "R" if x % 3 == 0 else "W"
            length = 4096 * (1 + (x >> 8) % 8)
            offset = ((x >> 16) % (1 << 24)) * 4096 + (512 if x % 97 == 0 else 0)
            batch.append(f"{i % 100},{op},{offset},{length},{1577808000000000 + i * 10}\n")
            if len(batch) == 65536:
                f.write("".join(batch))
                batch.clear()
        f.write("".join(batch))


if __name__ == "__main__":
    main()
