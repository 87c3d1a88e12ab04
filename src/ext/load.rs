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

use crate::resources::patterns::{self, is_pattern};

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
    /// A package of settings `packages` installed by pi (`true`: the project's).
    Package { project: bool },
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
            Origin::Package { .. } => "package",
        }
    }
    /// pi 0.87.1 `sourceInfo.scope`.
    pub fn scope(self) -> &'static str {
        match self {
            Origin::Cli => "temporary",
            Origin::Project | Origin::ProjectAuto => "project",
            Origin::User | Origin::UserAuto | Origin::Package { project: false } => "user",
            Origin::Package { project: true } => "project",
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
    /// A package's source as settings name it (`npm:pi-gate`): pi's `sourceInfo.source`.
    pub package: Option<String>,
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

/// A path as node's string (the form pi's patterns are matched against).
fn node_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// pi's `isEnabledByOverrides` on a discovered extension file.
fn enabled_by_overrides(file: &Path, entries: &[String], base: &Path) -> bool {
    patterns::enabled_by_overrides(&node_str(file), entries, &node_str(base))
}

/// pi's `applyPatterns` over the files of a scope's plain entries, in the files' order.
fn apply_patterns(files: Vec<PathBuf>, patterns: &[String], base: &Path) -> Vec<PathBuf> {
    let names: Vec<String> = files.iter().map(|f| node_str(f)).collect();
    let on = patterns::apply_patterns(&names, patterns, &node_str(base));
    files
        .into_iter()
        .zip(names)
        .filter_map(|(f, n)| on.contains(&n).then_some(f))
        .collect()
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

/// Settings `packages`: each entry a source string (`npm:name@range`, `git:host/path@ref`, a
/// https git URL, a local path) or an object with `source` and an `extensions` filter.
fn settings_packages(file: &Path) -> Vec<(String, Option<Vec<String>>)> {
    let Ok(text) = crate::files::read_text(file) else {
        return Vec::new();
    };
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    let Some(Value::Array(list)) = m.get("packages") else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|p| match p {
            Value::String(s) => Some((s.clone(), None)),
            Value::Object(o) => {
                let source = o.get("source")?.as_str()?.to_string();
                let filter = o.get("extensions").and_then(Value::as_array).map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                });
                Some((source, filter))
            }
            _ => None,
        })
        .collect()
}

/// npm's global `node_modules` (pi's legacy install place): `$NPM_CONFIG_PREFIX/lib/node_modules`,
/// else next to the `npm` on `PATH` (`<prefix>/bin/npm` → `<prefix>/lib/node_modules`).
fn npm_global_root() -> Option<PathBuf> {
    let prefix = std::env::var("NPM_CONFIG_PREFIX")
        .or_else(|_| std::env::var("npm_config_prefix"))
        .ok()
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var("PATH")
                .ok()?
                .split(':')
                .map(|d| Path::new(d).join("npm"))
                .find(|p| p.exists())?
                .parent()?
                .parent()
                .map(Path::to_path_buf)
        })?;
    Some(prefix.join("lib/node_modules"))
}

/// Where pi installed package `source` (`None`: not a source pith can place, or not installed).
fn package_root(source: &str, root: &Path, user: bool, base: &Path) -> Option<PathBuf> {
    if let Some(spec) = source.strip_prefix("npm:") {
        let spec = spec.trim();
        // `@scope/name@range` / `name@range`.
        let name = match spec.strip_prefix('@') {
            Some(rest) => match rest.find('@') {
                Some(i) => &spec[..i + 1],
                None => spec,
            },
            None => spec.split('@').next().unwrap_or(spec),
        };
        let managed = root.join("npm/node_modules").join(name);
        if managed.exists() || !user {
            return managed.exists().then_some(managed);
        }
        let legacy = npm_global_root()?.join(name);
        return legacy.exists().then_some(legacy);
    }
    let git = source
        .strip_prefix("git:")
        .or_else(|| source.strip_prefix("https://"))
        .or_else(|| source.strip_prefix("http://"));
    if let Some(g) = git {
        let g = g.split('@').next().unwrap_or(g);
        let g = g.strip_suffix(".git").unwrap_or(g);
        let dir = root.join("git").join(g);
        return dir.exists().then_some(dir);
    }
    let p = expand(source, base);
    p.exists().then_some(p)
}

/// pi's `collectPackageResources` for extensions: the `filter` patterns over the package's
/// files, else its `package.json` `pi.extensions`, else its `extensions/` directory.
fn package_files(root: &Path, filter: Option<&[String]>) -> Vec<PathBuf> {
    if root.is_file() {
        return vec![root.to_path_buf()];
    }
    let manifest = read_pi_manifest_extensions(root);
    let all = |entries: &Option<Vec<String>>| -> Vec<PathBuf> {
        match entries {
            Some(list) => {
                let (plain, patterns): (Vec<String>, Vec<String>) =
                    list.iter().cloned().partition(|e| !is_pattern(e));
                let mut files = Vec::new();
                for e in plain {
                    files.extend(files_of(&root.join(e)));
                }
                apply_patterns(files, &patterns, root)
            }
            None => auto_entries(&root.join("extensions")),
        }
    };
    let files = all(&manifest);
    match filter {
        Some([]) => Vec::new(),
        Some(f) => apply_patterns(files, f, root),
        None => files,
    }
}

/// `-e` paths that do not exist (pi stops at start-up naming each: `Failed to load extension
/// "<path>": Extension path does not exist: <path>`), as resolved against `cwd`.
pub fn missing_cli_paths(cli: &[String], cwd: &Path) -> Vec<PathBuf> {
    cli.iter()
        .map(|raw| raw.strip_prefix('+').unwrap_or(raw))
        .filter(|e| !e.starts_with("builtin:") && !e.starts_with("npm:") && !e.starts_with("git:"))
        .map(|e| expand(e, cwd))
        .filter(|p| !p.exists())
        .collect()
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
    let mut package_of: Vec<(PathBuf, String)> = Vec::new();
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
        // Packages pi installed (the project's first; one source once).
        let mut packages: Vec<(String, Option<Vec<String>>, bool)> = Vec::new();
        if project_trusted {
            for (src, f) in settings_packages(&project.join("settings.json")) {
                packages.push((src, f, true));
            }
        }
        for (src, f) in settings_packages(&agent_dir.join("settings.json")) {
            if !packages.iter().any(|(s, _, _)| *s == src) {
                packages.push((src, f, false));
            }
        }
        for (src, filter, is_project) in packages {
            let (root, base) = if is_project {
                (project.clone(), project.clone())
            } else {
                (agent_dir.to_path_buf(), agent_dir.to_path_buf())
            };
            let Some(pkg) = package_root(&src, &root, !is_project, &base) else {
                warnings.push(format!(
                    "Warning: package \"{src}\" is not installed; pith installs nothing (install it with pi)"
                ));
                continue;
            };
            for f in package_files(&pkg, filter.as_deref()) {
                package_of.push((f.clone(), src.clone()));
                found.push((
                    f,
                    Origin::Package {
                        project: is_project,
                    },
                    Some(pkg.clone()),
                ));
            }
        }
        // pi's precedence: project settings, project auto, user settings, user auto, packages
        // (stable).
        found.sort_by_key(|(_, o, _)| match o {
            Origin::Cli => 0,
            Origin::Project => 1,
            Origin::ProjectAuto => 2,
            Origin::User => 3,
            Origin::UserAuto => 4,
            Origin::Package { .. } => 5,
        });
    }
    for (path, origin, base_dir) in found {
        let package = package_of
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, s)| s.clone());
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
            package,
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

    #[test]
    fn installed_packages() {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let cwd = t.path().join("cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        let gate = agent.join("npm/node_modules/pi-gate");
        let scoped = agent.join("npm/node_modules/@acme/tools");
        std::fs::create_dir_all(gate.join("src")).unwrap();
        std::fs::create_dir_all(scoped.join("extensions")).unwrap();
        std::fs::write(
            gate.join("package.json"),
            r#"{"pi":{"extensions":["./src"]}}"#,
        )
        .unwrap();
        std::fs::write(gate.join("src/gate.ts"), "").unwrap();
        std::fs::write(gate.join("src/other.ts"), "").unwrap();
        std::fs::write(scoped.join("extensions/a.ts"), "").unwrap();
        std::fs::write(scoped.join("extensions/b.ts"), "").unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"packages":["npm:pi-gate@^1.2.0",{"source":"npm:@acme/tools","extensions":["!b.ts"]},"npm:missing"]}"#,
        )
        .unwrap();
        let (list, w) = resolve(&[], false, true, &agent, &cwd);
        let root = t.path().canonicalize().unwrap();
        let got: Vec<(String, Option<String>, &str)> = list
            .iter()
            .map(|e| {
                (
                    e.path
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .to_string(),
                    e.package.clone(),
                    e.origin.scope(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "agent/npm/node_modules/pi-gate/src/gate.ts".to_string(),
                    Some("npm:pi-gate@^1.2.0".to_string()),
                    "user"
                ),
                (
                    "agent/npm/node_modules/pi-gate/src/other.ts".to_string(),
                    Some("npm:pi-gate@^1.2.0".to_string()),
                    "user"
                ),
                (
                    "agent/npm/node_modules/@acme/tools/extensions/a.ts".to_string(),
                    Some("npm:@acme/tools".to_string()),
                    "user"
                ),
            ]
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("\"npm:missing\" is not installed"), "{w:?}");
        // --no-extensions: none.
        let (list, _) = resolve(&[], true, true, &agent, &cwd);
        assert!(list.is_empty());
    }
}
