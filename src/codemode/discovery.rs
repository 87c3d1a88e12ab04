//! `searchTools()`, `describeTool()`, `describeNamespace()` and `models.*`: the globals the worker
//! answers itself from the [`Setup`] it was given. Pure.
//!
//! The ranking is BM25 over each tool's name, description and namespace (k1 1.2, b 0.75; a name
//! match weighs more, exact names first), as pi ranks `searchTools()`; words are split at case
//! changes and non-alphanumerics, without pi's stemming and stop words.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::wire::{Setup, ToolInfo};

/// `searchTools()`'s default limit.
pub const DEFAULT_LIMIT: u64 = 8;
const NAME_WEIGHT: f64 = 3.0;
const NAMESPACE_WEIGHT: f64 = 1.0;

/// Answer global `name` (`Ok(None)`: `undefined`).
pub fn global(setup: &Setup, name: &str, args: &Value) -> Result<Option<Value>, String> {
    let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
    match name {
        "searchTools" => {
            let Some(query) = arg(0).as_str() else {
                return Err("searchTools() expects a query string".into());
            };
            let opts = arg(1);
            let limit = match opts.get("limit") {
                None | Some(Value::Null) => DEFAULT_LIMIT,
                Some(l) => match l.as_u64().filter(|n| *n > 0) {
                    Some(n) => n,
                    None => return Err("searchTools() limit must be a positive integer".into()),
                },
            };
            let namespace = match opts.get("namespace") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.as_str()),
                Some(_) => return Err("searchTools() namespace must be a string".into()),
            };
            let found = search(&setup.tools, query, namespace, limit as usize);
            Ok(Some(Value::Array(
                found
                    .into_iter()
                    .map(|t| json!({"name": t.js_name, "description": t.description}))
                    .collect(),
            )))
        }
        "describeTool" => {
            let Some(n) = arg(0).as_str() else {
                return Err("describeTool() expects a tool name".into());
            };
            Ok(setup
                .tools
                .iter()
                .find(|t| t.name == n || t.js_name == n)
                .map(|t| Value::String(t.description.clone())))
        }
        "describeNamespace" => {
            let Some(n) = arg(0).as_str() else {
                return Err("describeNamespace() expects a namespace name".into());
            };
            let Some(ns) = setup
                .namespaces
                .iter()
                .find(|ns| same_namespace(&ns.name, n))
            else {
                return Ok(None);
            };
            let tools: Vec<Value> = setup
                .tools
                .iter()
                .filter(|t| t.namespace.as_deref() == Some(ns.name.as_str()))
                .map(|t| Value::String(t.js_name.clone()))
                .collect();
            if tools.is_empty() {
                return Ok(None);
            }
            let mut o = serde_json::Map::new();
            o.insert("name".into(), Value::String(ns.name.clone()));
            if let Some(d) = ns.description.as_ref().filter(|d| !d.is_empty()) {
                o.insert("description".into(), Value::String(d.clone()));
            }
            if let Some(i) = ns.instructions.as_ref().filter(|i| !i.is_empty()) {
                o.insert("instructions".into(), Value::String(i.clone()));
            }
            o.insert("tools".into(), Value::Array(tools));
            Ok(Some(Value::Object(o)))
        }
        "models.classify" | "models.generateImages" => Err(format!(
            "{name}() is not supported by pith: it has no classifier or image models. \
             Use the tools instead."
        )),
        "models.getModelsOfType" | "models.getAvailableOfType" => Ok(Some(json!([]))),
        "models.getModelOfType" => Ok(None),
        _ => Err(format!("{name} is not available")),
    }
}

/// A name as a JavaScript identifier: characters not valid in one (a leading digit too) become `_`.
pub fn identifier(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let valid = c.is_ascii_alphabetic()
            || c == '_'
            || c == '$'
            || (!out.is_empty() && c.is_ascii_digit());
        out.push(if valid { c } else { '_' });
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

fn same_namespace(name: &str, query: &str) -> bool {
    name == query || identifier(name) == identifier(query)
}

/// Words of `text`: split at case changes and non-alphanumerics, lower case.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if c.is_alphanumeric() {
            let boundary = matches!(prev, Some(p) if (p.is_lowercase() || p.is_ascii_digit()) && c.is_uppercase());
            if boundary && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev = Some(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A tool indexed: its words of name, text counts, text length, namespace words.
type Doc<'a> = (
    &'a ToolInfo,
    HashSet<String>,
    HashMap<String, usize>,
    usize,
    HashSet<String>,
);

/// The `limit` best tools for `query` (in `namespace` if given).
pub fn search<'a>(
    tools: &'a [ToolInfo],
    query: &str,
    namespace: Option<&str>,
    limit: usize,
) -> Vec<&'a ToolInfo> {
    let terms: HashSet<String> = words(query).into_iter().collect();
    let docs: Vec<Doc> = tools
        .iter()
        .filter(|t| match namespace {
            Some(n) => t
                .namespace
                .as_deref()
                .is_some_and(|ns| same_namespace(ns, n)),
            None => true,
        })
        .map(|t| {
            let name: HashSet<String> = words(&t.name).into_iter().collect();
            let text = words(&t.summary);
            let mut counts = HashMap::new();
            for w in &text {
                *counts.entry(w.clone()).or_insert(0) += 1;
            }
            let ns: HashSet<String> = t
                .namespace
                .as_deref()
                .map(|n| words(n).into_iter().collect())
                .unwrap_or_default();
            (t, name, counts, text.len(), ns)
        })
        .collect();
    if terms.is_empty() || docs.is_empty() || limit == 0 {
        return Vec::new();
    }
    let n = docs.len() as f64;
    let avg = (docs.iter().map(|d| d.3).sum::<usize>() as f64 / n).max(1.0);
    let idf: HashMap<&String, f64> = terms
        .iter()
        .map(|term| {
            let df = docs
                .iter()
                .filter(|d| d.1.contains(term) || d.2.contains_key(term) || d.4.contains(term))
                .count() as f64;
            (term, (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
        })
        .collect();
    let exact_query = identifier(query.trim()).to_lowercase();
    let (k1, b) = (1.2, 0.75);
    let mut scored: Vec<(bool, usize, f64, usize)> = Vec::new();
    for (i, (t, name, counts, len, ns)) in docs.iter().enumerate() {
        let norm = k1 * (1.0 - b + b * (*len as f64) / avg);
        let (mut score, mut covered) = (0.0, 0usize);
        for term in &terms {
            let c = *counts.get(term).unwrap_or(&0) as f64;
            let w = if name.contains(term) {
                NAME_WEIGHT
            } else {
                0.0
            } + if ns.contains(term) {
                NAMESPACE_WEIGHT
            } else {
                0.0
            } + c * (k1 + 1.0) / (c + norm);
            if w > 0.0 {
                covered += 1;
            }
            score += idf.get(term).copied().unwrap_or(0.0) * w;
        }
        if score == 0.0 {
            continue;
        }
        let lname = identifier(&t.name).to_lowercase();
        let exact = lname == exact_query || lname.ends_with(&format!("__{exact_query}"));
        scored.push((exact, covered, score, i));
    }
    scored.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.cmp(&a.1))
            .then(b.2.partial_cmp(&a.2).unwrap_or(std::cmp::Ordering::Equal))
    });
    scored
        .into_iter()
        .take(limit)
        .map(|(_, _, _, i)| docs[i].0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, summary: &str, ns: Option<&str>) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            js_name: identifier(name),
            description: format!("{summary} (declaration)"),
            summary: summary.into(),
            namespace: ns.map(str::to_string),
        }
    }

    #[test]
    fn identifiers_and_words() {
        assert_eq!(
            identifier("mcp__dev-radius__search"),
            "mcp__dev_radius__search"
        );
        assert_eq!(identifier("9x"), "_x");
        assert_eq!(words("readFile, HTTP-get"), ["read", "file", "http", "get"]);
    }

    #[test]
    fn search_ranks_names_and_filters_namespaces() {
        let tools = vec![
            tool("read", "Read the contents of a file", None),
            tool("bash", "Execute a bash command", None),
            tool("mcp__docs__search", "Search the documents", Some("docs")),
        ];
        let names = |v: Vec<&ToolInfo>| v.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(search(&tools, "bash command", None, 8)), ["bash"]);
        assert_eq!(
            names(search(&tools, "search", Some("docs"), 8)),
            ["mcp__docs__search"]
        );
        assert!(search(&tools, "file", Some("docs"), 8).is_empty());
        assert_eq!(names(search(&tools, "file", None, 1)), ["read"]);
    }

    #[test]
    fn globals_answer_and_refuse() {
        let setup = Setup {
            tools: vec![tool("mcp__docs__search", "Search", Some("docs"))],
            namespaces: vec![super::super::wire::Namespace {
                name: "docs".into(),
                description: Some("Docs server".into()),
                instructions: None,
            }],
            ..Setup::default()
        };
        assert_eq!(
            global(&setup, "describeNamespace", &json!(["docs"])).unwrap(),
            Some(json!({"name":"docs","description":"Docs server","tools":["mcp__docs__search"]}))
        );
        assert_eq!(
            global(&setup, "describeTool", &json!(["mcp__docs__search"])).unwrap(),
            Some(json!("Search (declaration)"))
        );
        assert_eq!(
            global(&setup, "describeTool", &json!(["nope"])).unwrap(),
            None
        );
        assert!(
            global(&setup, "models.classify", &json!([]))
                .unwrap_err()
                .contains("not supported by pith")
        );
        assert!(global(&setup, "searchTools", &json!([1])).is_err());
    }
}
