//! A raw HTTP/1.1 server for fake MCP servers over streamable HTTP (`mcp_http.rs`,
//! `mcp16_http_diff.rs`): one thread per connection, the request head and body read here, the
//! answer written by the test's own handler.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// One request: method, path, headers (names lower-cased), body.
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// Listens on a free port of 127.0.0.1 and hands each connection to `serve` on its own thread.
pub fn listen<S: Send + Sync + 'static>(state: Arc<S>, serve: fn(TcpStream, &S)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let s = state.clone();
            std::thread::spawn(move || serve(conn, &s));
        }
    });
    port
}

/// The request on `conn` (its body by `content-length`), `None` if the connection closed first.
pub fn read_request(conn: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).is_err() || l.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}
