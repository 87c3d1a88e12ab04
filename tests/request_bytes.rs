//! Exact request bytes of the provider body writers.

mod support;
use pith::llm::Model;
use pith::message::*;
use serde_json::json;
use support::streams::{request, user};

fn model() -> Model {
    let mut m: Model = serde_json::from_value(json!({
        "id":"m","name":"m","api":"anthropic-messages","provider":"p","baseUrl":"http://127.0.0.1:1",
        "reasoning":true,"input":["text","image"],"cost":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0},
        "contextWindow":1000,"maxTokens":100})).unwrap_or_else(|e| panic!("{e}"));
    m.id = "m".into();
    m
}

/// The Anthropic body is written straight from the messages (no `Value` tree): these are the exact
/// bytes the earlier `Value`-based builder produced for the same histories (thinking kinds, redacted
/// thinking, empty blocks, tool calls, grouped tool results with images, cache breakpoints).
#[test]
fn anthropic_body_bytes_are_exact() {
    let want: [&str; 5] = [
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi \"q\" \n é  ","cache_control":{"type":"ephemeral"}}]}],"max_tokens":100,"stream":true,"system":[{"type":"text","text":"You are a test.","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":0,"display":"summarized"}}"#,
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"think","signature":"s1"},{"type":"redacted_thinking","data":"rd"},{"type":"text","text":"plain"},{"type":"text","text":"t"},{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls","n":1.5}},{"type":"tool_use","id":"t2","name":"bash","input":{"command":"ls","n":1.5}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out1\nmore","is_error":false},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"(see attached image)"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"}}],"is_error":true,"cache_control":{"type":"ephemeral"}}]}],"max_tokens":100,"stream":true,"system":[{"type":"text","text":"You are a test.","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":0,"display":"summarized"}}"#,
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"},"cache_control":{"type":"ephemeral"}}]}],"max_tokens":100,"stream":true,"system":[{"type":"text","text":"You are a test.","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":0,"display":"summarized"}}"#,
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":[{"type":"text","text":"done"}]}],"max_tokens":100,"stream":true,"system":[{"type":"text","text":"You are a test.","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":0,"display":"summarized"}}"#,
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"b"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"zz","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"}}],"is_error":false,"cache_control":{"type":"ephemeral"}}]}],"max_tokens":100,"stream":true,"system":[{"type":"text","text":"You are a test.","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":0,"display":"summarized"}}"#,
    ];
    let mut got = Vec::new();
    let m = model();
    let a = |content: Vec<Content>, stop| {
        LlmMessage::Assistant(AssistantMessage {
            content,
            api: "anthropic-messages".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: stop,
            raw_stop_reason: None,
            error_message: None,
            timestamp: 1,
            response_id: None,
            response_model: None,
            provider_thinking_level: None,
            diagnostics: None,
            duration_ms: None,
            thinking_level: None,
        })
    };
    let img = Content::Image(ImageContent {
        data: "QUJD".into(),
        mime_type: "image/png".into(),
    });
    let tc = |id: &str| {
        Content::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: json!({"command":"ls","n":1.5}),
            arguments_error: None,
            thought_signature: None,
        })
    };
    let tr = |id: &str, content: Vec<Content>, err| {
        LlmMessage::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            content,
            details: None,
            is_error: err,
            duration_ms: None,
            timestamp: 1,
            nested_calls: None,
        })
    };
    let th = |t: &str, sig: Option<&str>, red: Option<bool>| {
        Content::Thinking(ThinkingContent {
            thinking: t.into(),
            thinking_signature: sig.map(Into::into),
            redacted: red,
        })
    };
    let histories = vec![
        vec![user("hi \"q\" \n é \u{2028}")],
        vec![
            user("a"),
            a(
                vec![
                    th("think", Some("s1"), None),
                    th("x", Some("rd"), Some(true)),
                    th("  ", None, None),
                    th("plain", None, None),
                    Content::text(""),
                    Content::text("t"),
                    tc("t1"),
                    tc("t2"),
                ],
                StopReason::ToolUse,
            ),
            tr(
                "t1",
                vec![Content::text("out1"), Content::text("more")],
                false,
            ),
            tr("t2", vec![img.clone()], true),
        ],
        vec![LlmMessage::User(UserMessage {
            content: UserContent::Blocks(vec![
                Content::text("look"),
                img.clone(),
                Content::text(" "),
            ]),
            timestamp: 1,
        })],
        vec![user("a"), a(vec![Content::text("done")], StopReason::Stop)],
        vec![
            user("  "),
            user("b"),
            tr("zz", vec![Content::text("r"), img.clone()], false),
        ],
    ];
    for msgs in histories.clone() {
        let req = request(m.clone(), msgs);
        let p = pith::llm::anthropic::prepare(&req);
        let bytes = p.body.bytes(&req);
        // The first pass over a long body only counts: the same length as the bytes.
        assert_eq!(
            pith::llm::body::count(pith::llm::anthropic::write_body, &req),
            bytes.len() as u64
        );
        got.push(String::from_utf8(bytes).expect("utf-8"));
    }
    assert_eq!(got, want);
    // A long history (over 4,096 items in the `messages` array) is counted in two halves on two
    // threads: still the length of the bytes, in both protocol versions.
    let mut long = Vec::new();
    while long.len() < 12_000 {
        for h in &histories {
            long.extend(h.iter().cloned());
        }
    }
    for compat in [pith::protocol::Version::V073, pith::protocol::Version::V087] {
        let mut req = request(m.clone(), long.clone());
        req.sdk = compat.profile().llm.sdk;
        let bytes = pith::llm::anthropic::prepare(&req).body.bytes(&req);
        assert_eq!(
            pith::llm::body::count(pith::llm::anthropic::write_body, &req),
            bytes.len() as u64
        );
    }
}

/// A long history's body is written twice when it is streamed (once counted, once sent): both
/// passes give exactly the bytes of the body built whole.
#[test]
fn a_streamed_anthropic_body_is_the_whole_body() {
    use pith::llm::body::{self, Measured};
    use std::io::Read;
    let out: String = "tool output with \"quotes\", tabs\t and é\n".repeat(60);
    let mut msgs = Vec::new();
    // Enough turns for a body over the streaming threshold (each ~2.6 KB).
    for i in 0..body::STREAM_ABOVE / 2000 {
        msgs.push(user(&format!("step {i}")));
        msgs.push(LlmMessage::Assistant(AssistantMessage {
            content: vec![Content::ToolCall(ToolCall {
                id: format!("toolu_{i}"),
                name: "bash".into(),
                arguments: json!({"command": format!("cat {i}"), "n": [1, 2.5, {"x": null}]}),
                arguments_error: None,
                thought_signature: None,
            })],
            api: "anthropic-messages".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 1,
            response_id: None,
            response_model: None,
            provider_thinking_level: None,
            raw_stop_reason: None,
            diagnostics: None,
            duration_ms: None,
            thinking_level: None,
        }));
        msgs.push(LlmMessage::ToolResult(ToolResultMessage {
            tool_call_id: format!("toolu_{i}"),
            tool_name: "bash".into(),
            content: vec![Content::text(out.clone())],
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 1,
            nested_calls: None,
        }));
    }
    msgs.push(user("one more"));
    let req = request(model(), msgs);
    let whole = pith::llm::anthropic::body_bytes(&req);
    assert!(whole.len() > body::STREAM_ABOVE, "{}", whole.len());
    assert!(body::counts_from_start(&req));
    let Measured::Stream(len) = body::measure(pith::llm::anthropic::write_body, &req, true) else {
        panic!("a body of {} bytes was not streamed", whole.len());
    };
    assert_eq!(len, whole.len() as u64);
    let mut sent = Vec::new();
    body::spawn(pith::llm::anthropic::write_body, std::sync::Arc::new(req))
        .unwrap()
        .read_to_end(&mut sent)
        .unwrap();
    assert!(
        sent == whole,
        "the streamed body differs from the whole body"
    );
    let v: serde_json::Value = serde_json::from_slice(&sent).unwrap();
    // Three messages a turn, and the last prompt.
    assert_eq!(
        v["messages"].as_array().unwrap().len(),
        3 * (body::STREAM_ABOVE / 2000) + 1
    );
}
