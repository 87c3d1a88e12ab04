# pith — see README.md
CARGO ?= cargo

.PHONY: build run test lint static bench fmt clean

build:
	$(CARGO) build --release

# A demo RPC conversation on the built-in offline provider (no network, no API key).
run: build
	./fixtures/demo/run.sh ./target/release/pith

test:
	$(CARGO) test --all-targets

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

# Fully static binary (musl), target/x86_64-unknown-linux-musl/release/pith.
# Needs: rustup target add x86_64-unknown-linux-musl; musl-gcc (Debian: apt-get install musl-tools)
# for the C parts of the TLS crypto (ring).
static:
	CC_x86_64_unknown_linux_musl=musl-gcc $(CARGO) build --release --target x86_64-unknown-linux-musl

bench: build
	$(CARGO) run --release --features bench --bin pith-bench

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
