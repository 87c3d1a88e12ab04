//! `--compat 0.87` against the default `--compat 0.73`, driven through the real `pith` binary over
//! pipes: what each version emits (stream shapes, system messages, `willRetry`, `context_edit`,
//! texts, compaction results, request headers and prompts), and the commands and flags both
//! accept. Where the versions differ a test runs both and checks that 0.73 shows none of 0.87's
//! shapes.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text, text_reply, thinking, tool_call};
use support::cwd_of;
use support::fake_llm::{FakeLlm, Reply};
use support::frames::{keys, kinds, messages, request_body, run};
use support::spawn_compat as spawn;
use support::{World, fake_rpc, fake_world};

const PREAMBLE: &str = "You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, executing commands, editing code, and writing new files.";
const OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

/// Thinking, text and a bash call in one message, then a text answer.
fn tool_turns() -> Vec<Reply> {
    vec![
        Sse::numbered(1).reply(&[
            thinking(&["Let me ", "think."], "sig-1"),
            text(&["Running it."]),
            tool_call("toolu_s1", "bash", &["{\"command\":", "\"echo hi\"}"]),
        ]),
        text_reply(2, &["Done", "."]),
    ]
}

/// The sections pith declares for the four default tools in `cwd`.
fn default_sections(cwd: &str) -> Value {
    json!({
        "preamble": PREAMBLE,
        "tools": "<tools>\n- read: Read file contents\n- bash: Execute bash commands (ls, grep, find, etc.)\n- edit: Make precise file edits with exact text replacement, including multiple disjoint edits in one call\n- write: Create or overwrite files\n\nIn addition to the tools above, you may have access to other custom tools depending on the project.\n</tools>",
        "rules": "<rules>\n- Use bash for file operations like ls, rg, find\n- Use read to examine files instead of cat or sed.\n- You can inspect PI_* environment variables for current model and session details.\n- Use edit for precise changes (edits[].oldText must match exactly)\n- When changing multiple separate locations in one file, use one edit call with multiple entries in edits[] instead of multiple edit calls\n- Each edits[].oldText is matched against the original file, not after earlier edits are applied. Do not emit overlapping or nested edits. Merge nearby changes into one edit.\n- Keep edits[].oldText as small as possible while still being unique in the file. Do not pad with large unchanged regions.\n- Use write only for new files or complete rewrites.\n- Be concise in your responses\n- Show file paths clearly when working with files\n</rules>",
        "cwd": format!("<cwd>\n{cwd}\n</cwd>"),
    })
}

/// The usage pith reports for the fake model at `output` tokens (100 in).
fn usage(output: u64, v087: bool) -> Value {
    let mut u = json!({"input":100,"output":output,"cacheRead":0,"cacheWrite":0,
        "totalTokens":100 + output,
        "cost":{"input":0.00030000000000000003,"output":15.0 / 1_000_000.0 * output as f64,
                "cacheRead":0,"cacheWrite":0,"total":0.00030000000000000003 + 15.0 / 1_000_000.0 * output as f64}});
    if v087 {
        u["cacheWrite1h"] = json!(0);
    }
    u
}

#[test]
fn stream_shapes_under_087() {
    let (w, _srv) = fake_world(tool_turns());
    let mut p = spawn(&w, "0.87", &[]);
    let frames = run(&mut p, "p1", "Run echo hi");
    assert_eq!(
        kinds(&frames),
        [
            "response:prompt",
            "agent_start",
            "turn_start",
            "message_start:system",
            "message_end:system",
            "message_start:user",
            "message_end:user",
            "message_start:assistant",
            "message_end:assistant",
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_update",
            "tool_execution_end",
            "message_start:toolResult",
            "message_end:toolResult",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    // The system message: the sectioned prompt and the four tools, before the user message.
    let sys = &frames[3]["message"];
    assert_eq!(
        keys(sys),
        ["role", "content", "sections", "timestamp", "toolsAdded"]
    );
    assert_eq!(sys["content"], "");
    assert_eq!(sys["sections"], default_sections(&cwd_of(&w)));
    assert_eq!(
        keys(&sys["sections"]),
        ["preamble", "tools", "rules", "cwd"]
    );
    let tools: Vec<&str> = sys["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "bash", "edit", "write"]);
    let bash = &sys["toolsAdded"][1];
    assert_eq!(
        keys(bash),
        ["name", "description", "parameters", "constrainedSampling"]
    );
    assert_eq!(
        bash["parameters"]["properties"]["command"]["description"],
        "Shell command to execute"
    );
    assert_eq!(
        bash["constrainedSampling"],
        json!({"type":"json_schema","strict":"prefer"})
    );
    assert_eq!(frames[3], frames[4].clone().tap_type("message_start"));
    // The assistant message starts `pending`; updates are delta-only with the live usage.
    let start = frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(start["message"]["stopReason"], "pending");
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "message_update")
        .collect();
    assert_eq!(
        *updates[0],
        json!({"type":"message_update","usage":usage(1, true),
               "assistantMessageEvent":{"type":"thinking_start","contentIndex":0}})
    );
    assert_eq!(keys(updates[0]), ["type", "usage", "assistantMessageEvent"]);
    let start = updates
        .iter()
        .find(|u| u["assistantMessageEvent"]["type"] == "toolcall_start")
        .unwrap();
    assert_eq!(
        start["assistantMessageEvent"],
        json!({"type":"toolcall_start","contentIndex":2,"id":"toolu_s1","toolName":"bash"})
    );
    assert!(
        updates
            .iter()
            .all(|u| u.get("message").is_none()
                && u["assistantMessageEvent"].get("partial").is_none())
    );
    // The final messages: rawStopReason, cacheWrite1h.
    let ends: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
        .collect();
    let end = &ends[0]["message"];
    assert_eq!(end["stopReason"], "toolUse");
    assert_eq!(end["rawStopReason"], "tool_use");
    assert_eq!(end["usage"], usage(2, true));
    assert_eq!(
        keys(end),
        [
            "role",
            "content",
            "api",
            "provider",
            "model",
            "usage",
            "stopReason",
            "timestamp",
            "responseId",
            "rawStopReason"
        ]
    );
    assert_eq!(ends[1]["message"]["rawStopReason"], "end_turn");
    // agent_end: the system message is part of the run, willRetry last.
    let agent_end = frames.iter().find(|f| f["type"] == "agent_end").unwrap();
    assert_eq!(keys(agent_end), ["type", "messages", "willRetry"]);
    assert_eq!(agent_end["willRetry"], false);
    assert_eq!(agent_end["messages"][0]["role"], "system");
    // get_messages and messageCount include it.
    let msgs = messages(&mut p);
    assert_eq!(msgs.len(), 5);
    assert_eq!(msgs[0], *sys);
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["messageCount"], 5);
}

#[test]
fn stream_shapes_under_073_have_none_of_087() {
    let (w, _srv) = fake_world(tool_turns());
    let mut p = spawn(&w, "0.73", &[]);
    let frames = run(&mut p, "p1", "Run echo hi");
    let k = kinds(&frames);
    assert!(!k.iter().any(|k| k.contains("system")), "{k:?}");
    assert_eq!(k[3], "message_start:user");
    let start = frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(start["message"]["stopReason"], "stop");
    for f in &frames {
        let line = f.to_string();
        for shape in ["rawStopReason", "cacheWrite1h", "willRetry", "\"pending\""] {
            assert!(!line.contains(shape), "{shape} in {line}");
        }
        if f["type"] == "message_update" {
            assert!(f.get("usage").is_none());
            assert_eq!(f["message"], f["assistantMessageEvent"]["partial"]);
        }
    }
    let start = frames
        .iter()
        .find(|f| f["assistantMessageEvent"]["type"] == "toolcall_start")
        .unwrap();
    assert_eq!(
        keys(&start["assistantMessageEvent"]),
        ["type", "contentIndex", "partial"]
    );
    let end = frames.iter().find(|f| f["type"] == "agent_end").unwrap();
    assert_eq!(keys(end), ["type", "messages"]);
    assert_eq!(messages(&mut p).len(), 4);
}

/// A helper to compare a `message_end` frame with its `message_start`.
trait TapType {
    fn tap_type(self, t: &str) -> Value;
}

impl TapType for Value {
    fn tap_type(mut self, t: &str) -> Value {
        self["type"] = json!(t);
        self
    }
}

#[test]
fn requests_follow_the_version() {
    for (compat, v087) in [("0.87", true), ("0.73", false)] {
        let (w, srv) = fake_world(vec![text_reply(1, &["Hi."])]);
        let mut p = spawn(&w, compat, &[]);
        run(&mut p, "p1", "Hello");
        let body = request_body(&srv, 0);
        let system = body["system"][0]["text"].as_str().unwrap();
        let req = &srv.requests()[0];
        let read = body["tools"][0]["description"].as_str().unwrap();
        let bash_arg = &body["tools"][1]["input_schema"]["properties"]["command"]["description"];
        if v087 {
            let s = default_sections(&cwd_of(&w));
            let want = ["preamble", "tools", "rules", "cwd"]
                .map(|k| s[k].as_str().unwrap().to_string())
                .join("\n\n");
            assert_eq!(system, want);
            assert!(read.contains("(jpg, png, gif, webp, bmp)"));
            assert_eq!(bash_arg, "Shell command to execute");
            assert!(req.header("user-agent").unwrap().starts_with("pi ("));
            assert_eq!(req.header("x-stainless-timeout"), Some("300"));
        } else {
            assert!(system.starts_with(&format!("{PREAMBLE}\n\nAvailable tools:\n")));
            assert!(system.contains("\nCurrent date: "));
            assert!(!system.contains("<tools>"));
            assert!(read.contains("(jpg, png, gif, webp)"));
            assert_eq!(bash_arg, "Bash command to execute");
            assert_eq!(req.header("user-agent"), Some("Anthropic/JS 0.91.1"));
            assert_eq!(req.header("x-stainless-timeout"), Some("600"));
        }
    }
}

#[test]
fn an_unchanged_prompt_is_declared_once() {
    let (w, srv) = fake_world(vec![text_reply(1, &["One."]), text_reply(2, &["Two."])]);
    let mut p = spawn(&w, "0.87", &[]);
    let first = run(&mut p, "p1", "First");
    let second = run(&mut p, "p2", "Second");
    assert!(kinds(&first).contains(&"message_start:system".to_string()));
    assert!(!kinds(&second).contains(&"message_start:system".to_string()));
    assert_eq!(
        request_body(&srv, 0)["system"],
        request_body(&srv, 1)["system"]
    );
    // The second run's agent_end carries only its own messages.
    let end = second.iter().find(|f| f["type"] == "agent_end").unwrap();
    assert_eq!(end["messages"].as_array().unwrap().len(), 2);
}

fn retry_settings(w: &World) {
    w.write_agent_file("settings.json", r#"{"retry":{"baseDelayMs":50}}"#);
}

#[test]
fn an_auto_retry_records_a_context_edit_under_087_only() {
    for (compat, v087) in [("0.87", true), ("0.73", false)] {
        let (w, srv) = fake_world(vec![
            Reply::error(529, OVERLOADED).header("x-should-retry", "false"),
            text_reply(2, &["Recovered."]),
        ]);
        retry_settings(&w);
        let mut p = spawn(&w, compat, &[]);
        let frames = run(&mut p, "p1", "Hello?");
        let ends: Vec<&Value> = frames.iter().filter(|f| f["type"] == "agent_end").collect();
        let edits: Vec<&Value> = frames
            .iter()
            .filter(|f| f["type"] == "entry_appended")
            .collect();
        if v087 {
            assert_eq!(ends[0]["willRetry"], true);
            assert_eq!(ends[1]["willRetry"], false);
            assert_eq!(edits.len(), 1);
            let retry_start = frames
                .iter()
                .position(|f| f["type"] == "auto_retry_start")
                .unwrap();
            assert_eq!(frames[retry_start + 1]["type"], "entry_appended");
            // The edit targets the failed reply's entry and becomes the leaf.
            let entries = p.call(json!({"type":"get_entries"}), "e")["data"].clone();
            let list = entries["entries"].as_array().unwrap();
            let failed = list
                .iter()
                .find(|e| e["message"]["stopReason"] == "error")
                .unwrap();
            let edit = &edits[0]["entry"];
            assert_eq!(
                keys(edit),
                [
                    "type",
                    "id",
                    "parentId",
                    "timestamp",
                    "targetId",
                    "replacement"
                ]
            );
            assert_eq!(edit["type"], "context_edit");
            assert_eq!(edit["targetId"], failed["id"]);
            assert_eq!(edit["parentId"], failed["id"]);
            assert_eq!(edit["replacement"], Value::Null);
            assert!(list.iter().any(|e| e == edit));
        } else {
            assert!(ends.iter().all(|e| e.get("willRetry").is_none()));
            assert!(edits.is_empty());
        }
        // Either way the failed attempt is not sent again.
        let second = request_body(&srv, 1);
        assert_eq!(second["messages"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn abort_during_a_bash_tool_words_the_last_turn_per_version() {
    for (compat, stop, wording) in [
        ("0.87", "error", "This operation was aborted"),
        ("0.73", "aborted", "Request was aborted."),
    ] {
        let (w, _srv) = fake_world(vec![Sse::numbered(1).reply(&[
            text(&["Sleeping."]),
            tool_call("toolu_1", "bash", &["{\"command\":\"sleep 30\"}"]),
        ])]);
        let mut p = spawn(&w, compat, &[]);
        p.send(json!({"id":"p1","type":"prompt","message":"Sleep"}));
        p.recv_until(|f| f["type"] == "tool_execution_start");
        p.send(json!({"id":"a1","type":"abort"}));
        let frames = p.recv_until(|f| f["type"] == "response" && f["id"] == "a1");
        let last = frames
            .iter()
            .rev()
            .find(|f| f["type"] == "message_end")
            .unwrap();
        assert_eq!(last["message"]["stopReason"], stop, "{compat}");
        assert_eq!(last["message"]["errorMessage"], wording, "{compat}");
        assert_eq!(last["message"]["content"], json!([]));
    }
}

#[test]
fn write_and_edit_results_per_version() {
    for (compat, v087) in [("0.87", true), ("0.73", false)] {
        let (w, _srv) = fake_world(vec![
            Sse::numbered(1).reply(&[tool_call(
                "toolu_w",
                "write",
                &[r#"{"path":"notes.txt","content":"alpha\nbeta\ngamma\n"}"#],
            )]),
            Sse::numbered(2).reply(&[tool_call(
                "toolu_e",
                "edit",
                &[r#"{"path":"notes.txt","edits":[{"oldText":"beta","newText":"BETA"}]}"#],
            )]),
            text_reply(3, &["Done."]),
        ]);
        let mut p = spawn(&w, compat, &[]);
        let frames = run(&mut p, "p1", "Write and edit");
        let ends: Vec<&Value> = frames
            .iter()
            .filter(|f| f["type"] == "tool_execution_end")
            .collect();
        let write_text = &ends[0]["result"]["content"][0]["text"];
        let details = &ends[1]["result"]["details"];
        if v087 {
            assert_eq!(write_text, "Successfully wrote to notes.txt");
            assert_eq!(
                *details,
                json!({"diff":" 1 alpha\n-2 beta\n+2 BETA\n 3 gamma",
                       "patch":"--- notes.txt\n+++ notes.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n",
                       "firstChangedLine":2})
            );
        } else {
            assert_eq!(write_text, "Successfully wrote 17 bytes to notes.txt");
            assert_eq!(
                *details,
                json!({"diff":" 1 alpha\n-2 beta\n+2 BETA\n 3 gamma","firstChangedLine":2})
            );
        }
    }
}

#[test]
fn get_commands_lists_the_inline_llama_command_under_087_only() {
    let w = World::new();
    let mut p = w.spawn(&["--mode", "rpc", "--no-session", "--compat", "0.87"]);
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(
        r["data"],
        json!({"commands":[{"name":"llama","description":"Manage llama.cpp router models",
            "source":"extension","sourceInfo":{"path":"<inline:llama.cpp>","source":"inline",
            "scope":"temporary","origin":"top-level"}}]})
    );
    let mut p = w.spawn(&["--mode", "rpc", "--no-session"]);
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(r["data"], json!({"commands":[]}));
}

// ------------------------------------------------------------------------------------------------
// Commands in both versions

#[test]
fn clear_queue_in_both_versions() {
    for compat in ["0.73", "0.87"] {
        let w = World::new();
        let mut p = w.spawn(&["--mode", "rpc", "--no-session", "--compat", compat]);
        p.call(json!({"type":"steer","message":"Change direction"}), "s1");
        p.call(json!({"type":"follow_up","message":"Summarize"}), "f1");
        p.send(json!({"id":"cq1","type":"clear_queue"}));
        assert_eq!(
            p.recv(),
            json!({"type":"queue_update","steering":[],"followUp":[]})
        );
        assert_eq!(
            p.recv(),
            json!({"id":"cq1","type":"response","command":"clear_queue","success":true,
                   "data":{"steering":["Change direction"],"followUp":["Summarize"]}})
        );
        // Already empty: the event still comes.
        p.send(json!({"id":"cq2","type":"clear_queue"}));
        assert_eq!(p.recv()["type"], "queue_update");
        assert_eq!(p.recv()["data"], json!({"steering":[],"followUp":[]}));
        let st = p.call(json!({"type":"get_state"}), "gs");
        assert_eq!(st["data"]["pendingMessageCount"], 0);
    }
}

#[test]
fn thinking_levels_and_max_in_both_versions() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![]);
        let mut p = spawn(&w, compat, &[]);
        let r = p.call(json!({"type":"get_available_thinking_levels"}), "t1");
        assert_eq!(
            r,
            json!({"id":"t1","type":"response","command":"get_available_thinking_levels",
                   "success":true,"data":{"levels":["off","minimal","low","medium","high"]}})
        );
        p.send(json!({"id":"t2","type":"set_thinking_level","level":"max"}));
        assert_eq!(
            p.recv(),
            json!({"type":"thinking_level_changed","level":"high"})
        );
        assert_eq!(p.recv()["success"], true);
        p.call(
            json!({"type":"set_model","provider":"fake","modelId":"fake-model-2"}),
            "m",
        );
        let r = p.call(json!({"type":"get_available_thinking_levels"}), "t3");
        assert_eq!(r["data"], json!({"levels":["off"]}));
    }
}

#[test]
fn get_entries_and_get_tree_in_both_versions() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![text_reply(1, &["One."])]);
        let mut p = spawn(&w, compat, &[]);
        let r = p.call(json!({"type":"get_entries"}), "e0");
        let first = r["data"]["entries"].as_array().unwrap().clone();
        assert_eq!(first.len(), 2);
        assert_eq!(first[0]["type"], "model_change");
        assert_eq!(first[1]["type"], "thinking_level_change");
        assert_eq!(r["data"]["leafId"], first[1]["id"]);
        run(&mut p, "p1", "Hello");
        let r = p.call(json!({"type":"get_entries","since":first[1]["id"]}), "e1");
        let roles: Vec<&str> = r["data"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["message"]["role"].as_str().unwrap())
            .collect();
        if compat == "0.87" {
            assert_eq!(roles, ["system", "user", "assistant"]);
        } else {
            assert_eq!(roles, ["user", "assistant"]);
        }
        let leaf = r["data"]["leafId"].clone();
        let r = p.call(json!({"type":"get_entries","since":leaf}), "e2");
        assert_eq!(r["data"], json!({"entries":[],"leafId":leaf}));
        let r = p.call(json!({"type":"get_entries","since":"nope1234"}), "e3");
        assert_eq!(
            r,
            json!({"id":"e3","type":"response","command":"get_entries","success":false,
                   "error":"Entry not found: nope1234"})
        );
        // The tree: one chain from the model change to the leaf.
        let r = p.call(json!({"type":"get_tree"}), "t");
        assert_eq!(keys(&r["data"]), ["tree", "leafId"]);
        let mut node = &r["data"]["tree"][0];
        let mut depth = 1;
        while let Some(child) = node["children"].as_array().and_then(|c| c.first()) {
            assert_eq!(keys(node), ["entry", "children"]);
            node = child;
            depth += 1;
        }
        assert_eq!(node["entry"]["id"], leaf);
        assert_eq!(depth, roles.len() + 2);
    }
}

#[test]
fn bash_exclude_from_context_in_both_versions() {
    for compat in ["0.73", "0.87"] {
        let (w, srv) = fake_world(vec![text_reply(1, &["Ok."])]);
        let mut p = spawn(&w, compat, &[]);
        p.call(
            json!({"type":"bash","command":"echo secret-output","excludeFromContext":true}),
            "b1",
        );
        p.call(json!({"type":"bash","command":"echo visible"}), "b2");
        let msgs = messages(&mut p);
        assert_eq!(msgs[0]["excludeFromContext"], true);
        assert!(msgs[1].get("excludeFromContext").is_none());
        assert_eq!(
            keys(&msgs[0]),
            [
                "role",
                "command",
                "output",
                "exitCode",
                "cancelled",
                "truncated",
                "timestamp",
                "excludeFromContext"
            ]
        );
        run(&mut p, "p1", "What ran?");
        let body = request_body(&srv, 0).to_string();
        assert!(!body.contains("secret-output"), "{body}");
        assert!(body.contains("echo visible"));
    }
}

#[test]
fn bash_execution_update_under_087_only() {
    for (compat, v087) in [("0.87", true), ("0.73", false)] {
        let w = World::new();
        let mut p = w.spawn(&["--mode", "rpc", "--no-session", "--compat", compat]);
        p.send(json!({"id":"b1","type":"bash","command":"echo one; sleep 0.2; echo two >&2; sleep 0.2; printf three"}));
        let frames = p.recv_until(|f| f["type"] == "response");
        p.send(json!({"type":"bash","command":"echo no-id"}));
        let more = p.recv_until(|f| f["type"] == "response");
        if v087 {
            assert_eq!(
                frames[..3],
                [
                    json!({"type":"bash_execution_update","id":"b1","delta":"one\n"}),
                    json!({"type":"bash_execution_update","id":"b1","delta":"two\n"}),
                    json!({"type":"bash_execution_update","id":"b1","delta":"three"}),
                ]
            );
            assert_eq!(
                more[0],
                json!({"type":"bash_execution_update","delta":"no-id\n"})
            );
        } else {
            assert_eq!(frames.len(), 1);
            assert_eq!(more.len(), 1);
        }
        assert_eq!(frames.last().unwrap()["data"]["output"], "one\ntwo\nthree");
    }
}

#[test]
fn rpc_bash_truncation_counts_lines_per_version() {
    for (compat, first) in [("0.87", "3001\n"), ("0.73", "3002\n")] {
        let w = World::new();
        let mut p = w.spawn(&["--mode", "rpc", "--no-session", "--compat", compat]);
        let r = p.call(json!({"type":"bash","command":"seq 1 5000"}), "b");
        let out = r["data"]["output"].as_str().unwrap();
        assert!(out.starts_with(first), "{compat}: {}", &out[..20]);
        assert_eq!(r["data"]["truncated"], true);
    }
}

// ------------------------------------------------------------------------------------------------
// Compaction

fn compaction_world(replies: Vec<Reply>) -> (World, FakeLlm) {
    let (w, srv) = fake_world(replies);
    w.write_agent_file(
        "settings.json",
        r#"{"compaction":{"keepRecentTokens":5},"retry":{"baseDelayMs":50}}"#,
    );
    (w, srv)
}

#[test]
fn a_tiny_session_has_nothing_to_compact_under_087() {
    let (w, _srv) = fake_world(vec![text_reply(1, &["One."]), text_reply(2, &["Two."])]);
    let mut p = spawn(&w, "0.87", &[]);
    run(&mut p, "p1", "First");
    run(&mut p, "p2", "Second");
    p.send(json!({"id":"c1","type":"compact"}));
    assert_eq!(
        p.recv(),
        json!({"type":"compaction_start","reason":"manual"})
    );
    assert_eq!(
        p.recv(),
        json!({"type":"compaction_end","reason":"manual","aborted":false,"willRetry":false,
               "errorMessage":"Compaction failed: Nothing to compact (session too small)"})
    );
    assert_eq!(
        p.recv(),
        json!({"id":"c1","type":"response","command":"compact","success":false,
               "error":"Nothing to compact (session too small)"})
    );
    p.assert_quiet(Duration::from_millis(300));
}

#[test]
fn a_compaction_reports_its_estimate_and_usage_under_087() {
    let summary = Sse {
        input_tokens: 300,
        output_tokens: 20,
        ..Sse::numbered(3)
    };
    let (w, srv) = compaction_world(vec![
        text_reply(1, &["First", " reply."]),
        text_reply(2, &["Second", " reply."]),
        summary.reply(&[text(&["## Goal\n", "Fake summary."])]),
        text_reply(4, &["After."]),
    ]);
    let mut p = spawn(&w, "0.87", &[]);
    run(&mut p, "p1", "First message");
    run(&mut p, "p2", "Second message");
    let r = p.call(json!({"type":"compact"}), "c1");
    let data = &r["data"];
    assert_eq!(
        keys(data),
        [
            "summary",
            "firstKeptEntryId",
            "tokensBefore",
            "estimatedTokensAfter",
            "usage",
            "details"
        ]
    );
    assert_eq!(data["summary"], "## Goal\nFake summary.");
    assert_eq!(data["tokensBefore"], 102);
    assert_eq!(data["usage"]["input"], 300);
    assert_eq!(data["usage"]["output"], 20);
    assert_eq!(data["usage"]["cacheWrite1h"], 0);
    assert!(data["estimatedTokensAfter"].as_u64().unwrap() > 100);
    // No agent_settled after a manual compaction (no run was involved).
    p.assert_quiet(Duration::from_millis(300));
    // The summary request writes no cache and uses 0.87.1's system prompt.
    let req = request_body(&srv, 2);
    assert!(!req.to_string().contains("cache_control"));
    assert!(
        req["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains("between a user and an AI assistant,")
    );
    // The context: the checkpoint, the summary, the kept exchange.
    let msgs = messages(&mut p);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "compactionSummary", "user", "assistant"]);
    assert_eq!(
        keys(&msgs[0]),
        ["role", "content", "sections", "toolsAdded", "timestamp"]
    );
    // The whole session counts in the stats, the summary's usage too.
    let st = p.call(json!({"type":"get_session_stats"}), "st")["data"].clone();
    assert_eq!(st["totalMessages"], 5);
    assert_eq!(st["tokens"]["input"], 500);
    assert_eq!(
        st["contextUsage"],
        json!({"tokens":null,"contextWindow":200000,"percent":null})
    );
    // The next prompt declares nothing new: the checkpoint holds the prompt.
    let frames = run(&mut p, "p3", "Third");
    assert!(!kinds(&frames).contains(&"message_start:system".to_string()));
}

#[test]
fn a_failed_summary_is_retried_under_087() {
    let (w, srv) = compaction_world(vec![
        text_reply(1, &["First", " reply."]),
        text_reply(2, &["Second", " reply."]),
        Reply::error(529, OVERLOADED).header("x-should-retry", "false"),
        text_reply(3, &["## Goal\n", "After retry."]),
    ]);
    let mut p = spawn(&w, "0.87", &[]);
    run(&mut p, "p1", "First message");
    run(&mut p, "p2", "Second message");
    p.send(json!({"id":"c1","type":"compact"}));
    let frames = p.recv_until(|f| f["type"] == "response");
    let err = format!("529 {OVERLOADED}");
    assert_eq!(
        frames[..4],
        [
            json!({"type":"compaction_start","reason":"manual"}),
            json!({"type":"summarization_retry_scheduled","attempt":1,"maxAttempts":3,"delayMs":50,"errorMessage":err}),
            json!({"type":"summarization_retry_attempt_start","source":"compaction","reason":"manual"}),
            json!({"type":"summarization_retry_finished"}),
        ]
    );
    assert_eq!(frames[4]["type"], "compaction_end");
    assert_eq!(frames[5]["data"]["summary"], "## Goal\nAfter retry.");
    assert_eq!(srv.requests().len(), 4);
}

#[test]
fn a_failed_summary_fails_the_compaction_under_073() {
    let (w, _srv) = compaction_world(vec![
        text_reply(1, &["First", " reply."]),
        text_reply(2, &["Second", " reply."]),
        Reply::error(529, OVERLOADED).header("x-should-retry", "false"),
    ]);
    let mut p = spawn(&w, "0.73", &[]);
    run(&mut p, "p1", "First message");
    run(&mut p, "p2", "Second message");
    p.send(json!({"id":"c1","type":"compact"}));
    let frames = p.recv_until(|f| f["type"] == "response");
    assert_eq!(
        kinds(&frames),
        ["compaction_start", "compaction_end", "response:compact"]
    );
    assert!(frames[1].get("result").is_none());
    assert_eq!(
        frames[2]["error"],
        format!("Summarization failed: 529 {OVERLOADED}")
    );
}

#[test]
fn a_073_compaction_result_has_no_087_fields() {
    let (w, _srv) = compaction_world(vec![
        text_reply(1, &["First", " reply."]),
        text_reply(2, &["Second", " reply."]),
        text_reply(3, &["## Goal\n", "Summary."]),
    ]);
    let mut p = spawn(&w, "0.73", &[]);
    run(&mut p, "p1", "First message");
    run(&mut p, "p2", "Second message");
    let r = p.call(json!({"type":"compact"}), "c1");
    assert_eq!(
        keys(&r["data"]),
        ["summary", "firstKeptEntryId", "tokensBefore", "details"]
    );
    assert_eq!(p.recv(), json!({"type":"agent_settled"}));
    let roles: Vec<String> = messages(&mut p)
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect();
    assert!(!roles.contains(&"system".to_string()));
}

// ------------------------------------------------------------------------------------------------
// Sessions across versions, flags, environment, trust

fn session_world(replies: Vec<Reply>) -> (World, FakeLlm, String) {
    let (w, srv) = fake_world(replies);
    let dir = w.dir.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    (w, srv, dir.to_string_lossy().into_owned())
}

fn file_lines(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn session_id_name_and_excluded_tools() {
    let (w, srv, dir) = session_world(vec![text_reply(1, &["Hi."])]);
    let mut p = w.spawn(&fake_rpc(&[
        "--compat",
        "0.87",
        "--session-dir",
        &dir,
        "--session-id",
        "fixed-session-id-1",
        "-n",
        "Startup Name",
        "-xt",
        "bash,edit",
    ]));
    let st = p.call(json!({"type":"get_state"}), "s")["data"].clone();
    assert_eq!(st["sessionId"], "fixed-session-id-1");
    assert_eq!(st["sessionName"], "Startup Name");
    let file = st["sessionFile"].as_str().unwrap().to_string();
    assert!(file.ends_with("_fixed-session-id-1.jsonl"), "{file}");
    let frames = run(&mut p, "p1", "Which tools?");
    let sys = &frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["role"] == "system")
        .unwrap()["message"];
    assert_eq!(
        sys["sections"]["tools"],
        "<tools>\n- read: Read file contents\n- write: Create or overwrite files\n\nIn addition to the tools above, you may have access to other custom tools depending on the project.\n</tools>"
    );
    let body = request_body(&srv, 0);
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read", "write"]);
    // On disk the name is the root entry, before the model change; the system message follows.
    let lines = file_lines(&file);
    assert_eq!(lines[0]["id"], "fixed-session-id-1");
    assert_eq!(lines[1]["type"], "session_info");
    assert_eq!(lines[1]["parentId"], Value::Null);
    assert_eq!(lines[1]["name"], "Startup Name");
    assert_eq!(lines[2]["type"], "model_change");
    assert_eq!(lines[4]["message"]["role"], "system");
    p.finish(Duration::from_secs(5));
    // The same id again opens that session.
    let mut p = w.spawn(&fake_rpc(&[
        "--session-dir",
        &dir,
        "--session-id",
        "fixed-session-id-1",
    ]));
    let st = p.call(json!({"type":"get_state"}), "s")["data"].clone();
    assert_eq!(st["sessionFile"], file.as_str());
}

#[test]
fn bad_session_ids_and_conflicts_exit_1() {
    let w = World::new();
    for (args, err) in [
        (
            vec!["--session-id", "-bad-"],
            "Error: Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character",
        ),
        (
            vec!["--session-id", "ok", "--continue"],
            "Error: --session-id cannot be combined with --continue",
        ),
        (
            vec!["--name", "  "],
            "Error: --name requires a non-empty value",
        ),
    ] {
        let mut a = vec!["--mode", "rpc", "--no-session"];
        a.extend(args.iter());
        let o = w.command(&a).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(err), "{args:?}");
    }
    // `--` ends the options: what follows is the prompt, even when it looks like a flag.
    let o = w
        .command(&[
            "--no-session",
            "--provider",
            "faux",
            "--model",
            "faux",
            "--",
            "-xt",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("You said: -xt"));
}

#[test]
fn a_resumed_session_declares_only_what_changed() {
    let (w, _srv, dir) = session_world(vec![text_reply(1, &["One."]), text_reply(2, &["Two."])]);
    let mut p = w.spawn(&fake_rpc(&["--compat", "0.87", "--session-dir", &dir]));
    run(&mut p, "p1", "First");
    let file = p.call(json!({"type":"get_state"}), "s")["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    p.finish(Duration::from_secs(5));
    // Resumed without bash: a patch of the changed sections and the withdrawn tool.
    let mut p = w.spawn(&fake_rpc(&[
        "--compat",
        "0.87",
        "--session",
        &file,
        "--exclude-tools",
        "bash",
    ]));
    let frames = run(&mut p, "p2", "Second");
    let sys = &frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .unwrap()["message"];
    assert_eq!(keys(&sys["sections"]), ["tools", "rules"]);
    assert_eq!(sys["toolsRemoved"], json!([{"name":"bash"}]));
    assert!(sys.get("toolsAdded").is_none());
    p.finish(Duration::from_secs(5));
    // The same file under 0.73: no system message in the context.
    let mut p = w.spawn(&fake_rpc(&["--session", &file]));
    let roles: Vec<String> = messages(&mut p)
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["messageCount"], 4);
}

#[test]
fn children_get_pis_environment() {
    let probe = "echo \"$PI_CODING_AGENT|${AI_AGENT-unset}|${PI_SESSION_ID-unset}|${PI_MODEL-unset}|${PI_REASONING_LEVEL-unset}|${PI_SESSION_FILE-unset}\"";
    for (compat, rpc_want, tool_want) in [
        (
            "0.87",
            "true|pi|unset|unset|unset|unset\n",
            "true|pi|fixed-1|fake-model|medium|unset\n",
        ),
        (
            "0.73",
            "true|unset|unset|unset|unset|unset\n",
            "true|unset|unset|unset|unset|unset\n",
        ),
    ] {
        let args = json!({ "command": probe }).to_string();
        let (w, _srv) = fake_world(vec![
            Sse::numbered(1).reply(&[tool_call("toolu_1", "bash", &[&args])]),
            text_reply(2, &["Done."]),
        ]);
        let mut p = spawn(&w, compat, &["--session-id", "fixed-1"]);
        let r = p.call(json!({"type":"bash","command":probe}), "b");
        assert_eq!(r["data"]["output"], rpc_want, "{compat}");
        let frames = run(&mut p, "p1", "env?");
        let end = frames
            .iter()
            .find(|f| f["type"] == "tool_execution_end")
            .unwrap();
        assert_eq!(end["result"]["content"][0]["text"], tool_want, "{compat}");
    }
}

#[test]
fn project_settings_need_trust_under_087() {
    let w = World::new();
    std::fs::create_dir_all(w.cwd().join(".pi")).unwrap();
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        r#"{"steeringMode":"all"}"#,
    )
    .unwrap();
    let mode = |args: &[&str]| {
        let mut a = vec!["--mode", "rpc", "--no-session"];
        a.extend_from_slice(args);
        let mut p = w.spawn(&a);
        p.call(json!({"type":"get_state"}), "s")["data"]["steeringMode"].clone()
    };
    assert_eq!(mode(&[]), "all");
    assert_eq!(mode(&["--no-approve"]), "one-at-a-time");
    assert_eq!(mode(&["--compat", "0.87"]), "one-at-a-time");
    assert_eq!(mode(&["--compat", "0.87", "-a"]), "all");
    let key = std::fs::canonicalize(w.cwd()).unwrap();
    w.write_agent_file(
        "trust.json",
        &json!({ key.to_string_lossy(): true }).to_string(),
    );
    assert_eq!(mode(&["--compat", "0.87"]), "all");
    assert_eq!(mode(&["--compat", "0.87", "-na"]), "one-at-a-time");
}

#[test]
fn openai_completions_messages_under_087() {
    let (w, _srv) = fake_world(vec![Reply::sse(
        [
            r#"data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"}}]}"#,
            r#"data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":800,"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":2}}}"#,
            "data: [DONE]",
        ]
        .map(|l| format!("{l}\n\n"))
        .concat(),
    )]);
    let mut p = w.spawn(&support::fake_rpc_on(
        "fake-oai-model",
        &[
            "--no-session",
            "--compat",
            "0.87",
            "--provider",
            "fake-openai",
        ],
    ));
    let frames = run(&mut p, "p1", "Hi");
    let end = &frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
        .unwrap()["message"];
    assert_eq!(end["rawStopReason"], "stop");
    assert_eq!(
        keys(&end["usage"]),
        [
            "input",
            "output",
            "cacheRead",
            "cacheWrite",
            "reasoning",
            "totalTokens",
            "cost"
        ]
    );
    // completion_tokens already counts the reasoning tokens (pi 0.87.1).
    assert_eq!(end["usage"]["output"], 5);
    assert_eq!(end["usage"]["reasoning"], 2);
}

#[test]
fn an_extension_tool_is_declared_after_the_built_ins_under_087() {
    let protect = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples/protect.sh")
        .to_string_lossy()
        .into_owned();
    let (w, srv) = fake_world(vec![text_reply(1, &["Tick."])]);
    let mut p = spawn(&w, "0.87", &["-e", &protect]);
    let frames = run(&mut p, "p1", "What time is it?");
    let sys = &frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["role"] == "system")
        .unwrap()["message"];
    let clock = &sys["toolsAdded"][4];
    assert_eq!(
        *clock,
        json!({"name":"clock","description":"The current date and time (UTC, ISO 8601).",
            "parameters":{"type":"object","properties":{}}})
    );
    // No snippet: the prompt's tool list keeps the four built-ins.
    assert_eq!(
        sys["sections"]["tools"],
        default_sections(&cwd_of(&w))["tools"]
    );
    let names: Vec<String> = request_body(&srv, 0)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["read", "bash", "edit", "write", "clock"]);
}
