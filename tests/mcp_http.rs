//! MCP servers over Streamable HTTP, against a fake MCP server written here (std `TcpListener`,
//! a thread per connection, one request per connection): the handshake and its session id,
//! JSON and SSE answers, paged `tools/list`, progress, `list_changed`, an expired session (404,
//! a new session, the call repeated), a response stream resumed with `Last-Event-ID`, a server
//! that dies mid-stream or floods, a 401 answered by refreshing pi's stored token
//! (`mcp-auth.json` rewritten, mode 0600), the sign-in error without a credential, and the
//! session deleted when pith exits. Configured through settings.json's `mcpServers` with `url`.

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::http_raw::{listen, read_request};
use support::{Pith, World};

/// How the fake server behaves.
#[derive(Clone, Default)]
struct Mode {
    /// Answer requests as SSE streams (else JSON bodies).
    sse: bool,
    /// The bearer token required (401 otherwise).
    token: Option<String>,
    /// Offer a GET stream (else 405).
    get_stream: bool,
    /// The first `tools/list` requests answered 503.
    failing_lists: u32,
}

#[derive(Clone, Debug)]
struct Seen {
    method: String,
    headers: HashMap<String, String>,
    body: Value,
}

impl Seen {
    fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
    fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).map(String::as_str)
    }
}

#[derive(Default)]
struct State {
    mode: Mode,
    seen: Vec<Seen>,
    sessions: u32,
    /// The live session (None: the server forgot it or never gave one).
    session: Option<String>,
    grown: bool,
    /// Events kept for resumption: (stream event id, data).
    parked: Vec<(String, String)>,
    /// Refresh tokens the token endpoint accepts, and the answer.
    refreshes: u32,
}

struct FakeMcp {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl FakeMcp {
    fn start(mode: Mode) -> FakeMcp {
        let state = Arc::new(Mutex::new(State {
            mode,
            ..State::default()
        }));
        let port = listen(state.clone(), serve);
        FakeMcp { port, state }
    }
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }
}

fn tools(grown: bool) -> Vec<Value> {
    let mut t = vec![
        json!({"name":"echo","description":"Echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}),
        json!({"name":"progress","inputSchema":{"type":"object"}}),
        json!({"name":"grow","inputSchema":{"type":"object"}}),
        json!({"name":"forget","inputSchema":{"type":"object"}}),
        json!({"name":"drop","inputSchema":{"type":"object"}}),
        json!({"name":"die","inputSchema":{"type":"object"}}),
        json!({"name":"flood","inputSchema":{"type":"object"}}),
        json!({"name":"boom","inputSchema":{"type":"object"}}),
    ];
    if grown {
        t.push(json!({"name":"extra","inputSchema":{"type":"object"}}));
    }
    t
}

fn result(id: &Value, r: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":r})
}

fn text_result(id: &Value, text: &str) -> Value {
    result(id, json!({"content":[{"type":"text","text":text}]}))
}

fn head(conn: &mut TcpStream, status: &str, headers: &[(&str, String)]) {
    let mut h = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    let _ = conn.write_all(h.as_bytes());
}

fn reply(conn: &mut TcpStream, status: &str, ctype: &str, body: &str, extra: &[(&str, String)]) {
    let mut headers = vec![
        ("content-type", ctype.to_string()),
        ("content-length", body.len().to_string()),
    ];
    headers.extend(extra.iter().cloned());
    head(conn, status, &headers);
    let _ = conn.write_all(body.as_bytes());
}

fn event(conn: &mut TcpStream, id: Option<&str>, v: &Value) -> bool {
    let mut e = String::new();
    if let Some(id) = id {
        e.push_str(&format!("id: {id}\n"));
    }
    e.push_str(&format!("data: {v}\n\n"));
    conn.write_all(e.as_bytes()).is_ok() && conn.flush().is_ok()
}

fn serve(mut conn: TcpStream, state: &Mutex<State>) {
    let Some(req) = read_request(&conn) else {
        return;
    };
    let (method, path, headers, body) = (req.method, req.path, req.headers, req.body);
    if path == "/token" {
        let form = String::from_utf8_lossy(&body).to_string();
        let mut s = state.lock().unwrap();
        s.seen.push(Seen {
            method,
            headers,
            body: json!(form),
        });
        s.refreshes += 1;
        drop(s);
        if form.contains("grant_type=refresh_token") && form.contains("refresh_token=R1") {
            let ok = json!({"access_token":"A2","token_type":"Bearer","expires_in":3600,"refresh_token":"R2"});
            reply(
                &mut conn,
                "200 OK",
                "application/json",
                &ok.to_string(),
                &[],
            );
        } else {
            let e = json!({"error":"invalid_grant"});
            reply(
                &mut conn,
                "400 Bad Request",
                "application/json",
                &e.to_string(),
                &[],
            );
        }
        return;
    }
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut s = state.lock().unwrap();
    s.seen.push(Seen {
        method: method.clone(),
        headers: headers.clone(),
        body: msg.clone(),
    });
    let mode = s.mode.clone();
    if let Some(t) = &mode.token {
        if headers.get("authorization") != Some(&format!("Bearer {t}")) {
            drop(s);
            let www = ("www-authenticate", "Bearer realm=\"mcp\"".to_string());
            reply(&mut conn, "401 Unauthorized", "text/plain", "no", &[www]);
            return;
        }
    }
    let rpc = msg["method"].as_str().unwrap_or("").to_string();
    let sid = headers.get("mcp-session-id").cloned();
    if method == "DELETE" {
        s.session = None;
        drop(s);
        reply(&mut conn, "200 OK", "text/plain", "", &[]);
        return;
    }
    if rpc != "initialize" && sid.is_some() && sid != s.session {
        drop(s);
        reply(
            &mut conn,
            "404 Not Found",
            "text/plain",
            "unknown session",
            &[],
        );
        return;
    }
    if method == "GET" {
        let last = headers.get("last-event-id").cloned();
        let parked: Vec<(String, String)> = match &last {
            Some(l) => {
                let at = s.parked.iter().position(|(id, _)| id == l);
                let from = at.map(|i| i + 1).unwrap_or(0);
                s.parked.split_off(from)
            }
            None => Vec::new(),
        };
        drop(s);
        if last.is_none() && !mode.get_stream {
            reply(&mut conn, "405 Method Not Allowed", "text/plain", "", &[]);
            return;
        }
        head(
            &mut conn,
            "200 OK",
            &[("content-type", "text/event-stream".to_string())],
        );
        for (id, data) in parked {
            let _ = conn.write_all(format!("id: {id}\ndata: {data}\n\n").as_bytes());
        }
        if last.is_none() {
            // The server-initiated stream: a ping request, then idle until pith goes.
            let ping = json!({"jsonrpc":"2.0","id":"srv-1","method":"ping"});
            event(&mut conn, Some("g1"), &ping);
            std::thread::sleep(Duration::from_secs(5));
        }
        return;
    }
    if msg.get("id").is_none() || msg.get("method").is_none() {
        drop(s);
        reply(&mut conn, "202 Accepted", "text/plain", "", &[]);
        return;
    }
    let id = msg["id"].clone();
    if rpc == "tools/list" && s.mode.failing_lists > 0 {
        s.mode.failing_lists -= 1;
        drop(s);
        reply(
            &mut conn,
            "503 Service Unavailable",
            "text/plain",
            "busy",
            &[],
        );
        return;
    }
    if rpc == "tools/call" && msg["params"]["name"] == "boom" {
        drop(s);
        reply(
            &mut conn,
            "500 Internal Server Error",
            "text/plain",
            "it broke",
            &[],
        );
        return;
    }
    let mut extra = Vec::new();
    let answer = match rpc.as_str() {
        "initialize" => {
            s.sessions += 1;
            let session = format!("s{}", s.sessions);
            s.session = Some(session.clone());
            extra.push(("mcp-session-id", session));
            result(
                &id,
                json!({"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"1"}}),
            )
        }
        "tools/list" => {
            let all = tools(s.grown);
            let start: usize = msg["params"]["cursor"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let end = (start + 3).min(all.len());
            let mut r = json!({"tools": all[start..end]});
            if end < all.len() {
                r["nextCursor"] = json!(end.to_string());
            }
            result(&id, r)
        }
        "tools/call" => {
            let name = msg["params"]["name"].as_str().unwrap_or("").to_string();
            let args = msg["params"]["arguments"].clone();
            match name.as_str() {
                "echo" => text_result(&id, args["text"].as_str().unwrap_or("")),
                "forget" => {
                    s.session = None;
                    text_result(&id, "forgotten")
                }
                "grow" => {
                    s.grown = true;
                    drop(s);
                    head(
                        &mut conn,
                        "200 OK",
                        &[("content-type", "text/event-stream".to_string())],
                    );
                    let changed =
                        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
                    event(&mut conn, None, &changed);
                    event(&mut conn, None, &text_result(&id, "grown"));
                    return;
                }
                "extra" => text_result(&id, "extra here"),
                "progress" => {
                    let token = msg["params"]["_meta"]["progressToken"].clone();
                    drop(s);
                    head(
                        &mut conn,
                        "200 OK",
                        &[("content-type", "text/event-stream".to_string())],
                    );
                    for i in 1..=3 {
                        let p = json!({"jsonrpc":"2.0","method":"notifications/progress",
                            "params":{"progressToken":token,"progress":i,"total":3,"message":"working"}});
                        event(&mut conn, None, &p);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    event(&mut conn, None, &text_result(&id, "progressed"));
                    return;
                }
                "drop" => {
                    // The stream breaks after its first (numbered) event; the response waits
                    // for a GET with Last-Event-ID.
                    s.parked
                        .push(("e2".into(), text_result(&id, "resumed").to_string()));
                    drop(s);
                    head(
                        &mut conn,
                        "200 OK",
                        &[("content-type", "text/event-stream".to_string())],
                    );
                    let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"before the drop"}});
                    let _ =
                        conn.write_all(format!("retry: 50\nid: e1\ndata: {note}\n\n").as_bytes());
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                    return;
                }
                "die" => {
                    drop(s);
                    head(
                        &mut conn,
                        "200 OK",
                        &[("content-type", "text/event-stream".to_string())],
                    );
                    let _ = conn.write_all(b"data: {\"jsonrpc\":\"2.0\",\"method\":\"noti");
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                    return;
                }
                "flood" => {
                    drop(s);
                    head(
                        &mut conn,
                        "200 OK",
                        &[("content-type", "text/event-stream".to_string())],
                    );
                    let n = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"x"}});
                    let chunk = format!("data: {n}\n\n").repeat(1000);
                    for _ in 0..100 {
                        if conn.write_all(chunk.as_bytes()).is_err() {
                            return;
                        }
                    }
                    return;
                }
                other => {
                    json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":format!("no tool {other}")}})
                }
            }
        }
        _ => json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"nope"}}),
    };
    drop(s);
    if mode.sse {
        let mut headers = vec![("content-type", "text/event-stream".to_string())];
        headers.extend(extra);
        head(&mut conn, "200 OK", &headers);
        event(&mut conn, None, &answer);
    } else {
        reply(
            &mut conn,
            "200 OK",
            "application/json",
            &answer.to_string(),
            &extra,
        );
    }
}

fn configure(w: &World, url: &str, extra: Value) {
    let mut server = json!({"url": url});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            server[k] = v;
        }
    }
    w.write_agent_file(
        "settings.json",
        &json!({"mcpServers": {"x": server}, "pith": {"mcpStartupTimeoutSeconds": 10}}).to_string(),
    );
}

fn run(p: &mut Pith, id: &str) -> Vec<Value> {
    p.send(json!({"id":id,"type":"prompt","message":"go"}));
    p.recv_until(|v| v["type"] == "agent_settled")
        .into_iter()
        .filter(|f| f["type"] != "message_update")
        .collect()
}

fn end_text(frames: &[Value], call: &str) -> (String, bool) {
    let end = frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end" && f["toolCallId"] == call)
        .unwrap_or_else(|| panic!("no end for {call}: {frames:#?}"));
    (
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        end["isError"] == true,
    )
}

fn posts<'a>(seen: &'a [Seen], rpc: &str) -> Vec<&'a Seen> {
    seen.iter()
        .filter(|s| s.method == "POST" && s.rpc() == rpc)
        .collect()
}

#[test]
fn handshake_session_paging_and_json_answers() {
    let server = FakeMcp::start(Mode::default());
    let w = World::new();
    configure(&w, &server.url(), json!({"headers": {"X-Team": "blue"}}));
    let script = r#"{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"over http"}},{"name":"mcp__x__extra","arguments":{}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(
        end_text(&frames, "faux_1_0"),
        ("over http".to_string(), false)
    );
    // Not listed (the server has not grown): pith's usual unknown-tool error.
    assert_eq!(
        end_text(&frames, "faux_1_1"),
        ("Tool mcp__x__extra not found".to_string(), true)
    );
    p.close_stdin();
    p.wait(Duration::from_secs(10));
    let seen = server.seen();
    let init = posts(&seen, "initialize");
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].header("mcp-session-id"), None);
    assert_eq!(init[0].header("mcp-protocol-version"), None);
    assert_eq!(
        init[0].header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(init[0].header("content-type"), Some("application/json"));
    assert_eq!(init[0].header("x-team"), Some("blue"));
    // After initialize: the session and the negotiated version on everything.
    let later: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.method == "POST" && s.rpc() != "initialize")
        .collect();
    assert!(later.len() >= 4, "{later:?}");
    for s in &later {
        assert_eq!(s.header("mcp-session-id"), Some("s1"), "{s:?}");
        assert_eq!(s.header("mcp-protocol-version"), Some("2025-06-18"));
        assert_eq!(s.header("x-team"), Some("blue"));
    }
    assert_eq!(later[0].rpc(), "notifications/initialized");
    // Eight tools in three pages.
    let lists = posts(&seen, "tools/list");
    assert_eq!(lists.len(), 3);
    assert_eq!(lists[1].body["params"], json!({"cursor": "3"}));
    // The GET stream was tried (405: none) and the session deleted at exit.
    assert!(seen.iter().any(|s| s.method == "GET"));
    let delete = seen.iter().find(|s| s.method == "DELETE").expect("DELETE");
    assert_eq!(delete.header("mcp-session-id"), Some("s1"));
}

#[test]
fn sse_answers_progress_list_changed_and_server_requests() {
    let server = FakeMcp::start(Mode {
        sse: true,
        get_stream: true,
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let script = r#"{"toolCalls":[{"name":"mcp__x__progress","arguments":{}},{"name":"mcp__x__grow","arguments":{}}]}
{"toolCalls":[{"name":"mcp__x__extra","arguments":{}},{"name":"mcp__x__echo","arguments":{"text":"sse"}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(
        end_text(&frames, "faux_1_0"),
        ("progressed".to_string(), false)
    );
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_update" && f["toolCallId"] == "faux_1_0")
        .collect();
    assert_eq!(updates.len(), 3, "{updates:?}");
    assert_eq!(
        updates[0]["partialResult"],
        json!({"content":[{"type":"text","text":"progress 1/3: working"}]})
    );
    assert_eq!(end_text(&frames, "faux_1_1"), ("grown".to_string(), false));
    assert_eq!(
        end_text(&frames, "faux_4_0"),
        ("extra here".to_string(), false)
    );
    assert_eq!(end_text(&frames, "faux_4_1"), ("sse".to_string(), false));
    // The GET stream's ping was answered with a POST (202).
    let seen = server.seen();
    assert!(
        seen.iter()
            .any(|s| s.method == "POST"
                && s.body == json!({"jsonrpc":"2.0","id":"srv-1","result":{}})),
        "{seen:?}"
    );
    // Listed again after list_changed: 3 pages, then 3 pages with the new tool.
    assert_eq!(posts(&seen, "tools/list").len(), 6);
}

#[test]
fn an_expired_session_is_renewed_and_the_call_repeated() {
    let server = FakeMcp::start(Mode::default());
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let script = r#"{"toolCalls":[{"name":"mcp__x__forget","arguments":{}}]}
{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"again"}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(
        end_text(&frames, "faux_1_0"),
        ("forgotten".to_string(), false)
    );
    assert_eq!(end_text(&frames, "faux_3_0"), ("again".to_string(), false));
    assert!(!frames.iter().any(|f| f["type"] == "extension_error"));
    let seen = server.seen();
    let echo: Vec<&Seen> = posts(&seen, "tools/call")
        .into_iter()
        .filter(|s| s.body["params"]["name"] == "echo")
        .collect();
    assert_eq!(echo.len(), 2);
    assert_eq!(echo[0].header("mcp-session-id"), Some("s1"));
    assert_eq!(echo[1].header("mcp-session-id"), Some("s2"));
    let init = posts(&seen, "initialize");
    assert_eq!(init.len(), 2);
    assert_eq!(init[1].header("mcp-session-id"), None);
    assert_eq!(init[0].body, init[1].body);
    assert_eq!(posts(&seen, "notifications/initialized").len(), 2);
}

#[test]
fn a_dropped_stream_resumes_and_a_dying_one_fails_its_call_alone() {
    let server = FakeMcp::start(Mode {
        sse: true,
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let script = r#"{"toolCalls":[{"name":"mcp__x__drop","arguments":{}},{"name":"mcp__x__die","arguments":{}}]}
{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"alive"}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(
        end_text(&frames, "faux_1_0"),
        ("resumed".to_string(), false)
    );
    assert_eq!(
        end_text(&frames, "faux_1_1"),
        (
            "MCP error -32603: MCP response stream failed: stream ended without a response"
                .to_string(),
            true
        )
    );
    assert_eq!(end_text(&frames, "faux_4_0"), ("alive".to_string(), false));
    let seen = server.seen();
    let resume = seen
        .iter()
        .find(|s| s.method == "GET" && s.header("last-event-id").is_some())
        .expect("resumed");
    assert_eq!(resume.header("last-event-id"), Some("e1"));
    assert_eq!(resume.header("mcp-session-id"), Some("s1"));
}

#[test]
fn a_flooding_server_is_stopped() {
    let server = FakeMcp::start(Mode::default());
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let script = r#"{"toolCalls":[{"name":"mcp__x__flood","arguments":{}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert_eq!(
        *err,
        json!({"type":"extension_error","extensionPath":"mcp:x","event":"protocol",
            "error":"flooded pith with more than 10000 messages in one second"})
    );
    let (text, is_error) = end_text(&frames, "faux_1_0");
    assert!(is_error);
    assert!(
        text.starts_with("MCP server \"x\" failed: flooded"),
        "{text}"
    );
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
}

fn auth_state(url: &str, port: u16) -> Value {
    json!({
        format!("mcp__x|{url}"): {
            "serverUrl": url,
            "tokens": {"access_token": "A1", "token_type": "Bearer", "refresh_token": "R1"},
            "tokensExpireAt": 4_000_000_000_000i64,
            "clientInformation": {"client_id": "pith-test", "redirect_uris": ["http://127.0.0.1/callback"]},
            "discovery": {
                "authorizationServerUrl": format!("http://127.0.0.1:{port}/"),
                "authorizationServerMetadata": {
                    "issuer": format!("http://127.0.0.1:{port}/"),
                    "authorization_endpoint": format!("http://127.0.0.1:{port}/authorize"),
                    "token_endpoint": format!("http://127.0.0.1:{port}/token"),
                    "response_types_supported": ["code"]
                },
                "resourceMetadata": {"resource": url}
            },
            "codeVerifier": "left over"
        },
        "mcp__other|http://elsewhere/": {"serverUrl": "http://elsewhere/", "tokens": {"access_token": "Z"}}
    })
}

#[test]
fn a_401_refreshes_pis_stored_token_and_rewrites_mcp_auth_json() {
    use std::os::unix::fs::PermissionsExt;
    let server = FakeMcp::start(Mode {
        token: Some("A2".into()),
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let file = w.agent_dir().join("mcp-auth.json");
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&auth_state(&server.url(), server.port)).unwrap(),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let script = r#"{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"signed in"}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(
        end_text(&frames, "faux_1_0"),
        ("signed in".to_string(), false)
    );
    let seen = server.seen();
    // A1 refused, one refresh, then A2 on everything.
    let token: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.method == "POST" && s.body.is_string())
        .collect();
    assert_eq!(token.len(), 1);
    assert_eq!(
        token[0].body,
        json!(format!(
            "grant_type=refresh_token&refresh_token=R1&resource={}&client_id=pith-test",
            server.url().replace(':', "%3A").replace('/', "%2F")
        ))
    );
    assert_eq!(
        token[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let first = seen.iter().find(|s| s.rpc() == "initialize").unwrap();
    assert_eq!(first.header("authorization"), Some("Bearer A1"));
    let calls = posts(&seen, "tools/call");
    assert_eq!(calls[0].header("authorization"), Some("Bearer A2"));
    // The file: new tokens for this server, everything else kept, mode 0600, no lock left.
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let key = format!("mcp__x|{}", server.url());
    assert_eq!(
        stored[&key]["tokens"],
        json!({"refresh_token":"R2","access_token":"A2","token_type":"Bearer","expires_in":3600})
    );
    let at = stored[&key]["tokensExpireAt"].as_i64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!((at - now - 3_600_000).abs() < 60_000, "{at} {now}");
    assert_eq!(stored[&key]["codeVerifier"], "left over");
    assert_eq!(
        stored["mcp__other|http://elsewhere/"]["tokens"]["access_token"],
        "Z"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let leftovers: Vec<String> = std::fs::read_dir(w.agent_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".lock"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // No token in pith's output.
    p.close_stdin();
    p.wait(Duration::from_secs(10));
    let stderr = p.stderr_lines().join("\n");
    assert!(!stderr.contains("A2") && !stderr.contains("R2"), "{stderr}");
}

#[test]
fn without_a_usable_credential_the_error_says_to_sign_in_with_pi() {
    let server = FakeMcp::start(Mode {
        token: Some("A2".into()),
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let script = r#"{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert_eq!(
        *err,
        json!({"type":"extension_error","extensionPath":"mcp:x","event":"startup",
            "error":"initialize failed: MCP error -32603: MCP server \"x\" needs sign-in: run `pi mcp login x` once (pith cannot open a browser)"})
    );
    // A revoked refresh token: the same error, and pi's state loses its dead tokens.
    let server2 = FakeMcp::start(Mode {
        token: Some("A2".into()),
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server2.url(), json!({}));
    let mut state = auth_state(&server2.url(), server2.port);
    let key = format!("mcp__x|{}", server2.url());
    state[&key]["tokens"]["refresh_token"] = json!("revoked");
    let file = w.agent_dir().join("mcp-auth.json");
    std::fs::write(&file, state.to_string()).unwrap();
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .ends_with("needs sign-in: run `pi mcp login x` once (pith cannot open a browser)"),
        "{err}"
    );
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(stored[&key].get("tokens").is_none(), "{stored}");
    assert_eq!(stored[&key]["clientInformation"]["client_id"], "pith-test");
}

#[test]
fn transient_failures_are_retried_twice_but_never_a_tool_call() {
    let server = FakeMcp::start(Mode {
        failing_lists: 2,
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let script = r#"{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"listed"}},{"name":"mcp__x__boom","arguments":{}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(end_text(&frames, "faux_1_0"), ("listed".to_string(), false));
    assert_eq!(
        end_text(&frames, "faux_1_1"),
        (
            "MCP error -32603: MCP HTTP request failed with status 500: it broke".to_string(),
            true
        )
    );
    let seen = server.seen();
    // Two 503s, then the three pages.
    assert_eq!(posts(&seen, "tools/list").len(), 5);
    // The call may have run: sent once.
    let booms = posts(&seen, "tools/call")
        .into_iter()
        .filter(|s| s.body["params"]["name"] == "boom")
        .count();
    assert_eq!(booms, 1);
}

#[test]
fn an_expiring_token_is_refreshed_before_it_is_sent() {
    let server = FakeMcp::start(Mode {
        token: Some("A2".into()),
        ..Mode::default()
    });
    let w = World::new();
    configure(&w, &server.url(), json!({}));
    let mut state = auth_state(&server.url(), server.port);
    let key = format!("mcp__x|{}", server.url());
    // Expires in 10 s: within pi's 30 s skew.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 10_000;
    state[&key]["tokensExpireAt"] = json!(soon);
    let file = w.agent_dir().join("mcp-auth.json");
    std::fs::write(&file, state.to_string()).unwrap();
    let script = r#"{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"fresh"}}]}
{"text":"done"}
"#;
    let mut p = w.spawn_faux(script, &[]);
    let frames = run(&mut p, "p");
    assert_eq!(end_text(&frames, "faux_1_0"), ("fresh".to_string(), false));
    let seen = server.seen();
    // The stale token never went out: refreshed first.
    assert!(
        !seen
            .iter()
            .any(|s| s.header("authorization") == Some("Bearer A1")),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|s| s.body.is_string()).count(),
        1,
        "one refresh"
    );
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(stored[&key]["tokens"]["access_token"], "A2");
}

#[test]
fn pi_16_mcp_json_reaches_an_http_server_with_headers_from_the_environment() {
    let server = FakeMcp::start(Mode::default());
    let w = World::new();
    let cfg = json!({"mcpServers": {"x": {"url": server.url(), "exposure": "direct",
        "headers": {"X-Team": "${PITH_TEST_TEAM}"}}}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let script = r#"{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"via mcp.json"}}]}
{"text":"done"}
"#;
    let path = w.cwd().join("faux.jsonl");
    std::fs::write(&path, script).unwrap();
    let path = path.to_string_lossy().to_string();
    let mut cmd = w.command(&[
        "--mode",
        "rpc",
        "--compat",
        "1.6",
        "--provider",
        "faux",
        "--model",
        "faux",
        "--faux-script",
        &path,
    ]);
    cmd.env("PITH_TEST_TEAM", "green");
    let mut p = Pith::spawn_cmd(cmd);
    let frames = run(&mut p, "p");
    let end = frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end")
        .expect("a tool end");
    assert_eq!(
        end["result"]["details"],
        json!({"server": "x", "tool": "echo"})
    );
    assert_eq!(end["result"]["content"][0]["text"], "via mcp.json");
    p.close_stdin();
    p.wait(Duration::from_secs(10));
    let seen = server.seen();
    assert_eq!(
        posts(&seen, "initialize")[0].header("x-team"),
        Some("green")
    );
}

#[test]
fn pi_16_oauth_client_settings_refresh_pis_stored_token() {
    // pi 1.6.0's mcp.json names a registered client (`oauth.clientId`, the secret from the
    // environment); pi's sign-in then stores no client, and refreshes use the configured one.
    let server = FakeMcp::start(Mode {
        token: Some("A2".into()),
        ..Mode::default()
    });
    let w = World::new();
    let cfg = json!({"mcpServers": {"x": {"url": server.url(), "exposure": "direct",
        "oauth": {"clientId": "registered", "clientSecret": "${PITH_TEST_SECRET}", "callbackPort": 8765}}}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut state = auth_state(&server.url(), server.port);
    let key = format!("mcp__x|{}", server.url());
    state[&key]
        .as_object_mut()
        .unwrap()
        .remove("clientInformation");
    w.write_agent_file("mcp-auth.json", &state.to_string());
    let script = r#"{"toolCalls":[{"name":"mcp__x__echo","arguments":{"text":"registered"}}]}
{"text":"done"}
"#;
    let path = w.cwd().join("faux.jsonl");
    std::fs::write(&path, script).unwrap();
    let path = path.to_string_lossy().to_string();
    let mut cmd = w.command(&[
        "--mode",
        "rpc",
        "--compat",
        "1.6",
        "--provider",
        "faux",
        "--model",
        "faux",
        "--faux-script",
        &path,
    ]);
    cmd.env("PITH_TEST_SECRET", "sek");
    let mut p = Pith::spawn_cmd(cmd);
    let frames = run(&mut p, "p");
    let end = frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end")
        .expect("a tool end");
    assert_eq!(end["result"]["content"][0]["text"], "registered", "{end}");
    p.close_stdin();
    p.wait(Duration::from_secs(10));
    let seen = server.seen();
    let token: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.method == "POST" && s.body.is_string())
        .collect();
    assert_eq!(token.len(), 1);
    // No methods advertised and a secret: HTTP basic with the registered client.
    assert_eq!(
        token[0].header("authorization"),
        Some("Basic cmVnaXN0ZXJlZDpzZWs=")
    );
    assert_eq!(
        token[0].body,
        json!(format!(
            "grant_type=refresh_token&refresh_token=R1&resource={}",
            server.url().replace(':', "%3A").replace('/', "%2F")
        ))
    );
    assert_eq!(
        posts(&seen, "tools/call")[0].header("authorization"),
        Some("Bearer A2")
    );
    let stderr = p.stderr_lines().join("\n");
    assert!(!stderr.contains("sek"), "{stderr}");
}
