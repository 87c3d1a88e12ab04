//! Files a host or user names on the command line or in a command, taken as untrusted: a session
//! file pith cannot read is never overwritten (it is refused with an error that says so), a
//! byte-order mark does not make a session unreadable, and paths that are not regular files
//! (devices, FIFOs, directories) are refused at once instead of being read without end.

mod support;

use std::fs;
use std::path::Path;

use serde_json::json;
use support::{World, fixture};

/// `pith <args>` in `w` with stdin closed: (exit code, stdout, stderr).
fn run(w: &World, args: &[&str]) -> (Option<i32>, String, String) {
    let out = w
        .command(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run pith");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn faux_session_args(path: &Path) -> Vec<String> {
    [
        "--mode",
        "rpc",
        "--provider",
        "faux",
        "--model",
        "faux",
        "--session",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([path.to_string_lossy().into_owned()])
    .collect()
}

// ---------------------------------------------------------------------------------------------
// A: session files pith cannot read are left alone

/// A session file that starts with a UTF-8 byte-order mark loads as pi loads it (its reader trims
/// the text first, and a BOM is whitespace to JavaScript's `trim`); appending keeps every byte.
#[test]
fn a_session_file_with_a_byte_order_mark_loads_and_is_kept() {
    let w = World::new();
    let file = w.tmp().join("bom.jsonl");
    let original = fs::read(fixture("sessions/m_session.session.jsonl")).unwrap();
    let mut text = b"\xEF\xBB\xBF".to_vec();
    text.extend_from_slice(&original);
    fs::write(&file, &text).unwrap();
    let args = faux_session_args(&file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p = w.spawn(&args);
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(
        st["data"]["sessionId"],
        "01a20036-3f26-7328-8f9b-b9da36d18b5f"
    );
    assert_eq!(st["data"]["messageCount"], 4);
    let r = p.call(json!({"type":"set_session_name","name":"kept"}), "n");
    assert_eq!(r["success"], true, "{r}");
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
    let after = fs::read(&file).unwrap();
    assert!(after.starts_with(&text), "the file's bytes were changed");
    let added = String::from_utf8(after[text.len()..].to_vec()).unwrap();
    assert!(added.contains("\"type\":\"session_info\""), "{added}");
}

/// `--session` naming a file that is not a session: pith refuses to start, says why, and leaves
/// the file exactly as it was (pi 0.73.1 replaces it by a fresh header, losing every line).
#[test]
fn session_flag_on_an_unreadable_file_refuses_and_keeps_it() {
    let w = World::new();
    let file = w.tmp().join("notes.jsonl");
    let text = "my notes, not a session\n{\"type\":\"message\",\"id\":\"x\"}\n";
    fs::write(&file, text).unwrap();
    let args = faux_session_args(&file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run(&w, &args);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "Error: Cannot load session file {0}: no valid session header (first line must be a JSON object with \"type\":\"session\" and a string \"id\"); pith does not overwrite a file it cannot read as a session: move it away or name another path\n",
            file.display()
        )
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), text);
}

/// An empty file holds nothing to lose: `--session` takes it over as pi does, and the first
/// reply writes the session into it.
#[test]
fn session_flag_on_an_empty_file_starts_a_session_there() {
    let w = World::new();
    let file = w.tmp().join("empty.jsonl");
    fs::write(&file, "").unwrap();
    let args = faux_session_args(&file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p = w.spawn(&args);
    let r = p.call(json!({"type":"prompt","message":"hello"}), "p");
    assert_eq!(r["success"], true, "{r}");
    p.recv_until(|v| v["type"] == "agent_settled");
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["sessionFile"], file.to_str().unwrap());
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
    let text = fs::read_to_string(&file).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "session");
    assert!(text.contains("\"role\":\"assistant\""), "{text}");
}
