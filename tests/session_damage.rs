//! Loading damaged session files: nothing complete is lost because a neighbouring line is cut
//! or corrupt. The damage is made from the reference's own session file
//! (`fixtures/sessions/m_session.session.jsonl`, eight lines: header, model_change,
//! thinking_level_change, user "First prompt", assistant "Reply one.", session_info, user
//! "Second prompt", assistant "Reply two.", each entry the parent of the next).
//!
//! pi 0.73.1 skips an unparsable line and walks `parentId` links back from the last entry, so
//! the walk stops at the lost entry and everything before it is gone from the conversation
//! (checked against the oracle: the figures are in each test). pith keeps what is intact: the
//! entries of a line that only lost its head, a complete entry glued onto a cut one, and the
//! history before a lost entry.

use std::fs;
use std::path::{Path, PathBuf};

use pith::message::AgentMessage;
use pith::session::Session;

fn fixture_lines() -> Vec<String> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sessions/m_session.session.jsonl");
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("damaged.jsonl");
    fs::write(&path, text).unwrap();
    path
}

/// The first `n` bytes of a line (all fixture lines are ASCII).
fn cut(line: &str, n: usize) -> &str {
    &line[..n]
}

fn texts(messages: &[AgentMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            AgentMessage::User(u) => format!("user:{}", u.content.joined_text()),
            AgentMessage::Assistant(a) => format!("assistant:{}", a.text()),
            other => format!("{other:?}"),
        })
        .collect()
}

fn ids(s: &Session) -> Vec<&str> {
    s.entries().iter().map(|e| e.id()).collect()
}

const FULL: [&str; 4] = [
    "user:First prompt",
    "assistant:Reply one.",
    "user:Second prompt",
    "assistant:Reply two.",
];

#[test]
fn a_corrupt_line_in_the_middle_keeps_the_history_before_it() {
    // The session_info line (6) overwritten with zeros, as a crashed file system leaves it.
    // pi: context [Second prompt, Reply two.].
    let dir = tempfile::tempdir().unwrap();
    let mut lines = fixture_lines();
    lines[5] = "\0".repeat(lines[5].len());
    let path = write(dir.path(), &(lines.join("\n") + "\n"));
    let mut s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 6);
    assert_eq!(texts(&s.build_context()), FULL);
    let warnings = s.take_warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].ends_with("skipped unparsable line 6"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].ends_with(
            "entry 2f03ccc8 hung from e0b29ef6, which was lost with a damaged line; attached to c658e49e"
        ),
        "{warnings:?}"
    );
}

#[test]
fn a_cut_line_followed_by_a_fresh_one_links_through_its_head() {
    // Line 5 (assistant "Reply one.") cut after its head; the writer then started a new line.
    // pi: context [Second prompt, Reply two.].
    let dir = tempfile::tempdir().unwrap();
    let mut lines = fixture_lines();
    lines[4] = cut(&lines[4], 150).to_string();
    let path = write(dir.path(), &(lines.join("\n") + "\n"));
    let s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 6);
    assert!(!ids(&s).contains(&"c658e49e"));
    assert_eq!(
        texts(&s.build_context()),
        [
            "user:First prompt",
            "user:Second prompt",
            "assistant:Reply two."
        ]
    );
    // The session_info entry now hangs from the user message the lost reply answered.
    let path_ids: Vec<&str> = s.branch_path().iter().map(|e| e.id()).collect();
    assert_eq!(
        path_ids,
        [
            "17378f71", "d790035d", "a073d6d7", "e0b29ef6", "2f03ccc8", "7c16e254"
        ]
    );
}

#[test]
fn a_complete_entry_glued_onto_a_cut_one_is_kept() {
    // Line 5 cut at 200 bytes by a full disk, and line 6 written straight after it (a writer
    // that did not notice). pi skips both: context [Second prompt, Reply two.].
    let dir = tempfile::tempdir().unwrap();
    let lines = fixture_lines();
    let mut text = lines[..4].join("\n") + "\n";
    text.push_str(cut(&lines[4], 200));
    text.push_str(&(lines[5..].join("\n") + "\n"));
    let path = write(dir.path(), &text);
    let mut s = Session::open(&path).unwrap();
    assert_eq!(
        ids(&s),
        [
            "17378f71", "d790035d", "a073d6d7", "e0b29ef6", "2f03ccc8", "7c16e254"
        ]
    );
    assert_eq!(s.session_name().as_deref(), Some("oracle session"));
    assert_eq!(
        texts(&s.build_context()),
        [
            "user:First prompt",
            "user:Second prompt",
            "assistant:Reply two."
        ]
    );
    let warnings = s.take_warnings();
    assert!(
        warnings[0].ends_with("line 5 starts with a cut entry; kept the complete entry after it"),
        "{warnings:?}"
    );
    // The kept entry is written back byte for byte (fork, clone).
    assert_eq!(s.entry("e0b29ef6").unwrap().line(), lines[5]);
}

#[test]
fn two_cut_entries_glued_before_a_complete_one() {
    // Lines 5 and 6 both cut, all on one line with line 7. pi: context [Reply two.] alone.
    let dir = tempfile::tempdir().unwrap();
    let lines = fixture_lines();
    let mut text = lines[..4].join("\n") + "\n";
    text.push_str(cut(&lines[4], 300));
    text.push_str(cut(&lines[5], 80));
    text.push_str(&(lines[6..].join("\n") + "\n"));
    let path = write(dir.path(), &text);
    let s = Session::open(&path).unwrap();
    assert_eq!(
        ids(&s),
        ["17378f71", "d790035d", "a073d6d7", "2f03ccc8", "7c16e254"]
    );
    assert_eq!(
        texts(&s.build_context()),
        [
            "user:First prompt",
            "user:Second prompt",
            "assistant:Reply two."
        ]
    );
}

#[test]
fn a_cut_line_without_a_readable_head_attaches_to_the_entry_before_it() {
    // Line 7 (user "Second prompt") cut before its id; line 8 follows on its own line.
    // pi: context [Reply two.] alone.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = fixture_lines();
    lines[6] = cut(&lines[6], 12).to_string();
    let path = write(dir.path(), &(lines.join("\n") + "\n"));
    let s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 6);
    assert_eq!(
        texts(&s.build_context()),
        [
            "user:First prompt",
            "assistant:Reply one.",
            "assistant:Reply two."
        ]
    );
}

#[test]
fn an_unrelated_dangling_parent_is_left_alone() {
    // No damage: an entry whose parent never existed still starts a new root (as pi).
    let dir = tempfile::tempdir().unwrap();
    let mut lines = fixture_lines();
    lines[6] = lines[6].replace("\"parentId\":\"e0b29ef6\"", "\"parentId\":\"ffffffff\"");
    let path = write(dir.path(), &(lines.join("\n") + "\n"));
    let s = Session::open(&path).unwrap();
    assert_eq!(s.entries().len(), 7);
    assert_eq!(
        texts(&s.build_context()),
        ["user:Second prompt", "assistant:Reply two."]
    );
}

#[test]
fn appending_to_a_damaged_file_and_reopening_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let lines = fixture_lines();
    // Cut in the middle of the last line: the file does not end with a newline.
    let text = lines[..7].join("\n") + "\n" + cut(&lines[7], 100);
    let path = write(dir.path(), &text);
    let mut s = Session::open(&path).unwrap();
    let id = s.append_session_info("again");
    drop(s);
    let raw = fs::read_to_string(&path).unwrap();
    assert!(raw.starts_with(&text));
    assert!(
        raw[text.len()..].starts_with('\n'),
        "the append starts on a fresh line"
    );
    let s = Session::open(&path).unwrap();
    assert_eq!(s.leaf_id(), Some(id.as_str()));
    assert_eq!(
        texts(&s.build_context()),
        [
            "user:First prompt",
            "assistant:Reply one.",
            "user:Second prompt"
        ]
    );
}

#[test]
fn a_file_cut_by_another_program_gets_a_fresh_line_before_the_next_entry() {
    // The session was loaded whole; then something else appended half a line. The next append
    // must not glue onto it.
    let dir = tempfile::tempdir().unwrap();
    let lines = fixture_lines();
    let path = write(dir.path(), &(lines.join("\n") + "\n"));
    let mut s = Session::open(&path).unwrap();
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, br#"{"type":"message","id":"zz"#).unwrap();
    let id = s.append_session_info("after");
    let reopened = Session::open(&path).unwrap();
    assert_eq!(reopened.entries().len(), 8);
    assert_eq!(reopened.leaf_id(), Some(id.as_str()));
    assert_eq!(reopened.entry(&id).unwrap().parent_id(), Some("7c16e254"));
}

#[test]
fn devices_and_fifos_are_refused_without_reading_or_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.jsonl");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Opening a FIFO for reading would wait for a writer forever.
        let e = Session::open(&fifo).unwrap_err();
        assert!(e.ends_with("is not a regular file"), "{e}");
    }
    let e = Session::open(Path::new("/dev/zero")).unwrap_err();
    assert!(e.ends_with("is not a regular file"), "{e}");
}

/// Each line of `path` that is a whole JSON object with an `id` (or ends with one glued onto a
/// cut line), by id.
fn lines_by_id(path: &Path) -> std::collections::HashMap<String, String> {
    fs::read_to_string(path)
        .unwrap()
        .split('\n')
        .filter_map(|l| {
            l.match_indices(r#"{"type":""#).find_map(|(at, _)| {
                let v: serde_json::Value = serde_json::from_str(&l[at..]).ok()?;
                Some((v["id"].as_str()?.to_string(), l[at..].to_string()))
            })
        })
        .collect()
}

/// Every entry's line as pith reads it back (most from the file, by offset) is the line the
/// file holds for that id.
fn assert_lines_read_back(s: &Session, path: &Path) {
    let file = lines_by_id(path);
    for e in s.entries() {
        let line = e.try_line().unwrap();
        assert_eq!(
            Some(&*line),
            file.get(e.id()).map(String::as_str),
            "{}",
            e.id()
        );
    }
}

#[test]
fn lines_left_in_the_file_read_back_after_damage_and_repaired_writes() {
    // A long session (over 2 MiB: read on two threads) whose entries stay in the file, with a
    // complete entry glued onto a cut one in the middle and a cut last line. Then writes that
    // start on a fresh line (after the cut, after half a line another program appended) and
    // one that fails and is retried: every line pith reads back by offset must still be the
    // entry's own line.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = fixture_lines();
    let text = "x".repeat(3000);
    let mut parent = "7c16e254".to_string();
    for i in 0..1000 {
        let id = format!("{i:08x}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let message = match role {
            "user" => format!(
                r#"{{"role":"user","content":[{{"type":"text","text":"{i} {text}"}}],"timestamp":1}}"#
            ),
            _ => format!(
                r#"{{"role":"assistant","content":[{{"type":"text","text":"{i} {text}"}}],"api":"anthropic-messages","provider":"fake","model":"fake-model","usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"stopReason":"stop","timestamp":1}}"#
            ),
        };
        let line = format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-11-21T22:24:45.016Z","message":{message}}}"#
        );
        if i == 500 {
            // Entry 500 cut after 200 bytes, entry 501 glued onto it.
            lines.push(cut(&line, 200).to_string());
        } else if i == 501 {
            let last = lines.pop().unwrap();
            lines.push(last + &line);
        } else {
            lines.push(line);
        }
        parent = id;
    }
    let body = lines.join("\n") + "\n" + r#"{"type":"message","id":"cut"#;
    assert!(body.len() > 3 << 20);
    let path = write(dir.path(), &body);
    let mut s = Session::open(&path).unwrap();
    // The fixture's 7 entries and 999 of the 1,000 (500 lost, 501 kept from the glued line).
    assert_eq!(s.entries().len(), 7 + 999);
    assert_eq!(s.entry("000001f5").unwrap().parent_id(), Some("000001f4"));
    let in_memory: Vec<&str> = s
        .entries()
        .iter()
        .filter(|e| e.is_in_memory())
        .map(|e| e.id())
        .collect();
    assert_eq!(
        in_memory,
        ["000001f5"],
        "only the glued entry is kept in memory"
    );
    assert_lines_read_back(&s, &path);

    // After the cut last line: a fresh line first.
    let a = s.append_session_info("after the cut");
    assert!(!s.entry(&a).unwrap().is_in_memory());
    // Half a line appended behind pith's back.
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, br#"{"type":"message","id":"zz"#).unwrap();
    drop(f);
    let b = s.append_session_info("after another program");
    assert!(!s.entry(&b).unwrap().is_in_memory());
    assert_lines_read_back(&s, &path);

    // A write that fails (the path is a directory for a moment): the entry waits in memory,
    // the next write puts both in the file, and both are then read back from it.
    let aside = dir.path().join("aside.jsonl");
    fs::rename(&path, &aside).unwrap();
    fs::create_dir(&path).unwrap();
    let c = s.append_session_info("while failing");
    assert_eq!(s.unsaved_entries(), 1);
    assert!(s.entry(&c).unwrap().is_in_memory());
    fs::remove_dir(&path).unwrap();
    fs::rename(&aside, &path).unwrap();
    let d = s.append_session_info("written again");
    assert_eq!(s.unsaved_entries(), 0);
    for id in [&c, &d] {
        assert!(!s.entry(id).unwrap().is_in_memory(), "{id}");
    }
    assert_lines_read_back(&s, &path);
    let warnings = s.take_warnings();
    drop(s);

    let again = Session::open(&path).unwrap();
    assert_eq!(again.leaf_id(), Some(d.as_str()));
    assert_eq!(again.entries().len(), 7 + 999 + 4);
    assert_lines_read_back(&again, &path);
    assert!(
        warnings.iter().any(|w| w.contains("kept in memory")),
        "{warnings:?}"
    );
}
