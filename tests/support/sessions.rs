//! Session files on disk: finding them in a session dir and reading their entries.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The `.jsonl` files directly in `dir`, sorted (a missing dir counts as empty).
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    v
}

/// The one `.jsonl` file in `dir` (panics unless there is exactly one).
pub fn only_jsonl(dir: &Path) -> PathBuf {
    let files = jsonl_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// The first file `dir` lists (panics if there is none).
pub fn first_file(dir: &Path) -> PathBuf {
    fs::read_dir(dir)
        .expect("session dir")
        .next()
        .expect("a session file")
        .expect("dir entry")
        .path()
}

/// Every line of the file at `path` as JSON (panics if it cannot be read or a line is not JSON).
pub fn entries(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line ({e}): {l}")))
        .collect()
}
