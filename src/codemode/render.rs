//! pi 1.6.0's TypeScript declarations of the tools scripts call (its `@earendil-works/pi-codemode`
//! `renderToolSample` and `schemaToType`): what `ALL_TOOLS`, `describeTool()`, `searchTools()` and
//! mode `only`'s listing show of a tool. Pure.

use serde_json::Value;

const INDENT: &str = "  ";
/// Longest rendered input type before it renders without tags, then as `unknown`.
const MAX_INPUT_CHARS: usize = 16_000;
/// Local `$ref` expansions per rendered schema.
const MAX_REF_EXPANSIONS: usize = 32;
/// Longest property tag kept.
const MAX_TAG_CHARS: usize = 80;
const TAG_KEYWORDS: [&str; 11] = [
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
];
const LOWER_BOUNDS: [&str; 4] = ["minimum", "exclusiveMinimum", "minLength", "minItems"];
const UPPER_BOUNDS: [&str; 4] = ["maximum", "exclusiveMaximum", "maxLength", "maxItems"];

/// What `read` resolves to in scripts.
pub const READ_OUTPUT: &str =
    "string | { data: string; mimeType: string; note: string; type: \"image\"; }";
/// What `bash` resolves to in scripts (its output schema rendered).
pub const BASH_OUTPUT: &str = "{\n  exit_code: number;\n  // Full output, when truncated\n  full_output_path?: string;\n  // Combined stdout and stderr, possibly truncated\n  output: string;\n  truncated: boolean;\n  wall_time_seconds: number;\n}";

/// A tool's sample: its description with its guidelines as bullets, then its declaration.
pub fn sample(
    name: &str,
    description: &str,
    guidelines: &[&str],
    parameters: &Value,
    output: &str,
) -> String {
    let bullets: Vec<String> = guidelines
        .iter()
        .map(|g| g.trim())
        .filter(|g| !g.is_empty())
        .map(|g| format!("- {g}"))
        .collect();
    let description = if bullets.is_empty() {
        description.trim().to_string()
    } else {
        format!("{}\n\n{}", description.trim(), bullets.join("\n"))
    };
    format!(
        "{}\n\ncodemode tool declaration:\n```ts\ndeclare const tools: {{ {}(args: {}): Promise<{output}>; }};\n```",
        description.trim(),
        super::discovery::identifier(name),
        schema_to_type(parameters, Some(MAX_INPUT_CHARS)),
    )
}

/// What a script's call of an MCP tool resolves to: its `CallToolResult`, `structuredContent`
/// typed by the tool's output schema.
pub fn mcp_output(output_schema: Option<&Value>) -> String {
    let block = serde_json::json!({
        "type": "object",
        "properties": {
            "type": {"enum": ["text", "image", "audio", "resource_link", "resource"]},
            "text": {"type": "string"},
            "data": {"type": "string"},
            "mimeType": {"type": "string"},
        },
        "required": ["type"],
        "additionalProperties": true,
    });
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "content": {"type": "array", "items": block},
            "structuredContent": output_schema.cloned().unwrap_or_else(|| serde_json::json!({})),
            "isError": {"type": "boolean"},
        },
        "required": ["content"],
        "additionalProperties": true,
    });
    schema_to_type(&schema, None)
}

struct Ctx<'a> {
    root: &'a Value,
    resolving: Vec<String>,
    expansions: usize,
    tags: bool,
}

/// A JSON Schema as a TypeScript type: objects on one line with properties sorted by name, or
/// one property per line with `//` comments (descriptions, constraint tags); `Array<T>`; local
/// `$ref`s resolved (recursive and remote ones `unknown`). Longer than `max_chars`: again
/// without tags, else `unknown`.
pub fn schema_to_type(schema: &Value, max_chars: Option<usize>) -> String {
    let render = |tags: bool| {
        let mut c = Ctx {
            root: schema,
            resolving: Vec::new(),
            expansions: 0,
            tags,
        };
        to_type(schema, &mut c, 0)
    };
    let t = render(true);
    let Some(max) = max_chars else { return t };
    if t.encode_utf16().count() <= max {
        return t;
    }
    let u = render(false);
    if u.encode_utf16().count() <= max {
        u
    } else {
        "unknown".into()
    }
}

fn resolve_ref<'a>(r: &str, root: &'a Value) -> Option<&'a Value> {
    if r != "#" && !r.starts_with("#/") {
        return None;
    }
    let mut cur = root;
    for seg in r
        .get(2..)
        .unwrap_or("")
        .split('/')
        .filter(|s| !s.is_empty())
    {
        let key = seg.replace("~1", "/").replace("~0", "~");
        cur = cur.as_object()?.get(&key)?;
    }
    (cur.is_object() || cur.is_boolean()).then_some(cur)
}

fn js(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "unknown".into())
}

fn union(types: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for t in types {
        if !unique.contains(&t) {
            unique.push(t);
        }
    }
    if unique.iter().any(|t| t == "unknown") {
        return "unknown".into();
    }
    if unique.is_empty() {
        "never".into()
    } else {
        unique.join(" | ")
    }
}

fn to_type(schema: &Value, c: &mut Ctx, depth: usize) -> String {
    let o = match schema {
        Value::Bool(true) => return "unknown".into(),
        Value::Bool(false) => return "never".into(),
        Value::Object(o) => o,
        _ => return "unknown".into(),
    };
    if depth > 64 {
        return "unknown".into();
    }
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        if c.resolving.iter().any(|x| x == r) || c.expansions >= MAX_REF_EXPANSIONS {
            return "unknown".into();
        }
        let Some(target) = resolve_ref(r, c.root) else {
            return "unknown".into();
        };
        c.expansions += 1;
        c.resolving.push(r.to_string());
        let t = to_type(target, c, depth + 1);
        c.resolving.pop();
        return t;
    }
    if let Some(v) = o.get("const") {
        return js(v);
    }
    if let Some(e) = o.get("enum").and_then(Value::as_array) {
        return union(e.iter().map(js).collect());
    }
    if let Some(vs) = o
        .get("anyOf")
        .and_then(Value::as_array)
        .or_else(|| o.get("oneOf").and_then(Value::as_array))
    {
        return union(vs.iter().map(|v| to_type(v, c, depth + 1)).collect());
    }
    if let Some(parts) = o.get("allOf").and_then(Value::as_array) {
        let parts: Vec<String> = parts
            .iter()
            .map(|p| to_type(p, c, depth + 1))
            .filter(|p| p != "unknown")
            .collect();
        if parts.is_empty() {
            return "unknown".into();
        }
        return parts
            .into_iter()
            .map(|p| {
                if p.contains(" | ") {
                    format!("({p})")
                } else {
                    p
                }
            })
            .collect::<Vec<_>>()
            .join(" & ");
    }
    match o.get("type") {
        Some(Value::Array(ts)) => {
            let types: Vec<String> = ts
                .iter()
                .map(|t| {
                    let mut s = o.clone();
                    s.insert("type".into(), t.clone());
                    to_type(&Value::Object(s), c, depth + 1)
                })
                .collect();
            union(types)
        }
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => array_type(o, c, depth),
            "object" => object_type(o, c, depth),
            _ => "unknown".into(),
        },
        None => {
            if o.contains_key("properties")
                || o.contains_key("additionalProperties")
                || o.contains_key("required")
            {
                object_type(o, c, depth)
            } else if o.contains_key("items") || o.contains_key("prefixItems") {
                array_type(o, c, depth)
            } else {
                "unknown".into()
            }
        }
        Some(_) => "unknown".into(),
    }
}

fn array_type(o: &serde_json::Map<String, Value>, c: &mut Ctx, depth: usize) -> String {
    if let Some(items) = o.get("items").filter(|i| !i.is_array()) {
        return format!("Array<{}>", to_type(items, c, depth + 1));
    }
    let tuple = o
        .get("prefixItems")
        .and_then(Value::as_array)
        .or_else(|| o.get("items").and_then(Value::as_array));
    match tuple {
        Some(t) if !t.is_empty() => format!(
            "[{}]",
            t.iter()
                .map(|i| to_type(i, c, depth + 1))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "unknown[]".into(),
    }
}

fn property_key(name: &str) -> String {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == '$')
        && chars.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == '$');
    if ok {
        name.to_string()
    } else {
        js(&Value::String(name.to_string()))
    }
}

fn is_line_end(ch: char) -> bool {
    matches!(ch, '\r' | '\n' | '\u{2028}' | '\u{2029}')
}

fn object_type(o: &serde_json::Map<String, Value>, c: &mut Ctx, depth: usize) -> String {
    let empty = serde_json::Map::new();
    let props = o
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = o
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut names: Vec<&String> = props.keys().collect();
    names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    let mut members: Vec<String> = names
        .iter()
        .map(|n| {
            let opt = if required.contains(&n.as_str()) {
                ""
            } else {
                "?"
            };
            format!(
                "{}{opt}: {};",
                property_key(n),
                to_type(&props[*n], c, depth + 1)
            )
        })
        .collect();
    match o.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => members.push("[key: string]: unknown;".into()),
        Some(a) => {
            let t = to_type(a, c, depth + 1);
            members.push(format!("[key: string]: {t};"));
        }
        None if names.is_empty() => members.push("[key: string]: unknown;".into()),
        None => {}
    }
    if members.is_empty() {
        return "{}".into();
    }
    let comments: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            let p = &props[*n];
            let mut lines: Vec<String> = p
                .get("description")
                .and_then(Value::as_str)
                .map(|d| {
                    d.trim()
                        .split(is_line_end)
                        .map(|l| l.trim().to_string())
                        .filter(|l| !l.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            if c.tags {
                let t = constraint_tags(p);
                if !t.is_empty() {
                    lines.push(t);
                }
            }
            lines
        })
        .collect();
    if comments.iter().all(Vec::is_empty) {
        return format!("{{ {} }}", members.join(" "));
    }
    let mut lines = vec!["{".to_string()];
    for (i, comment) in comments.iter().enumerate() {
        for l in comment {
            lines.push(format!("{INDENT}// {l}"));
        }
        lines.push(format!(
            "{INDENT}{}",
            members[i].replace('\n', &format!("\n{INDENT}"))
        ));
    }
    for m in &members[names.len()..] {
        lines.push(format!("{INDENT}{m}"));
    }
    lines.push("}".into());
    lines.join("\n")
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Constraints a property's type cannot express: `@integer @minimum 1 @default 20`.
fn constraint_tags(p: &Value) -> String {
    let Some(po) = p.as_object() else {
        return String::new();
    };
    let variants = po
        .get("anyOf")
        .and_then(Value::as_array)
        .or_else(|| po.get("oneOf").and_then(Value::as_array));
    let non_null: Vec<&Value> = variants
        .map(|v| {
            v.iter()
                .filter(|x| x.get("type").and_then(Value::as_str) != Some("null"))
                .collect()
        })
        .unwrap_or_default();
    let mut schemas: Vec<&serde_json::Map<String, Value>> = vec![po];
    if let [only] = non_null.as_slice() {
        if let Some(b) = only.as_object() {
            schemas.push(b);
        }
    }
    let mut tags: Vec<String> = Vec::new();
    let is_int = |t: Option<&Value>| match t {
        Some(Value::String(s)) => s == "integer",
        Some(Value::Array(a)) => a.iter().any(|x| x == "integer"),
        _ => false,
    };
    if schemas.iter().any(|s| is_int(s.get("type"))) {
        tags.push("@integer".into());
    }
    for kw in TAG_KEYWORDS {
        let values: Vec<&Value> = schemas.iter().filter_map(|s| s.get(kw)).collect();
        let lower = LOWER_BOUNDS.contains(&kw);
        if lower || UPPER_BOUNDS.contains(&kw) {
            let nums: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
            if nums.is_empty() {
                continue;
            }
            let v = if lower {
                nums.iter().cloned().fold(f64::MIN, f64::max)
            } else {
                nums.iter().cloned().fold(f64::MAX, f64::min)
            };
            tags.push(format!("@{kw} {}", num(v)));
            continue;
        }
        let mut seen: Vec<&Value> = Vec::new();
        for v in values {
            if seen.contains(&v) {
                continue;
            }
            seen.push(v);
            match v {
                Value::Number(n) => tags.push(format!("@{kw} {}", num(n.as_f64().unwrap_or(0.0)))),
                Value::String(s) => tags.push(format!("@{kw} {s}")),
                _ => {}
            }
        }
    }
    if schemas
        .iter()
        .any(|s| s.get("uniqueItems") == Some(&Value::Bool(true)))
    {
        tags.push("@uniqueItems".into());
    }
    if let Some(d) = po.get("default").filter(|d| !d.is_null()) {
        tags.push(format!("@default {}", js(d)));
    }
    if po.get("deprecated") == Some(&Value::Bool(true)) {
        tags.push("@deprecated".into());
    }
    tags.into_iter()
        .filter(|t| t.encode_utf16().count() <= MAX_TAG_CHARS)
        .map(|t| {
            t.chars()
                .map(|ch| {
                    if is_line_end(ch) {
                        format!("\\u{:04x}", ch as u32)
                    } else {
                        ch.to_string()
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_as_pi() {
        let read = json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
            "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
            "limit": {"type": "number", "description": "Maximum number of lines to read"}},
            "required": ["path"]});
        assert_eq!(
            sample(
                "read",
                "Read it.",
                &["Use read to examine files instead of cat or sed."],
                &read,
                READ_OUTPUT
            ),
            "Read it.\n\n- Use read to examine files instead of cat or sed.\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { read(args: {\n  // Maximum number of lines to read\n  limit?: number;\n  // Line number to start reading from (1-indexed)\n  offset?: number;\n  // Path to the file to read (relative or absolute)\n  path: string;\n}): Promise<string | { data: string; mimeType: string; note: string; type: \"image\"; }>; };\n```"
        );
        let types = json!({"type": "object", "properties": {
            "num": {"type": "number"}, "flag": {"type": "boolean"},
            "items": {"type": "array", "items": {"type": "integer"}},
            "obj": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
            "choice": {"type": "string", "enum": ["x", "y"]}}, "required": ["num"]});
        assert_eq!(
            schema_to_type(&types, None),
            "{ choice?: \"x\" | \"y\"; flag?: boolean; items?: Array<number>; num: number; obj?: { k: string; }; }"
        );
        assert_eq!(
            schema_to_type(
                &json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
                None
            ),
            "{\n  // @integer\n  a?: number;\n}"
        );
        assert_eq!(
            mcp_output(Some(
                &json!({"type": "object", "properties": {"x": {"type": "number"}}})
            )),
            "{ content: Array<{ data?: string; mimeType?: string; text?: string; type: \"text\" | \"image\" | \"audio\" | \"resource_link\" | \"resource\"; [key: string]: unknown; }>; isError?: boolean; structuredContent?: { x?: number; }; [key: string]: unknown; }"
        );
        assert_eq!(
            schema_to_type(&json!({"type": "object", "properties": {}}), None),
            "{ [key: string]: unknown; }"
        );
    }
}
