//! A child process that speaks JSON lines (extensions, MCP servers): spawned in its own process
//! group, with one reader thread (its stdout → parsed values → the state machine) and one writer
//! thread (lines from the machine → its stdin). Its stderr is inherited: it goes to pith's stderr,
//! never to stdout.
//!
//! The machine never blocks on a child: it hands lines to the writer with `try_send` on a
//! bounded channel (a child that stops reading fills it, and the machine treats that as a
//! failure), and the reader sends on the machine's bounded worker channel (a child that writes
//! faster than pith handles its messages is slowed down by the pipe). One line is capped
//! ([`crate::rpc::frame::LineSplitter`]: longer lines are skipped without being buffered) and so is
//! the number of lines per second (a flood stops the reader and is reported).
//!
//! The reader owns the `Child`: after end of output it waits for the exit and reports it, so no
//! zombie is left behind. Killing is by process group (`kill(-pgid)`), which reaches whatever the
//! child started (`npx` → `node`). On Linux the child also gets `PR_SET_PDEATHSIG(SIGKILL)`, so it
//! does not outlive a pith that is killed outright.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde_json::Value;

use crate::rpc::frame::{Frame, LineSplitter};

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

#[cfg(target_os = "linux")]
unsafe extern "C" {
    fn prctl(option: i32, arg2: u64, arg3: u64, arg4: u64, arg5: u64) -> i32;
}

pub const SIGKILL: i32 = 9;
pub const SIGTERM: i32 = 15;

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Added to (or replacing in) the environment the child starts with.
    pub env: Vec<(String, String)>,
    /// The child starts with pith's whole environment (extensions: pith's own plug-ins, as pi's
    /// run in its process), or only [`DEFAULT_INHERITED_ENV`] (MCP servers: third-party
    /// programs, given what the MCP SDK's stdio client gives them, not pith's provider keys).
    pub inherit_env: bool,
    pub cwd: PathBuf,
    /// Keep the tail of its stderr (still copied to pith's stderr) for [`ChildEvent::Exited`]
    /// (pi 1.6.0 shows a failed MCP server's stderr tail).
    pub capture_stderr: bool,
}

/// Characters of a child's stderr kept for [`ChildEvent::Exited`] (pi 1.6.0's `STDERR_TAIL_CHARS`).
pub const STDERR_TAIL_CHARS: usize = 2_000;

/// What the MCP SDK's stdio client passes on by default on POSIX (sudo's list).
pub const DEFAULT_INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Limits of one child's output.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest accepted line in bytes.
    pub max_line: usize,
    /// Most lines accepted within one second; more is a flood.
    pub max_lines_per_sec: u32,
    /// Lines the machine may queue for the writer before the child counts as not reading.
    pub write_queue: usize,
    /// Bytes the machine may queue for the writer (lines can be large: an event carries whole
    /// messages). One line is always accepted into an empty queue, however long.
    pub write_queue_bytes: usize,
}

/// What the reader thread reports.
#[derive(Debug)]
pub enum ChildEvent {
    /// One line that parsed as JSON.
    Line(Value),
    /// A line that is not JSON (the parser's message and the start of the line).
    Garbage { error: String, line: String },
    /// A line longer than [`Limits::max_line`] (skipped).
    Oversized { bytes: usize },
    /// More than [`Limits::max_lines_per_sec`] lines in one second: the reader stopped.
    Flood,
    /// The process exited (after its stdout closed); `status` describes how; `stderr_tail` is
    /// the end of its stderr, trimmed (only with [`Spec::capture_stderr`], when not empty).
    Exited {
        status: String,
        stderr_tail: Option<String>,
    },
}

/// The machine's handle on a running child.
#[derive(Debug)]
pub struct ChildHandle {
    pub pid: i32,
    tx: Option<Sender<Vec<u8>>>,
    /// Bytes queued for the writer and not yet written. Shared with the writer thread (which
    /// subtracts what it wrote) because a channel cannot tell how many bytes it holds; a counter
    /// is all there is to share.
    queued: Arc<AtomicUsize>,
    max_queued: usize,
}

/// Why a line could not be handed to the writer.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The queue is full: the child does not read its input.
    Full,
    /// The writer is gone (the child closed its input or exited).
    Closed,
}

impl ChildHandle {
    /// Queue one line (a `\n` is added). Never blocks.
    pub fn write(&self, mut line: Vec<u8>) -> Result<(), WriteError> {
        let Some(tx) = &self.tx else {
            return Err(WriteError::Closed);
        };
        line.push(b'\n');
        let len = line.len();
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && queued.saturating_add(len) > self.max_queued {
            return Err(WriteError::Full);
        }
        self.queued.fetch_add(len, Ordering::AcqRel);
        let r = match tx.try_send(line) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(_)) => Err(WriteError::Full),
            Err(TrySendError::Disconnected(_)) => Err(WriteError::Closed),
        };
        self.queued.fetch_sub(len, Ordering::AcqRel);
        r
    }

    /// Close the child's stdin once what is queued has been written.
    pub fn close_input(&mut self) {
        self.tx = None;
    }

    /// Signal the whole process group.
    pub fn signal(&self, sig: i32) {
        signal_group(self.pid, sig);
    }
}

/// Signal process group `pgid` (the child's pid: it leads its own group).
pub fn signal_group(pgid: i32, sig: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
        unsafe {
            kill(-pgid, sig);
        }
    }
}

/// Start `spec`. `on_event` runs on the reader thread; returning false stops the reader.
pub fn spawn(
    spec: &Spec,
    limits: Limits,
    on_event: Box<dyn FnMut(ChildEvent) -> bool + Send>,
) -> Result<ChildHandle, String> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if spec.capture_stderr {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .process_group(0);
    if !spec.inherit_env {
        cmd.env_clear();
        for k in DEFAULT_INHERITED_ENV {
            // As the SDK: shell functions exported as variables (`() { …`) are not passed on.
            if let Some(v) =
                std::env::var_os(k).filter(|v| !v.as_encoded_bytes().starts_with(b"()"))
            {
                cmd.env(k, v);
            }
        }
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                const PR_SET_PDEATHSIG: i32 = 1;
                prctl(PR_SET_PDEATHSIG, SIGKILL as u64, 0, 0, 0);
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", spec.program.display()))?;
    let pid = child.id() as i32;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        signal_group(pid, SIGKILL);
        let _ = child.wait();
        return Err("cannot open the child's pipes".to_string());
    };
    let tail = child.stderr.take().map(|err| {
        let (done_tx, done_rx) = crossbeam_channel::bounded::<String>(1);
        let spawned = std::thread::Builder::new()
            .name("child-e".to_string())
            .spawn(move || {
                let _ = done_tx.send(stderr_loop(err));
            });
        (spawned.is_ok(), done_rx)
    });
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(limits.write_queue);
    let name = spec
        .program
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let queued = Arc::new(AtomicUsize::new(0));
    let written = queued.clone();
    let writer = std::thread::Builder::new()
        .name(format!("child-w-{name}"))
        .spawn(move || write_loop(stdin, rx, &written));
    if let Err(e) = writer {
        signal_group(pid, SIGKILL);
        let _ = child.wait();
        return Err(format!("cannot start a writer thread: {e}"));
    }
    let mut on_event = on_event;
    let reader = std::thread::Builder::new()
        .name(format!("child-r-{name}"))
        .spawn(move || {
            read_loop(stdout, limits, &mut on_event);
            let status = match child.wait() {
                Ok(s) => describe_status(s),
                Err(e) => format!("cannot wait for it: {e}"),
            };
            // The stderr reader ends when the last holder of the pipe closes it (a grandchild
            // may keep it open: not waited for long).
            let stderr_tail = tail
                .and_then(|(ok, rx)| ok.then(|| rx.recv_timeout(Duration::from_millis(300)).ok()))
                .flatten()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty());
            on_event(ChildEvent::Exited {
                status,
                stderr_tail,
            });
        });
    if let Err(e) = reader {
        signal_group(pid, SIGKILL);
        return Err(format!("cannot start a reader thread: {e}"));
    }
    Ok(ChildHandle {
        pid,
        tx: Some(tx),
        queued,
        max_queued: limits.write_queue_bytes,
    })
}

fn describe_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".to_string(),
    }
}

/// Copy a child's stderr to pith's, keeping its last [`STDERR_TAIL_CHARS`] characters.
fn stderr_loop(mut err: std::process::ChildStderr) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = match err.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let _ = std::io::stderr().write_all(&buf[..n]);
        kept.extend_from_slice(&buf[..n]);
        // Bytes bound characters from above (4 per character at most).
        let cap = STDERR_TAIL_CHARS * 4;
        if kept.len() > 2 * cap {
            kept.drain(..kept.len() - cap);
        }
    }
    let text = String::from_utf8_lossy(&kept).trim().to_string();
    let count = text.chars().count();
    text.chars()
        .skip(count.saturating_sub(STDERR_TAIL_CHARS))
        .collect()
}

fn write_loop(mut stdin: std::process::ChildStdin, rx: Receiver<Vec<u8>>, queued: &AtomicUsize) {
    while let Ok(line) = rx.recv() {
        let written = stdin.write_all(&line);
        queued.fetch_sub(line.len(), Ordering::AcqRel);
        drop(line);
        if written.is_err() {
            return;
        }
        // Flush only when nothing else is queued: a burst goes out in few writes.
        if rx.is_empty() && stdin.flush().is_err() {
            return;
        }
    }
}

/// The reader: lines until end of output, a flood, or the machine no longer listening.
fn read_loop(mut src: impl Read, limits: Limits, on_event: &mut dyn FnMut(ChildEvent) -> bool) {
    let mut splitter = LineSplitter::new(limits.max_line);
    let mut buf = vec![0u8; 64 * 1024];
    let mut frames = Vec::new();
    let mut window = Instant::now();
    let mut in_window: u32 = 0;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        splitter.feed(&buf[..n], &mut frames);
        for frame in frames.drain(..) {
            if window.elapsed() >= Duration::from_secs(1) {
                window = Instant::now();
                in_window = 0;
            }
            in_window += 1;
            if in_window > limits.max_lines_per_sec {
                on_event(ChildEvent::Flood);
                return;
            }
            let ev = match frame {
                Frame::Line(line) => match parse(&line) {
                    Some(ev) => ev,
                    None => continue,
                },
                Frame::Oversized { bytes } => ChildEvent::Oversized { bytes },
            };
            if !on_event(ev) {
                return;
            }
        }
    }
    splitter.finish(&mut frames);
    for frame in frames.drain(..) {
        let ev = match frame {
            Frame::Line(line) => match parse(&line) {
                Some(ev) => ev,
                None => continue,
            },
            Frame::Oversized { bytes } => ChildEvent::Oversized { bytes },
        };
        if !on_event(ev) {
            return;
        }
    }
}

/// One line: blank lines are skipped (`None`), JSON becomes `Line`, anything else `Garbage`.
fn parse(line: &[u8]) -> Option<ChildEvent> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    Some(match serde_json::from_slice::<Value>(line) {
        Ok(v) => ChildEvent::Line(v),
        Err(e) => {
            let text = String::from_utf8_lossy(&line[..line.len().min(80)]).to_string();
            ChildEvent::Garbage {
                error: e.to_string(),
                line: text,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], limits: Limits) -> Vec<String> {
        let mut out = Vec::new();
        read_loop(input, limits, &mut |ev| {
            out.push(match ev {
                ChildEvent::Line(v) => format!("line {v}"),
                ChildEvent::Garbage { line, .. } => format!("garbage {line}"),
                ChildEvent::Oversized { bytes } => format!("oversized {bytes}"),
                ChildEvent::Flood => "flood".to_string(),
                ChildEvent::Exited { status, .. } => status,
            });
            true
        });
        out
    }

    const LIMITS: Limits = Limits {
        max_line: 64,
        max_lines_per_sec: 5,
        write_queue: 4,
        write_queue_bytes: 1 << 20,
    };

    #[test]
    fn lines_garbage_blank_and_oversized() {
        let input = b"{\"a\":1}\n\n  \nnot json\n[1,2]";
        assert_eq!(
            collect(input, LIMITS),
            vec!["line {\"a\":1}", "garbage not json", "line [1,2]"]
        );
        let long = format!("\"{}\"\n{{}}\n", "x".repeat(100));
        assert_eq!(
            collect(long.as_bytes(), LIMITS),
            vec!["oversized 102", "line {}"]
        );
    }

    #[test]
    fn a_flood_stops_the_reader() {
        let input = "{}\n".repeat(20);
        let out = collect(input.as_bytes(), LIMITS);
        assert_eq!(out.len(), 6);
        assert_eq!(out.last().map(String::as_str), Some("flood"));
    }

    #[test]
    fn spawn_talks_and_reports_the_exit() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let spec = Spec {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), "read l; echo \"$l\"; exit 3".into()],
            env: vec![],
            inherit_env: true,
            cwd: std::env::temp_dir(),
            capture_stderr: false,
        };
        let mut h = spawn(
            &spec,
            Limits {
                max_line: 1024,
                max_lines_per_sec: 100,
                write_queue: 4,
                write_queue_bytes: 1 << 20,
            },
            Box::new(move |ev| tx.send(ev).is_ok()),
        )
        .unwrap();
        h.write(b"{\"x\":true}".to_vec()).unwrap();
        h.close_input();
        let timeout = Duration::from_secs(10);
        match rx.recv_timeout(timeout).unwrap() {
            ChildEvent::Line(v) => assert_eq!(v, serde_json::json!({"x": true})),
            other => panic!("{other:?}"),
        }
        match rx.recv_timeout(timeout).unwrap() {
            ChildEvent::Exited { status, .. } => assert_eq!(status, "exit code 3"),
            other => panic!("{other:?}"),
        }
    }

    /// A child that never reads: the queue fills by bytes long before its line count (events
    /// carry whole messages); a line longer than the byte limit still goes into an empty queue.
    #[test]
    fn the_write_queue_is_bounded_by_bytes() {
        let spec = Spec {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), "sleep 30".into()],
            env: vec![],
            inherit_env: true,
            cwd: std::env::temp_dir(),
            capture_stderr: false,
        };
        let limits = Limits {
            max_line: 1024,
            max_lines_per_sec: 100,
            write_queue: 1024,
            write_queue_bytes: 1 << 20,
        };
        let h = spawn(&spec, limits, Box::new(|_| true)).unwrap();
        assert_eq!(h.write(vec![b'x'; 2 << 20]), Ok(()));
        let mut accepted = 0;
        let result = loop {
            match h.write(vec![b'y'; 100 << 10]) {
                Ok(()) => accepted += 1,
                Err(e) => break e,
            }
            assert!(accepted < 1024, "never full");
        };
        assert_eq!(result, WriteError::Full);
        assert!(accepted <= 1, "{accepted} lines accepted behind 2 MiB");
        h.signal(SIGKILL);
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let spec = Spec {
            program: PathBuf::from("/nonexistent/prog"),
            args: vec![],
            env: vec![],
            inherit_env: true,
            cwd: std::env::temp_dir(),
            capture_stderr: false,
        };
        let e = spawn(&spec, LIMITS, Box::new(|_| true)).err().unwrap();
        assert!(e.starts_with("cannot start /nonexistent/prog:"), "{e}");
    }
}
