//! Which tools `--tools` / `--exclude-tools` leave active (pure).
//!
//! pi 1.6.0's rules (`--compat 1.6`): a `--tools` list of only `+name` / `-name` entries changes
//! the default set (`+` adds a name at the end, `-` removes it), a list of plain names replaces
//! it, and mixing both is an error; `*` in a plain `--tools` entry or an `--exclude-tools` entry
//! matches any characters. A plain list activates its exact names in its order, then every
//! registered tool it names or matches, in registration order (pi's `_refreshToolRegistry`:
//! "naming or matching a tool activates it"). Before (0.73.1, 0.87.1) every entry is an exact
//! name.

/// Whether an entry modifies the default set (`+name` / `-name`).
pub fn is_modifier(entry: &str) -> bool {
    entry.starts_with('+') || entry.starts_with('-')
}

/// pi 1.6.0's complaint about a `--tools` list, if any: plain names mixed with `±name`
/// entries, or a pattern in a `±name` entry.
pub fn tool_list_error(entries: &[String]) -> Option<String> {
    let modifiers: Vec<&String> = entries.iter().filter(|e| is_modifier(e)).collect();
    if modifiers.is_empty() {
        return None;
    }
    if modifiers.len() < entries.len() {
        return Some("tool names cannot be mixed with +name or -name entries".to_string());
    }
    modifiers
        .iter()
        .find(|e| e.contains('*'))
        .map(|p| format!("+name and -name entries take exact tool names, not patterns: {p}"))
}

/// Apply the `+name` / `-name` entries of `entries` to `base`, in order; other entries are
/// ignored. `+name` appends a name not yet there; `-name` removes it.
pub fn apply_modifiers(base: &[String], entries: &[String]) -> Vec<String> {
    let mut tools = base.to_vec();
    for entry in entries.iter().filter(|e| is_modifier(e)) {
        let name = &entry[1..];
        let at = tools.iter().position(|t| t == name);
        if entry.starts_with('+') {
            if at.is_none() && !name.is_empty() {
                tools.push(name.to_string());
            }
        } else if let Some(i) = at {
            tools.remove(i);
        }
    }
    tools
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters (possibly empty)
/// and everything else is literal.
pub fn matches_pattern(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `name` is one of `entries`: an exact name, or (with `patterns`) a `*` pattern.
pub fn matches_any(entries: &[String], name: &str, patterns: bool) -> bool {
    entries.iter().any(|e| {
        if patterns && e.contains('*') {
            matches_pattern(e, name)
        } else {
            e == name
        }
    })
}

/// The names of the active tools, in order. `defaults`: the default set (empty after
/// `--no-tools` / `--no-builtin-tools`); `tools`: the `--tools` list; `exclude`:
/// `--exclude-tools`; `modifiers`: pi 1.6.0's rules (see the module doc), with `registry` the
/// tools a plain list's patterns can match, in registration order.
pub fn select(
    defaults: &[String],
    tools: Option<&[String]>,
    exclude: &[String],
    modifiers: bool,
    registry: &[&str],
) -> Vec<String> {
    let chosen: Vec<String> = match tools {
        Some(list) if modifiers && list.iter().any(|e| is_modifier(e)) => {
            apply_modifiers(defaults, list)
        }
        Some(list) if modifiers => {
            let mut names: Vec<String> =
                list.iter().filter(|e| !e.contains('*')).cloned().collect();
            for r in registry {
                if matches_any(list, r, true) && !names.iter().any(|n| n == r) {
                    names.push(r.to_string());
                }
            }
            names
        }
        Some(list) => list.to_vec(),
        None => defaults.to_vec(),
    };
    chosen
        .into_iter()
        .filter(|n| !matches_any(exclude, n, modifiers))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const DEFAULTS: [&str; 4] = ["read", "bash", "edit", "write"];
    const REG: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

    #[test]
    fn modifiers_change_the_default_set() {
        let d = v(&DEFAULTS);
        assert_eq!(
            select(&d, Some(&v(&["-write"])), &[], true, &REG),
            v(&["read", "bash", "edit"])
        );
        assert_eq!(
            select(&d, Some(&v(&["+grep", "-read", "+grep"])), &[], true, &REG),
            v(&["bash", "edit", "write", "grep"])
        );
        // With --no-tools the base is empty.
        assert_eq!(select(&[], Some(&v(&["+ls"])), &[], true, &REG), v(&["ls"]));
        // Before 1.6 a `-write` entry is a name like any other.
        assert_eq!(
            select(&d, Some(&v(&["-write"])), &[], false, &REG),
            v(&["-write"])
        );
    }

    #[test]
    fn plain_names_replace_and_patterns_exclude() {
        let d = v(&DEFAULTS);
        assert_eq!(
            select(&d, Some(&v(&["-write"])), &v(&["ed*"]), true, &REG),
            v(&["read", "bash"])
        );
        assert_eq!(
            select(&d, Some(&v(&["ls", "read"])), &[], true, &REG),
            v(&["ls", "read"])
        );
        assert_eq!(select(&d, None, &v(&["*e*"]), true, &REG), v(&["bash"]));
        // 0.87: exact names only.
        assert_eq!(select(&d, None, &v(&["ed*"]), false, &REG), d);
        // A pattern in a plain list activates the registered tools it matches, after the
        // exact names, in registration order (pi 1.6.0: `l*,gr*,read` → read, grep, ls).
        assert_eq!(
            select(&d, Some(&v(&["read", "mcp__x__*"])), &[], true, &REG),
            v(&["read"])
        );
        assert_eq!(
            select(&d, Some(&v(&["l*", "gr*", "read"])), &[], true, &REG),
            v(&["read", "grep", "ls"])
        );
        assert_eq!(
            select(
                &d,
                Some(&v(&["re*", "bash", "f*"])),
                &v(&["bash"]),
                true,
                &REG
            ),
            v(&["read", "find"])
        );
        assert_eq!(select(&d, Some(&v(&["*"])), &[], true, &REG), v(&REG));
    }

    #[test]
    fn list_errors_have_pis_words() {
        assert_eq!(tool_list_error(&v(&["read", "bash"])), None);
        assert_eq!(tool_list_error(&v(&["+read", "-bash"])), None);
        assert_eq!(
            tool_list_error(&v(&["read", "-bash"])).as_deref(),
            Some("tool names cannot be mixed with +name or -name entries")
        );
        assert_eq!(
            tool_list_error(&v(&["+mcp__*"])).as_deref(),
            Some("+name and -name entries take exact tool names, not patterns: +mcp__*")
        );
    }

    #[test]
    fn star_patterns() {
        assert!(matches_pattern("ed*", "edit"));
        assert!(matches_pattern("*", ""));
        assert!(matches_pattern("*it", "edit"));
        assert!(matches_pattern("e*i*t", "edit"));
        assert!(!matches_pattern("e*i*t", "eit2"));
        assert!(!matches_pattern("ab*ba", "aba"));
        assert!(matches_pattern("a.b", "a.b"));
        assert!(!matches_pattern("a.b", "axb"));
        assert!(!matches_pattern("ed", "edit"));
    }
}
