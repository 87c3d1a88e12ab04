//! `--tools`, `--no-tools`, `--system-prompt` and `--append-system-prompt` as the model sees them.

mod support;

use serde_json::{Value, json};
use support::anthropic::text_sse;
use support::fake_llm::Reply;
use support::frames::{request_body, tool_names};
use support::{fake_rpc, fake_world};

fn first_request(extra: &[&str]) -> Value {
    let (w, llm) = fake_world(vec![Reply::sse(text_sse(1, &["ok"]))]);
    let mut p = w.spawn(&fake_rpc(&[&["--no-session"], extra].concat()));
    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    p.recv_until(|v| v["type"] == "agent_settled");
    request_body(&llm, 0)
}

fn system_text(body: &Value) -> String {
    body["system"][0]["text"].as_str().unwrap_or("").to_string()
}

#[test]
fn default_tools_are_read_bash_edit_write() {
    let body = first_request(&[]);
    assert_eq!(tool_names(&body), ["read", "bash", "edit", "write"]);
}

#[test]
fn tools_flag_chooses_and_orders_the_tools() {
    let body = first_request(&["--tools", "ls,grep,read"]);
    assert_eq!(tool_names(&body), ["ls", "grep", "read"]);
    let sys = system_text(&body);
    assert!(
        sys.contains("Available tools:\n- ls: List directory contents\n- grep: "),
        "{sys}"
    );
    assert!(
        sys.contains("Use read to examine files instead of cat or sed."),
        "{sys}"
    );
    assert!(!sys.contains("bash"), "{sys}");
}

#[test]
fn no_tools_sends_none() {
    let body = first_request(&["--no-tools"]);
    assert!(
        body.get("tools").is_none() || tool_names(&body).is_empty(),
        "{body}"
    );
    assert!(system_text(&body).contains("Available tools:\n(none)\n"));
}

#[test]
fn custom_and_appended_system_prompt() {
    let body = first_request(&[
        "--system-prompt",
        "You are terse.",
        "--append-system-prompt",
        "Answer in French.",
    ]);
    let sys = system_text(&body);
    assert!(
        sys.starts_with("You are terse.\n\nAnswer in French.\nCurrent date: "),
        "{sys}"
    );
}
