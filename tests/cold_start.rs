//! What RPC start-up defers until after the first answer (docs/architecture.md, "Memory per
//! agent": cold start) still works before any command arrives: signals are handled, a host that
//! closes stdout is noticed, and the stdin reader's buffer grows for large commands.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Pith, World};

/// Waits (hang guard only) until pith has written its `--verbose` start-up report: by then the
/// signal handlers are installed (they go in before the report).
fn wait_for_report(p: &Pith) {
    let t0 = Instant::now();
    while !p
        .stderr_lines()
        .iter()
        .any(|l| l.starts_with("pith: protocol pi"))
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "no start-up report");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(p: &Pith, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &p.pid().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn sigterm_before_any_command_exits_143() {
    let w = World::new();
    let mut p = w.spawn(&["--mode", "rpc", "--no-session", "--verbose"]);
    wait_for_report(&p);
    signal(&p, "-TERM");
    assert_eq!(p.wait(Duration::from_secs(10)).code(), Some(143));
    let err = p.stderr_lines();
    assert!(
        err.iter().any(|l| l == "pith: received signal 15; exiting"),
        "{err:?}"
    );
}

#[test]
fn sigint_before_any_command_leaves_a_resumed_session_intact() {
    let w = World::new();
    let session = w.tmp().join("s.jsonl");
    // A session with one exchange, written by a first run.
    let mut first = w.spawn(&[
        "--mode",
        "rpc",
        "--session",
        session.to_str().unwrap(),
        "--provider",
        "faux",
        "--model",
        "faux",
    ]);
    first.send(json!({"id":"p","type":"prompt","message":"hello"}));
    first.recv_until(|v| v["type"] == "agent_end");
    first.close_stdin();
    assert_eq!(first.wait(Duration::from_secs(10)).code(), Some(0));
    let before = std::fs::read(&session).unwrap();
    assert!(!before.is_empty());

    let mut p = w.spawn(&[
        "--mode",
        "rpc",
        "--session",
        session.to_str().unwrap(),
        "--verbose",
    ]);
    wait_for_report(&p);
    signal(&p, "-INT");
    assert_eq!(p.wait(Duration::from_secs(10)).code(), Some(130));
    assert_eq!(std::fs::read(&session).unwrap(), before);
}

#[test]
fn a_host_that_closes_stdout_before_any_command_ends_pith() {
    let w = World::new();
    let mut child = w
        .command(&["--mode", "rpc", "--no-session"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // stdin stays open and pith never writes to stdout: only the stdout watch can notice that
    // the host has gone.
    let _stdin = child.stdin.take();
    drop(child.stdout.take());
    let status = support::wait_timeout(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn commands_larger_than_the_first_read_are_read_whole() {
    let w = World::new();
    let mut p = w.spawn(&["--mode", "rpc", "--no-session"]);
    // 8 KiB is the first read; these lines span it and the grown 64 KiB buffer, in one write.
    let mut burst = Vec::new();
    for (i, pad) in [100usize, 9_000, 70_000, 300_000, 10].iter().enumerate() {
        let cmd = json!({"id": format!("c{i}"), "type": "get_state", "pad": "x".repeat(*pad)});
        burst.extend(serde_json::to_vec(&cmd).unwrap());
        burst.push(b'\n');
    }
    p.send_raw(&burst);
    for i in 0..5 {
        let r = p.response(&format!("c{i}"));
        assert_eq!(r["success"], true, "{r}");
    }
}

/// `get_state`'s model id.
fn model_id(p: &mut Pith, id: &str) -> String {
    let st = p.call(json!({"type":"get_state"}), id);
    st["data"]["model"]["id"].as_str().unwrap_or("").to_string()
}

#[test]
fn new_session_under_087_starts_from_the_start_up_default_found_on_first_need() {
    // Without --model the start-up model is the settings' default, else the first model with a
    // key; 0.87's new_session goes back to it. It is found when first needed now: the same one.
    for settings in [
        None,
        Some(r#"{"defaultProvider":"fake","defaultModel":"fake-model-2"}"#),
    ] {
        let (w, _llm) = support::fake_world(vec![]);
        if let Some(s) = settings {
            w.write_agent_file("settings.json", s);
        }
        let start = if settings.is_some() {
            "fake-model-2"
        } else {
            "fake-model" // the first model with a key (models.json's apiKey)
        };
        let other = if settings.is_some() {
            "fake-model"
        } else {
            "fake-model-2"
        };
        let mut p = w.spawn(&["--mode", "rpc", "--compat", "0.87", "--no-session"]);
        assert_eq!(model_id(&mut p, "s0"), start);
        let r = p.call(
            json!({"type":"set_model","provider":"fake","modelId": other}),
            "m1",
        );
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(model_id(&mut p, "s1"), other);
        let r = p.call(json!({"type":"new_session"}), "n1");
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(model_id(&mut p, "s2"), start);
        p.finish(Duration::from_secs(10));
    }
}

/// pith runs without Rust's runtime start (`main.rs`), which opened closed standard descriptors
/// on `/dev/null`; pith does it itself. Otherwise the first file or socket pith opens would take
/// the number of a closed stdout or stderr, and frames and logs would be written into it.
#[test]
fn closed_stdout_and_stderr_are_opened_on_dev_null() {
    let w = World::new();
    let mut cmd = w.wrapped_command(
        &["sh", "-c", "exec \"$0\" \"$@\" >&- 2>&-"],
        &["--mode", "rpc", "--no-session"],
    );
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let proc = |name: String| std::fs::read_link(format!("/proc/{}/{name}", child.id()));
    let fd = |n: u32| proc(format!("fd/{n}"));
    // Until the shell has become pith (its stdout closed) and pith has opened its descriptors.
    let pith = std::fs::canonicalize(env!("CARGO_BIN_EXE_pith")).unwrap();
    let t0 = Instant::now();
    while proc("exe".into()).ok().as_deref() != Some(pith.as_path())
        || fd(1).is_err()
        || fd(2).is_err()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "stdout never opened"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let (out, err) = (fd(1).unwrap(), fd(2).unwrap());
    drop(child.stdin.take());
    assert_eq!(
        support::wait_timeout(&mut child, Duration::from_secs(10)).code(),
        Some(0)
    );
    assert_eq!(out, std::path::Path::new("/dev/null"));
    assert_eq!(err, std::path::Path::new("/dev/null"));
}

/// The same with stdin closed: RPC mode reads the end of its input at once and exits 0 (without
/// `/dev/null` there, it would read from whatever it opened first).
#[test]
fn a_closed_stdin_is_the_end_of_input() {
    let w = World::new();
    let mut cmd = w.wrapped_command(
        &["sh", "-c", "exec \"$0\" \"$@\" <&-"],
        &["--mode", "rpc", "--no-session"],
    );
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = support::wait_timeout(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(out, "");
}
