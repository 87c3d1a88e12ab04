//! The offline `faux` provider: answers from a script file (JSON lines, one per assistant turn)
//! without any network, through the same [`StreamEvent`] sequence a real provider produces. Used
//! for demos, tests of the agent loop, and running pith where no provider is reachable. The
//! script format is documented in `docs/faux.md`.

use std::time::Duration;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::llm::api::{ABORTED_MID_STREAM, Builder};
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{LlmMessage, StopReason, Usage};

/// The offline model: provider `faux`, id `faux`, api `faux`. It is not in the registry (it has
/// no credential and never shows in `get_available_models`); `--provider faux` / `--model faux`
/// select it.
pub fn model() -> crate::llm::Model {
    crate::llm::Model {
        id: "faux".into(),
        name: "Faux (offline)".into(),
        api: "faux".into(),
        provider: "faux".into(),
        base_url: String::new(),
        reasoning: false,
        input: vec!["text".into(), "image".into()],
        cost: crate::llm::ModelCost::default(),
        context_window: 200_000,
        max_tokens: 16_384,
        headers: None,
        compat: None,
        ..Default::default()
    }
}

/// Does this `--provider` / `--model` pair name the faux model?
pub fn is_selected(provider: Option<&str>, pattern: &str) -> bool {
    match provider {
        Some(p) => p.eq_ignore_ascii_case("faux") && matches!(pattern, "faux" | "faux/faux"),
        None => matches!(pattern, "faux" | "faux/faux"),
    }
}

/// Largest accepted script file.
const MAX_SCRIPT_BYTES: u64 = 16 * 1024 * 1024;

/// One scripted assistant turn.
#[derive(Debug, Default, PartialEq)]
pub struct Turn {
    pub thinking: Option<String>,
    pub text: Option<String>,
    pub tool_calls: Vec<(String, Value)>,
    pub error: Option<String>,
    pub delay_ms: u64,
    pub stop_reason: Option<StopReason>,
    pub usage: Option<(u64, u64)>,
}

/// Parse one script line.
pub fn parse_turn(line: &str) -> Result<Turn, String> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("faux script: invalid JSON: {e}"))?;
    let obj = v
        .as_object()
        .ok_or("faux script: each line must be a JSON object")?;
    let str_field = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let mut turn = Turn {
        thinking: str_field("thinking"),
        text: str_field("text"),
        error: str_field("error"),
        delay_ms: obj.get("delayMs").and_then(Value::as_u64).unwrap_or(0),
        ..Default::default()
    };
    if let Some(Value::Array(calls)) = obj.get("toolCalls") {
        for c in calls {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .ok_or("faux script: tool call without name")?;
            let args = c
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default()));
            turn.tool_calls.push((name.to_string(), args));
        }
    }
    turn.stop_reason = match obj.get("stopReason").and_then(Value::as_str) {
        None => None,
        Some("stop") => Some(StopReason::Stop),
        Some("length") => Some(StopReason::Length),
        Some("toolUse") => Some(StopReason::ToolUse),
        Some(other) => return Err(format!("faux script: unknown stopReason {other}")),
    };
    if let Some(u) = obj.get("usage") {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        turn.usage = Some((n("input"), n("output")));
    }
    Ok(turn)
}

/// The turn for this request: line N of the script where N = assistant messages so far.
fn select_turn(req: &LlmRequest) -> Result<Turn, String> {
    let index = req
        .messages
        .iter()
        .filter(|m| matches!(m, LlmMessage::Assistant(_)))
        .count();
    let Some(path) = &req.faux_script else {
        return Ok(default_turn(req));
    };
    let meta =
        std::fs::metadata(path).map_err(|e| format!("faux script {}: {e}", path.display()))?;
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "faux script {}: larger than {MAX_SCRIPT_BYTES} bytes",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("faux script {}: {e}", path.display()))?;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    match lines.get(index) {
        Some(line) => parse_turn(line),
        None => Ok(Turn {
            text: Some("faux script exhausted".into()),
            ..Default::default()
        }),
    }
}

fn default_turn(req: &LlmRequest) -> Turn {
    let prompt = req
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            LlmMessage::User(u) => Some(u.content.joined_text()),
            _ => None,
        })
        .unwrap_or_default();
    let short: String = prompt.chars().take(80).collect();
    Turn {
        text: Some(format!("This is the faux provider. You said: {short}")),
        ..Default::default()
    }
}

/// Split `s` into about `n`-character chunks on char boundaries.
fn chunks(s: &str, n: usize) -> impl Iterator<Item = &str> {
    let mut rest = s;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = rest
            .char_indices()
            .nth(n)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let (a, b) = rest.split_at(cut);
        rest = b;
        Some(a)
    })
}

/// Run one faux request, calling `emit` for every event (stops when it returns false).
pub fn run(req: &LlmRequest, token: &CancelToken, emit: &mut dyn FnMut(StreamEvent) -> bool) {
    let mut b = Builder::new(&req.model);
    b.sdk = req.sdk;
    let mut out = Vec::new();
    let turn = match select_turn(req) {
        Ok(t) => t,
        Err(e) => {
            b.fail(e, false, None, &mut out);
            flush(&mut out, emit);
            return;
        }
    };
    let pause = Duration::from_millis(turn.delay_ms);
    // Sleeps between chunks; false when cancelled.
    let wait = |b: &mut Builder, out: &mut Vec<StreamEvent>| -> bool {
        let cancelled = if pause.is_zero() {
            token.is_cancelled()
        } else {
            !matches!(
                token.receiver().recv_timeout(pause),
                Err(crossbeam_channel::RecvTimeoutError::Timeout)
            )
        };
        if cancelled {
            b.fail(ABORTED_MID_STREAM.into(), true, None, out);
        }
        !cancelled
    };
    let input_tokens: u64 = req
        .messages
        .iter()
        .map(|m| {
            serde_json::to_string(m)
                .map(|s| s.len() as u64 / 4)
                .unwrap_or(0)
        })
        .sum::<u64>()
        + req.system_prompt.len() as u64 / 4;
    b.start(&mut out);
    if !flush(&mut out, emit) {
        return;
    }
    if let Some(err) = &turn.error {
        if wait(&mut b, &mut out) {
            b.fail(err.clone(), false, None, &mut out);
        }
        flush(&mut out, emit);
        return;
    }
    let mut output_chars = 0usize;
    for (is_thinking, s) in [(true, &turn.thinking), (false, &turn.text)] {
        let Some(s) = s else { continue };
        let i = if is_thinking {
            b.start_thinking(&mut out)
        } else {
            b.start_text(&mut out)
        };
        for c in chunks(s, 8) {
            if !wait(&mut b, &mut out) {
                flush(&mut out, emit);
                return;
            }
            b.delta(i, c, &mut out);
            if !flush(&mut out, emit) {
                return;
            }
        }
        output_chars += s.len();
        b.end_block(i, &mut out);
    }
    for (n, (name, args)) in turn.tool_calls.iter().enumerate() {
        let index = req.messages.len();
        let i = b.start_tool(&format!("faux_{index}_{n}"), name, &mut out);
        let json = args.to_string();
        for c in chunks(&json, 16) {
            if !wait(&mut b, &mut out) {
                flush(&mut out, emit);
                return;
            }
            b.delta(i, c, &mut out);
            if !flush(&mut out, emit) {
                return;
            }
        }
        output_chars += json.len();
        b.end_block(i, &mut out);
    }
    let (input, output) = turn
        .usage
        .unwrap_or((input_tokens, (output_chars as u64).div_ceil(4)));
    b.set_usage(
        Usage {
            input,
            output,
            total_tokens: input + output,
            ..Default::default()
        },
        &mut out,
    );
    let stop = turn.stop_reason.unwrap_or(if turn.tool_calls.is_empty() {
        StopReason::Stop
    } else {
        StopReason::ToolUse
    });
    b.finish(stop, &mut out);
    flush(&mut out, emit);
}

fn flush(out: &mut Vec<StreamEvent>, emit: &mut dyn FnMut(StreamEvent) -> bool) -> bool {
    for ev in out.drain(..) {
        if !emit(ev) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_turns() {
        let t = parse_turn(r#"{"thinking":"hm","text":"hi","toolCalls":[{"name":"bash","arguments":{"command":"ls"}}],"delayMs":5}"#)
            .unwrap();
        assert_eq!(t.thinking.as_deref(), Some("hm"));
        assert_eq!(
            t.tool_calls,
            vec![("bash".to_string(), serde_json::json!({"command":"ls"}))]
        );
        assert_eq!(t.delay_ms, 5);
        assert!(parse_turn("[1]").is_err());
        assert!(parse_turn("{").is_err());
        assert!(parse_turn(r#"{"toolCalls":[{}]}"#).is_err());
    }

    #[test]
    fn chunks_respect_char_boundaries() {
        let v: Vec<&str> = chunks("héllo wörld 😀!", 4).collect();
        assert_eq!(v.concat(), "héllo wörld 😀!");
        assert_eq!(v[0], "héll");
    }
}
