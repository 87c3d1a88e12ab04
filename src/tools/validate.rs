//! Argument validation for tool calls: the subset of JSON Schema the tool schemas use, with the
//! behaviour of the reference's AJV setup (`allErrors`, `coerceTypes: true`).
//!
//! Coercion follows AJV's scalar rules: `"5"` → `5` for numbers, `5`/`true` → `"5"`/`"true"` for
//! strings, `"true"`/`1` → `true` for booleans, `null` → `""`/`0`/`false`. Values are coerced in a
//! copy of the arguments; the error message quotes the original arguments, as the reference does.

use serde_json::{Map, Number, Value};

pub use crate::protocol::ValidationDialect;

/// Validate (and coerce) `args` against `schema`. `Err` carries the reference's full message.
pub fn validate_args(tool_name: &str, schema: &Value, args: &Value) -> Result<Value, String> {
    validate_args_as(tool_name, schema, args, ValidationDialect::Ajv)
}

/// [`validate_args`] in the given dialect. [`ValidationDialect::TypeBox`] (pi 0.87.1): a
/// `null` given for an optional property that does not accept it is dropped first (what
/// strict-schema providers send for an omitted argument), and the messages are TypeBox's: one
/// `required` error naming every missing property (at the path of the first), lower-case `not`,
/// `must be either a or b`, and paths with dots (`edits.0.newText`).
pub fn validate_args_as(
    tool_name: &str,
    schema: &Value,
    args: &Value,
    dialect: ValidationDialect,
) -> Result<Value, String> {
    let mut value = args.clone();
    if matches!(
        dialect,
        ValidationDialect::TypeBox | ValidationDialect::PiSchema
    ) {
        normalize_optional_nulls(&mut value, schema, 0);
    }
    if dialect == ValidationDialect::PiSchema {
        // pi-schema's conversion and primitive coercion (the check's own coercion then finds
        // nothing left to do).
        value = super::pi_coerce::coerce(schema, value);
    }
    let mut errors = Vec::new();
    let mut ctx = Ctx {
        errors: &mut errors,
        dialect,
    };
    check(schema, &mut value, "", &mut ctx);
    if errors.is_empty() {
        return Ok(value);
    }
    if dialect == ValidationDialect::PiSchema {
        // pi-schema words the errors of the (coerced) value its own way.
        let explained = super::pi_schema::explain(schema, &value);
        if !explained.is_empty() {
            errors = explained;
        }
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

/// Where errors go, and whose wording they take.
struct Ctx<'a> {
    errors: &'a mut Errors,
    dialect: ValidationDialect,
}

impl Ctx<'_> {
    fn typebox(&self) -> bool {
        self.dialect != ValidationDialect::Ajv
    }

    fn push(&mut self, path: &str, msg: String) {
        let p = if self.typebox() {
            dotted(path)
        } else {
            report_path(path, None)
        };
        self.errors.push((p, msg));
    }

    /// `must NOT …` (AJV, 0.73.1) or `must not …` (TypeBox, 0.87.1).
    fn not(&self) -> &'static str {
        if self.typebox() { "not" } else { "NOT" }
    }
}

/// pi 0.87.1's path: the instance path without its leading `/`, with dots, or `root`.
fn dotted(instance: &str) -> String {
    if instance.is_empty() {
        "root".to_string()
    } else {
        instance[1..].replace('/', ".")
    }
}

/// pi 0.87.1's `normalizeOptionalNulls`: `null` for a property that is not required and whose
/// schema does not accept `null` is removed, recursively through objects and array items.
fn normalize_optional_nulls(value: &mut Value, schema: &Value, depth: usize) {
    if depth > 64 {
        return;
    }
    match value {
        Value::Array(items) => match schema.get("items") {
            Some(Value::Array(schemas)) => {
                for (item, s) in items.iter_mut().zip(schemas) {
                    normalize_optional_nulls(item, s, depth + 1);
                }
            }
            Some(s) => {
                for item in items.iter_mut() {
                    normalize_optional_nulls(item, s, depth + 1);
                }
            }
            None => {}
        },
        Value::Object(obj) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (key, prop) in props {
                let Some(v) = obj.get_mut(key) else { continue };
                if v.is_null()
                    && !required.contains(&key.as_str())
                    && !prop.get("$ref").is_some_and(Value::is_string)
                    && !accepts_null(prop)
                {
                    obj.shift_remove(key);
                } else {
                    normalize_optional_nulls(v, prop, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Whether a schema accepts `null` (as far as this validator checks schemas).
fn accepts_null(schema: &Value) -> bool {
    let mut v = Value::Null;
    let mut errors = Vec::new();
    let mut ctx = Ctx {
        errors: &mut errors,
        dialect: ValidationDialect::TypeBox,
    };
    check_strict(schema, &mut v, &mut ctx);
    errors.is_empty()
}

/// A check without coercion (TypeBox's `Check`): only the type, enum and const keywords.
fn check_strict(schema: &Value, value: &mut Value, ctx: &mut Ctx) {
    let Some(o) = schema.as_object() else { return };
    if let Some(types) = o.get("type") {
        let names: Vec<&str> = match types {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|t| has_type(value, t)) {
            ctx.push("", "type".into());
            return;
        }
    }
    if let Some(Value::Array(variants)) = o.get("anyOf") {
        let ok = variants.iter().any(|s| {
            let mut e = Vec::new();
            let mut c = Ctx {
                errors: &mut e,
                dialect: ValidationDialect::TypeBox,
            };
            check_strict(s, &mut value.clone(), &mut c);
            e.is_empty()
        });
        if !ok {
            ctx.push("", "anyOf".into());
        }
    }
    if let Some(Value::Array(allowed)) = o.get("enum") {
        if !allowed.contains(value) {
            ctx.push("", "enum".into());
        }
    }
    if let Some(c) = o.get("const") {
        if c != value {
            ctx.push("", "const".into());
        }
    }
}

/// The path AJV reports: the instance path without its leading `/`, or `fallback`, or `root`.
fn report_path(instance: &str, fallback: Option<&str>) -> String {
    if !instance.is_empty() {
        instance[1..].to_string()
    } else {
        fallback.unwrap_or("root").to_string()
    }
}

fn check(schema: &Value, value: &mut Value, path: &str, ctx: &mut Ctx) {
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
            let converted = if matches!(
                ctx.dialect,
                ValidationDialect::TypeBox | ValidationDialect::TypeBoxNullsConverted
            ) {
                names.iter().find_map(|t| convert_typebox(value, t))
            } else {
                names.iter().find_map(|t| coerce(value, t))
            };
            match converted {
                Some(coerced) => *value = coerced,
                None => {
                    let msg = match (ctx.typebox(), names.as_slice()) {
                        (true, [one]) => format!("must be {one}"),
                        (true, many) => format!("must be either {}", many.join(" or ")),
                        (false, _) => format!("must be {}", names.join(",")),
                    };
                    ctx.push(path, msg);
                    return;
                }
            }
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.iter().any(|a| a == value) {
            ctx.push(
                path,
                "must be equal to one of the allowed values".to_string(),
            );
        }
    }
    if let Some(expected) = schema.get("const") {
        if expected != value {
            ctx.push(path, "must be equal to constant".to_string());
        }
    }
    match value {
        Value::Object(obj) => check_object(schema, obj, path, ctx),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    check(item_schema, item, &format!("{path}/{i}"), ctx);
                }
            }
        }
        Value::String(s) => check_string(schema, s, path, ctx),
        Value::Number(n) => check_number(schema, n, path, ctx),
        _ => {}
    }
}

fn check_object(
    schema: &Map<String, Value>,
    obj: &mut Map<String, Value>,
    path: &str,
    ctx: &mut Ctx,
) {
    if let Some(Value::Array(required)) = schema.get("required") {
        let missing: Vec<&str> = required
            .iter()
            .filter_map(Value::as_str)
            .filter(|name| !obj.contains_key(*name))
            .collect();
        if ctx.typebox() {
            // One error naming them all, reported at the first.
            if let Some(first) = missing.first() {
                let base = path.get(1..).unwrap_or("").replace('/', ".");
                let at = if base.is_empty() {
                    first.to_string()
                } else {
                    format!("{base}.{first}")
                };
                ctx.errors.push((
                    at,
                    format!("must have required properties {}", missing.join(", ")),
                ));
            }
        } else {
            for name in missing {
                ctx.errors.push((
                    report_path(path, Some(name)),
                    format!("must have required property '{name}'"),
                ));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let extra: Vec<String> = obj
            .keys()
            .filter(|k| !props.is_some_and(|p| p.contains_key(*k)))
            .cloned()
            .collect();
        if ctx.typebox() {
            // TypeBox: each extra property fails the `false` schema, then one summary.
            for key in &extra {
                ctx.push(
                    &format!("{path}/{}", escape_pointer(key)),
                    "schema is false".into(),
                );
            }
            if !extra.is_empty() {
                ctx.push(path, "must not have additional properties".into());
            }
        } else {
            for _ in &extra {
                ctx.push(path, "must NOT have additional properties".into());
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
                    ctx,
                );
            }
        }
    }
}

fn check_string(schema: &Map<String, Value>, s: &str, path: &str, ctx: &mut Ctx) {
    let len = s.encode_utf16().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if len > max {
            let msg = format!("must {} have more than {max} characters", ctx.not());
            ctx.push(path, msg);
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if len < min {
            let msg = format!("must {} have fewer than {min} characters", ctx.not());
            ctx.push(path, msg);
        }
    }
}

fn check_number(schema: &Map<String, Value>, n: &Number, path: &str, ctx: &mut Ctx) {
    let Some(x) = n.as_f64() else { return };
    if let Some(min) = schema.get("minimum") {
        if min.as_f64().is_some_and(|m| x < m) {
            ctx.push(path, format!("must be >= {min}"));
        }
    }
    if let Some(max) = schema.get("maximum") {
        if max.as_f64().is_some_and(|m| x > m) {
            ctx.push(path, format!("must be <= {max}"));
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

/// TypeBox's `Value.Convert` of a value that does not have the schema's type (`Try.TryNumber`,
/// `TryString`, `TryBoolean`, `TryNull`, `TryArray`); `None` when it leaves the value as it is.
fn convert_typebox(value: &Value, ty: &str) -> Option<Value> {
    match (ty, value) {
        ("string", Value::Number(n)) => Some(Value::String(js_number_string(n))),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        ("string", Value::Null) => Some(Value::String("null".into())),
        ("number" | "integer", _) => {
            let n = match value {
                Value::Bool(b) => f64::from(u8::from(*b)),
                Value::Null => 0.0,
                Value::String(s) => match js_to_number(s) {
                    Some(n) => n,
                    None if s.eq_ignore_ascii_case("false") => 0.0,
                    None if s.eq_ignore_ascii_case("true") => 1.0,
                    None => return None,
                },
                _ => return None,
            };
            number_value(if ty == "integer" { n.trunc() } else { n })
        }
        ("boolean", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Bool(false)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(1.0) => Some(Value::Bool(true)),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("boolean", Value::String(s)) => {
            if s.eq_ignore_ascii_case("false") || s == "0" {
                Some(Value::Bool(false))
            } else if s.eq_ignore_ascii_case("true") || s == "1" {
                Some(Value::Bool(true))
            } else {
                None
            }
        }
        ("null", Value::Bool(false)) => Some(Value::Null),
        ("null", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Null),
        ("null", Value::String(s))
            if s.eq_ignore_ascii_case("undefined")
                || s.eq_ignore_ascii_case("null")
                || s.is_empty()
                || s == "0" =>
        {
            Some(Value::Null)
        }
        ("array", v) if !v.is_array() => Some(Value::Array(vec![v.clone()])),
        _ => None,
    }
}

/// JavaScript's `+s` when it is a finite number: surrounding white space ignored, an empty
/// string is 0, `0x` / `0o` / `0b` integers, decimal literals (no `Infinity`).
fn js_to_number(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.is_empty() {
        return Some(0.0);
    }
    let radix = |p: &str, r: u32| {
        let digits = t.get(2..)?;
        (t.get(..2)?.eq_ignore_ascii_case(p) && !digits.is_empty())
            .then(|| u64::from_str_radix(digits, r).ok().map(|n| n as f64))
            .flatten()
    };
    if let Some(n) = radix("0x", 16)
        .or_else(|| radix("0o", 8))
        .or_else(|| radix("0b", 2))
    {
        return Some(n);
    }
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return None;
    }
    t.parse::<f64>().ok().filter(|n| n.is_finite())
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
    #[test]
    fn typebox_wording_null_optionals_and_paths() {
        let schema = json!({"type":"object","additionalProperties":false,"required":["a","b","c","d","e"],
            "properties":{"a":{"type":["string","number"]},"b":{"type":"string","minLength":3},
            "c":{"enum":["x","y"]},"d":{"type":"integer","minimum":5},
            "e":{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}}});
        let err = validate_args_as(
            "checker",
            &schema,
            &json!({"z":1,"b":"x","y":2}),
            ValidationDialect::TypeBox,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "Validation failed for tool \"checker\":\n  - a: must have required properties a, c, d, e\n  - z: schema is false\n  - y: schema is false\n  - root: must not have additional properties\n  - b: must not have fewer than 3 characters\n\nReceived arguments:\n{\n  \"z\": 1,\n  \"b\": \"x\",\n  \"y\": 2\n}"
        );
        let err = validate_args_as(
            "checker",
            &schema,
            &json!({"a":true,"b":"xyz","c":"x","d":3,"e":{}}),
            ValidationDialect::TypeBox,
        )
        .unwrap_err();
        assert!(
            err.contains("  - d: must be >= 5\n  - e.q: must have required properties q\n"),
            "{err}"
        );
        // Optional nulls are dropped (strict providers send them for omitted arguments).
        let read = read_schema();
        assert_eq!(
            validate_args_as(
                "read",
                &read,
                &json!({"path":"a","offset":null,"limit":null}),
                ValidationDialect::TypeBox
            )
            .unwrap(),
            json!({"path":"a"})
        );
        // 0.73.1 coerced them instead.
        assert_eq!(
            validate_args("read", &read, &json!({"path":"a","offset":null})).unwrap(),
            json!({"path":"a","offset":0})
        );
        let multi = json!({"type":"object","properties":{"v":{"type":["string","number"]}}});
        assert!(
            validate_args_as("t", &multi, &json!({"v":[1]}), ValidationDialect::TypeBox)
                .unwrap_err()
                .contains("  - v: must be either string or number\n")
        );
        assert!(
            validate_args("t", &multi, &json!({"v":[1]}))
                .unwrap_err()
                .contains("  - v: must be string,number\n")
        );
    }

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
