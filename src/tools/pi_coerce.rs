//! pi 1.6.0's coercion of tool-call arguments (pi-schema's `parse()` with `coerce: true`, pure):
//! the value the schema most likely meant, before it is checked. pi-schema runs three passes;
//! the first (a `null` in an optional property that rejects it is dropped) is
//! `validate::normalize_optional_nulls`, shared with 0.87. These are the other two:
//!
//! 2. TypeBox's conversion rules, keyed on the schema's structure: the first keyword of a node
//!    among `const`, `enum`, `anyOf`/`oneOf`, `allOf`, `type` decides. `null` becomes `"null"` for
//!    a string, `"3.5"` becomes 3 for an integer (truncated), `""` becomes 0 for a number, a
//!    single value becomes a one-item array, a union takes the first branch whose conversion the
//!    union accepts, a literal (`const`, an `enum` value) is taken from a value of another type
//!    that converts to exactly it.
//! 3. Primitive coercion by `type` (also type arrays), as AJV's `coerceTypes`: what pass 2 left,
//!    for example a type array `["integer", "null"]`.
//!
//! A value that cannot be coerced is left as it is; the check then reports it. `$ref` is not
//! followed (pith's tool schemas are checked without a root to resolve it in).

use serde_json::{Map, Number, Value};

use super::pi_schema;

/// Deeper schemas than this are left as they are (tool schemas are shallow; a hostile one is not
/// walked without bound).
const MAX_DEPTH: usize = 64;

/// Passes 2 and 3 over `value` for `schema`.
pub fn coerce(schema: &Value, value: Value) -> Value {
    let converted = convert(schema, value, 0);
    coerce_types(schema, converted, 0)
}

fn passes(schema: &Value, value: &Value) -> bool {
    pi_schema::explain(schema, value).is_empty()
}

// ------------------------------------------------------------------------------------------------
// Pass 2: TypeBox's conversion rules

fn convert(node: &Value, value: Value, depth: usize) -> Value {
    let Some(n) = node.as_object() else {
        return value;
    };
    if depth > MAX_DEPTH || n.contains_key("$ref") {
        return value;
    }
    if let Some(literal) = n.get("const") {
        return convert_literal(literal, value);
    }
    if let Some(Value::Array(members)) = n.get("enum") {
        if members.contains(&value) {
            return value;
        }
        for m in members {
            let candidate = convert_literal(m, value.clone());
            if candidate != value && passes(node, &candidate) {
                return candidate;
            }
        }
        return value;
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = n.get(union) {
            return convert_union(node, n, branches, value, depth);
        }
    }
    if let Some(Value::Array(members)) = n.get("allOf") {
        let mut next = value;
        for m in members {
            next = convert(m, next, depth + 1);
        }
        return convert_members(n, next, depth);
    }
    match n.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "string" => try_string(&value).unwrap_or(value),
            "number" => try_number(&value).map_or(value, number),
            "integer" => try_number(&value).map_or(value, |f| number(f.trunc())),
            "boolean" => try_boolean(&value).map_or(value, Value::Bool),
            "null" => {
                if try_null(&value) {
                    Value::Null
                } else {
                    value
                }
            }
            "array" => convert_array(n, value, depth),
            "object" => convert_object(n, value, depth),
            _ => value,
        },
        None if n.contains_key("properties") || n.contains_key("patternProperties") => {
            convert_object(n, value, depth)
        }
        None if n.contains_key("items") || n.contains_key("prefixItems") => {
            convert_array(n, value, depth)
        }
        _ => value,
    }
}

/// A value one branch accepts stays; else the first branch's conversion the whole union accepts.
fn convert_union(
    node: &Value,
    n: &Map<String, Value>,
    branches: &[Value],
    value: Value,
    depth: usize,
) -> Value {
    if branches.iter().any(|b| passes(b, &value)) {
        return convert_members(n, value, depth);
    }
    for b in branches {
        let candidate = convert_members(n, convert(b, value.clone(), depth + 1), depth);
        if passes(node, &candidate) {
            return candidate;
        }
    }
    convert_members(n, value, depth)
}

/// The object members a union or intersection node declares besides its branches.
fn convert_members(n: &Map<String, Value>, value: Value, depth: usize) -> Value {
    let declares = ["properties", "patternProperties", "additionalProperties"]
        .iter()
        .any(|k| n.contains_key(*k));
    if declares {
        convert_object(n, value, depth)
    } else {
        value
    }
}

fn convert_array(n: &Map<String, Value>, value: Value, depth: usize) -> Value {
    let prefix = match (n.get("items"), n.get("prefixItems")) {
        (Some(Value::Array(p)), _) => Some((p, None)),
        (_, Some(Value::Array(p))) => Some((p, n.get("items"))),
        _ => None,
    };
    if let Some((prefix, rest)) = prefix {
        // A tuple converts its items and never wraps a single value.
        let Value::Array(items) = value else {
            return value;
        };
        return Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match prefix.get(i).or(rest) {
                    Some(s) => convert(s, item, depth + 1),
                    None => item,
                })
                .collect(),
        );
    }
    let items = n.get("items");
    match value {
        Value::Array(a) => match items {
            Some(s) => Value::Array(a.into_iter().map(|v| convert(s, v, depth + 1)).collect()),
            None => Value::Array(a),
        },
        // A single value becomes a one-item array, converted by the item schema.
        single => Value::Array(vec![match items {
            Some(s) if s.is_object() => convert(s, single, depth + 1),
            _ => single,
        }]),
    }
}

fn convert_object(n: &Map<String, Value>, value: Value, depth: usize) -> Value {
    let Value::Object(mut obj) = value else {
        return value;
    };
    let properties = n.get("properties").and_then(Value::as_object);
    let patterns = n.get("patternProperties").and_then(Value::as_object);
    let additional = n.get("additionalProperties").filter(|a| a.is_object());
    for (key, slot) in obj.iter_mut() {
        let mut next = std::mem::take(slot);
        let mut matched = false;
        if let Some(p) = properties.and_then(|p| p.get(key)) {
            matched = true;
            next = convert(p, next, depth + 1);
        }
        for (pattern, s) in patterns.into_iter().flatten() {
            if pi_schema::is_match(pattern, key) == Some(true) {
                matched = true;
                next = convert(s, next, depth + 1);
            }
        }
        if !matched {
            if let Some(a) = additional {
                next = convert(a, next, depth + 1);
            }
        }
        *slot = next;
    }
    Value::Object(obj)
}

/// A literal taken from a value of another type that converts to exactly it.
fn convert_literal(literal: &Value, value: Value) -> Value {
    if *literal == value {
        return value;
    }
    let converted = match literal {
        Value::String(_) => try_string(&value),
        Value::Number(_) => try_number(&value).map(number),
        Value::Bool(_) => try_boolean(&value).map(Value::Bool),
        _ => None,
    };
    match converted {
        Some(c) if same_literal(&c, literal) => c,
        _ => value,
    }
}

/// `===` between a converted value and a literal (numbers by value: `1` and `1.0` are one).
fn same_literal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn try_string(v: &Value) -> Option<Value> {
    match v {
        Value::Bool(b) => Some(Value::String(b.to_string())),
        Value::Number(n) => Some(Value::String(js_number_string(n))),
        Value::Null => Some(Value::String("null".into())),
        Value::String(_) => Some(v.clone()),
        _ => None,
    }
}

fn try_number(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(n) => n.as_f64(),
        Value::Null => Some(0.0),
        Value::String(s) => js_to_number(s).filter(|f| f.is_finite()).or_else(|| {
            match s.to_ascii_lowercase().as_str() {
                "false" => Some(0.0),
                "true" => Some(1.0),
                _ => big_int_of_string(s),
            }
        }),
        _ => None,
    }
}

/// TypeBox's big-integer strings: `12n`, `12.5` (truncated), `12`, within 2^53.
fn big_int_of_string(s: &str) -> Option<f64> {
    let t = s.strip_suffix('n').unwrap_or(s);
    let digits = t.strip_prefix('-').unwrap_or(t);
    let int = digits.split('.').next().unwrap_or("");
    let well_formed = !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && (int == "0" || !int.starts_with('0'))
        && match digits.split_once('.') {
            Some((_, frac)) => {
                !s.ends_with('n') && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit())
            }
            None => true,
        };
    if !well_formed {
        return None;
    }
    let n: f64 = int.parse().ok()?;
    let n = if t.starts_with('-') { -n } else { n };
    (n.abs() <= 9_007_199_254_740_991.0).then_some(n)
}

fn try_boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => {
            let f = n.as_f64();
            if f == Some(0.0) {
                Some(false)
            } else if f == Some(1.0) {
                Some(true)
            } else {
                None
            }
        }
        Value::Null => Some(false),
        Value::String(s) => {
            let l = s.to_ascii_lowercase();
            if l == "false" || s == "0" {
                Some(false)
            } else if l == "true" || s == "1" {
                Some(true)
            } else {
                None
            }
        }
        _ => None,
    }
}

fn try_null(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
        Value::String(s) => {
            let l = s.to_ascii_lowercase();
            l == "undefined" || l == "null" || s.is_empty() || s == "0"
        }
        _ => false,
    }
}

/// JavaScript's `+s` for the strings a model sends: surrounding white space ignored, `""` is 0,
/// decimal with an optional sign and exponent, `0x`/`0o`/`0b` integers; `None` is NaN.
fn js_to_number(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.is_empty() {
        return Some(0.0);
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(d) = t.strip_prefix(prefix) {
            return u64::from_str_radix(d, radix).ok().map(|n| n as f64);
        }
    }
    if t == "Infinity" || t == "+Infinity" {
        return Some(f64::INFINITY);
    }
    if t == "-Infinity" {
        return Some(f64::NEG_INFINITY);
    }
    let ok = t
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && t.bytes().any(|b| b.is_ascii_digit());
    if !ok {
        return None;
    }
    t.parse::<f64>().ok()
}

/// A JSON number of `f` (an integer when it is one, as JavaScript has one number type).
fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        Value::from(f as i64)
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// JavaScript's `String(n)` for the numbers JSON carries.
fn js_number_string(n: &Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

// ------------------------------------------------------------------------------------------------
// Pass 3: primitive coercion by type

fn types_of(n: &Map<String, Value>) -> Vec<&str> {
    match n.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn matches_type(v: &Value, t: &str) -> bool {
    match t {
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

fn coerce_types(schema: &Value, value: Value, depth: usize) -> Value {
    let Some(n) = schema.as_object() else {
        return value;
    };
    if depth > MAX_DEPTH {
        return value;
    }
    let mut next = value;
    if let Some(Value::Array(members)) = n.get("allOf") {
        for m in members {
            next = coerce_types(m, next, depth + 1);
        }
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = n.get(union) {
            next = coerce_union(branches, next, depth);
        }
    }
    let types = types_of(n);
    let member = types.len() > 1 && types.iter().any(|t| matches_type(&next, t));
    if !types.is_empty() && !member {
        for t in &types {
            if let Some(c) = coerce_primitive(&next, t) {
                next = c;
                break;
            }
        }
    }
    if types.contains(&"object") && next.is_object() {
        next = coerce_properties(n, next, depth);
    }
    if types.contains(&"array") {
        if let Value::Array(items) = next {
            next = Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| match item_schema_at(n, i) {
                        Some(s) if s.is_object() => coerce_types(s, item, depth + 1),
                        _ => item,
                    })
                    .collect(),
            );
        }
    }
    next
}

fn coerce_union(branches: &[Value], value: Value, depth: usize) -> Value {
    if branches.iter().any(|b| passes(b, &value)) {
        return value;
    }
    for b in branches {
        let c = coerce_types(b, value.clone(), depth + 1);
        if passes(b, &c) {
            return c;
        }
    }
    value
}

fn coerce_properties(n: &Map<String, Value>, value: Value, depth: usize) -> Value {
    let Value::Object(mut obj) = value else {
        return value;
    };
    let properties = n.get("properties").and_then(Value::as_object);
    let patterns = n.get("patternProperties").and_then(Value::as_object);
    let additional = n.get("additionalProperties").filter(|a| a.is_object());
    // Declared properties first, then each key by its patterns, else `additionalProperties`
    // (pi-schema's order; keys keep their places).
    for (key, s) in properties.into_iter().flatten() {
        if let Some(slot) = obj.get_mut(key) {
            *slot = coerce_types(s, std::mem::take(slot), depth + 1);
        }
    }
    for (key, slot) in obj.iter_mut() {
        let mut matched = properties.is_some_and(|p| p.contains_key(key));
        for (pattern, s) in patterns.into_iter().flatten() {
            if pi_schema::is_match(pattern, key) == Some(true) {
                matched = true;
                *slot = coerce_types(s, std::mem::take(slot), depth + 1);
            }
        }
        if !matched {
            if let Some(a) = additional {
                *slot = coerce_types(a, std::mem::take(slot), depth + 1);
            }
        }
    }
    Value::Object(obj)
}

/// The schema of an array's item at `i`: a tuple's for its prefix, else `items`.
fn item_schema_at(n: &Map<String, Value>, i: usize) -> Option<&Value> {
    match (n.get("items"), n.get("prefixItems")) {
        (Some(Value::Array(p)), _) => p.get(i),
        (items, Some(Value::Array(p))) if i < p.len() => p.get(i).or(items),
        (items, _) => items,
    }
}

/// AJV-style coercion of a primitive to `t`; `None` when it does not apply (or changes nothing).
fn coerce_primitive(v: &Value, t: &str) -> Option<Value> {
    match (t, v) {
        ("number" | "integer", Value::Null) => Some(Value::from(0)),
        ("number" | "integer", Value::String(s)) if !s.trim().is_empty() => {
            let f = js_to_number(s)?;
            let ok = if t == "number" {
                f.is_finite()
            } else {
                f.is_finite() && f.fract() == 0.0
            };
            ok.then(|| number(f))
        }
        ("number" | "integer", Value::Bool(b)) => Some(Value::from(u8::from(*b))),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("boolean", Value::String(s)) if s == "true" => Some(Value::Bool(true)),
        ("boolean", Value::String(s)) if s == "false" => Some(Value::Bool(false)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(1.0) => Some(Value::Bool(true)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Bool(false)),
        ("string", Value::Null) => Some(Value::String(String::new())),
        ("string", Value::Number(n)) => Some(Value::String(js_number_string(n))),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        ("null", Value::String(s)) if s.is_empty() => Some(Value::Null),
        ("null", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Null),
        ("null", Value::Bool(false)) => Some(Value::Null),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(schema: Value, v: Value) -> Value {
        coerce(&schema, v)
    }

    #[test]
    fn scalars_as_typebox_converts_them() {
        assert_eq!(c(json!({"type": "integer"}), json!("3.5")), json!(3));
        assert_eq!(c(json!({"type": "integer"}), json!(3.9)), json!(3));
        assert_eq!(c(json!({"type": "number"}), json!(" 42 ")), json!(42));
        assert_eq!(c(json!({"type": "number"}), json!("")), json!(0));
        assert_eq!(c(json!({"type": "number"}), json!("0x1f")), json!(31));
        assert_eq!(c(json!({"type": "number"}), json!("TRUE")), json!(1));
        assert_eq!(c(json!({"type": "number"}), json!("12n")), json!(12));
        assert_eq!(c(json!({"type": "number"}), json!("abc")), json!("abc"));
        assert_eq!(c(json!({"type": "string"}), json!(null)), json!("null"));
        assert_eq!(c(json!({"type": "string"}), json!(5)), json!("5"));
        assert_eq!(
            c(json!({"type": "string"}), json!({"a": 1})),
            json!({"a": 1})
        );
        assert_eq!(c(json!({"type": "boolean"}), json!("0")), json!(false));
        assert_eq!(c(json!({"type": "boolean"}), json!("True")), json!(true));
        assert_eq!(c(json!({"type": "boolean"}), json!(2)), json!(2));
        assert_eq!(c(json!({"type": "null"}), json!("NULL")), json!(null));
    }

    #[test]
    fn a_single_value_becomes_a_one_item_array_and_tuples_never_wrap() {
        let paths = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(c(paths.clone(), json!("a.txt")), json!(["a.txt"]));
        assert_eq!(c(paths.clone(), json!(7)), json!(["7"]));
        assert_eq!(c(paths, json!([1, "b"])), json!(["1", "b"]));
        let tuple = json!({"type": "array", "prefixItems": [{"type": "number"}], "items": {"type": "boolean"}});
        assert_eq!(c(tuple.clone(), json!("1")), json!("1"));
        assert_eq!(c(tuple, json!(["1", "true"])), json!([1, true]));
        let schema = json!({"type": "object", "properties": {"edits": {"type": "array",
            "items": {"type": "object", "properties": {"line": {"type": "integer"}}}}}});
        assert_eq!(
            c(schema, json!({"edits": {"line": "4"}, "other": "x"})),
            json!({"edits": [{"line": 4}], "other": "x"})
        );
    }

    #[test]
    fn literals_unions_and_type_arrays() {
        assert_eq!(c(json!({"const": 1}), json!("1")), json!(1));
        assert_eq!(c(json!({"const": 1}), json!("2")), json!("2"));
        assert_eq!(c(json!({"enum": [1, 2]}), json!("2")), json!(2));
        assert_eq!(c(json!({"enum": ["a", true]}), json!("true")), json!(true));
        let union = json!({"anyOf": [{"type": "number"}, {"type": "boolean"}]});
        assert_eq!(c(union.clone(), json!(true)), json!(true));
        assert_eq!(c(union.clone(), json!("5")), json!(5));
        // The first branch's conversion wins when the union accepts it.
        assert_eq!(c(union, json!("true")), json!(1));
        // Pass 3: a type array takes the first type a primitive coerces to.
        assert_eq!(
            c(json!({"type": ["integer", "null"]}), json!("7")),
            json!(7)
        );
        assert_eq!(
            c(json!({"type": ["integer", "null"]}), json!(null)),
            json!(null)
        );
        assert_eq!(
            c(json!({"type": ["integer", "null"]}), json!("")),
            json!(null)
        );
    }

    #[test]
    fn patterns_additional_properties_and_depth() {
        let schema = json!({"type": "object", "patternProperties": {"^n_": {"type": "number"}},
            "additionalProperties": {"type": "string"}});
        assert_eq!(
            c(schema, json!({"x": 2, "n_a": "1"})),
            json!({"x": "2", "n_a": 1})
        );
        let order = c(
            json!({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}),
            json!({"z": 0, "a": 1, "b": "2"}),
        );
        let keys: Vec<&String> = order.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "b"]);
        assert_eq!(order, json!({"z": 0, "a": "1", "b": 2}));
        // A hostile, deeply nested schema is walked only so far.
        let mut deep = json!({"type": "integer"});
        let mut v = json!("1");
        for _ in 0..200 {
            deep = json!({"type": "array", "items": deep});
            v = json!([v]);
        }
        let _ = coerce(&deep, v);
    }
}
