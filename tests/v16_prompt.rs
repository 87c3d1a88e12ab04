//! `--compat 1.6` (pi 1.6.0) against `--compat 0.87`, driven through the real `pith` binary over
//! pipes: the system prompt's texts, `get_commands`' built-ins, request headers, thinking after a
//! model switch, compaction's summary requests, the wider retryable errors, `cacheWarming` and
//! the signal exit codes. Each test also checks that 0.87 is unchanged.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text, text_reply, thinking};
use support::cwd_of;
use support::fake_llm::Reply;
use support::frames::{request_body, run};
use support::node::platform_arch as node_platform_arch;
use support::spawn_compat as spawn;
use support::{Pith, fake_rpc_on, fake_world};

const PROMPT_16: &str = "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.\n\n<tools>\n- read: Read file contents\n- bash: Execute bash commands (ls, grep, find, etc.)\n- edit: Make precise file edits with exact text replacement, including multiple disjoint edits in one call\n- write: Create or overwrite files\n\nAdditional tools may be available.\n</tools>\n\n<rules>\n- Use bash for file operations like ls, rg, find\n- Use read to examine files instead of cat or sed.\n- You can inspect PI_* environment variables for current model and session details.\n- Use edit for targeted changes. Batch changes to one file in a single call.\n- Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.\n- Use write only for new files or complete rewrites.\n- Be concise in your responses\n- Show file paths clearly when working with files\n</rules>\n\n<cwd>\n";

#[test]
fn the_system_prompt_has_pi_1_6_texts() {
    let (w, srv) = fake_world(vec![text_reply(1, &["Hi."]), text_reply(2, &["Hi."])]);
    let mut p = spawn(&w, "1.6", &[]);
    let frames = run(&mut p, "p1", "Hello");
    let system = request_body(&srv, 0)["system"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(system, format!("{PROMPT_16}{}\n</cwd>", cwd_of(&w)));
    // The system message in the transcript carries the same sections.
    let declared = frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .unwrap();
    let sections = &declared["message"]["sections"];
    assert_eq!(
        sections["preamble"],
        "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code."
    );
    assert!(
        sections["tools"]
            .as_str()
            .unwrap()
            .ends_with("\n\nAdditional tools may be available.\n</tools>")
    );
    // 0.87 unchanged.
    let mut p = spawn(&w, "0.87", &[]);
    run(&mut p, "p1", "Hello");
    let old = request_body(&srv, 1)["system"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(old.starts_with("You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, executing commands, editing code, and writing new files.\n\n<tools>\n"));
    assert!(old.contains("\n\nIn addition to the tools above, you may have access to other custom tools depending on the project.\n</tools>"));
    assert!(old.contains("- Use edit for precise changes (edits[].oldText must match exactly)\n"));
    assert!(!old.contains("Additional tools may be available."));
}

fn builtins(p: &mut Pith) -> Value {
    let r = p.call(json!({"type":"get_commands"}), "gc");
    r["data"]["commands"].clone()
}

#[test]
fn get_commands_lists_the_built_in_llama_and_mcp() {
    let (w, _srv) = fake_world(Vec::new());
    let mut p = spawn(&w, "1.6", &[]);
    assert_eq!(
        builtins(&mut p),
        json!([
            {"name":"llama","description":"Manage llama.cpp router models","source":"extension",
             "sourceInfo":{"path":"builtin:llama.cpp","source":"builtin","scope":"temporary","origin":"top-level"}},
            {"name":"mcp","description":"Manage MCP servers: sign in, reconnect, enable or disable, and change exposure","source":"extension",
             "sourceInfo":{"path":"builtin:mcp","source":"builtin","scope":"temporary","origin":"top-level"}}
        ])
    );
    let mut p = spawn(&w, "1.6", &["--no-mcp"]);
    let list = builtins(&mut p);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["name"], "llama");
    // 0.87: its inline llama only, with or without --no-mcp.
    for extra in [&[][..], &["--no-mcp"][..]] {
        let mut p = spawn(&w, "0.87", extra);
        assert_eq!(
            builtins(&mut p),
            json!([
                {"name":"llama","description":"Manage llama.cpp router models","source":"extension",
                 "sourceInfo":{"path":"<inline:llama.cpp>","source":"inline","scope":"temporary","origin":"top-level"}}
            ])
        );
    }
}

#[test]
fn request_headers_of_pi_1_6() {
    let (platform, arch) = node_platform_arch();
    let ua = format!("pi/1.6.0 ({platform}; node/v22.23.3; {arch})");
    let (w, srv) = fake_world(vec![
        text_reply(1, &["Hi."]),
        text_reply(2, &["Hi."]),
        Reply::error(400, r#"{"error":{"message":"no"}}"#),
        Reply::error(400, r#"{"error":{"message":"no"}}"#),
    ]);
    let mut p = spawn(&w, "1.6", &[]);
    run(&mut p, "p1", "Hello");
    let mut p = spawn(&w, "0.87", &[]);
    run(&mut p, "p1", "Hello");
    let reqs = srv.requests();
    assert_eq!(reqs[0].header("user-agent"), Some(ua.as_str()));
    assert_eq!(
        reqs[0].header("x-stainless-package-version"),
        Some("0.129.0")
    );
    assert_eq!(
        reqs[0].header("x-stainless-runtime-version"),
        Some("v22.23.3")
    );
    let old = reqs[1].header("user-agent").unwrap();
    assert!(old.starts_with(&format!("pi ({platform} ")), "{old}");
    assert_eq!(
        reqs[1].header("x-stainless-package-version"),
        Some("0.124.0")
    );
    // OpenAI completions.
    for compat in ["1.6", "0.87"] {
        let mut p = w.spawn(&fake_rpc_on(
            "fake-oai-model",
            &[
                "--no-session",
                "--compat",
                compat,
                "--provider",
                "fake-openai",
            ],
        ));
        run(&mut p, "p1", "Hello");
    }
    let reqs = srv.requests();
    assert_eq!(reqs[2].header("user-agent"), Some(ua.as_str()));
    assert_eq!(
        reqs[2].header("x-stainless-package-version"),
        Some("7.59.0")
    );
    assert!(reqs[3].header("user-agent").unwrap().starts_with("pi ("));
    assert_eq!(
        reqs[3].header("x-stainless-package-version"),
        Some("6.40.0")
    );
}

#[test]
fn thinking_of_another_model_is_dropped_and_replayed_on_its_own() {
    for compat in ["1.6", "0.87"] {
        let (w, srv) = fake_world(vec![
            Sse::numbered(1).reply(&[
                thinking(&["Deep thought."], "sig-1"),
                text(&["Answer one."]),
            ]),
            text_reply(2, &["Answer two."]),
            text_reply(3, &["Answer three."]),
        ]);
        let mut p = spawn(&w, compat, &[]);
        run(&mut p, "p1", "One");
        let r = p.call(
            json!({"type":"set_model","provider":"fake","modelId":"fake-model-2"}),
            "m1",
        );
        assert_eq!(r["success"], true, "{r}");
        run(&mut p, "p2", "Two");
        let r = p.call(
            json!({"type":"set_model","provider":"fake","modelId":"fake-model"}),
            "m2",
        );
        assert_eq!(r["success"], true, "{r}");
        run(&mut p, "p3", "Three");
        let other = &request_body(&srv, 1)["messages"][1]["content"];
        let texts: Vec<&Value> = other
            .as_array()
            .unwrap()
            .iter()
            .map(|b| &b["text"])
            .collect();
        if compat == "1.6" {
            assert_eq!(texts, [&json!("Answer one.")], "{other}");
        } else {
            assert_eq!(
                texts,
                [&json!("Deep thought."), &json!("Answer one.")],
                "{other}"
            );
        }
        // Back on the model that wrote it: thinking with its signature.
        let own = &request_body(&srv, 2)["messages"][1]["content"][0];
        assert_eq!(own["type"], "thinking", "{own}");
        assert_eq!(own["thinking"], "Deep thought.");
        assert_eq!(own["signature"], "sig-1");
    }
}

#[test]
fn summaries_leave_thinking_out_and_ask_for_the_model_limit() {
    for compat in ["1.6", "0.87"] {
        let (w, srv) = fake_world(vec![
            Sse::numbered(1).reply(&[thinking(&["Pondering."], "sig-1"), text(&["First reply."])]),
            text_reply(2, &["Second reply."]),
            text_reply(3, &["## Goal\nSummary."]),
        ]);
        w.write_agent_file(
            "settings.json",
            r#"{"compaction":{"keepRecentTokens":5,"reserveTokens":1000}}"#,
        );
        let mut p = spawn(&w, compat, &["--thinking", "off"]);
        run(&mut p, "p1", "First message");
        run(&mut p, "p2", "Second message");
        let r = p.call(json!({"type":"compact"}), "c1");
        assert_eq!(r["success"], true, "{r}");
        let body = request_body(&srv, 2);
        let conversation = body["messages"][0]["content"][0]["text"].as_str().unwrap();
        assert!(
            conversation.contains("[Assistant]: First reply."),
            "{conversation}"
        );
        if compat == "1.6" {
            assert!(
                !conversation.contains("[Assistant thinking]"),
                "{conversation}"
            );
            assert_eq!(body["max_tokens"], 16384);
        } else {
            assert!(conversation.contains("[Assistant thinking]: Pondering."));
            assert_eq!(body["max_tokens"], 800);
        }
    }
}

#[test]
fn connection_closed_is_retried_under_1_6_only() {
    let closed = r#"{"type":"error","error":{"type":"api_error","message":"Connection closed."}}"#;
    for compat in ["1.6", "0.87"] {
        let (w, srv) = fake_world(vec![Reply::error(400, closed), text_reply(2, &["Back."])]);
        w.write_agent_file("settings.json", r#"{"retry":{"baseDelayMs":10}}"#);
        let mut p = spawn(&w, compat, &[]);
        let frames = run(&mut p, "p1", "Hello");
        let retried = frames.iter().any(|f| f["type"] == "auto_retry_start");
        assert_eq!(retried, compat == "1.6", "{compat}: {frames:?}");
        assert_eq!(srv.requests().len(), if compat == "1.6" { 2 } else { 1 });
    }
}

#[test]
fn cache_warming_is_accepted_with_a_note_when_asked_for() {
    for (setting, noted) in [
        (r#"{"cacheWarming":"idle"}"#, true),
        (r#"{"cacheWarming":"streaming"}"#, true),
        (r#"{"cacheWarming":"off"}"#, false),
        ("{}", false),
    ] {
        let (w, _srv) = fake_world(Vec::new());
        w.write_agent_file("settings.json", setting);
        let mut p = spawn(&w, "1.6", &[]);
        let r = p.call(json!({"type":"get_state"}), "s1");
        assert_eq!(r["success"], true);
        p.close_stdin();
        let status = p.wait(Duration::from_secs(10));
        assert!(status.success());
        // The stderr reader may lag the exit a little.
        std::thread::sleep(Duration::from_millis(100));
        let stderr = p.stderr_lines();
        let note = stderr.iter().any(|l| l.contains("cacheWarming"));
        assert_eq!(note, noted, "{setting}: {stderr:?}");
        if noted {
            assert!(stderr.iter().any(|l| l.starts_with("pith: cacheWarming \"")
                && l.ends_with(
                    "is not honoured: pith sends no cache-warming requests (it acts as \"off\")"
                )));
        }
    }
}

#[test]
fn sigterm_and_sighup_shut_down_with_143_and_129() {
    use std::os::unix::process::ExitStatusExt;
    for (sig, code) in [("TERM", 143), ("HUP", 129)] {
        let (w, _srv) = fake_world(Vec::new());
        let mut p = spawn(&w, "1.6", &[]);
        let r = p.call(json!({"type":"get_state"}), "s1");
        assert_eq!(r["success"], true);
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &p.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let status = p.wait(Duration::from_secs(10));
        assert_eq!(
            status.code(),
            Some(code),
            "{sig}: {status:?} {:?}",
            status.signal()
        );
    }
}
