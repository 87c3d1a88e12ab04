//! Constrained sampling of tool arguments, as pi 0.87.1 asks providers for it (`--compat 0.87`).
//!
//! A tool may declare `constrainedSampling: {"type":"json_schema","strict":"prefer"|"require"}`
//! (pi 0.87.1's four built-in file and shell tools prefer it). Where the provider supports strict
//! tool schemas, such a tool is sent with a strict form of its schema ([`make_strict`]: every
//! property required, optional ones made nullable, no additional properties) and the API's
//! strict marker; a schema that has no strict form is sent as it is (`prefer`) or fails the
//! request (`require`). Pure code: each API's request builder decides whether its provider
//! supports strict schemas and calls [`resolve`] and [`parameters`].

use serde_json::{Map, Value, json};

use crate::llm::ToolSchema;

/// Keywords a strict schema cannot hold.
const UNSUPPORTED: [&str; 16] = [
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
];

/// Deepest nesting considered: a schema deeper than this has no strict form (no recursion
/// without bound on hostile schemas from extensions or MCP servers).
const MAX_DEPTH: usize = 64;

/// The strict form of a tool's parameter schema, or why it has none.
pub fn make_strict(schema: &Value) -> Result<Value, String> {
    let mut s = schema.clone();
    if !s.is_object() {
        return Err("root schema must have type object".into());
    }
    strict_node(&mut s, 0)?;
    if s.get("type") != Some(&json!("object")) {
        return Err("root schema must have type object".into());
    }
    Ok(s)
}

fn is_structured(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    types.contains(&"object")
        || types.contains(&"array")
        || o.contains_key("properties")
        || o.contains_key("items")
}

fn allows_null(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    match o.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(a)) if a.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    if o.get("const") == Some(&Value::Null) {
        return true;
    }
    if let Some(Value::Array(e)) = o.get("enum") {
        if e.contains(&Value::Null) {
            return true;
        }
    }
    matches!(o.get("anyOf"), Some(Value::Array(a)) if a.iter().any(allows_null))
}

fn strict_node(v: &mut Value, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("the schema is nested too deeply".into());
    }
    let Some(o) = v.as_object_mut() else {
        return Err("boolean schemas are unsupported".into());
    };
    for k in UNSUPPORTED {
        if o.contains_key(k) {
            return Err(format!("{k} schemas are unsupported"));
        }
    }
    if let Some(any) = o.get_mut("anyOf") {
        let Some(variants) = any.as_array_mut().filter(|a| !a.is_empty()) else {
            return Err("anyOf must contain at least one schema".into());
        };
        for variant in variants {
            if is_structured(variant) {
                return Err("object and array unions are unsupported".into());
            }
            strict_node(variant, depth + 1)?;
        }
    }
    if let Some(items) = o.get_mut("items") {
        if items.is_array() {
            return Err("tuple schemas are unsupported".into());
        }
        strict_node(items, depth + 1)?;
    }
    let is_object = o.get("type") == Some(&json!("object"));
    if o.contains_key("properties") && !is_object {
        return Err("properties require type object".into());
    }
    if !is_object {
        return Ok(());
    }
    if matches!(o.get("additionalProperties"), Some(a) if *a != Value::Bool(false)) {
        return Err("schema-valued or true additionalProperties is unsupported".into());
    }
    if matches!(o.get("properties"), Some(p) if !p.is_object()) {
        return Err("object properties must be a schema map".into());
    }
    let required: Vec<String> = match o.get("required") {
        None => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => return Err("object required must be a string array".into()),
    };
    let mut props = match o.get_mut("properties") {
        Some(Value::Object(p)) => std::mem::take(p),
        _ => Map::new(),
    };
    if required.iter().any(|k| !props.contains_key(k)) {
        return Err("required contains an unknown property".into());
    }
    for (k, p) in props.iter_mut() {
        strict_node(p, depth + 1)?;
        if !required.contains(k) && !allows_null(p) {
            let inner = std::mem::take(p);
            *p = json!({"anyOf": [inner, {"type": "null"}]});
        }
    }
    let names: Vec<Value> = props.keys().map(|k| json!(k)).collect();
    if o.contains_key("properties") {
        o.insert("properties".into(), Value::Object(props));
    }
    o.insert("required".into(), Value::Array(names));
    o.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

/// pi 0.87.1's `resolveJsonSchemaStrictSampling`: `Ok(Some(true))` when the tool asks for JSON
/// schema sampling, the provider supports strict schemas and the schema has a strict form;
/// `Ok(None)` otherwise; `Err` when the tool requires it and cannot have it.
pub fn resolve(tool: &ToolSchema, supported: bool) -> Result<Option<bool>, String> {
    let Some(cfg) = &tool.constrained_sampling else {
        return Ok(None);
    };
    if cfg.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Ok(None);
    }
    let require = cfg.get("strict").and_then(Value::as_str) == Some("require");
    if supported {
        return match make_strict(&tool.parameters) {
            Ok(_) => Ok(Some(true)),
            Err(_) if !require => Ok(None),
            Err(why) => Err(format!(
                "Tool \"{}\" requires JSON-schema constrained sampling, but {why}.",
                tool.name
            )),
        };
    }
    if require {
        return Err(format!(
            "Tool \"{}\" requires JSON-schema constrained sampling, but strict tools are unsupported.",
            tool.name
        ));
    }
    Ok(None)
}

/// [`resolve`] for the tools pith can offer: none requires strict sampling (extensions and MCP
/// servers declare no `constrainedSampling`; the built-ins prefer it), so a refusal never
/// arises and is sent as a plain schema.
pub fn resolve_preferred(tool: &ToolSchema, supported: bool) -> Option<bool> {
    resolve(tool, supported).unwrap_or(None)
}

/// Whether the model's `compat` sets `key`, else `default`.
pub fn compat_flag(model: &crate::llm::Model, key: &str, default: bool) -> bool {
    model
        .compat
        .as_ref()
        .and_then(|c| c.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(default)
}

/// The parameters to send: the strict form when `strict` is `Some(true)`.
pub fn parameters(tool: &ToolSchema, strict: Option<bool>) -> Value {
    if strict == Some(true) {
        if let Ok(s) = make_strict(&tool.parameters) {
            return s;
        }
    }
    tool.parameters.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(parameters: Value, cs: Option<Value>) -> ToolSchema {
        ToolSchema {
            name: "t".into(),
            description: "d".into(),
            parameters,
            constrained_sampling: cs,
        }
    }

    #[test]
    fn optional_properties_become_nullable_and_all_are_required() {
        let read = json!({"type":"object","required":["path"],"properties":{
            "path":{"type":"string","description":"p"},
            "offset":{"type":"number","description":"o"}}});
        assert_eq!(
            make_strict(&read).unwrap(),
            json!({"type":"object","required":["path","offset"],"properties":{
                "path":{"type":"string","description":"p"},
                "offset":{"anyOf":[{"type":"number","description":"o"},{"type":"null"}]}},
                "additionalProperties":false})
        );
        // Order: `required` keeps its place, `additionalProperties` comes last; nested objects
        // and array items are made strict too.
        let nested = json!({"type":"object","properties":{"edits":{"type":"array","items":{
            "type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}});
        assert_eq!(
            make_strict(&nested).unwrap(),
            json!({"type":"object","properties":{"edits":{"anyOf":[{"type":"array","items":{
                "type":"object","properties":{"a":{"type":"string"}},"required":["a"],
                "additionalProperties":false}},{"type":"null"}]}},
                "required":["edits"],"additionalProperties":false})
        );
    }

    #[test]
    fn schemas_without_a_strict_form() {
        for (s, why) in [
            (
                json!({"type":"object","$defs":{}}),
                "$defs schemas are unsupported",
            ),
            (
                json!({"type":"object","additionalProperties":true}),
                "schema-valued or true additionalProperties is unsupported",
            ),
            (
                json!({"type":"object","properties":{"x":{"anyOf":[{"type":"object"}]}}}),
                "object and array unions are unsupported",
            ),
            (
                json!({"type":"object","required":["y"],"properties":{}}),
                "required contains an unknown property",
            ),
            (
                json!({"type":"string"}),
                "root schema must have type object",
            ),
            (json!(true), "root schema must have type object"),
        ] {
            assert_eq!(make_strict(&s).unwrap_err(), why);
        }
        let mut deep = json!({"type":"string"});
        for _ in 0..200 {
            deep = json!({"type":"array","items":deep});
        }
        assert!(make_strict(&json!({"type":"object","properties":{"d":deep}})).is_err());
    }

    #[test]
    fn resolve_prefers_or_requires() {
        let ok = json!({"type":"object","properties":{}});
        let bad = json!({"type":"object","$defs":{}});
        let prefer = Some(json!({"type":"json_schema","strict":"prefer"}));
        let require = Some(json!({"type":"json_schema","strict":"require"}));
        assert_eq!(
            resolve(&tool(ok.clone(), prefer.clone()), true),
            Ok(Some(true))
        );
        assert_eq!(resolve(&tool(ok.clone(), prefer.clone()), false), Ok(None));
        assert_eq!(resolve(&tool(bad.clone(), prefer), true), Ok(None));
        assert_eq!(resolve(&tool(ok.clone(), None), true), Ok(None));
        assert_eq!(
            resolve(&tool(bad, require.clone()), true).unwrap_err(),
            "Tool \"t\" requires JSON-schema constrained sampling, but $defs schemas are unsupported."
        );
        assert_eq!(
            resolve(&tool(ok, require), false).unwrap_err(),
            "Tool \"t\" requires JSON-schema constrained sampling, but strict tools are unsupported."
        );
    }
}
