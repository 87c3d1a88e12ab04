//! pi's settings patterns over resource files, one implementation for every kind of resource
//! (skills, prompt templates, pi's TypeScript extensions): plain entries are paths, entries with
//! `*` / `?` are globs that include, `!glob` excludes, `+path` force-includes and `-path`
//! force-excludes (pi's `applyPatterns` and `isEnabledByOverrides`). A glob matches a file by its
//! path relative to the entry's base, its name or its whole path, and a `SKILL.md` also by its
//! directory (pi's `matchesAnyPattern`); `+`/`-` take an exact path (`./` allowed). Globs are
//! minimatch's as pi uses them: `*` does not cross `/`. Pure: paths are node's strings.

use std::collections::HashSet;

use super::paths::{basename, dirname, relative};

/// pi's `isPattern`: an entry that selects rather than names a path.
pub fn is_pattern(s: &str) -> bool {
    is_override(s) || s.contains('*') || s.contains('?')
}

/// pi's `isOverridePattern`: `!`, `+` or `-`.
pub fn is_override(s: &str) -> bool {
    s.starts_with('!') || s.starts_with('+') || s.starts_with('-')
}

/// minimatch-like glob (`*` does not cross `/`); a pattern globset rejects matches nothing.
fn glob(pattern: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

fn globs(patterns: &[&str]) -> Vec<globset::GlobMatcher> {
    patterns.iter().filter_map(|p| glob(p)).collect()
}

/// pi's `matchesAnyPattern`.
fn matches_any(path: &str, patterns: &[globset::GlobMatcher], base: &str) -> bool {
    let rel = relative(base, path);
    let name = basename(path);
    let mut candidates = vec![rel, name.to_string(), path.to_string()];
    if name == "SKILL.md" {
        let parent = dirname(path);
        candidates.push(relative(base, &parent));
        candidates.push(basename(&parent).to_string());
        candidates.push(parent);
    }
    patterns
        .iter()
        .any(|g| candidates.iter().any(|c| g.is_match(c)))
}

/// pi's `matchesAnyExactPattern`.
fn matches_any_exact(path: &str, patterns: &[&str], base: &str) -> bool {
    let rel = relative(base, path);
    let skill = basename(path) == "SKILL.md";
    let parent = dirname(path);
    patterns.iter().any(|p| {
        let p = p.strip_prefix("./").unwrap_or(p);
        p == rel || p == path || (skill && (p == relative(base, &parent) || p == parent))
    })
}

/// Entries sorted by kind: includes, `!` excludes, `+` force-includes, `-` force-excludes.
struct Split<'a> {
    includes: Vec<&'a str>,
    excludes: Vec<&'a str>,
    force_in: Vec<&'a str>,
    force_out: Vec<&'a str>,
}

fn split<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Split<'a> {
    let mut s = Split {
        includes: Vec::new(),
        excludes: Vec::new(),
        force_in: Vec::new(),
        force_out: Vec::new(),
    };
    for p in patterns {
        if let Some(x) = p.strip_prefix('+') {
            s.force_in.push(x);
        } else if let Some(x) = p.strip_prefix('-') {
            s.force_out.push(x);
        } else if let Some(x) = p.strip_prefix('!') {
            s.excludes.push(x);
        } else {
            s.includes.push(p);
        }
    }
    s
}

/// pi's `applyPatterns`: which of `paths` the patterns enable (callers keep their own order).
pub fn apply_patterns<'a, S: AsRef<str> + 'a>(
    paths: &[String],
    patterns: impl IntoIterator<Item = &'a S>,
    base: &str,
) -> HashSet<String> {
    let s = split(patterns.into_iter().map(AsRef::as_ref));
    let (inc, exc) = (globs(&s.includes), globs(&s.excludes));
    let mut result: Vec<&String> = paths
        .iter()
        .filter(|p| s.includes.is_empty() || matches_any(p, &inc, base))
        .filter(|p| s.excludes.is_empty() || !matches_any(p, &exc, base))
        .collect();
    if !s.force_in.is_empty() {
        for p in paths {
            if !result.contains(&p) && matches_any_exact(p, &s.force_in, base) {
                result.push(p);
            }
        }
    }
    if !s.force_out.is_empty() {
        result.retain(|p| !matches_any_exact(p, &s.force_out, base));
    }
    result.into_iter().cloned().collect()
}

/// pi's `isEnabledByOverrides`: a discovered path against its scope's settings entries (only
/// the `!`, `+` and `-` ones count).
pub fn enabled_by_overrides<'a, S: AsRef<str> + 'a>(
    path: &str,
    entries: impl IntoIterator<Item = &'a S>,
    base: &str,
) -> bool {
    let s = split(
        entries
            .into_iter()
            .map(AsRef::as_ref)
            .filter(|p| is_override(p)),
    );
    let mut on = true;
    if !s.excludes.is_empty() && matches_any(path, &globs(&s.excludes), base) {
        on = false;
    }
    if !s.force_in.is_empty() && matches_any_exact(path, &s.force_in, base) {
        on = true;
    }
    if !s.force_out.is_empty() && matches_any_exact(path, &s.force_out, base) {
        on = false;
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn patterns_select_as_pi_selects() {
        let paths = strings(&["/b/skills/a/SKILL.md", "/b/skills/b/SKILL.md", "/b/x.md"]);
        let on = |p: &[&str]| {
            let mut v: Vec<String> = apply_patterns(&paths, &strings(p), "/b")
                .into_iter()
                .collect();
            v.sort();
            v
        };
        assert_eq!(on(&["!a"]), ["/b/skills/b/SKILL.md", "/b/x.md"]);
        assert_eq!(
            on(&["*.md"]),
            ["/b/skills/a/SKILL.md", "/b/skills/b/SKILL.md", "/b/x.md"]
        );
        assert_eq!(
            on(&["skills/*"]),
            ["/b/skills/a/SKILL.md", "/b/skills/b/SKILL.md"]
        );
        assert_eq!(
            on(&["!skills/**", "+skills/b"]),
            ["/b/skills/b/SKILL.md", "/b/x.md"]
        );
        assert_eq!(
            on(&["-x.md"]),
            ["/b/skills/a/SKILL.md", "/b/skills/b/SKILL.md"]
        );
        // minimatch does not read `./` in a glob (pi passes the pattern as written).
        assert_eq!(on(&["./*.md"]), Vec::<String>::new());
        assert_eq!(on(&["[x].md"]), ["/b/x.md"]);
    }

    #[test]
    fn overrides_apply_to_discovered_paths() {
        let p = "/b/skills/a/SKILL.md";
        assert!(enabled_by_overrides(
            p,
            &strings(&["!a", "+./skills/a"]),
            "/b"
        ));
        assert!(!enabled_by_overrides(p, &strings(&["!a"]), "/b"));
        // Plain entries and includes are not overrides.
        assert!(enabled_by_overrides(p, &strings(&["other", "*.ts"]), "/b"));
        assert!(!enabled_by_overrides(
            "/b/extensions/x.ts",
            &strings(&["+x.ts", "-extensions/x.ts"]),
            "/b"
        ));
        assert!(is_pattern("a*") && is_pattern("-x") && !is_pattern("a[1].ts"));
    }
}
