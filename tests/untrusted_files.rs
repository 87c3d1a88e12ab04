//! Files a host or user names on the command line or in a command, taken as untrusted: a session
//! file pith cannot read is never overwritten (it is refused with an error that says so), a
//! byte-order mark does not make a session unreadable, and paths that are not regular files
//! (devices, FIFOs, directories) are refused at once instead of being read without end; `@file`
//! arguments and system prompt files are read within bounds.

mod support;

use std::fs;
use std::path::Path;

use serde_json::json;
use support::{World, fixture};

/// `pith <args>` in `w` with stdin closed: (exit code, stdout, stderr). A pith that does not end
/// (a read without end) fails the test instead of hanging it.
fn run(w: &World, args: &[&str]) -> (Option<i32>, String, String) {
    let out_path = w.tmp().join("run.stdout");
    let err_path = w.tmp().join("run.stderr");
    let mut child = w
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("run pith");
    let status = support::wait_timeout(&mut child, support::TIMEOUT);
    (
        status.code(),
        fs::read_to_string(&out_path).unwrap(),
        fs::read_to_string(&err_path).unwrap(),
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

// ---------------------------------------------------------------------------------------------
// G: paths given on the command line are read within bounds

fn mkfifo(path: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// `--session /dev/zero` and `--session <fifo>`: refused at once (they were read without end or
/// blocked forever), with an error that says why.
#[test]
fn session_flag_on_a_device_or_fifo_is_refused() {
    let w = World::new();
    let fifo = w.tmp().join("s.fifo");
    mkfifo(&fifo);
    for target in [Path::new("/dev/zero"), fifo.as_path()] {
        let args = faux_session_args(target);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = run(&w, &args);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stdout, "");
        assert_eq!(
            stderr,
            format!(
                "Error: Cannot read session file {}: not a regular file\n",
                target.display()
            )
        );
    }
}

/// `@file` arguments: a device or FIFO is skipped as pi skips it (its size is 0) instead of being
/// read without end or blocking; a file over 16 MiB is a clear error; a directory too.
#[test]
fn file_arguments_are_bounded() {
    let w = World::new();
    let fifo = w.tmp().join("in.fifo");
    mkfifo(&fifo);
    fs::write(w.cwd().join("note.txt"), "a note").unwrap();
    let print = |extra: &[&str]| {
        let mut args = vec!["-p", "--provider", "faux", "--model", "faux"];
        args.extend_from_slice(extra);
        run(&w, &args)
    };
    let fifo_arg = format!("@{}", fifo.display());
    let (code, stdout, stderr) = print(&["@/dev/zero", &fifo_arg, "@note.txt", "hello"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.is_empty());

    let big = w.cwd().join("big.log");
    fs::File::create(&big)
        .unwrap()
        .set_len(17 * 1024 * 1024)
        .unwrap();
    let (code, stdout, stderr) = print(&["@big.log", "hello"]);
    assert_eq!(code, Some(1));
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "Error: Could not read file {}: larger than 16 MiB\n",
            big.display()
        )
    );
    let dir = w.cwd().join("sub");
    fs::create_dir(&dir).unwrap();
    let (code, _, stderr) = print(&["@sub", "hello"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        format!(
            "Error: Could not read file {}: is a directory\n",
            dir.display()
        )
    );
}

/// `--append-system-prompt` / `--system-prompt` naming a device or FIFO: not read (pi reads
/// `/dev/zero` without end); a warning says so and the text is used as given, as pi does with a
/// file it cannot read. The model request carries it.
#[test]
fn system_prompt_files_are_bounded() {
    let llm = support::fake_llm::FakeLlm::start(vec![support::fake_llm::Reply::sse(
        support::anthropic::text_sse(1, &["ok"]),
    )]);
    let w = World::new();
    w.fake_models(llm.port);
    let fifo = w.tmp().join("p.fifo");
    mkfifo(&fifo);
    let fifo_s = fifo.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(
        &w,
        &[
            "-p",
            "--provider",
            "fake",
            "--model",
            "fake-model",
            "--append-system-prompt",
            "/dev/zero",
            "--append-system-prompt",
            &fifo_s,
            "hello",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "ok");
    assert_eq!(
        stderr,
        format!(
            "Warning: Could not read append system prompt file /dev/zero: not a regular file\nWarning: Could not read append system prompt file {fifo_s}: not a regular file\n"
        )
    );
    let body = &llm.requests()[0].body;
    assert!(body.contains(&format!("/dev/zero\\n\\n{fifo_s}")), "{body}");
}
