//! A scriptable fake LLM server for tests: plain HTTP/1.1 on 127.0.0.1, one thread, one request
//! per connection. Each accepted request consumes the next [`Reply`] (status, headers, body) and
//! records the request. Replies control how the body is written: chunk size, delay between
//! chunks, a stall (no bytes for a while) or a disconnect after N body bytes.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Bytes per write (0 = the whole body at once).
    pub chunk_size: usize,
    pub chunk_delay: Duration,
    /// After this many body bytes, go silent for `stall` (then close).
    pub stall_after: Option<usize>,
    pub stall: Duration,
    /// After this many body bytes, close the connection abruptly.
    pub cut_after: Option<usize>,
    /// Write the body one SSE event (`\n\n`-terminated) at a time, `chunk_delay` apart (the
    /// oracle's `delay_ms`).
    pub paced: bool,
}

impl Reply {
    pub fn sse(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.into(),
            chunk_size: 0,
            chunk_delay: Duration::ZERO,
            stall_after: None,
            stall: Duration::ZERO,
            cut_after: None,
            paced: false,
        }
    }

    pub fn error(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            ..Reply::sse(body.as_bytes().to_vec())
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn chunked(mut self, size: usize, delay: Duration) -> Reply {
        self.chunk_size = size;
        self.chunk_delay = delay;
        self
    }

    pub fn stall_after(mut self, bytes: usize, stall: Duration) -> Reply {
        self.stall_after = Some(bytes);
        self.stall = stall;
        self
    }

    pub fn cut_after(mut self, bytes: usize) -> Reply {
        self.cut_after = Some(bytes);
        self
    }

    /// One SSE event per write, `delay` apart.
    pub fn paced(mut self, delay: Duration) -> Reply {
        self.paced = true;
        self.chunk_delay = delay;
        self
    }
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct FakeLlm {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeLlm {
    pub fn start(replies: Vec<Reply>) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recs = requests.clone();
        std::thread::spawn(move || {
            let mut replies = replies.into_iter();
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let reply = replies
                    .next()
                    .unwrap_or_else(|| Reply::error(500, "script exhausted"));
                let recs = recs.clone();
                std::thread::spawn(move || serve(stream, reply, &recs));
            }
        });
        FakeLlm { port, requests }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }
}

fn serve(stream: TcpStream, reply: Reply, recs: &Mutex<Vec<Recorded>>) {
    let Some(rec) = read_request(&stream) else {
        return;
    };
    recs.lock().expect("lock").push(rec);
    let _ = write_reply(stream, &reply);
}

fn read_request(stream: &TcpStream) -> Option<Recorded> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Recorded {
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// The body cut after each `\n\n` (one SSE event per piece).
fn sse_events(b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'\n' && b[i + 1] == b'\n' {
            out.push(&b[start..i + 2]);
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    if start < b.len() {
        out.push(&b[start..]);
    }
    out
}

fn write_reply(mut s: TcpStream, reply: &Reply) -> std::io::Result<()> {
    let _ = s.set_nodelay(true);
    let streaming = reply.status == 200;
    let mut head = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if streaming {
        head.push_str("transfer-encoding: chunked\r\n\r\n");
    } else {
        head.push_str(&format!("content-length: {}\r\n\r\n", reply.body.len()));
    }
    s.write_all(head.as_bytes())?;
    if !streaming {
        s.write_all(&reply.body)?;
        return s.flush();
    }
    let size = if reply.chunk_size == 0 {
        reply.body.len().max(1)
    } else {
        reply.chunk_size
    };
    let mut sent = 0;
    let pieces: Vec<&[u8]> = if reply.paced {
        sse_events(&reply.body)
    } else {
        reply.body.chunks(size).collect()
    };
    for piece in pieces {
        for (at, limit) in [(reply.stall_after, true), (reply.cut_after, false)] {
            if let Some(n) = at {
                if sent >= n {
                    if limit {
                        std::thread::sleep(reply.stall);
                    }
                    let _ = s.shutdown(Shutdown::Both);
                    return Ok(());
                }
            }
        }
        // One write per chunk, sent at once (no Nagle delay behind the previous tiny segment).
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        s.write_all(&chunk)?;
        s.flush()?;
        sent += piece.len();
        if !reply.chunk_delay.is_zero() {
            std::thread::sleep(reply.chunk_delay);
        }
    }
    s.write_all(b"0\r\n\r\n")?;
    s.flush()
}
