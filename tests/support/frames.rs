//! Reading what pith wrote and what it sent: prompts run to `agent_settled`, frame summaries and
//! look-ups, extension dialogs answered, `get_messages`, and the request bodies the fake LLM
//! recorded (optionally without the `cache_control` markers).

use serde_json::{Value, json};

use super::Pith;
use super::fake_llm::{FakeLlm, Recorded};

/// Send a prompt; return every frame up to and including `agent_settled`.
pub fn run(p: &mut Pith, id: &str, message: &str) -> Vec<Value> {
    p.send(json!({"id":id,"type":"prompt","message":message}));
    p.recv_until(|v| v["type"] == "agent_settled")
}

/// Frames until (and including) `agent_settled`, without `message_update`s.
pub fn settle(p: &mut Pith) -> Vec<Value> {
    p.recv_until(|v| v["type"] == "agent_settled")
        .into_iter()
        .filter(|f| f["type"] != "message_update")
        .collect()
}

/// Send a prompt; return its frames up to `agent_settled` without `message_update`s.
pub fn run_settled(p: &mut Pith, id: &str, message: &str) -> Vec<Value> {
    p.send(json!({"id":id,"type":"prompt","message":message}));
    settle(p)
}

/// The message of the last assistant `message_end`.
pub fn last_assistant(frames: &[Value]) -> Value {
    frames
        .iter()
        .rev()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
        .map(|f| f["message"].clone())
        .expect("an assistant message_end")
}

/// The messages of the `message_end`s of `role`.
pub fn message_ends<'a>(frames: &'a [Value], role: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "message_end" && f["message"]["role"] == role)
        .map(|f| &f["message"])
        .collect()
}

/// The text blocks of a `content` array, joined (anything else: empty).
pub fn joined_text(content: &Value) -> String {
    content
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

/// `provider/id` of every model of a model list (`get_available_models`' `models`).
pub fn model_ids(models: &Value) -> Vec<String> {
    models
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["provider"].as_str().unwrap(),
                m["id"].as_str().unwrap()
            )
        })
        .collect()
}

/// The frames of type `ty`.
pub fn of_type<'a>(frames: &'a [Value], ty: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == ty).collect()
}

/// The `tool_execution_end` of `call_id` (panics, showing the frames, if there is none).
pub fn tool_end<'a>(frames: &'a [Value], call_id: &str) -> &'a Value {
    frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end" && f["toolCallId"] == call_id)
        .unwrap_or_else(|| panic!("no tool_execution_end for {call_id}: {frames:#?}"))
}

/// The next frame, which must be an `extension_ui_request` of `method`.
pub fn ui(p: &mut Pith, method: &str) -> Value {
    let f = p.recv();
    assert_eq!(f["type"], "extension_ui_request", "{f}");
    assert_eq!(f["method"], method, "{f}");
    f
}

/// Answer the dialog `req` with an `extension_ui_response` carrying `fields`.
pub fn answer(p: &mut Pith, req: &Value, fields: Value) {
    let mut a = json!({"type":"extension_ui_response","id":req["id"]});
    for (k, v) in fields.as_object().unwrap() {
        a[k] = v.clone();
    }
    p.send(a);
}

/// Frame kinds, `message_update`s dropped, responses tagged with their command, messages with
/// their role (and `!` for errors): `response:prompt`, `message_end:assistant!`.
pub fn kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["type"] != "message_update")
        .map(|f| {
            let t = f["type"].as_str().unwrap_or("?");
            if t == "response" {
                return format!("response:{}", f["command"].as_str().unwrap_or("?"));
            }
            if !t.starts_with("message_") {
                return t.to_string();
            }
            match f["message"]["role"].as_str() {
                Some(r) if f["message"]["stopReason"] == "error" => format!("{t}:{r}!"),
                Some(r) => format!("{t}:{r}"),
                None => t.to_string(),
            }
        })
        .collect()
}

/// Frame kinds without the streaming updates, messages with their role: `message_end:user`.
pub fn role_kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["type"] != "message_update" && f["type"] != "tool_execution_update")
        .map(|f| {
            let t = f["type"].as_str().unwrap_or("?");
            match f["message"]["role"].as_str() {
                Some(r) if t.starts_with("message_") => format!("{t}:{r}"),
                _ => t.to_string(),
            }
        })
        .collect()
}

/// The keys of a JSON object, in order (panics on anything else).
pub fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect()
}

/// The `messages` of a `get_messages` call (id `gm`).
pub fn messages(p: &mut Pith) -> Vec<Value> {
    let r = p.call(json!({"type":"get_messages"}), "gm");
    r["data"]["messages"].as_array().expect("messages").clone()
}

/// A user message with one text block, as pith sends it to Anthropic.
pub fn user(text: &str) -> Value {
    json!({"role":"user","content":[{"type":"text","text":text}]})
}

/// An assistant message with one text block, as pith sends it to Anthropic.
pub fn assistant(text: &str) -> Value {
    json!({"role":"assistant","content":[{"type":"text","text":text}]})
}

/// Request `i` as recorded (panics if it was not made).
fn recorded(llm: &FakeLlm, i: usize) -> Recorded {
    let reqs = llm.requests();
    let made = reqs.len();
    reqs.into_iter()
        .nth(i)
        .unwrap_or_else(|| panic!("request {i} not made ({made} made)"))
}

/// The JSON body of request `i` (panics if it was not made).
pub fn request_json(llm: &FakeLlm, i: usize) -> Value {
    serde_json::from_str(&recorded(llm, i).body).expect("request body is JSON")
}

/// The JSON body of request `i`, which must have gone to `/v1/messages`.
pub fn request_body(llm: &FakeLlm, i: usize) -> Value {
    let r = recorded(llm, i);
    // pi 0.87.1 (and pith under `--compat 0.87`) asks for the SDK's beta endpoint.
    assert!(
        r.path == "/v1/messages" || r.path == "/v1/messages?beta=true",
        "{}",
        r.path
    );
    serde_json::from_str(&r.body).expect("request body is JSON")
}

/// The names of the `tools` of a request body (none: empty).
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the tools request `i` (to `/v1/messages`) declared.
pub fn request_tool_names(llm: &FakeLlm, i: usize) -> Vec<String> {
    tool_names(&request_body(llm, i))
}

/// The `messages` of request `i` (to `/v1/messages`) without `cache_control` markers.
pub fn request_messages(llm: &FakeLlm, i: usize) -> Value {
    strip_cache_control(request_body(llm, i)["messages"].clone())
}

/// `v` with every `cache_control` key removed, at any depth.
pub fn strip_cache_control(mut v: Value) -> Value {
    match &mut v {
        Value::Object(m) => {
            m.remove("cache_control");
            for x in m.values_mut() {
                *x = strip_cache_control(x.take());
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                *x = strip_cache_control(x.take());
            }
        }
        _ => {}
    }
    v
}
