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
    pub version: String,
}

/// Why no node can host the extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeProblem {
    /// None found (`PITH_NODE`, settings `pith.node`, `PATH`).
    NotFound,
    /// Found at `path` but it could not be run or reported no version.
    Broken { path: PathBuf, error: String },
    /// Found, too old.
    TooOld { path: PathBuf, version: String },
}

/// `v22.18.0` → `(22, 18)`.
pub fn parse_version(s: &str) -> Option<(u32, u32)> {
    let s = s.trim();
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut it = s.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Does node `v` strip TypeScript types by default? 22.18+ within 22, 23.6+ within 23, 24 on.
pub fn strips_types(v: (u32, u32)) -> bool {
    match v.0 {
        0..=21 => false,
        22 => v.1 >= MIN_NODE.1,
        23 => v.1 >= 6,
        _ => true,
    }
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

/// Find node and check its version (runs `node --version`, some 20-40 ms: only done when a pi
/// extension is configured).
pub fn find(setting: Option<&str>) -> Result<Node, NodeProblem> {
    let env_node = std::env::var("PITH_NODE").ok();
    let path_var = std::env::var("PATH").ok();
    let Some(path) = locate(env_node.as_deref(), setting, path_var.as_deref()) else {
        return Err(NodeProblem::NotFound);
    };
    let out = std::process::Command::new(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| NodeProblem::Broken {
            path: path.clone(),
            error: e.to_string(),
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match parse_version(&version) {
        None => Err(NodeProblem::Broken {
            path,
            error: format!("`--version` printed {version:?}"),
        }),
        Some(v) if !strips_types(v) => Err(NodeProblem::TooOld { path, version }),
        Some(_) => Ok(Node { path, version }),
    }
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

/// node's arguments: enums, namespaces and parameter properties need node's transform mode
/// (its warning is silenced: stderr is the user's).
pub fn node_args(host: &Path) -> Vec<String> {
    vec![
        "--experimental-transform-types".into(),
        "--disable-warning=ExperimentalWarning".into(),
        host.to_string_lossy().into_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("v22.18.0\n"), Some((22, 18)));
        assert_eq!(parse_version("v20.20.2"), Some((20, 20)));
        assert_eq!(parse_version("garbage"), None);
        assert!(!strips_types((20, 20)));
        assert!(!strips_types((22, 17)));
        assert!(strips_types((22, 18)));
        assert!(!strips_types((23, 5)));
        assert!(strips_types((23, 6)));
        assert!(strips_types((24, 0)));
    }

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
