//! The result record of print and json modes (issue 27): one JSON object that says how the job
//! ended, for CI steps and orchestrators. json mode writes it as its last line; `--result-file`
//! writes it (atomically) in both modes. Pure: [`Summary::observe`] reads the frames the
//! machine wrote, [`Summary::record`] builds the object.

use serde_json::{Value, json};

use crate::limits::Kind;

/// What the frames of a print/json job said, so far.
#[derive(Debug, Default)]
pub struct Summary {
    /// LLM requests (assistant `message_end`s).
    pub turns: u64,
    /// Tool calls that ran (a call a run limit kept from running is not counted).
    pub tool_calls: u64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost_usd: f64,
    /// The last limit that ended a run.
    pub limit: Option<Kind>,
    /// `--output-schema` was given: the record carries `structuredOutput`, and a job without a
    /// valid final answer is subtype `output_schema`.
    pub output_wanted: bool,
    /// The last run's valid final answer (`structured_output` with `valid: true`).
    pub structured: Option<Value>,
    /// The errors of the last run that ended without one.
    pub output_errors: Option<Vec<String>>,
}

/// How the job ended, beyond the frames: its error (a refused prompt, a failed run) and when.
pub struct Ending<'a> {
    pub error: Option<&'a str>,
    pub text: Option<&'a str>,
    pub session_id: &'a str,
    pub session_file: Option<&'a str>,
    pub duration_ms: u64,
}

impl Summary {
    pub fn observe(&mut self, v: &Value) {
        match v["type"].as_str() {
            Some("message_end") if v["message"]["role"] == "assistant" => {
                self.turns += 1;
                let u = &v["message"]["usage"];
                let n = |k: &str| u[k].as_u64().unwrap_or(0);
                self.input += n("input");
                self.output += n("output");
                self.cache_read += n("cacheRead");
                self.cache_write += n("cacheWrite");
                self.total_tokens += n("totalTokens");
                if let Some(c) = u["cost"]["total"].as_f64().filter(|c| c.is_finite()) {
                    self.cost_usd += c;
                }
            }
            // The final-answer tool is not a tool call the limits count.
            Some("tool_execution_end")
                if self.output_wanted && v["toolName"] == crate::output_schema::TOOL_NAME => {}
            Some("structured_output") => {
                if v["valid"] == true {
                    self.structured = Some(v["value"].clone());
                    self.output_errors = None;
                } else {
                    self.structured = None;
                    let errors = v["errors"].as_array().map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    });
                    self.output_errors = Some(errors.unwrap_or_default());
                }
            }
            Some("tool_execution_end") => {
                let refused = v["result"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(crate::limits::REFUSED));
                if !refused {
                    self.tool_calls += 1;
                }
            }
            Some("run_limit_reached") => {
                self.limit = v["limit"].as_str().and_then(Kind::from_name);
            }
            _ => {}
        }
    }

    /// `success`, `error`, `output_schema` (no valid final answer), or the limit's subtype (a
    /// limit wins: it is why the run ended).
    pub fn subtype(&self, error: bool) -> &'static str {
        match (self.limit, error) {
            (Some(k), _) => k.subtype(),
            (None, true) => "error",
            (None, false) if self.output_wanted && self.structured.is_none() => "output_schema",
            (None, false) => "success",
        }
    }

    /// Why there is no structured output (subtype `output_schema`).
    pub fn output_error(&self) -> String {
        let max = crate::output_schema::MAX_CORRECTIONS;
        match &self.output_errors {
            Some(e) => format!(
                "the final answer did not match the output schema after {max} corrections: {}",
                e.join("; ")
            ),
            None => "the run ended without a final answer".to_string(),
        }
    }

    /// The record: `{"type":"result","subtype","sessionId","sessionFile","turns","toolCalls",
    /// "usage","costUsd","durationMs","text","error"?}`.
    pub fn record(&self, e: &Ending<'_>) -> Value {
        let mut r = json!({
            "type": "result",
            "subtype": self.subtype(e.error.is_some()),
            "sessionId": e.session_id,
            "sessionFile": e.session_file,
            "turns": self.turns,
            "toolCalls": self.tool_calls,
            "usage": {
                "input": self.input,
                "output": self.output,
                "cacheRead": self.cache_read,
                "cacheWrite": self.cache_write,
                "totalTokens": self.total_tokens,
            },
            "costUsd": self.cost_usd,
            "durationMs": e.duration_ms,
            "text": e.text,
        });
        if self.output_wanted {
            r["structuredOutput"] = self.structured.clone().unwrap_or(Value::Null);
        }
        if let Some(err) = e.error {
            r["error"] = json!(err);
        } else if r["subtype"] == "output_schema" {
            r["error"] = json!(self.output_error());
        }
        r
    }
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory, renamed over it.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_frames() {
        let mut s = Summary::default();
        let reply = |input: u64, cost: f64| {
            json!({"type":"message_end","message":{"role":"assistant","usage":{"input":input,
                "output":2,"cacheRead":1,"cacheWrite":0,"totalTokens":input+3,"cost":{"total":cost}}}})
        };
        s.observe(&json!({"type":"message_end","message":{"role":"user"}}));
        s.observe(&reply(10, 0.25));
        s.observe(&json!({"type":"tool_execution_end","result":{"content":[{"type":"text","text":"ok"}]}}));
        s.observe(
            &json!({"type":"tool_execution_end","result":{"content":[{"type":"text",
            "text":"Tool call not run: the run's maxToolCalls limit (1) was reached"}]}}),
        );
        s.observe(&reply(20, 0.5));
        s.observe(&json!({"type":"run_limit_reached","limit":"maxToolCalls","value":1,"used":1}));
        let r = s.record(&Ending {
            error: None,
            text: Some("hi"),
            session_id: "abc",
            session_file: None,
            duration_ms: 12,
        });
        assert_eq!(
            r.to_string(),
            r#"{"type":"result","subtype":"max_tool_calls","sessionId":"abc","sessionFile":null,"turns":2,"toolCalls":1,"usage":{"input":30,"output":4,"cacheRead":2,"cacheWrite":0,"totalTokens":36},"costUsd":0.75,"durationMs":12,"text":"hi"}"#
        );
        let plain = Summary::default();
        assert_eq!(plain.subtype(false), "success");
        assert_eq!(plain.subtype(true), "error");
        let r = plain.record(&Ending {
            error: Some("boom"),
            text: None,
            session_id: "x",
            session_file: Some("/s.jsonl"),
            duration_ms: 0,
        });
        assert_eq!(r["error"], "boom");
        assert_eq!(r["text"], Value::Null);
    }

    #[test]
    fn writes_atomically() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("result.json");
        write_atomically(&p, b"{}\n").expect("write");
        write_atomically(&p, b"{\"a\":1}\n").expect("overwrite");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "{\"a\":1}\n");
        assert_eq!(std::fs::read_dir(d.path()).expect("dir").count(), 1);
    }
}
