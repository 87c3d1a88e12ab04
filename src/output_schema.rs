//! Structured output (issue 27): `--output-schema FILE` and a prompt's `outputSchema`. The run's
//! final answer is a call of the tool [`TOOL_NAME`], whose parameters are the schema; the answer
//! is validated here (pure) and an invalid one goes back to the model as the tool's error result,
//! at most [`MAX_CORRECTIONS`] times (a reply that ends the run without the call is one of them).
//!
//! The validator is pith's own (`tools/pi_schema.rs`, with local `$ref`s): the 2020-12
//! vocabulary listed in [`VALIDATED`]; annotations ([`ANNOTATIONS`], `format` among them) are
//! accepted and not checked; any other keyword is refused when the schema is read, naming it,
//! so no part of a schema is silently ignored (docs/architecture.md, "Structured output").

use std::sync::Arc;

use serde_json::{Map, Value};

/// The final-answer tool. `pith_` cannot be a built-in's name, and an extension's or MCP
/// server's tool of this name is hidden from a run that asks for structured output.
pub const TOOL_NAME: &str = "pith_final_answer";

/// Invalid or missing answers sent back to the model before the run fails (exit 6).
pub const MAX_CORRECTIONS: u32 = 2;

/// The largest schema file read (a schema is a few KiB; this bounds one input).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Nesting of subschemas accepted (the validator's own limit is deeper).
const MAX_SCHEMA_DEPTH: usize = 32;

/// Keywords the validator checks.
pub const VALIDATED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "$defs",
    "definitions",
];

/// Keywords that only describe (never checked, never an error).
pub const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "format",
];

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// A checked output schema (cheap to clone: shared).
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSchema(Arc<Value>);

impl OutputSchema {
    /// Check a schema: an object schema (`"type":"object"`: tool parameters are objects) in the
    /// vocabulary above, every `$ref` local and resolving, every `pattern` a valid regex.
    pub fn new(schema: Value) -> Result<OutputSchema, String> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(
                "the output schema must describe an object (\"type\": \"object\" at its root): the final answer is a tool call's arguments"
                    .to_string(),
            );
        }
        check_node(&schema, &schema, "#", 0)?;
        Ok(OutputSchema(Arc::new(schema)))
    }

    /// `--output-schema FILE`: read (at most [`MAX_FILE_BYTES`]) and check.
    pub fn from_file(path: &std::path::Path) -> Result<OutputSchema, String> {
        use std::io::Read;
        let shown = path.display();
        let file = std::fs::File::open(path)
            .map_err(|e| format!("--output-schema: cannot read {shown}: {e}"))?;
        let mut text = String::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("--output-schema: cannot read {shown}: {e}"))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "--output-schema: {shown} is larger than {MAX_FILE_BYTES} bytes"
            ));
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("--output-schema: {shown} is not JSON: {e}"))?;
        OutputSchema::new(v).map_err(|e| format!("--output-schema: {shown}: {e}"))
    }

    pub fn schema(&self) -> &Value {
        &self.0
    }

    /// The errors of an answer (`path: message` lines; empty: it is valid).
    pub fn errors(&self, answer: &Value) -> Vec<String> {
        crate::tools::pi_schema::explain_document(&self.0, answer)
            .into_iter()
            .map(|(path, msg)| format!("{path}: {msg}"))
            .collect()
    }

    /// The tool the run's requests declare.
    pub fn tool(&self) -> crate::llm::ToolSchema {
        crate::llm::ToolSchema {
            name: TOOL_NAME.to_string(),
            description: TOOL_DESCRIPTION.to_string(),
            parameters: (*self.0).clone(),
            constrained_sampling: None,
        }
    }
}

const TOOL_DESCRIPTION: &str = "Give the final answer of this task. Call this tool once, when you are done, with the answer as its arguments; they must match its schema. The call ends your work: nothing after it is read.";

/// What one run with an output schema has come to.
#[derive(Debug)]
pub struct Progress {
    pub schema: OutputSchema,
    /// Corrections used (invalid answers, replies without the call).
    pub corrections: u32,
    /// The last valid answer.
    pub answer: Option<Value>,
    /// The errors of the last invalid answer (for the failure's event).
    pub last_errors: Vec<String>,
    /// No correction left: the run ends without a valid answer.
    pub failed: bool,
}

/// What happens after a turn of a run with an output schema.
#[derive(Debug, PartialEq)]
pub enum AfterTurn {
    /// As without a schema (more tool calls to answer, or the answer is in).
    Normal,
    /// The final answer was accepted this turn: the run ends as after a reply without tools.
    Answered,
    /// A reply ended without the call: this user message asks for it (one correction).
    Remind(String),
    /// No correction left.
    Failed,
}

impl Progress {
    pub fn new(schema: OutputSchema) -> Progress {
        Progress {
            schema,
            corrections: 0,
            answer: None,
            last_errors: Vec::new(),
            failed: false,
        }
    }

    /// One call of the final-answer tool: `Ok` (its result text) when the answer is valid, else
    /// `Err` with the validator's errors and what is left.
    pub fn answer(&mut self, args: &Value) -> Result<String, String> {
        let errors = self.schema.errors(args);
        if errors.is_empty() {
            self.answer = Some(args.clone());
            return Ok("Final answer recorded.".to_string());
        }
        let list: Vec<String> = errors.iter().map(|e| format!("  - {e}")).collect();
        let head = format!(
            "The final answer does not match the output schema:\n{}",
            list.join("\n")
        );
        self.last_errors = errors;
        Err(match self.use_correction() {
            Some(left) => format!(
                "{head}\n\nCall {TOOL_NAME} again with a corrected answer ({left} correction{} left).",
                if left == 1 { "" } else { "s" }
            ),
            None => format!("{head}\n\nNo correction is left: the run ends without an answer."),
        })
    }

    /// After a turn (`tool_calls`: it had some; `more`: follow-up messages wait, so the run
    /// goes on anyway): what comes next.
    pub fn after_turn(&mut self, tool_calls: bool, more: bool) -> AfterTurn {
        if self.failed {
            return AfterTurn::Failed;
        }
        if self.answer.is_some() {
            return if tool_calls {
                AfterTurn::Answered
            } else {
                AfterTurn::Normal
            };
        }
        if tool_calls || more {
            return AfterTurn::Normal;
        }
        self.last_errors = vec![format!("root: the reply did not call {TOOL_NAME}")];
        match self.use_correction() {
            Some(_) => AfterTurn::Remind(format!(
                "Your work must end with a call of the {TOOL_NAME} tool, with the final answer as its arguments (matching its schema). Call it now."
            )),
            None => AfterTurn::Failed,
        }
    }

    /// One correction more: how many are left after it, or `None` (the run has failed).
    fn use_correction(&mut self) -> Option<u32> {
        if self.corrections >= MAX_CORRECTIONS {
            self.failed = true;
            return None;
        }
        self.corrections += 1;
        Some(MAX_CORRECTIONS - self.corrections)
    }
}

fn check_node(root: &Value, node: &Value, at: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "{at}: subschemas nest deeper than {MAX_SCHEMA_DEPTH}"
        ));
    }
    let o: &Map<String, Value> = match node {
        Value::Bool(_) => return Ok(()),
        Value::Object(o) => o,
        _ => return Err(format!("{at}: a schema must be an object or a boolean")),
    };
    for (k, v) in o {
        let here = format!("{at}/{k}");
        if ANNOTATIONS.contains(&k.as_str()) {
            continue;
        }
        if !VALIDATED.contains(&k.as_str()) {
            return Err(format!(
                "{here}: keyword \"{k}\" is not supported by pith's validator (supported: {}; annotations: {})",
                VALIDATED.join(", "),
                ANNOTATIONS.join(", ")
            ));
        }
        let bad = |what: &str| Err(format!("{here}: \"{k}\" must be {what}"));
        match k.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    one => vec![one],
                };
                if names.is_empty()
                    || !names
                        .iter()
                        .all(|n| n.as_str().is_some_and(|n| TYPES.contains(&n)))
                {
                    return bad(&format!("one of {} or a list of them", TYPES.join(", ")));
                }
            }
            "enum" if !v.is_array() => return bad("an array"),
            "required" if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
                return bad("an array of strings");
            }
            "properties" | "patternProperties" | "$defs" | "definitions" => {
                let Some(m) = v.as_object() else {
                    return bad("an object of schemas");
                };
                for (name, s) in m {
                    if k == "patternProperties" {
                        regex::Regex::new(name)
                            .map_err(|e| format!("{here}: pattern {name:?} is not valid: {e}"))?;
                    }
                    check_node(root, s, &format!("{here}/{name}"), depth + 1)?;
                }
            }
            "additionalProperties" | "items" | "not" => check_node(root, v, &here, depth + 1)?,
            "prefixItems" | "anyOf" | "oneOf" | "allOf" => {
                let Some(a) = v.as_array().filter(|a| !a.is_empty()) else {
                    return bad("a non-empty array of schemas");
                };
                for (i, s) in a.iter().enumerate() {
                    check_node(root, s, &format!("{here}/{i}"), depth + 1)?;
                }
            }
            "minProperties" | "maxProperties" | "minItems" | "maxItems" | "minLength"
            | "maxLength"
                if v.as_u64().is_none() =>
            {
                return bad("a whole number");
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if !v.is_number() => {
                return bad("a number");
            }
            "multipleOf" if !v.as_f64().is_some_and(|m| m > 0.0) => {
                return bad("a number above 0");
            }
            "uniqueItems" if !v.is_boolean() => return bad("a boolean"),
            "pattern" => {
                let Some(p) = v.as_str() else {
                    return bad("a string");
                };
                regex::Regex::new(p)
                    .map_err(|e| format!("{here}: pattern {p:?} is not valid: {e}"))?;
            }
            "$ref" => {
                let Some(r) = v.as_str() else {
                    return bad("a string");
                };
                if !r.starts_with('#') {
                    return Err(format!(
                        "{here}: only local references (\"#/$defs/...\") are supported, not {r:?}"
                    ));
                }
                if crate::tools::pi_schema::resolve_ref(root, r).is_none() {
                    return Err(format!("{here}: {r:?} does not resolve in the schema"));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> OutputSchema {
        OutputSchema::new(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["verdict", "items"],
            "additionalProperties": false,
            "properties": {
                "verdict": {"enum": ["pass", "fail"]},
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 3},
                "when": {"type": "string", "format": "date-time", "pattern": "^[0-9]{4}-"}
            },
            "$defs": {"item": {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 1},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/item"}}}}}
        }))
        .unwrap()
    }

    #[test]
    fn validates_with_refs() {
        let s = schema();
        assert!(
            s.errors(&json!({"verdict":"pass","items":[{"name":"a","children":[{"name":"b"}]}]}))
                .is_empty()
        );
        assert_eq!(
            s.errors(
                &json!({"verdict":"maybe","items":[{"name":"a","children":[{"name":""}]}],
                "score":2,"when":"May","extra":1})
            ),
            vec![
                "verdict: expected one of [\"pass\",\"fail\"]",
                "score: expected <= 1",
                "items.0.children.0.name: expected at least 1 characters",
                "when: expected to match ^[0-9]{4}-",
                "extra: unknown field",
            ]
        );
        assert_eq!(
            s.errors(&json!({})),
            vec!["verdict: missing", "items: missing"]
        );
    }

    #[test]
    fn refuses_what_it_cannot_check() {
        let err = |v: Value| OutputSchema::new(v).unwrap_err();
        assert!(err(json!({"type":"array"})).contains("must describe an object"));
        assert!(
            err(json!({"type":"object","properties":{"a":{"if":{"type":"string"}}}}))
                .starts_with("#/properties/a/if: keyword \"if\" is not supported")
        );
        assert!(
            err(json!({"type":"object","unevaluatedProperties":false}))
                .contains("keyword \"unevaluatedProperties\" is not supported")
        );
        assert_eq!(
            err(json!({"type":"object","properties":{"a":{"$ref":"#/$defs/none"}}})),
            "#/properties/a/$ref: \"#/$defs/none\" does not resolve in the schema"
        );
        assert!(
            err(json!({"type":"object","properties":{"a":{"$ref":"https://x/y.json"}}}))
                .contains("only local references")
        );
        assert!(
            err(json!({"type":"object","properties":{"a":{"pattern":"("}}}))
                .contains("pattern \"(\" is not valid")
        );
        assert!(err(json!({"type":"object","required":"a"})).contains("an array of strings"));
        assert!(
            err(json!({"type":"object","properties":{"a":{"type":["string","date"]}}}))
                .contains("\"type\" must be one of")
        );
    }

    #[test]
    fn a_ref_loop_is_an_error_not_a_pass() {
        let s = OutputSchema::new(
            json!({"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},
            "$defs":{"x":{"$ref":"#/$defs/x"}}}),
        )
        .unwrap();
        assert_eq!(
            s.errors(&json!({"a":1})),
            vec!["a: the schema nests too deeply"]
        );
    }

    #[test]
    fn corrections_then_failure() {
        let mut p = Progress::new(schema());
        let e = p.answer(&json!({"verdict":"pass"})).unwrap_err();
        assert_eq!(
            e,
            "The final answer does not match the output schema:\n  - items: missing\n\nCall pith_final_answer again with a corrected answer (1 correction left)."
        );
        assert_eq!(p.after_turn(false, true), AfterTurn::Normal);
        assert_eq!(
            p.after_turn(false, false),
            AfterTurn::Remind("Your work must end with a call of the pith_final_answer tool, with the final answer as its arguments (matching its schema). Call it now.".into())
        );
        assert!(
            p.answer(&json!([]))
                .unwrap_err()
                .ends_with("No correction is left: the run ends without an answer.")
        );
        assert_eq!(p.after_turn(true, false), AfterTurn::Failed);
        assert_eq!((p.corrections, p.failed), (2, true));
        assert_eq!(p.last_errors, vec!["root: expected object, got array"]);
        let mut q = Progress::new(schema());
        assert_eq!(q.after_turn(true, false), AfterTurn::Normal);
        q.answer(&json!({"verdict":"fail","items":[]})).unwrap();
        assert_eq!(q.after_turn(true, false), AfterTurn::Answered);
        assert_eq!(q.after_turn(false, false), AfterTurn::Normal);
        assert_eq!(q.answer, Some(json!({"verdict":"fail","items":[]})));
    }
}
