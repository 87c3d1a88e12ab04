//! Differences from pi 1.6.0 found by differential testing (scenarios outside the shared set,
//! run through pi 1.6.0 and pith `--compat 1.6`), each with the older versions where pi 0.73.1 /
//! 0.87.1 do the same or differ:
//! - a thinking block cut off before its signature keeps `thinkingSignature: ""` (every version);
//! - RPC `bash` results that finished during a run enter the context when the run ends (0.87+);
//! - a `--tools` pattern activates the registered tools it matches (1.6);
//! - the skills listing's sentence on relative paths (1.6);
//! - a split turn's prefix summary request carries the custom instructions (1.6);
//! - a transport failure's cause in the error message (1.6);
//! - `usage.cost.totalFromProvider` only once the provider's usage arrived (1.6).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text, text_sse, thinking, tool_call};
use support::fake_llm::Reply;
use support::frames::{
    message_ends as message_end, request_body, request_messages,
    request_tool_names as request_tools, run,
};
use support::{World, fake_rpc, fake_world};

#[test]
fn a_thinking_block_cut_off_keeps_an_empty_signature_in_every_version() {
    for compat in ["0.73", "0.87", "1.6"] {
        let slow = Sse::numbered(1)
            .reply(&[thinking(&["Pondering", " deeply", " more"], "sig-1")])
            .paced(Duration::from_millis(100));
        let (w, llm) = fake_world(vec![slow, Reply::sse(text_sse(2, &["Next."]))]);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        p.send(json!({"id":"p1","type":"prompt","message":"think"}));
        p.recv_until(|v| {
            v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "thinking_delta"
        });
        p.send(json!({"id":"a1","type":"abort"}));
        let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "a1");
        let a = message_end(&frames, "assistant")[0];
        assert_eq!(a["stopReason"], "aborted", "{compat}");
        assert_eq!(
            a["content"],
            json!([{"type":"thinking","thinking":"Pondering","thinkingSignature":""}]),
            "{compat}"
        );
        // The aborted reply is not sent again (once the one-thread fake server has finished
        // writing the abandoned stream).
        std::thread::sleep(Duration::from_millis(1200));
        while p.try_recv(Duration::from_millis(100)).is_some() {}
        let frames = run(&mut p, "p2", "again");
        assert_eq!(llm.requests().len(), 2, "{compat}: {frames:?}");
        assert_eq!(
            request_messages(&llm, 1),
            json!([
                {"role":"user","content":[{"type":"text","text":"think"}]},
                {"role":"user","content":[{"type":"text","text":"again"}]}
            ]),
            "{compat}"
        );
    }
}

/// A slow reply; during it an RPC `bash`; after the run another `bash`, then a prompt: where
/// the two executions sit in the next request.
fn bash_during_run(compat: &str) -> Value {
    let slow = Sse::numbered(1)
        .reply(&[text(&["Slow", " words", " here"])])
        .paced(Duration::from_millis(150));
    let (w, llm) = fake_world(vec![slow, Reply::sse(text_sse(2, &["Next."]))]);
    let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
    p.send(json!({"id":"p1","type":"prompt","message":"stream"}));
    p.recv_until(|v| v["type"] == "message_update");
    let r = p.call(json!({"type":"bash","command":"echo during"}), "b1");
    assert_eq!(r["success"], true, "{r}");
    p.recv_until(|v| v["type"] == "agent_end");
    // Let the run settle (whatever it emits after agent_end).
    while p.try_recv(Duration::from_millis(300)).is_some() {}
    let r = p.call(json!({"type":"bash","command":"echo after"}), "b2");
    assert_eq!(r["success"], true, "{r}");
    p.send(json!({"id":"p2","type":"prompt","message":"next"}));
    p.recv_until(|v| v["type"] == "agent_end");
    let texts: Vec<Value> = request_messages(&llm, 1)
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    Value::Array(texts)
}

#[test]
fn rpc_bash_results_of_a_run_enter_the_context_when_it_ends() {
    let during = "Ran `echo during`\n```\nduring\n\n```";
    let after = "Ran `echo after`\n```\nafter\n\n```";
    for compat in ["0.87", "1.6"] {
        assert_eq!(
            bash_during_run(compat),
            json!(["stream", "Slow words here", during, after, "next"]),
            "{compat}"
        );
    }
    // pi 0.73.1 holds them until the next prompt.
    assert_eq!(
        bash_during_run("0.73"),
        json!(["stream", "Slow words here", after, during, "next"])
    );
}

#[test]
fn a_tools_pattern_activates_the_tools_it_matches() {
    for (tools, exclude, want) in [
        ("re*,bash,f*", Some("bash"), vec!["read", "find"]),
        ("l*,gr*,read", None, vec!["read", "grep", "ls"]),
        ("ls,read", None, vec!["ls", "read"]),
    ] {
        let (w, llm) = fake_world(vec![Reply::sse(text_sse(1, &["ok"]))]);
        let mut args = vec!["--compat", "1.6", "--no-session", "--tools", tools];
        if let Some(x) = exclude {
            args.extend(["--exclude-tools", x]);
        }
        let mut p = w.spawn(&fake_rpc(&args));
        run(&mut p, "p1", "hi");
        assert_eq!(request_tools(&llm, 0), want, "--tools {tools}");
    }
    // 0.87: a name is a name.
    let (w, llm) = fake_world(vec![Reply::sse(text_sse(1, &["ok"]))]);
    let mut p = w.spawn(&fake_rpc(&[
        "--compat",
        "0.87",
        "--no-session",
        "--tools",
        "re*,bash",
    ]));
    run(&mut p, "p1", "hi");
    assert_eq!(request_tools(&llm, 0), ["bash"]);
}

#[test]
fn the_skills_listing_has_the_versions_sentence_on_paths() {
    for (compat, sentence) in [
        (
            "1.6",
            "Resolve relative paths against the skill's directory (parent of SKILL.md). Use absolute paths in tool calls.",
        ),
        (
            "0.87",
            "When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.",
        ),
    ] {
        let (w, _llm) = fake_world(vec![Reply::sse(text_sse(1, &["ok"]))]);
        std::fs::create_dir_all(w.agent_dir().join("skills/greeter")).unwrap();
        w.write_agent_file(
            "skills/greeter/SKILL.md",
            "---\nname: greeter\ndescription: Greets people politely\n---\n# Greeter\n",
        );
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let frames = run(&mut p, "p1", "hi");
        let system = message_end(&frames, "system")[0];
        let location = w.agent_dir().join("skills/greeter/SKILL.md");
        let want = format!(
            "<skills>\nThe following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\n{sentence}\n\n<available_skills>\n  <skill>\n    <name>greeter</name>\n    <description>Greets people politely</description>\n    <location>{}</location>\n  </skill>\n</available_skills>\n</skills>",
            location.display()
        );
        assert_eq!(system["sections"]["skills"], want.as_str(), "{compat}");
    }
}

/// Two prompts (the second's reply calls a tool), then `compact` with custom instructions and
/// a tiny `keepRecentTokens`: the second turn is split. The turn prefix summary request's text.
fn turn_prefix_request(compat: &str) -> String {
    let (w, llm) = fake_world(vec![
        Reply::sse(text_sse(1, &["First reply."])),
        Sse::numbered(2).reply(&[
            text(&["Second reply."]),
            tool_call("toolu_x", "bash", &["{\"command\":\"echo x\"}"]),
        ]),
        Reply::sse(text_sse(3, &["After tool."])),
        Reply::sse(text_sse(4, &["## Goal\nHistory."])),
        Reply::sse(text_sse(5, &["## Original Request\nPrefix."])),
    ]);
    w.write_agent_file("settings.json", r#"{"compaction":{"keepRecentTokens":5}}"#);
    let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
    run(&mut p, "p1", "First message");
    run(&mut p, "p2", "Second message");
    let r = p.call(
        json!({"type":"compact","customInstructions":"Keep the numbers"}),
        "c1",
    );
    assert_eq!(r["success"], true, "{r}");
    let body = request_body(&llm, 4);
    body["messages"][0]["content"][0]["text"]
        .as_str()
        .expect("text")
        .to_string()
}

#[test]
fn a_split_turns_prefix_summary_keeps_the_custom_instructions() {
    let t = turn_prefix_request("1.6");
    assert!(
        t.starts_with("# Conversation\n[User]: Second message"),
        "{t}"
    );
    assert!(
        t.ends_with(
            "Do not infer or recreate later messages.\n\nAdditional focus: Keep the numbers"
        ),
        "{t}"
    );
    let t = turn_prefix_request("0.87");
    assert!(
        t.ends_with("Do not infer or recreate later messages."),
        "{t}"
    );
}

fn error_message(frames: &[Value]) -> Value {
    message_end(frames, "assistant")[0]["errorMessage"].clone()
}

/// An Anthropic stream closed by the server in the middle of its text.
fn anthropic_cut_reply() -> Reply {
    let body = Sse::numbered(1).body(&[text(&["Half", " way", " there"])]);
    let at = body.find(" way").expect("second delta");
    Reply::sse(body).chunked(16, Duration::ZERO).cut_after(at)
}

#[test]
fn a_cut_stream_says_undicis_cause() {
    for (compat, want) in [
        ("1.6", "terminated: other side closed (UND_ERR_SOCKET)"),
        ("0.87", "terminated"),
    ] {
        let (w, _llm) = fake_world(vec![anthropic_cut_reply()]);
        w.write_agent_file("settings.json", r#"{"retry":{"enabled":false}}"#);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let frames = run(&mut p, "p1", "cut");
        assert_eq!(error_message(&frames), want, "{compat}");
    }
}

#[test]
fn a_refused_connection_names_the_address() {
    let port = support::free_port();
    for (compat, want) in [
        (
            "1.6",
            format!("Connection error.: connect ECONNREFUSED 127.0.0.1:{port}"),
        ),
        ("0.87", "Connection error.".to_string()),
    ] {
        let w = World::new();
        w.fake_models(port);
        w.write_agent_file("settings.json", r#"{"retry":{"enabled":false}}"#);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let frames = run(&mut p, "p1", "hello");
        assert_eq!(error_message(&frames), want.as_str(), "{compat}");
    }
}

/// An OpenAI-compatible stream that sends text and is cut before its usage chunk.
fn openai_cut_reply() -> Reply {
    let chunk = |delta: Value| {
        format!(
            "data: {}\n\n",
            json!({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"fake-oai-model",
                "choices":[{"index":0,"delta":delta,"finish_reason":null}]})
        )
    };
    let body =
        chunk(json!({"role":"assistant","content":"Half"})) + &chunk(json!({"content":" way"}));
    let len = body.len();
    Reply::sse(body + &chunk(json!({"content":" never"})))
        .chunked(16, Duration::ZERO)
        .cut_after(len)
}

#[test]
fn the_cost_is_marked_as_pis_only_once_usage_arrived() {
    // OpenAI-compatible: usage comes last; a stream cut before it has no computed cost.
    let (w, _llm) = fake_world(vec![openai_cut_reply()]);
    w.write_agent_file("settings.json", r#"{"retry":{"enabled":false}}"#);
    let mut p = w.spawn(&[
        "--mode",
        "rpc",
        "--provider",
        "fake-openai",
        "--model",
        "fake-oai-model",
        "--compat",
        "1.6",
        "--no-session",
    ]);
    let frames = run(&mut p, "p1", "cut");
    let a = message_end(&frames, "assistant")[0];
    assert_eq!(a["stopReason"], "error");
    assert_eq!(
        a["usage"]["cost"],
        json!({"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0})
    );
    // Anthropic: message_start carries usage, so the streaming start and a cut reply have it.
    let (w, _llm) = fake_world(vec![anthropic_cut_reply()]);
    w.write_agent_file("settings.json", r#"{"retry":{"enabled":false}}"#);
    let mut p = w.spawn(&fake_rpc(&["--compat", "1.6", "--no-session"]));
    let frames = run(&mut p, "p1", "cut");
    let start = frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["stopReason"] == "pending")
        .expect("streaming start");
    assert_eq!(
        start["message"]["usage"]["cost"]["totalFromProvider"],
        false
    );
    let a = message_end(&frames, "assistant")[0];
    assert_eq!(a["stopReason"], "error");
    assert_eq!(a["usage"]["cost"]["totalFromProvider"], false);
}
