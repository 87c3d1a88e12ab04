//! Differences from pi 1.6.0's MCP client over Streamable HTTP that differential runs against
//! pi found (scenarios `h01`..`h19` of the mcphttp pass), each fixed under `--compat 1.6`: pi's
//! `initialize` (protocol version 2025-11-25, the `roots` capability, `clientInfo` pi/1.6.0) and
//! its answer to `roots/list`; connection failures in pi's words (`fetch failed`, the HTTP status
//! text alone, "needs sign-in" for a 401 without a stored credential, `MCP server requires
//! authentication` for a refused configured header); a call's timeout and its progress updates
//! as pi words them (and a request answered 202); a token revoked mid-session leaves the server
//! needing sign-in; a header that cannot be resolved or an unsupported protocol version fail
//! the server (not the configuration) in pi's words; tools an MCP server lists mid-run declared at the next prompt; the first
//! prompt's `mcp_servers` section without the servers' instructions (pi connects its servers at
//! the first prompt).
//! The fake server below: std `TcpListener`, one request per connection.

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::anthropic::{Sse, text, tool_call};
use support::fake_llm::Reply;
use support::http_raw::{listen, read_request};
use support::{Pith, World, fake_rpc, fake_world};

#[derive(Default)]
struct State {
    /// Every POSTed JSON-RPC message with the request's headers.
    seen: Vec<(HashMap<String, String>, Value)>,
    /// `tools/list_changed` was sent: `added` is listed.
    grown: bool,
    /// The client's answer to our `roots/list` request.
    roots: Option<Value>,
    /// The `revoke` tool ran: `auth` answers 401 from then on.
    revoked: bool,
}

/// How the fake server answers: `ok` (JSON, a session), `e500` (every POST 500), `auth` (401
/// unless `Bearer good`).
struct Fake {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl Fake {
    fn start() -> Fake {
        let state = Arc::new(Mutex::new(State::default()));
        let port = listen(state.clone(), serve);
        Fake { port, state }
    }
    fn url(&self, mode: &str) -> String {
        format!("http://127.0.0.1:{}/{mode}", self.port)
    }
    fn posts(&self, method: &str) -> Vec<(HashMap<String, String>, Value)> {
        let s = self.state.lock().unwrap();
        s.seen
            .iter()
            .filter(|(_, b)| b["method"] == method)
            .cloned()
            .collect()
    }
}

fn head(conn: &mut TcpStream, status: &str, headers: &[(&str, &str)]) {
    let mut h = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    let _ = conn.write_all(h.as_bytes());
}

fn reply(conn: &mut TcpStream, status: &str, body: &str, extra: &[(&str, &str)]) {
    let len = body.len().to_string();
    let mut headers = vec![
        ("content-type", "application/json"),
        ("content-length", &len),
    ];
    headers.extend_from_slice(extra);
    head(conn, status, &headers);
    let _ = conn.write_all(body.as_bytes());
}

fn event(conn: &mut TcpStream, v: &Value) {
    let _ = conn.write_all(format!("data: {v}\n\n").as_bytes());
    let _ = conn.flush();
}

fn text_result(id: &Value, t: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":t}]}})
}

fn serve(mut conn: TcpStream, state: &Mutex<State>) {
    let Some(req) = read_request(&conn) else {
        return;
    };
    let (method, headers, body) = (req.method, req.headers, req.body);
    let mode = req.path.trim_start_matches('/').to_string();
    if method != "POST" {
        return reply(&mut conn, "405 Method Not Allowed", "", &[]);
    }
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state
        .lock()
        .unwrap()
        .seen
        .push((headers.clone(), msg.clone()));
    if mode == "e500" {
        return reply(
            &mut conn,
            "500 Internal Server Error",
            "upstream exploded",
            &[],
        );
    }
    let revoked = state.lock().unwrap().revoked;
    if mode == "auth"
        && (revoked || headers.get("authorization").map(String::as_str) != Some("Bearer good"))
    {
        return reply(&mut conn, "401 Unauthorized", "", &[]);
    }
    if msg["id"] == "r1" {
        state.lock().unwrap().roots = Some(msg["result"].clone());
    }
    let id = msg["id"].clone();
    if id.is_null() || msg.get("method").is_none() {
        return reply(&mut conn, "202 Accepted", "", &[]);
    }
    let sid = [("mcp-session-id", "s1")];
    match msg["method"].as_str().unwrap_or("") {
        "initialize" => {
            let v = match mode.as_str() {
                "badver" => json!("1999-01-01"),
                _ => msg["params"]["protocolVersion"].clone(),
            };
            let r = json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":v,
                "capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"f","version":"1"},
                "instructions":"Fake tools.\nMore."}});
            reply(&mut conn, "200 OK", &r.to_string(), &sid);
        }
        "tools/list" => {
            let mut tools = vec![];
            for n in [
                "echo", "sleep", "progress", "roots", "change", "accepted", "revoke",
            ] {
                tools.push(json!({"name": n, "inputSchema": {"type": "object"}}));
            }
            if state.lock().unwrap().grown {
                tools.push(json!({"name": "added", "inputSchema": {"type": "object"}}));
            }
            let r = json!({"jsonrpc":"2.0","id":id,"result":{"tools":tools}});
            reply(&mut conn, "200 OK", &r.to_string(), &[]);
        }
        "tools/call" => {
            let p = &msg["params"];
            let sse = [("content-type", "text/event-stream")];
            match p["name"].as_str().unwrap_or("") {
                "sleep" => {
                    std::thread::sleep(Duration::from_millis(1600));
                    let r = text_result(&id, "slept");
                    reply(&mut conn, "200 OK", &r.to_string(), &[]);
                }
                "progress" => {
                    head(&mut conn, "200 OK", &sse);
                    let token = p["_meta"]["progressToken"].clone();
                    for params in [
                        json!({"progressToken":token,"progress":1,"total":3,"message":"step 1"}),
                        json!({"progressToken":token,"progress":2,"total":3}),
                        json!({"progressToken":token,"progress":3}),
                    ] {
                        std::thread::sleep(Duration::from_millis(400));
                        event(
                            &mut conn,
                            &json!({"jsonrpc":"2.0","method":"notifications/progress","params":params}),
                        );
                    }
                    event(&mut conn, &text_result(&id, "done"));
                }
                "roots" => {
                    head(&mut conn, "200 OK", &sse);
                    event(
                        &mut conn,
                        &json!({"jsonrpc":"2.0","id":"r1","method":"roots/list"}),
                    );
                    let end = Instant::now() + Duration::from_secs(10);
                    let roots = loop {
                        if let Some(r) = state.lock().unwrap().roots.clone() {
                            break r;
                        }
                        if Instant::now() > end {
                            break Value::Null;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    };
                    event(&mut conn, &text_result(&id, &roots.to_string()));
                }
                "accepted" => reply(&mut conn, "202 Accepted", "", &[]),
                "revoke" => {
                    state.lock().unwrap().revoked = true;
                    reply(
                        &mut conn,
                        "200 OK",
                        &text_result(&id, "revoked").to_string(),
                        &[],
                    );
                }
                "change" => {
                    head(&mut conn, "200 OK", &sse);
                    state.lock().unwrap().grown = true;
                    event(
                        &mut conn,
                        &json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
                    );
                    std::thread::sleep(Duration::from_millis(300));
                    event(&mut conn, &text_result(&id, "changed"));
                }
                n => {
                    let pv = headers.get("mcp-protocol-version").cloned();
                    let r = text_result(&id, &format!("{n}: {}", pv.unwrap_or_default()));
                    reply(&mut conn, "200 OK", &r.to_string(), &[]);
                }
            }
        }
        m => {
            let r = json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":m}});
            reply(&mut conn, "200 OK", &r.to_string(), &[]);
        }
    }
}

fn replies(calls: &[(&str, &str)]) -> Vec<Reply> {
    let mut r: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name))| Sse::numbered(i + 1).reply(&[tool_call(id, name, &["{}"])]))
        .collect();
    r.push(Sse::numbered(calls.len() + 1).reply(&[text(&["ok"])]));
    r
}

fn start(w: &World, cfg: Value) -> Pith {
    w.write_agent_file("mcp.json", &json!({ "mcpServers": cfg }).to_string());
    w.spawn(&fake_rpc(&["--no-session", "--compat", "1.6"]))
}

fn run(p: &mut Pith, id: &str, message: &str) -> Vec<Value> {
    p.send(json!({"id": id, "type": "prompt", "message": message}));
    p.recv_until(|v| v["type"] == "agent_settled")
        .into_iter()
        .filter(|f| f["type"] != "message_update")
        .collect()
}

fn tool_end(frames: &[Value], id: &str) -> Value {
    frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end" && f["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool_execution_end {id}: {frames:#?}"))
        .clone()
}

fn end_text(frames: &[Value], id: &str) -> String {
    tool_end(frames, id)["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The notifies of a `/mcp` prompt (the start-up problems come first, once).
fn mcp_notifies(p: &mut Pith, id: &str) -> Vec<String> {
    p.send(json!({"id": id, "type": "prompt", "message": "/mcp"}));
    p.recv_until(|v| v["id"] == id)
        .iter()
        .filter(|f| f["type"] == "extension_ui_request" && f["method"] == "notify")
        .map(|f| f["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_handshake_and_roots_are_pis() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(replies(&[("a", "mcp__h__echo"), ("b", "mcp__h__roots")]));
    let mut p = start(
        &w,
        json!({"h": {"url": fake.url("ok"), "exposure": "direct"}}),
    );
    let frames = run(&mut p, "p1", "go");
    let init = fake.posts("initialize");
    assert_eq!(
        init[0].1["params"],
        json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
            "clientInfo": {"name": "pi", "version": "1.6.0"}})
    );
    // The version the server chose is sent from then on.
    assert_eq!(end_text(&frames, "a"), "echo: 2025-11-25");
    // roots/list: the session directory as a file URL, its last component as the name.
    let cwd = w.cwd();
    let name = cwd.file_name().unwrap().to_string_lossy().to_string();
    let roots = json!({"roots": [{"uri": format!("file://{}", cwd.display()), "name": name}]});
    assert_eq!(end_text(&frames, "b"), roots.to_string());
}

#[test]
fn connection_failures_are_in_pis_words() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(replies(&[("a", "mcp__locked__echo")]));
    let mut p = start(
        &w,
        json!({
            "boom": {"url": fake.url("e500")},
            "locked": {"url": fake.url("auth"), "exposure": "direct"},
            "keyed": {"url": fake.url("auth"), "headers": {"Authorization": "Bearer bad"}},
            "gone": {"url": "http://127.0.0.1:1/mcp"},
        }),
    );
    // Wait for the retries of the 500 and of the unreachable server (250 ms, 1 s).
    std::thread::sleep(Duration::from_millis(2500));
    let notes = mcp_notifies(&mut p, "m1");
    assert_eq!(
        notes,
        vec![
            "MCP servers need attention:\n  boom: failed: MCP HTTP request failed with status 500: upstream exploded\n  locked: needs sign-in\n  keyed: failed: MCP server requires authentication\n  gone: failed: fetch failed\nRun /mcp to fix.".to_string(),
            "boom: failed (codemode)\n    MCP HTTP request failed with status 500: upstream exploded\nlocked: needs sign-in, run /mcp login locked (direct)\nkeyed: failed (codemode)\n    MCP server requires authentication\ngone: failed (codemode)\n    fetch failed".to_string(),
        ]
    );
    // The tool of the server that needs sign-in was never declared.
    let frames = run(&mut p, "p1", "go");
    assert_eq!(end_text(&frames, "a"), "Tool mcp__locked__echo not found");
}

#[test]
fn a_timeout_and_progress_are_in_pis_words() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(replies(&[
        ("a", "mcp__h__sleep"),
        ("b", "mcp__h__progress"),
    ]));
    let mut p = start(
        &w,
        json!({"h": {"url": fake.url("ok"), "exposure": "direct", "timeout": 1}}),
    );
    let frames = run(&mut p, "p1", "go");
    assert_eq!(end_text(&frames, "a"), "MCP request timed out after 1000ms");
    // Progress restarts the timeout (1.2 s in all); each update names the server and the tool.
    let updates: Vec<Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_update" && f["toolCallId"] == "b")
        .map(|f| f["partialResult"].clone())
        .collect();
    let update = |t: &str| json!({"content": [{"type": "text", "text": t}], "details": {"server": "h", "tool": "progress"}});
    assert_eq!(
        updates,
        vec![
            update("step 1"),
            update("Progress 2/3"),
            update("Progress 3")
        ]
    );
    assert_eq!(end_text(&frames, "b"), "done");
}

#[test]
fn tools_listed_during_a_run_are_declared_at_the_next_prompt() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(vec![
        Sse::numbered(1).reply(&[tool_call("a", "mcp__h__change", &["{}"])]),
        Sse::numbered(2).reply(&[text(&["one"])]),
        Sse::numbered(3).reply(&[text(&["two"])]),
    ]);
    let mut p = start(
        &w,
        json!({"h": {"url": fake.url("ok"), "exposure": "direct"}}),
    );
    let system = |frames: &[Value]| -> Vec<Value> {
        frames
            .iter()
            .filter(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
            .map(|f| f["message"]["toolsAdded"].clone())
            .collect()
    };
    let first = run(&mut p, "p1", "go");
    assert_eq!(end_text(&first, "a"), "changed");
    // Only the prompt's own declaration: `added` is not declared mid-run.
    assert_eq!(system(&first).len(), 1);
    let second = run(&mut p, "p2", "again");
    assert_eq!(
        system(&second),
        vec![
            json!([{"name": "mcp__h__added", "description": "MCP tool added from server h",
            "parameters": {"type": "object", "properties": {}}}])
        ]
    );
}

#[test]
fn the_first_prompt_lists_servers_without_their_instructions() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(vec![
        Sse::numbered(1).reply(&[text(&["one"])]),
        Sse::numbered(2).reply(&[text(&["two"])]),
    ]);
    let mut p = start(
        &w,
        json!({"c": {"url": fake.url("ok")}, "d": {"url": fake.url("ok"), "exposure": "deferred",
            "description": "Described"}}),
    );
    // Connected long before the prompt: pi would only start connecting at it.
    std::thread::sleep(Duration::from_millis(1000));
    let section = |frames: &[Value]| -> Vec<Value> {
        frames
            .iter()
            .filter(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
            .map(|f| f["message"]["sections"]["mcp_servers"].clone())
            .collect()
    };
    let head = "<mcp_servers>\nMCP servers whose tools are not declared to you. Call the tools of `codemode` servers from codemode scripts. Load the tools of `tool_search` servers with `tool_search`.\n";
    assert_eq!(
        section(&run(&mut p, "p1", "go")),
        vec![json!(format!(
            "{head}- mcp__c (codemode)\n- mcp__d (tool_search): Described\n</mcp_servers>"
        ))]
    );
    assert_eq!(
        section(&run(&mut p, "p2", "again")),
        vec![json!(format!(
            "{head}- mcp__c (codemode): Fake tools.\n- mcp__d (tool_search): Described\n</mcp_servers>"
        ))]
    );
}

#[test]
fn a_202_answer_and_a_token_revoked_mid_session_are_in_pis_words() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(replies(&[
        ("a", "mcp__h__accepted"),
        ("b", "mcp__h__revoke"),
        ("c", "mcp__h__echo"),
    ]));
    let url = fake.url("auth");
    let auth = json!({ format!("mcp__h|{url}"): {"serverUrl": url,
        "tokens": {"access_token": "good", "token_type": "Bearer"}} });
    w.write_agent_file("mcp-auth.json", &auth.to_string());
    let mut p = start(&w, json!({"h": {"url": url, "exposure": "direct"}}));
    let frames = run(&mut p, "p1", "go");
    assert_eq!(
        end_text(&frames, "a"),
        "MCP server accepted request tools/call without a response"
    );
    assert_eq!(end_text(&frames, "b"), "revoked");
    assert_eq!(
        end_text(&frames, "c"),
        "MCP server \"h\" requires sign-in. Run /mcp to sign in."
    );
    assert_eq!(
        mcp_notifies(&mut p, "m1"),
        vec!["h: needs sign-in, run /mcp login h (direct)".to_string()]
    );
}

#[test]
fn an_unresolved_header_and_an_unknown_protocol_version_fail_the_server() {
    let fake = Fake::start();
    let (w, _llm) = fake_world(replies(&[]));
    // After `/mcp`, pi knows what its servers said.
    let mut p = start(
        &w,
        json!({
            "ver": {"url": fake.url("badver"), "exposure": "deferred"},
            "m": {"url": fake.url("ok"), "headers": {"X-Ok": "plain", "X-Missing": "${PITH_NOPE_1}-$PITH_NOPE_2"}},
        }),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        mcp_notifies(&mut p, "m1"),
        vec![
            "MCP servers need attention:\n  ver: failed: MCP server selected unsupported protocol version 1999-01-01\n  m: failed: Failed to resolve MCP server \"m\" header \"X-Missing\" from environment variables: PITH_NOPE_1, PITH_NOPE_2\nRun /mcp to fix.".to_string(),
            "ver: failed (deferred)\n    MCP server selected unsupported protocol version 1999-01-01\nm: failed (codemode)\n    Failed to resolve MCP server \"m\" header \"X-Missing\" from environment variables: PITH_NOPE_1, PITH_NOPE_2".to_string(),
        ]
    );
    // The server never got a request.
    assert_eq!(fake.posts("initialize").len(), 1);
    // The server that failed after `initialize` told its instructions: not listed (pi keeps
    // them only from a connection that succeeded).
    let frames = run(&mut p, "p1", "go");
    let sys = frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .unwrap();
    assert_eq!(
        sys["message"]["sections"]["mcp_servers"],
        "<mcp_servers>\nMCP servers whose tools are not declared to you. Call the tools of `codemode` servers from codemode scripts. Load the tools of `tool_search` servers with `tool_search`.\n- mcp__m (codemode)\n- mcp__ver (tool_search)\n</mcp_servers>"
    );
}
