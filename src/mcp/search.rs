//! Tool search (pure): pi 1.6.0's BM25 ranking of tools that are not declared to the model, over
//! their names, their descriptions with the schema's descriptions and property names, and their
//! server's namespace, description and instructions. Used by the `tool_search` tool (and
//! codemode's `searchTools()`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// What a query is matched against.
pub struct Document {
    pub name: String,
    /// The description, then the schema's descriptions and property names.
    pub text: String,
    /// The server's namespace, description and instructions.
    pub namespace_text: String,
}

const STOP_WORDS: [&str; 21] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "with",
];

/// Naive singular form: `issues` → `issue`, `searches` → `search`.
fn stem(t: &str) -> String {
    let n = t.len();
    if n > 4 && t.ends_with("ies") {
        return format!("{}y", &t[..n - 3]);
    }
    if n > 4
        && ["ches", "shes", "sses", "xes", "zes"]
            .iter()
            .any(|e| t.ends_with(e))
    {
        return t[..n - 2].to_string();
    }
    if n > 3 && t.ends_with('s') && !t.ends_with("ss") {
        return t[..n - 1].to_string();
    }
    t.to_string()
}

/// Words of `text`: identifiers split at case changes, lower case, letters and digits only,
/// stop words dropped, plain ASCII words singularized.
pub fn tokenize(text: &str) -> Vec<String> {
    use unicode_normalization::UnicodeNormalization;
    let text: String = text.nfc().collect();
    // Split camelCase (`aB` → `a B`) and acronyms (`ABc` → `A Bc`).
    let chars: Vec<char> = text.chars().collect();
    let mut spaced = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                spaced.push(' ');
            }
        }
        spaced.push(c);
    }
    let lower = spaced.to_lowercase();
    let mut words = Vec::new();
    let mut cur = String::new();
    for c in lower.chars() {
        if c.is_alphanumeric() || is_mark(c) {
            cur.push(c);
        } else if !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
        .into_iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| {
            if w.bytes().all(|b| b.is_ascii_alphanumeric()) {
                stem(&w)
            } else {
                w
            }
        })
        .collect()
}

fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x300..=0x36F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// Descriptions and property names of a schema, following local `$ref`s once each.
pub fn schema_text(schema: &Value, parts: &mut Vec<String>) {
    let mut seen: HashSet<*const Value> = HashSet::new();
    walk(schema, schema, parts, &mut seen, 0);
}

fn resolve_ref<'a>(r: &str, root: &'a Value) -> Option<&'a Value> {
    let path = r.strip_prefix('#')?;
    if path.is_empty() {
        return Some(root);
    }
    root.pointer(path)
}

fn walk<'a>(
    s: &'a Value,
    root: &'a Value,
    parts: &mut Vec<String>,
    seen: &mut HashSet<*const Value>,
    depth: usize,
) {
    let Some(obj) = s.as_object() else { return };
    if depth > 64 {
        return;
    }
    if let Some(target) = obj
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(r, root))
    {
        if target.is_object() && seen.insert(target as *const Value) {
            walk(target, root, parts, seen, depth + 1);
        }
    }
    if let Some(d) = obj.get("description").and_then(Value::as_str) {
        parts.push(d.to_string());
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            parts.push(name.clone());
            walk(p, root, parts, seen, depth + 1);
        }
    }
    if let Some(items) = obj.get("items") {
        walk(items, root, parts, seen, depth + 1);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(vs) = obj.get(key).and_then(Value::as_array) {
            for v in vs {
                walk(v, root, parts, seen, depth + 1);
            }
        }
    }
}

/// A tool's document: `description` and its schema's text; the namespace text apart.
pub fn document(
    name: &str,
    description: &str,
    parameters: &Value,
    namespace: Option<(&str, &str, &str)>,
) -> Document {
    let mut parts = vec![description.to_string()];
    schema_text(parameters, &mut parts);
    let text = parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let namespace_text = namespace
        .map(|(n, d, i)| format!("{n} {d} {i}"))
        .unwrap_or_default();
    Document {
        name: name.to_string(),
        text,
        namespace_text,
    }
}

fn normalize_name(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

const NAME_WEIGHT: f64 = 3.0;
const NAMESPACE_WEIGHT: f64 = 0.5;
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The names of the best `limit` matches of `query`, best first: exact-name queries first, then
/// by the number of query terms matched, then by BM25 score; ties keep document order.
pub fn rank(query: &str, docs: &[Document], limit: usize) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for t in tokenize(query) {
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    if terms.is_empty() || docs.is_empty() || limit == 0 {
        return Vec::new();
    }
    struct Indexed {
        name_terms: HashSet<String>,
        local_terms: Vec<String>,
        counts: HashMap<String, usize>,
        len: usize,
        ns_terms: HashSet<String>,
    }
    let indexed: Vec<Indexed> = docs
        .iter()
        .map(|d| {
            let mut counts: HashMap<String, usize> = HashMap::new();
            for t in tokenize(&d.text) {
                *counts.entry(t).or_default() += 1;
            }
            let local = d.name.rsplit("__").next().unwrap_or(&d.name);
            let mut local_terms: Vec<String> = Vec::new();
            for t in tokenize(local) {
                if !local_terms.contains(&t) {
                    local_terms.push(t);
                }
            }
            Indexed {
                name_terms: tokenize(&d.name).into_iter().collect(),
                local_terms,
                len: counts.values().sum(),
                counts,
                ns_terms: tokenize(&d.namespace_text).into_iter().collect(),
            }
        })
        .collect();
    let n = indexed.len() as f64;
    let total: usize = indexed.iter().map(|d| d.len).sum();
    let avg = if total == 0 { 1.0 } else { total as f64 / n };
    let idf: Vec<f64> = terms
        .iter()
        .map(|t| {
            let f = indexed
                .iter()
                .filter(|d| {
                    d.name_terms.contains(t) || d.counts.contains_key(t) || d.ns_terms.contains(t)
                })
                .count() as f64;
            (1.0 + (n - f + 0.5) / (f + 0.5)).ln()
        })
        .collect();
    let bonus: f64 = idf.iter().sum();
    let exact_query = normalize_name(query);
    // (index, exact, covered, score)
    let mut matches: Vec<(usize, bool, usize, f64)> = Vec::new();
    for (i, d) in indexed.iter().enumerate() {
        let norm = K1 * (1.0 - B + B * d.len as f64 / avg);
        let mut score = 0.0;
        let mut covered = 0;
        for (t, w_idf) in terms.iter().zip(&idf) {
            let count = d.counts.get(t).copied().unwrap_or(0) as f64;
            let weight = if d.name_terms.contains(t) {
                NAME_WEIGHT
            } else {
                0.0
            } + if d.ns_terms.contains(t) {
                NAMESPACE_WEIGHT
            } else {
                0.0
            } + count * (K1 + 1.0) / (count + norm);
            if weight > 0.0 {
                covered += 1;
            }
            score += w_idf * weight;
        }
        if score == 0.0 {
            continue;
        }
        if !d.local_terms.is_empty() && d.local_terms.iter().all(|t| terms.contains(t)) {
            score += bonus;
        }
        let name = normalize_name(&docs[i].name);
        let exact = name == exact_query || name.ends_with(&format!("__{exact_query}"));
        matches.push((i, exact, covered, score));
    }
    matches.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(b.2.cmp(&a.2))
            .then(b.3.partial_cmp(&a.3).unwrap_or(std::cmp::Ordering::Equal))
    });
    matches
        .into_iter()
        .take(limit)
        .map(|(i, ..)| docs[i].name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens() {
        assert_eq!(
            tokenize("getIssues for the HTTPServer"),
            ["get", "issue", "http", "server"]
        );
        assert_eq!(tokenize("searches boxes class"), ["search", "box", "class"]);
    }

    #[test]
    fn ranking() {
        let ns = Some(("mcp__echo", "Echo test tools", ""));
        let docs = vec![
            document(
                "mcp__echo__echo",
                "Echo the given text back.",
                &json!({"type": "object", "properties": {"text": {"type": "string", "description": "Text to echo"}}}),
                ns,
            ),
            document(
                "mcp__echo__add",
                "Add two integers.",
                &json!({"type": "object", "properties": {"a": {}, "b": {}}}),
                ns,
            ),
            document("mcp__echo__fail", "Always fails.", &json!({}), ns),
        ];
        assert_eq!(
            rank("echo text", &docs, 8),
            ["mcp__echo__echo", "mcp__echo__add", "mcp__echo__fail"]
        );
        assert_eq!(rank("add", &docs, 1), ["mcp__echo__add"]);
        assert_eq!(rank("echo__fail", &docs, 8)[0], "mcp__echo__fail");
        assert!(rank("the", &docs, 8).is_empty());
    }
}
