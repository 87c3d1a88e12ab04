//! pi's TypeScript extensions, hosted by node (docs/extensions.md, "pi's TypeScript
//! extensions"). pith has no JavaScript runtime of its own: when a pi extension (`.ts` / `.js`)
//! is configured, pith finds `node` ≥ 22.18 (which strips TypeScript types natively), writes the
//! host program shipped inside its binary (`src/ext/node_host/*.mjs`) into a private temporary
//! directory, and starts one host process per session that loads every such extension and speaks
//! pith's extension protocol. To the state machine the host is one more extension.
//!
//! Without a usable node a configured pi extension is never dropped silently: pith refuses to
//! start (exit 2) with a message naming each extension and the ways on ([`refusal`]).

use std::path::{Path, PathBuf};

/// The host program and its shims, written next to each other at start.
pub const FILES: [(&str, &str); 5] = [
    ("host.mjs", include_str!("node_host/host.mjs")),
    ("typebox.mjs", include_str!("node_host/typebox.mjs")),
    ("pi-ai.mjs", include_str!("node_host/pi-ai.mjs")),
    ("pi-tui.mjs", include_str!("node_host/pi-tui.mjs")),
    (
        "pi-coding-agent.mjs",
        include_str!("node_host/pi-coding-agent.mjs"),
    ),
];

/// The oldest node that loads TypeScript without flags (type stripping on by default).
pub const MIN_NODE: (u32, u32) = (22, 18);

/// A node fit to host extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub path: PathBuf,
}

/// Why no node can host the extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeProblem {
    /// None found (`PITH_NODE`, settings `pith.node`, `PATH`).
    NotFound,
    /// Found at `path` but it could not be run, or the host died before loading anything.
    Broken { path: PathBuf, error: String },
    /// Found, too old.
    TooOld { path: PathBuf, version: String },
}

/// The node to use: `PITH_NODE`, then settings `pith.node`, then the first `node` on `PATH`.
pub fn locate(
    env_node: Option<&str>,
    setting: Option<&str>,
    path_var: Option<&str>,
) -> Option<PathBuf> {
    if let Some(p) = env_node.filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = setting.filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    for dir in path_var.unwrap_or("").split(':').filter(|d| !d.is_empty()) {
        let c = Path::new(dir).join("node");
        if is_executable(&c) {
            return Some(c);
        }
    }
    None
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Find node. Its version is not asked here (`node --version` would cost start-up 20-40 ms):
/// the host checks `process.version` first thing and says `node_too_old`, and pith then stops
/// before any run, as it does here when there is no node at all.
pub fn find(setting: Option<&str>) -> Result<Node, NodeProblem> {
    let env_node = std::env::var("PITH_NODE").ok();
    let path_var = std::env::var("PATH").ok();
    let Some(path) = locate(env_node.as_deref(), setting, path_var.as_deref()) else {
        return Err(NodeProblem::NotFound);
    };
    if !is_executable(&path) {
        return Err(NodeProblem::Broken {
            error: "not an executable file".to_string(),
            path,
        });
    }
    Ok(Node { path })
}

/// The message of pith's refusal to start (exit 2): each extension named, and the three ways on.
pub fn refusal(problem: &NodeProblem, extensions: &[PathBuf]) -> String {
    let why = match problem {
        NodeProblem::NotFound => {
            "no `node` was found (PITH_NODE, settings pith.node, PATH)".to_string()
        }
        NodeProblem::Broken { path, error } => {
            format!("{} cannot be run: {error}", path.display())
        }
        NodeProblem::TooOld { path, version } => format!(
            "{} is node {version}, older than {}.{} (TypeScript type stripping)",
            path.display(),
            MIN_NODE.0,
            MIN_NODE.1
        ),
    };
    let mut s = format!(
        "pith: {} pi extension{} configured, and pith runs pi's extensions with node >= {}.{}: {why}.\n",
        extensions.len(),
        if extensions.len() == 1 {
            " is"
        } else {
            "s are"
        },
        MIN_NODE.0,
        MIN_NODE.1
    );
    for e in extensions {
        s.push_str(&format!("  {}\n", e.display()));
    }
    s.push_str(&format!(
        "pith does not start without them. Either install node >= {}.{} (or point PITH_NODE or settings \"pith.node\" at one), run with --no-extensions, or remove the extension{} from the configuration.",
        MIN_NODE.0,
        MIN_NODE.1,
        if extensions.len() == 1 { "" } else { "s" }
    ));
    s
}

/// Write the host program into `dir` (a private 0700 directory): the path of `host.mjs`.
pub fn write_program(dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    for (name, text) in FILES {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(dir.join("host.mjs"))
}

/// node's arguments: the host alone. It loads TypeScript in node's transform mode itself (a
/// load hook calling `module.stripTypeScriptTypes`), so no flag an old node would reject.
pub fn node_args(host: &Path) -> Vec<String> {
    vec![host.to_string_lossy().into_owned()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_order() {
        let t = tempfile::tempdir().unwrap();
        let bin = t.path().join("node");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let pv = format!("/nonexistent:{}", t.path().display());
        assert_eq!(
            locate(Some("/x/node"), Some("/y/node"), Some(&pv)),
            Some("/x/node".into())
        );
        assert_eq!(
            locate(None, Some("/y/node"), Some(&pv)),
            Some("/y/node".into())
        );
        assert_eq!(locate(None, None, Some(&pv)), Some(bin));
        assert_eq!(locate(None, None, Some("/nonexistent")), None);
    }

    #[test]
    fn refusal_names_everything() {
        let m = refusal(
            &NodeProblem::TooOld {
                path: "/usr/bin/node".into(),
                version: "v20.1.0".into(),
            },
            &["/a/gate.ts".into()],
        );
        assert!(m.contains("/a/gate.ts"), "{m}");
        assert!(m.contains("v20.1.0"), "{m}");
        assert!(m.contains("--no-extensions"), "{m}");
        assert!(m.contains("install node >= 22.18"), "{m}");
    }

    #[test]
    fn writes_a_private_program() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let host = write_program(t.path()).unwrap();
        assert!(host.ends_with("host.mjs"));
        let mode = std::fs::metadata(t.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(t.path().join("typebox.mjs").exists());
    }
}
