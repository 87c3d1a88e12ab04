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
    use unicode_normalization::UnicodeNormalization;
    let s = resolved.to_string_lossy().into_owned();
    let nfd: String = s.nfd().collect();
    let curly = |t: &str| t.replace('\'', "\u{2019}");
    // pi's order: macOS screenshot name, NFD, curly quote, NFD with curly quote.
    for candidate in [screenshot_variant(&s), nfd.clone(), curly(&s), curly(&nfd)] {
        if candidate != s {
            let c = PathBuf::from(candidate);
            if c.exists() {
                return c;
            }
        }
    }
    resolved
}

/// `/ (AM|PM)\./gi` → a narrow no-break space before `AM.` / `PM.` (macOS screenshot names).
fn screenshot_variant(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 8);
    let mut last = 0;
    for i in 0..b.len() {
        if b[i] == b' '
            && b.len() > i + 3
            && matches!(b[i + 1], b'A' | b'a' | b'P' | b'p')
            && matches!(b[i + 2], b'M' | b'm')
            && b[i + 3] == b'.'
        {
            out.push_str(&s[last..i]);
            out.push('\u{202f}');
            last = i + 1;
        }
    }
    out.push_str(&s[last..]);
    out
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

/// Where the bytes of `p` (absolute, lexically normalised) land: symlinks followed, also a
/// dangling one (its target need not exist yet); the part that does not exist yet is appended to
/// its nearest existing parent, resolved. Iterative (no recursion per component), at most 40
/// links followed, as the kernel.
pub fn resolve_real(p: &Path) -> PathBuf {
    let mut p = p.to_path_buf();
    let mut hops = 0;
    'again: loop {
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        let mut base = p.clone();
        let mut cur = loop {
            if let Ok(c) = std::fs::canonicalize(&base) {
                break c;
            }
            match (base.parent(), base.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    base = parent.to_path_buf();
                }
                _ => break base,
            }
        };
        while let Some(name) = rest.pop() {
            let next = cur.join(&name);
            if hops < 40 {
                if let Ok(target) = std::fs::read_link(&next) {
                    hops += 1;
                    let mut np = normalize(&cur.join(target));
                    for r in rest.iter().rev() {
                        np.push(r);
                    }
                    p = np;
                    continue 'again;
                }
            }
            cur = next;
        }
        return cur;
    }
}

/// Where a write or edit of `path` goes. When the permission gate approved a resolved target
/// (`approved`), the path must still resolve there at write time (a symlink put in place after
/// the approval is refused, not followed).
pub fn approved_target(path: &str, cwd: &Path, approved: Option<&Path>) -> Result<PathBuf, String> {
    let abs = resolve_to_cwd(path, cwd);
    if let Some(approved) = approved {
        let now = resolve_real(&abs);
        if now != approved {
            return Err(format!(
                "Permission check failed: {path} now resolves to {}, not to the approved {}; nothing was changed.",
                now.display(),
                approved.display()
            ));
        }
    }
    Ok(abs)
}

/// Display form of a path in messages.
pub fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// An I/O error in Node's words: `ENOENT: no such file or directory, open '/x'`.
pub fn node_error(err: &std::io::Error, syscall: &str, path: &Path) -> String {
    let Some((code, text)) = node_code(err) else {
        return format!("{err}, {syscall} '{}'", path.display());
    };
    if syscall == "read" {
        // Node names no path for errors on an open descriptor.
        return format!("{code}: {text}, read");
    }
    format!("{code}: {text}, {syscall} '{}'", path.display())
}

/// Node's `code` and message text for an OS error, for the errors file tools meet.
pub fn node_code(err: &std::io::Error) -> Option<(&'static str, &'static str)> {
    Some(match err.raw_os_error() {
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
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_paths_follow_symlinks_dangling_ones_too() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let out = root.join("out");
        let cwd = root.join("cwd");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        std::os::unix::fs::symlink(out.join("new.txt"), cwd.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink("../out", cwd.join("o")).unwrap();
        assert_eq!(resolve_real(&cwd.join("notes.txt")), out.join("new.txt"));
        assert_eq!(resolve_real(&cwd.join("o/a/b")), out.join("a/b"));
        assert_eq!(resolve_real(&cwd.join("plain")), cwd.join("plain"));
        std::os::unix::fs::symlink("loop", cwd.join("loop")).unwrap();
        assert_eq!(resolve_real(&cwd.join("loop")), cwd.join("loop"));
        assert!(approved_target("notes.txt", &cwd, Some(&cwd.join("notes.txt"))).is_err());
        assert_eq!(
            approved_target("notes.txt", &cwd, Some(&out.join("new.txt"))).unwrap(),
            cwd.join("notes.txt")
        );
    }

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
