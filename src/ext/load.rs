//! Which extensions to start, found as pi finds them (pi 0.73.1, 0.87.1 and 1.6.0 agree):
//! `-e/--extension PATH` (repeatable; a directory gives its `package.json` `pi.extensions`, its
//! `index.ts`, or its files) first, then settings `extensions` of the project
//! (`<cwd>/.pi/settings.json`, relative to `<cwd>/.pi`), the project's `.pi/extensions/`, the
//! user's settings (`<agentDir>/settings.json`, relative to the agent dir) and
//! `<agentDir>/extensions/`. Settings entries may be glob patterns and `!`/`+`/`-` overrides, as
//! in pi. `--no-extensions` drops all but the `-e` ones. The project's entries and directory are
//! read only in a trusted project (`crate::trust`): an untrusted checkout never names a program
//! pith starts.
//!
//! An entry is either an executable speaking pith's protocol ([`Kind::Exec`]) or one of pi's
//! TypeScript/JavaScript extensions ([`Kind::Node`]), which the node host runs
//! (`crate::ext::node_host`).

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
    /// Found in the trusted project's `.pi/extensions/`.
    ProjectAuto,
    /// Found in `<agentDir>/extensions/`.
    UserAuto,
}

/// How an extension runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An executable speaking pith's protocol.
    Exec,
    /// A pi TypeScript/JavaScript extension, loaded by the node host (`ext::node_host`).
    Node,
}

impl Origin {
    /// pi 0.87.1 `sourceInfo.source`.
    pub fn source(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::Project | Origin::User => "local",
            Origin::ProjectAuto | Origin::UserAuto => "auto",
        }
    }
    /// pi 0.87.1 `sourceInfo.scope`.
    pub fn scope(self) -> &'static str {
        match self {
            Origin::Cli => "temporary",
            Origin::Project | Origin::ProjectAuto => "project",
            Origin::User | Origin::UserAuto => "user",
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
    pub kind: Kind,
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

/// pi's extension files: `.ts` and `.js` (pi's `isExtensionFile`).
fn is_pi_extension_name(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "ts" | "js"))
}

/// How an entry runs: a `.ts` file is always pi's; a `.js` file is pi's unless it is an
/// executable starting with `#!` (a pith extension written for node); anything else must be an
/// executable.
fn kind_of(p: &Path) -> Option<Kind> {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    if matches!(ext, "ts" | "mts" | "cts") {
        return Some(Kind::Node);
    }
    if matches!(ext, "js" | "mjs" | "cjs") {
        let shebang = std::fs::read(p)
            .map(|b| b.starts_with(b"#!"))
            .unwrap_or(false);
        return Some(if is_executable(p) && shebang {
            Kind::Exec
        } else {
            Kind::Node
        });
    }
    is_executable(p).then_some(Kind::Exec)
}

fn read_pi_manifest_extensions(dir: &Path) -> Option<Vec<String>> {
    let text = crate::files::read_text(&dir.join("package.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let list = v.get("pi")?.get("extensions")?.as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// pi's `resolveExtensionEntries`: a directory's `package.json` `pi.extensions` (those that
/// exist), else its `index.ts`, else its `index.js`.
fn dir_entries(dir: &Path) -> Option<Vec<PathBuf>> {
    if let Some(list) = read_pi_manifest_extensions(dir) {
        let found: Vec<PathBuf> = list
            .iter()
            .map(|e| dir.join(e))
            .filter(|p| p.exists())
            .collect();
        if !found.is_empty() {
            return Some(found);
        }
    }
    for index in ["index.ts", "index.js"] {
        let p = dir.join(index);
        if p.exists() {
            return Some(vec![p]);
        }
    }
    None
}

/// pi's `collectAutoExtensionEntries`: the directory's own entries if it has them, else its
/// `*.ts` / `*.js` files and its subdirectories' entries (one level; dot files and
/// `node_modules` skipped; `.gitignore`, `.ignore` and `.fdignore` rules obeyed), by name.
pub fn auto_entries(dir: &Path) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    if let Some(e) = dir_entries(dir) {
        return e;
    }
    let mut ig = ignore::gitignore::GitignoreBuilder::new(dir);
    for f in [".gitignore", ".ignore", ".fdignore"] {
        let p = dir.join(f);
        if p.exists() {
            let _ = ig.add(p);
        }
    }
    let ig = ig.build().ok();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<_> = rd.filter_map(Result::ok).collect();
    names.sort_by_key(|e| e.file_name());
    let mut out = Vec::new();
    for entry in names {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        let p = entry.path();
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if ig
            .as_ref()
            .is_some_and(|ig| ig.matched(&p, meta.is_dir()).is_ignore())
        {
            continue;
        }
        if meta.is_file() && is_pi_extension_name(&p) {
            out.push(p);
        } else if meta.is_dir() {
            if let Some(e) = dir_entries(&p) {
                out.extend(e);
            }
        }
    }
    out
}

/// A settings entry that is a pattern rather than a path (pi's `isPattern`).
fn is_pattern(e: &str) -> bool {
    e.starts_with('!') || e.starts_with('+') || e.starts_with('-') || e.contains(['*', '?', '['])
}

fn glob(pattern: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// pi's `matchesAnyPattern`: the path relative to `base`, its name, or the whole path.
fn matches_any(file: &Path, patterns: &[&str], base: &Path) -> bool {
    let rel = file.strip_prefix(base).unwrap_or(file);
    let name = file.file_name().map(Path::new).unwrap_or(file);
    patterns.iter().any(|p| {
        let p = p.strip_prefix("./").unwrap_or(p);
        glob(p).is_some_and(|g| g.is_match(rel) || g.is_match(name) || g.is_match(file))
    })
}

/// pi's `matchesAnyExactPattern`.
fn matches_exact(file: &Path, patterns: &[&str], base: &Path) -> bool {
    let rel = file.strip_prefix(base).unwrap_or(file);
    patterns.iter().any(|p| {
        let p = p.strip_prefix("./").unwrap_or(p);
        Path::new(p) == rel || Path::new(p) == file
    })
}

fn split_overrides(entries: &[String]) -> (Vec<&str>, Vec<&str>, Vec<&str>, Vec<&str>) {
    let (mut inc, mut exc, mut force_inc, mut force_exc) = (vec![], vec![], vec![], vec![]);
    for e in entries {
        if let Some(p) = e.strip_prefix('+') {
            force_inc.push(p);
        } else if let Some(p) = e.strip_prefix('-') {
            force_exc.push(p);
        } else if let Some(p) = e.strip_prefix('!') {
            exc.push(p);
        } else {
            inc.push(e.as_str());
        }
    }
    (inc, exc, force_inc, force_exc)
}

/// pi's `isEnabledByOverrides`: an auto-discovered file against its scope's `!`/`+`/`-` entries.
fn enabled_by_overrides(file: &Path, entries: &[String], base: &Path) -> bool {
    let (_, exc, force_inc, force_exc) = split_overrides(entries);
    let mut on = exc.is_empty() || !matches_any(file, &exc, base);
    if matches_exact(file, &force_inc, base) {
        on = true;
    }
    if matches_exact(file, &force_exc, base) {
        on = false;
    }
    on
}

/// pi's `applyPatterns` over the files of a scope's plain entries.
fn apply_patterns(files: Vec<PathBuf>, patterns: &[String], base: &Path) -> Vec<PathBuf> {
    let (inc, exc, force_inc, force_exc) = split_overrides(patterns);
    let mut out: Vec<PathBuf> = files
        .iter()
        .filter(|f| inc.is_empty() || matches_any(f, &inc, base))
        .filter(|f| exc.is_empty() || !matches_any(f, &exc, base))
        .cloned()
        .collect();
    for f in &files {
        if !out.contains(f) && matches_exact(f, &force_inc, base) {
            out.push(f.clone());
        }
    }
    out.retain(|f| !matches_exact(f, &force_exc, base));
    out
}

/// A plain path's files: a file itself; a directory's entries (pi's `collectResourceFiles`).
fn files_of(p: &Path) -> Vec<PathBuf> {
    if p.is_file() {
        vec![p.to_path_buf()]
    } else if p.is_dir() {
        auto_entries(p)
    } else {
        Vec::new()
    }
}

/// The extensions to start, in load order, and warnings for stderr. pi's order: `-e` paths,
/// then the project's settings entries, the project's `.pi/extensions/`, the user's settings
/// entries, the user's `<agentDir>/extensions/` (a project's only when it is trusted); a path
/// found twice loads once.
pub fn resolve(
    cli: &[String],
    no_extensions: bool,
    project_trusted: bool,
    agent_dir: &Path,
    cwd: &Path,
) -> (Vec<ExtEntry>, Vec<String>) {
    let mut out: Vec<ExtEntry> = Vec::new();
    let mut warnings = Vec::new();
    let mut found: Vec<(PathBuf, Origin, Option<PathBuf>)> = Vec::new();
    for raw in cli {
        let entry = raw.strip_prefix('+').unwrap_or(raw);
        if entry.starts_with("builtin:") {
            continue; // pi 1.6.0's built-in extensions: see [`builtins_off`]
        }
        if entry.starts_with("npm:") || entry.starts_with("git:") {
            warnings.push(format!(
                "Warning: extension source \"{raw}\": pith installs no packages (install it with pi, then list it in settings \"packages\"); ignored"
            ));
            continue;
        }
        let path = expand(entry, cwd);
        if !path.exists() {
            warnings.push(format!(
                "Warning: extension path does not exist: {}",
                path.display()
            ));
            continue;
        }
        let files = if path.is_dir() {
            dir_entries(&path).unwrap_or_else(|| auto_entries(&path))
        } else {
            vec![path]
        };
        found.extend(files.into_iter().map(|f| (f, Origin::Cli, None)));
    }
    if !no_extensions {
        let project = cwd.join(".pi");
        let user_entries = settings_entries(&agent_dir.join("settings.json"));
        let project_entries = if project_trusted {
            settings_entries(&project.join("settings.json"))
        } else {
            Vec::new()
        };
        let mut scope = |entries: &[String],
                         base: &Path,
                         origin: Origin,
                         warnings: &mut Vec<String>| {
            let entries: Vec<String> = entries
                .iter()
                .filter(|e| {
                    let t = e.trim_start_matches(['+', '-', '!']);
                    !t.starts_with("builtin:")
                })
                .cloned()
                .collect();
            let mut files = Vec::new();
            let mut patterns = Vec::new();
            for e in &entries {
                if is_pattern(e) {
                    patterns.push(e.clone());
                    continue;
                }
                if e.starts_with("npm:") || e.starts_with("git:") {
                    warnings.push(format!(
                        "Warning: extension entry \"{e}\": packages belong in settings \"packages\"; ignored"
                    ));
                    continue;
                }
                let p = expand(e, base);
                if !p.exists() {
                    warnings.push(format!(
                        "Warning: extension path does not exist: {}",
                        p.display()
                    ));
                    continue;
                }
                files.extend(files_of(&p));
            }
            for f in apply_patterns(files, &patterns, base) {
                found.push((f, origin, Some(base.to_path_buf())));
            }
            entries
        };
        let project_entries = if project_trusted {
            scope(&project_entries, &project, Origin::Project, &mut warnings)
        } else {
            Vec::new()
        };
        let user_entries = scope(&user_entries, agent_dir, Origin::User, &mut warnings);
        if project_trusted {
            for f in auto_entries(&project.join("extensions")) {
                if enabled_by_overrides(&f, &project_entries, &project) {
                    found.push((f, Origin::ProjectAuto, Some(project.clone())));
                }
            }
        }
        for f in auto_entries(&agent_dir.join("extensions")) {
            if enabled_by_overrides(&f, &user_entries, agent_dir) {
                found.push((f, Origin::UserAuto, Some(agent_dir.to_path_buf())));
            }
        }
        // pi's precedence: project settings, project auto, user settings, user auto (stable).
        found.sort_by_key(|(_, o, _)| match o {
            Origin::Cli => 0,
            Origin::Project => 1,
            Origin::ProjectAuto => 2,
            Origin::User => 3,
            Origin::UserAuto => 4,
        });
    }
    for (path, origin, base_dir) in found {
        let Ok(path) = path.canonicalize() else {
            continue;
        };
        if out.iter().any(|e| e.path == path) {
            continue;
        }
        let Some(kind) = kind_of(&path) else {
            warnings.push(format!(
                "Warning: extension {} is not an executable file nor a pi extension (.ts, .js); skipped",
                path.display()
            ));
            continue;
        };
        out.push(ExtEntry {
            path,
            origin,
            base_dir,
            kind,
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
        std::fs::write(agent.join("ext/data.txt"), "").unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"extensions":["ext/user.sh","ext/old.ts","ext/data.txt","missing.sh"]}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.join(".pi/settings.json"),
            r#"{"extensions":["proj.sh","../cli.sh"]}"#,
        )
        .unwrap();
        let (list, warnings) = resolve(&["cli.sh".into()], false, true, &agent, &cwd);
        let names: Vec<(String, Origin, Kind)> = list
            .iter()
            .map(|e| {
                (
                    e.path.file_name().unwrap().to_string_lossy().to_string(),
                    e.origin,
                    e.kind,
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("cli.sh".to_string(), Origin::Cli, Kind::Exec),
                ("proj.sh".to_string(), Origin::Project, Kind::Exec),
                ("user.sh".to_string(), Origin::User, Kind::Exec),
                ("old.ts".to_string(), Origin::User, Kind::Node),
            ]
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("missing.sh"), "{warnings:?}");
        assert!(warnings[1].contains("data.txt"), "{warnings:?}");
        let (list, _) = resolve(&["cli.sh".into()], true, true, &agent, &cwd);
        assert_eq!(list.len(), 1);
        // An untrusted project's entries are not read; the user's still are.
        let (list, _) = resolve(&["cli.sh".into()], false, false, &agent, &cwd);
        let origins: Vec<Origin> = list.iter().map(|e| e.origin).collect();
        assert_eq!(origins, vec![Origin::Cli, Origin::User, Origin::User]);
    }

    #[test]
    fn discovery_as_pi() {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let cwd = t.path().join("cwd");
        let ue = agent.join("extensions");
        let pe = cwd.join(".pi/extensions");
        std::fs::create_dir_all(ue.join("pkg/src")).unwrap();
        std::fs::create_dir_all(ue.join("withindex")).unwrap();
        std::fs::create_dir_all(ue.join("empty")).unwrap();
        std::fs::create_dir_all(ue.join("node_modules/x")).unwrap();
        std::fs::create_dir_all(&pe).unwrap();
        for f in [
            "b.ts",
            "a.js",
            "notes.md",
            ".hidden.ts",
            "skipped.ts",
            "pkg/src/main.ts",
            "withindex/index.ts",
            "withindex/other.ts",
            "node_modules/x/index.ts",
        ] {
            std::fs::write(ue.join(f), "export default () => {}").unwrap();
        }
        std::fs::write(
            ue.join("pkg/package.json"),
            r#"{"pi":{"extensions":["./src/main.ts"]}}"#,
        )
        .unwrap();
        std::fs::write(pe.join("gate.ts"), "").unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"extensions":["-extensions/skipped.ts","-builtin:mcp"]}"#,
        )
        .unwrap();
        let names = |list: &[ExtEntry]| -> Vec<String> {
            list.iter()
                .map(|e| {
                    e.path
                        .strip_prefix(t.path().canonicalize().unwrap())
                        .unwrap()
                        .to_string_lossy()
                        .to_string()
                })
                .collect()
        };
        let (list, w) = resolve(&[], false, true, &agent, &cwd);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            names(&list),
            vec![
                "cwd/.pi/extensions/gate.ts",
                "agent/extensions/a.js",
                "agent/extensions/b.ts",
                "agent/extensions/pkg/src/main.ts",
                "agent/extensions/withindex/index.ts",
            ]
        );
        assert!(list.iter().all(|e| e.kind == Kind::Node));
        assert_eq!(list[0].origin.source(), "auto");
        // Untrusted: the project's directory is not read.
        let (list, _) = resolve(&[], false, false, &agent, &cwd);
        assert_eq!(list.len(), 4);
        // --no-extensions: nothing but -e (a directory: its index.ts).
        let dir = ue.join("withindex").to_string_lossy().to_string();
        let (list, _) = resolve(&[dir], true, true, &agent, &cwd);
        assert_eq!(names(&list), vec!["agent/extensions/withindex/index.ts"]);
        // Settings patterns: `!` excludes from a directory entry.
        std::fs::write(
            agent.join("settings.json"),
            r#"{"extensions":["extensions","!b.ts"]}"#,
        )
        .unwrap();
        let (list, _) = resolve(&[], false, false, &agent, &cwd);
        assert_eq!(
            names(&list),
            vec![
                "agent/extensions/a.js",
                "agent/extensions/pkg/src/main.ts",
                "agent/extensions/skipped.ts",
                "agent/extensions/withindex/index.ts",
            ]
        );
    }
}
