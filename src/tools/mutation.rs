//! pi's `withFileMutationQueue`: the `edit` and `write` calls of one file run one after the
//! other, in the order the calls were started, so parallel calls on the same file never lose
//! each other's changes. The state machine keeps the queue (`core/agent.rs`: a call whose file
//! another call of the batch is still changing waits in `ToolBatch::held` until that call ends);
//! this is the pure part: which file a call changes.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The file an `edit` or `write` call with `args` changes (its absolute path, the key of its
/// queue); `None` for other calls.
pub fn key(tool: &str, args: &Value, cwd: &Path) -> Option<PathBuf> {
    if !matches!(tool, "edit" | "write") {
        return None;
    }
    let path = args.get("path")?.as_str()?;
    Some(super::paths::resolve_to_cwd(path, cwd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edits_and_writes_of_one_file_share_a_key() {
        let cwd = Path::new("/nonexistent-mutation-test");
        let a = key("edit", &json!({"path": "f.txt"}), cwd).unwrap();
        let b = key("write", &json!({"path": "./f.txt"}), cwd).unwrap();
        let other = key("write", &json!({"path": "g.txt"}), cwd).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_eq!(key("read", &json!({"path": "f.txt"}), cwd), None);
        assert_eq!(key("edit", &json!({"path": 3}), cwd), None);
    }
}
