//! Finding and reading skills and prompt templates, as pi 0.73.1's resource loader and package
//! manager do (0.87.1's differences noted where they apply).
//!
//! Skills, in precedence order (first of a name wins; the rest are collisions):
//! 1. project `skills` settings entries (`.pi/settings.json`, paths relative to `.pi`),
//! 2. project discovery: `.pi/skills/`, then `.agents/skills/` in cwd and each ancestor up to
//!    the git root (or `/`),
//! 3. global `skills` settings entries (relative to the config dir),
//! 4. user discovery: `<config dir>/skills/`, then `~/.agents/skills/`,
//! 5. `--skill` paths (also with `--no-skills`, which drops 1–4).
//!
//! In `skills/` directories of pi's own (`.pi/skills`, config dir) the root `.md` files are
//! skills; everywhere, a directory with a `SKILL.md` is a skill (not searched further); other
//! directories are searched recursively; names starting with `.` and `node_modules` are
//! skipped; `.gitignore`, `.ignore` and `.fdignore` files are honoured. Settings entries may be
//! files, directories or patterns (`!exclude`, `+force-include`, `-force-exclude`, globs) that
//! also filter what discovery found. Templates: `<config dir>/prompts/*.md`,
//! `.pi/prompts/*.md` (not recursive), `prompts` settings entries, `--prompt-template`.
//!
//! Robustness (pith's, reported on stderr): files over [`MAX_FILE_BYTES`] or with NUL bytes
//! are skipped, symlink loops and very deep trees are cut, unreadable entries are skipped.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;

use serde_json::{Map, Value};

use super::paths::{dirname, expand_tilde, is_under, join, relative, resolve};
use super::patterns::{apply_patterns, enabled_by_overrides, is_override, is_pattern};
use super::skills::{self, Skill};
use super::templates::{self, Template};
use super::{Diagnostic, DiagnosticKind, Resources, SourceInfo};
use crate::protocol;

/// Skill and template files larger than this are skipped (pi has no limit).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Directory levels searched below a skills root.
const MAX_DEPTH: usize = 24;
/// Directory entries looked at in one load, over all locations.
const MAX_ENTRIES: usize = 200_000;

/// What decides the load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Absolute.
    pub cwd: String,
    /// Absolute.
    pub agent_dir: String,
    /// `$HOME`, if set.
    pub home: Option<String>,
    /// The config dir's settings.json.
    pub global_settings: Map<String, Value>,
    /// The project's `.pi/settings.json` (`None` when it must not be used: an untrusted project
    /// under 0.87).
    pub project_settings: Option<Map<String, Value>>,
    pub cli_skills: Vec<String>,
    pub cli_templates: Vec<String>,
    pub no_skills: bool,
    pub no_templates: bool,
    /// The protocol version's rules for skills and templates.
    pub profile: &'static protocol::Resources,
    /// Project `.pi` resources and `.agents/skills` load only for a trusted project (pi 0.87.1's
    /// project trust, `crate::trust`; under 0.73 only `--no-approve` makes a project untrusted).
    pub project_trusted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Skills,
    Prompts,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Skills => "skills",
            Kind::Prompts => "prompts",
        }
    }
}

/// Discovery mode of a skills directory: pi's own (root `.md` files count) or `.agents`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Pi,
    Agents,
}

/// Where a resolved resource came from (pi's `PathMetadata`).
#[derive(Clone, Debug)]
struct Meta {
    source: &'static str,
    scope: &'static str,
    base_dir: Option<String>,
}

impl Meta {
    /// pi's precedence rank: project settings, project auto, user settings, user auto.
    fn rank(&self) -> u8 {
        let scope = if self.scope == "project" { 0 } else { 2 };
        scope + u8::from(self.source != "local")
    }

    fn info(&self, path: &str) -> SourceInfo {
        SourceInfo {
            path: path.to_string(),
            source: self.source.to_string(),
            scope: self.scope.to_string(),
            origin: "top-level".to_string(),
            base_dir: self.base_dir.clone(),
        }
    }
}

/// A file's identity and kind (symlinks followed).
#[derive(Clone, Copy, Debug)]
struct Stat {
    is_file: bool,
    is_dir: bool,
    id: (u64, u64),
}

/// Memoised `stat` and `realpath`: each path is looked at once per load.
#[derive(Default)]
struct FsCache {
    stats: HashMap<String, Option<Stat>>,
    real: HashMap<String, String>,
}

impl FsCache {
    fn stat(&mut self, path: &str) -> Option<Stat> {
        if let Some(s) = self.stats.get(path) {
            return *s;
        }
        let s = std::fs::metadata(path).ok().map(|m| Stat {
            is_file: m.is_file(),
            is_dir: m.is_dir(),
            id: (m.dev(), m.ino()),
        });
        self.stats.insert(path.to_string(), s);
        s
    }

    /// pi's `canonicalizePath`: realpath, else the path itself.
    fn realpath(&mut self, path: &str) -> String {
        if let Some(r) = self.real.get(path) {
            return r.clone();
        }
        let r = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.into_os_string().into_string().ok())
            .unwrap_or_else(|| path.to_string());
        self.real.insert(path.to_string(), r.clone());
        r
    }
}

/// "Have we seen this file (by canonical path) already?" without a realpath per file: files
/// are told apart by inode first, and only paths sharing one are canonicalised.
#[derive(Default)]
struct Seen {
    by_id: HashMap<(u64, u64), Vec<String>>,
    missing: HashSet<String>,
}

impl Seen {
    fn first_time(&mut self, fs: &mut FsCache, path: &str) -> bool {
        let Some(st) = fs.stat(path) else {
            return self.missing.insert(path.to_string());
        };
        let others = self.by_id.entry(st.id).or_default();
        if others.is_empty() {
            others.push(path.to_string());
            return true;
        }
        let real = fs.realpath(path);
        let others = others.clone();
        if others.iter().any(|o| fs.realpath(o) == real) {
            return false;
        }
        self.by_id.entry(st.id).or_default().push(path.to_string());
        true
    }
}

/// A file pith would not read, or could not.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    TooLarge(u64),
    Binary,
}

impl ReadError {
    /// The message as Node words it (pi reports `fs` errors in `extension_error` events).
    pub fn node_message(&self, path: &str) -> String {
        match self {
            ReadError::Io(e) => match e.kind() {
                std::io::ErrorKind::NotFound => {
                    format!("ENOENT: no such file or directory, open '{path}'")
                }
                std::io::ErrorKind::PermissionDenied => {
                    format!("EACCES: permission denied, open '{path}'")
                }
                std::io::ErrorKind::IsADirectory => {
                    "EISDIR: illegal operation on a directory, read".to_string()
                }
                _ => e.to_string(),
            },
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "cannot read: {e}"),
            ReadError::TooLarge(n) => write!(
                f,
                "file is too large ({n} bytes, limit {MAX_FILE_BYTES}); skipped"
            ),
            ReadError::Binary => write!(f, "file is binary (contains NUL bytes); skipped"),
        }
    }
}

/// A skill or template file's text: at most [`MAX_FILE_BYTES`], no NUL bytes, invalid UTF-8
/// replaced (as Node's `readFileSync(path, "utf-8")` does). Checked with `stat` before it is
/// opened: a FIFO or device in place of a skill must not block the machine.
pub fn read_text(path: &str) -> Result<String, ReadError> {
    let meta = std::fs::metadata(path).map_err(ReadError::Io)?;
    if meta.is_dir() {
        return Err(ReadError::Io(std::io::Error::from(
            std::io::ErrorKind::IsADirectory,
        )));
    }
    if !meta.is_file() {
        return Err(ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    read_regular(path)
}

/// [`read_text`] of a path already known to be a regular file (from a directory listing or a
/// `stat` of this load): open, `fstat`, read — three system calls.
fn read_regular(path: &str) -> Result<String, ReadError> {
    let mut f = std::fs::File::open(path).map_err(ReadError::Io)?;
    let meta = f.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge(meta.len()));
    }
    // Read what fstat announced (a file growing meanwhile is cut there).
    let len = meta.len() as usize;
    let mut bytes = vec![0u8; len];
    let mut n = 0;
    while n < len {
        match f.read(&mut bytes[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    bytes.truncate(n);
    if bytes.contains(&0) {
        return Err(ReadError::Binary);
    }
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// An entry of a directory listing.
struct Entry {
    name: String,
    path: String,
    is_file: bool,
    is_dir: bool,
}

/// `.gitignore` / `.ignore` / `.fdignore` rules gathered while walking one root, with pi's
/// quirk: a file's patterns are prefixed with its directory relative to the root.
struct IgnoreRules {
    root: String,
    lines: Vec<String>,
    matcher: Option<ignore::gitignore::Gitignore>,
}

const IGNORE_FILE_NAMES: [&str; 3] = [".gitignore", ".ignore", ".fdignore"];

impl IgnoreRules {
    fn new(root: &str) -> IgnoreRules {
        IgnoreRules {
            root: root.to_string(),
            lines: Vec::new(),
            matcher: None,
        }
    }

    /// Add the ignore files found in `dir` (whose listing is `names`).
    fn add_dir(&mut self, dir: &str, names: &[Entry]) {
        let mut added = false;
        for f in IGNORE_FILE_NAMES {
            if !names.iter().any(|e| e.name == f) {
                continue;
            }
            let Ok(text) = read_text(&join(dir, f)) else {
                continue;
            };
            let rel = relative(&self.root, dir);
            let prefix = if rel.is_empty() {
                String::new()
            } else {
                format!("{rel}/")
            };
            for line in text.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if let Some(p) = prefix_pattern(line, &prefix) {
                    self.lines.push(p);
                    added = true;
                }
            }
        }
        if added {
            let mut b = ignore::gitignore::GitignoreBuilder::new(&self.root);
            for l in &self.lines {
                let _ = b.add_line(None, l);
            }
            self.matcher = b.build().ok();
        }
    }

    /// [`IgnoreRules::ignores`] for a path under `root` (made relative only when there are
    /// rules to match).
    fn ignores_path(&self, root: &str, path: &str, is_dir: bool) -> bool {
        self.matcher.is_some() && self.ignores(&relative(root, path), is_dir)
    }

    fn ignores(&self, rel: &str, is_dir: bool) -> bool {
        match &self.matcher {
            None => false,
            Some(m) => m.matched_path_or_any_parents(rel, is_dir).is_ignore(),
        }
    }
}

/// pi's `prefixIgnorePattern`.
fn prefix_pattern(line: &str, prefix: &str) -> Option<String> {
    let trimmed = line.trim();
    if trimmed.is_empty() || (trimmed.starts_with('#') && !trimmed.starts_with("\\#")) {
        return None;
    }
    let (negated, pattern) = if let Some(p) = line.strip_prefix('!') {
        (true, p)
    } else if line.starts_with("\\!") {
        (false, &line[1..])
    } else {
        (false, line)
    };
    let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
    let p = format!("{prefix}{pattern}");
    Some(if negated { format!("!{p}") } else { p })
}

struct Loader<'a> {
    o: &'a LoadOptions,
    fs: FsCache,
    diags: Vec<Diagnostic>,
    entries_left: usize,
}

/// Load everything `o` describes.
pub fn load(o: &LoadOptions) -> Resources {
    let mut l = Loader {
        o,
        fs: FsCache::default(),
        diags: Vec::new(),
        entries_left: MAX_ENTRIES,
    };
    let (skill_paths, skill_meta) = l.resolve(Kind::Skills);
    let (prompt_paths, prompt_meta) = l.resolve(Kind::Prompts);
    let skills = l.load_skills(&skill_paths, &skill_meta);
    let templates = l.load_templates(&prompt_paths, &prompt_meta);
    Resources {
        skills,
        templates,
        diagnostics: l.diags,
    }
}

impl Loader<'_> {
    fn warn(&mut self, message: impl Into<String>, path: &str) {
        self.diags.push(Diagnostic::warning(message, path));
    }

    fn home(&self) -> &str {
        self.o.home.as_deref().unwrap_or("")
    }

    /// A directory's entries sorted by name (bytewise, as libuv's scandir), symlinks followed.
    fn list(&mut self, dir: &str) -> Option<Vec<Entry>> {
        let dev = self.fs.stat(dir)?.id.0;
        let rd = std::fs::read_dir(dir).ok()?;
        let mut out = Vec::new();
        for e in rd {
            let Ok(e) = e else { continue };
            if self.entries_left == 0 {
                self.warn(
                    format!("more than {MAX_ENTRIES} directory entries; the rest is not searched"),
                    dir,
                );
                break;
            }
            self.entries_left -= 1;
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            // `dir` is normalised and `name` is one plain component: no normalising needed.
            let path = if dir == "/" {
                format!("/{name}")
            } else {
                format!("{dir}/{name}")
            };
            let Ok(ft) = e.file_type() else { continue };
            let (is_file, is_dir) = if ft.is_symlink() {
                match self.fs.stat(&path) {
                    Some(s) => (s.is_file, s.is_dir),
                    // A broken symlink (or a loop): skipped, as pi does.
                    None => continue,
                }
            } else {
                // What the listing says is all that is needed later: no stat per entry.
                let st = Stat {
                    is_file: ft.is_file(),
                    is_dir: ft.is_dir(),
                    id: (dev, std::os::unix::fs::DirEntryExt::ino(&e)),
                };
                self.fs.stats.insert(path.clone(), Some(st));
                (st.is_file, st.is_dir)
            };
            out.push(Entry {
                name,
                path,
                is_file,
                is_dir,
            });
        }
        crate::sort::sort_by(&mut out, |a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        Some(out)
    }

    /// pi's `collectSkillEntries`: the `SKILL.md` of `dir`, else root `.md` files (pi mode) and
    /// what subdirectories hold.
    fn skill_entries(&mut self, dir: &str, mode: Mode) -> Vec<String> {
        let mut out = Vec::new();
        if self.fs.stat(dir).is_some_and(|s| s.is_dir) {
            let mut ig = IgnoreRules::new(dir);
            let mut stack = Vec::new();
            self.skill_entries_in(dir, dir, mode, &mut ig, &mut stack, &mut out);
        }
        out
    }

    /// A recursive walk entering `dir`: its entries, with `dir` pushed on `stack` and its ignore
    /// files read; `None` (warned) when it is too deep or a symlink loop, or when it cannot be
    /// listed.
    fn enter_dir(
        &mut self,
        dir: &str,
        ig: &mut IgnoreRules,
        stack: &mut Vec<(u64, u64)>,
    ) -> Option<Vec<Entry>> {
        if stack.len() > MAX_DEPTH {
            self.warn(
                format!("more than {MAX_DEPTH} directory levels; not searched further"),
                dir,
            );
            return None;
        }
        let id = self.fs.stat(dir)?.id;
        if stack.contains(&id) {
            self.warn("symlink loop; not searched again", dir);
            return None;
        }
        let entries = self.list(dir)?;
        stack.push(id);
        ig.add_dir(dir, &entries);
        Some(entries)
    }

    fn skill_entries_in(
        &mut self,
        dir: &str,
        root: &str,
        mode: Mode,
        ig: &mut IgnoreRules,
        stack: &mut Vec<(u64, u64)>,
        out: &mut Vec<String>,
    ) {
        let Some(entries) = self.enter_dir(dir, ig, stack) else {
            return;
        };
        let at_root = dir == root;
        if let Some(e) = entries.iter().find(|e| e.name == "SKILL.md" && e.is_file) {
            if !ig.ignores_path(root, &e.path, false) {
                out.push(e.path.clone());
                stack.pop();
                return;
            }
        }
        for e in &entries {
            if e.name.starts_with('.') || e.name == "node_modules" {
                continue;
            }
            let md = e.is_file && e.name.ends_with(".md");
            let root_md = mode == Mode::Pi && at_root;
            let nested_md =
                mode == Mode::Agents && !at_root && self.o.profile.agents_nested_md_skills;
            if md && (root_md || nested_md) && !ig.ignores_path(root, &e.path, false) {
                out.push(e.path.clone());
                continue;
            }
            if !e.is_dir || ig.ignores_path(root, &e.path, true) {
                continue;
            }
            self.skill_entries_in(&e.path, root, mode, ig, stack, out);
        }
        stack.pop();
    }

    /// pi's `collectFiles` for `.md` files (settings directories of prompts): recursive.
    fn md_files(&mut self, dir: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut ig = IgnoreRules::new(dir);
        let mut stack = Vec::new();
        self.md_files_in(dir, dir, &mut ig, &mut stack, &mut out);
        out
    }

    fn md_files_in(
        &mut self,
        dir: &str,
        root: &str,
        ig: &mut IgnoreRules,
        stack: &mut Vec<(u64, u64)>,
        out: &mut Vec<String>,
    ) {
        let Some(entries) = self.enter_dir(dir, ig, stack) else {
            return;
        };
        for e in &entries {
            if e.name.starts_with('.') || e.name == "node_modules" {
                continue;
            }
            if ig.ignores_path(root, &e.path, e.is_dir) {
                continue;
            }
            if e.is_dir {
                self.md_files_in(&e.path, root, ig, stack, out);
            } else if e.is_file && e.name.ends_with(".md") {
                out.push(e.path.clone());
            }
        }
        stack.pop();
    }

    /// pi's `collectAutoPromptEntries`: the `.md` files of one directory.
    fn auto_prompt_entries(&mut self, dir: &str) -> Vec<String> {
        let Some(entries) = self.list(dir) else {
            return Vec::new();
        };
        let mut ig = IgnoreRules::new(dir);
        ig.add_dir(dir, &entries);
        entries
            .iter()
            .filter(|e| !e.name.starts_with('.') && e.name != "node_modules")
            .filter(|e| e.is_file && e.name.ends_with(".md"))
            .filter(|e| !ig.ignores(&e.name, false))
            .map(|e| e.path.clone())
            .collect()
    }

    /// The `skills`/`prompts` entries of a settings object (with pi's migration of the old
    /// `skills: {customDirectories}` form).
    fn settings_entries(
        &mut self,
        settings: Option<&Map<String, Value>>,
        kind: Kind,
    ) -> Vec<String> {
        let Some(settings) = settings else {
            return Vec::new();
        };
        let v = match settings.get(kind.key()) {
            Some(Value::Object(legacy)) if kind == Kind::Skills => legacy.get("customDirectories"),
            other => other,
        };
        match v {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => {
                let mut out = Vec::new();
                for item in a {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        other => self.warn(
                            format!("{} entry {other} is not a string; ignored", kind.key()),
                            "settings.json",
                        ),
                    }
                }
                out
            }
            Some(other) => {
                self.warn(
                    format!(
                        "{} must be an array of paths, got {other}; ignored",
                        kind.key()
                    ),
                    "settings.json",
                );
                Vec::new()
            }
        }
    }

    /// Files named by settings entries or found in the directories they name.
    fn files_from_paths(&mut self, paths: &[String], kind: Kind) -> Vec<String> {
        let mut out = Vec::new();
        for p in paths {
            match self.fs.stat(p) {
                Some(s) if s.is_file => out.push(p.clone()),
                Some(s) if s.is_dir => match kind {
                    Kind::Skills => out.extend(self.skill_entries(p, Mode::Pi)),
                    Kind::Prompts => out.extend(self.md_files(p)),
                },
                _ => {}
            }
        }
        out
    }

    /// The enabled resource paths of one kind, in precedence order, plus the metadata of every
    /// resolved path (enabled or not).
    fn resolve(&mut self, kind: Kind) -> (Vec<String>, HashMap<String, Meta>) {
        let o = self.o;
        let (no, cli) = match kind {
            Kind::Skills => (o.no_skills, &o.cli_skills),
            Kind::Prompts => (o.no_templates, &o.cli_templates),
        };
        let mut acc: Vec<(String, Meta, bool)> = Vec::new();
        let mut meta: HashMap<String, Meta> = HashMap::new();
        if !no {
            let project_base = join(&o.cwd, ".pi");
            let global_base = o.agent_dir.to_string();
            let project_entries = self.settings_entries(o.project_settings.as_ref(), kind);
            let global_entries = self.settings_entries(Some(&o.global_settings), kind);
            let mut add =
                |acc: &mut Vec<(String, Meta, bool)>, path: String, m: &Meta, on: bool| {
                    if !meta.contains_key(&path) {
                        meta.insert(path.clone(), m.clone());
                        acc.push((path, m.clone(), on));
                    }
                };
            for (entries, scope, base) in [
                (&project_entries, "project", &project_base),
                (&global_entries, "user", &global_base),
            ] {
                if entries.is_empty() {
                    continue;
                }
                let m = Meta {
                    source: "local",
                    scope,
                    base_dir: None,
                };
                let (plain, patterns): (Vec<&String>, Vec<&String>) =
                    entries.iter().partition(|e| !is_pattern(e));
                let resolved: Vec<String> = plain
                    .iter()
                    .map(|p| {
                        let t = expand_tilde(p, self.home());
                        resolve(base, &t)
                    })
                    .collect();
                let files = self.files_from_paths(&resolved, kind);
                let enabled = apply_patterns(&files, &patterns, base);
                for f in files {
                    let on = enabled.contains(&f);
                    add(&mut acc, f, &m, on);
                }
            }
            // Discovery, filtered by the override patterns of the same scope's settings.
            let home_agents = self.o.home.as_deref().map(|h| join(h, ".agents/skills"));
            let trusted = o.project_trusted;
            let project_meta = Meta {
                source: "auto",
                scope: "project",
                base_dir: Some(project_base.clone()),
            };
            let user_meta = Meta {
                source: "auto",
                scope: "user",
                base_dir: Some(global_base.clone()),
            };
            let mut discovered: Vec<(Vec<String>, Meta, &Vec<String>, String)> = Vec::new();
            match kind {
                Kind::Skills => {
                    if trusted {
                        let mut found =
                            self.skill_entries(&join(&project_base, "skills"), Mode::Pi);
                        let mut agents_groups = Vec::new();
                        for dir in ancestor_agents_dirs(&mut self.fs, &o.cwd) {
                            if home_agents.as_deref() == Some(dir.as_str()) {
                                continue;
                            }
                            let entries = self.skill_entries(&dir, Mode::Agents);
                            if o.profile.agents_skills_own_source {
                                agents_groups.push((entries, dirname(&dir)));
                            } else {
                                found.extend(entries);
                            }
                        }
                        discovered.push((
                            found,
                            project_meta.clone(),
                            &project_entries,
                            project_base.clone(),
                        ));
                        for (entries, agents_base) in agents_groups {
                            let m = Meta {
                                base_dir: Some(agents_base.clone()),
                                ..project_meta.clone()
                            };
                            discovered.push((entries, m, &project_entries, agents_base));
                        }
                    }
                    let mut found = self.skill_entries(&join(&global_base, "skills"), Mode::Pi);
                    let home_entries = match &home_agents {
                        Some(dir) => self.skill_entries(dir, Mode::Agents),
                        None => Vec::new(),
                    };
                    if o.profile.agents_skills_own_source {
                        discovered.push((
                            found,
                            user_meta.clone(),
                            &global_entries,
                            global_base.clone(),
                        ));
                        if let Some(dir) = &home_agents {
                            let base = dirname(dir);
                            let m = Meta {
                                base_dir: Some(base.clone()),
                                ..user_meta.clone()
                            };
                            discovered.push((home_entries, m, &global_entries, base));
                        }
                    } else {
                        found.extend(home_entries);
                        discovered.push((
                            found,
                            user_meta.clone(),
                            &global_entries,
                            global_base.clone(),
                        ));
                    }
                }
                Kind::Prompts => {
                    if trusted {
                        let found = self.auto_prompt_entries(&join(&project_base, "prompts"));
                        discovered.push((
                            found,
                            project_meta.clone(),
                            &project_entries,
                            project_base.clone(),
                        ));
                    }
                    let found = self.auto_prompt_entries(&join(&global_base, "prompts"));
                    discovered.push((
                        found,
                        user_meta.clone(),
                        &global_entries,
                        global_base.clone(),
                    ));
                }
            }
            for (paths, m, overrides, base) in discovered {
                let overrides: Vec<&String> = overrides.iter().filter(|p| is_override(p)).collect();
                for p in paths {
                    let on = enabled_by_overrides(&p, &overrides, &base);
                    add(&mut acc, p, &m, on);
                }
            }
        }
        // Precedence, then one entry per file.
        crate::sort::sort_by_key(&mut acc, |(_, m, _)| m.rank());
        let mut seen = Seen::default();
        let mut enabled: Vec<String> = Vec::new();
        for (path, _, on) in acc {
            if seen.first_time(&mut self.fs, &path) && on {
                enabled.push(path);
            }
        }
        // pi's mergePaths: settings and discovery first, then the CLI paths, each file once.
        let mut seen = Seen::default();
        let mut merged = Vec::new();
        let cli: Vec<String> = cli.iter().map(|v| resolve_cli_path(&o.cwd, v)).collect();
        for p in enabled.iter().chain(cli.iter()) {
            let t = expand_tilde(p, self.home());
            let r = resolve(&o.cwd, &t);
            if seen.first_time(&mut self.fs, &r) {
                merged.push(r);
            }
        }
        (merged, meta)
    }

    fn load_skills(&mut self, paths: &[String], meta: &HashMap<String, Meta>) -> Vec<Skill> {
        let o = self.o;
        let user_dir = join(&o.agent_dir, "skills");
        let project_dir = join(&o.cwd, ".pi/skills");
        let mut skills: Vec<Skill> = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut seen = Seen::default();
        let mut collisions = Vec::new();
        for p in paths {
            let source = if is_under(p, &user_dir) {
                Some("user")
            } else if is_under(p, &project_dir) {
                Some("project")
            } else {
                None
            };
            let files = match self.fs.stat(p) {
                None => {
                    self.warn("skill path does not exist", p);
                    continue;
                }
                Some(s) if s.is_dir => self.skill_entries(p, Mode::Pi),
                Some(s) if s.is_file && p.ends_with(".md") => vec![p.clone()],
                Some(_) => {
                    self.warn("skill path is not a markdown file", p);
                    continue;
                }
            };
            for f in files {
                let Some(skill) = self.load_skill_file(&f, source, meta) else {
                    continue;
                };
                if !seen.first_time(&mut self.fs, &skill.file_path) {
                    continue;
                }
                match names.get(&skill.name) {
                    Some(&i) => collisions.push(Diagnostic {
                        kind: DiagnosticKind::Collision,
                        message: format!(
                            "skill \"{}\" collision: {} skipped, {} kept",
                            skill.name, skill.file_path, skills[i].file_path
                        ),
                        path: skill.file_path.clone(),
                    }),
                    None => {
                        names.insert(skill.name.clone(), skills.len());
                        skills.push(skill);
                    }
                }
            }
        }
        self.diags.extend(collisions);
        skills
    }

    fn load_skill_file(
        &mut self,
        path: &str,
        source: Option<&str>,
        meta: &HashMap<String, Meta>,
    ) -> Option<Skill> {
        let text = match read_regular(path) {
            Ok(t) => t,
            Err(e) => {
                self.warn(e.to_string(), path);
                return None;
            }
        };
        let info = match meta.get(path) {
            Some(m) => m.info(path),
            None => SourceInfo::synthetic(path, "local", source, Some(dirname(path))),
        };
        let (skill, diags) = skills::from_file(path, &text, self.o.profile, info);
        self.diags.extend(diags);
        skill
    }

    fn load_templates(&mut self, paths: &[String], meta: &HashMap<String, Meta>) -> Vec<Template> {
        let o = self.o;
        let user_dir = join(&o.agent_dir, "prompts");
        let project_dir = join(&o.cwd, ".pi/prompts");
        let mut out: Vec<Template> = Vec::new();
        for p in paths {
            let files: Vec<String> = match self.fs.stat(p) {
                None => {
                    self.warn("prompt template path does not exist", p);
                    continue;
                }
                Some(s) if s.is_dir => match self.list(p) {
                    Some(entries) => entries
                        .into_iter()
                        .filter(|e| e.is_file && e.name.ends_with(".md"))
                        .map(|e| e.path)
                        .collect(),
                    None => continue,
                },
                Some(s) if s.is_file && p.ends_with(".md") => vec![p.clone()],
                Some(_) => continue,
            };
            for f in files {
                let text = match read_regular(&f) {
                    Ok(t) => t,
                    Err(e) => {
                        self.warn(e.to_string(), &f);
                        continue;
                    }
                };
                let info = match meta.get(&f) {
                    Some(m) => m.info(&f),
                    None if is_under(&f, &user_dir) => {
                        SourceInfo::synthetic(&f, "local", Some("user"), Some(user_dir.clone()))
                    }
                    None if is_under(&f, &project_dir) => SourceInfo::synthetic(
                        &f,
                        "local",
                        Some("project"),
                        Some(project_dir.clone()),
                    ),
                    None => SourceInfo::synthetic(&f, "local", None, Some(dirname(&f))),
                };
                let (t, diags) = templates::from_file(&f, &text, o.profile, info);
                self.diags.extend(diags);
                let Some(t) = t else { continue };
                if let Some(first) = out.iter().find(|x| x.name == t.name) {
                    let message = format!(
                        "prompt template \"/{}\" collision: {} skipped, {} kept",
                        t.name, t.file_path, first.file_path
                    );
                    self.diags.push(Diagnostic {
                        kind: DiagnosticKind::Collision,
                        message,
                        path: t.file_path.clone(),
                    });
                    continue;
                }
                out.push(t);
            }
        }
        out
    }
}

/// `.agents/skills` in `cwd` and each ancestor up to the git root (the nearest directory with a
/// `.git` entry), or up to `/` outside a repository.
fn ancestor_agents_dirs(fs: &mut FsCache, cwd: &str) -> Vec<String> {
    let mut git_root = None;
    let mut d = cwd.to_string();
    loop {
        if std::path::Path::new(&join(&d, ".git")).exists() {
            git_root = Some(d.clone());
            break;
        }
        let parent = dirname(&d);
        if parent == d {
            break;
        }
        d = parent;
    }
    let mut out = Vec::new();
    let mut d = cwd.to_string();
    loop {
        let dir = join(&d, ".agents/skills");
        if fs.stat(&dir).is_some_and(|s| s.is_dir) {
            out.push(dir);
        }
        if git_root.as_deref() == Some(d.as_str()) {
            break;
        }
        let parent = dirname(&d);
        if parent == d {
            break;
        }
        d = parent;
    }
    out
}

/// pi's `resolveCliPaths`: local paths against cwd (no `~` expansion: the shell does that);
/// package sources (`npm:`, `git:`, URLs) as they are.
fn resolve_cli_path(cwd: &str, v: &str) -> String {
    let t = super::js_trim(v);
    let remote = ["npm:", "git:", "github:", "http:", "https:", "ssh:"]
        .iter()
        .any(|p| t.starts_with(p));
    if remote {
        v.to_string()
    } else {
        resolve(cwd, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_patterns_are_prefixed_like_pi() {
        assert_eq!(prefix_pattern("foo", "sub/").as_deref(), Some("sub/foo"));
        assert_eq!(prefix_pattern("/foo", "").as_deref(), Some("foo"));
        assert_eq!(prefix_pattern("!keep", "a/").as_deref(), Some("!a/keep"));
        assert_eq!(prefix_pattern("# c", ""), None);
        assert_eq!(prefix_pattern("   ", ""), None);
    }
}
