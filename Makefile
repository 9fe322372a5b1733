# zapraid: `make demo` runs the main job on emulated drives; `make test` runs every check.
# Both install what they need first (scripts/install-deps.sh).

CARGO ?= cargo

.PHONY: all deps demo test fmt lint unit e2e apps soak bench clean

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

unit:
	./scripts/run-tests.sh

# Real NVMe ZNS drives (QEMU's emulation) and, later, ublk: in a QEMU guest (femu/).
e2e:
	./femu/e2e.sh

# The paper's real applications (Exp#11 file writes, Exp#12 a database under a TPC-C-like
# load) on ext4 over the array in the QEMU guest: about half an hour, so not in `e2e`.
# `make apps PLOT=DIR` also draws the figures into DIR.
apps:
	./femu/apps.sh $(if $(PLOT),--plot $(PLOT))

# Longer crash exploration: 50,000 crash states per scheme instead of 2,600.
soak: deps
	ZAPRAID_CRASH_STATES=50000 $(CARGO) test --release --locked -p zapraid-engine --test crash -- --nocapture

bench: deps
	$(CARGO) bench --locked

clean:
	$(CARGO) clean
