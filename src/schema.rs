//! `pith schema [--compat VERSION]` (issue 27): one JSON Schema (2020-12) of every command,
//! response and event of a protocol version. Pure.
//!
//! Built from what builds the frames, so it cannot silently drift: the command names are the
//! decoder's table (`rpc::command::COMMAND_NAMES`), a prompt's `limits` keys are `limits::KEYS`,
//! the thinking levels `ThinkingLevel::ALL`; every event is one arm of an exhaustive `match` over
//! `rpc::event::Event` ([`event_name`]: a new event does not compile until it is described here);
//! what differs between versions is read from the version's [`Profile`] flags the frame builders
//! read (`willRetry`, `durationMs`, `aborted`, the `message_update` shape, the compaction event
//! names). Each frame's top-level keys are closed (`additionalProperties: false`), so a new field
//! fails `tests/protocol_schema.rs`, which validates every frame a set of binary runs writes in all
//! three versions and every line of pi's recorded transcripts (`fixtures/transcripts/`). What is
//! inside a message, a tool result or a response's `data` is described loosely (an object with
//! its known keys typed, others allowed): those are pi's data, not the protocol's envelope.

use serde_json::{Map, Value, json};

use crate::protocol::{CompactionEvents, Profile, UpdateShape, Version};
use crate::rpc::event::Event;

/// The `type` of an event frame (exhaustive: every variant of the frame builder's enum).
pub fn event_name(e: &Event<'_>) -> &'static str {
    match e {
        Event::AgentStart => "agent_start",
        Event::AgentEnd { .. } => "agent_end",
        Event::TurnStart => "turn_start",
        Event::TurnEnd { .. } => "turn_end",
        Event::MessageStart { .. } => "message_start",
        Event::MessageEnd { .. } => "message_end",
        Event::ToolExecutionStart { .. } => "tool_execution_start",
        Event::ToolExecutionUpdate { .. } => "tool_execution_update",
        Event::ToolExecutionEnd { .. } => "tool_execution_end",
        Event::QueueUpdate { .. } => "queue_update",
        Event::CompactionStart { .. } => "compaction_start",
        Event::CompactionEnd { .. } => "compaction_end",
        Event::AutoCompactionStart { .. } => "auto_compaction_start",
        Event::AutoCompactionEnd { .. } => "auto_compaction_end",
        Event::AutoRetryStart { .. } => "auto_retry_start",
        Event::AutoRetryEnd { .. } => "auto_retry_end",
        Event::ThinkingLevelChanged { .. } => "thinking_level_changed",
        Event::SessionInfoChanged { .. } => "session_info_changed",
        Event::AgentSettled { .. } => "agent_settled",
        Event::Heartbeat { .. } => "heartbeat",
        Event::RunLimitReached { .. } => "run_limit_reached",
        Event::StructuredOutput { .. } => "structured_output",
        Event::BashExecutionUpdate { .. } => "bash_execution_update",
        Event::EntryAppended { .. } => "entry_appended",
        Event::SummarizationRetryScheduled { .. } => "summarization_retry_scheduled",
        Event::SummarizationRetryAttemptStart { .. } => "summarization_retry_attempt_start",
        Event::SummarizationRetryFinished => "summarization_retry_finished",
        Event::SessionWriteError { .. } => "session_write_error",
        Event::SessionWriteResumed { .. } => "session_write_resumed",
    }
}

/// Commands pith decodes beyond `COMMAND_NAMES` (pith's own).
const OWN_COMMANDS: &[&str] = &["ping"];

fn string() -> Value {
    json!({"type": "string"})
}
fn boolean() -> Value {
    json!({"type": "boolean"})
}
fn count() -> Value {
    json!({"type": "integer", "minimum": 0})
}
fn number() -> Value {
    json!({"type": "number"})
}
fn object() -> Value {
    json!({"type": "object"})
}
fn refer(def: &str) -> Value {
    json!({"$ref": format!("#/$defs/{def}")})
}
fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

/// One frame: `type` fixed, these properties (`(name, schema, required)`), no others.
fn frame(ty: &str, description: &str, props: &[(&str, Value, bool)]) -> Value {
    let mut p = Map::new();
    p.insert("type".into(), json!({"const": ty}));
    let mut required = vec![json!("type")];
    for (k, s, r) in props {
        p.insert((*k).into(), s.clone());
        if *r {
            required.push(json!(k));
        }
    }
    json!({"description": description, "type": "object", "properties": p,
        "required": required, "additionalProperties": false})
}

/// The events of `profile`'s version.
fn events(profile: &Profile) -> Vec<(&'static str, Value)> {
    let ev = &profile.events;
    let msg = || refer("message");
    let tool_ids = |more: &[(&'static str, Value, bool)]| {
        let mut v = vec![("toolCallId", string(), true), ("toolName", string(), true)];
        v.extend(more.iter().cloned());
        // pi 1.6.0's code mode: the call that ran this one (never written by pith's own tools).
        v.push(("parentToolCallId", string(), false));
        v
    };
    let update = match ev.update {
        UpdateShape::Snapshot => vec![
            (
                "assistantMessageEvent",
                refer("assistantMessageEvent"),
                true,
            ),
            // With `--rpc-partials none` the snapshot is left out.
            ("message", msg(), false),
        ],
        UpdateShape::Live => vec![
            ("usage", refer("usage"), false),
            (
                "assistantMessageEvent",
                refer("assistantMessageEvent"),
                true,
            ),
        ],
    };
    let compaction_end = |reason: bool| {
        let mut v = vec![
            ("result", object(), false),
            ("aborted", boolean(), true),
            ("willRetry", boolean(), true),
            ("errorMessage", string(), false),
        ];
        if reason {
            v.insert(0, ("reason", string(), true));
        }
        v
    };
    let retry_scheduled = [
        ("attempt", count(), true),
        ("maxAttempts", count(), true),
        ("delayMs", count(), true),
        ("errorMessage", string(), true),
    ];
    let mut out: Vec<(&'static str, Value)> = vec![
        ("agent_start", frame("agent_start", "A run starts.", &[])),
        (
            "agent_end",
            frame(
                "agent_end",
                "A run ended: the messages it added.",
                &[
                    ("messages", json!({"type": "array", "items": msg()}), true),
                    ("willRetry", boolean(), ev.agent_end_will_retry),
                ][..if ev.agent_end_will_retry { 2 } else { 1 }],
            ),
        ),
        ("turn_start", frame("turn_start", "A turn starts.", &[])),
        (
            "turn_end",
            frame(
                "turn_end",
                "A turn ended: its assistant message and tool results.",
                &[
                    ("message", msg(), true),
                    (
                        "toolResults",
                        json!({"type": "array", "items": msg()}),
                        true,
                    ),
                ],
            ),
        ),
        (
            "message_start",
            frame(
                "message_start",
                "A message starts.",
                &[("message", msg(), true)],
            ),
        ),
        (
            "message_end",
            frame(
                "message_end",
                "A message is complete.",
                &[("message", msg(), true)],
            ),
        ),
        (
            "message_update",
            frame(
                "message_update",
                "A streaming assistant message changed.",
                &update,
            ),
        ),
        (
            "tool_execution_start",
            frame(
                "tool_execution_start",
                "A tool call starts.",
                &tool_ids(&[("args", json!(true), true)]),
            ),
        ),
        (
            "tool_execution_update",
            frame(
                "tool_execution_update",
                "A running tool's partial result.",
                &tool_ids(&[
                    ("args", json!(true), true),
                    ("partialResult", object(), true),
                ]),
            ),
        ),
        (
            "tool_execution_end",
            frame(
                "tool_execution_end",
                "A tool call ended.",
                &tool_ids(&[
                    ("result", object(), true),
                    ("isError", boolean(), true),
                    ("durationMs", count(), false),
                ])
                .into_iter()
                .filter(|(k, _, _)| *k != "durationMs" || ev.message_duration)
                .collect::<Vec<_>>(),
            ),
        ),
        (
            "queue_update",
            frame(
                "queue_update",
                "The steering and follow-up queues.",
                &[("steering", strings(), true), ("followUp", strings(), true)],
            ),
        ),
        (
            "compaction_start",
            frame(
                "compaction_start",
                "A compaction starts.",
                &[("reason", string(), true)],
            ),
        ),
        (
            "compaction_end",
            frame(
                "compaction_end",
                "A compaction ended.",
                &compaction_end(true),
            ),
        ),
        (
            "auto_retry_start",
            frame(
                "auto_retry_start",
                "A failed request is retried after a delay.",
                &retry_scheduled,
            ),
        ),
        (
            "auto_retry_end",
            frame(
                "auto_retry_end",
                "The retries ended.",
                &[
                    ("success", boolean(), true),
                    ("attempt", count(), true),
                    ("finalError", string(), false),
                ],
            ),
        ),
        (
            "thinking_level_changed",
            frame(
                "thinking_level_changed",
                "The thinking level changed.",
                &[("level", string(), true)],
            ),
        ),
        (
            "session_info_changed",
            frame(
                "session_info_changed",
                "The session's name changed.",
                &[("name", string(), true)],
            ),
        ),
        (
            "agent_settled",
            frame(
                "agent_settled",
                "pith's: the agent is idle, nothing pending.",
                &[("aborted", boolean(), true)][..usize::from(ev.settled_aborted)],
            ),
        ),
        (
            "heartbeat",
            frame(
                "heartbeat",
                "pith's (--heartbeat): a run is alive.",
                &[
                    ("elapsedMs", count(), true),
                    ("turns", count(), true),
                    ("toolCalls", count(), true),
                    ("tokens", count(), true),
                    ("costUsd", number(), true),
                    (
                        "activity",
                        json!({"enum": ["streaming", "tool", "retry_wait", "compacting"]}),
                        true,
                    ),
                ],
            ),
        ),
        (
            "run_limit_reached",
            frame(
                "run_limit_reached",
                "pith's (run limits): a limit ended the run, right before agent_end.",
                &[
                    ("limit", json!({"enum": limit_names()}), true),
                    ("value", number(), true),
                    ("used", number(), true),
                ],
            ),
        ),
        (
            "structured_output",
            frame(
                "structured_output",
                "pith's (--output-schema, outputSchema): the run's final answer, or why there is none.",
                &[
                    ("valid", boolean(), true),
                    ("value", json!(true), false),
                    ("corrections", count(), false),
                    ("errors", strings(), false),
                ],
            ),
        ),
        (
            "bash_execution_update",
            frame(
                "bash_execution_update",
                "pi 0.87.1 and later: output of the RPC bash command.",
                &[("id", json!(true), false), ("delta", string(), true)],
            ),
        ),
        (
            "entry_appended",
            frame(
                "entry_appended",
                "pi 0.87.1 and later: a session entry outside a message.",
                &[("entry", object(), true)],
            ),
        ),
        (
            "summarization_retry_scheduled",
            frame(
                "summarization_retry_scheduled",
                "pi 0.87.1 and later: a summary request is retried.",
                &retry_scheduled,
            ),
        ),
        (
            "summarization_retry_attempt_start",
            frame(
                "summarization_retry_attempt_start",
                "pi 0.87.1 and later: a summary retry starts.",
                &[("source", string(), true), ("reason", string(), false)],
            ),
        ),
        (
            "summarization_retry_finished",
            frame(
                "summarization_retry_finished",
                "pi 0.87.1 and later: the summary retries ended.",
                &[],
            ),
        ),
        (
            "session_write_error",
            frame(
                "session_write_error",
                "pith's: writing the session file failed.",
                &[
                    ("sessionFile", string(), true),
                    ("error", string(), true),
                    ("unsavedEntries", count(), true),
                ],
            ),
        ),
        (
            "session_write_resumed",
            frame(
                "session_write_resumed",
                "pith's: the session file is written again.",
                &[
                    ("sessionFile", string(), true),
                    ("savedEntries", count(), true),
                ],
            ),
        ),
        (
            "extension_error",
            frame(
                "extension_error",
                "An extension (or a skill's expansion) failed; pith goes on without it.",
                &[
                    ("extensionPath", string(), true),
                    ("event", string(), true),
                    ("error", string(), true),
                ],
            ),
        ),
        (
            "permission_decision",
            frame(
                "permission_decision",
                "pith's (permission rules, --confirm-tools): what was decided for a tool call.",
                &[
                    ("toolCallId", string(), true),
                    ("toolName", string(), true),
                    ("decision", json!({"enum": ["allow", "deny"]}), true),
                    ("by", string(), true),
                    ("rule", string(), false),
                ],
            ),
        ),
        (
            "extension_ui_request",
            json!({"description": "A dialog or notification for the host (extensions, --confirm-tools, permission rules).",
                "type": "object", "required": ["type", "id", "method"],
                "properties": {"type": {"const": "extension_ui_request"}, "id": string(),
                    "method": {"enum": ["select", "confirm", "input", "editor", "notify",
                        "setStatus", "setWidget", "setTitle", "set_editor_text"]}}}),
        ),
    ];
    if ev.compaction == CompactionEvents::AutoPrefixed {
        out.push((
            "auto_compaction_start",
            frame(
                "auto_compaction_start",
                "An automatic compaction starts.",
                &[("reason", string(), true)],
            ),
        ));
        out.push((
            "auto_compaction_end",
            frame(
                "auto_compaction_end",
                "An automatic compaction ended.",
                &compaction_end(false),
            ),
        ));
    }
    out
}

fn limit_names() -> Vec<&'static str> {
    use crate::limits::Kind;
    [
        Kind::MaxTurns,
        Kind::MaxToolCalls,
        Kind::MaxCostUsd,
        Kind::Deadline,
        Kind::MaxRepeats,
    ]
    .into_iter()
    .map(Kind::name)
    .collect()
}

/// A command's own fields (`(name, schema, required)`); the decoder ignores others, as pi.
fn command_fields(name: &str) -> Vec<(&'static str, Value, bool)> {
    let images = json!({"type": "array", "items": object()});
    let user = |run: bool| {
        let mut v = vec![
            ("message", string(), true),
            ("images", images.clone(), false),
            (
                "attachments",
                json!({"type": "array", "items": object()}),
                false,
            ),
        ];
        if run {
            let limits: Map<String, Value> = crate::limits::KEYS
                .iter()
                .map(|k| ((*k).to_string(), json!({"type": ["number", "null"]})))
                .collect();
            v.push((
                "limits",
                json!({"type": "object", "properties": limits, "additionalProperties": false}),
                false,
            ));
            v.push((
                "outputSchema",
                json!({"type": "object", "description": "A JSON Schema (type object) of the run's final answer (docs/rpc.md, structured output)."}),
                false,
            ));
        }
        v
    };
    let levels: Vec<&str> = crate::message::ThinkingLevel::ALL
        .iter()
        .map(|l| l.as_str())
        .collect();
    let queue_modes = json!({"enum": ["all", "one-at-a-time"]});
    match name {
        "prompt" => {
            let mut v = user(true);
            v.push((
                "streamingBehavior",
                json!({"enum": ["steer", "followUp", "follow-up"]}),
                false,
            ));
            v
        }
        "abort_and_prompt" => user(true),
        "steer" | "follow_up" => user(false),
        "new_session" => vec![("parentSession", string(), false)],
        "set_model" => vec![("provider", string(), true), ("modelId", string(), true)],
        "set_thinking_level" => vec![("level", json!({"enum": levels}), true)],
        "set_steering_mode" | "set_follow_up_mode" => vec![("mode", queue_modes, true)],
        "set_interrupt_mode" => vec![("mode", json!({"enum": ["immediate", "wait"]}), true)],
        "compact" => vec![("customInstructions", string(), false)],
        "set_auto_compaction" | "set_auto_retry" => vec![("enabled", boolean(), true)],
        "bash" => vec![
            ("command", string(), true),
            ("excludeFromContext", boolean(), false),
        ],
        "export_html" => vec![("outputPath", string(), false)],
        "switch_session" => vec![("sessionPath", string(), true)],
        "fork" | "branch" => vec![("entryId", string(), true)],
        "set_session_name" => vec![("name", string(), true)],
        "get_entries" => vec![("since", string(), false)],
        _ => Vec::new(),
    }
}

fn command(name: &str) -> Value {
    let mut p = Map::new();
    p.insert("type".into(), json!({"const": name}));
    p.insert(
        "id".into(),
        json!({"description": "Echoed on the response (any JSON value)."}),
    );
    let mut required = vec![json!("type")];
    for (k, s, r) in command_fields(name) {
        p.insert(k.into(), s);
        if r {
            required.push(json!(k));
        }
    }
    json!({"type": "object", "properties": p, "required": required})
}

/// The `data` of a successful response, where it has a fixed shape.
fn response_data(name: &str) -> Value {
    match name {
        "ping" => json!({"type": "object", "required": ["uptimeMs", "isStreaming"],
            "properties": {"uptimeMs": count(), "isStreaming": boolean()},
            "additionalProperties": false}),
        "get_last_assistant_text" => json!({"type": "object",
            "properties": {"text": {"type": ["string", "null"]}}}),
        "get_messages" | "get_fork_messages" | "get_branch_messages" => {
            json!({"type": "object", "required": ["messages"],
                "properties": {"messages": {"type": "array", "items": object()}}})
        }
        "get_available_models" => json!({"type": "object", "required": ["models"],
            "properties": {"models": {"type": "array", "items": object()}}}),
        _ => json!({"description": "The command's result (see docs/rpc.md)."}),
    }
}

fn response(name: &str) -> Value {
    json!({"type": "object", "required": ["type", "command", "success"],
        "properties": {"type": {"const": "response"}, "id": true, "command": {"const": name},
            "success": {"const": true}, "data": response_data(name)},
        "additionalProperties": false})
}

/// The schema document of `version`.
pub fn document(version: Version) -> Value {
    let profile = version.profile();
    let mut defs = Map::new();
    let mut all = Vec::new();
    let names: Vec<&str> = crate::rpc::command::COMMAND_NAMES
        .iter()
        .chain(OWN_COMMANDS)
        .copied()
        .collect();
    for name in &names {
        defs.insert(format!("command.{name}"), command(name));
        all.push(refer(&format!("command.{name}")));
    }
    for name in &names {
        defs.insert(format!("response.{name}"), response(name));
        all.push(refer(&format!("response.{name}")));
    }
    defs.insert(
        "response.error".into(),
        json!({"description": "A command failed or could not be read (`command` is `parse` for a line that is not JSON; absent when the command had no type).",
            "type": "object", "required": ["type", "success", "error"],
            "properties": {"type": {"const": "response"}, "id": true, "command": string(),
                "success": {"const": false}, "error": string()},
            "additionalProperties": false}),
    );
    all.push(refer("response.error"));
    for (name, schema) in events(profile) {
        defs.insert(format!("event.{name}"), schema);
        all.push(refer(&format!("event.{name}")));
    }
    defs.insert(
        "message".into(),
        json!({"description": "An agent message (user, assistant, toolResult, ...): pi's shape.",
            "type": "object", "required": ["role"], "properties": {"role": string(),
                "content": {"type": ["string", "array"]}, "timestamp": number()}}),
    );
    defs.insert(
        "usage".into(),
        json!({"type": "object", "properties": {"input": number(), "output": number(),
            "cacheRead": number(), "cacheWrite": number(), "totalTokens": number(),
            "cost": object()}}),
    );
    defs.insert(
        "assistantMessageEvent".into(),
        json!({"type": "object", "required": ["type"], "properties": {
            "type": {"enum": ["start", "text_start", "text_delta", "text_end", "thinking_start",
                "thinking_delta", "thinking_end", "toolcall_start", "toolcall_delta",
                "toolcall_end", "done", "error"]},
            "contentIndex": count(), "delta": string(), "content": string(),
            "partial": refer("message"), "toolCall": object()}}),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("pith RPC protocol, pi {}", version.as_str()),
        "description": "Every command (stdin), response and event (stdout) of `pith --mode rpc --compat VERSION`: one line of JSON each. Made by `pith schema`; docs/rpc.md.",
        "anyOf": all,
        "$defs": defs,
    })
}

/// The `$defs` key that describes `frame`: `command.X`, `response.X`, `response.error` or
/// `event.X` (`inbound`: it came from the host). `None`: no `type` to go by.
pub fn def_of(frame: &Value, inbound: bool) -> Option<String> {
    let ty = frame.get("type")?.as_str()?;
    if inbound {
        return Some(format!("command.{ty}"));
    }
    if ty == "response" {
        return Some(match (&frame["success"], frame["command"].as_str()) {
            (Value::Bool(true), Some(c)) => format!("response.{c}"),
            _ => "response.error".to_string(),
        });
    }
    Some(format!("event.{ty}"))
}

/// The errors of `frame` against `doc` (`[]`: it is valid; `inbound`: a command).
pub fn check(doc: &Value, frame: &Value, inbound: bool) -> Vec<String> {
    let Some(def) = def_of(frame, inbound) else {
        return vec!["root: no type".to_string()];
    };
    let Some(node) = doc["$defs"].get(&def) else {
        return vec![format!("root: no {def} in the schema")];
    };
    crate::tools::pi_schema::explain_node(doc, node, frame)
        .into_iter()
        .map(|(p, m)| format!("{def}: {p}: {m}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_is_a_checked_schema() {
        for v in Version::ALL {
            let doc = document(v);
            // Every `$ref` resolves, every keyword is one pith's validator checks.
            let mut root = doc.clone();
            root["type"] = json!("object");
            crate::output_schema::OutputSchema::new(root).unwrap_or_else(|e| panic!("{e}"));
            let ok = |f: Value, inbound| assert_eq!(check(&doc, &f, inbound), Vec::<String>::new());
            ok(
                json!({"type":"prompt","id":"1","message":"hi","limits":{"maxTurns":2}}),
                true,
            );
            ok(
                json!({"type":"response","command":"ping","success":true,
                "data":{"uptimeMs":3,"isStreaming":false}}),
                false,
            );
            ok(
                json!({"type":"response","success":false,"error":"bad"}),
                false,
            );
            ok(
                json!({"type":"run_limit_reached","limit":"maxTurns","value":2,"used":2}),
                false,
            );
        }
        let doc = document(Version::V073);
        assert_eq!(
            check(
                &doc,
                &json!({"type":"agent_end","messages":[],"willRetry":false}),
                false
            ),
            ["event.agent_end: willRetry: unknown field"]
        );
        assert!(
            check(
                &document(Version::V087),
                &json!({"type":"agent_end","messages":[]}),
                false
            )
            .contains(&"event.agent_end: willRetry: missing".to_string())
        );
        assert_eq!(
            check(
                &doc,
                &json!({"type":"set_thinking_level","level":"huge"}),
                true
            )
            .len(),
            1
        );
        assert_eq!(
            check(&doc, &json!({"type":"no_such"}), true),
            ["root: no command.no_such in the schema"]
        );
    }
}
