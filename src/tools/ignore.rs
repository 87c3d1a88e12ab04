//! Glob matching, `.gitignore` rules and the directory walk used by `grep` and `find`.
//!
//! pith searches in-process instead of running ripgrep/fd, so it implements their defaults
//! here: hidden files are included, `.git` is skipped, symlinks are not followed, and every
//! `.gitignore` from the search root down applies to its own directory (negation, dir-only
//! `foo/`, anchored `/foo` or `a/b`, `*`, `?`, `[...]`, and `**`). The last matching rule wins,
//! deeper files over shallower ones; an ignored directory is not entered.

use std::path::{Path, PathBuf};

/// Guard against pathological nesting (and symlink-free cycles cannot happen).
const MAX_DEPTH: usize = 256;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Lit(char),
    /// `?`
    One,
    /// `*`: any run of characters except `/`.
    Star,
    /// `**` not forming a whole segment, or a trailing `/**`: anything, `/` included.
    Any,
    /// `**/` as a whole segment: nothing, or any run ending in `/`.
    Dirs,
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

/// A compiled glob (`*`, `?`, `[...]`, `**`, `\` escapes).
#[derive(Clone, Debug)]
pub struct Glob {
    toks: Vec<Tok>,
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        let chars: Vec<char> = pattern.chars().collect();
        let mut toks = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '\\' if i + 1 < chars.len() => {
                    toks.push(Tok::Lit(chars[i + 1]));
                    i += 2;
                    continue;
                }
                '?' => toks.push(Tok::One),
                '*' => {
                    let mut j = i;
                    while j < chars.len() && chars[j] == '*' {
                        j += 1;
                    }
                    if j - i >= 2 {
                        let seg_start = i == 0 || chars[i - 1] == '/';
                        if seg_start && j < chars.len() && chars[j] == '/' {
                            toks.push(Tok::Dirs);
                            i = j + 1;
                            continue;
                        }
                        toks.push(Tok::Any);
                    } else {
                        toks.push(Tok::Star);
                    }
                    i = j;
                    continue;
                }
                '[' => {
                    if let Some((tok, next)) = parse_class(&chars, i) {
                        toks.push(tok);
                        i = next;
                        continue;
                    }
                    toks.push(Tok::Lit('['));
                }
                _ => toks.push(Tok::Lit(c)),
            }
            i += 1;
        }
        Glob { toks }
    }

    /// Whether the whole of `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        let width = t.len() + 1;
        let mut failed = vec![false; (self.toks.len() + 1) * width];
        self.m(0, 0, &t, &mut failed, width)
    }

    fn m(&self, p: usize, i: usize, t: &[char], failed: &mut [bool], w: usize) -> bool {
        if failed[p * w + i] {
            return false;
        }
        let ok = match self.toks.get(p) {
            None => i == t.len(),
            Some(Tok::Lit(c)) => i < t.len() && t[i] == *c && self.m(p + 1, i + 1, t, failed, w),
            Some(Tok::One) => i < t.len() && t[i] != '/' && self.m(p + 1, i + 1, t, failed, w),
            Some(Tok::Class { negated, items }) => {
                i < t.len()
                    && t[i] != '/'
                    && (items.iter().any(|(a, b)| *a <= t[i] && t[i] <= *b) != *negated)
                    && self.m(p + 1, i + 1, t, failed, w)
            }
            Some(Tok::Star) => {
                let mut j = i;
                loop {
                    if self.m(p + 1, j, t, failed, w) {
                        break true;
                    }
                    if j >= t.len() || t[j] == '/' {
                        break false;
                    }
                    j += 1;
                }
            }
            Some(Tok::Any) => (i..=t.len()).any(|j| self.m(p + 1, j, t, failed, w)),
            Some(Tok::Dirs) => {
                self.m(p + 1, i, t, failed, w)
                    || (i..t.len()).any(|j| t[j] == '/' && self.m(p + 1, j + 1, t, failed, w))
            }
        };
        if !ok {
            failed[p * w + i] = true;
        }
        ok
    }
}

fn parse_class(chars: &[char], start: usize) -> Option<(Tok, usize)> {
    let mut i = start + 1;
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && !first {
            return Some((Tok::Class { negated, items }, i + 1));
        }
        first = false;
        let lo = if c == '\\' && i + 1 < chars.len() {
            i += 1;
            chars[i]
        } else {
            c
        };
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|c| *c != ']') {
            items.push((lo, chars[i + 2]));
            i += 3;
        } else {
            items.push((lo, lo));
            i += 1;
        }
    }
    None
}

/// One `.gitignore` line.
#[derive(Clone, Debug)]
struct Rule {
    glob: Glob,
    negated: bool,
    dir_only: bool,
    /// Contains a `/` (other than trailing): matched against the path from the file's dir.
    anchored: bool,
}

/// The rules of one `.gitignore` file.
#[derive(Clone, Debug, Default)]
pub struct GitIgnore {
    rules: Vec<Rule>,
}

impl GitIgnore {
    pub fn parse(text: &str) -> GitIgnore {
        let rules = text.lines().filter_map(parse_rule).collect();
        GitIgnore { rules }
    }

    /// `Some(true)` ignored, `Some(false)` re-included, `None` no rule matched. `rel` is the path
    /// relative to this file's directory, with `/` separators.
    pub fn matched(&self, rel: &str, is_dir: bool) -> Option<bool> {
        let base = rel.rsplit('/').next().unwrap_or(rel);
        let mut verdict = None;
        for r in &self.rules {
            if r.dir_only && !is_dir {
                continue;
            }
            let hit = if r.anchored {
                r.glob.is_match(rel)
            } else {
                r.glob.is_match(base)
            };
            if hit {
                verdict = Some(!r.negated);
            }
        }
        verdict
    }
}

fn parse_rule(line: &str) -> Option<Rule> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    // Trailing spaces are dropped unless escaped.
    let mut s = line.to_string();
    while s.ends_with(' ') && !s.ends_with("\\ ") {
        s.pop();
    }
    let (negated, mut s) = match s.strip_prefix('!') {
        Some(rest) => (true, rest.to_string()),
        None => (false, s.strip_prefix('\\').map(str::to_string).unwrap_or(s)),
    };
    let dir_only = s.ends_with('/');
    while s.ends_with('/') {
        s.pop();
    }
    if s.is_empty() {
        return None;
    }
    let anchored = s.contains('/');
    let s = s.strip_prefix('/').unwrap_or(&s).to_string();
    Some(Rule {
        glob: Glob::new(&s),
        negated,
        dir_only,
        anchored,
    })
}

/// The `.gitignore` files in effect while walking: `(dir relative to the root, rules)`.
#[derive(Default)]
pub struct IgnoreStack {
    levels: Vec<(String, GitIgnore)>,
}

impl IgnoreStack {
    /// Whether `rel` (relative to the walk root) is ignored.
    pub fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for (base, gi) in &self.levels {
            let sub = if base.is_empty() {
                rel
            } else {
                match rel
                    .strip_prefix(base.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                {
                    Some(r) => r,
                    None => continue,
                }
            };
            if let Some(v) = gi.matched(sub, is_dir) {
                ignored = v;
            }
        }
        ignored
    }
}

/// An entry met by [`walk`].
pub struct Entry<'a> {
    /// Path relative to the walk root, `/`-separated.
    pub rel: &'a str,
    pub path: &'a Path,
    pub is_dir: bool,
    pub is_symlink: bool,
}

/// Walk `root` depth-first (entries sorted by name), honouring `.gitignore` files and skipping
/// `.git`. `visit` returns `false` to stop the walk; `stop` is polled between directories.
pub fn walk(root: &Path, stop: &dyn Fn() -> bool, visit: &mut dyn FnMut(&Entry) -> bool) {
    let mut stack = IgnoreStack::default();
    walk_dir(root, "", 0, &mut stack, stop, visit);
}

fn walk_dir(
    dir: &Path,
    rel: &str,
    depth: usize,
    stack: &mut IgnoreStack,
    stop: &dyn Fn() -> bool,
    visit: &mut dyn FnMut(&Entry) -> bool,
) -> bool {
    if depth > MAX_DEPTH || stop() {
        return false;
    }
    let Ok(reader) = std::fs::read_dir(dir) else {
        return true;
    };
    let mut entries: Vec<(String, PathBuf, std::fs::FileType)> = reader
        .filter_map(Result::ok)
        .filter_map(|e| {
            Some((
                e.file_name().into_string().ok()?,
                e.path(),
                e.file_type().ok()?,
            ))
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let pushed = match std::fs::read_to_string(dir.join(".gitignore")) {
        Ok(text) => {
            stack
                .levels
                .push((rel.to_string(), GitIgnore::parse(&text)));
            true
        }
        Err(_) => false,
    };
    let mut keep_going = true;
    for (name, path, ft) in entries {
        if name == ".git" {
            continue;
        }
        let child_rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let is_dir = ft.is_dir();
        if stack.is_ignored(&child_rel, is_dir) {
            continue;
        }
        let entry = Entry {
            rel: &child_rel,
            path: &path,
            is_dir,
            is_symlink: ft.is_symlink(),
        };
        if !visit(&entry) {
            keep_going = false;
            break;
        }
        if is_dir && !walk_dir(&path, &child_rel, depth + 1, stack, stop, visit) {
            keep_going = false;
            break;
        }
    }
    if pushed {
        stack.levels.pop();
    }
    keep_going
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_basics() {
        assert!(Glob::new("*.rs").is_match("main.rs"));
        assert!(!Glob::new("*.rs").is_match("src/main.rs"));
        assert!(Glob::new("**/*.rs").is_match("src/main.rs"));
        assert!(Glob::new("**/*.rs").is_match("main.rs"));
        assert!(Glob::new("src/**/*.rs").is_match("src/a/b/main.rs"));
        assert!(Glob::new("src/**/*.rs").is_match("src/main.rs"));
        assert!(Glob::new("src/**").is_match("src/a/b"));
        assert!(Glob::new("f?o[a-c].t[!x]t").is_match("fooa.tyt"));
        assert!(!Glob::new("f?o[a-c].t[!x]t").is_match("food.tyt"));
        assert!(Glob::new("\\*lit").is_match("*lit"));
    }

    #[test]
    fn gitignore_rules() {
        let gi = GitIgnore::parse("# c\n*.log\n!keep.log\nbuild/\n/root.txt\ndocs/*.md\n");
        assert_eq!(gi.matched("a.log", false), Some(true));
        assert_eq!(gi.matched("x/keep.log", false), Some(false));
        assert_eq!(gi.matched("build", true), Some(true));
        assert_eq!(gi.matched("build", false), None);
        assert_eq!(gi.matched("root.txt", false), Some(true));
        assert_eq!(gi.matched("sub/root.txt", false), None);
        assert_eq!(gi.matched("docs/a.md", false), Some(true));
        assert_eq!(gi.matched("docs/x/a.md", false), None);
    }

    #[test]
    fn nested_files_apply_to_their_dir() {
        let mut s = IgnoreStack::default();
        s.levels.push((String::new(), GitIgnore::parse("*.tmp\n")));
        s.levels
            .push(("sub".to_string(), GitIgnore::parse("!b.tmp\n/only-here\n")));
        assert!(s.is_ignored("a.tmp", false));
        assert!(s.is_ignored("sub/a.tmp", false));
        assert!(!s.is_ignored("sub/b.tmp", false));
        assert!(s.is_ignored("sub/only-here", false));
        assert!(!s.is_ignored("only-here", false));
    }
}
