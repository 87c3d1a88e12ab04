//! The `---` frontmatter block of a skill or prompt-template file, cut out exactly as pi cuts it
//! (`utils/frontmatter.js`): line endings normalised to `\n`; frontmatter only when the text
//! starts with `---` and a later line starts with `---`; the YAML is the text between the first
//! line and that `\n---`; the body is what follows that marker, trimmed. Without frontmatter the
//! body is the whole (normalised, untrimmed) text. pi 0.87.1 strips a leading BOM first.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::js_trim;
use super::yaml::{self, YamlError};

#[derive(Clone, Debug, PartialEq)]
pub struct Frontmatter {
    /// The YAML mapping (empty when there is no frontmatter, or it is not a mapping).
    pub fields: Map<String, Value>,
    pub body: String,
}

impl Frontmatter {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }
}

fn normalize_newlines(s: &str) -> Cow<'_, str> {
    if !s.contains('\r') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.replace("\r\n", "\n").replace('\r', "\n"))
}

/// The YAML text and the body (not yet trimmed) of normalised text.
fn split(normalized: &str) -> (Option<&str>, &str) {
    if !normalized.starts_with("---") {
        return (None, normalized);
    }
    let Some(end) = normalized[3..].find("\n---").map(|i| i + 3) else {
        return (None, normalized);
    };
    // pi takes `slice(4, end)`: the character after `---` (normally the newline) is dropped.
    let start = 3 + normalized[3..].chars().next().map_or(0, char::len_utf8);
    let yaml_text = if start <= end {
        &normalized[start..end]
    } else {
        ""
    };
    (Some(yaml_text), js_trim(&normalized[end + 4..]))
}

fn fields_of(yaml_text: Option<&str>) -> Result<Map<String, Value>, YamlError> {
    match yaml_text {
        None | Some("") => Ok(Map::new()),
        Some(y) => Ok(match yaml::parse(y)? {
            Value::Object(m) => m,
            _ => Map::new(),
        }),
    }
}

/// Split `content` into frontmatter and body; `strip_bom` is pi 0.87.1's behaviour.
pub fn parse(content: &str, strip_bom: bool) -> Result<Frontmatter, YamlError> {
    let content = if strip_bom {
        content.strip_prefix('\u{feff}').unwrap_or(content)
    } else {
        content
    };
    let normalized = normalize_newlines(content);
    let (yaml_text, body) = split(&normalized);
    Ok(Frontmatter {
        fields: fields_of(yaml_text)?,
        body: body.to_string(),
    })
}

/// Only the frontmatter fields (a skill's body is read again when it is used).
pub fn fields(content: &str, strip_bom: bool) -> Result<Map<String, Value>, YamlError> {
    let content = if strip_bom {
        content.strip_prefix('\u{feff}').unwrap_or(content)
    } else {
        content
    };
    let normalized = normalize_newlines(content);
    fields_of(split(&normalized).0)
}

/// The body without its frontmatter (pi's `stripFrontmatter`).
pub fn strip(content: &str, strip_bom: bool) -> Result<String, YamlError> {
    parse(content, strip_bom).map(|f| f.body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fm(s: &str) -> (Value, String) {
        let f = parse(s, false).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        (Value::Object(f.fields), f.body)
    }

    #[test]
    fn extraction_edges_as_pi() {
        assert_eq!(
            fm("no frontmatter\n"),
            (json!({}), "no frontmatter\n".into())
        );
        assert_eq!(fm("---\nname: a\n"), (json!({}), "---\nname: a\n".into()));
        assert_eq!(fm("---\n---\nbody"), (json!({}), "body".into()));
        assert_eq!(
            fm("---name: x\ndescription: y\n---\nbody"),
            (json!({"ame":"x","description":"y"}), "body".into())
        );
        assert_eq!(
            fm("---\nname: a\n----\nbody"),
            (json!({"name":"a"}), "-\nbody".into())
        );
        assert_eq!(
            fm("---\r\nname: a\r\n---\r\n\r\n  body  \r\n"),
            (json!({"name":"a"}), "body".into())
        );
        assert_eq!(
            fm("---\rname: a\r---\rbody"),
            (json!({"name":"a"}), "body".into())
        );
        assert_eq!(fm("---\n- a list\n---\nb"), (json!({}), "b".into()));
        let bom = "\u{feff}---\nname: a\n---\nbody";
        assert_eq!(fm(bom).0, json!({}));
        assert_eq!(parse(bom, true).unwrap().body, "body");
    }

    #[test]
    fn broken_yaml_is_an_error() {
        assert!(parse("---\ndescription: a: b\n---\n", false).is_err());
    }
}

/// Every case of `fixtures/skills/frontmatter_pi_0.73.1.json` (inputs run through pi 0.73.1's
/// own `parseFrontmatter`): pith accepts what pi accepts with the same values, and rejects
/// what pi rejects.
#[cfg(test)]
mod pi_cases {
    use super::*;

    #[test]
    fn same_as_pi() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/skills/frontmatter_pi_0.73.1.json"
        );
        let mut failures = Vec::new();
        // Known and accepted: complex keys (`? key`), which no skill or template uses.
        let unsupported = |s: &str| s.contains("\n? ");
        let path = std::env::var("PITH_FRONTMATTER_CASES").unwrap_or(path.to_string());
        let cases: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for c in &cases {
            let input = c["input"].as_str().unwrap();
            if unsupported(input) {
                continue;
            }
            let got = parse(input, false);
            match (&c.get("error"), got) {
                (Some(e), Ok(f)) => failures.push(format!(
                    "{input:?}: pi fails ({e}), pith gives {}",
                    Value::Object(f.fields)
                )),
                (Some(_), Err(_)) => {}
                (None, Err(e)) => failures.push(format!("{input:?}: pith fails: {e}")),
                (None, Ok(f)) => {
                    let want = match &c["frontmatter"] {
                        Value::Object(m) => Value::Object(m.clone()),
                        _ => Value::Object(Map::new()),
                    };
                    let got = Value::Object(f.fields);
                    if got != want || f.body != c["body"].as_str().unwrap() {
                        failures.push(format!(
                            "{input:?}: pi {want} {:?}, pith {got} {:?}",
                            c["body"], f.body
                        ));
                    }
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {}:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
