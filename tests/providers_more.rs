//! End-to-end tests of the `openai-responses` and `google-generative-ai` streams against the fake
//! HTTP server on 127.0.0.1 (the same coverage tests/providers.rs gives the Anthropic and OpenAI
//! completions APIs): plain text, thinking, tool calls split across reads, unicode split
//! mid-codepoint, usage and cost, HTTP error texts, refused connections, disconnects, stalls and
//! cancellation. Also the 403 texts of the two other APIs. Expected values follow the reference
//! (pi-ai 0.73.1 with the OpenAI SDK and `@google/genai`).

mod support;

use std::time::{Duration, Instant};

use pith::llm::{LlmRequest, Model, ModelCost, StreamEvent};
use pith::message::{
    AssistantMessage, Content, StopReason, TextContent, ThinkingContent, ToolCall,
};
use serde_json::{Value, json};
use support::fake_llm::{FakeLlm, Reply};
use support::free_port;
use support::streams::{self, collect, final_message, fixture_text as fixture, user};

const UNICODE: &str = "héllo 😀 中文\u{2028}x";

fn responses_model(base: &str) -> Model {
    Model {
        id: "fake-resp-model".into(),
        name: "Fake Responses Model".into(),
        api: "openai-responses".into(),
        provider: "fake-openai".into(),
        base_url: format!("{base}/v1"),
        reasoning: false,
        input: vec!["text".into()],
        cost: ModelCost {
            input: 2.0,
            output: 8.0,
            cache_read: 0.5,
            cache_write: 0.0,
            tiers: None,
        },
        context_window: 128_000,
        max_tokens: 16384,
        headers: None,
        compat: None,
        ..Default::default()
    }
}

fn google_model(base: &str) -> Model {
    Model {
        id: "gemini-2.5-flash".into(),
        name: "Fake Gemini".into(),
        api: "google-generative-ai".into(),
        provider: "fake-google".into(),
        base_url: format!("{base}/v1beta"),
        reasoning: true,
        input: vec!["text".into()],
        cost: ModelCost {
            input: 1.25,
            output: 10.0,
            cache_read: 0.31,
            cache_write: 0.0,
            tiers: None,
        },
        context_window: 1_000_000,
        max_tokens: 65536,
        headers: None,
        compat: None,
        ..Default::default()
    }
}

fn anthropic_model(base: &str) -> Model {
    Model {
        id: "fake-model".into(),
        name: "Fake Model".into(),
        api: "anthropic-messages".into(),
        provider: "fake".into(),
        base_url: base.into(),
        ..responses_model(base)
    }
}

fn completions_model(base: &str) -> Model {
    Model {
        api: "openai-completions".into(),
        ..responses_model(base)
    }
}

fn request(model: Model) -> LlmRequest {
    streams::request(model, vec![user("q")])
}

/// `collect` for the default request (one user message) to `model`.
fn collect_on(model: Model) -> Vec<StreamEvent> {
    collect(request(model))
}

fn done_message(events: &[StreamEvent]) -> &AssistantMessage {
    match events.last() {
        Some(StreamEvent::Done { message }) => message,
        other => panic!("expected Done, got {other:?}"),
    }
}

fn error_text(events: &[StreamEvent]) -> (String, StopReason) {
    match events.last() {
        Some(StreamEvent::Error { message, .. }) => (
            message.error_message.clone().unwrap_or_default(),
            message.stop_reason,
        ),
        other => panic!("expected Error, got {other:?}"),
    }
}

/// A compact name per event, for asserting whole sequences.
fn kinds(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            StreamEvent::Start { .. } => "start".to_string(),
            StreamEvent::TextStart { index } => format!("text_start {index}"),
            StreamEvent::TextDelta { index, .. } => format!("text_delta {index}"),
            StreamEvent::TextEnd { index, .. } => format!("text_end {index}"),
            StreamEvent::ThinkingStart { index, .. } => format!("thinking_start {index}"),
            StreamEvent::ThinkingDelta { index, .. } => format!("thinking_delta {index}"),
            StreamEvent::ThinkingEnd { index, .. } => format!("thinking_end {index}"),
            StreamEvent::ToolCallStart { index, .. } => format!("toolcall_start {index}"),
            StreamEvent::ToolCallDelta { index, .. } => format!("toolcall_delta {index}"),
            StreamEvent::ToolCallEnd { index, .. } => format!("toolcall_end {index}"),
            StreamEvent::Meta { .. } => "meta".to_string(),
            StreamEvent::Done { .. } => "done".to_string(),
            StreamEvent::Error { .. } => "error".to_string(),
        })
        .collect()
}

fn text_deltas(events: &[StreamEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

fn tool_deltas(events: &[StreamEvent], at: usize) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { index, delta } if *index == at => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

fn usage_tokens(m: &AssistantMessage) -> (u64, u64, u64, u64, u64) {
    let u = &m.usage;
    (
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.total_tokens,
    )
}

fn usage_cost(m: &AssistantMessage) -> (f64, f64, f64, f64, f64) {
    let c = &m.usage.cost;
    (c.input, c.output, c.cache_read, c.cache_write, c.total)
}

/// One `event:`/`data:` SSE frame per Responses event.
fn responses_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

// ------------------------------------------------------------------------------------------------
// Shared failure scenarios, run for each API

/// The server closes the connection (no final chunk) after `cut` body bytes.
fn assert_disconnect_is_terminated(model: fn(&str) -> Model, body: String, cut: usize) -> String {
    let srv = FakeLlm::start(vec![
        Reply::sse(body).chunked(16, Duration::ZERO).cut_after(cut),
    ]);
    let ev = collect_on(model(&srv.base_url()));
    assert_eq!(
        error_text(&ev),
        ("terminated".to_string(), StopReason::Error)
    );
    final_message(&ev).text()
}

/// The server goes silent after `at` bytes; the stall timeout ends the stream quickly.
fn assert_stall_times_out(model: fn(&str) -> Model, body: String, at: usize) {
    let srv = FakeLlm::start(vec![
        Reply::sse(body)
            .chunked(32, Duration::ZERO)
            .stall_after(at, Duration::from_secs(4)),
    ]);
    let mut req = request(model(&srv.base_url()));
    req.timeouts.stall = Duration::from_millis(300);
    let t = Instant::now();
    let ev = collect(req);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "stall detected late: {:?}",
        t.elapsed()
    );
    let (msg, stop) = error_text(&ev);
    assert_eq!(msg, "terminated: no data from the provider for 0.3 s");
    assert_eq!(stop, StopReason::Error);
}

/// Cancel after the first text delta while the server stalls: the final Error (aborted) comes
/// within 100 ms and keeps the text received so far.
fn assert_cancel_is_prompt(model: fn(&str) -> Model, body: String, at: usize, prefix: &str) {
    let srv = FakeLlm::start(vec![
        Reply::sse(body)
            .chunked(32, Duration::ZERO)
            .stall_after(at, Duration::from_secs(5)),
    ]);
    streams::assert_cancel_is_prompt(request(model(&srv.base_url())), prefix);
}

/// Each reply is an HTTP error; each stream ends in one lone Error event with `want`.
fn assert_http_errors(model: fn(&str) -> Model, cases: &[(u16, String, String)]) {
    let replies = cases
        .iter()
        .map(|(s, body, _)| Reply::error(*s, body).header("x-should-retry", "false"))
        .collect();
    let srv = FakeLlm::start(replies);
    for (status, _, want) in cases {
        let ev = collect_on(model(&srv.base_url()));
        assert_eq!(ev.len(), 1, "HTTP {status} is a lone Error event");
        assert_eq!(
            error_text(&ev),
            (want.clone(), StopReason::Error),
            "HTTP {status}"
        );
    }
    assert_eq!(srv.requests().len(), cases.len(), "no silent retries");
}

// ------------------------------------------------------------------------------------------------
// OpenAI Responses

#[test]
fn responses_text_events_usage_cost_and_request() {
    let srv = FakeLlm::start(vec![Reply::sse(fixture("openai/responses_text.sse"))]);
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "text_start 0",
            "text_delta 0",
            "text_delta 0",
            "text_delta 0",
            "text_end 0",
            "meta",
            "done"
        ]
    );
    assert_eq!(text_deltas(&ev), ["Hello ", "from the ", "Responses API."]);
    let m = done_message(&ev);
    assert_eq!(
        m.content,
        vec![Content::Text(TextContent {
            text: "Hello from the Responses API.".into(),
            text_signature: Some(r#"{"v":1,"id":"msg_text_1"}"#.into())
        })]
    );
    assert_eq!(m.stop_reason, StopReason::Stop);
    assert_eq!(m.response_id.as_deref(), Some("resp_text_1"));
    assert_eq!(usage_tokens(m), (1000, 12, 0, 0, 1012));
    assert_eq!(usage_cost(m), (0.002, 9.6e-05, 0.0, 0.0, 0.002096));

    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/responses");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(reqs[0].header("x-stainless-retry-count"), Some("0"));
    let body: Value = serde_json::from_str(&reqs[0].body).expect("json body");
    assert_eq!(
        body,
        json!({
            "model": "fake-resp-model",
            "input": [
                {"role": "system", "content": "You are a test."},
                {"role": "user", "content": [{"type": "input_text", "text": "q"}]}
            ],
            "stream": true,
            "store": false,
            "max_output_tokens": 16384
        })
    );
}

#[test]
fn responses_thinking_then_text() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("openai/responses_thinking.sse")).chunked(17, Duration::ZERO),
    ]);
    let mut model = responses_model(&srv.base_url());
    model.reasoning = true;
    let ev = collect_on(model);
    let m = done_message(&ev);
    assert_eq!(m.content.len(), 2);
    let Content::Thinking(t) = &m.content[0] else {
        panic!("thinking first: {:?}", m.content)
    };
    // The reference takes the final thinking text from the finished item's summary parts.
    assert_eq!(t.thinking, "First part.\n\nSecond part.");
    let item: Value =
        serde_json::from_str(t.thinking_signature.as_deref().expect("signature")).expect("json");
    assert_eq!(
        item,
        json!({"id":"rs_think_1","type":"reasoning","summary":[
            {"type":"summary_text","text":"First part."},
            {"type":"summary_text","text":"Second part."}],"encrypted_content":"gAAAA-enc"})
    );
    assert!(ev.contains(&StreamEvent::ThinkingEnd {
        index: 0,
        content: "First part.\n\nSecond part.".into(),
        signature: t.thinking_signature.clone(),
    }));
    let thinking_deltas: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ThinkingDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        thinking_deltas,
        ["First ", "part.", "\n\n", "Second part.", "\n\n"]
    );
    assert_eq!(
        m.content[1].clone(),
        Content::Text(TextContent {
            text: "The answer is 42.".into(),
            text_signature: Some(r#"{"v":1,"id":"msg_think_1"}"#.into())
        })
    );
    // 500 input tokens of which 200 cached.
    assert_eq!(usage_tokens(m), (300, 40, 200, 0, 540));
    assert_eq!(
        usage_cost(m),
        (
            0.0006,
            0.00031999999999999997,
            9.999999999999999e-05,
            0.0,
            0.0010199999999999999
        )
    );
    let body: Value = serde_json::from_str(&srv.requests()[0].body).expect("json");
    assert_eq!(
        body["reasoning"],
        json!({"effort":"medium","summary":"auto"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["input"][0]["role"], "developer");
}

#[test]
fn responses_tool_calls_split_across_reads() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("openai/responses_tools.sse")).chunked(7, Duration::ZERO),
    ]);
    let ev = collect_on(responses_model(&srv.base_url()));
    let m = done_message(&ev);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(
        m.content[0],
        Content::Text(TextContent {
            text: "Running both.".into(),
            text_signature: Some(r#"{"v":1,"id":"msg_tools_1"}"#.into())
        })
    );
    assert_eq!(
        m.tool_calls().cloned().collect::<Vec<_>>(),
        vec![
            ToolCall {
                id: "call_a|fc_a".into(),
                name: "bash".into(),
                arguments: json!({"command": "echo hi"}),
                arguments_error: None,
                thought_signature: None
            },
            ToolCall {
                id: "call_b|fc_b".into(),
                name: "read".into(),
                arguments: json!({"path": "src/main.rs", "limit": 20}),
                arguments_error: None,
                thought_signature: None
            }
        ]
    );
    assert_eq!(tool_deltas(&ev, 1), ["{\"comm", "and\":\"ec", "ho hi\"}"]);
    assert_eq!(
        tool_deltas(&ev, 2),
        ["{\"pa", "th\":\"src/ma", "in.rs\",\"limit\":", "20}"]
    );
    assert!(ev.contains(&StreamEvent::ToolCallStart {
        index: 2,
        id: "call_b|fc_b".into(),
        name: "read".into()
    }));
    let ends = ev
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallEnd { .. }))
        .count();
    assert_eq!(ends, 2);
    assert_eq!(usage_tokens(m), (300, 50, 0, 0, 350));
}

#[test]
fn responses_arguments_done_supplies_the_missing_tail() {
    // Only the first fragment arrives as a delta; `function_call_arguments.done` carries the
    // whole text and the reference emits the rest as one more delta.
    let body = responses_sse(&[
        json!({"type":"response.created","response":{"id":"resp_d"}}),
        json!({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"bash","arguments":""}}),
        json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"command\""}),
        json!({"type":"response.function_call_arguments.done","item_id":"fc_1","arguments":"{\"command\":\"ls -la\"}"}),
        json!({"type":"response.output_item.done","item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"bash","arguments":"{\"command\":\"ls -la\"}"}}),
        json!({"type":"response.completed","response":{"id":"resp_d","status":"completed","usage":{"input_tokens":5,"output_tokens":5,"total_tokens":10}}}),
    ]);
    let srv = FakeLlm::start(vec![Reply::sse(body)]);
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(tool_deltas(&ev, 0), ["{\"command\"", ":\"ls -la\"}"]);
    let m = done_message(&ev);
    assert_eq!(
        m.tool_calls().next().map(|t| t.arguments.clone()),
        Some(json!({"command": "ls -la"}))
    );
    assert_eq!(m.stop_reason, StopReason::ToolUse);
}

#[test]
fn responses_unicode_split_mid_codepoint() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("openai/responses_unicode.sse")).chunked(1, Duration::ZERO),
    ]);
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(text_deltas(&ev), ["héllo ", "😀 中", "文\u{2028}x"]);
    assert_eq!(done_message(&ev).text(), UNICODE);
}

#[test]
fn responses_incomplete_is_length() {
    let srv = FakeLlm::start(vec![Reply::sse(fixture("openai/responses_incomplete.sse"))]);
    let ev = collect_on(responses_model(&srv.base_url()));
    let m = done_message(&ev);
    assert_eq!(
        (m.stop_reason, m.text().as_str()),
        (StopReason::Length, "Cut sh")
    );
}

#[test]
fn responses_service_tier_scales_cost() {
    let text = fixture("openai/responses_text.sse");
    let flex = text.replace("\"service_tier\":\"default\"", "\"service_tier\":\"flex\"");
    let priority = text.replace(
        "\"service_tier\":\"default\"",
        "\"service_tier\":\"priority\"",
    );
    assert_ne!(flex, text);
    let srv = FakeLlm::start(vec![Reply::sse(flex), Reply::sse(priority)]);
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(
        usage_cost(done_message(&ev)),
        (0.001, 4.8e-05, 0.0, 0.0, 0.001048)
    );
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(
        usage_cost(done_message(&ev)),
        (0.004, 0.000192, 0.0, 0.0, 0.004192)
    );
}

#[test]
fn responses_failed_and_error_events() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("openai/responses_failed.sse")),
        Reply::sse(fixture("openai/responses_error_event.sse")),
    ]);
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(
        error_text(&ev),
        (
            "server_error: The model failed.".to_string(),
            StopReason::Error
        )
    );
    assert_eq!(final_message(&ev).text(), "Partial");
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(
        error_text(&ev),
        (
            "Error Code rate_limit_exceeded: Slow down.".to_string(),
            StopReason::Error
        )
    );
}

fn openai_error_body(message: &str) -> String {
    json!({"error":{"message":message,"type":"invalid_request_error","param":null,"code":null}})
        .to_string()
}

#[test]
fn responses_http_errors() {
    let cases: Vec<(u16, String, String)> = [
        (400, "Invalid 'input': empty."),
        (401, "Incorrect API key provided: sk-test."),
        (403, "Project does not have access to model fake-resp-model"),
        (429, "Rate limit reached for requests"),
        (529, "The server is overloaded."),
    ]
    .iter()
    .map(|(s, m)| (*s, openai_error_body(m), format!("{s} {m}")))
    .chain([(500, String::new(), "500 status code (no body)".to_string())])
    .collect();
    assert_http_errors(responses_model, &cases);
}

#[test]
fn responses_connection_refused() {
    let base = format!("http://127.0.0.1:{}", free_port());
    let ev = collect_on(responses_model(&base));
    assert_eq!(ev.len(), 1);
    assert_eq!(
        error_text(&ev),
        ("Connection error.".to_string(), StopReason::Error)
    );
}

#[test]
fn responses_disconnect_mid_stream() {
    let body = fixture("openai/responses_text.sse");
    let second = body.find("from the ").expect("second delta");
    let cut = body[second..].find("event:").expect("next event") + second + 10;
    let text = assert_disconnect_is_terminated(responses_model, body, cut);
    assert_eq!(text, "Hello from the ");
}

#[test]
fn responses_stall_times_out() {
    let body = fixture("openai/responses_text.sse");
    let at = body.find("from the ").expect("delta");
    assert_stall_times_out(responses_model, body, at);
}

#[test]
fn responses_cancel_while_stalled() {
    let body = fixture("openai/responses_text.sse");
    let at = body.find("Responses API.").expect("delta") - 100;
    assert_cancel_is_prompt(responses_model, body, at, "Hello ");
}

// ------------------------------------------------------------------------------------------------
// Google Generative AI

#[test]
fn google_text_events_usage_cost_and_request() {
    let srv = FakeLlm::start(vec![Reply::sse(fixture("google/text.sse"))]);
    let ev = collect_on(google_model(&srv.base_url()));
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "text_start 0",
            "text_delta 0",
            "text_delta 0",
            "text_delta 0",
            "meta",
            "text_end 0",
            "done"
        ]
    );
    assert_eq!(text_deltas(&ev), ["Hello ", "from ", "Gemini."]);
    let m = done_message(&ev);
    assert_eq!(m.content, vec![Content::text("Hello from Gemini.")]);
    assert_eq!(m.stop_reason, StopReason::Stop);
    assert_eq!(m.response_id.as_deref(), Some("g-resp-1"));
    assert_eq!(usage_tokens(m), (1000, 12, 0, 0, 1012));
    assert_eq!(
        usage_cost(m),
        (
            0.00125,
            0.00012000000000000002,
            0.0,
            0.0,
            0.0013700000000000001
        )
    );

    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(reqs[0].header("x-goog-api-key"), Some("sk-test-key"));
    let body: Value = serde_json::from_str(&reqs[0].body).expect("json body");
    assert_eq!(
        body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "q"}]}],
            "systemInstruction": {"parts": [{"text": "You are a test."}], "role": "user"},
            "generationConfig": {
                "maxOutputTokens": 32000,
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 8192}
            }
        })
    );
}

#[test]
fn google_thinking_then_text() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("google/thinking.sse")).chunked(13, Duration::ZERO),
    ]);
    let ev = collect_on(google_model(&srv.base_url()));
    let m = done_message(&ev);
    assert_eq!(
        m.content,
        vec![
            Content::Thinking(ThinkingContent {
                thinking: "Let me think.".into(),
                // Kept from the first part although the second has none.
                thinking_signature: Some("c2lnLW9uZQ==".into()),
                redacted: None
            }),
            Content::text("The answer is 42.")
        ]
    );
    assert_eq!(
        kinds(&ev)[..6],
        [
            "start",
            "thinking_start 0",
            "thinking_delta 0",
            "thinking_delta 0",
            "thinking_end 0",
            "text_start 1"
        ]
    );
    // promptTokenCount 500 of which 200 cached; output = candidates 10 + thoughts 30.
    assert_eq!(usage_tokens(m), (300, 40, 200, 0, 540));
    assert_eq!(
        usage_cost(m),
        (0.000375, 0.0004, 6.2e-05, 0.0, 0.0008370000000000001)
    );
}

#[test]
fn google_tool_calls_split_across_reads() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("google/tools.sse")).chunked(5, Duration::ZERO),
    ]);
    let ev = collect_on(google_model(&srv.base_url()));
    let m = done_message(&ev);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.content[0], Content::text("Running both."));
    let calls: Vec<ToolCall> = m.tool_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    let (name, counter) = calls[0].id.split_once('_').expect("generated id");
    let mut parts = counter.split('_');
    assert_eq!(name, "bash");
    assert!(
        parts
            .next()
            .is_some_and(|ms| ms.parse::<u64>().is_ok_and(|ms| ms > 1_700_000_000_000))
    );
    assert!(parts.next().is_some_and(|n| n.parse::<u64>().is_ok()));
    assert_eq!(
        (
            &calls[0].name[..],
            &calls[0].arguments,
            calls[0].thought_signature.as_deref()
        ),
        ("bash", &json!({"command": "echo hi"}), Some("dG9vbC1zaWc="))
    );
    assert_eq!(
        calls[1],
        ToolCall {
            id: "call_read_9".into(),
            name: "read".into(),
            arguments: json!({"path": "src/main.rs", "limit": 20}),
            arguments_error: None,
            thought_signature: None
        }
    );
    assert_eq!(
        kinds(&ev)[..],
        [
            "start",
            "text_start 0",
            "text_delta 0",
            "text_end 0",
            "toolcall_start 1",
            "toolcall_delta 1",
            "toolcall_end 1",
            "toolcall_start 2",
            "toolcall_delta 2",
            "toolcall_end 2",
            "meta",
            "done"
        ]
    );
    assert_eq!(tool_deltas(&ev, 1), ["{\"command\":\"echo hi\"}"]);
    assert_eq!(
        tool_deltas(&ev, 2),
        ["{\"path\":\"src/main.rs\",\"limit\":20}"]
    );
}

#[test]
fn google_duplicate_call_id_gets_a_fresh_one() {
    let chunk = |id: &str, cmd: &str| {
        format!(
            "data: {}\n\n",
            json!({"candidates":[{"content":{"role":"model","parts":[
                {"functionCall":{"id":id,"name":"bash","args":{"command":cmd}}}]}}]})
        )
    };
    let body = format!(
        "{}{}data: {}\n\n",
        chunk("c1", "a"),
        chunk("c1", "b"),
        json!({"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP"}]})
    );
    let srv = FakeLlm::start(vec![Reply::sse(body)]);
    let ev = collect_on(google_model(&srv.base_url()));
    let ids: Vec<String> = done_message(&ev)
        .tool_calls()
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(ids[0], "c1");
    assert!(ids[1].starts_with("bash_"), "{ids:?}");
}

#[test]
fn google_unicode_split_mid_codepoint() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("google/unicode.sse")).chunked(1, Duration::ZERO),
    ]);
    let ev = collect_on(google_model(&srv.base_url()));
    assert_eq!(text_deltas(&ev), ["héllo ", "😀 中", "文\u{2028}x"]);
    assert_eq!(done_message(&ev).text(), UNICODE);
}

#[test]
fn google_max_tokens_is_length_and_safety_is_an_error() {
    let srv = FakeLlm::start(vec![
        Reply::sse(fixture("google/max_tokens.sse")),
        Reply::sse(fixture("google/safety.sse")),
    ]);
    let ev = collect_on(google_model(&srv.base_url()));
    let m = done_message(&ev);
    assert_eq!(
        (m.stop_reason, m.text().as_str()),
        (StopReason::Length, "Cut sh")
    );
    let ev = collect_on(google_model(&srv.base_url()));
    assert_eq!(
        error_text(&ev),
        ("An unknown error occurred".to_string(), StopReason::Error)
    );
    assert_eq!(final_message(&ev).text(), "Partial");
}

/// Google's error bodies are pretty-printed JSON; `@google/genai` throws an `ApiError` whose
/// message is `JSON.stringify` of the parsed body, which pi uses verbatim.
fn google_error_body(code: u16, message: &str, status: &str) -> String {
    format!(
        "{{\n  \"error\": {{\n    \"code\": {code},\n    \"message\": \"{message}\",\n    \"status\": \"{status}\"\n  }}\n}}\n"
    )
}

#[test]
fn google_http_errors() {
    let cases: Vec<(u16, String, String)> = [
        (
            400,
            "API key not valid. Please pass a valid API key.",
            "INVALID_ARGUMENT",
        ),
        (
            401,
            "Request had invalid authentication credentials.",
            "UNAUTHENTICATED",
        ),
        (
            403,
            "Permission denied on resource project.",
            "PERMISSION_DENIED",
        ),
        (
            429,
            "Resource has been exhausted (e.g. check quota).",
            "RESOURCE_EXHAUSTED",
        ),
        (500, "An internal error has occurred.", "INTERNAL"),
        (529, "The model is overloaded.", "UNAVAILABLE"),
    ]
    .iter()
    .map(|(s, m, st)| {
        (
            *s,
            google_error_body(*s, m, st),
            json!({"error":{"code":s,"message":m,"status":st}}).to_string(),
        )
    })
    .collect();
    assert_http_errors(google_model, &cases);
}

#[test]
fn google_connection_refused() {
    // `@google/genai` calls fetch directly; undici's failure is `TypeError: fetch failed`.
    let base = format!("http://127.0.0.1:{}", free_port());
    let ev = collect_on(google_model(&base));
    assert_eq!(ev.len(), 1);
    assert_eq!(
        error_text(&ev),
        ("fetch failed".to_string(), StopReason::Error)
    );
}

#[test]
fn google_disconnect_mid_stream() {
    let body = fixture("google/text.sse");
    let second = body.find("from ").expect("second chunk");
    let cut = body[second..].find("data:").expect("third chunk") + second + 10;
    let text = assert_disconnect_is_terminated(google_model, body, cut);
    assert_eq!(text, "Hello from ");
}

#[test]
fn google_stall_times_out() {
    let body = fixture("google/text.sse");
    let at = body.find("from ").expect("chunk");
    assert_stall_times_out(google_model, body, at);
}

#[test]
fn google_cancel_while_stalled() {
    let body = fixture("google/text.sse");
    let at = body.find("Gemini.").expect("chunk") - 100;
    assert_cancel_is_prompt(google_model, body, at, "Hello ");
}

// ------------------------------------------------------------------------------------------------
// 403 on the two other APIs

#[test]
fn anthropic_and_completions_403() {
    let anthropic = json!({"type":"error","error":{"type":"permission_error",
        "message":"Your API key does not have permission to use the specified resource."}})
    .to_string();
    assert_http_errors(
        anthropic_model,
        &[(403, anthropic.clone(), format!("403 {anthropic}"))],
    );
    assert_http_errors(
        completions_model,
        &[(
            403,
            openai_error_body("Project does not have access to model fake-resp-model"),
            "403 Project does not have access to model fake-resp-model".to_string(),
        )],
    );
}

#[test]
fn responses_disconnect_inside_tool_call_keeps_partial_arguments() {
    let body = fixture("openai/responses_tools.sse");
    let at = body.find("th\\\":\\\"src/ma").expect("second fragment");
    let cut = body[at..].find("event:").expect("next event") + at;
    let srv = FakeLlm::start(vec![
        Reply::sse(body).chunked(1, Duration::ZERO).cut_after(cut),
    ]);
    let ev = collect_on(responses_model(&srv.base_url()));
    assert_eq!(
        error_text(&ev),
        ("terminated".to_string(), StopReason::Error)
    );
    let calls: Vec<Value> = final_message(&ev)
        .tool_calls()
        .map(|t| t.arguments.clone())
        .collect();
    assert_eq!(
        calls,
        vec![json!({"command": "echo hi"}), json!({"path": "src/ma"})]
    );
}
