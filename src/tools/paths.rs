//! Path arguments as the reference resolves them (spec 14.2): one leading `@` stripped, unusual
//! Unicode spaces turned into plain spaces, `~` expanded, relative paths joined to the tool cwd.

use std::path::{Path, PathBuf};

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// `expandPath`: `@` prefix, Unicode spaces, `~`.
pub fn expand_path(path: &str) -> String {
    let stripped = path.strip_prefix('@').unwrap_or(path);
    let normalized: String = stripped
        .chars()
        .map(|c| if is_unicode_space(c) { ' ' } else { c })
        .collect();
    if normalized == "~" {
        if let Some(h) = home() {
            return h.to_string_lossy().into_owned();
        }
    }
    if let Some(rest) = normalized.strip_prefix("~/") {
        if let Some(h) = home() {
            return h.join(rest).to_string_lossy().into_owned();
        }
    }
    normalized
}

/// `resolveToCwd`: expand, then make absolute against `cwd` (lexically normalised, like Node's
/// `path.resolve`).
pub fn resolve_to_cwd(path: &str, cwd: &Path) -> PathBuf {
    let expanded = expand_path(path);
    let p = Path::new(&expanded);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    normalize(&joined)
}

/// `resolveReadPath`: like [`resolve_to_cwd`], but when the file does not exist try the macOS
/// screenshot variants (narrow no-break space before AM/PM, curly apostrophe).
pub fn resolve_read_path(path: &str, cwd: &Path) -> PathBuf {
    let resolved = resolve_to_cwd(path, cwd);
    if resolved.exists() {
        return resolved;
    }
    let s = resolved.to_string_lossy().into_owned();
    let am_pm = s
        .replace(" AM.", "\u{202f}AM.")
        .replace(" PM.", "\u{202f}PM.");
    let curly = s.replace('\'', "\u{2019}");
    for candidate in [am_pm, curly] {
        let c = PathBuf::from(candidate);
        if c.exists() {
            return c;
        }
    }
    resolved
}

/// Remove `.` and `..` components without touching the file system.
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Display form of a path in messages.
pub fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// An I/O error in Node's words: `ENOENT: no such file or directory, open '/x'`.
pub fn node_error(err: &std::io::Error, syscall: &str, path: &Path) -> String {
    let (code, text) = match err.raw_os_error() {
        Some(1) => ("EPERM", "operation not permitted"),
        Some(2) => ("ENOENT", "no such file or directory"),
        Some(13) => ("EACCES", "permission denied"),
        Some(17) => ("EEXIST", "file already exists"),
        Some(20) => ("ENOTDIR", "not a directory"),
        Some(21) => ("EISDIR", "illegal operation on a directory"),
        Some(28) => ("ENOSPC", "no space left on device"),
        Some(30) => ("EROFS", "read-only file system"),
        Some(36) => ("ENAMETOOLONG", "name too long"),
        Some(40) => ("ELOOP", "too many symbolic links encountered"),
        _ => return format!("{err}, {syscall} '{}'", path.display()),
    };
    if syscall == "read" {
        // Node names no path for errors on an open descriptor.
        return format!("{code}: {text}, read");
    }
    format!("{code}: {text}, {syscall} '{}'", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_at_and_dots() {
        let cwd = Path::new("/work/x");
        assert_eq!(
            resolve_to_cwd("a/b.txt", cwd),
            PathBuf::from("/work/x/a/b.txt")
        );
        assert_eq!(
            resolve_to_cwd("@a.txt", cwd),
            PathBuf::from("/work/x/a.txt")
        );
        assert_eq!(resolve_to_cwd("../y/./z", cwd), PathBuf::from("/work/y/z"));
        assert_eq!(resolve_to_cwd("/abs", cwd), PathBuf::from("/abs"));
        assert_eq!(expand_path("a\u{a0}b"), "a b");
    }
}
