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

/// Prompt and return the run's frames up to `agent_settled`.
fn run(p: &mut Pith, id: &str, text: &str) -> Vec<Value> {
    p.send(json!({"id": id, "type": "prompt", "message": text}));
    p.recv_until(|v| v["type"] == "agent_settled")
}

/// The last assistant `message_end` of `frames`.
fn last_assistant(frames: &[Value]) -> Value {
    frames
        .iter()
        .rev()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
        .map(|f| f["message"].clone())
        .expect("an assistant message_end")
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
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
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
        let _ =
            s.write_all(format!("{SSE_HEAD}{}{}", stream_start(), text_delta("Half")).as_bytes());
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
