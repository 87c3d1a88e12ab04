//! Long sessions through the real binary: a resumed session whose lines are read back from the
//! file (not kept in memory) clones byte for byte, refuses to fork from a file changed in place,
//! and a request body over the streaming threshold (written onto the connection while it is
//! sent) arrives whole, exactly `Content-Length` bytes of valid JSON carrying the history.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::anthropic::text_sse;
use support::fake_llm::Reply;
use support::{Pith, fake_rpc, fake_world};

/// A pi v3 session file of `turns` turns (user prompt, assistant bash call, tool result of
/// `out_bytes`, assistant text), written the way pi writes it; one line in `odd` form (spaces,
/// `1.0`) to show that such lines are still normalised when copied. Returns its lines.
fn write_session(path: &Path, cwd: &Path, turns: usize, out_bytes: usize) -> Vec<String> {
    let ts = "2026-11-21T22:24:44.852Z";
    let mut lines = vec![
        json!({"type":"session","version":3,"id":"0197a5c2-0000-7000-8000-000000000001","timestamp":ts,"cwd":cwd}).to_string(),
    ];
    let mut parent = Value::Null;
    let mut n = 0;
    let mut add = |mut e: Value, lines: &mut Vec<String>| {
        n += 1;
        let id = format!("{n:08x}");
        let obj = e.as_object_mut().unwrap();
        let mut ordered = serde_json::Map::new();
        ordered.insert("type".into(), obj.shift_remove("type").unwrap());
        ordered.insert("id".into(), json!(id));
        ordered.insert("parentId".into(), parent.clone());
        ordered.insert("timestamp".into(), json!(ts));
        ordered.extend(std::mem::take(obj));
        parent = json!(id);
        lines.push(Value::Object(ordered).to_string());
    };
    add(
        json!({"type":"model_change","provider":"fake","modelId":"fake-model"}),
        &mut lines,
    );
    let usage = json!({"input":100,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":120,
        "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}});
    let body: String = "line of tool output\n".repeat(out_bytes / 20 + 1)[..out_bytes].to_string();
    let t = 1_795_299_884_867u64;
    for i in 0..turns {
        add(
            json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":format!("step {i}: \"look\" at the logs")}],"timestamp":t}}),
            &mut lines,
        );
        let cid = format!("toolu_{i:06}");
        add(
            json!({"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","id":cid,"name":"bash","arguments":{"command":format!("cat log{i}.txt")}}],
                "api":"anthropic-messages","provider":"fake","model":"fake-model","usage":usage,"stopReason":"toolUse","timestamp":t}}),
            &mut lines,
        );
        add(
            json!({"type":"message","message":{"role":"toolResult","toolCallId":cid,"toolName":"bash","content":[{"type":"text","text":body}],"isError":false,"timestamp":t}}),
            &mut lines,
        );
        add(
            json!({"type":"message","message":{"role":"assistant","content":[{"type":"text","text":format!("Step {i} looks fine. é ☃")}],
                "api":"anthropic-messages","provider":"fake","model":"fake-model","usage":usage,"stopReason":"stop","timestamp":t}}),
            &mut lines,
        );
    }
    // Another program's spacing and number forms: kept as it is in the file, normalised when
    // copied (as always).
    let odd = lines.len() - 3;
    lines[odd] = lines[odd].replacen("\"timestamp\":", "\"timestamp\" : ", 1);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(path, text).unwrap();
    lines
}

fn spawn(w: &support::World, file: &Path, sessions: &Path) -> Pith {
    let f = file.to_str().unwrap();
    let d = sessions.to_str().unwrap();
    w.spawn(&fake_rpc(&["--session", f, "--session-dir", d]))
}

fn data(p: &mut Pith, cmd: Value, id: &str) -> Value {
    let r = p.call(cmd, id);
    assert_eq!(r["success"], true, "{r}");
    r.get("data").cloned().unwrap_or(Value::Null)
}

fn lines_of(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn normalised(line: &str) -> String {
    // What pith (and JSON.stringify) writes for a parsed line: key order kept, no spaces.
    serde_json::to_string(&serde_json::from_str::<Value>(line).unwrap()).unwrap()
}

#[test]
fn a_resumed_session_clones_byte_for_byte_from_lines_read_back() {
    let (w, _llm) = fake_world(vec![]);
    let sessions = w.dir.path().join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    let file = sessions.join("big.jsonl");
    let lines = write_session(&file, &w.cwd(), 200, 300);
    let mut p = spawn(&w, &file, &sessions);
    assert_eq!(
        data(&mut p, json!({"type":"get_state"}), "s")["messageCount"],
        800
    );
    data(&mut p, json!({"type":"clone"}), "c");
    let cloned = PathBuf::from(
        data(&mut p, json!({"type":"get_state"}), "s2")["sessionFile"]
            .as_str()
            .unwrap(),
    );
    assert_ne!(cloned, file);
    let copy = lines_of(&cloned);
    // A new header, then every entry of the branch exactly as in the file (the odd line
    // normalised, as a copy always was), then the thinking level recorded at resume.
    assert_eq!(copy.len(), lines.len() + 1);
    assert!(copy[lines.len()].starts_with(r#"{"type":"thinking_level_change""#));
    for (i, (got, want)) in copy.iter().zip(&lines).enumerate().skip(1) {
        if want.contains("\"timestamp\" : ") {
            assert_eq!(got, &normalised(want), "line {i}");
        } else {
            assert_eq!(got, want, "line {i}");
        }
    }
    // The original file only grew (the thinking level recorded at resume).
    assert_eq!(lines_of(&file)[..lines.len()], lines[..]);
}

#[test]
fn cloning_a_session_changed_in_place_is_refused_not_misread() {
    use std::io::{BufRead, BufReader, Write};
    let (w, _llm) = fake_world(vec![]);
    let sessions = w.dir.path().join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    let file = sessions.join("big.jsonl");
    let lines = write_session(&file, &w.cwd(), 20, 100);
    let f = file.to_str().unwrap();
    let d = sessions.to_str().unwrap();
    let mut child = w
        .command(&fake_rpc(&["--session", f, "--session-dir", d]))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"id":"s","type":"get_state"}}"#).unwrap();
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains(r#""command":"get_state""#), "{first}");
    // Another program rewrites the file in place (same inode), a few bytes changed.
    let changed: String = lines
        .iter()
        .map(|l| format!("{}\n", l.replace("looks fine", "looks FINE")))
        .collect();
    fs::write(&file, changed).unwrap();
    writeln!(stdin, r#"{{"id":"c","type":"clone"}}"#).unwrap();
    drop(stdin);
    let clone: Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .find(|v| v["id"] == "c")
        .expect("clone response");
    // Refused with the reason; nothing is written.
    assert_eq!(clone["success"], false, "{clone}");
    assert!(
        clone["error"]
            .as_str()
            .unwrap()
            .contains("was changed by another program since pith loaded it"),
        "{clone}"
    );
    let files = fs::read_dir(&sessions).unwrap().count();
    assert_eq!(files, 1);
    child.wait().unwrap();
}

#[test]
fn a_large_request_body_is_streamed_whole_with_its_content_length() {
    let (w, llm) = fake_world(vec![Reply::sse(text_sse(1, &["done"]))]);
    let sessions = w.dir.path().join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    let file = sessions.join("big.jsonl");
    // About 5.2 MB of history: over the 4 MiB threshold for streaming, and a file over the
    // 2 MiB threshold for loading on more than one thread.
    write_session(&file, &w.cwd(), 900, 5000);
    let mut p = spawn(&w, &file, &sessions);
    p.send(json!({"id":"p","type":"prompt","message":"one more step"}));
    let frames = p.recv_until(|v| v["type"] == "agent_end");
    assert!(
        frames.iter().any(|f| f["type"] == "message_end"
            && f["message"]["role"] == "assistant"
            && f["message"]["content"][0]["text"] == "done"),
        "{frames:#?}"
    );
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    let len: usize = r.header("content-length").unwrap().parse().unwrap();
    assert!(len > pith::llm::body::STREAM_ABOVE, "{len}");
    assert_eq!(r.body.len(), len);
    assert!(r.header("transfer-encoding").is_none());
    let body: Value = serde_json::from_str(&r.body).expect("the whole body is valid JSON");
    let msgs = body["messages"].as_array().unwrap();
    // Each turn: user, assistant tool call, user tool result, assistant text; then the prompt.
    assert_eq!(msgs.len(), 900 * 4 + 1);
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(
        msgs[2]["content"][0]["content"].as_str().unwrap().len(),
        5000
    );
    assert_eq!(msgs.last().unwrap()["content"][0]["text"], "one more step");
    assert_eq!(body["stream"], true);
}
