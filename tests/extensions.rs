//! Extensions over JSON lines (docs/extensions.md), driven through the real binary: the two
//! shipped examples (`docs/examples/toolkit.py`, `docs/examples/protect.sh`), UI dialogs relayed
//! to the host and routed back, dialog timeouts, unknown response ids, extensions that crash,
//! hang, write garbage or flood, session operations they cancel, and `--confirm-tools`.
//! The model is the offline `faux` provider with a script.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::frames::{answer, keys, settle, tool_end, ui};
use support::procs::{assert_no_process_within, pgrep, unique_marker};
use support::{Pith, World, faux, faux_mode};

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples")
        .join(name)
        .to_string_lossy()
        .to_string()
}

/// `--mode rpc` on the faux provider with `script`, then `extra`.
fn spawn(world: &World, script: &str, extra: &[&str]) -> Pith {
    world.spawn_faux(script, extra)
}

/// An executable `/bin/sh` script in the world's tmp dir; returns its path.
fn script(world: &World, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = world.tmp().join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_string_lossy().to_string()
}

/// Processes whose command line has `marker`, other than pith (whose `-e` argument has it too).
fn ext_pids(marker: &str, pith: &Pith) -> Vec<String> {
    let me = pith.pid().to_string();
    pgrep(marker).into_iter().filter(|p| *p != me).collect()
}

fn assert_ext_gone(marker: &str, pith: &Pith) {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while !ext_pids(marker, pith).is_empty() {
        assert!(std::time::Instant::now() < until, "{marker} still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn settings(world: &World, v: Value) {
    world.write_agent_file("settings.json", &v.to_string());
}

/// The next `extension_ui_request` of `method`, skipping the toolkit's per-turn status lines
/// (notifications are handled asynchronously: they may come after `agent_settled`).
fn ui_after_turn_status(p: &mut Pith, method: &str) -> Value {
    loop {
        let f = p.recv();
        if f["method"] == "setStatus"
            && f["statusText"]
                .as_str()
                .is_some_and(|t| t.starts_with("turn "))
        {
            continue;
        }
        assert_eq!(f["type"], "extension_ui_request", "{f}");
        assert_eq!(f["method"], method, "{f}");
        return f;
    }
}

fn text_of(end: &Value) -> &str {
    end["result"]["content"][0]["text"].as_str().unwrap_or("")
}

#[test]
fn get_commands_lists_extension_commands_once_registered() {
    need_python!("docs/examples/toolkit.py needs it");
    let w = World::new();
    let mut p = spawn(
        &w,
        "",
        &["-e", &example("toolkit.py"), "-e", &example("protect.sh")],
    );
    // Asked at once: answered when both have registered.
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(
        r["data"]["commands"],
        json!([
            {"name":"hello","description":"Greet someone, using every UI method","source":"extension","path":example("toolkit.py")},
            {"name":"pick","description":"Ask a question that times out","source":"extension","path":example("toolkit.py")},
            {"name":"protect","description":"Say what protect blocks","source":"extension","path":example("protect.sh")},
        ])
    );
}

#[test]
fn get_commands_under_087_carries_source_info() {
    let w = World::new();
    let mut p = spawn(&w, "", &["--compat", "0.87", "-e", &example("protect.sh")]);
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(
        r["data"]["commands"],
        json!([{"name":"protect","description":"Say what protect blocks","source":"extension",
            "sourceInfo":{"path":example("protect.sh"),"source":"cli","scope":"temporary","origin":"top-level"}},
            // pi 0.87.1's built-in inline extension loads after the configured ones.
            {"name":"llama","description":"Manage llama.cpp router models","source":"extension",
            "sourceInfo":{"path":"<inline:llama.cpp>","source":"inline","scope":"temporary","origin":"top-level"}}])
    );
}

#[test]
fn toolkit_tool_runs_and_rm_rf_is_blocked() {
    need_python!("docs/examples/toolkit.py needs it");
    let w = World::new();
    let script = r#"{"toolCalls":[{"name":"bash","arguments":{"command":"rm -rf build"}},{"name":"count_words","arguments":{"text":"one two three"}}]}
{"text":"ok"}
"#;
    let mut p = spawn(&w, script, &["-e", &example("toolkit.py")]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let blocked = tool_end(&frames, "faux_1_0");
    assert_eq!(blocked["isError"], true);
    assert_eq!(text_of(blocked), "toolkit: rm -rf is not allowed");
    let notify = frames
        .iter()
        .find(|f| f["method"] == "notify")
        .expect("notify");
    assert_eq!(
        keys(notify),
        vec!["type", "id", "method", "message", "notifyType"]
    );
    assert_eq!(notify["message"], "Blocked: rm -rf build");
    let update = frames
        .iter()
        .find(|f| f["type"] == "tool_execution_update")
        .expect("update");
    assert_eq!(
        update["partialResult"],
        json!({"content":[{"type":"text","text":"counting..."}]})
    );
    let counted = tool_end(&frames, "faux_1_1");
    assert_eq!(
        counted["result"],
        json!({"content":[{"type":"text","text":"3 words"}],"details":{"words":3}})
    );
    assert_eq!(counted["isError"], false);
    // The model saw the block as the tool's error result.
    let msgs = support::frames::messages(&mut p);
    let results: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "toolResult").collect();
    assert_eq!(
        results[0]["content"][0]["text"],
        "toolkit: rm -rf is not allowed"
    );
    assert!(!w.cwd().join("build").exists());
}

#[test]
fn hello_command_uses_every_ui_method_and_other_commands_are_not_blocked() {
    need_python!("docs/examples/toolkit.py needs it");
    let w = World::new();
    let mut p = spawn(&w, "", &["-e", &example("toolkit.py")]);
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"h","type":"prompt","message":"/hello Ada"}));

    let select = ui(&mut p, "select");
    assert_eq!(
        keys(&select),
        vec!["type", "id", "method", "title", "options"]
    );
    assert_eq!(select["title"], "Pick a color");
    assert_eq!(select["options"], json!(["red", "green", "blue"]));
    // While the dialog waits, commands are answered.
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["success"], true);
    // An unknown id is ignored: no frame, no error.
    p.send(json!({"type":"extension_ui_response","id":"not-a-request","value":"red"}));
    p.assert_quiet(Duration::from_millis(200));
    answer(&mut p, &select, json!({"value":"green"}));

    let confirm = ui(&mut p, "confirm");
    assert_eq!(
        keys(&confirm),
        vec!["type", "id", "method", "title", "message"]
    );
    assert_eq!(confirm["title"], "Greet Ada?");
    assert_ne!(confirm["id"], select["id"]);
    answer(&mut p, &confirm, json!({"confirmed":true}));

    let input = ui(&mut p, "input");
    assert_eq!(
        keys(&input),
        vec!["type", "id", "method", "title", "placeholder"]
    );
    answer(&mut p, &input, json!({"value":"Ace"}));

    let editor = ui(&mut p, "editor");
    assert_eq!(
        keys(&editor),
        vec!["type", "id", "method", "title", "prefill"]
    );
    assert_eq!(editor["prefill"], "Dear Ada,\n");
    answer(&mut p, &editor, json!({"value":"Dear Ada, hi"}));
    // The same id again: already answered, ignored.
    answer(&mut p, &editor, json!({"value":"twice"}));

    let notify = ui(&mut p, "notify");
    assert_eq!(notify["message"], "Hello, Ada!");
    assert_eq!(notify["notifyType"], "info");
    let status = ui(&mut p, "setStatus");
    assert_eq!(
        keys(&status),
        vec!["type", "id", "method", "statusKey", "statusText"]
    );
    assert_eq!(status["statusText"], "greeted Ada");
    let widget = ui(&mut p, "setWidget");
    assert_eq!(
        keys(&widget),
        vec![
            "type",
            "id",
            "method",
            "widgetKey",
            "widgetLines",
            "widgetPlacement"
        ]
    );
    assert_eq!(
        widget["widgetLines"],
        json!(["color: green", "nickname: Ace"])
    );
    let title = ui(&mut p, "setTitle");
    assert_eq!(title["title"], "pith - greeting Ada");
    let text = ui(&mut p, "set_editor_text");
    assert_eq!(keys(&text), vec!["type", "id", "method", "text"]);
    assert_eq!(text["text"], "Dear Ada, hi");
    let ids: Vec<&Value> = [
        &select, &confirm, &input, &editor, &notify, &status, &widget, &title, &text,
    ]
    .iter()
    .map(|f| &f["id"])
    .collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "every request has a fresh id");

    // send_message: a custom message enters the conversation.
    let start = p.recv();
    assert_eq!(start["type"], "message_start");
    assert_eq!(start["message"]["role"], "custom");
    assert_eq!(start["message"]["customType"], "toolkit-greeting");
    assert_eq!(start["message"]["content"], "Greeted Ada");
    assert_eq!(start["message"]["details"], json!({"color":"green"}));
    assert_eq!(p.recv()["type"], "message_end");
    let r = p.recv();
    assert_eq!(
        r,
        json!({"id":"h","type":"response","command":"prompt","success":true})
    );
    let msgs = support::frames::messages(&mut p);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["role"], "custom");
}

#[test]
fn a_dialog_times_out_with_its_default_and_a_late_answer_is_ignored() {
    need_python!("docs/examples/toolkit.py needs it");
    let w = World::new();
    let mut p = spawn(&w, "", &["-e", &example("toolkit.py")]);
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"k","type":"prompt","message":"/pick 300"}));
    let select = ui(&mut p, "select");
    assert_eq!(
        keys(&select),
        vec!["type", "id", "method", "title", "options", "timeout"]
    );
    assert_eq!(select["timeout"], 300);
    // Nobody answers: pith resolves it after 300 ms and the extension hears "timed out".
    let notify = ui(&mut p, "notify");
    assert_eq!(notify["message"], "pick: no answer in time");
    assert_eq!(p.recv()["id"], "k");
    answer(&mut p, &select, json!({"value":"this"}));
    p.assert_quiet(Duration::from_millis(200));
    // Dismissed (cancelled) rather than answered:
    p.send(json!({"id":"k2","type":"prompt","message":"/pick 60000"}));
    let select = ui(&mut p, "select");
    answer(&mut p, &select, json!({"cancelled":true}));
    assert_eq!(ui(&mut p, "notify")["message"], "pick: dismissed");
}

#[test]
fn a_session_switch_is_cancelled_after_a_confirm() {
    need_python!("docs/examples/toolkit.py needs it");
    let w = World::new();
    let mut p = spawn(&w, "{\"text\":\"hi\"}\n", &["-e", &example("toolkit.py")]);
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"p","type":"prompt","message":"hello"}));
    settle(&mut p);
    let before = p.call(json!({"type":"get_state"}), "s1")["data"]["sessionId"].clone();

    p.send(json!({"id":"n1","type":"new_session"}));
    let c = ui_after_turn_status(&mut p, "confirm");
    assert_eq!(c["title"], "Leave this session?");
    assert_eq!(c["message"], "reason: new");
    answer(&mut p, &c, json!({"confirmed":false}));
    let r = p.recv();
    assert_eq!(
        r,
        json!({"id":"n1","type":"response","command":"new_session","success":true,"data":{"cancelled":true}})
    );
    let same = p.call(json!({"type":"get_state"}), "s2")["data"]["sessionId"].clone();
    assert_eq!(same, before);
    assert_eq!(support::frames::messages(&mut p).len(), 2);

    // switch_session: same question, reason "resume"; confirmed this time.
    let file = p.call(json!({"type":"get_state"}), "s3")["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    p.send(json!({"id":"sw","type":"switch_session","sessionPath":file}));
    let c = ui_after_turn_status(&mut p, "confirm");
    assert_eq!(c["message"], "reason: resume");
    answer(&mut p, &c, json!({"confirmed":true}));
    let r = p.recv();
    assert_eq!(r["data"], json!({"cancelled":false}));

    p.send(json!({"id":"n2","type":"new_session"}));
    let c = ui_after_turn_status(&mut p, "confirm");
    answer(&mut p, &c, json!({"confirmed":true}));
    assert_eq!(p.recv()["data"], json!({"cancelled":false}));
    let after = p.call(json!({"type":"get_state"}), "s4")["data"]["sessionId"].clone();
    assert_ne!(after, before);
}

#[test]
fn fork_and_clone_carry_cancelled_from_session_before_fork() {
    let w = World::new();
    let ext = script(
        &w,
        "nofork.sh",
        r#"read hello
echo '{"type":"register","protocol":1,"events":["session_before_fork"]}'
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^{"type":"event","id":\([0-9]*\),.*/\1/p')
  [ -n "$id" ] && echo '{"type":"result","id":'"$id"',"result":{"cancel":true}}'
done
"#,
    );
    let mut p = spawn(&w, "{\"text\":\"a\"}\n{\"text\":\"b\"}\n", &["-e", &ext]);
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"p1","type":"prompt","message":"first"}));
    settle(&mut p);
    p.send(json!({"id":"p2","type":"prompt","message":"second"}));
    settle(&mut p);
    let fm = p.call(json!({"type":"get_fork_messages"}), "fm");
    let entry = fm["data"]["messages"][1]["entryId"].clone();
    let r = p.call(json!({"type":"fork","entryId":entry}), "f");
    assert_eq!(r["data"], json!({"cancelled":true}));
    let r = p.call(json!({"type":"clone"}), "c");
    assert_eq!(r["data"], json!({"cancelled":true}));
    assert_eq!(support::frames::messages(&mut p).len(), 4);
}

#[test]
fn without_extensions_session_responses_say_not_cancelled() {
    let w = World::new();
    let mut p = spawn(&w, "{\"text\":\"a\"}\n{\"text\":\"b\"}\n", &[]);
    p.send(json!({"id":"p1","type":"prompt","message":"first"}));
    settle(&mut p);
    p.send(json!({"id":"p2","type":"prompt","message":"second"}));
    settle(&mut p);
    // Forked after the first reply: the new session holds it, so it is written and can be
    // cloned (a branch without a reply is not written yet, and pi cannot clone it).
    let fm = p.call(json!({"type":"get_fork_messages"}), "fm");
    let entry = fm["data"]["messages"][1]["entryId"].clone();
    let r = p.call(json!({"type":"fork","entryId":entry}), "f");
    assert_eq!(r["data"], json!({"text":"second","cancelled":false}));
    assert_eq!(
        p.call(json!({"type":"clone"}), "c")["data"],
        json!({"cancelled":false})
    );
    assert_eq!(
        p.call(json!({"type":"new_session"}), "n")["data"],
        json!({"cancelled":false})
    );
}

#[test]
fn protect_sh_blocks_runs_its_tool_and_command_and_guards_switches() {
    let w = World::new();
    let script = r#"{"toolCalls":[{"name":"bash","arguments":{"command":"cd / && rm -rf tmp/x"}},{"name":"clock","arguments":{}},{"name":"bash","arguments":{"command":"echo fine"}}]}
{"text":"ok"}
"#;
    let mut p = spawn(&w, script, &["-e", &example("protect.sh")]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let blocked = tool_end(&frames, "faux_1_0");
    assert_eq!(blocked["isError"], true);
    assert_eq!(text_of(blocked), "protect: rm -rf is not allowed here");
    let status = frames
        .iter()
        .find(|f| f["method"] == "setStatus")
        .expect("status");
    assert_eq!(status["statusText"], "blocked 1");
    let clock = tool_end(&frames, "faux_1_1");
    assert_eq!(clock["isError"], false);
    assert!(text_of(clock).ends_with('Z'), "{clock}");
    assert_eq!(text_of(tool_end(&frames, "faux_1_2")), "fine\n");

    p.send(json!({"id":"c","type":"prompt","message":"/protect"}));
    let n = ui(&mut p, "notify");
    assert_eq!(
        n["message"],
        "protect: rm -rf is blocked (1 so far); session switches need a confirmation"
    );
    assert_eq!(p.recv()["id"], "c");

    p.send(json!({"id":"n","type":"new_session"}));
    let c = ui(&mut p, "confirm");
    assert_eq!(c["title"], "Leave this session?");
    answer(&mut p, &c, json!({"cancelled":true}));
    assert_eq!(p.recv()["data"], json!({"cancelled":true}));
}

#[test]
fn extension_commands_run_while_streaming_and_cannot_be_queued() {
    let w = World::new();
    let script = "{\"text\":\"a long answer, slowly\",\"delayMs\":100}\n";
    let mut p = spawn(&w, script, &["-e", &example("protect.sh")]);
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    p.recv_until(|f| f["type"] == "message_update");
    // No streamingBehavior needed: the command runs at once.
    p.send(json!({"id":"c","type":"prompt","message":"/protect"}));
    let frames = p.recv_until(|f| f["id"] == "c");
    assert!(frames.iter().any(|f| f["method"] == "notify"));
    assert_eq!(frames.last().unwrap()["success"], true);
    let r = p.call(json!({"type":"steer","message":"/protect now"}), "s");
    assert_eq!(
        r["error"],
        "Extension command \"/protect\" cannot be queued. Use prompt() or execute the command when not streaming."
    );
    let frames = settle(&mut p);
    assert!(frames.iter().any(|f| f["type"] == "agent_end"));
}

/// An extension that registers for `tool_call` and then behaves as `then`.
fn misbehaving(w: &World, name: &str, then: &str) -> String {
    script(
        w,
        name,
        &format!(
            "read hello\necho '{{\"type\":\"register\",\"protocol\":1,\"name\":\"{name}\",\"events\":[\"tool_call\"]}}'\n{then}"
        ),
    )
}

const ONE_BASH: &str = "{\"toolCalls\":[{\"name\":\"bash\",\"arguments\":{\"command\":\"echo ran\"}}]}\n{\"text\":\"after\"}\n{\"text\":\"again\"}\n";

#[test]
fn an_extension_that_crashes_is_reported_and_isolated() {
    let w = World::new();
    let ext = misbehaving(&w, "crash", "read event\nexit 3\n");
    let mut p = spawn(&w, ONE_BASH, &["-e", &ext]);
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert_eq!(
        *err,
        json!({"type":"extension_error","extensionPath":ext,"event":"process","error":"exited (exit code 3)"})
    );
    let end = tool_end(&frames, "faux_1_0");
    assert_eq!(
        text_of(end),
        "Extension failed, blocking execution: crash: exited (exit code 3)"
    );
    assert!(frames.iter().any(|f| f["type"] == "agent_end"));
    // pith still answers; the extension is gone, so tools run without asking it.
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
    p.send(json!({"id":"p2","type":"prompt","message":"again"}));
    let frames = settle(&mut p);
    assert!(!frames.iter().any(|f| f["type"] == "extension_error"));
}

#[test]
fn an_extension_that_hangs_times_out_and_is_killed() {
    let w = World::new();
    settings(&w, json!({"pith":{"extensionTimeoutSeconds":2}}));
    let marker = unique_marker("hang");
    let ext = misbehaving(&w, &marker, "while read l; do :; done\n");
    let mut p = spawn(&w, ONE_BASH, &["-e", &ext]);
    p.call(json!({"type":"get_commands"}), "ready");
    assert_eq!(ext_pids(&marker, &p).len(), 1);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert_eq!(err["event"], "tool_call");
    assert_eq!(err["error"], "did not answer tool_call within 2 seconds");
    assert_eq!(tool_end(&frames, "faux_1_0")["isError"], true);
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
    assert_ext_gone(&marker, &p);
}

#[test]
fn an_extension_that_writes_garbage_is_isolated() {
    let w = World::new();
    let ext = misbehaving(
        &w,
        "garbage",
        "echo 'this is not json'\nwhile read l; do :; done\n",
    );
    let mut p = spawn(&w, ONE_BASH, &["-e", &ext]);
    let err = p.recv();
    assert_eq!(err["type"], "extension_error");
    assert_eq!(err["extensionPath"], ext.as_str());
    assert_eq!(err["event"], "protocol");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .starts_with("wrote a line that is not JSON"),
        "{err}"
    );
    // Isolated: the tool call is not asked about any more, and pith answers.
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    assert_eq!(text_of(tool_end(&frames, "faux_1_0")), "ran\n");
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
}

#[test]
fn an_extension_that_floods_is_isolated() {
    let w = World::new();
    let ext = misbehaving(
        &w,
        "flood",
        "while :; do echo '{\"type\":\"ui\",\"method\":\"notify\",\"message\":\"spam\"}'; done\n",
    );
    let mut p = spawn(&w, "", &["-e", &ext]);
    let frames = p.recv_until(|f| f["type"] == "extension_error");
    let err = frames.last().unwrap();
    assert_eq!(err["event"], "protocol");
    assert_eq!(
        err["error"],
        "flooded pith with more than 1000 messages in one second"
    );
    assert!(frames.len() <= 1001, "{} frames", frames.len());
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
}

/// An extension that stops reading while big events come its way (a 17 MiB prompt: its
/// `message_start` and `message_end` carry it whole) is isolated once 32 MiB wait for it, long
/// before its 1024-message limit: the queue is bounded by bytes, not only by count.
#[test]
fn an_extension_that_stops_reading_big_events_is_isolated() {
    let w = World::new();
    let marker = unique_marker("deaf");
    let ext = script(
        &w,
        &marker,
        "read hello\necho '{\"type\":\"register\",\"protocol\":1,\"name\":\"deaf\",\"events\":[\"message_start\",\"message_end\"]}'\nsleep 60\n",
    );
    let mut p = spawn(&w, "{\"text\":\"one\"}\n", &["-e", &ext]);
    p.call(json!({"type":"get_commands"}), "ready");
    // Its message_start is accepted alone (the queue is empty), its message_end is one too many.
    let line = format!(
        "{{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"{}\"}}\n",
        "x".repeat(17 << 20)
    );
    p.send_raw(line.as_bytes());
    let frames = settle(&mut p);
    let err = match frames.iter().find(|f| f["type"] == "extension_error") {
        Some(e) => e.clone(),
        None => p
            .recv_until(|f| f["type"] == "extension_error")
            .pop()
            .unwrap(),
    };
    assert_eq!(
        err,
        json!({"type":"extension_error","extensionPath":ext,"event":"protocol",
            "error":"does not read its input (1024 messages or 32 MiB queued)"})
    );
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
    assert_ext_gone(&marker, &p);
}

#[test]
fn an_extension_that_cannot_start_or_register_is_reported() {
    let w = World::new();
    settings(&w, json!({"pith":{"extensionTimeoutSeconds":3}}));
    let not_exec = script(&w, "bad.sh", "");
    std::fs::write(&not_exec, "#!/nonexistent/interpreter\n").unwrap();
    let silent = script(&w, "silent.sh", "sleep 30\n");
    let old = script(
        &w,
        "old.sh",
        "read hello\necho '{\"type\":\"register\",\"protocol\":0}'\nsleep 30\n",
    );
    let mut p = spawn(&w, "", &["-e", &not_exec, "-e", &silent, "-e", &old]);
    let mut errors = Vec::new();
    while errors.len() < 3 {
        let f = p.recv();
        if f["type"] == "extension_error" {
            errors.push(f);
        }
    }
    errors.sort_by_key(|e| e["extensionPath"].as_str().unwrap().to_string());
    assert_eq!(errors[0]["extensionPath"], not_exec.as_str());
    assert_eq!(errors[0]["event"], "startup");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("cannot start")
    );
    assert_eq!(errors[1]["extensionPath"], old.as_str());
    assert_eq!(
        errors[1]["error"],
        "register: unsupported protocol 0 (pith speaks protocol 1)"
    );
    assert_eq!(errors[2]["extensionPath"], silent.as_str());
    assert_eq!(errors[2]["error"], "did not register within 3 seconds");
    assert_eq!(
        p.call(json!({"type":"get_commands"}), "c")["data"],
        json!({"commands":[]})
    );
}

#[test]
fn an_extension_stderr_goes_to_pith_stderr_not_stdout() {
    let w = World::new();
    let ext = script(
        &w,
        "talk.sh",
        "echo 'EXT-SAYS-HELLO-ON-STDERR' >&2\nread hello\necho '{\"type\":\"register\",\"protocol\":1}'\nwhile read l; do :; done\n",
    );
    let mut child = w
        .command(&faux(&["-e", &ext]))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"id\":\"c\",\"type\":\"get_commands\"}\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("EXT-SAYS-HELLO-ON-STDERR"), "{stderr}");
    assert!(!stdout.contains("EXT-SAYS"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
}

#[test]
fn extensions_are_stopped_with_pith() {
    let w = World::new();
    let marker = unique_marker("stop");
    let ext = script(
        &w,
        &marker,
        "read hello\necho '{\"type\":\"register\",\"protocol\":1}'\ntrap '' TERM\nwhile :; do sleep 1; done\n",
    );
    let mut p = spawn(&w, "", &["-e", &ext]);
    p.call(json!({"type":"get_commands"}), "ready");
    assert_eq!(ext_pids(&marker, &p).len(), 1);
    let (status, _) = p.finish(Duration::from_secs(10));
    assert!(status.success());
    assert_no_process_within(&marker, Duration::from_secs(5));
}

#[test]
fn settings_extensions_load_and_no_extensions_skips_them() {
    let w = World::new();
    let ext = script(
        &w,
        "fromsettings.sh",
        "read hello\necho '{\"type\":\"register\",\"protocol\":1,\"commands\":[{\"name\":\"mine\"}]}'\nwhile read l; do :; done\n",
    );
    settings(&w, json!({"extensions":[ext]}));
    let mut p = spawn(&w, "", &[]);
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(
        r["data"]["commands"],
        json!([{"name":"mine","source":"extension","path":ext}])
    );
    drop(p);
    let mut p = spawn(&w, "", &["--no-extensions"]);
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(r["data"]["commands"], json!([]));
}

// ---- --confirm-tools -----------------------------------------------------------------------

#[test]
fn confirm_tools_allow_deny_cancel_timeout_and_unlisted() {
    let w = World::new();
    std::fs::write(w.cwd().join("notes.txt"), "some notes\n").unwrap();
    let script = r#"{"toolCalls":[{"name":"bash","arguments":{"command":"echo allowed"}},{"name":"write","arguments":{"path":"denied.txt","content":"no\n"}},{"name":"read","arguments":{"path":"notes.txt"}}]}
{"toolCalls":[{"name":"write","arguments":{"path":"cancelled.txt","content":"no\n"}},{"name":"bash","arguments":{"command":"touch timed-out"}}]}
{"text":"done"}
"#;
    let mut p = spawn(
        &w,
        script,
        &["--confirm-tools", "bash,write", "--confirm-timeout", "1"],
    );
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let bash = f.last().unwrap().clone();
    assert_eq!(
        keys(&bash),
        vec!["type", "id", "method", "title", "message", "timeout"]
    );
    assert_eq!(bash["method"], "confirm");
    assert_eq!(bash["title"], "Allow bash?");
    assert_eq!(bash["message"], "Run this command:\necho allowed");
    assert_eq!(bash["timeout"], 1000);
    // The dialog waits; the next call's start has not been emitted yet (calls are asked in order).
    assert!(!f.iter().any(|x| x["toolCallId"] == "faux_1_1"));
    answer(&mut p, &bash, json!({"confirmed":true}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    // Each decision is an event (`--confirm-tools` names stand for ask rules).
    assert_eq!(
        f[0],
        json!({"type":"permission_decision","toolCallId":"faux_1_0","toolName":"bash","decision":"allow","by":"host","rule":"bash"})
    );
    assert_eq!(f[1]["toolCallId"], "faux_1_1");
    let write = f.last().unwrap().clone();
    assert_eq!(write["title"], "Allow write?");
    assert_eq!(write["message"], "Write 3 bytes to denied.txt:\nno\n");
    answer(&mut p, &write, json!({"confirmed":false}));
    // read is not listed: no dialog.
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let cancelled = f.last().unwrap().clone();
    assert_eq!(cancelled["title"], "Allow write?");
    answer(&mut p, &cancelled, json!({"cancelled":true}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let timed = f.last().unwrap().clone();
    assert_eq!(timed["title"], "Allow bash?");
    // No answer: denied after one second.
    let mut frames: Vec<Value> = p.seen.clone();
    frames.extend(settle(&mut p));
    assert_eq!(text_of(tool_end(&frames, "faux_1_0")), "allowed\n");
    let denied = tool_end(&frames, "faux_1_1");
    assert_eq!(denied["isError"], true);
    assert_eq!(
        text_of(denied),
        "Tool call denied: the user declined to run write."
    );
    assert_eq!(text_of(tool_end(&frames, "faux_1_2")), "some notes\n");
    assert_eq!(
        text_of(tool_end(&frames, "faux_5_0")),
        "Tool call denied: the confirmation for write was cancelled."
    );
    assert_eq!(
        text_of(tool_end(&frames, "faux_5_1")),
        "Tool call denied: no confirmation for bash within 1 seconds."
    );
    assert!(!w.cwd().join("denied.txt").exists());
    assert!(!w.cwd().join("cancelled.txt").exists());
    assert!(!w.cwd().join("timed-out").exists());
    let decisions: Vec<Value> = frames
        .iter()
        .filter(|f| f["type"] == "permission_decision")
        .map(|f| json!([f["toolCallId"], f["decision"], f["by"], f["rule"]]))
        .collect();
    assert_eq!(
        decisions,
        vec![
            json!(["faux_1_0", "allow", "host", "bash"]),
            json!(["faux_1_1", "deny", "host", "write"]),
            json!(["faux_1_2", "allow", "default", null]),
            json!(["faux_5_0", "deny", "host", "write"]),
            json!(["faux_5_1", "deny", "timeout", "bash"]),
        ]
    );
    // The run went on to its end.
    assert!(frames.iter().any(|f| f["type"] == "agent_end"));
    // A late answer to the timed-out dialog is ignored.
    answer(&mut p, &timed, json!({"confirmed":true}));
    p.assert_quiet(Duration::from_millis(200));
}

#[test]
fn confirm_tools_from_settings_and_abort_while_asking() {
    let w = World::new();
    settings(&w, json!({"pith":{"confirmTools":["bash"]}}));
    let script = r#"{"toolCalls":[{"name":"bash","arguments":{"command":"touch aborted"}},{"name":"bash","arguments":{"command":"touch never"}}]}
"#;
    let mut p = spawn(&w, script, &[]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    assert_eq!(d["timeout"], 60000);
    p.send(json!({"id":"a","type":"abort"}));
    let frames = p.recv_until(|f| f["id"] == "a");
    assert_eq!(text_of(tool_end(&frames, "faux_1_0")), "Operation aborted");
    assert_eq!(text_of(tool_end(&frames, "faux_1_1")), "Operation aborted");
    assert!(frames.iter().any(|f| f["type"] == "agent_end"));
    assert!(!w.cwd().join("aborted").exists());
}

#[test]
fn confirm_tools_in_print_mode_denies() {
    let w = World::new();
    std::fs::write(
        w.cwd().join("faux.jsonl"),
        "{\"toolCalls\":[{\"name\":\"bash\",\"arguments\":{\"command\":\"touch x\"}}]}\n{\"text\":\"ok\"}\n",
    )
    .unwrap();
    let out = w
        .command(&faux_mode(
            "json",
            &[
                "--no-session",
                "--faux-script",
                "faux.jsonl",
                "--confirm-tools",
                "all",
                "go",
            ],
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Tool call denied: bash needs confirmation (--confirm-tools) and no host can answer in this mode."),
        "{stdout}"
    );
    assert!(!stdout.contains("extension_ui_request"));
    assert!(!w.cwd().join("x").exists());
}

#[test]
fn messages_reviews_overrides_and_dialogs_at_end_of_input() {
    let w = World::new();
    let ext = script(
        &w,
        "relay.sh",
        r#"read hello
echo '{"type":"register","protocol":1,"tools":[{"name":"read","description":"Read, from the extension","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],"commands":[{"name":"nudge"},{"name":"later"},{"name":"ask"}],"events":["tool_result"]}'
id_of() { printf '%s\n' "$1" | sed -n 's/^{"type":"[a-z_]*","id":\([0-9]*\),.*/\1/p'; }
while IFS= read -r line; do
  case $line in
  '{"type":"event","id":'*) echo '{"type":"result","id":'"$(id_of "$line")"',"result":{"details":{"reviewed":true}}}' ;;
  '{"type":"execute_tool","id":'*) echo '{"type":"result","id":'"$(id_of "$line")"',"result":{"content":"from extension"}}' ;;
  '{"type":"command","id":'*'"name":"nudge"'*)
    echo '{"type":"send_message","message":{"customType":"nudge","content":"nudged"},"triggerTurn":true}'
    echo '{"type":"result","id":'"$(id_of "$line")"'}' ;;
  '{"type":"command","id":'*'"name":"later"'*)
    echo '{"type":"send_message","message":{"customType":"note","content":"next-turn note","display":false},"deliverAs":"nextTurn"}'
    echo '{"type":"result","id":'"$(id_of "$line")"'}' ;;
  '{"type":"command","id":'*'"name":"ask"'*)
    id=$(id_of "$line")
    echo '{"type":"ui","method":"confirm","id":"q","title":"Still there?"}'
    while IFS= read -r answer; do
      case $answer in '{"type":"ui_response","id":"q"'*) break ;; esac
    done
    msg=$(printf '%s' "$answer" | sed 's/"/'"'"'/g')
    echo '{"type":"ui","method":"notify","message":"'"$msg"'"}'
    echo '{"type":"result","id":'"$id"'}' ;;
  esac
done
"#,
    );
    let script = r#"{"toolCalls":[{"name":"read","arguments":{"path":"anything"}},{"name":"bash","arguments":{"command":"echo hi"}}]}
{"text":"read it"}
{"text":"nudge answer"}
"#;
    let mut p = spawn(&w, script, &["-e", &ext]);
    p.call(json!({"type":"get_commands"}), "ready");
    // nextTurn: kept for the next prompt, after its user message.
    assert_eq!(
        p.call(json!({"type":"prompt","message":"/later"}), "l")["success"],
        true
    );
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let starts: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "message_start")
        .map(|f| &f["message"])
        .collect();
    assert_eq!(starts[0]["role"], "user");
    assert_eq!(starts[1]["role"], "custom");
    assert_eq!(starts[1]["content"], "next-turn note");
    assert_eq!(starts[1]["display"], false);
    // The extension's `read` replaced the built-in; tool_result reviews added details.
    assert_eq!(
        tool_end(&frames, "faux_2_0")["result"],
        json!({"content":[{"type":"text","text":"from extension"}],"details":{"reviewed":true}})
    );
    assert_eq!(
        tool_end(&frames, "faux_2_1")["result"],
        json!({"content":[{"type":"text","text":"hi\n"}],"details":{"reviewed":true}})
    );
    // triggerTurn while idle: a run starts with the custom message.
    p.send(json!({"id":"n","type":"prompt","message":"/nudge"}));
    // The command's response and the run it started interleave: collect until both are over.
    let mut frames = Vec::new();
    while !(frames.iter().any(|f: &Value| f["id"] == "n")
        && frames.iter().any(|f: &Value| f["type"] == "agent_settled"))
    {
        let f = p.recv();
        if f["type"] != "message_update" {
            frames.push(f);
        }
    }
    let start = frames
        .iter()
        .position(|f| f["type"] == "agent_start")
        .unwrap();
    assert_eq!(frames[start + 2]["type"], "message_start");
    assert_eq!(frames[start + 2]["message"]["customType"], "nudge");
    assert!(frames.iter().any(|f| f["id"] == "n"));
    assert!(frames.iter().any(
        |f| f["type"] == "message_end" && f["message"]["content"][0]["text"] == "nudge answer"
    ));
    // Extensions' messages are `custom_message` entries in the session file, as pi writes them.
    let file = p.call(json!({"type":"get_state"}), "st")["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let entries: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let custom: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "custom_message")
        .collect();
    assert_eq!(custom.len(), 2, "{entries:#?}");
    assert_eq!(custom[0]["customType"], "note");
    assert_eq!(custom[1]["customType"], "nudge");
    assert!(!entries.iter().any(|e| e["message"]["role"] == "custom"));
    // A dialog open when the host closes stdin ends as dismissed; pith then exits.
    p.send(json!({"id":"a","type":"prompt","message":"/ask"}));
    let q = p.recv_until(|f| f["method"] == "confirm");
    assert_eq!(q.last().unwrap()["title"], "Still there?");
    let (status, rest) = p.finish(Duration::from_secs(10));
    assert!(status.success());
    let rest: Vec<Value> = rest
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rest[0]["message"],
        "{'type':'ui_response','id':'q','confirmed':false,'cancelled':true}"
    );
    assert_eq!(rest[1]["id"], "a");
}

#[test]
fn session_start_and_shutdown_reach_subscribers() {
    let w = World::new();
    let ext = script(
        &w,
        "watch.sh",
        r#"read hello
echo '{"type":"register","protocol":1,"events":["session_start","session_shutdown","turn_start","turn_end","agent_end"]}'
while IFS= read -r line; do
  msg=$(printf '%s' "$line" | sed 's/"/'"'"'/g' | cut -c1-400)
  echo '{"type":"ui","method":"notify","message":"'"$msg"'"}'
done
"#,
    );
    let mut p = spawn(&w, "{\"text\":\"hi\"}\n", &["-e", &ext]);
    let first = p.recv_until(|f| f["method"] == "notify");
    let state = p.call(json!({"type":"get_state"}), "s")["data"].clone();
    let start = first.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        start.starts_with(
            "{'type':'event','event':{'type':'session_start','reason':'startup','sessionId':"
        ),
        "{start}"
    );
    assert!(start.contains(state["sessionId"].as_str().unwrap()));
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    settle(&mut p);
    // Notifications are asynchronous: collect the extension's echoes until agent_end's.
    let mut seen: Vec<String> = Vec::new();
    for f in p.seen.iter() {
        if f["method"] == "notify" {
            seen.push(f["message"].as_str().unwrap().to_string());
        }
    }
    while !seen.iter().any(|m| m.contains("'type':'agent_end'")) {
        let f = p.recv();
        if f["method"] == "notify" {
            seen.push(f["message"].as_str().unwrap().to_string());
        }
    }
    let turn_start = seen
        .iter()
        .find(|m| m.contains("'type':'turn_start'"))
        .expect("turn_start");
    assert!(
        turn_start.contains("'turnIndex':0,'timestamp':"),
        "{turn_start}"
    );
    let turn_end = seen
        .iter()
        .find(|m| m.contains("'type':'turn_end'"))
        .expect("turn_end");
    assert!(turn_end.contains("'turnIndex':0"), "{turn_end}");
    let old = p.call(json!({"type":"get_state"}), "s2")["data"]["sessionFile"].clone();
    p.send(json!({"id":"n","type":"new_session"}));
    let mut msgs = Vec::new();
    while msgs.len() < 2 {
        let f = p.recv();
        if f["method"] == "notify" {
            msgs.push(f["message"].as_str().unwrap().to_string());
        }
    }
    assert!(
        msgs[0].starts_with(
            "{'type':'event','event':{'type':'session_shutdown','reason':'new','targetSessionFile':"
        ),
        "{}",
        msgs[0]
    );
    assert!(
        msgs[1].starts_with(
            "{'type':'event','event':{'type':'session_start','reason':'new','previousSessionFile':"
        ),
        "{}",
        msgs[1]
    );
    assert!(msgs[1].contains(old.as_str().unwrap()));
}

/// pith's own extensions get pi's result-bearing events too: `before_agent_start` adds a custom
/// message to the run, `context` replaces what the request sends (the faux model, without a
/// script, answers with the last user text it was sent), and the session keeps the prompt.
#[test]
fn before_agent_start_and_context_reach_executable_extensions() {
    let w = World::new();
    let ext = script(
        &w,
        "hooks.sh",
        r#"read hello
echo '{"type":"register","protocol":1,"events":["before_agent_start","context"]}'
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^{"type":"event","id":\([0-9]*\),.*/\1/p')
  case $line in
  *'"type":"before_agent_start"'*)
    echo '{"type":"result","id":'"$id"',"result":{"message":{"customType":"note","content":"from sh"}}}' ;;
  *'"type":"context"'*)
    echo '{"type":"result","id":'"$id"',"result":{"messages":[{"role":"user","content":"replaced by sh","timestamp":1}]}}' ;;
  esac
done
"#,
    );
    let mut p = w.spawn(&faux(&["--no-session", "-e", &ext]));
    p.call(json!({"type":"get_commands"}), "ready");
    p.send(json!({"id":"p","type":"prompt","message":"hello"}));
    let frames = settle(&mut p);
    let end = frames
        .iter()
        .find(|f| f["type"] == "agent_end")
        .expect("agent_end");
    let messages = end["messages"].as_array().unwrap();
    assert_eq!(
        messages[0]["content"],
        json!([{"type":"text","text":"hello"}])
    );
    assert_eq!(
        (
            &messages[1]["role"],
            &messages[1]["customType"],
            &messages[1]["content"]
        ),
        (&json!("custom"), &json!("note"), &json!("from sh"))
    );
    assert_eq!(
        messages[2]["content"],
        json!([{"type":"text","text":"This is the faux provider. You said: replaced by sh"}])
    );
}

/// An `-e` path that does not exist stops start-up before anything runs, as in pi 0.73.1, 0.87.1
/// and 1.6.0 (`Error: Failed to load extension "<path>": Extension path does not exist: <path>`,
/// each missing path, then the way on; exit 1 in rpc mode, pith's 2 in print mode). A settings
/// entry that does not exist stays a warning (pi ignores it silently).
#[test]
fn a_missing_extension_path_stops_start_up() {
    let w = World::new();
    let missing = w.tmp().join("missing.ts");
    let missing = missing.to_string_lossy().into_owned();
    let relative = w.cwd().join("rel.jsonl");
    let relative = relative.to_string_lossy().into_owned();
    let expected = format!(
        "Error: Failed to load extension \"{missing}\": Extension path does not exist: {missing}\n\
         Error: Failed to load extension \"{relative}\": Extension path does not exist: {relative}\n\
         Hint: Start without extensions using \"pith -ne\".\n"
    );
    for (mode, code) in [("rpc", 1), ("print", 2)] {
        let out = w
            .command(&[
                "--mode",
                mode,
                "--provider",
                "faux",
                "--model",
                "faux",
                "--no-session",
                "-e",
                &missing,
                "-e",
                "rel.jsonl",
                "hi",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{mode}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), expected, "{mode}");
        assert!(out.stdout.is_empty(), "{mode}");
    }
    settings(&w, json!({"extensions": [missing]}));
    let mut p = spawn(&w, "", &[]);
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["success"], true);
}
