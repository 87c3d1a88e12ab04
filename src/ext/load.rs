//! Which extensions to start: `-e/--extension PATH` (repeatable) first, then settings
//! `extensions` of the project (`<cwd>/.pi/settings.json`, paths relative to `<cwd>/.pi`) and of
//! the user (`<agentDir>/settings.json`, relative to the agent dir), as pi orders them.
//! `--no-extensions` drops the settings entries (explicit `-e` paths still load, as in pi). The
//! project's entries are read only in a trusted project (`crate::trust`): an untrusted checkout
//! never names a program pith starts.
//!
//! An extension is an executable file. pi's TypeScript/JavaScript extensions cannot run in pith
//! (no JavaScript runtime): a non-executable `.ts`/`.js` entry is skipped with a warning, so a pi
//! configuration still starts. Glob patterns and package entries are not supported (warning).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Where an extension entry came from (pi's `sourceInfo` scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `-e/--extension`.
    Cli,
    /// `<cwd>/.pi/settings.json`.
    Project,
    /// `<agentDir>/settings.json`.
    User,
}

impl Origin {
    /// pi 0.87.1 `sourceInfo.source`.
    pub fn source(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::Project | Origin::User => "local",
        }
    }
    /// pi 0.87.1 `sourceInfo.scope`.
    pub fn scope(self) -> &'static str {
        match self {
            Origin::Cli => "temporary",
            Origin::Project => "project",
            Origin::User => "user",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtEntry {
    /// Absolute path of the executable.
    pub path: PathBuf,
    pub origin: Origin,
    /// The directory relative paths were resolved against (pi's `baseDir`), for settings entries.
    pub base_dir: Option<PathBuf>,
}

fn expand(p: &str, base: &Path) -> PathBuf {
    if p == "~" {
        return crate::config::home_dir().unwrap_or_else(|| PathBuf::from(p));
    }
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(h) = crate::config::home_dir() {
            return h.join(rest);
        }
    }
    base.join(p)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn settings_entries(file: &Path) -> Vec<String> {
    // Quietly: the settings loader has already warned about a file it could not read.
    let Ok(text) = crate::files::read_text(file) else {
        return Vec::new();
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => match m.get("extensions") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(), // Settings::load already warned
    }
}

/// pi 1.6.0's built-in extensions (`mcp`, `llama.cpp`, `codemode`, `tool-search`) turned off:
/// `-builtin:<name>` in the user's `extensions` setting, the trusted project's `+`/`-` entries
/// overriding it, all of them under `--no-extensions` except those `-e builtin:<name>` names.
pub fn builtins_off(
    cli: &[String],
    no_extensions: bool,
    project_trusted: bool,
    agent_dir: &Path,
    cwd: &Path,
) -> Vec<String> {
    const ALL: [&str; 4] = ["mcp", "llama.cpp", "codemode", "tool-search"];
    let explicit: Vec<&str> = cli
        .iter()
        .filter_map(|e| e.strip_prefix("builtin:"))
        .collect();
    let mut off: Vec<String> = Vec::new();
    if no_extensions {
        off = ALL.iter().map(|s| s.to_string()).collect();
    } else {
        let mut entries = settings_entries(&agent_dir.join("settings.json"));
        if project_trusted {
            entries.extend(settings_entries(&cwd.join(".pi").join("settings.json")));
        }
        for e in entries {
            if let Some(name) = e.strip_prefix("-builtin:") {
                if !off.iter().any(|o| o == name) {
                    off.push(name.to_string());
                }
            } else if let Some(name) = e.strip_prefix('+').unwrap_or(&e).strip_prefix("builtin:") {
                off.retain(|o| o != name);
            }
        }
    }
    off.retain(|o| !explicit.contains(&o.as_str()));
    off
}

/// The extensions to start, in load order, and warnings for stderr.
pub fn resolve(
    cli: &[String],
    no_extensions: bool,
    project_trusted: bool,
    agent_dir: &Path,
    cwd: &Path,
) -> (Vec<ExtEntry>, Vec<String>) {
    let mut out: Vec<ExtEntry> = Vec::new();
    let mut warnings = Vec::new();
    let mut sources: Vec<(String, Origin, PathBuf)> = cli
        .iter()
        .map(|p| (p.clone(), Origin::Cli, cwd.to_path_buf()))
        .collect();
    if !no_extensions {
        let project = cwd.join(".pi");
        if project_trusted {
            for e in settings_entries(&project.join("settings.json")) {
                sources.push((e, Origin::Project, project.clone()));
            }
        }
        for e in settings_entries(&agent_dir.join("settings.json")) {
            sources.push((e, Origin::User, agent_dir.to_path_buf()));
        }
    }
    for (raw, origin, base) in sources {
        let entry = raw.strip_prefix('+').unwrap_or(&raw);
        // pi 1.6.0's built-in extensions (`builtin:mcp`, `-builtin:mcp`): see [`builtins_off`].
        if entry
            .strip_prefix('-')
            .unwrap_or(entry)
            .starts_with("builtin:")
        {
            continue;
        }
        if entry.starts_with('!')
            || entry.starts_with('-')
            || entry.contains(['*', '?', '['])
            || entry.starts_with("npm:")
            || entry.starts_with("git:")
        {
            warnings.push(format!(
                "Warning: extension entry \"{raw}\": patterns and packages are not supported by pith; ignored"
            ));
            continue;
        }
        let path = expand(entry, &base);
        let Ok(path) = path.canonicalize() else {
            warnings.push(format!(
                "Warning: extension path does not exist: {}",
                path.display()
            ));
            continue;
        };
        if out.iter().any(|e| e.path == path) {
            continue;
        }
        if !is_executable(&path) {
            let js = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "ts" | "js" | "mjs" | "cjs" | "mts" | "cts"));
            warnings.push(if js {
                format!(
                    "Warning: {} is a pi TypeScript/JavaScript extension; pith runs executables speaking its extension protocol (docs/extensions.md); skipped",
                    path.display()
                )
            } else {
                format!(
                    "Warning: extension {} is not an executable file; skipped",
                    path.display()
                )
            });
            continue;
        }
        out.push(ExtEntry {
            path,
            origin,
            base_dir: (origin != Origin::Cli).then_some(base),
        });
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(p: &Path) {
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn order_origins_and_skips() {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let cwd = t.path().join("cwd");
        std::fs::create_dir_all(agent.join("ext")).unwrap();
        std::fs::create_dir_all(cwd.join(".pi")).unwrap();
        exe(&agent.join("ext/user.sh"));
        exe(&cwd.join(".pi/proj.sh"));
        exe(&cwd.join("cli.sh"));
        std::fs::write(agent.join("ext/old.ts"), "export default () => {}").unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"extensions":["ext/user.sh","ext/old.ts","ext/*.sh","missing.sh"]}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.join(".pi/settings.json"),
            r#"{"extensions":["proj.sh","../cli.sh"]}"#,
        )
        .unwrap();
        let (list, warnings) = resolve(&["cli.sh".into()], false, true, &agent, &cwd);
        let names: Vec<(String, Origin)> = list
            .iter()
            .map(|e| {
                (
                    e.path.file_name().unwrap().to_string_lossy().to_string(),
                    e.origin,
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("cli.sh".to_string(), Origin::Cli),
                ("proj.sh".to_string(), Origin::Project),
                ("user.sh".to_string(), Origin::User),
            ]
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("TypeScript"));
        let (list, _) = resolve(&["cli.sh".into()], true, true, &agent, &cwd);
        assert_eq!(list.len(), 1);
        // An untrusted project's entries are not read; the user's still are.
        let (list, _) = resolve(&["cli.sh".into()], false, false, &agent, &cwd);
        let origins: Vec<Origin> = list.iter().map(|e| e.origin).collect();
        assert_eq!(origins, vec![Origin::Cli, Origin::User]);
    }
}
