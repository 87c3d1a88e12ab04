//! Differences from pi found by a differential sweep of sessions, commands and settings
//! (scenarios outside the shared set, run through pi 0.73.1, 0.87.1 and 1.6.0 and pith under
//! each `--compat`):
//! - `export_html` write failures in Node's words (every version);
//! - `switch_session` to an empty file starts a new session there (every version); to a file that
//!   is not a session, pi 0.87.1's and 1.6.0's text;
//! - `fork` / `clone` of a session not saved yet (each version's text);
//! - settings `thinkingBudgets` in the requests (every version);
//! - skills and prompt templates read again for a new session (every version);
//! - a session switch during a streaming reply aborts it with its events (0.87, 1.6).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text, text_sse};
use support::fake_llm::Reply;
use support::frames::{request_body, request_messages, run};
use support::{World, fake_rpc, fake_world};

const VERSIONS: [&str; 3] = ["0.73", "0.87", "1.6"];

fn session_dir(w: &World) -> String {
    w.tmp().join("sessions").to_string_lossy().into_owned()
}

#[test]
fn export_html_write_failures_read_as_node_errors_in_every_version() {
    for compat in VERSIONS {
        let (w, _llm) = fake_world(vec![Reply::sse(text_sse(1, &["One."]))]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        run(&mut p, "p1", "First");
        let missing = w.tmp().join("nodir").join("out.html");
        let r = p.call(
            json!({"type":"export_html","outputPath":missing.to_str().unwrap()}),
            "e1",
        );
        assert_eq!(
            r,
            json!({"id":"e1","type":"response","command":"export_html","success":false,
                "error":format!("ENOENT: no such file or directory, open '{}'", missing.display())}),
            "{compat}"
        );
        let a_dir = w.tmp();
        let r = p.call(
            json!({"type":"export_html","outputPath":a_dir.to_str().unwrap()}),
            "e2",
        );
        assert_eq!(
            r,
            json!({"id":"e2","type":"response","command":"export_html","success":false,
                "error":format!("EISDIR: illegal operation on a directory, open '{}'", a_dir.display())}),
            "{compat}"
        );
    }
}

#[test]
fn switch_session_to_an_empty_file_starts_a_session_there_and_a_non_session_file_is_refused() {
    for compat in VERSIONS {
        let (w, _llm) = fake_world(vec![Reply::sse(text_sse(1, &["One."]))]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        run(&mut p, "p1", "First");
        let before = p.call(json!({"type":"get_state"}), "g0")["data"].clone();
        let empty = w.tmp().join("empty.jsonl");
        std::fs::write(&empty, "").unwrap();
        let r = p.call(
            json!({"type":"switch_session","sessionPath":empty.to_str().unwrap()}),
            "s1",
        );
        assert_eq!(
            r,
            json!({"id":"s1","type":"response","command":"switch_session","success":true,
                "data":{"cancelled":false}}),
            "{compat}"
        );
        let state = p.call(json!({"type":"get_state"}), "g1")["data"].clone();
        assert_eq!(state["sessionFile"], empty.to_str().unwrap(), "{compat}");
        assert_ne!(state["sessionId"], before["sessionId"], "{compat}");
        assert_eq!(state["messageCount"], 0, "{compat}");

        let corrupt = w.tmp().join("corrupt.jsonl");
        std::fs::write(&corrupt, "not json\n{bad\n").unwrap();
        let r = p.call(
            json!({"type":"switch_session","sessionPath":corrupt.to_str().unwrap()}),
            "s2",
        );
        assert_eq!(
            r,
            json!({"id":"s2","type":"response","command":"switch_session","success":false,
                "error":format!("Session file is not a valid pi session: {}", corrupt.display())}),
            "{compat}"
        );
        assert_eq!(
            std::fs::read_to_string(&corrupt).unwrap(),
            "not json\n{bad\n",
            "{compat}"
        );
        let state = p.call(json!({"type":"get_state"}), "g2")["data"].clone();
        assert_eq!(state["sessionFile"], empty.to_str().unwrap(), "{compat}");
    }
}

#[test]
fn fork_and_clone_of_a_session_not_saved_yet_fail_in_each_versions_words() {
    for compat in VERSIONS {
        let slow = Sse::numbered(1)
            .reply(&[text(&["Slow", " one", " two", " three", " four"])])
            .paced(Duration::from_millis(150));
        let (w, _llm) = fake_world(vec![slow]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        // Before any message: the leaf is the thinking-level entry, the file is not written.
        let entries = p.call(json!({"type":"get_entries"}), "ge")["data"]["entries"].clone();
        let leaf = entries.as_array().unwrap().last().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = p.call(json!({"type":"clone"}), "c1");
        let error = match compat {
            "0.73" => format!("Entry {leaf} not found"),
            "0.87" => "This session has not been saved yet. Wait for the first assistant response before cloning or forking it.".to_string(),
            _ => "This session has not been saved yet. Send a message before cloning or forking it.".to_string(),
        };
        assert_eq!(
            r,
            json!({"id":"c1","type":"response","command":"clone","success":false,"error":error}),
            "{compat}"
        );
        // While the first reply streams: pi 1.6.0 has written the file from the user message on,
        // the older versions have not (the fork would end at the entry before that message).
        p.send(json!({"id":"p1","type":"prompt","message":"First"}));
        p.recv_until(|v| v["type"] == "message_update");
        let forks = p.call(json!({"type":"get_fork_messages"}), "fm")["data"]["messages"].clone();
        let first = forks[0]["entryId"].as_str().unwrap().to_string();
        let r = p.call(json!({"type":"fork","entryId":first}), "f1");
        let want = match compat {
            "0.73" => json!({"id":"f1","type":"response","command":"fork","success":false,
                "error":format!("Entry {leaf} not found")}),
            "0.87" => json!({"id":"f1","type":"response","command":"fork","success":false,
                "error":error}),
            _ => json!({"id":"f1","type":"response","command":"fork","success":true,
                "data":{"text":"First","cancelled":false}}),
        };
        assert_eq!(r, want, "{compat}");
    }
}

#[test]
fn thinking_budgets_from_settings_reach_the_request_in_every_version() {
    for compat in VERSIONS {
        let (w, llm) = fake_world(vec![
            Reply::sse(text_sse(1, &["A."])),
            Reply::sse(text_sse(2, &["B."])),
            Reply::sse(text_sse(3, &["C."])),
        ]);
        w.write_agent_file(
            "settings.json",
            r#"{"thinkingBudgets":{"minimal":512,"medium":3000,"high":9000}}"#,
        );
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        run(&mut p, "p1", "Medium");
        p.call(json!({"type":"set_thinking_level","level":"low"}), "t1");
        run(&mut p, "p2", "Low");
        p.call(json!({"type":"set_thinking_level","level":"xhigh"}), "t2");
        run(&mut p, "p3", "Xhigh");
        let budgets: Vec<(Value, Value)> = (0..3)
            .map(|i| {
                let b = request_body(&llm, i);
                (
                    b["thinking"]["budget_tokens"].clone(),
                    b["max_tokens"].clone(),
                )
            })
            .collect();
        // Medium and high from the settings, low pi's default; max_tokens grows by the budget
        // up to the model's 16384.
        assert_eq!(
            budgets,
            [
                (json!(3000), json!(16384)),
                (json!(2048), json!(16384)),
                (json!(9000), json!(16384)),
            ],
            "{compat}"
        );
    }
}

#[test]
fn prompt_templates_and_skills_are_read_again_for_a_new_session() {
    for compat in VERSIONS {
        let (w, llm) = fake_world(vec![Reply::sse(text_sse(1, &["A."]))]);
        std::fs::create_dir_all(w.agent_dir().join("prompts")).unwrap();
        w.write_agent_file("prompts/early.md", "Early $1\n");
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let names = |v: &Value| -> Vec<String> {
            v["data"]["commands"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["source"] == "prompt")
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect()
        };
        let r = p.call(json!({"type":"get_commands"}), "gc1");
        assert_eq!(names(&r), ["early"], "{compat}");
        w.write_agent_file("prompts/late.md", "Late $1\n");
        // Read once: the same session does not see the new file.
        let r = p.call(json!({"type":"get_commands"}), "gc2");
        assert_eq!(names(&r), ["early"], "{compat}");
        p.call(json!({"type":"new_session"}), "ns");
        let r = p.call(json!({"type":"get_commands"}), "gc3");
        assert_eq!(names(&r), ["early", "late"], "{compat}");
        run(&mut p, "p1", "/late x");
        assert_eq!(
            request_messages(&llm, 0),
            json!([{"role":"user","content":[{"type":"text","text":"Late x\n"}]}]),
            "{compat}"
        );
    }
}

#[test]
fn new_session_during_a_streaming_reply_aborts_it_first_from_087_on() {
    for compat in VERSIONS {
        let slow = Sse::numbered(1)
            .reply(&[text(&["Slow", " one", " two", " three", " four"])])
            .paced(Duration::from_millis(150));
        let (w, _llm) = fake_world(vec![slow]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        p.send(json!({"id":"p1","type":"prompt","message":"Slow"}));
        p.recv_until(|v| {
            v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta"
        });
        let old = p.call(json!({"type":"get_state"}), "g0")["data"]["sessionFile"].clone();
        p.send(json!({"id":"ns","type":"new_session"}));
        let frames: Vec<Value> = p
            .recv_until(|v| v["type"] == "response" && v["id"] == "ns")
            .into_iter()
            .filter(|f| f["type"] != "message_update")
            .collect();
        let kinds: Vec<String> = frames
            .iter()
            .map(|f| {
                let t = f["type"].as_str().unwrap().to_string();
                match f["message"]["stopReason"].as_str() {
                    Some(s) if t == "message_end" => format!("{t}:{s}"),
                    _ => t,
                }
            })
            .collect();
        if compat == "0.73" {
            // pi 0.73.1 stops the run silently.
            assert_eq!(kinds, ["response"], "{compat}");
            p.assert_quiet(Duration::from_millis(300));
            continue;
        }
        assert_eq!(
            kinds,
            [
                "message_end:aborted",
                "turn_end",
                "agent_end",
                "agent_settled",
                "response"
            ],
            "{compat}"
        );
        let settled = &frames[3];
        let want = if compat == "1.6" {
            json!({"type":"agent_settled","aborted":true})
        } else {
            json!({"type":"agent_settled"})
        };
        assert_eq!(settled, &want, "{compat}");
        assert_eq!(
            frames[0]["message"]["errorMessage"],
            "This operation was aborted"
        );
        // The aborted reply is in the file that was left.
        let text = std::fs::read_to_string(old.as_str().unwrap()).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["message"]["stopReason"], "aborted", "{compat}");
        let state = p.call(json!({"type":"get_state"}), "g1")["data"].clone();
        assert_eq!(state["messageCount"], 0, "{compat}");
        assert_eq!(state["isStreaming"], false, "{compat}");
    }
}

#[test]
fn switch_session_to_a_session_whose_directory_is_gone_is_refused_in_every_version() {
    for compat in VERSIONS {
        let (w, _llm) = fake_world(vec![Reply::sse(text_sse(1, &["One."]))]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        run(&mut p, "p1", "First");
        let gone = w.cwd().join("gone.jsonl");
        std::fs::write(
            &gone,
            concat!(
                r#"{"type":"session","version":3,"id":"gone-cwd","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/nonexistent/dir/x"}"#,
                "\n",
                r#"{"type":"message","id":"aaaa1111","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"Old","timestamp":1}}"#,
                "\n"
            ),
        )
        .unwrap();
        let cwd = support::cwd_of(&w);
        let before = p.call(json!({"type":"get_state"}), "g0")["data"].clone();
        let r = p.call(
            json!({"type":"switch_session","sessionPath":"gone.jsonl"}),
            "s1",
        );
        assert_eq!(
            r,
            json!({"id":"s1","type":"response","command":"switch_session","success":false,
                "error":format!("Stored session working directory does not exist: /nonexistent/dir/x\nSession file: {cwd}/gone.jsonl\nCurrent working directory: {cwd}")}),
            "{compat}"
        );
        // Nothing changed.
        let state = p.call(json!({"type":"get_state"}), "g1")["data"].clone();
        assert_eq!(state, before, "{compat}");
    }
}

#[test]
fn a_clone_holding_a_user_message_is_written_at_once_under_16() {
    for compat in VERSIONS {
        let slow = Sse::numbered(1)
            .reply(&[text(&["Slow", " one", " two", " three", " four"])])
            .paced(Duration::from_millis(150));
        let (w, _llm) = fake_world(vec![slow]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        p.send(json!({"id":"p1","type":"prompt","message":"First"}));
        p.recv_until(|v| v["type"] == "message_update");
        let r = p.call(json!({"type":"clone"}), "c1");
        assert_eq!(r["success"], compat == "1.6", "{compat}: {r}");
        if compat != "1.6" {
            continue;
        }
        // The clone is on disk: it can be forked at once (pi 1.6.0 writes a branched session
        // holding a user message right away).
        let file = p.call(json!({"type":"get_state"}), "g1")["data"]["sessionFile"].clone();
        let lines = std::fs::read_to_string(file.as_str().unwrap()).unwrap();
        assert!(lines.contains(r#""text":"First""#), "{lines}");
        let forks = p.call(json!({"type":"get_fork_messages"}), "fm")["data"]["messages"].clone();
        let r = p.call(
            json!({"type":"fork","entryId":forks[0]["entryId"].clone()}),
            "f1",
        );
        assert_eq!(
            r,
            json!({"id":"f1","type":"response","command":"fork","success":true,
                "data":{"text":"First","cancelled":false}})
        );
    }
}

#[test]
fn settings_session_dir_places_the_session_in_every_version() {
    for compat in VERSIONS {
        let (w, _llm) = fake_world(vec![Reply::sse(text_sse(1, &["One."]))]);
        w.write_agent_file("settings.json", r#"{"sessionDir":"mysess"}"#);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat]));
        let file = p.call(json!({"type":"get_state"}), "g0")["data"]["sessionFile"]
            .as_str()
            .unwrap()
            .to_string();
        // Relative, as given (pi reports it so too).
        assert!(
            file.starts_with("mysess/") && file.ends_with(".jsonl"),
            "{compat}: {file}"
        );
        run(&mut p, "p1", "First");
        let on_disk = w.cwd().join(&file);
        assert!(on_disk.is_file(), "{compat}: {}", on_disk.display());
    }
}

#[test]
fn cycle_model_from_outside_the_enabled_models_starts_at_the_first_under_16() {
    for compat in VERSIONS {
        let (w, _llm) = fake_world(vec![]);
        w.write_agent_file(
            "settings.json",
            r#"{"enabledModels":["fake/fake-model","fake/fake-model-2"]}"#,
        );
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let r = p.call(
            json!({"type":"set_model","provider":"fake-openai","modelId":"fake-oai-model"}),
            "s1",
        );
        assert_eq!(r["success"], true, "{compat}");
        let r = p.call(json!({"type":"cycle_model"}), "c1");
        let want = if compat == "1.6" {
            "fake-model"
        } else {
            "fake-model-2"
        };
        assert_eq!(r["data"]["model"]["id"], want, "{compat}: {r}");
        assert_eq!(r["data"]["isScoped"], true, "{compat}");
    }
}

#[test]
fn new_session_while_a_tool_runs_waits_for_the_aborted_run_from_087_on() {
    for compat in VERSIONS {
        let (w, _llm) = fake_world(vec![Sse::numbered(1).reply(&[
            support::anthropic::tool_call(
                "toolu_s",
                "bash",
                &[r#"{"command":"echo start; sleep 5; echo end"}"#],
            ),
        ])]);
        let dir = session_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        p.send(json!({"id":"p1","type":"prompt","message":"Run"}));
        p.recv_until(|v| {
            v["type"] == "tool_execution_update"
                && v["partialResult"]["content"][0]["text"] == "start\n"
        });
        p.send(json!({"id":"ns","type":"new_session"}));
        let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "ns");
        let kinds: Vec<String> = frames
            .iter()
            .filter(|f| f["type"] != "message_update")
            .map(|f| {
                let t = f["type"].as_str().unwrap().to_string();
                match f["message"]["role"].as_str() {
                    Some(r) if t.starts_with("message_") => format!("{t}:{r}"),
                    _ => t,
                }
            })
            .collect();
        if compat == "0.73" {
            assert_eq!(kinds, ["response"], "{compat}");
            continue;
        }
        assert_eq!(
            kinds,
            [
                "tool_execution_end",
                "message_start:toolResult",
                "message_end:toolResult",
                "turn_end",
                "turn_start",
                "message_start:assistant",
                "message_end:assistant",
                "turn_end",
                "agent_end",
                "agent_settled",
                "response"
            ],
            "{compat}"
        );
        assert_eq!(
            frames[0]["result"]["content"][0]["text"], "start\n\n\nCommand aborted",
            "{compat}"
        );
        assert_eq!(
            frames.last().unwrap(),
            &json!({"id":"ns","type":"response","command":"new_session","success":true,
                "data":{"cancelled":false}}),
            "{compat}"
        );
        let state = p.call(json!({"type":"get_state"}), "g")["data"].clone();
        assert_eq!(state["messageCount"], 0, "{compat}");
        assert_eq!(state["isStreaming"], false, "{compat}");
    }
}
