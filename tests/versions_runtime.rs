//! The second pass of `--compat 0.87` (issue 9) against `--compat 0.73`, over pipes: the session
//! runtime (pi 0.87.1 rebuilds it for every session it switches to — `new_session`,
//! `switch_session`, `fork`, `clone` — from the command line again and no longer saves the RPC
//! model and thinking setters, so those do not carry over; pi 0.73.1 saved them, so they did),
//! context files in nested git worktrees, `--session-id` with `--fork`, `--compat` and project
//! trust, and tools that change during a run.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text, text_reply, tool_call};
use support::fake_llm::Reply;
use support::frames::run;
use support::{World, fake_rpc, fake_world};

fn sessions_dir(w: &World) -> String {
    let dir = w.dir.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

/// `get_state`'s model id and thinking level.
fn model_and_level(p: &mut support::Pith, id: &str) -> (String, String) {
    let st = p.call(json!({"type":"get_state"}), id)["data"].clone();
    (
        st["model"]["id"].as_str().unwrap_or("").to_string(),
        st["thinkingLevel"].as_str().unwrap_or("").to_string(),
    )
}

fn pair(m: &str, l: &str) -> (String, String) {
    (m.to_string(), l.to_string())
}

#[test]
fn new_session_starts_from_the_command_line_under_087_only() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![text_reply(1, &["One."])]);
        w.write_agent_file("settings.json", r#"{"defaultThinkingLevel":"low"}"#);
        let dir = sessions_dir(&w);
        let mut p = w.spawn(&fake_rpc(&[
            "--compat",
            compat,
            "--thinking",
            "high",
            "--session-dir",
            &dir,
        ]));
        assert_eq!(model_and_level(&mut p, "s0"), pair("fake-model", "high"));
        p.send(json!({"id":"t1","type":"set_thinking_level","level":"minimal"}));
        assert_eq!(
            p.recv(),
            json!({"type":"thinking_level_changed","level":"minimal"})
        );
        assert_eq!(
            p.recv(),
            json!({"id":"t1","type":"response","command":"set_thinking_level","success":true})
        );
        // No event when the new session's level differs: pi builds a new runtime silently.
        let r = p.call(json!({"type":"new_session"}), "n1");
        assert_eq!(
            r,
            json!({"id":"n1","type":"response","command":"new_session","success":true,
                   "data":{"cancelled":false}})
        );
        let want = if compat == "0.87" { "high" } else { "minimal" };
        assert_eq!(model_and_level(&mut p, "s1"), pair("fake-model", want));
        // A model set over RPC does not carry over either.
        p.call(
            json!({"type":"set_model","provider":"fake","modelId":"fake-model-2"}),
            "m1",
        );
        p.call(json!({"type":"new_session"}), "n2");
        let want = if compat == "0.87" {
            pair("fake-model", "high")
        } else {
            pair("fake-model-2", "off")
        };
        assert_eq!(model_and_level(&mut p, "s2"), want);
        // The new session records what it starts with.
        let file = p.call(json!({"type":"get_state"}), "s3")["data"]["sessionFile"]
            .as_str()
            .unwrap()
            .to_string();
        run(&mut p, "p1", "Hi");
        let lines: Vec<Value> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[1]["type"], "model_change");
        assert_eq!(lines[1]["modelId"], want.0.as_str());
        assert_eq!(lines[2]["type"], "thinking_level_change");
        assert_eq!(lines[2]["thinkingLevel"], want.1.as_str());
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn switch_session_fork_and_clone_restore_the_sessions_own_level_under_087() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![text_reply(1, &["One."]), text_reply(2, &["Two."])]);
        let dir = sessions_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        p.call(json!({"type":"set_thinking_level","level":"high"}), "t1");
        run(&mut p, "p1", "First");
        let first = p.call(json!({"type":"get_state"}), "s1")["data"]["sessionFile"]
            .as_str()
            .unwrap()
            .to_string();
        p.call(json!({"type":"set_thinking_level","level":"low"}), "t2");
        // clone: the copy's own last level (low) in both versions.
        p.call(json!({"type":"clone"}), "c1");
        assert_eq!(model_and_level(&mut p, "s2"), pair("fake-model", "low"));
        // fork before the first prompt: the copy holds the level set before it (high); 0.73
        // keeps the current one.
        let forks = p.call(json!({"type":"get_fork_messages"}), "f0")["data"]["messages"].clone();
        p.call(json!({"type":"set_thinking_level","level":"minimal"}), "t3");
        let entry = forks[0]["entryId"].as_str().unwrap().to_string();
        p.call(json!({"type":"fork","entryId": entry}), "f1");
        let want = if compat == "0.87" { "high" } else { "minimal" };
        assert_eq!(model_and_level(&mut p, "s3"), pair("fake-model", want));
        // new session: the default (medium) under 0.87.
        p.call(json!({"type":"new_session"}), "n1");
        let want = if compat == "0.87" { "medium" } else { want };
        assert_eq!(model_and_level(&mut p, "s4"), pair("fake-model", want));
        run(&mut p, "p2", "Second");
        p.call(json!({"type":"set_thinking_level","level":"minimal"}), "t4");
        // Back to the first session: its own level (the last one it recorded) in both.
        p.call(json!({"type":"switch_session","sessionPath": first}), "w1");
        let st = model_and_level(&mut p, "s5");
        assert_eq!(st, pair("fake-model", "low"), "{compat}");
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn set_model_takes_the_per_model_setting_under_087() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![]);
        w.write_agent_file(
            "settings.json",
            r#"{"defaultThinkingLevel":"low","modelThinkingLevels":{"fake/fake-model":"minimal"}}"#,
        );
        let mut p = w.spawn(&support::fake_rpc_on(
            "fake-model-2",
            &["--compat", compat, "--no-session"],
        ));
        p.send(json!({"id":"m1","type":"set_model","provider":"fake","modelId":"fake-model"}));
        let want = if compat == "0.87" { "minimal" } else { "low" };
        assert_eq!(
            p.recv(),
            json!({"type":"thinking_level_changed","level": want})
        );
        assert_eq!(p.recv()["command"], "set_model");
        // From a reasoning model to itself: 0.87 takes the setting again, 0.73 keeps the level.
        p.call(json!({"type":"set_thinking_level","level":"high"}), "t1");
        p.send(json!({"id":"m2","type":"set_model","provider":"fake","modelId":"fake-model"}));
        let first = p.recv();
        if compat == "0.87" {
            assert_eq!(
                first,
                json!({"type":"thinking_level_changed","level":"minimal"})
            );
            assert_eq!(p.recv()["command"], "set_model");
        } else {
            assert_eq!(first["command"], "set_model");
        }
        p.finish(Duration::from_secs(5));
    }
}

// ------------------------------------------------------------------------------------------------
// Context files in a git worktree nested in its main checkout

#[test]
fn a_nested_worktrees_agents_md_shadows_the_main_ones_under_087_only() {
    for compat in ["0.73", "0.87"] {
        let (w, srv) = fake_world(vec![text_reply(1, &["One."])]);
        // The main checkout is the world's cwd; the worktree `feat` sits in `sub/feat`, laid out
        // as `git worktree add` does.
        let root = std::fs::canonicalize(w.cwd()).unwrap();
        std::fs::create_dir_all(root.join(".git/worktrees/feat")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            root.join(".git/worktrees/feat/HEAD"),
            "ref: refs/heads/feat\n",
        )
        .unwrap();
        std::fs::write(root.join(".git/worktrees/feat/commondir"), "../..\n").unwrap();
        std::fs::write(root.join("AGENTS.md"), "main rules\n").unwrap();
        let wt = root.join("sub/feat");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", root.join(".git/worktrees/feat").display()),
        )
        .unwrap();
        std::fs::write(wt.join("AGENTS.md"), "feature rules\n").unwrap();
        let mut cmd = w.command(&fake_rpc(&["--compat", compat, "--no-session"]));
        cmd.current_dir(&wt);
        let mut p = support::Pith::spawn_cmd(cmd);
        run(&mut p, "p1", "hi");
        let body = support::frames::request_body(&srv, 0);
        let system = body["system"][0]["text"].as_str().unwrap().to_string();
        let main = format!("{}/AGENTS.md", root.display());
        let feat = format!("{}/AGENTS.md", wt.display());
        if compat == "0.87" {
            let want = format!(
                "<project_context>\nProject-specific instructions and guidelines:\n\n<project_instructions path=\"{feat}\">\nfeature rules\n\n</project_instructions>\n</project_context>"
            );
            assert!(system.contains(&want), "{system}");
            assert!(!system.contains(&main), "{system}");
        } else {
            let want = format!("## {main}\n\nmain rules\n\n\n## {feat}\n\nfeature rules\n");
            assert!(system.contains(&want), "{system}");
        }
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn context_files_are_read_once_per_session_under_087() {
    let (w, srv) = fake_world(vec![
        text_reply(1, &["One."]),
        text_reply(2, &["Two."]),
        text_reply(3, &["Three."]),
    ]);
    std::fs::write(w.cwd().join("AGENTS.md"), "version one\n").unwrap();
    let mut p = w.spawn(&fake_rpc(&["--compat", "0.87", "--no-session"]));
    run(&mut p, "p1", "hi");
    std::fs::write(w.cwd().join("AGENTS.md"), "version two\n").unwrap();
    let frames = run(&mut p, "p2", "again");
    assert!(
        !frames
            .iter()
            .any(|f| f["type"] == "message_start" && f["message"]["role"] == "system")
    );
    let system = |i: usize| -> String {
        let body: Value = serde_json::from_str(&srv.requests()[i].body).unwrap();
        body["system"][0]["text"].as_str().unwrap().to_string()
    };
    assert!(system(1).contains("version one"));
    // A new session reads them again.
    p.call(json!({"type":"new_session"}), "n");
    run(&mut p, "p3", "third");
    assert!(system(2).contains("version two"));
    assert!(!system(2).contains("version one"));
    p.finish(Duration::from_secs(5));
}

// ------------------------------------------------------------------------------------------------
// --session-id with --fork; a project's pith.compat and project trust

/// A session file with one exchange, written where pith can fork it.
fn source_session(path: &std::path::Path) {
    let lines = [
        json!({"type":"session","version":3,"id":"01900000-0000-7000-8000-000000000001",
               "timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}),
        json!({"type":"model_change","id":"aaaa0001","parentId":null,
               "timestamp":"2026-01-01T00:00:00.000Z","provider":"fake","modelId":"fake-model"}),
        json!({"type":"message","id":"aaaa0002","parentId":"aaaa0001",
               "timestamp":"2026-01-01T00:00:00.000Z",
               "message":{"role":"user","content":[{"type":"text","text":"old"}],"timestamp":1}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_fork_takes_the_session_id_given() {
    let (w, _srv) = fake_world(vec![]);
    let dir = sessions_dir(&w);
    let src = w.cwd().join("src.jsonl");
    source_session(&src);
    let mut p = w.spawn(&fake_rpc(&[
        "--session-dir",
        &dir,
        "--fork",
        "src.jsonl",
        "--session-id",
        "my-fork-1",
    ]));
    let st = p.call(json!({"type":"get_state"}), "s")["data"].clone();
    assert_eq!(st["sessionId"], "my-fork-1");
    let file = st["sessionFile"].as_str().unwrap().to_string();
    assert!(file.ends_with("_my-fork-1.jsonl"), "{file}");
    p.finish(Duration::from_secs(5));
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let cwd = std::fs::canonicalize(w.cwd()).unwrap();
    assert_eq!(
        header.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["type", "version", "id", "timestamp", "cwd", "parentSession"]
    );
    assert_eq!(header["id"], "my-fork-1");
    assert_eq!(
        header["parentSession"],
        cwd.join("src.jsonl").to_string_lossy().as_ref()
    );
    // The same id again: that session exists, the fork is refused.
    let out = w
        .command(&fake_rpc(&[
            "--session-dir",
            &dir,
            "--fork",
            "src.jsonl",
            "--session-id",
            "my-fork-1",
        ]))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Session already exists with id 'my-fork-1'\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_projects_compat_setting_needs_a_trusted_project() {
    let w = World::new();
    std::fs::create_dir_all(w.cwd().join(".pi")).unwrap();
    // Which version runs: pi 0.87.1 lists its inline `llama` command, 0.73.1 lists none.
    let version = |args: &[&str]| {
        let mut a = vec!["--mode", "rpc", "--no-session"];
        a.extend_from_slice(args);
        let mut p = w.spawn(&a);
        let cmds = p.call(json!({"type":"get_commands"}), "c")["data"]["commands"].clone();
        if cmds.as_array().is_some_and(|c| c.is_empty()) {
            "0.73"
        } else {
            "0.87"
        }
    };
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        r#"{"pith":{"compat":"0.87"}}"#,
    )
    .unwrap();
    // Untrusted (pi 0.87.1's rules): the project's choice is not read.
    assert_eq!(version(&[]), "0.73");
    assert_eq!(version(&["-a"]), "0.87");
    assert_eq!(version(&["-a", "--compat", "0.73"]), "0.73");
    // The other way round: a global 0.87 and a project asking for 0.73.
    w.write_agent_file("settings.json", r#"{"pith":{"compat":"0.87"}}"#);
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        r#"{"pith":{"compat":"0.73"}}"#,
    )
    .unwrap();
    assert_eq!(version(&[]), "0.87");
    assert_eq!(version(&["--approve"]), "0.73");
    let key = std::fs::canonicalize(w.cwd()).unwrap();
    w.write_agent_file(
        "trust.json",
        &json!({ key.to_string_lossy(): true }).to_string(),
    );
    assert_eq!(version(&[]), "0.73");
    assert_eq!(version(&["-na"]), "0.87");
}

// ------------------------------------------------------------------------------------------------
// Tools that change during a run

/// An extension whose `loader` tool registers `late_tool` (with a prompt snippet), then
/// `quiet_tool` (without), then withdraws `loader`, depending on its argument.
const DYN_EXT: &str = r#"L='{"name":"loader","description":"Loads more tools","parameters":{"type":"object","properties":{"which":{"type":"string"}},"required":["which"]}}'
LATE='{"name":"late_tool","description":"A tool registered mid-run","promptSnippet":"Say late things","parameters":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}'
Q='{"name":"quiet_tool","description":"A tool without a snippet","parameters":{"type":"object","properties":{}}}'
tools="$L"
while IFS= read -r line; do
  case "$line" in
    *'"type":"hello"'*) echo "{\"type\":\"register\",\"protocol\":1,\"name\":\"dyn\",\"tools\":[$tools]}";;
    *'"type":"execute_tool"'*)
      id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
      case "$line" in
        *'"which":"late"'*) tools="$tools,$LATE"; w=late;;
        *'"which":"quiet"'*) tools="$tools,$Q"; w=quiet;;
        *) tools="$LATE,$Q"; w=drop;;
      esac
      echo "{\"type\":\"register\",\"protocol\":1,\"name\":\"dyn\",\"tools\":[$tools]}"
      echo "{\"type\":\"result\",\"id\":$id,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"loaded $w\"}]}}";;
  esac
done
"#;

fn loader_turn(n: usize, which: &str) -> Reply {
    let args = format!("{{\"which\":\"{which}\"}}");
    Sse::numbered(n).reply(&[
        text(&["Loading."]),
        tool_call(&format!("toolu_l{n}"), "loader", &[&args]),
    ])
}

#[test]
fn tools_changed_during_a_run_are_declared_before_the_next_turn_under_087() {
    use std::os::unix::fs::PermissionsExt;
    for compat in ["0.73", "0.87"] {
        let (w, srv) = fake_world(vec![
            loader_turn(1, "late"),
            loader_turn(2, "quiet"),
            loader_turn(3, "drop"),
            text_reply(4, &["Done."]),
        ]);
        let ext = w.tmp().join("dyn.sh");
        std::fs::write(&ext, format!("#!/bin/sh\n{DYN_EXT}")).unwrap();
        std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ext = ext.to_string_lossy().into_owned();
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session", "-e", &ext]));
        let frames = run(&mut p, "p1", "load tools");
        // The system messages, without their timestamps, and what precedes each.
        let systems: Vec<(Value, Value)> = frames
            .iter()
            .enumerate()
            .filter(|(_, f)| f["type"] == "message_end" && f["message"]["role"] == "system")
            .map(|(i, f)| {
                let mut m = f["message"].clone();
                m.as_object_mut().unwrap().remove("timestamp");
                (frames[i - 2]["type"].clone(), m)
            })
            .collect();
        let names = |i: usize| -> Vec<String> {
            let body: Value = serde_json::from_str(&srv.requests()[i].body).unwrap();
            body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names(1),
            ["read", "bash", "edit", "write", "loader", "late_tool"]
        );
        assert_eq!(
            names(3),
            ["read", "bash", "edit", "write", "late_tool", "quiet_tool"]
        );
        if compat == "0.73" {
            assert!(systems.is_empty());
            p.finish(Duration::from_secs(5));
            continue;
        }
        assert_eq!(systems.len(), 4);
        assert_eq!(systems[1].0, "turn_start");
        assert_eq!(
            systems[1].1,
            json!({"role":"system","content":"",
                "sections":{"tools":"<tools>\n- read: Read file contents\n- bash: Execute bash commands (ls, grep, find, etc.)\n- edit: Make precise file edits with exact text replacement, including multiple disjoint edits in one call\n- write: Create or overwrite files\n- late_tool: Say late things\n\nIn addition to the tools above, you may have access to other custom tools depending on the project.\n</tools>"},
                "toolsAdded":[{"name":"late_tool","description":"A tool registered mid-run",
                    "parameters":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}]})
        );
        // Only tools: no sections key.
        assert_eq!(systems[2].0, "turn_start");
        assert_eq!(
            systems[2].1,
            json!({"role":"system","content":"",
                "toolsAdded":[{"name":"quiet_tool","description":"A tool without a snippet",
                    "parameters":{"type":"object","properties":{}}}]})
        );
        assert_eq!(
            systems[3].1,
            json!({"role":"system","content":"","toolsRemoved":[{"name":"loader"}]})
        );
        // The request after the first change carries the new prompt.
        let body: Value = serde_json::from_str(&srv.requests()[1].body).unwrap();
        let system = body["system"][0]["text"].as_str().unwrap();
        assert!(
            system.contains("- late_tool: Say late things\n"),
            "{system}"
        );
        // The run's messages include them.
        let end = frames.iter().find(|f| f["type"] == "agent_end").unwrap();
        let roles: Vec<&str> = end["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "toolResult",
                "system",
                "assistant",
                "toolResult",
                "system",
                "assistant",
                "toolResult",
                "system",
                "assistant"
            ]
        );
        p.finish(Duration::from_secs(5));
    }
}

// ------------------------------------------------------------------------------------------------
// stdin end of file

#[test]
fn stdin_eof_under_087_cancels_everything_and_exits_at_once() {
    let marker = format!("pith-eof-{}", std::process::id());
    let (w, _srv) = fake_world(vec![
        text_reply(1, &["First."]),
        text_reply(2, &["one ", "two ", "three ", "four ", "five"])
            .paced(Duration::from_millis(400)),
    ]);
    let dir = sessions_dir(&w);
    let mut p = w.spawn(&fake_rpc(&["--compat", "0.87", "--session-dir", &dir]));
    run(&mut p, "p1", "First");
    let file = p.call(json!({"type":"get_state"}), "s")["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    p.send(json!({"id":"b1","type":"bash","command":format!("sleep 30 # {marker}")}));
    p.send(json!({"id":"p2","type":"prompt","message":"Second"}));
    p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    // stdin ends: nothing more is emitted — no message_end, agent_end or bash response.
    let (status, rest) = p.finish(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    for line in &rest {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(
            v["type"] == "message_update" || v["type"] == "bash_execution_update",
            "{line}"
        );
    }
    // The bash command's process group is gone.
    let out = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The session keeps what was recorded before, and nothing of the cancelled work.
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(last["message"]["role"], "user");
    assert_eq!(last["message"]["content"][0]["text"], "Second");
}

#[test]
fn stdin_eof_under_073_lets_the_run_finish() {
    let (w, _srv) = fake_world(vec![
        text_reply(1, &["one ", "two ", "three"]).paced(Duration::from_millis(50)),
    ]);
    let mut p = w.spawn(&fake_rpc(&["--compat", "0.73", "--no-session"]));
    p.send(json!({"id":"p1","type":"prompt","message":"go"}));
    p.recv_until(|v| v["type"] == "agent_start");
    let (status, rest) = p.finish(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let kinds: Vec<Value> = rest
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].clone())
        .filter(|t| t != "message_update")
        .collect();
    assert_eq!(kinds.last().unwrap(), "agent_settled");
    assert!(kinds.contains(&json!("agent_end")));
}

// ------------------------------------------------------------------------------------------------
// Tools per version

/// One prompt whose reply calls `calls` (`(id, tool, arguments)`) at once; the tool results by
/// call id (`isError` and `result`).
fn tool_results(p: &mut support::Pith) -> std::collections::HashMap<String, (bool, Value)> {
    let frames = run(p, "p1", "go");
    frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .map(|f| {
            (
                f["toolCallId"].as_str().unwrap().to_string(),
                (f["isError"].as_bool().unwrap(), f["result"].clone()),
            )
        })
        .collect()
}

fn calls_reply(calls: &[(&str, &str, Value)]) -> Reply {
    let blocks: Vec<_> = calls
        .iter()
        .map(|(id, name, args)| tool_call(id, name, &[&args.to_string()]))
        .collect();
    Sse::numbered(1).reply(&blocks)
}

/// A 24-bit 2x2 BMP: red, green / blue, white.
const BMP_2X2: &[u8] = &[
    0x42, 0x4d, 0x46, 0, 0, 0, 0, 0, 0, 0, 0x36, 0, 0, 0, 0x28, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 1,
    0, 0x18, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x13, 0x0b, 0, 0, 0x13, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0xff, 0, 0, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0, 0xff, 0, 0, 0,
];

#[test]
fn file_tools_follow_the_version() {
    for compat in ["0.73", "0.87"] {
        let v087 = compat == "0.87";
        let (w, _srv) = fake_world(vec![
            calls_reply(&[
                ("r1", "read", json!({"path":"big.txt"})),
                ("r2", "read", json!({"path":"dot.bmp"})),
                (
                    "e1",
                    "edit",
                    json!({"path":"f.txt","edits":[{"oldText":"say \"hi\" there","newText":"say \"bye\" there"}]}),
                ),
                (
                    "e2",
                    "edit",
                    json!({"path":"g.txt","edits":[{"oldText":"one","newText":"ONE","extra":1}]}),
                ),
            ]),
            text_reply(2, &["ok"]),
        ]);
        let big: String = (1..=2000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(w.cwd().join("big.txt"), &big).unwrap();
        std::fs::write(w.cwd().join("dot.bmp"), BMP_2X2).unwrap();
        std::fs::write(
            w.cwd().join("f.txt"),
            "alpha  \nsay \u{201c}hi\u{201d} there   \nbeta\t \ngamma\n",
        )
        .unwrap();
        std::fs::write(w.cwd().join("g.txt"), "one\ntwo\n").unwrap();
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let r = tool_results(&mut p);
        // read: 2000 lines and a final newline are 2000 lines for 0.87.1, 2001 for 0.73.1.
        let (err, read) = &r["r1"];
        assert!(!err);
        if v087 {
            assert_eq!(read, &json!({"content":[{"type":"text","text": big}]}));
        } else {
            let text = read["content"][0]["text"].as_str().unwrap();
            assert!(
                text.ends_with(
                    "line 2000\n\n[Showing lines 1-2000 of 2001. Use offset=2001 to continue.]"
                ),
                "{text}"
            );
            assert_eq!(read["details"]["truncation"]["totalLines"], 2001);
        }
        // read: a BMP is an image for 0.87.1, converted to PNG.
        let (_, bmp) = &r["r2"];
        if v087 {
            assert_eq!(
                bmp,
                &json!({"content":[
                    {"type":"text","text":"Read image file [image/png]\n[Image converted from image/bmp to image/png.]"},
                    {"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAHUlEQVR4AQESAO3/AP8AAP8A/wD/AAAA////////ScgJ962rVhsAAAAASUVORK5CYII=","mimeType":"image/png"}]})
            );
        } else {
            assert_eq!(bmp["content"].as_array().unwrap().len(), 1);
            assert_eq!(bmp["content"][0]["type"], "text");
        }
        // edit: a fuzzy match rewrites only its own line under 0.87.
        let f = std::fs::read_to_string(w.cwd().join("f.txt")).unwrap();
        if v087 {
            assert_eq!(f, "alpha  \nsay \"bye\" there\nbeta\t \ngamma\n");
        } else {
            assert_eq!(f, "alpha\nsay \"bye\" there\nbeta\ngamma\n");
        }
        // edit: 0.87.1's schema allows more properties.
        let (err, e2) = &r["e2"];
        assert_eq!(*err, !v087, "{e2}");
        let g = std::fs::read_to_string(w.cwd().join("g.txt")).unwrap();
        assert_eq!(g, if v087 { "ONE\ntwo\n" } else { "one\ntwo\n" });
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn the_bash_tool_follows_the_version() {
    for compat in ["0.73", "0.87"] {
        let v087 = compat == "0.87";
        let (w, _srv) = fake_world(vec![
            calls_reply(&[
                ("b1", "bash", json!({"command":"echo before; kill -9 $$"})),
                ("b2", "bash", json!({"command":"echo t0","timeout":0})),
                (
                    "b3",
                    "bash",
                    json!({"command":"echo tbig","timeout":3_000_000}),
                ),
                ("b4", "bash", json!({"command":"seq 2000"})),
            ]),
            text_reply(2, &["ok"]),
        ]);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let r = tool_results(&mut p);
        let text = |id: &str| r[id].1["content"][0]["text"].as_str().unwrap().to_string();
        if v087 {
            assert!(r["b1"].0);
            assert_eq!(text("b1"), "before\n\n\nCommand exited with code 137");
            assert_eq!(
                r["b2"].1,
                json!({"content":[{"type":"text","text":"Invalid timeout: must be a finite number of seconds"}],"details":{}})
            );
            assert_eq!(
                text("b3"),
                "Invalid timeout: maximum is 2147483.647 seconds"
            );
            // 2000 lines and a final newline fit.
            let all: String = (1..=2000).map(|i| format!("{i}\n")).collect();
            assert_eq!(r["b4"].1, json!({"content":[{"type":"text","text": all}]}));
        } else {
            assert_eq!(
                r["b1"],
                (
                    false,
                    json!({"content":[{"type":"text","text":"before\n"}]})
                )
            );
            assert_eq!(text("b2"), "t0\n");
            assert_eq!(text("b3"), "tbig\n");
            assert!(text("b4").starts_with("2\n3\n"));
        }
        // The RPC bash command: a signal is an exit code under 0.87.
        let b = p.call(
            json!({"type":"bash","command":"echo rpc; kill -9 $$"}),
            "rb",
        );
        let data = &b["data"];
        if v087 {
            assert_eq!(data["exitCode"], 137);
            assert_eq!(data["cancelled"], false);
        } else {
            assert!(data.get("exitCode").is_none(), "{b}");
        }
        p.finish(Duration::from_secs(5));
    }
}

// ------------------------------------------------------------------------------------------------
// Strict tool schemas and pi 0.87.1's argument validation

/// The oracle's models.json with `compat` set on every model of `provider`.
fn models_with_compat(w: &World, port: u16, provider: &str, compat: Value) {
    let t = std::fs::read_to_string(support::fixture("config/models.json.tmpl")).unwrap();
    let mut v: Value = serde_json::from_str(&t.replace("{PORT}", &port.to_string())).unwrap();
    for m in v["providers"][provider]["models"].as_array_mut().unwrap() {
        m["compat"] = compat.clone();
    }
    w.write_agent_file("models.json", &v.to_string());
}

#[test]
fn tools_asking_for_constrained_sampling_go_strict_under_087() {
    let read_strict = json!({"type":"object","required":["path","offset","limit"],"properties":{
        "path":{"type":"string","description":"Path to the file to read (relative or absolute)"},
        "offset":{"anyOf":[{"type":"number","description":"Line number to start reading from (1-indexed)"},{"type":"null"}]},
        "limit":{"anyOf":[{"type":"number","description":"Maximum number of lines to read"},{"type":"null"}]}},
        "additionalProperties":false});
    for compat in ["0.73", "0.87"] {
        // OpenAI completions with the model's supportsStrictMode.
        let srv = support::fake_llm::FakeLlm::start(vec![Reply::sse(
            "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".to_string(),
        )]);
        let w = World::new();
        models_with_compat(
            &w,
            srv.port,
            "fake-openai",
            json!({"supportsStrictMode": true}),
        );
        let mut p = w.spawn(&support::fake_rpc_on(
            "fake-oai-model",
            &[
                "--no-session",
                "--compat",
                compat,
                "--provider",
                "fake-openai",
            ],
        ));
        run(&mut p, "p1", "Hi");
        let body: Value = serde_json::from_str(&srv.requests()[0].body).unwrap();
        let read = &body["tools"][0]["function"];
        if compat == "0.87" {
            assert_eq!(read["strict"], true);
            assert_eq!(read["parameters"], read_strict);
            assert_eq!(
                serde_json::to_string(&read["parameters"]).unwrap(),
                serde_json::to_string(&read_strict).unwrap(),
                "key order"
            );
        } else {
            assert_eq!(read["strict"], false);
            assert_eq!(read["parameters"]["required"], json!(["path"]));
        }
        p.finish(Duration::from_secs(5));
        // Anthropic with supportsStrictTools.
        let (w, srv) = fake_world(vec![text_reply(1, &["ok"])]);
        models_with_compat(&w, srv.port, "fake", json!({"supportsStrictTools": true}));
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        run(&mut p, "p1", "Hi");
        let body: Value = serde_json::from_str(&srv.requests()[0].body).unwrap();
        let read = &body["tools"][0];
        if compat == "0.87" {
            assert_eq!(read["strict"], true);
            assert_eq!(read["input_schema"], read_strict);
        } else {
            assert!(read.get("strict").is_none());
        }
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn arguments_are_validated_as_the_version_does() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![
            calls_reply(&[
                (
                    "v1",
                    "read",
                    json!({"path":"a.txt","offset":null,"limit":null}),
                ),
                (
                    "v2",
                    "edit",
                    json!({"path":"a.txt","edits":[{"oldText":"hello"}]}),
                ),
                ("v3", "read", json!({})),
            ]),
            text_reply(2, &["ok"]),
        ]);
        std::fs::write(w.cwd().join("a.txt"), "hello\nworld\n").unwrap();
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let r = tool_results(&mut p);
        let text = |id: &str| r[id].1["content"][0]["text"].as_str().unwrap().to_string();
        if compat == "0.87" {
            assert_eq!(text("v1"), "hello\nworld\n");
            assert!(text("v2").starts_with(
                "Validation failed for tool \"edit\":\n  - edits.0.newText: must have required properties newText\n"
            ));
            assert!(text("v3").starts_with(
                "Validation failed for tool \"read\":\n  - path: must have required properties path\n"
            ));
        } else {
            // pi 0.73.1 validates with TypeBox too, converting a null (here to 0) instead of
            // dropping it.
            assert_eq!(
                text("v1"),
                "\n\n[3 more lines in file. Use offset=1 to continue.]"
            );
            assert!(text("v2").starts_with(
                "Validation failed for tool \"edit\":\n  - edits.0.newText: must have required properties newText\n"
            ));
            assert!(text("v3").starts_with(
                "Validation failed for tool \"read\":\n  - path: must have required properties path\n"
            ));
        }
        p.finish(Duration::from_secs(5));
    }
}

// ------------------------------------------------------------------------------------------------
// Truncated replies ("recoverable length")

/// A reply cut by the output token limit (`max_tokens`).
fn cut_reply(n: usize, blocks: &[support::anthropic::Block]) -> Reply {
    let body = Sse::numbered(n)
        .body(blocks)
        .replace(
            "\"stop_reason\":\"end_turn\"",
            "\"stop_reason\":\"max_tokens\"",
        )
        .replace(
            "\"stop_reason\":\"tool_use\"",
            "\"stop_reason\":\"max_tokens\"",
        );
    Reply::sse(body)
}

#[test]
fn a_truncated_reply_is_compacted_and_retried_under_087() {
    for compat in ["0.73", "0.87"] {
        let (w, srv) = fake_world(vec![
            text_reply(1, &["First reply with some words in it."]),
            cut_reply(2, &[text(&["Cut off"])]),
            text_reply(3, &["Summary of the conversation."]),
            text_reply(4, &["Recovered."]),
        ]);
        w.write_agent_file("settings.json", r#"{"compaction":{"keepRecentTokens":5}}"#);
        let dir = sessions_dir(&w);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--session-dir", &dir]));
        run(
            &mut p,
            "p1",
            "first prompt with enough words to be summarized later on",
        );
        let frames = run(&mut p, "p2", "second");
        let kinds: Vec<String> = frames
            .iter()
            .filter(|f| f["type"] != "message_update")
            .map(|f| f["type"].as_str().unwrap().to_string())
            .collect();
        if compat == "0.87" {
            let end = kinds.iter().position(|k| k == "agent_end").unwrap();
            assert_eq!(
                kinds[end..],
                [
                    "agent_end",
                    "entry_appended",
                    "compaction_start",
                    "compaction_end",
                    "agent_start",
                    "turn_start",
                    "message_start",
                    "message_end",
                    "turn_end",
                    "agent_end",
                    "agent_settled"
                ]
            );
            let ce = frames
                .iter()
                .find(|f| f["type"] == "compaction_end")
                .unwrap();
            assert_eq!(ce["reason"], "overflow");
            assert_eq!(ce["willRetry"], true);
            let last = frames.iter().rfind(|f| f["type"] == "message_end").unwrap();
            assert_eq!(last["message"]["content"][0]["text"], "Recovered.");
            assert_eq!(srv.requests().len(), 4);
        } else {
            assert!(
                !kinds.contains(&"compaction_start".to_string()),
                "{kinds:?}"
            );
            assert_eq!(srv.requests().len(), 2);
        }
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn tool_calls_of_a_truncated_reply_do_not_run_under_087() {
    for compat in ["0.73", "0.87"] {
        let (w, _srv) = fake_world(vec![
            cut_reply(
                1,
                &[tool_call(
                    "toolu_t1",
                    "bash",
                    &["{\"command\":\"echo ran > ran.txt\"}"],
                )],
            ),
            text_reply(2, &["ok"]),
            text_reply(3, &["Summary."]),
            text_reply(4, &["ok"]),
        ]);
        w.write_agent_file("settings.json", r#"{"compaction":{"enabled":false}}"#);
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let r = tool_results(&mut p);
        let ran = w.cwd().join("ran.txt").exists();
        if compat == "0.87" {
            assert!(!ran);
            assert_eq!(
                r["toolu_t1"],
                (
                    true,
                    json!({"content":[{"type":"text","text":"Tool call \"bash\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments."}],"details":{}})
                )
            );
        } else {
            assert!(ran);
            assert!(!r["toolu_t1"].0);
        }
        p.finish(Duration::from_secs(5));
    }
}

// ------------------------------------------------------------------------------------------------
// pi 0.87.1's model table and tiered prices

#[test]
fn the_built_in_models_follow_the_version() {
    for compat in ["0.73", "0.87"] {
        let w = World::new();
        let mut cmd = w.command(&["--mode", "rpc", "--no-session", "--compat", compat]);
        cmd.env("ANTHROPIC_API_KEY", "sk-test");
        let mut p = support::Pith::spawn_cmd(cmd);
        let models = p.call(json!({"type":"get_available_models"}), "m")["data"]["models"].clone();
        let ids: Vec<&str> = models
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        if compat == "0.87" {
            assert_eq!(ids.len(), 15, "{ids:?}");
            assert!(ids.contains(&"claude-opus-4-7"));
            assert!(!ids.contains(&"claude-3-5-haiku-20241022"));
            let sonnet = models
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["id"] == "claude-sonnet-4-6")
                .unwrap();
            assert_eq!(sonnet["promptCache"], json!({"short":300,"long":3600}));
            assert!(sonnet.get("inputLimits").is_some());
        } else {
            assert_eq!(ids.len(), 23, "{ids:?}");
            assert!(ids.contains(&"claude-3-5-haiku-20241022"));
            assert!(models[0].get("inputLimits").is_none());
        }
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn tiered_prices_apply_above_their_threshold_under_087() {
    // A models.json model with a tier above 150 input tokens; the fake reports 100 input tokens
    // first, then 200.
    for compat in ["0.73", "0.87"] {
        let (w, srv) = fake_world(vec![
            text_reply(1, &["One."]),
            Sse {
                input_tokens: 200,
                ..Sse::numbered(2)
            }
            .reply(&[text(&["Two."])]),
        ]);
        let t = std::fs::read_to_string(support::fixture("config/models.json.tmpl")).unwrap();
        let mut v: Value =
            serde_json::from_str(&t.replace("{PORT}", &srv.port.to_string())).unwrap();
        v["providers"]["fake"]["models"][0]["cost"]["tiers"] = json!([{"inputTokensAbove":150,"input":6,"output":30,"cacheRead":0.6,"cacheWrite":7.5}]);
        w.write_agent_file("models.json", &v.to_string());
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session"]));
        let cost = |frames: &[Value]| {
            frames
                .iter()
                .find(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
                .unwrap()["message"]["usage"]["cost"]
                .clone()
        };
        let first = cost(&run(&mut p, "p1", "one"));
        let second = cost(&run(&mut p, "p2", "two"));
        assert_eq!(first["input"], json!(0.00030000000000000003));
        if compat == "0.87" {
            assert_eq!(second["input"], json!(6.0 / 1_000_000.0 * 200.0));
            assert_eq!(second["output"], json!(30.0 / 1_000_000.0 * 2.0));
        } else {
            assert_eq!(second["input"], json!(3.0 / 1_000_000.0 * 200.0));
        }
        let state = p.call(json!({"type":"get_state"}), "s");
        assert_eq!(
            state["data"]["model"]["cost"]["tiers"],
            json!([{"inputTokensAbove":150,"input":6,"output":30,"cacheRead":0.6,"cacheWrite":7.5}])
        );
        p.finish(Duration::from_secs(5));
    }
}

// ------------------------------------------------------------------------------------------------
// Requests with only a prompt (summaries) for models that take system messages mid-conversation

#[test]
fn a_summary_request_keeps_its_prompt_with_a_mid_conversation_model_under_087() {
    // pi 0.87.1 folds a request's prompt into a leading system message; a model whose compat
    // keeps system messages in place reads the prompt from there.
    let (w, srv) = fake_world(vec![
        text_reply(1, &["One."]),
        text_reply(2, &["Two."]),
        text_reply(3, &["Summary."]),
        text_reply(4, &["Prefix summary."]),
    ]);
    w.write_agent_file("settings.json", r#"{"compaction":{"keepRecentTokens":1}}"#);
    models_with_compat(
        &w,
        srv.port,
        "fake",
        json!({"supportsMidConvoSystemMessages": true}),
    );
    let mut p = w.spawn(&fake_rpc(&["--compat", "0.87", "--no-session"]));
    run(&mut p, "p1", "Hello there");
    run(&mut p, "p2", "And again");
    let r = p.call(json!({"type":"compact"}), "c1");
    assert_eq!(r["success"], true, "{r}");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs[2..] {
        let body: Value = serde_json::from_str(&r.body).unwrap();
        let system = body["system"].as_array().expect("a system prompt");
        let text = system.last().unwrap()["text"].as_str().unwrap();
        assert!(
            text.starts_with("You are a context summarization assistant."),
            "{text}"
        );
    }
    // The conversation request kept its own prompt as well.
    let first: Value = serde_json::from_str(&reqs[0].body).unwrap();
    assert!(
        first["system"].as_array().unwrap().last().unwrap()["text"]
            .as_str()
            .unwrap()
            .starts_with("You are an expert coding assistant")
    );
    p.finish(Duration::from_secs(5));
}

#[test]
fn providers_new_in_087_take_their_keys_from_the_environment_under_087_only() {
    for compat in ["0.73", "0.87"] {
        let w = World::new();
        let mut cmd = w.command(&["--mode", "rpc", "--no-session", "--compat", compat]);
        cmd.env("NVIDIA_API_KEY", "nv-test");
        let mut p = support::Pith::spawn_cmd(cmd);
        let models = p.call(json!({"type":"get_available_models"}), "m")["data"]["models"].clone();
        let providers: std::collections::BTreeSet<&str> = models
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["provider"].as_str().unwrap())
            .collect();
        if compat == "0.87" {
            assert_eq!(providers.into_iter().collect::<Vec<_>>(), ["nvidia"]);
        } else {
            assert!(providers.is_empty(), "{providers:?}");
        }
        p.finish(Duration::from_secs(5));
    }
}

/// An extension tool's `promptGuidelines` join the system prompt's guidelines (0.73) or rules
/// (0.87, 1.6) after the built-in tools' and before the two that are always there: trimmed,
/// empty lines and repeats dropped (pi's `_normalizePromptGuidelines`, then the prompt's own
/// de-duplication: "Be concise…" stays once, in its place among the extension's lines).
#[test]
fn extension_tool_guidelines_join_the_system_prompt_in_every_version() {
    use std::os::unix::fs::PermissionsExt;
    const EXT: &str = r#"#!/bin/sh
G='{"name":"greet","description":"Greets","promptSnippet":"Greet people","promptGuidelines":["  Use greet to say hello  ","","Use greet to say hello","Be concise in your responses","Never greet twice"],"parameters":{"type":"object","properties":{}}}'
while IFS= read -r line; do
  case "$line" in
    *'"type":"hello"'*) echo "{\"type\":\"register\",\"protocol\":1,\"name\":\"g\",\"tools\":[$G]}";;
  esac
done
"#;
    for compat in ["0.73", "0.87", "1.6"] {
        let (w, srv) = fake_world(vec![text_reply(1, &["Hi."])]);
        let ext = w.tmp().join("g.sh");
        std::fs::write(&ext, EXT).unwrap();
        std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ext = ext.to_string_lossy().into_owned();
        let mut p = w.spawn(&fake_rpc(&["--compat", compat, "--no-session", "-e", &ext]));
        run(&mut p, "p1", "hello");
        let body: Value = serde_json::from_str(&srv.requests()[0].body).unwrap();
        let system = body["system"][0]["text"].as_str().unwrap();
        let want = "- Use write only for new files or complete rewrites.\n- Use greet to say hello\n- Be concise in your responses\n- Never greet twice\n- Show file paths clearly when working with files\n";
        assert!(system.contains(want), "{compat}: {system}");
        assert!(system.contains("- greet: Greet people\n"), "{compat}");
        p.finish(Duration::from_secs(5));
    }
}
