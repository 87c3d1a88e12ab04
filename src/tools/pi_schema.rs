//! pi 1.6.0's validation messages (pi-schema's explainer, pure): the errors of a value that
//! failed its schema, each `(path, message)` with the path as pi-ai shows it (`root`,
//! `edits.0.oldText`). The subset of JSON Schema tool schemas use: `type`, `enum`, `const`,
//! string / number / array / object keywords, `allOf`, `anyOf`, `oneOf`, `not`.

use serde_json::{Map, Value};

/// The errors of `value` against `schema`, in pi-schema's order (empty: it passes).
pub fn explain(schema: &Value, value: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    walk(None, schema, value, "", &mut out, 0);
    out.into_iter().map(|(p, m)| (dotted(&p), m)).collect()
}

/// [`explain`] for a whole document (`--output-schema`, `output_schema.rs`): a `$ref` to a local
/// JSON pointer (`#`, `#/$defs/item`) is followed within `root`; one that does not resolve, or
/// nesting past [`MAX_DEPTH`] (a `$ref` loop), is an error, never a pass.
pub fn explain_document(root: &Value, value: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    walk(Some(root), root, value, "", &mut out, 0);
    out.into_iter().map(|(p, m)| (dotted(&p), m)).collect()
}

/// [`explain_document`] against one subschema `node` of `root` (a `$defs` entry).
pub fn explain_node(root: &Value, node: &Value, value: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    walk(Some(root), node, value, "", &mut out, 0);
    out.into_iter().map(|(p, m)| (dotted(&p), m)).collect()
}

/// The schema a local `$ref` (`#` and a JSON pointer) names in `root`.
pub fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

/// The document `$ref`s resolve in (`None`: a tool schema, where `$ref` is not followed).
type Root<'a> = Option<&'a Value>;

/// pi-ai's `formatValidationPath`: `""` is `root`, `/edits/0/oldText` is `edits.0.oldText`.
pub fn dotted(pointer: &str) -> String {
    if pointer.is_empty() {
        return "root".to_string();
    }
    pointer[1..]
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn pointer(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Patterns compiled lately, per thread (the machine's validates every answer and tool call): a
/// `pattern` costs a compile (about a millisecond with a Unicode class) each time otherwise.
/// Bounded: at most this many, the oldest dropped first.
const PATTERN_CACHE: usize = 16;

/// Whether `s` matches the regex `pattern` (`None`: the pattern does not compile).
pub(crate) fn is_match(pattern: &str, s: &str) -> Option<bool> {
    use std::cell::RefCell;
    thread_local! {
        static CACHE: RefCell<Vec<(String, Option<regex::Regex>)>> = const { RefCell::new(Vec::new()) };
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some((_, re)) = c.iter().find(|(p, _)| p == pattern) {
            return re.as_ref().map(|re| re.is_match(s));
        }
        let re = regex::Regex::new(pattern).ok();
        let answer = re.as_ref().map(|re| re.is_match(s));
        if c.len() >= PATTERN_CACHE {
            c.remove(0);
        }
        c.push((pattern.to_string(), re));
        answer
    })
}

/// Deeper schemas than this are not explained further (tool schemas are shallow).
const MAX_DEPTH: usize = 64;

fn ok(root: Root, schema: &Value, v: &Value, depth: usize) -> bool {
    let mut out = Vec::new();
    walk(root, schema, v, "", &mut out, depth);
    out.is_empty()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Object(_) => "object",
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 => "integer",
            _ => "number",
        },
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    match ty {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

fn num(n: f64) -> String {
    super::js_num(n)
}

fn walk(
    root: Root,
    node: &Value,
    v: &Value,
    path: &str,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    let node = match node {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            out.push((path.to_string(), "no value is allowed here".to_string()));
            return;
        }
        Value::Object(m) => m,
        _ => return,
    };
    if depth > MAX_DEPTH {
        if root.is_some() {
            out.push((path.to_string(), "the schema nests too deeply".to_string()));
        }
        return;
    }
    let push = |out: &mut Vec<(String, String)>, msg: String| out.push((path.to_string(), msg));
    if let (Some(doc), Some(Value::String(r))) = (root, node.get("$ref")) {
        match resolve_ref(doc, r) {
            Some(target) => walk(root, target, v, path, out, depth + 1),
            None => push(out, format!("unresolvable $ref {r}")),
        }
    }
    if let Some(t) = node.get("type") {
        let types: Vec<&str> = match t {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            Value::String(s) => vec![s.as_str()],
            _ => Vec::new(),
        };
        if !types.iter().any(|t| has_type(v, t)) {
            push(
                out,
                format!("expected {}, got {}", types.join(" or "), type_name(v)),
            );
            return;
        }
    }
    if let Some(Value::Array(e)) = node.get("enum") {
        if !e.contains(v) {
            push(out, format!("expected one of {}", list_values(e)));
        }
    }
    if let Some(c) = node.get("const") {
        if c != v {
            push(out, format!("expected {c}"));
        }
    }
    match v {
        Value::String(s) => {
            let n = s.chars().count() as f64;
            if let Some(min) = node.get("minLength").and_then(Value::as_f64) {
                if n < min {
                    push(out, format!("expected at least {} characters", num(min)));
                }
            }
            if let Some(max) = node.get("maxLength").and_then(Value::as_f64) {
                if n > max {
                    push(out, format!("expected at most {} characters", num(max)));
                }
            }
            if let Some(p) = node.get("pattern").and_then(Value::as_str) {
                if is_match(p, s) == Some(false) {
                    push(out, format!("expected to match {p}"));
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let bound = |k: &str| node.get(k).and_then(Value::as_f64);
            if let Some(b) = bound("minimum").filter(|b| x < *b) {
                push(out, format!("expected >= {}", num(b)));
            }
            if let Some(b) = bound("maximum").filter(|b| x > *b) {
                push(out, format!("expected <= {}", num(b)));
            }
            if let Some(b) = bound("exclusiveMinimum").filter(|b| x <= *b) {
                push(out, format!("expected > {}", num(b)));
            }
            if let Some(b) = bound("exclusiveMaximum").filter(|b| x >= *b) {
                push(out, format!("expected < {}", num(b)));
            }
            if let Some(b) = bound("multipleOf").filter(|b| *b != 0.0 && (x / b).fract() != 0.0) {
                push(out, format!("expected a multiple of {}", num(b)));
            }
        }
        Value::Object(o) => walk_object(root, node, o, path, out, depth),
        Value::Array(a) => {
            let items = node.get("items");
            let prefix = node.get("prefixItems").and_then(Value::as_array);
            for (i, item) in a.iter().enumerate() {
                let s = prefix.and_then(|p| p.get(i)).or(items);
                if let Some(s) = s {
                    walk(root, s, item, &format!("{path}/{i}"), out, depth + 1);
                }
            }
            let n = a.len() as f64;
            if let Some(min) = node.get("minItems").and_then(Value::as_f64) {
                if n < min {
                    out.push((
                        path.to_string(),
                        format!("expected at least {} items", num(min)),
                    ));
                }
            }
            if let Some(max) = node.get("maxItems").and_then(Value::as_f64) {
                if n > max {
                    out.push((
                        path.to_string(),
                        format!("expected at most {} items", num(max)),
                    ));
                }
            }
            if node.get("uniqueItems") == Some(&Value::Bool(true))
                && a.iter().enumerate().any(|(i, x)| a[..i].contains(x))
            {
                out.push((path.to_string(), "expected unique items".to_string()));
            }
        }
        _ => {}
    }
    if let Some(Value::Array(all)) = node.get("allOf") {
        for s in all {
            walk(root, s, v, path, out, depth + 1);
        }
    }
    for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(Value::Array(branches)) = node.get(key) {
            walk_union(root, branches, v, path, out, exactly_one, depth);
        }
    }
    if let Some(n) = node.get("not") {
        if ok(root, n, v, depth + 1) {
            out.push((
                path.to_string(),
                "must not match the schema in not".to_string(),
            ));
        }
    }
}

fn walk_object(
    root: Root,
    node: &Map<String, Value>,
    o: &Map<String, Value>,
    path: &str,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    let empty = Map::new();
    let properties = node
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(Value::Array(required)) = node.get("required") {
        for k in required.iter().filter_map(Value::as_str) {
            if !o.contains_key(k) {
                out.push((pointer(path, k), "missing".to_string()));
            }
        }
    }
    for (k, s) in properties {
        if let Some(x) = o.get(k) {
            walk(root, s, x, &pointer(path, k), out, depth + 1);
        }
    }
    let patterns: Vec<(&String, &Value)> = node
        .get("patternProperties")
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    for (k, x) in o {
        let mut matched = properties.contains_key(k);
        for (p, s) in &patterns {
            if is_match(p, k) == Some(true) {
                matched = true;
                walk(root, s, x, &pointer(path, k), out, depth + 1);
            }
        }
        if !matched {
            match node.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    out.push((pointer(path, k), "unknown field".to_string()))
                }
                Some(s) => walk(root, s, x, &pointer(path, k), out, depth + 1),
                None => {}
            }
        }
    }
    let count = o.len() as f64;
    if let Some(min) = node.get("minProperties").and_then(Value::as_f64) {
        if count < min {
            out.push((
                path.to_string(),
                format!("expected at least {} properties", num(min)),
            ));
        }
    }
    if let Some(max) = node.get("maxProperties").and_then(Value::as_f64) {
        if count > max {
            out.push((
                path.to_string(),
                format!("expected at most {} properties", num(max)),
            ));
        }
    }
}

/// `anyOf` / `oneOf`: the branch a tag selects, else the branch declaring most of an object's
/// keys, then the one whose first error is deepest.
fn walk_union(
    root: Root,
    branches: &[Value],
    v: &Value,
    path: &str,
    out: &mut Vec<(String, String)>,
    exactly_one: bool,
    depth: usize,
) {
    let matches = branches
        .iter()
        .filter(|s| ok(root, s, v, depth + 1))
        .count();
    if matches == 1 || (!exactly_one && matches > 0) {
        return;
    }
    if matches > 1 {
        out.push((
            path.to_string(),
            "matches more than one alternative".to_string(),
        ));
        return;
    }
    if let (Some((key, values)), Value::Object(o)) = (tag_of(branches), v) {
        match o.get(&key).and_then(|t| values.iter().position(|x| x == t)) {
            None => out.push((
                pointer(path, &key),
                format!("expected one of {}", list_values(&values)),
            )),
            Some(i) => walk(root, &branches[i], v, path, out, depth + 1),
        }
        return;
    }
    let mut best: Option<(Vec<(String, String)>, usize)> = None;
    for s in branches {
        let mut errors = Vec::new();
        walk(root, s, v, path, &mut errors, depth + 1);
        if errors.is_empty() {
            continue;
        }
        let declared = match v {
            Value::Object(o) => s
                .get("properties")
                .and_then(Value::as_object)
                .map_or(0, |p| o.keys().filter(|k| p.contains_key(*k)).count()),
            _ => 0,
        };
        let better = match &best {
            None => true,
            Some((e, d)) => declared > *d || (declared == *d && errors[0].0.len() > e[0].0.len()),
        };
        if better {
            best = Some((errors, declared));
        }
    }
    match best {
        Some((errors, _)) => out.extend(errors),
        None => out.push((path.to_string(), "matches no alternative".to_string())),
    }
}

/// The property whose `const` tells the branches apart (each a distinct primitive).
fn tag_of(branches: &[Value]) -> Option<(String, Vec<Value>)> {
    let first = branches.first()?.get("properties")?.as_object()?;
    for key in first.keys() {
        let values: Vec<Option<&Value>> = branches
            .iter()
            .map(|s| s.get("properties")?.get(key)?.get("const"))
            .collect();
        if values
            .iter()
            .all(|x| x.is_some_and(|x| !x.is_object() && !x.is_array()))
        {
            let values: Vec<Value> = values.into_iter().flatten().cloned().collect();
            if values
                .iter()
                .enumerate()
                .all(|(i, x)| !values[..i].contains(x))
            {
                return Some((key.clone(), values));
            }
        }
    }
    None
}

/// `values` as JSON, at most 20 of them, then how many more there are.
fn list_values(values: &[Value]) -> String {
    const LISTED: usize = 20;
    let listed = Value::Array(values.iter().take(LISTED).cloned().collect()).to_string();
    if values.len() <= LISTED {
        return listed;
    }
    format!(
        "{}, ... and {} more]",
        &listed[..listed.len() - 1],
        values.len() - LISTED
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_schema() -> Value {
        json!({"type":"object","required":["path"],"properties":{
            "path":{"type":"string"},"offset":{"type":"number"},"limit":{"type":"number"}}})
    }

    fn e(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn messages_of_pi_schema() {
        assert_eq!(
            explain(&read_schema(), &json!({})),
            e(&[("path", "missing")])
        );
        assert_eq!(
            explain(&read_schema(), &json!({"path":"a","limit":"x"})),
            e(&[("limit", "expected number, got string")])
        );
        assert_eq!(
            explain(&json!({"type":"number"}), &json!(null)),
            e(&[("root", "expected number, got null")])
        );
        assert_eq!(
            explain(&json!({"type":"string"}), &json!(3)),
            e(&[("root", "expected string, got integer")])
        );
        assert_eq!(
            explain(&json!({"enum":["a","b"]}), &json!("c")),
            e(&[("root", "expected one of [\"a\",\"b\"]")])
        );
        assert_eq!(
            explain(&json!({"type":"integer","minimum":1}), &json!(0)),
            e(&[("root", "expected >= 1")])
        );
        assert_eq!(
            explain(
                &json!({"type":"object","properties":{"edits":{"type":"array","minItems":1,
                    "items":{"type":"object","required":["oldText","newText"],"additionalProperties":false,
                    "properties":{"oldText":{"type":"string"},"newText":{"type":"string"}}}}}}),
                &json!({"edits":[{"oldText":"a","x/y":1}]})
            ),
            e(&[
                ("edits.0.newText", "missing"),
                ("edits.0.x/y", "unknown field")
            ])
        );
        assert_eq!(
            explain(
                &json!({"type":["string","null"],"minLength":2}),
                &json!("a")
            ),
            e(&[("root", "expected at least 2 characters")])
        );
    }
}
