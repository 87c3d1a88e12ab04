//! Argument validation for tool calls: the subset of JSON Schema the tool schemas use, with the
//! behaviour of the reference's AJV setup (`allErrors`, `coerceTypes: true`).
//!
//! Coercion follows AJV's scalar rules: `"5"` → `5` for numbers, `5`/`true` → `"5"`/`"true"` for
//! strings, `"true"`/`1` → `true` for booleans, `null` → `""`/`0`/`false`. Values are coerced in a
//! copy of the arguments; the error message quotes the original arguments, as the reference does.

use serde_json::{Map, Number, Value};

/// Validate (and coerce) `args` against `schema`. `Err` carries the reference's full message.
pub fn validate_args(tool_name: &str, schema: &Value, args: &Value) -> Result<Value, String> {
    let mut value = args.clone();
    let mut errors = Vec::new();
    check(schema, &mut value, "", &mut errors);
    if errors.is_empty() {
        return Ok(value);
    }
    let lines: Vec<String> = errors
        .iter()
        .map(|(path, msg)| format!("  - {path}: {msg}"))
        .collect();
    let received = serde_json::to_string_pretty(args).unwrap_or_else(|_| "null".to_string());
    Err(format!(
        "Validation failed for tool \"{tool_name}\":\n{}\n\nReceived arguments:\n{received}",
        lines.join("\n")
    ))
}

type Errors = Vec<(String, String)>;

/// The path AJV reports: the instance path without its leading `/`, or `fallback`, or `root`.
fn report_path(instance: &str, fallback: Option<&str>) -> String {
    if !instance.is_empty() {
        instance[1..].to_string()
    } else {
        fallback.unwrap_or("root").to_string()
    }
}

fn check(schema: &Value, value: &mut Value, path: &str, errors: &mut Errors) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|t| has_type(value, t)) {
            match names.iter().find_map(|t| coerce(value, t)) {
                Some(coerced) => *value = coerced,
                None => {
                    errors.push((
                        report_path(path, None),
                        format!("must be {}", names.join(",")),
                    ));
                    return;
                }
            }
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.iter().any(|a| a == value) {
            errors.push((
                report_path(path, None),
                "must be equal to one of the allowed values".to_string(),
            ));
        }
    }
    if let Some(expected) = schema.get("const") {
        if expected != value {
            errors.push((
                report_path(path, None),
                "must be equal to constant".to_string(),
            ));
        }
    }
    match value {
        Value::Object(obj) => check_object(schema, obj, path, errors),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    check(item_schema, item, &format!("{path}/{i}"), errors);
                }
            }
        }
        Value::String(s) => check_string(schema, s, path, errors),
        Value::Number(n) => check_number(schema, n, path, errors),
        _ => {}
    }
}

fn check_object(
    schema: &Map<String, Value>,
    obj: &mut Map<String, Value>,
    path: &str,
    errors: &mut Errors,
) {
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(name) {
                errors.push((
                    report_path(path, Some(name)),
                    format!("must have required property '{name}'"),
                ));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        for key in obj.keys() {
            if !props.is_some_and(|p| p.contains_key(key)) {
                errors.push((
                    report_path(path, None),
                    "must NOT have additional properties".to_string(),
                ));
            }
        }
    }
    if let Some(props) = props {
        for (name, prop_schema) in props {
            if let Some(v) = obj.get_mut(name) {
                check(
                    prop_schema,
                    v,
                    &format!("{path}/{}", escape_pointer(name)),
                    errors,
                );
            }
        }
    }
}

fn check_string(schema: &Map<String, Value>, s: &str, path: &str, errors: &mut Errors) {
    let len = s.encode_utf16().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if len > max {
            errors.push((
                report_path(path, None),
                format!("must NOT have more than {max} characters"),
            ));
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if len < min {
            errors.push((
                report_path(path, None),
                format!("must NOT have fewer than {min} characters"),
            ));
        }
    }
}

fn check_number(schema: &Map<String, Value>, n: &Number, path: &str, errors: &mut Errors) {
    let Some(x) = n.as_f64() else { return };
    if let Some(min) = schema.get("minimum") {
        if min.as_f64().is_some_and(|m| x < m) {
            errors.push((report_path(path, None), format!("must be >= {min}")));
        }
    }
    if let Some(max) = schema.get("maximum") {
        if max.as_f64().is_some_and(|m| x > m) {
            errors.push((report_path(path, None), format!("must be <= {max}")));
        }
    }
}

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// AJV's scalar coercion (`coerceTypes: true`); `None` when no coercion applies.
fn coerce(value: &Value, ty: &str) -> Option<Value> {
    match (ty, value) {
        ("string", Value::Number(n)) => Some(Value::String(js_number_string(n))),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        ("string", Value::Null) => Some(Value::String(String::new())),
        ("number" | "integer", Value::String(s)) => {
            let n = parse_js_number(s)?;
            if ty == "integer" && n.fract() != 0.0 {
                return None;
            }
            number_value(n)
        }
        ("number" | "integer", Value::Bool(b)) => Some(Value::from(u8::from(*b))),
        ("number" | "integer", Value::Null) => Some(Value::from(0)),
        ("boolean", Value::String(s)) if s == "true" => Some(Value::Bool(true)),
        ("boolean", Value::String(s)) if s == "false" => Some(Value::Bool(false)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(1.0) => Some(Value::Bool(true)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Bool(false)),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("null", Value::String(s)) if s.is_empty() => Some(Value::Null),
        ("null", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Null),
        ("null", Value::Bool(false)) => Some(Value::Null),
        _ => None,
    }
}

/// AJV accepts a string as a number when it is non-empty and `+s == s` (JS numeric conversion).
fn parse_js_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if s.is_empty() || t.is_empty() || t != s {
        return None;
    }
    let n = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()? as f64
    } else if t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        t.parse::<f64>().ok()?
    } else {
        return None;
    };
    n.is_finite().then_some(n)
}

fn number_value(n: f64) -> Option<Value> {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Some(Value::from(n as i64))
    } else {
        Number::from_f64(n).map(Value::Number)
    }
}

fn js_number_string(n: &Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_schema() -> Value {
        json!({"type":"object","required":["path"],"properties":{
            "path":{"type":"string"},"offset":{"type":"number"},"limit":{"type":"number"}}})
    }

    #[test]
    fn coerces_scalars() {
        let out =
            validate_args("read", &read_schema(), &json!({"path": 5, "offset": "10"})).unwrap();
        assert_eq!(out, json!({"path": "5", "offset": 10}));
        let schema =
            json!({"type":"object","properties":{"b":{"type":"boolean"},"i":{"type":"integer"}}});
        let out = validate_args("t", &schema, &json!({"b": "true", "i": "7"})).unwrap();
        assert_eq!(out, json!({"b": true, "i": 7}));
        assert!(validate_args("t", &schema, &json!({"i": "7.5"})).is_err());
    }

    #[test]
    fn missing_property_message() {
        let err = validate_args("read", &read_schema(), &json!({})).unwrap_err();
        assert_eq!(
            err,
            "Validation failed for tool \"read\":\n  - path: must have required property 'path'\n\nReceived arguments:\n{}"
        );
    }

    #[test]
    fn type_errors_use_instance_path() {
        let schema = json!({"type":"object","required":["edits"],"properties":{"edits":{"type":"array",
            "items":{"type":"object","required":["oldText","newText"],"properties":{
            "oldText":{"type":"string"},"newText":{"type":"string"}},"additionalProperties":false}}}});
        let args = json!({"edits":[{"oldText":{"a":1}, "x": 1}], "offset": "abc"});
        let err = validate_args("edit", &schema, &args).unwrap_err();
        assert!(err.starts_with(
            "Validation failed for tool \"edit\":\n  - edits/0: must have required property 'newText'\n  - edits/0: must NOT have additional properties\n  - edits/0/oldText: must be string\n\nReceived arguments:\n{\n  \"edits\": ["
        ), "{err}");
        let err =
            validate_args("read", &read_schema(), &json!({"path":"a","limit":"x"})).unwrap_err();
        assert!(err.contains("  - limit: must be number\n"));
        let err = validate_args("read", &read_schema(), &json!(null)).unwrap_err();
        assert!(err.contains("  - root: must be object\n\nReceived arguments:\nnull"));
    }
}
