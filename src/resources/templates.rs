//! Prompt templates: a `.md` file turned into a [`Template`] (name from the file name,
//! description from the frontmatter or the first non-empty line), and `/name args` expansion
//! with pi's argument splitting and placeholders. Pure: the loader reads the files.
//!
//! The two versions differ in the details, all kept:
//! - 0.73.1 splits arguments on spaces and tabs, 0.87.1 on any whitespace; quotes (`"` or `'`)
//!   group, without escapes, and an empty quoted argument disappears;
//! - 0.73.1 substitutes in four passes (`$N`, then `${@:N[:L]}`, then `$ARGUMENTS`, then `$@`,
//!   so a value substituted early can be substituted again); 0.87.1 in one pass and adds
//!   `${N:-default}`, `${@:-default}`, `${ARGUMENTS:-default}`;
//! - 0.73.1 takes the name up to the first space (`/name\nx` is no template); 0.87.1 up to any
//!   whitespace.

use serde_json::Value;

use super::frontmatter;
use super::paths::basename;
use super::{Diagnostic, SourceInfo, js_is_space, js_trim, js_truthy, utf16_len};
use crate::protocol::{self, TemplateArgs, TemplateDescription};

#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    /// The file name without `.md`.
    pub name: String,
    /// A string, except where pi 0.73.1 keeps a non-string `description:` value as it is.
    pub description: Value,
    /// The body after the frontmatter.
    pub content: String,
    pub file_path: String,
    pub source_info: SourceInfo,
}

/// A template from a file's text; `None` when it is skipped (broken frontmatter).
pub fn from_file(
    file_path: &str,
    content: &str,
    profile: &protocol::Resources,
    source_info: SourceInfo,
) -> (Option<Template>, Vec<Diagnostic>) {
    let fm = match frontmatter::parse(content, profile.frontmatter_strips_bom) {
        Ok(f) => f,
        Err(e) => return (None, vec![Diagnostic::warning(e.to_string(), file_path)]),
    };
    let base = basename(file_path);
    let name = base.strip_suffix(".md").unwrap_or(base).to_string();
    let desc = fm.get("description");
    let mut description = if profile.template_description == TemplateDescription::StringOnly {
        match desc {
            Some(Value::String(s)) => Value::String(s.clone()),
            _ => Value::String(String::new()),
        }
    } else {
        match desc {
            Some(v) if js_truthy(v) => v.clone(),
            _ => Value::String(String::new()),
        }
    };
    if description == Value::String(String::new()) {
        if let Some(line) = fm.body.split('\n').find(|l| !js_trim(l).is_empty()) {
            description = Value::String(first_line_description(line));
        }
    }
    (
        Some(Template {
            name,
            description,
            content: fm.body,
            file_path: file_path.to_string(),
            source_info,
        }),
        Vec::new(),
    )
}

/// The first 60 UTF-16 units of a line, with `...` when it was longer.
fn first_line_description(line: &str) -> String {
    if utf16_len(line) <= 60 {
        return line.to_string();
    }
    let mut out = String::new();
    let mut units = 0;
    for c in line.chars() {
        let n = c.len_utf16();
        if units + n > 60 {
            break;
        }
        units += n;
        out.push(c);
    }
    out.push_str("...");
    out
}

/// pi's `parseCommandArgs`.
pub fn parse_args(s: &str, dialect: TemplateArgs) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let is_sep = |c: char| {
        if dialect == TemplateArgs::WithDefaults {
            js_is_space(c)
        } else {
            c == ' ' || c == '\t'
        }
    };
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => quote = Some(c),
            None if is_sep(c) => {
                if !cur.is_empty() {
                    args.push(std::mem::take(&mut cur));
                }
            }
            None => cur.push(c),
        }
    }
    if !cur.is_empty() {
        args.push(cur);
    }
    args
}

/// Leading ASCII digits of `s` and the rest.
fn digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at(n)
}

/// JS `parseInt` of a digit string as an index; huge values saturate (and select nothing).
fn num(d: &str) -> usize {
    d.parse::<usize>().unwrap_or(usize::MAX)
}

fn positional(args: &[String], n: usize) -> &str {
    n.checked_sub(1)
        .and_then(|i| args.get(i))
        .map_or("", String::as_str)
}

fn slice(args: &[String], start: usize, len: Option<usize>) -> String {
    let start = start.saturating_sub(1);
    if start >= args.len() {
        return String::new();
    }
    let end = match len {
        Some(l) => start.saturating_add(l).min(args.len()),
        None => args.len(),
    };
    args[start..end].join(" ")
}

/// `${@:N}` / `${@:N:L}` at the start of `s`: (start, len, bytes consumed).
fn parse_slice(s: &str) -> Option<(usize, Option<usize>, usize)> {
    let rest = s.strip_prefix("${@:")?;
    let (n, after) = digits(rest);
    if n.is_empty() {
        return None;
    }
    if let Some(after) = after.strip_prefix('}') {
        return Some((num(n), None, s.len() - after.len()));
    }
    let after = after.strip_prefix(':')?;
    let (l, after) = digits(after);
    if l.is_empty() {
        return None;
    }
    let after = after.strip_prefix('}')?;
    Some((num(n), Some(num(l)), s.len() - after.len()))
}

/// One left-to-right pass replacing what `matcher` recognises at each `$`.
fn replace_pass(content: &str, mut matcher: impl FnMut(&str) -> Option<(String, usize)>) -> String {
    let mut out = String::with_capacity(content.len());
    let mut rest = content;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let at = &rest[i..];
        match matcher(at) {
            Some((rep, used)) => {
                out.push_str(&rep);
                rest = &at[used..];
            }
            None => {
                out.push('$');
                rest = &at[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// pi's `substituteArgs`.
pub fn substitute(content: &str, args: &[String], dialect: TemplateArgs) -> String {
    let all = args.join(" ");
    if dialect == TemplateArgs::WithDefaults {
        return replace_pass(content, |s| {
            // ${N:-default} / ${@:-default} / ${ARGUMENTS:-default}
            if let Some(inner) = s.strip_prefix("${") {
                let (target, after) = if let Some(a) = inner.strip_prefix("ARGUMENTS") {
                    (Some("ARGUMENTS"), a)
                } else if let Some(a) = inner.strip_prefix('@') {
                    (Some("@"), a)
                } else {
                    let (d, a) = digits(inner);
                    ((!d.is_empty()).then_some(d), a)
                };
                if let (Some(t), Some(a)) = (target, after.strip_prefix(":-")) {
                    if let Some(close) = a.find('}') {
                        let default = &a[..close];
                        let used = s.len() - a.len() + close + 1;
                        let value = if t == "@" || t == "ARGUMENTS" {
                            all.as_str()
                        } else {
                            positional(args, num(t))
                        };
                        let v = if value.is_empty() { default } else { value };
                        return Some((v.to_string(), used));
                    }
                }
            }
            if let Some((start, len, used)) = parse_slice(s) {
                return Some((slice(args, start, len), used));
            }
            let rest = &s[1..];
            if rest.starts_with("ARGUMENTS") {
                return Some((all.clone(), 1 + "ARGUMENTS".len()));
            }
            if rest.starts_with('@') {
                return Some((all.clone(), 2));
            }
            let (d, _) = digits(rest);
            (!d.is_empty()).then(|| (positional(args, num(d)).to_string(), 1 + d.len()))
        });
    }
    let pass1 = replace_pass(content, |s| {
        let (d, _) = digits(&s[1..]);
        (!d.is_empty()).then(|| (positional(args, num(d)).to_string(), 1 + d.len()))
    });
    let pass2 = replace_pass(&pass1, |s| {
        parse_slice(s).map(|(start, len, used)| (slice(args, start, len), used))
    });
    let pass3 = pass2.replace("$ARGUMENTS", &all);
    pass3.replace("$@", &all)
}

/// `/name args` → the template's expansion; `None` when the text names no template.
pub fn expand(text: &str, templates: &[Template], dialect: TemplateArgs) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = if dialect == TemplateArgs::WithDefaults {
        // /^\/([^\s]+)(?:\s+([\s\S]*))?$/
        let end = rest.find(js_is_space).unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        let after = &rest[end..];
        (&rest[..end], after.trim_start_matches(js_is_space))
    } else {
        match rest.find(' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        }
    };
    let t = templates.iter().find(|t| t.name == name)?;
    Some(substitute(&t.content, &parse_args(args, dialect), dialect))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn tpl(name: &str, content: &str) -> Template {
        Template {
            name: name.into(),
            description: Value::String(String::new()),
            content: content.into(),
            file_path: format!("/t/{name}.md"),
            source_info: SourceInfo::synthetic("/t", "local", None, None),
        }
    }

    #[test]
    fn argument_splitting() {
        let v = TemplateArgs::Plain;
        assert_eq!(
            parse_args("a.rs \"b c\" 'd e' f", v),
            args(&["a.rs", "b c", "d e", "f"])
        );
        assert_eq!(parse_args("  a\t\tb  ", v), args(&["a", "b"]));
        assert_eq!(parse_args("x\"y z\"w ''", v), args(&["xy zw"]));
        assert_eq!(parse_args("a\nb", v), args(&["a\nb"]));
        assert_eq!(
            parse_args("a\nb", TemplateArgs::WithDefaults),
            args(&["a", "b"])
        );
        assert_eq!(parse_args("'unclosed arg", v), args(&["unclosed arg"]));
    }

    #[test]
    fn substitution_plain() {
        let a = args(&["a.rs", "b c", "d"]);
        let v = TemplateArgs::Plain;
        assert_eq!(
            substitute(
                "$1|$2|$4|$0|$@|$ARGUMENTS|${@:2}|${@:2:1}|${@:0}|${@:9}|$$1|${@:x}",
                &a,
                v
            ),
            "a.rs|b c|||a.rs b c d|a.rs b c d|b c d|b c|a.rs b c d||$a.rs|${@:x}"
        );
        // Four passes: a value put in by `$1` is substituted again by `$@`.
        assert_eq!(substitute("$1", &args(&["$@", "z"]), v), "$@ z");
        assert_eq!(
            substitute("$1", &args(&["$@", "z"]), TemplateArgs::WithDefaults),
            "$@"
        );
        assert_eq!(substitute("$99999999999999999999999", &a, v), "");
    }

    #[test]
    fn substitution_with_defaults() {
        let v = TemplateArgs::WithDefaults;
        assert_eq!(
            substitute(
                "${1:-one} ${3:-three} ${@:-none} ${ARGUMENTS:-none}",
                &args(&["x"]),
                v
            ),
            "x three x x"
        );
        assert_eq!(substitute("${@:-none}|${2:-}", &[], v), "none|");
    }

    #[test]
    fn expansion() {
        let ts = [tpl("review", "Review $1 ($@)")];
        let v = TemplateArgs::Plain;
        assert_eq!(
            expand("/review a b", &ts, v).as_deref(),
            Some("Review a (a b)")
        );
        assert_eq!(expand("/review", &ts, v).as_deref(), Some("Review  ()"));
        assert_eq!(expand("/review\na", &ts, v), None);
        assert_eq!(
            expand("/review\na", &ts, TemplateArgs::WithDefaults).as_deref(),
            Some("Review a (a)")
        );
        assert_eq!(expand("/other x", &ts, v), None);
        assert_eq!(expand("review x", &ts, v), None);
        assert_eq!(expand("/", &ts, TemplateArgs::WithDefaults), None);
    }

    #[test]
    fn descriptions() {
        let info = || SourceInfo::synthetic("/t/x.md", "local", None, None);
        let t = |text: &str, c| from_file("/t/x.md", text, c, info()).0.unwrap().description;
        let v = &protocol::v073::PROFILE.resources;
        assert_eq!(t("---\ndescription: Review\n---\nbody", v), "Review");
        assert_eq!(t("\n\n  first line\nsecond", v), "  first line");
        let long = "x".repeat(61);
        assert_eq!(t(&long, v), format!("{}...", "x".repeat(60)));
        assert_eq!(t("---\ndescription: 12\n---\nbody", v), 12);
        assert_eq!(
            t(
                "---\ndescription: 12\n---\nbody",
                &protocol::v087::PROFILE.resources
            ),
            "body"
        );
        assert_eq!(t("", v), "");
        assert!(
            from_file("/t/x.md", "---\na: b: c\n---\n", v, info())
                .0
                .is_none()
        );
    }
}
