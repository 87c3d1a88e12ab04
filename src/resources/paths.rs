//! Node's POSIX `path` functions on strings (`normalize`, `join`, `resolve`, `dirname`,
//! `basename`), so that the paths pith reports (`location`, `sourceInfo.path`, `baseDir`, the
//! skill block) are the exact strings pi reports: lexical `.`/`..` handling, no symlink
//! resolution, no trailing slash.

/// `path.normalize`: collapse `//`, `.` and `..` segments; a trailing `/` is kept.
pub fn normalize(p: &str) -> String {
    if p.is_empty() {
        return ".".to_string();
    }
    if is_normal(p) {
        return p.to_string();
    }
    let absolute = p.starts_with('/');
    let trailing = p.ends_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let mut out = parts.join("/");
    if absolute {
        out.insert(0, '/');
    }
    if out.is_empty() {
        return if absolute { "/".into() } else { ".".into() };
    }
    if trailing && out != "/" {
        out.push('/');
    }
    out
}

/// Already normalised: no empty, `.` or `..` segment (a trailing `/` is fine).
fn is_normal(p: &str) -> bool {
    let body = p.strip_prefix('/').unwrap_or(p);
    let body = body.strip_suffix('/').unwrap_or(body);
    !body.is_empty()
        && body
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// `path.join(a, b)`.
pub fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => ".".into(),
        (true, false) => normalize(b),
        (false, true) => normalize(a),
        (false, false) => normalize(&format!("{a}/{b}")),
    }
}

/// `path.resolve(base, p)` with an absolute `base`: absolute result, no trailing slash.
pub fn resolve(base: &str, p: &str) -> String {
    let joined = if p.starts_with('/') {
        normalize(p)
    } else {
        join(base, p)
    };
    strip_trailing_slash(joined)
}

fn strip_trailing_slash(mut s: String) -> String {
    while s.len() > 1 && s.ends_with('/') {
        s.pop();
    }
    s
}

/// `path.dirname`.
pub fn dirname(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return if p.starts_with('/') {
            "/".into()
        } else {
            ".".into()
        };
    }
    match t.rfind('/') {
        None => ".".into(),
        Some(i) => {
            let d = t[..i].trim_end_matches('/');
            if d.is_empty() {
                "/".into()
            } else {
                d.to_string()
            }
        }
    }
}

/// `path.basename`.
pub fn basename(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    match t.rfind('/') {
        Some(i) => &t[i + 1..],
        None => t,
    }
}

/// `path.relative(from, to)` for absolute, normalised paths.
pub fn relative(from: &str, to: &str) -> String {
    let f: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let t: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; f.len() - common];
    parts.extend_from_slice(&t[common..]);
    parts.join("/")
}

/// Is `target` `root` or inside it (pi's `isUnderPath`; both normalised).
pub fn is_under(target: &str, root: &str) -> bool {
    let root = root
        .strip_suffix('/')
        .filter(|r| !r.is_empty())
        .unwrap_or(root);
    if target == root {
        return true;
    }
    if root == "/" {
        return target.starts_with('/');
    }
    target.len() > root.len() && target.starts_with(root) && target.as_bytes()[root.len()] == b'/'
}

/// `~`, `~/x` and `~x` against `home` (pi's resource path expansion), after trimming.
pub fn expand_tilde(p: &str, home: &str) -> String {
    let t = super::js_trim(p);
    if t == "~" {
        return home.to_string();
    }
    if let Some(rest) = t.strip_prefix("~/") {
        return join(home, rest);
    }
    if let Some(rest) = t.strip_prefix('~') {
        return join(home, rest);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_semantics() {
        assert_eq!(normalize("/a/./b/../c//d/"), "/a/c/d/");
        assert_eq!(normalize("a/../../b"), "../b");
        assert_eq!(normalize("/../x"), "/x");
        assert_eq!(join("/a/b", "../c"), "/a/c");
        assert_eq!(join("/a", "skills"), "/a/skills");
        assert_eq!(resolve("/cwd", "x/y/"), "/cwd/x/y");
        assert_eq!(resolve("/cwd", "/abs/./p"), "/abs/p");
        assert_eq!(resolve("/cwd", ""), "/cwd");
        assert_eq!(dirname("/a/b/SKILL.md"), "/a/b");
        assert_eq!(dirname("/a"), "/");
        assert_eq!(dirname("a"), ".");
        assert_eq!(basename("/a/b/"), "b");
        assert_eq!(basename("/a/b.md"), "b.md");
        assert_eq!(relative("/a/b", "/a/b/c/d"), "c/d");
        assert_eq!(relative("/a/b", "/a/x"), "../x");
        assert_eq!(relative("/a/b", "/a/b"), "");
        assert!(is_under("/a/b/c", "/a/b"));
        assert!(is_under("/a/b", "/a/b/"));
        assert!(is_under("/a", "/"));
        assert_eq!(normalize("/a/b"), "/a/b");
        assert_eq!(normalize("a/"), "a/");
        assert!(!is_under("/a/bc", "/a/b"));
        assert_eq!(expand_tilde(" ~/x ", "/h"), "/h/x");
        assert_eq!(expand_tilde("~", "/h"), "/h");
        assert_eq!(expand_tilde("~x", "/h"), "/h/x");
        assert_eq!(expand_tilde("rel", "/h"), "rel");
    }
}
