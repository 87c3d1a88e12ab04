//! Session library tests against the reference's own session files (fixtures/sessions/, copied
//! from the oracle transcripts m_session and n_export_html).

use std::fs;
use std::path::{Path, PathBuf};

use pith::message::{
    AgentMessage, AssistantMessage, BashExecutionMessage, Content, StopReason, ThinkingContent,
    ThinkingLevel, ToolCall, ToolResultMessage, Usage, UserContent, UserMessage,
};
use pith::session::{self, Session, store};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/sessions")
        .join(name)
}

/// Copy a fixture into a temp dir (tests never write into the repo).
fn copy_fixture(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    fs::copy(fixture(name), &to).unwrap();
    to
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![Content::text(text)]),
        timestamp: 1,
    })
}

fn assistant(text: &str) -> AgentMessage {
    let mut a = AssistantMessage::empty("anthropic-messages", "fake", "fake-model");
    a.content.push(Content::text(text));
    a.usage = Usage {
        input: 100,
        output: 2,
        total_tokens: 102,
        ..Default::default()
    };
    AgentMessage::Assistant(a)
}

fn texts(messages: &[AgentMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            AgentMessage::User(u) => u.content.joined_text(),
            AgentMessage::Assistant(a) => a.text(),
            AgentMessage::CompactionSummary(c) => format!("summary:{}", c.summary),
            other => format!("{other:?}"),
        })
        .collect()
}

/// The `message` objects of the fixture's message entries, in file order.
fn fixture_messages(name: &str) -> Vec<Value> {
    lines(&fixture(name))
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "message")
        .map(|v| v["message"].clone())
        .collect()
}

#[test]
fn oracle_session_loads_and_rebuilds_its_context() {
    let s = Session::open(&fixture("m_session.session.jsonl")).unwrap();
    assert_eq!(s.id(), "01a20036-3f26-7328-8f9b-b9da36d18b5f");
    assert_eq!(s.cwd(), "/oracle/scratch/pi/m_session/cwd");
    assert_eq!(s.entries().len(), 7);
    assert_eq!(s.leaf_id(), Some("7c16e254"));
    let ctx = s.build_context();
    assert_eq!(
        texts(&ctx),
        ["First prompt", "Reply one.", "Second prompt", "Reply two."]
    );
    // Exactly the reference's get_messages (gm5) = the stored message objects.
    let got: Vec<Value> = ctx
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    assert_eq!(got, fixture_messages("m_session.session.jsonl"));
    assert_eq!(s.session_name().as_deref(), Some("oracle session"));
    assert_eq!(s.model(), Some(("fake".into(), "fake-model".into())));
    assert_eq!(s.thinking_level(), Some(ThinkingLevel::Medium));
    let fork = serde_json::to_string(&s.user_messages_for_fork()).unwrap();
    assert_eq!(
        fork,
        r#"[{"entryId":"a073d6d7","text":"First prompt"},{"entryId":"2f03ccc8","text":"Second prompt"}]"#
    );
}

#[test]
fn reference_lines_reserialise_byte_identically() {
    for name in [
        "m_session.session.jsonl",
        "m_session.session.2.jsonl",
        "n_export_html.session.jsonl",
    ] {
        for line in lines(&fixture(name)) {
            let obj = match serde_json::from_str::<Value>(&line).unwrap() {
                Value::Object(m) => m,
                _ => panic!("not an object"),
            };
            assert_eq!(store::to_line(&obj), line);
        }
    }
}

#[test]
fn append_to_loaded_file_keeps_old_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(dir.path(), "m_session.session.jsonl");
    let before = fs::read(&path).unwrap();
    let mut s = Session::open(&path).unwrap();
    let id = s.append_message(&user("Third"));
    let after = fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    let new_lines = lines(&path);
    assert_eq!(new_lines.len(), 9);
    let last: Value = serde_json::from_str(&new_lines[8]).unwrap();
    assert_eq!(last["id"], id.as_str());
    assert_eq!(last["parentId"], "7c16e254");
    assert_eq!(last["message"]["content"][0]["text"], "Third");
    assert!(s.take_warnings().is_empty());
}

#[test]
fn unknown_entry_types_and_fields_survive_load_append_and_clone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut text = fs::read_to_string(fixture("m_session.session.jsonl")).unwrap();
    let odd = r#"{"type":"future_thing","id":"fe11fe11","parentId":"7c16e254","timestamp":"2026-11-21T22:24:46.000Z","payload":{"z":1,"a":[0.00003,true]}}"#;
    text.push_str(odd);
    text.push('\n');
    let with_field = r#"{"type":"model_change","id":"abcdabcd","parentId":"fe11fe11","timestamp":"2026-11-21T22:24:47.000Z","provider":"p","modelId":"m","extra":{"kept":"yes"}}"#;
    text.push_str(with_field);
    text.push('\n');
    fs::write(&path, &text).unwrap();

    let mut s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 9);
    assert_eq!(s.model(), Some(("p".into(), "m".into())));
    assert_eq!(s.build_context().len(), 4);
    s.append_session_info("  renamed  ");
    let all = lines(&path);
    assert_eq!(all[8], odd);
    assert_eq!(all[9], with_field);
    assert!(all[10].contains(r#""name":"renamed""#));

    let clone = s.clone_branch().unwrap();
    let clone_lines = lines(clone.file().unwrap());
    assert_eq!(clone_lines[8], odd);
    assert_eq!(clone_lines[9], with_field);
    assert_eq!(clone_lines[1..], all[1..]);
}

#[test]
fn truncated_last_line_is_dropped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.jsonl");
    let text = fs::read_to_string(fixture("m_session.session.jsonl")).unwrap();
    let cut = &text[..text.len() - 60];
    fs::write(&path, cut).unwrap();
    let mut s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 6);
    assert_eq!(s.leaf_id(), Some("2f03ccc8"));
    let warnings = s.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("incomplete last line (line 8)"),
        "{warnings:?}"
    );

    // The next append starts on a fresh line; the cut line stays as it was.
    let id = s.append_message(&assistant("after crash"));
    let raw = fs::read_to_string(&path).unwrap();
    assert!(raw.starts_with(cut));
    let reopened = Session::open(&path).unwrap();
    assert_eq!(reopened.entries().len(), 7);
    assert_eq!(reopened.leaf_id(), Some(id.as_str()));
    assert_eq!(reopened.entry(&id).unwrap().parent_id(), Some("2f03ccc8"));
}

#[test]
fn garbage_and_headerless_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("g.jsonl");
    fs::write(&garbage, b"\x00\xffnot json at all\n{{{\n").unwrap();
    let err = Session::open(&garbage).unwrap_err();
    assert!(err.contains("no valid session header"), "{err}");
    let headerless = dir.path().join("h.jsonl");
    fs::write(&headerless, "{\"type\":\"message\",\"id\":\"a\"}\n").unwrap();
    assert!(Session::open(&headerless).is_err());
    let empty = dir.path().join("e.jsonl");
    fs::write(&empty, "").unwrap();
    assert!(Session::open(&empty).is_err());
    assert!(
        Session::open(&dir.path().join("missing.jsonl"))
            .unwrap_err()
            .contains("Cannot open")
    );

    // open_or_create: the reference's setSessionFile semantics, except that a file it cannot
    // read is refused and left as it was (the reference overwrites it with a fresh header).
    let err = Session::open_or_create(&garbage, "/w").unwrap_err();
    assert!(err.contains("pith does not overwrite"), "{err}");
    assert_eq!(
        fs::read(&garbage).unwrap(),
        b"\x00\xffnot json at all\n{{{\n"
    );
    let s = Session::open_or_create(&empty, "/w").unwrap();
    assert_eq!(s.file(), Some(empty.as_path()));
    let missing = dir.path().join("later.jsonl");
    let mut s = Session::open_or_create(&missing, "/w").unwrap();
    assert_eq!(s.file(), Some(missing.as_path()));
    s.append_message(&user("q"));
    assert!(!missing.exists());
    s.append_message(&assistant("a"));
    assert_eq!(lines(&missing).len(), 3);
}

/// Replace ids, parent ids, timestamps and the header's id/cwd with placeholders.
fn normalise(line: &str) -> String {
    let mut v: Value = serde_json::from_str(line).unwrap();
    let obj = v.as_object_mut().unwrap();
    for key in ["id", "parentId", "timestamp", "cwd", "parentSession"] {
        if let Some(x) = obj.get_mut(key) {
            if !x.is_null() {
                *x = json!("X");
            }
        }
    }
    if let Some(m) = obj.get_mut("message").and_then(Value::as_object_mut) {
        m.insert("timestamp".into(), json!(0));
    }
    store::to_line(obj)
}

#[test]
fn new_session_writes_the_reference_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let msgs = fixture_messages("m_session.session.jsonl");
    let parse = |v: &Value| serde_json::from_value::<AgentMessage>(v.clone()).unwrap();
    let mut s = Session::new("/somewhere", Some(dir.path().to_path_buf()), None);
    s.append_model_change("fake", "fake-model");
    s.append_thinking_level_change(ThinkingLevel::Medium);
    s.append_message(&parse(&msgs[0]));
    s.append_message(&parse(&msgs[1]));
    s.append_session_info("oracle session");
    s.append_message(&parse(&msgs[2]));
    s.append_message(&parse(&msgs[3]));

    let path = s.file().unwrap().to_path_buf();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let ts = s.header()["timestamp"]
        .as_str()
        .unwrap()
        .replace([':', '.'], "-");
    assert_eq!(name, format!("{ts}_{}.jsonl", s.id()));
    let ours: Vec<String> = lines(&path).iter().map(|l| normalise(l)).collect();
    let theirs: Vec<String> = lines(&fixture("m_session.session.jsonl"))
        .iter()
        .map(|l| normalise(l))
        .collect();
    assert_eq!(ours, theirs);

    // Parent links form a chain in append order.
    let ids: Vec<&str> = s.entries().iter().map(|e| e.id()).collect();
    for (i, e) in s.entries().iter().enumerate().skip(1) {
        assert_eq!(e.parent_id(), Some(ids[i - 1]));
    }
    let reopened = Session::open(&path).unwrap();
    assert_eq!(reopened.build_context(), s.build_context());
}

#[test]
fn nothing_is_written_before_the_first_assistant_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new("/w", Some(dir.path().join("sub")), None);
    let path = s.file().unwrap().to_path_buf();
    s.append_model_change("fake", "fake-model");
    s.append_thinking_level_change(ThinkingLevel::Off);
    s.append_message(&user("hello"));
    s.append_session_info("named");
    s.append_message(&AgentMessage::BashExecution(BashExecutionMessage {
        command: "ls".into(),
        output: "x".into(),
        exit_code: Some(0),
        cancelled: false,
        truncated: false,
        full_output_path: None,
        timestamp: 5,
        exclude_from_context: None,
    }));
    assert!(!path.exists());
    assert!(!s.is_flushed());
    assert_eq!(
        session::export_html(
            &s,
            Some(dir.path().join("x.html").to_str().unwrap()),
            &Default::default()
        )
        .unwrap_err(),
        "Nothing to export yet - start a conversation first"
    );
    s.append_message(&assistant("hi"));
    assert!(s.is_flushed());
    assert_eq!(lines(&path).len(), 7);
    s.append_message(&user("more"));
    assert_eq!(lines(&path).len(), 8);

    let mut mem = Session::new("/w", None, None);
    mem.append_message(&assistant("hi"));
    assert_eq!(mem.file(), None);
    assert_eq!(
        session::export_html(&mem, Some("/nonexistent/x.html"), &Default::default()).unwrap_err(),
        "Cannot export in-memory session to HTML"
    );
}

#[test]
fn fork_matches_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(dir.path(), "m_session.session.jsonl");
    let s = Session::open(&path).unwrap();
    let (mut forked, text) = s.fork_at("2f03ccc8").unwrap();
    assert_eq!(text, "Second prompt");
    let fork_path = forked.file().unwrap().to_path_buf();
    assert_eq!(fork_path.parent(), Some(dir.path()));
    assert!(
        forked.is_flushed(),
        "the kept path has an assistant message: written at once"
    );
    let ours = lines(&fork_path);
    let reference = lines(&fixture("m_session.session.2.jsonl"));
    assert_eq!(ours[1..], reference[1..6]);
    assert_eq!(
        forked.header()["parentSession"],
        path.to_string_lossy().as_ref()
    );
    assert_eq!(normalise(&ours[0]), normalise(&reference[0]));
    assert_eq!(
        texts(&forked.build_context()),
        ["First prompt", "Reply one."]
    );
    assert_eq!(forked.session_name().as_deref(), Some("oracle session"));
    forked.append_message(&user("Prompt on the fork"));
    assert_eq!(
        forked.entries().last().unwrap().parent_id(),
        Some("e0b29ef6")
    );
    assert_eq!(lines(&fork_path).len(), 7);

    for bad in ["c658e49e", "e0b29ef6", "nope"] {
        assert_eq!(s.fork_at(bad).unwrap_err(), session::INVALID_FORK_ENTRY);
    }
    // The source file is untouched.
    assert_eq!(
        fs::read(&path).unwrap(),
        fs::read(fixture("m_session.session.jsonl")).unwrap()
    );
}

#[test]
fn fork_without_assistant_defers_and_root_fork_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new("/w", Some(dir.path().to_path_buf()), None);
    let first = s.append_message(&user("one"));
    s.append_message(&assistant("r1"));
    let second = s.append_message(&user("two"));
    // Root user message: a brand-new empty session pointing at this one.
    let (root_fork, text) = s.fork_at(&first).unwrap();
    assert_eq!(text, "one");
    assert!(root_fork.entries().is_empty());
    assert_eq!(
        root_fork.header()["parentSession"],
        s.file().unwrap().to_string_lossy().as_ref()
    );
    assert!(!root_fork.file().unwrap().exists());
    let (f, _) = s.fork_at(&second).unwrap();
    assert!(f.file().unwrap().exists());

    // Labels on kept entries are re-created after the path.
    let mut m = Session::new("/w", None, None);
    let u = m.append_message(&user("only"));
    m.append_label(&u, Some("bookmark")).unwrap();
    let u2 = m.append_message(&user("next"));
    let (f, _) = m.fork_at(&u2).unwrap();
    assert_eq!(f.file(), None);
    let kinds: Vec<&str> = f.entries().iter().map(|e| e.entry_type()).collect();
    assert_eq!(kinds, ["message", "label"]);
    assert_eq!(f.label(&u), Some("bookmark"));
    assert!(m.append_label("missing", Some("x")).is_err());
}

#[test]
fn clone_reproduces_the_reference_clone() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(dir.path(), "m_session.session.2.jsonl");
    let s = Session::open(&path).unwrap();
    let c = s.clone_branch().unwrap();
    let ours = lines(c.file().unwrap());
    let reference = lines(&fixture("m_session.session.3.jsonl"));
    assert_eq!(ours[1..], reference[1..]);
    assert_eq!(normalise(&ours[0]), normalise(&reference[0]));
}

#[test]
fn compaction_context_and_branching() {
    let mut s = Session::new("/w", None, None);
    s.append_message(&user("u1"));
    s.append_message(&assistant("a1"));
    let u2 = s.append_message(&user("u2"));
    s.append_message(&assistant("a2"));
    let c = s.append_compaction("SUM", &u2, 1234, Some(json!({"readFiles":[]})), Some(false));
    s.append_message(&user("u3"));
    let a3 = s.append_message(&assistant("a3"));
    assert_eq!(
        texts(&s.build_context()),
        ["summary:SUM", "u2", "a2", "u3", "a3"]
    );
    let raw = store::to_line(s.entry(&c).unwrap().raw());
    let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(&raw)
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "summary",
            "firstKeptEntryId",
            "tokensBefore",
            "details",
            "fromHook"
        ]
    );
    match &s.build_context()[0] {
        AgentMessage::CompactionSummary(cs) => {
            assert_eq!(cs.tokens_before, 1234);
            assert_eq!(cs.timestamp, s.entry(&c).unwrap().timestamp_ms());
        }
        other => panic!("{other:?}"),
    }

    // firstKeptEntryId not on the path: nothing before the compaction is kept.
    let mut t = Session::new("/w", None, None);
    t.append_message(&user("u1"));
    t.append_compaction("S", "elsewhere", 1, None, None);
    t.append_message(&user("u2"));
    assert_eq!(texts(&t.build_context()), ["summary:S", "u2"]);

    // Branching moves the leaf; a summary of the abandoned branch enters the context.
    s.branch(&u2).unwrap();
    assert_eq!(texts(&s.build_context()), ["u1", "a1", "u2"]);
    let b = s
        .branch_with_summary(Some(&a3), "went elsewhere", None, None)
        .unwrap();
    assert_eq!(s.entry(&b).unwrap().parent_id(), Some(a3.as_str()));
    s.reset_leaf();
    assert!(s.build_context().is_empty());
    assert!(s.branch("zzz").is_err());
}

#[test]
fn stats_and_context_usage_match_the_reference_shape() {
    let mut s = Session::new("/w", None, None);
    s.append_message(&user("hi"));
    let mut a = AssistantMessage::empty("anthropic-messages", "fake", "fake-model");
    a.content.push(Content::text("x"));
    a.content.push(Content::ToolCall(ToolCall {
        id: "t1".into(),
        name: "bash".into(),
        arguments: json!({"command":"ls"}),
        arguments_error: None,
        thought_signature: None,
    }));
    a.usage = Usage {
        input: 1500,
        output: 20,
        cache_read: 300,
        cache_write: 50,
        total_tokens: 1870,
        ..Default::default()
    };
    a.usage.cost.total = 0.0050775;
    s.append_message(&AgentMessage::Assistant(a));
    let ctx = s.build_context();
    let stats = s.stats(&ctx, Some(200_000));
    let want = json!({
        "sessionId": s.id(), "userMessages": 1, "assistantMessages": 1, "toolCalls": 1, "toolResults": 0,
        "totalMessages": 2, "tokens": {"input":1500,"output":20,"cacheRead":300,"cacheWrite":50,"total":1870},
        "cost": 0.0050775, "contextUsage": {"tokens":1870,"contextWindow":200000,"percent":0.935}
    });
    assert_eq!(serde_json::to_value(&stats).unwrap(), want);
    let empty = Session::new("/w", None, None);
    let s0 = serde_json::to_string(&empty.stats(&[], Some(200_000))).unwrap();
    assert!(
        s0.ends_with(r#""cost":0,"contextUsage":{"tokens":0,"contextWindow":200000,"percent":0}}"#),
        "{s0}"
    );

    // Trailing messages after the last assistant are estimated (chars / 4, rounded up).
    s.append_message(&user("12345"));
    let ctx = s.build_context();
    assert_eq!(
        s.stats(&ctx, Some(200_000)).context_usage.unwrap().tokens,
        Some(1872)
    );
    // Right after a compaction the usage is unknown.
    let first = s.entries()[0].id().to_string();
    s.append_compaction("S", &first, 1, None, Some(false));
    let usage = s
        .stats(&s.build_context(), Some(1000))
        .context_usage
        .unwrap();
    assert_eq!(
        serde_json::to_string(&usage).unwrap(),
        r#"{"tokens":null,"contextWindow":1000,"percent":null}"#
    );
    assert!(s.stats(&ctx, None).context_usage.is_none());
    let file_stats = serde_json::to_value(s.stats(&ctx, None)).unwrap();
    assert!(file_stats.get("sessionFile").is_none());
}

fn keys_of(s: &Session, id: &str) -> Vec<String> {
    s.entry(id).unwrap().raw().keys().cloned().collect()
}

#[test]
fn extension_entries_use_the_reference_key_order() {
    let mut s = Session::new("/w", None, None);
    let c = s.append_custom("ext", Some(json!({"k": 1})));
    assert_eq!(
        keys_of(&s, &c),
        ["type", "customType", "data", "id", "parentId", "timestamp"]
    );
    let c2 = s.append_custom("ext", None);
    assert_eq!(
        keys_of(&s, &c2),
        ["type", "customType", "id", "parentId", "timestamp"]
    );
    let m = s.append_custom_message(
        "ext",
        &UserContent::Text("hello".into()),
        false,
        Some(json!(1)),
    );
    assert_eq!(
        keys_of(&s, &m),
        [
            "type",
            "customType",
            "content",
            "display",
            "details",
            "id",
            "parentId",
            "timestamp"
        ]
    );
    let l = s.append_label(&c, Some("tag")).unwrap();
    assert_eq!(
        keys_of(&s, &l),
        ["type", "id", "parentId", "timestamp", "targetId", "label"]
    );
    let cleared = s.append_label(&c, None).unwrap();
    assert_eq!(
        keys_of(&s, &cleared),
        ["type", "id", "parentId", "timestamp", "targetId"]
    );
    assert_eq!(s.label(&c), None);
    // Only the custom message enters the context, as a `custom` message with the entry's time.
    let ctx = s.build_context();
    assert_eq!(ctx.len(), 1);
    match &ctx[0] {
        AgentMessage::Custom(cm) => {
            assert_eq!(cm.custom_type, "ext");
            assert!(!cm.display);
            assert_eq!(cm.timestamp, s.entry(&m).unwrap().timestamp_ms());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn last_assistant_text_skips_empty_aborted_messages() {
    let mut aborted = AssistantMessage::empty("a", "p", "m");
    aborted.stop_reason = StopReason::Aborted;
    let msgs = vec![
        assistant("  first  "),
        user("q"),
        AgentMessage::Assistant(aborted),
    ];
    assert_eq!(
        session::last_assistant_text(&msgs).as_deref(),
        Some("first")
    );
    assert_eq!(session::last_assistant_text(&[assistant("  ")]), None);
    assert_eq!(session::last_assistant_text(&[user("q")]), None);
}

#[test]
fn ten_thousand_entries_load_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"01a20036-3f26-7328-8f9b-b9da36d18b5f","timestamp":"2026-11-21T22:24:44.839Z","cwd":"/w"}"#,
    );
    text.push('\n');
    let mut parent = "null".to_string();
    for i in 0..10_000 {
        let id = format!("{i:08x}");
        text.push_str(&format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-11-21T22:24:44.869Z","message":{{"role":"user","content":[{{"type":"text","text":"message number {i}"}}],"timestamp":1795299884867}}}}"#
        ));
        text.push('\n');
        parent = format!("\"{id}\"");
    }
    fs::write(&path, text).unwrap();
    let start = std::time::Instant::now();
    let s = Session::open(&path).unwrap();
    let ctx = s.build_context();
    let forks = s.user_messages_for_fork();
    let elapsed = start.elapsed();
    assert_eq!(ctx.len(), 10_000);
    assert_eq!(forks.len(), 10_000);
    assert!(elapsed.as_secs_f64() < 5.0, "took {elapsed:?}");
}

#[test]
fn older_versions_are_migrated_and_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    fs::write(
        &path,
        concat!(
            r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#, "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#, "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"h","content":"hook","display":true,"timestamp":2}}"#, "\n",
        ),
    )
    .unwrap();
    let s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 2);
    assert_eq!(s.entries()[1].parent_id(), Some(s.entries()[0].id()));
    let ctx = s.build_context();
    assert!(matches!(&ctx[1], AgentMessage::Custom(c) if c.custom_type == "h"));
    let written = lines(&path);
    assert!(written[0].starts_with(r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","version":3}"#));
    assert!(written[2].contains(r#""role":"custom""#));
}

#[test]
fn locating_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let a = copy_fixture(dir.path(), "m_session.session.jsonl");
    let b = copy_fixture(dir.path(), "m_session.session.2.jsonl");
    fs::write(dir.path().join("junk.jsonl"), "nope\n").unwrap();
    fs::write(dir.path().join("notes.txt"), "x").unwrap();
    // Make `a` the most recently modified.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    fs::File::options()
        .write(true)
        .open(&a)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(session::find_most_recent(dir.path()), Some(a.clone()));
    assert_eq!(session::find_most_recent(&dir.path().join("none")), None);

    assert_eq!(
        session::resolve_session_arg("01a20036-3feb", dir.path()).unwrap(),
        b
    );
    // Both ids share this prefix: the one with the latest message wins.
    assert_eq!(
        session::resolve_session_arg("01a20036-3f", dir.path()).unwrap(),
        b
    );
    assert_eq!(
        session::resolve_session_arg("ffff", dir.path()).unwrap_err(),
        "No session found matching 'ffff'"
    );
    assert_eq!(
        session::resolve_session_arg("x/y", dir.path()).unwrap(),
        PathBuf::from("x/y")
    );
    assert_eq!(
        session::resolve_session_arg("z.jsonl", dir.path()).unwrap(),
        PathBuf::from("z.jsonl")
    );
    assert_eq!(
        session::default_session_dir(Path::new("/home/u/.pi/agent"), "/tmp/pitest/work"),
        PathBuf::from("/home/u/.pi/agent/sessions/--tmp-pitest-work--")
    );
}

#[test]
fn export_escapes_every_piece_of_content() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "<script>alert(1)</script>";
    let mut s = Session::new("/w<script>", Some(dir.path().to_path_buf()), None);
    s.append_message(&AgentMessage::User(UserMessage {
        content: UserContent::Text(evil.into()),
        timestamp: 1,
    }));
    let mut a = AssistantMessage::empty("anthropic-messages", "fake", "model<script>");
    a.content.push(Content::Thinking(ThinkingContent {
        thinking: evil.into(),
        thinking_signature: None,
        redacted: None,
    }));
    a.content.push(Content::text(evil));
    a.content.push(Content::ToolCall(ToolCall {
        id: "t".into(),
        name: "bash<script>".into(),
        arguments: json!({"command": evil, "<script>": 1}),
        arguments_error: None,
        thought_signature: None,
    }));
    a.stop_reason = StopReason::Error;
    a.error_message = Some(evil.into());
    s.append_message(&AgentMessage::Assistant(a));
    s.append_message(&AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: "t".into(),
        tool_name: "bash<script>".into(),
        content: vec![Content::text(evil)],
        details: None,
        is_error: true,
        duration_ms: None,
        timestamp: 3,
        nested_calls: None,
    }));
    s.append_message(&AgentMessage::BashExecution(BashExecutionMessage {
        command: evil.into(),
        output: evil.into(),
        exit_code: Some(1),
        cancelled: false,
        truncated: false,
        full_output_path: None,
        timestamp: 4,
        exclude_from_context: None,
    }));
    s.append_custom_message("ext<script>", &UserContent::Text(evil.into()), true, None);
    s.append_session_info(evil);
    s.append_model_change("p<script>", "m<script>");
    let first = s.entries()[0].id().to_string();
    s.append_compaction(evil, &first, 10, None, Some(false));

    let out = dir.path().join("out.html");
    let returned =
        session::export_html(&s, Some(out.to_str().unwrap()), &Default::default()).unwrap();
    assert_eq!(returned, out.to_str().unwrap());
    let html = fs::read_to_string(&out).unwrap();
    // The page's own script and data blocks are the only script tags.
    assert_eq!(
        html.to_lowercase().matches("<script").count(),
        html.matches("<script>(function").count()
            + html.matches("<script>\n(function").count()
            + html.matches("<script type=\"application/").count(),
        "unescaped script tag in export"
    );
    assert!(
        !html.contains("<script>alert"),
        "unescaped script tag in export"
    );
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no network resources"
    );
    // Every field is present, escaped.
    assert!(
        html.matches("&lt;script&gt;alert(1)&lt;/script&gt;")
            .count()
            >= 9
    );
    assert!(html.contains("bash&lt;script&gt;"));
    assert!(html.contains("ext&lt;script&gt;"));
    assert!(html.contains(
        "<span class=\"hp\">&quot;&lt;script&gt;&quot;</span>: <span class=\"hn\">1</span>"
    ));
}

#[test]
fn export_of_the_oracle_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(dir.path(), "n_export_html.session.jsonl");
    let s = Session::open(&path).unwrap();
    let out = dir.path().join("e.html");
    session::export_html(&s, Some(out.to_str().unwrap()), &Default::default()).unwrap();
    let html = fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>Session 01a20036-468c-731e-8dec-b050cc29b8e4 — pith</title>"));
    assert!(html.contains("Do something exportable"));
    assert!(html.contains("Done &lt;b&gt;bold?&lt;/b&gt;"));
    assert!(html.contains("<span class=\"hk\">echo</span> exported</code>"));
    assert!(html.contains("<pre class=\"code\"><code>exported</code></pre>"));
    assert_eq!(
        session::export_html::default_export_name(&path),
        "pi-session-n_export_html.session.html"
    );
}

fn failed(text: &str) -> AgentMessage {
    let AgentMessage::Assistant(mut a) = assistant(text) else {
        unreachable!()
    };
    a.stop_reason = StopReason::Error;
    a.error_message = Some("529 overloaded".into());
    AgentMessage::Assistant(a)
}

/// Failed replies stay in the context read from the file, a retried one too (a failed reply
/// followed by another reply before the next user message), as pi's `buildSessionContext` gives
/// it, in memory and after a reload, through both the loading path (`take_context`) and
/// `build_context`. (The live agent drops a retried reply; pi 0.73.1 shows it again once the
/// file is read, and 0.87.1 records a `context_edit` entry that takes it out.)
#[test]
fn failed_replies_stay_in_the_context_read_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new("/w", Some(dir.path().to_path_buf()), None);
    for m in [
        user("q1"),
        failed("e1"),
        failed("e2"),
        assistant("a1"),
        user("q2"),
        failed("e3"),
        AgentMessage::BashExecution(BashExecutionMessage {
            command: "ls".into(),
            output: "x".into(),
            exit_code: Some(0),
            cancelled: false,
            truncated: false,
            full_output_path: None,
            timestamp: 1,
            exclude_from_context: None,
        }),
        assistant("a2"),
        user("q3"),
        failed("e4"),
    ] {
        s.append_message(&m);
    }
    let want = ["q1", "e1", "e2", "a1", "q2", "e3", "", "a2", "q3", "e4"];
    let texts_of = |ms: &[AgentMessage]| -> Vec<String> {
        ms.iter()
            .map(|m| match m {
                AgentMessage::BashExecution(_) => String::new(),
                other => texts(std::slice::from_ref(other)).remove(0),
            })
            .collect()
    };
    assert_eq!(texts_of(&s.build_context()), want);
    let file = s.file().unwrap().to_path_buf();
    let mut loaded = Session::open(&file).unwrap();
    assert_eq!(texts_of(&loaded.build_context()), want);
    assert_eq!(texts_of(&loaded.take_context().to_vec()), want);
}
