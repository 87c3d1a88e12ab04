//! `searchTools()`, `describeTool()`, `describeNamespace()` and `models.*`: the globals the worker
//! answers itself from the [`Setup`] it was given. Pure.
//!
//! `searchTools()` ranks as pi 1.6.0 does, with `tool_search`'s ranking ([`crate::mcp::search`]).

use serde_json::{Value, json};

use super::wire::{Setup, ToolInfo};

/// `searchTools()`'s default limit.
pub const DEFAULT_LIMIT: u64 = 8;

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
            let found = search(setup, query, namespace, limit as usize);
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

/// pi's namespace names: `mcp__dev-radius`, `mcp__dev_radius`, and the server's own name
/// (`dev-radius`, `dev_radius`) all name namespace `mcp__dev_radius`.
fn same_namespace(name: &str, query: &str) -> bool {
    let q = identifier(query);
    name == query || identifier(name) == q || identifier(name) == format!("mcp__{q}")
}

/// The `limit` best tools for `query` (in `namespace` if given): pi's tool search ranking
/// ([`crate::mcp::search`]) over the tools' names, texts and namespaces.
pub fn search<'a>(
    setup: &'a Setup,
    query: &str,
    namespace: Option<&str>,
    limit: usize,
) -> Vec<&'a ToolInfo> {
    let tools: Vec<&ToolInfo> = setup
        .tools
        .iter()
        .filter(|t| match namespace {
            Some(n) => t
                .namespace
                .as_deref()
                .is_some_and(|ns| same_namespace(ns, n)),
            None => true,
        })
        .collect();
    let docs: Vec<crate::mcp::search::Document> = tools
        .iter()
        .map(|t| {
            let namespace_text = t
                .namespace
                .as_deref()
                .map(|n| {
                    let ns = setup.namespaces.iter().find(|x| x.name == n);
                    let d = ns.and_then(|x| x.description.as_deref()).unwrap_or("");
                    let i = ns.and_then(|x| x.instructions.as_deref()).unwrap_or("");
                    format!("{n} {d} {i}")
                })
                .unwrap_or_default();
            crate::mcp::search::Document {
                name: t.name.clone(),
                text: t.summary.clone(),
                namespace_text,
            }
        })
        .collect();
    crate::mcp::search::rank(query, &docs, limit)
        .into_iter()
        .filter_map(|n| tools.iter().find(|t| t.name == n).copied())
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
    }

    #[test]
    fn search_ranks_names_and_filters_namespaces() {
        let tools = vec![
            tool("read", "Read the contents of a file", None),
            tool("bash", "Execute a bash command", None),
            tool("mcp__docs__search", "Search the documents", Some("docs")),
        ];
        let tools = Setup {
            tools,
            ..Setup::default()
        };
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
            tools: vec![tool(
                "mcp__dev-docs__search",
                "Search",
                Some("mcp__dev_docs"),
            )],
            namespaces: vec![super::super::wire::Namespace {
                name: "mcp__dev_docs".into(),
                description: Some("Docs server".into()),
                instructions: None,
            }],
            ..Setup::default()
        };
        // pi's names of a namespace: with or without `mcp__`, `-` or `_`.
        for name in ["dev-docs", "dev_docs", "mcp__dev-docs", "mcp__dev_docs"] {
            assert_eq!(
                global(&setup, "describeNamespace", &json!([name])).unwrap(),
                Some(
                    json!({"name":"mcp__dev_docs","description":"Docs server","tools":["mcp__dev_docs__search"]})
                ),
                "{name}"
            );
        }
        assert_eq!(
            global(&setup, "describeTool", &json!(["mcp__dev_docs__search"])).unwrap(),
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
