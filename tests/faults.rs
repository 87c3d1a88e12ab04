//! Fault injection through the real binary: a provider that refuses, fails the TLS handshake,
//! resets or stalls, sends a 10 MB line, an HTML error page, invalid JSON or never stops; a host
//! that signals, kills, closes stdout or floods stdin; a run of 500 tool calls; a secret key that
//! must never show. Each test asserts the exact outcome and that pith keeps answering.
//!
//! Covered elsewhere (not repeated here): connection refused, cut and stalled streams and cancel
//! at the stream level (`providers.rs`, `providers_more.rs`), retries of cut streams (`retry.rs`),
//! stdin EOF while a turn runs and signals while idle (`protocol.rs`), SIGTERM killing a bash
//! tool's process group (`agent_loop.rs`), full and read-only session dirs (`full_disk.rs`),
//! damaged session files (`session_damage.rs`), random command storms (`storm.rs`).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::{Value, json};
use support::anthropic::{Sse, ev, text, text_sse};
use support::fake_llm::Reply;
use support::frames::{last_assistant, run};
use support::{Pith, World, fake_rpc, fake_world, fixture};

// ---------------------------------------------------------------------------------------------
// A raw provider: each connection gets its request read, then whatever the test's behaviour
// writes (or does not write).

type Behaviour = Arc<dyn Fn(TcpStream) + Send + Sync>;

struct RawServer {
    port: u16,
}

impl RawServer {
    fn start(behaviour: impl Fn(TcpStream) + Send + Sync + 'static) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let behaviour: Behaviour = Arc::new(behaviour);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut stream) = conn else { continue };
                let b = behaviour.clone();
                std::thread::spawn(move || {
                    if read_request(&mut stream) {
                        b(stream);
                    }
                });
            }
        });
        RawServer { port }
    }
}

/// Read one HTTP request (headers and a `content-length` body).
fn read_request(stream: &mut TcpStream) -> bool {
    let Ok(clone) = stream.try_clone() else {
        return false;
    };
    let mut r = BufReader::new(clone);
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).is_ok()
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// `message_start` and an empty text block: the start of every scripted stream here.
fn stream_start() -> String {
    let mut s = ev(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_raw","type":"message",
            "role":"assistant","model":"fake-model","content":[],"stop_reason":null,
            "stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
    );
    s += &ev(
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    );
    s
}

fn text_delta(t: &str) -> String {
    ev(
        "content_block_delta",
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":t}}),
    )
}

/// A world whose fake provider is at `port`, auto-retry off, 1 s stall and connect timeouts.
fn world_at(port: u16) -> World {
    let w = World::new();
    w.fake_models(port);
    w.write_agent_file(
        "settings.json",
        r#"{"retry":{"enabled":false},"pith":{"streamStallTimeoutSeconds":1,"connectTimeoutSeconds":1}}"#,
    );
    w
}

fn spawn(w: &World) -> Pith {
    w.spawn(&fake_rpc(&["--no-session"]))
}

/// After a fault, pith still answers.
fn still_answers(p: &mut Pith) {
    let r = p.call(json!({"type": "get_state"}), "alive");
    assert_eq!(r["success"], true);
    assert_eq!(r["data"]["isStreaming"], false);
}

fn error_message(frames: &[Value]) -> String {
    let a = last_assistant(frames);
    assert_eq!(a["stopReason"], "error", "{a}");
    a["errorMessage"]
        .as_str()
        .expect("errorMessage")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Provider faults

#[test]
fn connection_refused() {
    let port = support::free_port();
    let w = world_at(port);
    let mut p = spawn(&w);
    assert_eq!(error_message(&run(&mut p, "p", "hi")), "Connection error.");
    still_answers(&mut p);
}

/// A TLS server with `fixtures/tls/server.pem` (127.0.0.1, signed by `server-ca.pem`) that
/// answers one text stream per connection; handshake errors are reported on the channel.
fn tls_server() -> (u16, Receiver<String>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(fixture("tls/server.pem"))
        .expect("server.pem")
        .map(|c| c.expect("certificate"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(fixture("tls/server.key")).expect("server.key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(tcp) = conn else { continue };
            let config = config.clone();
            let tx: Sender<String> = tx.clone();
            std::thread::spawn(move || {
                let Ok(session) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(session, tcp);
                // The handshake happens on the first read.
                let mut first = [0u8; 1];
                if let Err(e) = tls.read(&mut first) {
                    let _ = tx.send(e.to_string());
                    return;
                }
                let mut r = BufReader::new(&mut tls);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end().to_ascii_lowercase();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                let reply = format!("{SSE_HEAD}{}", text_sse(1, &["Over TLS."]));
                let _ = tls.write_all(reply.as_bytes());
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (port, rx)
}

fn tls_world(port: u16) -> World {
    let w = world_at(port);
    let models = std::fs::read_to_string(w.agent_dir().join("models.json")).expect("models");
    w.write_agent_file(
        "models.json",
        &models.replace("http://127.0.0.1", "https://127.0.0.1"),
    );
    w
}

#[test]
fn tls_with_the_test_ca_trusted_streams() {
    let (port, _errors) = tls_server();
    let w = tls_world(port);
    let ca = fixture("tls/server-ca.pem");
    let mut cmd = w.command(&fake_rpc(&["--no-session"]));
    cmd.env("SSL_CERT_FILE", &ca);
    let mut p = Pith::start(cmd);
    let frames = run(&mut p, "p", "hi");
    let a = last_assistant(&frames);
    assert_eq!(a["stopReason"], "stop", "{a}");
    assert_eq!(a["content"][0]["text"], "Over TLS.");
}

#[test]
fn tls_handshake_failure_is_a_connection_error() {
    // The server's certificate is signed by a CA pith does not trust: rustls (client) refuses
    // it, rustls (server) sees the alert.
    let (port, errors) = tls_server();
    let w = tls_world(port);
    let mut p = spawn(&w);
    assert_eq!(error_message(&run(&mut p, "p", "hi")), "Connection error.");
    // The server's handshake did not complete (the client hung up or sent an alert).
    let seen = errors
        .recv_timeout(support::TIMEOUT)
        .expect("server saw the failure");
    assert!(!seen.is_empty());
    still_answers(&mut p);

    // A server that is not TLS at all on an https URL.
    let plain = RawServer::start(|mut s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\nnot tls");
    });
    let w = tls_world(plain.port);
    let mut p = spawn(&w);
    assert_eq!(error_message(&run(&mut p, "p", "hi")), "Connection error.");
    still_answers(&mut p);
}

/// `SO_LINGER` with a zero timeout: closing the socket sends RST.
fn reset_on_close(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct Linger {
        onoff: i32,
        secs: i32,
    }
    unsafe extern "C" {
        fn setsockopt(fd: i32, level: i32, name: i32, value: *const Linger, len: u32) -> i32;
    }
    const SOL_SOCKET: i32 = 1;
    const SO_LINGER: i32 = 13;
    let l = Linger { onoff: 1, secs: 0 };
    // SAFETY: a valid socket and a properly laid out `struct linger`.
    let r = unsafe {
        setsockopt(
            s.as_raw_fd(),
            SOL_SOCKET,
            SO_LINGER,
            &l,
            std::mem::size_of::<Linger>() as u32,
        )
    };
    assert_eq!(r, 0);
}

#[test]
fn reset_mid_stream() {
    let srv = RawServer::start(|mut s| {
        // Chunked, so the end of the body is explicit: a reset can only be a broken stream
        // (with a close-delimited body it may read as a clean end, which the decoder then
        // reports as a stream without `message_stop`).
        let body = format!("{}{}", stream_start(), text_delta("Half"));
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let _ = s.write_all(format!("{head}{:x}\r\n{body}\r\n", body.len()).as_bytes());
        let _ = s.flush();
        std::thread::sleep(Duration::from_millis(100));
        // SO_LINGER 0: closing sends RST instead of FIN.
        reset_on_close(&s);
    });
    let w = world_at(srv.port);
    let mut p = spawn(&w);
    let frames = run(&mut p, "p", "hi");
    let a = last_assistant(&frames);
    assert_eq!(a["stopReason"], "error");
    assert!(
        a["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("terminated"),
        "{a}"
    );
    assert_eq!(a["content"][0]["text"], "Half", "the partial text is kept");
    still_answers(&mut p);
}

#[test]
fn stall_before_headers() {
    let srv = RawServer::start(|s| {
        std::thread::sleep(Duration::from_secs(30));
        drop(s);
    });
    let w = world_at(srv.port);
    let mut p = spawn(&w);
    let msg = error_message(&run(&mut p, "p", "hi"));
    assert!(
        msg.starts_with("Request timed out") || msg.contains("timed out"),
        "{msg}"
    );
    still_answers(&mut p);
}

#[test]
fn stall_mid_stream() {
    let srv = RawServer::start(|mut s| {
        let _ =
            s.write_all(format!("{SSE_HEAD}{}{}", stream_start(), text_delta("Before")).as_bytes());
        let _ = s.flush();
        std::thread::sleep(Duration::from_secs(30));
    });
    let w = world_at(srv.port);
    let mut p = spawn(&w);
    let frames = run(&mut p, "p", "hi");
    let a = last_assistant(&frames);
    assert_eq!(
        a["errorMessage"], "terminated: no data from the provider for 1 s",
        "{a}"
    );
    assert_eq!(a["content"][0]["text"], "Before");
    still_answers(&mut p);
}

#[test]
fn a_10_mb_single_sse_line_is_streamed() {
    let big = "x".repeat(10 * 1024 * 1024);
    let body = Sse::numbered(1).body(&[text(&[&big])]);
    let (w, _llm) = fake_world(vec![Reply::sse(body)]);
    let mut p = w.spawn(&fake_rpc(&["--no-session", "--rpc-partials", "none"]));
    let frames = run(&mut p, "p", "hi");
    let a = last_assistant(&frames);
    assert_eq!(a["stopReason"], "stop");
    assert_eq!(a["content"][0]["text"].as_str().unwrap().len(), big.len());
    still_answers(&mut p);
}

#[test]
fn a_line_over_the_sse_limit_fails_the_stream_without_buffering_it() {
    // 20 MB without a newline: over the 16 MiB event limit.
    let srv = RawServer::start(|mut s| {
        let _ = s.write_all(format!("{SSE_HEAD}{}data: ", stream_start()).as_bytes());
        let chunk = vec![b'y'; 1 << 20];
        for _ in 0..20 {
            if s.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let w = world_at(srv.port);
    let mut p = spawn(&w);
    let msg = error_message(&run(&mut p, "p", "hi"));
    assert!(msg.contains("SSE event larger than"), "{msg}");
    still_answers(&mut p);
}

#[test]
fn an_html_502_page_becomes_a_short_error() {
    let filler = "<div class=\"x\"><span>&nbsp;</span></div>\n".repeat(600);
    let page = format!(
        "<!DOCTYPE html><html><head><title>api.example.com | 502: Bad gateway</title>\
         <style>body{{margin:0}}</style></head><body><h1>Bad gateway</h1>\
         <p>Error code 502</p><p>The web server reported a bad gateway error.</p>{filler}</body></html>"
    );
    assert!(page.len() > 24_000);
    let reply = Reply {
        status: 502,
        headers: vec![("content-type".into(), "text/html".into())],
        ..Reply::sse(page.clone().into_bytes())
    };
    let (w, _llm) = fake_world(vec![reply]);
    w.write_agent_file("settings.json", r#"{"retry":{"enabled":false}}"#);
    let mut p = w.spawn(&fake_rpc(&["--no-session"]));
    let msg = error_message(&run(&mut p, "p", "hi"));
    assert_eq!(
        msg,
        format!(
            "502 api.example.com | 502: Bad gateway: Bad gateway Error code 502 The web server reported a bad gateway error. [page of {} bytes]",
            page.len()
        )
    );
    still_answers(&mut p);
}

#[test]
fn invalid_json_in_data_fails_the_stream() {
    let srv = RawServer::start(|mut s| {
        let body = format!(
            "{SSE_HEAD}{}{}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\n\n",
            stream_start(),
            text_delta("Ok so far")
        );
        let _ = s.write_all(body.as_bytes());
    });
    let w = world_at(srv.port);
    let mut p = spawn(&w);
    let frames = run(&mut p, "p", "hi");
    let a = last_assistant(&frames);
    assert_eq!(a["stopReason"], "error");
    assert!(
        a["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("Could not parse SSE event data: "),
        "{a}"
    );
    assert_eq!(a["content"][0]["text"], "Ok so far");
    still_answers(&mut p);
}

#[test]
fn an_endless_stream_is_stopped_by_abort() {
    let (gone_tx, gone) = crossbeam_channel::unbounded();
    let srv = RawServer::start(move |mut s| {
        let _ = s.write_all(format!("{SSE_HEAD}{}", stream_start()).as_bytes());
        let delta = text_delta("more ");
        let started = Instant::now();
        while s.write_all(delta.as_bytes()).is_ok() && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = gone_tx.send(started.elapsed());
    });
    let w = world_at(srv.port);
    let mut p = spawn(&w);
    p.send(json!({"id":"p","type":"prompt","message":"go on forever"}));
    let updates = std::cell::Cell::new(0);
    p.recv_until(|v| {
        if v["type"] == "message_update" {
            updates.set(updates.get() + 1);
        }
        updates.get() >= 50
    });
    p.send(json!({"id":"a","type":"abort"}));
    let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "a");
    let a = last_assistant(&frames);
    assert_eq!(a["stopReason"], "aborted");
    assert!(
        a["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("more more ")
    );
    // The provider connection is closed (its writes fail), well before the server's own limit.
    let lasted = gone
        .recv_timeout(Duration::from_secs(20))
        .expect("server stopped");
    assert!(lasted < Duration::from_secs(30), "{lasted:?}");
    still_answers(&mut p);
}

// ---------------------------------------------------------------------------------------------
// Process faults

fn tool_reply(n: usize, id: &str, name: &str, args: Value) -> Reply {
    let json = args.to_string();
    Sse::numbered(n).reply(&[support::anthropic::tool_call(id, name, &[&json])])
}

fn session_lines(dir: &std::path::Path) -> Vec<Value> {
    support::sessions::entries(&support::sessions::only_jsonl(dir))
}

fn kill(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

#[test]
fn sigterm_during_a_tool_kills_its_children_flushes_the_session_and_exits_143() {
    let marker = support::procs::unique_marker("faults_term");
    let cmd = format!("sh -c 'sleep 30; : {marker}' & sleep 30; : {marker}");
    let (w, _llm) = fake_world(vec![tool_reply(1, "t1", "bash", json!({ "command": cmd }))]);
    let sessions = w.dir.path().join("sessions");
    let dir = sessions.to_string_lossy().into_owned();
    let mut p = w.spawn(&fake_rpc(&["--session-dir", &dir]));
    p.send(json!({"id":"p","type":"prompt","message":"run it"}));
    p.recv_until(|v| v["type"] == "tool_execution_start");
    let until = Instant::now() + support::TIMEOUT;
    while support::procs::pgrep(&marker).len() < 2 {
        assert!(Instant::now() < until, "children did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(p.pid(), "-TERM");
    assert_eq!(p.wait(support::TIMEOUT).code(), Some(143));
    support::procs::assert_no_process_within(&marker, Duration::from_secs(5));
    // Everything recorded before the signal is on disk: the prompt and the tool call.
    let lines = session_lines(&sessions);
    let roles: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["message"]["role"].as_str())
        .collect();
    assert_eq!(&roles[..2], ["user", "assistant"], "{lines:#?}");
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(
        lines
            .iter()
            .find(|l| l["message"]["role"] == "assistant")
            .expect("assistant")["message"]["content"][0]["name"],
        "bash"
    );
}

#[test]
fn sigkill_during_session_writes_leaves_a_file_that_loads() {
    // Big entries (1 MB prompts) make each write long enough to be cut by the kill now and
    // then; whatever happens, the next start loads the file and keeps appending to it.
    let big = "k".repeat(1 << 20);
    let replies = (1..=40).map(|i| Reply::sse(text_sse(i, &["ok"]))).collect();
    let (w, _llm) = fake_world(replies);
    let file = w.dir.path().join("killed.jsonl");
    let file_s = file.to_string_lossy().into_owned();
    let mut complete_prompts = 0;
    for round in 0..5u64 {
        let mut p = w.spawn(&fake_rpc(&["--session", &file_s]));
        let r = p.call(json!({"type":"get_messages"}), "m");
        let messages = r["data"]["messages"].as_array().expect("messages").clone();
        // Every message that loaded is whole.
        for m in &messages {
            if m["role"] == "user" {
                let t = m["content"][0]["text"].as_str().expect("text");
                assert!(t == "first" || t.len() == big.len(), "a cut message loaded");
            }
        }
        assert!(
            messages.len() >= complete_prompts * 2,
            "{round}: lost messages"
        );
        if round == 0 {
            run(&mut p, "p0", "first");
            complete_prompts = 1;
        }
        // Kill the moment the file starts to grow: in the middle of writing the 1 MB line, now
        // and then (the file then ends in a cut line, which the next start drops).
        let before = std::fs::metadata(&file).map_or(0, |m| m.len());
        p.send(json!({"id":"big","type":"prompt","message":big}));
        let until = Instant::now() + support::TIMEOUT;
        while std::fs::metadata(&file).map_or(0, |m| m.len()) == before {
            assert!(Instant::now() < until, "the prompt was never written");
            std::hint::spin_loop();
        }
        kill(p.pid(), "-KILL");
        p.wait(support::TIMEOUT);
    }
    let mut p = w.spawn(&fake_rpc(&["--session", &file_s]));
    run(&mut p, "last", "after the kills");
    let r = p.call(json!({"type":"get_messages"}), "m");
    let messages = r["data"]["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["content"][0]["text"], "first");
    assert_eq!(
        messages[messages.len() - 2]["content"][0]["text"],
        "after the kills"
    );
}

#[test]
fn stdout_closed_by_the_host_mid_stream_ends_pith_and_its_stream() {
    use std::process::Stdio;
    let (gone_tx, gone) = crossbeam_channel::unbounded();
    let srv = RawServer::start(move |mut s| {
        let _ = s.write_all(format!("{SSE_HEAD}{}", stream_start()).as_bytes());
        let delta = text_delta("more ");
        let started = Instant::now();
        while s.write_all(delta.as_bytes()).is_ok() && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = gone_tx.send(started.elapsed());
    });
    let w = world_at(srv.port);
    let mut child = w
        .command(&fake_rpc(&["--no-session"]))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"stream\"}\n")
        .expect("write");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut updates = 0;
    let mut line = String::new();
    while updates < 20 {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "stdout closed early"
        );
        if line.contains("\"message_update\"") {
            updates += 1;
        }
    }
    drop(out);
    let status = support::wait_timeout(&mut child, support::TIMEOUT);
    assert_eq!(status.code(), Some(0));
    let lasted = gone
        .recv_timeout(Duration::from_secs(20))
        .expect("stream closed");
    assert!(lasted < Duration::from_secs(30));
    drop(stdin);
}

// ---------------------------------------------------------------------------------------------
// Load

#[test]
fn ten_thousand_commands_in_one_burst_are_answered_in_order() {
    let w = World::new();
    let mut p = w.spawn(&["--mode", "rpc", "--no-session"]);
    let kinds = [
        r#"{"type":"get_state"}"#,
        r#"{"type":"set_steering_mode","mode":"all"}"#,
        r#"{"type":"get_messages"}"#,
        r#"{"type":"no_such_command"}"#,
        r#"{"type":"set_auto_retry"}"#,
        r#"{"type":"get_session_stats"}"#,
        r#"{"type":"abort"}"#,
        r#"{"type":"get_commands"}"#,
    ];
    let mut burst = Vec::new();
    for i in 0..10_000 {
        let cmd = kinds[i % kinds.len()];
        burst.extend_from_slice(format!("{{\"id\":{i},{}\n", &cmd[1..]).as_bytes());
    }
    let mut stdin = p.take_stdin();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&burst).expect("burst");
        stdin
    });
    for i in 0..10_000u64 {
        let v = p.recv();
        assert_eq!(v["type"], "response", "{v}");
        assert_eq!(v["id"], i, "{v}");
        let ok = !matches!(i % 8, 3 | 4);
        assert_eq!(v["success"], ok, "{v}");
        p.seen.clear();
    }
    drop(writer.join().expect("writer"));
}

#[test]
fn a_thousand_queued_follow_ups_are_all_delivered_in_order() {
    // The first reply waits until the test has queued everything; the second answers them all.
    let (release_tx, release) = crossbeam_channel::unbounded::<()>();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (bodies_tx, bodies) = crossbeam_channel::unbounded::<()>();
    let srv = {
        let calls = calls.clone();
        RawServer::start(move |mut s| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == 0 {
                let _ = s.write_all(
                    format!("{SSE_HEAD}{}{}", stream_start(), text_delta("Working")).as_bytes(),
                );
                let _ = s.flush();
                let _ = release.recv_timeout(Duration::from_secs(60));
                let end = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
                    event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n\
                    event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
                let _ = s.write_all(end.as_bytes());
            } else {
                let _ =
                    s.write_all(format!("{SSE_HEAD}{}", text_sse(2, &["All read."])).as_bytes());
                let _ = bodies_tx.send(());
            }
        })
    };
    let w = World::new();
    w.fake_models(srv.port);
    let mut p = w.spawn(&fake_rpc(&["--no-session"]));
    assert_eq!(
        p.call(json!({"type":"set_follow_up_mode","mode":"all"}), "m")["success"],
        true
    );
    p.send(json!({"id":"p","type":"prompt","message":"start"}));
    p.recv_until(|v| v["type"] == "message_update");
    for i in 0..1000 {
        p.send(
            json!({"id": format!("f{i}"), "type":"follow_up", "message": format!("follow-up {i}")}),
        );
    }
    for i in 0..1000 {
        let r = p.response(&format!("f{i}"));
        assert_eq!(r["success"], true);
        p.seen.clear();
    }
    let state = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(state["data"]["pendingMessageCount"], 1000);
    release_tx.send(()).expect("release");
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    bodies
        .recv_timeout(support::TIMEOUT)
        .expect("second request");
    let end = frames
        .iter()
        .find(|f| f["type"] == "agent_end")
        .expect("agent_end");
    let users: Vec<&str> = end["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"][0]["text"].as_str().expect("text"))
        .collect();
    assert_eq!(users.len(), 1001);
    for (i, u) in users[1..].iter().enumerate() {
        assert_eq!(*u, format!("follow-up {i}"));
    }
    assert_eq!(last_assistant(&frames)["content"][0]["text"], "All read.");
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("field")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[test]
fn a_500_tool_call_run_keeps_memory_flat() {
    const CALLS: usize = 500;
    let mut replies: Vec<Reply> = (1..=CALLS)
        .map(|i| {
            tool_reply(
                i,
                &format!("toolu_{i:04}"),
                "read",
                json!({"path": "notes.txt"}),
            )
        })
        .collect();
    replies.push(Reply::sse(text_sse(CALLS + 1, &["Read them all."])));
    let (w, _llm) = fake_world(replies);
    std::fs::write(w.cwd().join("notes.txt"), "one line of notes\n".repeat(20)).expect("notes");
    let mut p = w.spawn(&fake_rpc(&["--no-session", "--rpc-partials", "none"]));
    p.send(json!({"id":"p","type":"prompt","message":"read the notes 500 times"}));
    let mut ends = 0;
    let mut samples = Vec::new();
    loop {
        let v = p.recv();
        p.seen.clear();
        if v["type"] == "tool_execution_end" {
            assert_eq!(v["isError"], false, "{v}");
            ends += 1;
            if [50, 100, 250, 500].contains(&ends) {
                samples.push((ends, memory_kib(p.pid())));
            }
        }
        if v["type"] == "agent_settled" {
            break;
        }
    }
    assert_eq!(ends, CALLS);
    eprintln!("memory after N tool calls (VmRSS KiB, VmHWM KiB): {samples:?}");
    let rss = |n: usize| samples.iter().find(|s| s.0 == n).expect("sample").1.0;
    // The context grows by ~1 KB per call (call + result, twice in memory at most): 400 more
    // calls may add a few MB, never tens.
    let growth = rss(500).saturating_sub(rss(100));
    assert!(
        growth < 16 * 1024,
        "RSS grew {growth} KiB from 100 to 500 calls: {samples:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Secrets

const SECRET: &str = "sk-pith-SECRET-7c3e9a1f5b2d";

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn a_configured_key_never_shows() {
    // The provider echoes the key in an error body the second time (a misbehaving proxy).
    let echo = Reply::error(
        401,
        &format!(
            r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {SECRET}"}}}}"#
        ),
    );
    let (w, llm) = fake_world(vec![
        tool_reply(1, "t1", "bash", json!({"command": "env; echo tool-ran"})),
        Reply::sse(text_sse(2, &["Done."])),
        echo,
    ]);
    let models = std::fs::read_to_string(w.agent_dir().join("models.json")).expect("models");
    w.write_agent_file(
        "models.json",
        &models.replace("sk-fake-anthropic-key", SECRET),
    );
    w.write_agent_file("settings.json", r#"{"retry":{"enabled":false}}"#);
    let sessions = w.dir.path().join("sessions");
    let dir = sessions.to_string_lossy().into_owned();
    let mut p = w.spawn(&fake_rpc(&["--session-dir", &dir]));
    let first = run(&mut p, "p1", "show the environment");
    let tool_out = first
        .iter()
        .find(|f| f["type"] == "tool_execution_end")
        .expect("tool end")["result"]["content"][0]["text"]
        .as_str()
        .expect("text")
        .to_string();
    assert!(
        tool_out.contains("tool-ran") && tool_out.contains("PATH="),
        "{tool_out}"
    );
    let bash = p.call(
        json!({"type":"bash","command":"env; ls -la \"$TMPDIR\""}),
        "b",
    );
    assert!(
        bash["data"]["output"]
            .as_str()
            .expect("output")
            .contains("PATH=")
    );
    let second = run(&mut p, "p2", "fail please");
    assert_eq!(
        error_message(&second),
        r#"401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: [redacted]"}}"#
    );
    let export = w.tmp().join("export.html");
    let r = p.call(
        json!({"type":"export_html","outputPath": export.to_string_lossy()}),
        "e",
    );
    assert_eq!(r["success"], true, "{r}");
    let frames = p.seen.clone();
    let stderr_lines = p.stderr_lines();
    let (status, rest) = p.finish(support::TIMEOUT);
    assert!(status.success());

    // The key did reach the provider (so the checks below are not vacuous)...
    assert_eq!(llm.requests()[0].header("x-api-key"), Some(SECRET));
    // ...and nowhere else.
    for f in frames.iter().map(Value::to_string).chain(rest) {
        assert!(!f.contains(SECRET), "stdout: {f:.300}");
    }
    for l in &stderr_lines {
        assert!(!l.contains(SECRET), "stderr: {l}");
    }
    let mut files = Vec::new();
    files_under(&sessions, &mut files);
    files_under(&w.tmp(), &mut files);
    files_under(&w.cwd(), &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|x| x == "jsonl"))
    );
    assert!(files.contains(&export));
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(SECRET), "{} holds the key", f.display());
    }
}

#[test]
fn a_damaged_session_file_is_named_once_on_stderr() {
    // Regression: the loader's warnings were printed as "Warning: Warning: session file …".
    let w = World::new();
    let text =
        std::fs::read_to_string(fixture("sessions/m_session.session.jsonl")).expect("fixture");
    let file = w.dir.path().join("cut.jsonl");
    std::fs::write(&file, &text[..text.len() - 60]).expect("write");
    let file_s = file.to_string_lossy().into_owned();
    let mut p = w.spawn(&["--mode", "rpc", "--session", &file_s]);
    still_answers(&mut p);
    p.close_stdin();
    assert!(p.wait(support::TIMEOUT).success());
    let until = Instant::now() + support::TIMEOUT;
    let warnings = loop {
        let w: Vec<String> = p
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains("session file"))
            .collect();
        if !w.is_empty() || Instant::now() > until {
            break w;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        warnings,
        [format!(
            "Warning: session file {file_s}: dropped an incomplete last line (line 8)"
        )]
    );
}
