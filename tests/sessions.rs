//! Sessions on disk, driven through the real `pith` binary over pipes with a fake Anthropic
//! server: what a prompt writes (and when), resuming (`--session`, `--continue`), fork / branch /
//! clone / new_session / switch_session, crash-truncated and garbage files, the reference's own
//! session file, and `export_html`.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::anthropic::{Sse, text, text_replies as replies, text_sse, tool_call};
use support::fake_llm::{FakeLlm, Reply};
use support::frames::keys;
use support::sessions::{entries, jsonl_files};
use support::{Pith, World, fake_rpc, fake_world, fixture};

// ---------------------------------------------------------------------------------------------
// Scripted replies

/// An Anthropic SSE stream with a text block then one tool call (`args` is the JSON text).
fn tool_sse(n: usize, said: &str, tool_id: &str, name: &str, args: &str) -> String {
    Sse::numbered(n).body(&[text(&[said]), tool_call(tool_id, name, &[args])])
}

// ---------------------------------------------------------------------------------------------
// Driving pith

/// A world with the fake provider, a fake server and a session dir (`<tmp>/sessions`).
struct Env {
    w: World,
    srv: FakeLlm,
}

impl Env {
    fn new(replies: Vec<Reply>) -> Env {
        let (w, srv) = fake_world(replies);
        Env { w, srv }
    }

    fn sessions(&self) -> PathBuf {
        self.w.dir.path().join("sessions")
    }

    fn sessions_str(&self) -> String {
        self.sessions().to_string_lossy().into_owned()
    }

    /// `pith --mode rpc --provider fake --model fake-model --session-dir <sessions> <extra>`.
    fn spawn(&self, extra: &[&str]) -> Pith {
        let dir = self.sessions_str();
        let mut args = fake_rpc(&["--session-dir", &dir]);
        args.extend_from_slice(extra);
        self.w.spawn(&args)
    }

    /// `pith --mode rpc <args>` (no model flags).
    fn spawn_bare(&self, args: &[&str]) -> Pith {
        let mut all = vec!["--mode", "rpc"];
        all.extend_from_slice(args);
        self.w.spawn(&all)
    }
}

/// Send a prompt and read every frame until `agent_settled`.
fn prompt(p: &mut Pith, id: &str, text: &str) -> Vec<Value> {
    p.send(json!({"id":id,"type":"prompt","message":text}));
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    assert!(
        frames
            .iter()
            .any(|f| f["id"] == id && f["type"] == "response" && f["success"] == true),
        "prompt {id} not accepted: {frames:#?}"
    );
    frames
}

fn ok(p: &mut Pith, cmd: Value, id: &str) -> Value {
    let r = p.call(cmd, id);
    assert_eq!(r["success"], true, "{r}");
    r.get("data").cloned().unwrap_or(Value::Null)
}

fn state(p: &mut Pith, id: &str) -> Value {
    ok(p, json!({"type":"get_state"}), id)
}

fn messages(p: &mut Pith, id: &str) -> Vec<Value> {
    ok(p, json!({"type":"get_messages"}), id)["messages"]
        .as_array()
        .expect("messages array")
        .clone()
}

fn session_file(p: &mut Pith, id: &str) -> PathBuf {
    PathBuf::from(
        state(p, id)["sessionFile"]
            .as_str()
            .expect("sessionFile in get_state"),
    )
}

fn types(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| {
            let t = e["type"].as_str().unwrap_or("?");
            match e["message"]["role"].as_str() {
                Some(r) => format!("{t}:{r}"),
                None => t.to_string(),
            }
        })
        .collect()
}

fn is_entry_id(s: &str) -> bool {
    s.len() == 8
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `2026-11-21T22:24:44.839Z`
fn is_iso_ms(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
}

fn user_texts(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("?");
            let text: String = support::frames::joined_text(&m["content"]);
            format!("{role}:{text}")
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// What a prompt writes

#[test]
fn a_prompt_writes_one_file_with_the_reference_line_shapes() {
    let env = Env::new(replies(&["Reply one."]));
    let mut p = env.spawn(&[]);
    let st = state(&mut p, "s0");
    let file = PathBuf::from(st["sessionFile"].as_str().expect("sessionFile"));
    let sid = st["sessionId"].as_str().expect("sessionId").to_string();
    assert_eq!(file.parent(), Some(env.sessions().as_path()));
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.ends_with(&format!("_{sid}.jsonl")),
        "file name {name} should end with _<sessionId>.jsonl"
    );
    // Nothing on disk before the first assistant message.
    assert_eq!(jsonl_files(&env.sessions()), Vec::<PathBuf>::new());

    prompt(&mut p, "p1", "First prompt");
    assert_eq!(jsonl_files(&env.sessions()), vec![file.clone()]);
    let e = entries(&file);
    assert_eq!(
        types(&e),
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message:user",
            "message:assistant"
        ]
    );
    // Header.
    assert_eq!(keys(&e[0]), ["type", "version", "id", "timestamp", "cwd"]);
    assert_eq!(e[0]["version"], 3);
    assert_eq!(e[0]["id"], sid.as_str());
    assert_eq!(e[0]["cwd"], env.w.cwd().to_string_lossy().as_ref());
    let ts = e[0]["timestamp"].as_str().unwrap();
    assert!(is_iso_ms(ts), "{ts}");
    assert_eq!(
        name,
        format!("{}_{sid}.jsonl", ts.replace([':', '.'], "-")),
        "file name = header timestamp with : and . replaced, then _<id>"
    );
    // Entries: a chain of 8-hex ids with ISO timestamps.
    let mut parent = Value::Null;
    for entry in &e[1..] {
        let id = entry["id"].as_str().expect("entry id");
        assert!(is_entry_id(id), "{id}");
        assert_eq!(entry["parentId"], parent, "{entry}");
        assert!(is_iso_ms(entry["timestamp"].as_str().unwrap()), "{entry}");
        parent = entry["id"].clone();
    }
    assert_eq!(
        keys(&e[1]),
        ["type", "id", "parentId", "timestamp", "provider", "modelId"]
    );
    assert_eq!(e[1]["provider"], "fake");
    assert_eq!(e[1]["modelId"], "fake-model");
    assert_eq!(
        keys(&e[2]),
        ["type", "id", "parentId", "timestamp", "thinkingLevel"]
    );
    assert_eq!(e[2]["thinkingLevel"], "medium");
    assert_eq!(
        keys(&e[3]),
        ["type", "id", "parentId", "timestamp", "message"]
    );
    assert_eq!(
        e[3]["message"]["content"],
        json!([{"type":"text","text":"First prompt"}])
    );
    assert_eq!(
        e[4]["message"]["content"],
        json!([{"type":"text","text":"Reply one."}])
    );
    assert_eq!(e[4]["message"]["stopReason"], "stop");
    assert_eq!(e[4]["message"]["responseId"], "msg_fake_1");
    // The file holds exactly the messages the host sees.
    let msgs = messages(&mut p, "gm");
    assert_eq!(msgs, vec![e[3]["message"].clone(), e[4]["message"].clone()]);
    // The only file anywhere under the agent dir's default session area: none.
    assert!(!env.w.agent_dir().join("sessions").exists());
}

#[test]
fn nothing_is_written_before_the_first_assistant_message() {
    let env = Env::new(vec![]);
    let mut p = env.spawn(&[]);
    state(&mut p, "s0");
    assert_eq!(jsonl_files(&env.sessions()), Vec::<PathBuf>::new());
    ok(&mut p, json!({"type":"new_session"}), "n1");
    state(&mut p, "s1");
    assert_eq!(jsonl_files(&env.sessions()), Vec::<PathBuf>::new());
    p.send(json!({"id":"sn","type":"set_session_name","name":"named"}));
    p.response("sn");
    assert_eq!(jsonl_files(&env.sessions()), Vec::<PathBuf>::new());
    // export_html has nothing to export yet.
    let r = p.call(json!({"type":"export_html"}), "e");
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(
        r["error"],
        "Nothing to export yet - start a conversation first"
    );
}

#[test]
fn set_session_name_appends_session_info_and_shows_in_get_state() {
    let env = Env::new(replies(&["Reply one."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    let file = session_file(&mut p, "s0");
    p.send(json!({"id":"sn","type":"set_session_name","name":"  oracle session "}));
    let r = p.response("sn");
    assert_eq!(r["success"], true);
    assert_eq!(state(&mut p, "s1")["sessionName"], "oracle session");
    let e = entries(&file);
    assert_eq!(e.len(), 6);
    assert_eq!(keys(&e[5]), ["type", "id", "parentId", "timestamp", "name"]);
    assert_eq!(e[5]["type"], "session_info");
    assert_eq!(e[5]["name"], "oracle session");
    assert_eq!(e[5]["parentId"], e[4]["id"]);
    drop(p);
    // The name survives a restart.
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    assert_eq!(state(&mut p, "s2")["sessionName"], "oracle session");
}

// ---------------------------------------------------------------------------------------------
// Resuming

#[test]
fn resume_with_session_path_restores_messages_model_and_thinking_and_appends() {
    let env = Env::new(replies(&["Reply one.", "Reply two."]));
    let mut p = env.spawn(&[]);
    ok(
        &mut p,
        json!({"type":"set_thinking_level","level":"high"}),
        "t",
    );
    prompt(&mut p, "p1", "First prompt");
    let file = session_file(&mut p, "s0");
    let before_msgs = messages(&mut p, "gm0");
    let (status, _) = p.finish(support::TIMEOUT);
    assert_eq!(status.code(), Some(0));
    let before = fs::read_to_string(&file).unwrap();

    // No model flags: the recorded model and level come back.
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let st = state(&mut p, "s1");
    assert_eq!(st["sessionFile"], file.to_str().unwrap());
    assert_eq!(st["model"]["provider"], "fake");
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(st["thinkingLevel"], "high");
    assert_eq!(st["messageCount"], 2);
    assert_eq!(messages(&mut p, "gm1"), before_msgs);

    prompt(&mut p, "p2", "Second prompt");
    let after = fs::read_to_string(&file).unwrap();
    assert!(
        after.starts_with(&before),
        "old lines must be unchanged:\n{before}\n---\n{after}"
    );
    let e = entries(&file);
    let old_len = before.lines().count();
    assert_eq!(types(&e[old_len..]), ["message:user", "message:assistant"]);
    assert_eq!(e[old_len]["parentId"], e[old_len - 1]["id"]);
    assert_eq!(
        user_texts(&messages(&mut p, "gm2")),
        [
            "user:First prompt",
            "assistant:Reply one.",
            "user:Second prompt",
            "assistant:Reply two."
        ]
    );
    // The second request carried the whole conversation.
    let reqs = env.srv.requests();
    assert_eq!(reqs.len(), 2);
    let body: Value = serde_json::from_str(&reqs[1].body).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    assert_eq!(jsonl_files(&env.sessions()), vec![file]);
}

#[test]
fn resume_restores_a_model_set_during_the_session() {
    let env = Env::new(replies(&["Reply one."]));
    let mut p = env.spawn(&[]);
    ok(
        &mut p,
        json!({"type":"set_model","provider":"fake","modelId":"fake-model-2"}),
        "m",
    );
    prompt(&mut p, "p1", "First prompt");
    let file = session_file(&mut p, "s0");
    drop(p);
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let st = state(&mut p, "s1");
    assert_eq!(st["model"]["id"], "fake-model-2");
    assert_eq!(st["thinkingLevel"], "off");
}

#[test]
fn continue_opens_the_most_recently_modified_session_in_the_default_dir() {
    let env = Env::new(replies(&[
        "Reply one.",
        "Reply two.",
        "Reply three.",
        "Reply four.",
    ]));
    let model = ["--provider", "fake", "--model", "fake-model"];
    // Default dir: <agentDir>/sessions/--<cwd without leading / and / replaced by ->--/
    let cwd = env.w.cwd().to_string_lossy().into_owned();
    let default_dir = env.w.agent_dir().join("sessions").join(format!(
        "--{}--",
        cwd.trim_start_matches('/').replace('/', "-")
    ));

    let mut p = env.spawn_bare(&model);
    prompt(&mut p, "p1", "Old session");
    let old = session_file(&mut p, "s0");
    drop(p);
    let mut p = env.spawn_bare(&model);
    prompt(&mut p, "p2", "Newer session");
    let newer = session_file(&mut p, "s1");
    drop(p);
    assert_ne!(old, newer);
    assert_eq!(newer.parent(), Some(default_dir.as_path()));
    assert_eq!(jsonl_files(&default_dir).len(), 2);
    // The older file becomes the most recently *modified* one.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut p = env.spawn_bare(&["--session", old.to_str().unwrap()]);
    prompt(&mut p, "p3", "Old again");
    let old_msgs = messages(&mut p, "gm1");
    drop(p);

    let mut p = env.spawn_bare(&["--continue"]);
    let st = state(&mut p, "s2");
    assert_eq!(st["sessionFile"], old.to_str().unwrap());
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(st["thinkingLevel"], "medium");
    assert_eq!(messages(&mut p, "gm2"), old_msgs);
    assert_eq!(old_msgs.len(), 4);
    let before = fs::read_to_string(&old).unwrap();
    prompt(&mut p, "p4", "Continued");
    let after = fs::read_to_string(&old).unwrap();
    assert!(after.starts_with(&before));
    assert_eq!(after.lines().count(), before.lines().count() + 2);
    assert_eq!(jsonl_files(&default_dir).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Fork, branch, clone, new_session, switch_session

#[test]
fn fork_creates_a_new_file_without_the_selected_prompt() {
    let env = Env::new(replies(&["Reply one.", "Reply two.", "Reply on the fork."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    p.send(json!({"id":"sn","type":"set_session_name","name":"oracle session"}));
    p.response("sn");
    prompt(&mut p, "p2", "Second prompt");
    let first = session_file(&mut p, "s0");
    let first_msgs = messages(&mut p, "gm0");
    let first_text = fs::read_to_string(&first).unwrap();
    let fe = entries(&first);

    let fm = ok(&mut p, json!({"type":"get_fork_messages"}), "fm");
    assert_eq!(
        fm,
        json!({"messages":[{"entryId":fe[3]["id"],"text":"First prompt"},
                           {"entryId":fe[6]["id"],"text":"Second prompt"}]})
    );
    assert_eq!(
        ok(&mut p, json!({"type":"get_branch_messages"}), "bm"),
        fm,
        "get_branch_messages is an alias"
    );

    let r = ok(
        &mut p,
        json!({"type":"fork","entryId":fe[6]["id"].clone()}),
        "fk",
    );
    assert_eq!(r, json!({"text":"Second prompt","cancelled":false}));
    let st = state(&mut p, "s1");
    let forked = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(forked, first);
    assert_eq!(forked.parent(), Some(env.sessions().as_path()));
    assert_eq!(st["messageCount"], 2);
    assert_eq!(st["sessionName"], "oracle session");
    assert_ne!(st["sessionId"], fe[0]["id"]);
    assert_eq!(messages(&mut p, "gm1"), first_msgs[..2].to_vec());
    // The forked path holds an assistant message: written at once, with parentSession.
    let e = entries(&forked);
    assert_eq!(
        types(&e),
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message:user",
            "message:assistant",
            "session_info"
        ]
    );
    assert_eq!(e[0]["id"], st["sessionId"]);
    assert_eq!(e[0]["parentSession"], first.to_str().unwrap());
    assert_eq!(&e[1..], &fe[1..6], "kept entries are copied as they were");

    prompt(&mut p, "p3", "Prompt on the fork");
    assert_eq!(
        user_texts(&messages(&mut p, "gm2")),
        [
            "user:First prompt",
            "assistant:Reply one.",
            "user:Prompt on the fork",
            "assistant:Reply on the fork."
        ]
    );
    // The original is untouched.
    assert_eq!(fs::read_to_string(&first).unwrap(), first_text);
    assert_eq!(jsonl_files(&env.sessions()).len(), 2);
}

#[test]
fn branch_alias_at_the_first_prompt_defers_the_new_file() {
    let env = Env::new(replies(&["Reply one.", "Reply two."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    let first = session_file(&mut p, "s0");
    let fe = entries(&first);
    let r = ok(
        &mut p,
        json!({"type":"branch","entryId":fe[3]["id"].clone()}),
        "b",
    );
    assert_eq!(r, json!({"text":"First prompt","cancelled":false}));
    let st = state(&mut p, "s1");
    assert_eq!(st["messageCount"], 0);
    let branched = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(branched, first);
    // No assistant message on the kept path: nothing written yet.
    assert!(!branched.exists());
    prompt(&mut p, "p2", "Other first prompt");
    let e = entries(&branched);
    assert_eq!(e[0]["parentSession"], first.to_str().unwrap());
    assert_eq!(
        user_texts(&messages(&mut p, "gm")),
        ["user:Other first prompt", "assistant:Reply two."]
    );
}

#[test]
fn fork_with_an_unknown_or_non_user_entry_fails() {
    let env = Env::new(replies(&["Reply one."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    let file = session_file(&mut p, "s0");
    let fe = entries(&file);
    for (i, id) in ["nope1234", fe[4]["id"].as_str().unwrap()]
        .into_iter()
        .enumerate()
    {
        let rid = format!("f{i}");
        let r = p.call(json!({"type":"fork","entryId":id}), &rid);
        assert_eq!(r["success"], false, "{r}");
        assert_eq!(r["error"], "Invalid entry ID for forking", "{r}");
    }
    assert_eq!(session_file(&mut p, "s1"), file);
    assert_eq!(jsonl_files(&env.sessions()), vec![file]);
}

#[test]
fn new_session_clone_and_switch_session_back_and_forth() {
    let env = Env::new(replies(&["Reply A.", "Reply B."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "Prompt A");
    let a = session_file(&mut p, "s0");
    let a_msgs = messages(&mut p, "gm0");

    let r = ok(
        &mut p,
        json!({"type":"new_session","parentSession":a.to_str().unwrap()}),
        "ns",
    );
    assert_eq!(r, json!({"cancelled":false}));
    let st = state(&mut p, "s1");
    let b = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(b, a);
    assert_eq!(st["messageCount"], 0);
    assert_eq!(st["model"]["id"], "fake-model");
    assert!(!b.exists());
    prompt(&mut p, "p2", "Prompt B");
    let b_msgs = messages(&mut p, "gm1");
    let be = entries(&b);
    assert_eq!(be[0]["parentSession"], a.to_str().unwrap());
    // new_session records the model and the thinking level it starts with (pi 0.73.1 and 0.87.1
    // both write them into every new session).
    assert_eq!(
        types(&be),
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message:user",
            "message:assistant"
        ]
    );

    for (i, (path, msgs)) in [(&a, &a_msgs), (&b, &b_msgs), (&a, &a_msgs)]
        .into_iter()
        .enumerate()
    {
        let r = ok(
            &mut p,
            json!({"type":"switch_session","sessionPath":path.to_str().unwrap()}),
            &format!("sw{i}"),
        );
        assert_eq!(r, json!({"cancelled":false}));
        let st = state(&mut p, &format!("sws{i}"));
        assert_eq!(st["sessionFile"], path.to_str().unwrap());
        assert_eq!(&messages(&mut p, &format!("swm{i}")), msgs);
    }

    // clone: a new file with the current branch, parentSession = the current file.
    let a_text = fs::read_to_string(&a).unwrap();
    let r = ok(&mut p, json!({"type":"clone"}), "cl");
    assert_eq!(r, json!({"cancelled":false}));
    let st = state(&mut p, "s2");
    let c = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(c, a);
    assert_ne!(c, b);
    assert_eq!(st["messageCount"], 2);
    assert_eq!(messages(&mut p, "gm2"), a_msgs);
    let ce = entries(&c);
    assert_eq!(ce[0]["parentSession"], a.to_str().unwrap());
    assert_eq!(ce[0]["id"], st["sessionId"]);
    assert_eq!(&ce[1..], &entries(&a)[1..]);
    assert_eq!(fs::read_to_string(&a).unwrap(), a_text);
    assert_eq!(jsonl_files(&env.sessions()).len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Damaged files

#[test]
fn a_file_whose_last_line_is_cut_still_loads() {
    let env = Env::new(replies(&["Reply one.", "Reply two.", "Reply three."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    prompt(&mut p, "p2", "Second prompt");
    let file = session_file(&mut p, "s0");
    drop(p);
    // Crash in the middle of writing the last line (the second assistant message).
    let text = fs::read_to_string(&file).unwrap();
    let last_start = text.trim_end().rfind('\n').unwrap() + 1;
    let cut = last_start + (text.len() - last_start) / 2;
    fs::write(&file, &text[..cut]).unwrap();

    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let st = state(&mut p, "s1");
    assert_eq!(st["sessionFile"], file.to_str().unwrap());
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(
        user_texts(&messages(&mut p, "gm1")),
        [
            "user:First prompt",
            "assistant:Reply one.",
            "user:Second prompt"
        ]
    );
}

#[test]
fn appending_after_a_cut_line_starts_on_a_fresh_line() {
    // pith requirement (crash safety): entries appended after a torn last line must not be
    // glued onto it, so a reload sees them.
    let env = Env::new(replies(&["Reply one.", "Reply two.", "Reply three."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    prompt(&mut p, "p2", "Second prompt");
    let file = session_file(&mut p, "s0");
    drop(p);
    let text = fs::read_to_string(&file).unwrap();
    let last_start = text.trim_end().rfind('\n').unwrap() + 1;
    fs::write(&file, &text[..last_start + 20]).unwrap();

    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    prompt(&mut p, "p3", "Third prompt");
    let live = messages(&mut p, "gm");
    drop(p);
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    assert_eq!(messages(&mut p, "gm2"), live);
    assert_eq!(
        user_texts(&live),
        [
            "user:First prompt",
            "assistant:Reply one.",
            "user:Second prompt",
            "user:Third prompt",
            "assistant:Reply three."
        ]
    );
}

#[test]
fn switch_session_to_garbage_fails_and_keeps_the_session() {
    let env = Env::new(replies(&["Reply one."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    let file = session_file(&mut p, "s0");
    let msgs = messages(&mut p, "gm0");
    let garbage = env.w.tmp().join("garbage.jsonl");
    fs::write(
        &garbage,
        "this is not json\n\u{0}\u{1}binary\n{\"type\":\"x\"}\n",
    )
    .unwrap();
    let r = p.call(
        json!({"type":"switch_session","sessionPath":garbage.to_str().unwrap()}),
        "sw",
    );
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["command"], "switch_session", "{r}");
    let err = r["error"].as_str().expect("error text");
    assert!(
        err.contains(garbage.to_str().unwrap()),
        "the error should name the file: {err}"
    );
    let st = state(&mut p, "s1");
    assert_eq!(st["sessionFile"], file.to_str().unwrap());
    assert_eq!(messages(&mut p, "gm1"), msgs);
    // The garbage file is left alone (pi would replace it by a fresh header).
    assert_eq!(
        fs::read_to_string(&garbage).unwrap(),
        "this is not json\n\u{0}\u{1}binary\n{\"type\":\"x\"}\n"
    );
}

#[test]
fn switch_session_to_a_missing_file_starts_a_new_session_written_there() {
    let env = Env::new(replies(&["Reply one.", "Reply two."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    let first = session_file(&mut p, "s0");
    let old_id = state(&mut p, "s1")["sessionId"].clone();
    ok(
        &mut p,
        json!({"type":"set_thinking_level","level":"low"}),
        "tl",
    );
    let first_text = fs::read_to_string(&first).unwrap();
    // A path in a directory that does not exist yet either.
    let fresh = env.w.tmp().join("elsewhere/deeper/fresh.jsonl");
    let r = p.call(
        json!({"type":"switch_session","sessionPath":fresh.to_str().unwrap()}),
        "sw",
    );
    assert_eq!(
        r,
        json!({"id":"sw","type":"response","command":"switch_session","success":true,
               "data":{"cancelled":false}})
    );
    let st = state(&mut p, "s2");
    assert_eq!(st["sessionFile"], fresh.to_str().unwrap());
    assert_ne!(st["sessionId"], old_id);
    assert_eq!(st["messageCount"], 0);
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(st["thinkingLevel"], "low");
    assert!(st.get("sessionName").is_none(), "{st}");
    assert_eq!(messages(&mut p, "gm0"), Vec::<Value>::new());
    // Written from the first assistant message on, as every session.
    assert!(!fresh.exists());
    prompt(&mut p, "p2", "Second prompt");
    let e = entries(&fresh);
    assert_eq!(
        types(&e),
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message:user",
            "message:assistant"
        ]
    );
    assert_eq!(e[0]["id"], st["sessionId"]);
    assert_eq!(e[0]["cwd"], env.w.cwd().to_str().unwrap());
    assert!(e[0].get("parentSession").is_none(), "{}", e[0]);
    assert_eq!(e[1]["provider"], "fake");
    assert_eq!(e[1]["modelId"], "fake-model");
    assert_eq!(e[2]["thinkingLevel"], "low");
    assert_eq!(
        user_texts(&messages(&mut p, "gm1")),
        ["user:Second prompt", "assistant:Reply two."]
    );
    // The first session is untouched, and switching back to it works.
    assert_eq!(fs::read_to_string(&first).unwrap(), first_text);
    ok(
        &mut p,
        json!({"type":"switch_session","sessionPath":first.to_str().unwrap()}),
        "back",
    );
    assert_eq!(
        user_texts(&messages(&mut p, "gm2")),
        ["user:First prompt", "assistant:Reply one."]
    );
}

// ---------------------------------------------------------------------------------------------
// Interop with the reference's own file

#[test]
fn the_reference_session_file_opens_and_continues() {
    let env = Env::new(replies(&["Reply three."]));
    let file = env.w.tmp().join("m_session.session.jsonl");
    fs::copy(fixture("sessions/m_session.session.jsonl"), &file).unwrap();
    let original = fs::read_to_string(&file).unwrap();
    let fe = entries(&file);

    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let st = state(&mut p, "s0");
    assert_eq!(st["sessionId"], "01a20036-3f26-7328-8f9b-b9da36d18b5f");
    assert_eq!(st["sessionFile"], file.to_str().unwrap());
    assert_eq!(st["sessionName"], "oracle session");
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(st["thinkingLevel"], "medium");
    assert_eq!(st["messageCount"], 4);
    let expected: Vec<Value> = fe
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(messages(&mut p, "gm0"), expected);
    assert_eq!(
        ok(&mut p, json!({"type":"get_fork_messages"}), "fm"),
        json!({"messages":[{"entryId":"a073d6d7","text":"First prompt"},
                           {"entryId":"2f03ccc8","text":"Second prompt"}]})
    );

    prompt(&mut p, "p1", "Third prompt");
    let after = fs::read_to_string(&file).unwrap();
    assert!(after.starts_with(&original), "old lines unchanged");
    let e = entries(&file);
    assert_eq!(e.len(), fe.len() + 2);
    assert_eq!(e[fe.len()]["parentId"], "7c16e254");
    assert_eq!(e[fe.len() + 1]["parentId"], e[fe.len()]["id"]);
    // The request carried the reference's history.
    let body: Value = serde_json::from_str(&env.srv.requests()[0].body).unwrap();
    let sent: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
    assert_eq!(sent.len(), 5);
    assert_eq!(sent[1]["content"][0]["text"], "Reply one.");
}

// ---------------------------------------------------------------------------------------------
// export_html

const XSS: &str = "<script>alert(1)</script>";

/// The resources an HTML page would fetch from the network.
fn remote_resources(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    for pat in [
        "src=\"http",
        "src='http",
        "href=\"http",
        "href='http",
        "url(http",
        "url(\"http",
        "url('http",
        "@import \"http",
        "@import url",
    ] {
        for (at, _) in lower.match_indices(pat) {
            out.push(html[at..(at + 80).min(html.len())].to_string());
        }
    }
    out
}

fn exportable_session(env: &Env) -> Pith {
    let mut p = env.spawn(&[]);
    p.send(json!({"id":"p1","type":"prompt","message":format!("Run this {XSS} please")}));
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    let results: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .collect();
    assert_eq!(results.len(), 1, "{frames:#?}");
    assert_eq!(
        results[0]["result"]["content"][0]["text"],
        format!("{XSS}\n")
    );
    p
}

fn export_env() -> Env {
    let args = json!({"command": format!("echo '{XSS}'")}).to_string();
    Env::new(vec![
        Reply::sse(tool_sse(
            1,
            &format!("Running {XSS}"),
            "toolu_x",
            "bash",
            &args,
        )),
        Reply::sse(text_sse(2, &["Done ", XSS])),
    ])
}

#[test]
fn export_html_to_a_given_path_is_self_contained_and_escaped() {
    let env = export_env();
    let mut p = exportable_session(&env);
    let out = env.w.tmp().join("export.html");
    let r = ok(
        &mut p,
        json!({"type":"export_html","outputPath":out.to_str().unwrap()}),
        "e1",
    );
    assert_eq!(r, json!({"path": out.to_str().unwrap()}));
    let html = fs::read_to_string(&out).unwrap();
    assert!(html.len() > 200, "{html}");
    assert!(html.to_ascii_lowercase().contains("<html"), "not a page");
    assert!(!html.contains(XSS), "raw {XSS} in the export");
    assert_eq!(remote_resources(&html), Vec::<String>::new());
    // Every place the text went is there, escaped: prompt, reply, tool argument, tool result.
    let esc = "&lt;script&gt;alert(1)&lt;/script&gt;";
    for want in [
        format!("Run this {esc} please"),
        format!("Running {esc}"),
        format!("echo &#39;{esc}&#39;"),
        format!("<code>{esc}</code>"),
        format!("Done {esc}"),
    ] {
        assert!(html.contains(&want), "missing {want:?} in the export");
    }
}

#[test]
fn export_html_default_path_is_relative_to_the_cwd() {
    let env = export_env();
    let mut p = exportable_session(&env);
    let file = session_file(&mut p, "s");
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    let r = ok(&mut p, json!({"type":"export_html"}), "e2");
    let rel = format!("pi-session-{stem}.html");
    assert_eq!(r, json!({"path": rel}));
    let html = fs::read_to_string(env.w.cwd().join(&rel)).unwrap();
    assert!(!html.contains(XSS));
    assert_eq!(remote_resources(&html), Vec::<String>::new());
}

#[test]
fn export_html_errors() {
    let env = export_env();
    let mut p = exportable_session(&env);
    // Parent is a regular file: cannot be written.
    let blocker = env.w.tmp().join("afile");
    fs::write(&blocker, "x").unwrap();
    let bad = blocker.join("out.html");
    let r = p.call(
        json!({"type":"export_html","outputPath":bad.to_str().unwrap()}),
        "bad",
    );
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["command"], "export_html");
    assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    drop(p);

    let mut p = env.spawn_bare(&[
        "--provider",
        "fake",
        "--model",
        "fake-model",
        "--no-session",
    ]);
    let r = p.call(json!({"type":"export_html"}), "mem");
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Cannot export in-memory session to HTML");
}

#[test]
fn the_reference_tool_session_round_trips_exactly_and_exports() {
    let env = Env::new(vec![]);
    let file = env.w.tmp().join("n_export_html.session.jsonl");
    fs::copy(fixture("sessions/n_export_html.session.jsonl"), &file).unwrap();
    let original = fs::read_to_string(&file).unwrap();
    let expected: Vec<Value> = entries(&file)
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(expected.len(), 4);

    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    // Byte-exact: compare the raw JSON text of each message, not only the values.
    let r = p.call(json!({"type":"get_messages"}), "gm");
    assert_eq!(
        serde_json::to_string(&r["data"]["messages"]).unwrap(),
        serde_json::to_string(&expected).unwrap()
    );
    let stats = ok(&mut p, json!({"type":"get_session_stats"}), "st");
    assert_eq!(stats["sessionFile"], file.to_str().unwrap());
    assert_eq!(stats["userMessages"], 1);
    assert_eq!(stats["assistantMessages"], 2);
    assert_eq!(stats["toolCalls"], 1);
    assert_eq!(stats["toolResults"], 1);
    assert_eq!(stats["totalMessages"], 4);
    assert_eq!(
        ok(&mut p, json!({"type":"get_last_assistant_text"}), "l"),
        json!({"text":"Done <b>bold?</b>"})
    );
    let out = env.w.tmp().join("ref.html");
    ok(
        &mut p,
        json!({"type":"export_html","outputPath":out.to_str().unwrap()}),
        "e",
    );
    let html = fs::read_to_string(&out).unwrap();
    assert!(!html.contains("<b>bold?</b>"));
    assert!(html.contains("Done &lt;b&gt;bold?&lt;/b&gt;"));
    assert!(html.contains("echo exported"));
    // Opening and reading never rewrites the reference's file.
    drop(p);
    assert_eq!(fs::read_to_string(&file).unwrap(), original);
}

#[test]
fn session_flag_with_a_new_path_creates_exactly_that_file() {
    let env = Env::new(replies(&["Reply one."]));
    let file = env.w.tmp().join("chosen-name.jsonl");
    let mut p = env.spawn_bare(&[
        "--provider",
        "fake",
        "--model",
        "fake-model",
        "--session",
        file.to_str().unwrap(),
    ]);
    assert_eq!(session_file(&mut p, "s0"), file);
    assert!(!file.exists());
    prompt(&mut p, "p1", "First prompt");
    assert_eq!(
        types(&entries(&file)),
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message:user",
            "message:assistant"
        ]
    );
}

#[test]
fn switch_session_resolves_a_relative_path_against_the_cwd() {
    let env = Env::new(replies(&["Reply A.", "Reply B."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "Prompt A");
    let a = session_file(&mut p, "s0");
    let a_msgs = messages(&mut p, "gm0");
    fs::create_dir_all(env.w.cwd().join("saved")).unwrap();
    fs::copy(&a, env.w.cwd().join("saved/a.jsonl")).unwrap();
    ok(&mut p, json!({"type":"new_session"}), "n");
    prompt(&mut p, "p2", "Prompt B");
    ok(
        &mut p,
        json!({"type":"switch_session","sessionPath":"saved/a.jsonl"}),
        "sw",
    );
    let st = state(&mut p, "s1");
    assert_eq!(
        PathBuf::from(st["sessionFile"].as_str().unwrap()),
        env.w.cwd().join("saved/a.jsonl")
    );
    assert_eq!(messages(&mut p, "gm1"), a_msgs);
}

#[test]
fn switch_session_restores_the_recorded_model_and_thinking_level() {
    let env = Env::new(replies(&["Reply A.", "Reply B."]));
    let mut p = env.spawn(&[]);
    ok(
        &mut p,
        json!({"type":"set_thinking_level","level":"low"}),
        "t",
    );
    prompt(&mut p, "p1", "Prompt A");
    let a = session_file(&mut p, "s0");
    ok(&mut p, json!({"type":"new_session"}), "n");
    ok(
        &mut p,
        json!({"type":"set_model","provider":"fake","modelId":"fake-model-2"}),
        "m",
    );
    prompt(&mut p, "p2", "Prompt B");
    let st = state(&mut p, "s1");
    assert_eq!(st["model"]["id"], "fake-model-2");
    assert_eq!(st["thinkingLevel"], "off");
    ok(
        &mut p,
        json!({"type":"switch_session","sessionPath":a.to_str().unwrap()}),
        "sw",
    );
    let st = state(&mut p, "s2");
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(st["thinkingLevel"], "low");
}

#[test]
fn continue_skips_files_without_a_valid_header() {
    let env = Env::new(replies(&["Reply one."]));
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "First prompt");
    let good = session_file(&mut p, "s0");
    drop(p);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let bad = env
        .sessions()
        .join("2099-01-01T00-00-00-000Z_garbage.jsonl");
    fs::write(&bad, "not a header\n{\"type\":\"message\"}\n").unwrap();
    let dir = env.sessions_str();
    let mut p = env.spawn_bare(&["--session-dir", &dir, "--continue"]);
    assert_eq!(session_file(&mut p, "s1"), good);
    assert_eq!(messages(&mut p, "gm").len(), 2);
}

#[test]
fn switch_session_during_a_run_aborts_it_silently() {
    let env = Env::new(vec![
        Reply::sse(text_sse(1, &["Reply A."])),
        Reply::sse(text_sse(2, &["Never", " finished"]))
            .chunked(40, std::time::Duration::ZERO)
            .stall_after(400, std::time::Duration::from_secs(5)),
        Reply::sse(text_sse(3, &["Reply C."])),
    ]);
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "Prompt A");
    let a = session_file(&mut p, "s0");
    let a_text = fs::read_to_string(&a).unwrap();
    ok(&mut p, json!({"type":"new_session"}), "n");
    let b = session_file(&mut p, "s1");
    p.send(json!({"id":"p2","type":"prompt","message":"Prompt B"}));
    p.recv_until(|v| v["type"] == "message_start" && v["message"]["role"] == "assistant");
    p.send(json!({"id":"sw","type":"switch_session","sessionPath":a.to_str().unwrap()}));
    let frames = p.recv_until(|v| v["id"] == "sw");
    assert_eq!(frames.last().unwrap()["success"], true, "{frames:#?}");
    // No closing events of the aborted run reach the host (spec 4.9: "No events").
    let leaked: Vec<&Value> = frames
        .iter()
        .filter(|f| {
            ["message_end", "turn_end", "agent_end"].contains(&f["type"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(leaked.is_empty(), "{leaked:#?}");
    let st = state(&mut p, "s2");
    assert_eq!(st["isStreaming"], false);
    assert_eq!(st["sessionFile"], a.to_str().unwrap());
    assert_eq!(
        user_texts(&messages(&mut p, "gm")),
        ["user:Prompt A", "assistant:Reply A."]
    );
    // B never had an assistant message: never written. A is untouched.
    assert!(!b.exists());
    assert_eq!(fs::read_to_string(&a).unwrap(), a_text);
    // The session keeps working.
    prompt(&mut p, "p3", "Prompt C");
    assert_eq!(messages(&mut p, "gm2").len(), 4);
}

/// Start a run that fails with 529 and a 300 ms back-off, send the command `cmd(session A)`
/// during the back-off, and check the retry never fires: no second request, no new run.
fn a_session_change_cancels_the_pending_retry(cmd: impl FnOnce(&Path) -> Value) {
    let env = Env::new(vec![
        Reply::sse(text_sse(1, &["Reply A."])),
        Reply::error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::sse(text_sse(3, &["must not be requested"])),
    ]);
    env.w
        .write_agent_file("settings.json", r#"{"retry":{"baseDelayMs":300}}"#);
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p0", "Prompt A");
    let a = session_file(&mut p, "s0");
    ok(&mut p, json!({"type":"new_session"}), "n0");
    p.send(json!({"id":"p1","type":"prompt","message":"Hello?"}));
    p.recv_until(|v| v["type"] == "auto_retry_start");
    ok(&mut p, cmd(&a), "c");
    std::thread::sleep(std::time::Duration::from_millis(600));
    p.send(json!({"id":"s","type":"get_state"}));
    let frames = p.recv_until(|v| v["id"] == "s");
    let started: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "agent_start" || f["type"] == "message_start")
        .collect();
    assert!(
        started.is_empty(),
        "a run started after the switch: {frames:#?}"
    );
    assert_eq!(frames.last().unwrap()["data"]["isStreaming"], false);
    assert_eq!(
        env.srv.requests().len(),
        2,
        "the retry fired after the switch"
    );
}

#[test]
fn new_session_during_a_retry_back_off_cancels_the_retry() {
    a_session_change_cancels_the_pending_retry(|_| json!({"type":"new_session"}));
}

#[test]
fn switch_session_during_a_retry_back_off_cancels_the_retry() {
    a_session_change_cancels_the_pending_retry(
        |a| json!({"type":"switch_session","sessionPath":a.to_str().unwrap()}),
    );
}

#[test]
fn a_version_1_file_is_migrated_and_loads() {
    let env = Env::new(vec![]);
    let file = env.w.tmp().join("v1.jsonl");
    let user = json!({"role":"user","content":[{"type":"text","text":"Old prompt"}],"timestamp":1700000000000_u64});
    let asst = json!({"role":"assistant","content":[{"type":"text","text":"Old reply"}],
        "api":"anthropic-messages","provider":"fake","model":"fake-model",
        "usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,
                 "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
        "stopReason":"stop","timestamp":1700000000001_u64});
    let lines = [
        json!({"type":"session","id":"11111111-2222-4333-8444-555555555555",
               "timestamp":"2023-11-14T22:13:20.000Z","cwd":"/somewhere/else"}),
        json!({"type":"model_change","timestamp":"2023-11-14T22:13:20.000Z","provider":"fake","modelId":"fake-model"}),
        json!({"type":"message","timestamp":"2023-11-14T22:13:20.000Z","message":user}),
        json!({"type":"message","timestamp":"2023-11-14T22:13:20.001Z","message":asst}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&file, text).unwrap();
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let st = state(&mut p, "s");
    assert_eq!(st["sessionId"], "11111111-2222-4333-8444-555555555555");
    assert_eq!(messages(&mut p, "gm"), vec![user, asst]);
    drop(p);
    let e = entries(&file);
    assert_eq!(e[0]["version"], 3, "migrated files are rewritten as v3");
    // v1 -> v2 gives the entries a linear chain of ids; the resumed session had no thinking
    // level, so one `thinking_level_change` is appended (spec 1.3).
    assert_eq!(
        types(&e),
        [
            "session",
            "model_change",
            "message:user",
            "message:assistant",
            "thinking_level_change"
        ]
    );
    assert_eq!(e[4]["thinkingLevel"], "medium");
    let mut parent = Value::Null;
    for entry in &e[1..] {
        assert!(is_entry_id(entry["id"].as_str().unwrap_or("")), "{entry}");
        assert_eq!(entry["parentId"], parent, "{entry}");
        parent = entry["id"].clone();
    }
}

#[test]
fn an_unknown_recorded_model_keeps_the_current_one() {
    let env = Env::new(vec![]);
    let text = fs::read_to_string(fixture("sessions/m_session.session.jsonl"))
        .unwrap()
        .replace("\"fake-model\"", "\"retired-model\"")
        // A recorded directory that exists (pi refuses a session whose cwd is gone).
        .replace(
            "/oracle/scratch/pi/m_session/cwd",
            &env.w.cwd().to_string_lossy(),
        );
    let file = env.w.tmp().join("retired.jsonl");
    fs::write(&file, &text).unwrap();
    let mut p = env.spawn(&[]);
    ok(
        &mut p,
        json!({"type":"set_model","provider":"fake","modelId":"fake-model-2"}),
        "m",
    );
    ok(
        &mut p,
        json!({"type":"switch_session","sessionPath":file.to_str().unwrap()}),
        "sw",
    );
    let st = state(&mut p, "s");
    assert_eq!(st["model"]["id"], "fake-model-2");
    assert_eq!(st["messageCount"], 4);
}

#[test]
fn unicode_names_and_prompts_round_trip_through_the_file() {
    let env = Env::new(replies(&["Réponse ✓ \u{1F600}"]));
    let mut p = env.spawn(&[]);
    let text = "Grüße \u{2028} 日本語 \u{1F680} \"quoted\" \\ back";
    prompt(&mut p, "p1", text);
    p.send(json!({"id":"sn","type":"set_session_name","name":"名前 \u{2029} x"}));
    p.response("sn");
    let file = session_file(&mut p, "s0");
    let live = messages(&mut p, "gm0");
    drop(p);
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    assert_eq!(messages(&mut p, "gm1"), live);
    assert_eq!(
        user_texts(&live),
        [
            format!("user:{text}"),
            "assistant:Réponse ✓ \u{1F600}".into()
        ]
    );
    assert_eq!(state(&mut p, "s1")["sessionName"], "名前 \u{2029} x");
}

#[test]
fn a_long_session_loads_quickly() {
    let env = Env::new(vec![]);
    let file = env.w.tmp().join("long.jsonl");
    let mut out = String::new();
    out.push_str(
        &json!({"type":"session","version":3,"id":"aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
                "timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"})
        .to_string(),
    );
    out.push('\n');
    let mut parent = Value::Null;
    let n = 10_000;
    for i in 0..n {
        let id = format!("{i:08x}");
        let msg = if i % 2 == 0 {
            json!({"role":"user","content":[{"type":"text","text":format!("prompt {i}")}],"timestamp":i})
        } else {
            json!({"role":"assistant","content":[{"type":"text","text":format!("reply {i}")}],
                "api":"anthropic-messages","provider":"fake","model":"fake-model",
                "usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,
                         "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
                "stopReason":"stop","timestamp":i})
        };
        out.push_str(
            &json!({"type":"message","id":id,"parentId":parent,
                    "timestamp":"2026-01-01T00:00:00.000Z","message":msg})
            .to_string(),
        );
        out.push('\n');
        parent = json!(id);
    }
    fs::write(&file, out).unwrap();
    let t = std::time::Instant::now();
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let st = state(&mut p, "s");
    assert_eq!(st["messageCount"], n);
    let fm = ok(&mut p, json!({"type":"get_fork_messages"}), "fm");
    assert_eq!(fm["messages"].as_array().unwrap().len(), n / 2);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn export_html_escapes_the_session_name_and_image_fields() {
    let env = Env::new(replies(&["Seen."]));
    let mut p = env.spawn(&[]);
    let evil_name = "<img src=x onerror=alert(2)>";
    let img = json!({"type":"image","data":"AAAA\"><script>alert(3)</script>",
                     "mimeType":"image/png\" onerror=\"alert(4)"});
    p.send(json!({"id":"p1","type":"prompt","message":"look","images":[img]}));
    p.recv_until(|v| v["type"] == "agent_settled");
    p.send(json!({"id":"sn","type":"set_session_name","name":evil_name}));
    p.response("sn");
    let out = env.w.tmp().join("x.html");
    ok(
        &mut p,
        json!({"type":"export_html","outputPath":out.to_str().unwrap()}),
        "e",
    );
    let html = fs::read_to_string(&out).unwrap();
    for bad in [
        "<img src=x",
        "<script>alert(3)",
        "onerror=\"alert(4)",
        "\" onerror=",
    ] {
        assert!(!html.contains(bad), "unescaped {bad:?} in the export");
    }
    assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert_eq!(remote_resources(&html), Vec::<String>::new());
}

#[test]
fn session_flag_with_an_id_prefix_finds_the_file() {
    let env = Env::new(vec![]);
    let dir = env.sessions();
    fs::create_dir_all(&dir).unwrap();
    let name = "2026-11-21T22-24-44-839Z_01a20036-3f26-7328-8f9b-b9da36d18b5f.jsonl";
    fs::copy(fixture("sessions/m_session.session.jsonl"), dir.join(name)).unwrap();
    let d = env.sessions_str();
    let mut p = env.spawn_bare(&["--session-dir", &d, "--session", "01a20036-3f26"]);
    let st = state(&mut p, "s");
    assert_eq!(st["sessionFile"], dir.join(name).to_str().unwrap());
    assert_eq!(st["messageCount"], 4);
    drop(p);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pith"))
        .args(["--mode", "rpc", "--session-dir", &d, "--session", "zzzz"])
        .current_dir(env.w.cwd())
        .env("PI_CODING_AGENT_DIR", env.w.agent_dir())
        .env("HOME", env.w.dir.path().join("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No session found matching 'zzzz'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn new_session_during_a_run_aborts_it_silently() {
    let env = Env::new(vec![
        Reply::sse(text_sse(1, &["Reply A."])),
        Reply::sse(text_sse(2, &["Never", " finished"]))
            .chunked(40, std::time::Duration::ZERO)
            .stall_after(400, std::time::Duration::from_secs(5)),
        Reply::sse(text_sse(3, &["Reply C."])),
    ]);
    let mut p = env.spawn(&[]);
    prompt(&mut p, "p1", "Prompt A");
    let a = session_file(&mut p, "s0");
    let a_text = fs::read_to_string(&a).unwrap();
    p.send(json!({"id":"p2","type":"prompt","message":"Prompt B"}));
    p.recv_until(|v| v["type"] == "message_start" && v["message"]["role"] == "assistant");
    p.send(json!({"id":"n","type":"new_session"}));
    let frames = p.recv_until(|v| v["id"] == "n");
    assert_eq!(frames.last().unwrap()["success"], true, "{frames:#?}");
    let leaked: Vec<&Value> = frames
        .iter()
        .filter(|f| {
            ["message_end", "turn_end", "agent_end"].contains(&f["type"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(leaked.is_empty(), "{leaked:#?}");
    let st = state(&mut p, "s1");
    assert_eq!(st["isStreaming"], false);
    assert_eq!(st["messageCount"], 0);
    // The user message of the aborted run was persisted at its message_end; the aborted
    // assistant message was not.
    let e = entries(&a);
    assert!(fs::read_to_string(&a).unwrap().starts_with(&a_text));
    assert_eq!(
        types(&e[5..]),
        ["message:user"],
        "only the user message of the aborted run is in A"
    );
    prompt(&mut p, "p3", "Prompt C");
    assert_eq!(
        user_texts(&messages(&mut p, "gm")),
        ["user:Prompt C", "assistant:Reply C."]
    );
}

#[test]
fn sessions_opened_by_path_put_new_files_next_to_them() {
    // Spec 1.4: without --session-dir, new_session / fork write into the opened file's directory.
    let env = Env::new(replies(&["Reply three.", "Reply four."]));
    let dir = env.w.tmp().join("elsewhere");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("m.jsonl");
    fs::copy(fixture("sessions/m_session.session.jsonl"), &file).unwrap();
    let mut p = env.spawn_bare(&["--session", file.to_str().unwrap()]);
    let r = ok(&mut p, json!({"type":"fork","entryId":"2f03ccc8"}), "f");
    assert_eq!(r["text"], "Second prompt");
    let forked = session_file(&mut p, "s0");
    assert_eq!(forked.parent(), Some(dir.as_path()));
    assert!(forked.exists());
    ok(&mut p, json!({"type":"new_session"}), "n");
    let fresh = session_file(&mut p, "s1");
    assert_eq!(fresh.parent(), Some(dir.as_path()));
    prompt(&mut p, "p", "Fresh");
    assert!(fresh.exists());
    assert_eq!(jsonl_files(&dir).len(), 3);
    assert!(!env.w.agent_dir().join("sessions").exists());
}

#[test]
fn in_memory_sessions_fork_and_clone_without_files() {
    let env = Env::new(replies(&["Reply one.", "Reply two."]));
    let mut p = env.spawn_bare(&[
        "--provider",
        "fake",
        "--model",
        "fake-model",
        "--no-session",
    ]);
    prompt(&mut p, "p1", "First prompt");
    prompt(&mut p, "p2", "Second prompt");
    let st = state(&mut p, "s0");
    assert!(st.get("sessionFile").is_none(), "{st}");
    let fm = ok(&mut p, json!({"type":"get_fork_messages"}), "fm");
    let second = fm["messages"][1]["entryId"].clone();
    assert_eq!(fm["messages"][1]["text"], "Second prompt");
    let r = ok(&mut p, json!({"type":"fork","entryId":second}), "f");
    assert_eq!(r, json!({"text":"Second prompt","cancelled":false}));
    let st = state(&mut p, "s1");
    assert!(st.get("sessionFile").is_none(), "{st}");
    assert_eq!(st["messageCount"], 2);
    ok(&mut p, json!({"type":"clone"}), "c");
    assert_eq!(state(&mut p, "s2")["messageCount"], 2);
    assert_eq!(
        user_texts(&messages(&mut p, "gm")),
        ["user:First prompt", "assistant:Reply one."]
    );
    assert!(!env.w.agent_dir().join("sessions").exists());
    assert!(!env.sessions().exists());
}
