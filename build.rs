//! Link pith's executables as position-dependent on Linux/glibc (`-no-pie`).
//!
//! A position-independent executable has its pointer tables (`.data.rel.ro`: vtables, string
//! tables, the built-in model table, panic locations; 400 KiB of them) patched by the dynamic
//! loader at every start, which makes those pages private to each process: 0.4 MiB of memory per
//! agent that hundreds of agents on one host each pay, plus 18,000 relocations at every cold
//! start. Linked at a fixed address, those pages stay clean and shared by every pith process
//! (`docs/architecture.md`, "Memory per agent"). The price is that pith's own code and data are
//! not randomised (ASLR still applies to the libraries, stack and heap). `PITH_PIE=1` at build
//! time keeps the default (PIE). The static musl build gets the same from the Makefile
//! (`make static`: `-C relocation-model=static`, or a static-PIE with `PITH_PIE=1`).
//!
//! A static musl binary never has a dynamic loader: `--no-dynamic-linker`. musl-gcc's specs name
//! `/lib/ld-musl-x86_64.so.1` in every link, and lld (which `make static` uses for identical code
//! folding) then writes a `PT_INTERP` even into a `-static` executable: the kernel starts musl's
//! loader on it, which crashes on a binary that has no dynamic section.

fn main() {
    println!("cargo:rerun-if-env-changed=PITH_PIE");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" && std::env::var_os("PITH_PIE").is_none() {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    // Static unless the flags say `-crt-static` (cargo leaves `crt-static` out of
    // CARGO_CFG_TARGET_FEATURE, so the flags are what tells).
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if os == "linux" && env == "musl" && !flags.contains("-crt-static") {
        println!("cargo:rustc-link-arg-bins=-Wl,--no-dynamic-linker");
    }
}
