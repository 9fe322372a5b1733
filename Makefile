# zapraid: `make demo` runs the main job on emulated drives; `make test` runs every check.
# Both install what they need first (scripts/install-deps.sh).

CARGO ?= cargo

.PHONY: all deps demo test fmt lint unit e2e vsmd apps soak bench clean

all: test

deps:
	./scripts/install-deps.sh

demo: deps
	$(CARGO) build --release --locked -p zapraid-cli
	./scripts/demo.sh

test: deps fmt lint unit

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	python3 scripts/rooms.py server/src --order error,drives,records,assemble,run,export,ops,control,service
	python3 scripts/rooms.py cli/src
	python3 scripts/rooms.py engine/src --order error,crc,format,checksum,parity,placement,layout,hybrid,capacity,stripe_table,l2p,pool,config,drive_command,lanes,recovery,engine,shard,cpu_cost,sim,sim_shards

unit:
	./scripts/run-tests.sh

# Real NVMe ZNS drives (QEMU's emulation) and, later, ublk: in a QEMU guest (femu/).
e2e:
	./femu/e2e.sh

# Our RAID-5 block device against Linux md RAID-5 over conventional NVMe drives of the same
# emulated hardware, in one guest boot (femu/scenarios/vsmd.sh: fio fill, random writes,
# random reads, degraded reads; the ratios ours / md): about 6 minutes, so not in `e2e`.
vsmd:
	./scripts/install-deps.sh
	./femu/setup.sh
	$(CARGO) build --release --locked -p zapraid-cli
	$(CARGO) build --release --locked -p zapraid-server --example ublk_null
	mkdir -p target/femu
	./femu/build-initramfs.sh target/femu/vsmd.gz target/release/zapraid target/release/examples/ublk_null
	./femu/run.sh --drives 4 --conv-drives 4 --metadata 64 --timeout 1200 target/femu/vsmd.gz vsmd

# The paper's real applications (Exp#11 file writes, Exp#12 a database under a TPC-C-like
# load) on ext4 over the array in the QEMU guest: about half an hour, so not in `e2e`.
# `make apps PLOT=DIR` also draws the figures into DIR.
apps:
	./femu/apps.sh $(if $(PLOT),--plot $(PLOT))

# Longer runs than `make test`'s, optimised with the debug assertions on (the `soak`
# profile): crash exploration at 20,000 crash states per scheme instead of 2,600, and the
# on-disk decoders fuzzed past their checksums with 200,000 inputs each instead of 512.
SOAK_CRASH_STATES ?= 20000
SOAK_FUZZ_CASES ?= 200000
soak: deps
	ZAPRAID_CRASH_STATES=$(SOAK_CRASH_STATES) $(CARGO) test --profile soak --locked -p zapraid-engine --test crash -- --nocapture
	ZAPRAID_FUZZ_CASES=$(SOAK_FUZZ_CASES) $(CARGO) test --profile soak --locked -p zapraid-engine -p zapraid-zns --lib fuzz_tests -- --nocapture

bench: deps
	$(CARGO) bench --locked

clean:
	$(CARGO) clean
