//! Running a shell command: shared by the `bash` tool and the RPC `bash` command.
//!
//! The command runs as `<shell> -c <command>` in a new process group, with stdout and stderr
//! writing into one pipe so their output interleaves exactly as produced. A reader thread turns
//! the pipe into chunks; the calling thread multiplexes chunks, cancellation and the timeout.
//! Output is kept in a bounded rolling buffer (the tail the model sees); once the raw output
//! passes [`DEFAULT_MAX_BYTES`] everything also goes to `$TMPDIR/pi-bash-<16 hex>.log`, so memory
//! stays bounded however much a command prints. Cancellation and timeouts SIGKILL the whole
//! process group. When the shell exits while a background child still holds the pipe open we
//! stop waiting after a short grace period and kill the group, so `sleep 30 & echo hi` returns
//! at once and leaves nothing behind.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select};

use super::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Truncation};
use crate::cancel::CancelToken;

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

const SIGKILL: i32 = 9;
/// The rolling buffer keeps at least this many bytes of the newest output.
const ROLLING_BUFFER_BYTES: usize = DEFAULT_MAX_BYTES * 2;
/// How long to keep reading after the shell exited (background children may hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(100);
/// How long to keep reading what is left in the pipe once the group was killed.
const FINAL_READ_LIMIT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;

/// What to run and how.
pub struct CommandSpec<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    /// settings `shellPath`; `None` → `/bin/bash`, `bash` on PATH, `sh`.
    pub shell_path: Option<&'a str>,
    /// settings `shellCommandPrefix`, run before the command (`<prefix>\n<command>`).
    pub prefix: Option<&'a str>,
    pub cancel: &'a CancelToken,
    pub timeout: Option<Duration>,
    /// RPC `bash`: strip ANSI escapes and control characters (spec 13). The tool keeps raw text.
    pub sanitize: bool,
    /// A directory put in front of `PATH` unless already there (the reference's
    /// `<agentDir>/bin`).
    pub path_prepend: Option<&'a Path>,
    /// Environment for the child: `Some` sets a variable, `None` removes it.
    pub env: &'a [(String, Option<String>)],
    /// Called with each piece of (sanitised) output text as it arrives (pi 0.87.1's
    /// `bash_execution_update`).
    pub on_text: Option<&'a (dyn Fn(&str) + Sync)>,
    /// How the final output's lines are counted for truncation.
    pub line_counting: super::truncate::LineCounting,
}

/// How a command ended, with its (tail-truncated) output.
#[derive(Debug, Clone)]
pub struct CommandOutcome {
    /// `None` when the process was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed the shell, if one did.
    pub signal: Option<i32>,
    /// Cancelled through the token, or killed by a signal.
    pub cancelled: bool,
    pub timed_out: bool,
    /// The tail of the output (`truncation.content`).
    pub output: String,
    /// The untruncated rolling buffer (at most ~100 KB): aborted/timed-out texts use it.
    pub raw_output: String,
    pub truncated: bool,
    pub truncation: Truncation,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    pub full_output_path: Option<PathBuf>,
    /// Bytes of the last line of the whole output (for the "line is N" notice).
    pub last_line_bytes: usize,
}

impl CommandOutcome {
    /// pi 0.87.1: a shell killed by a signal that nobody asked for (not an abort, not the
    /// timeout) exited with the shell convention's `128 + signal` (pi 0.73.1 reported no exit
    /// code at all).
    pub fn signal_as_exit_code(&mut self, cancelled_by_us: bool) {
        if self.exit_code.is_none() && !cancelled_by_us && !self.timed_out {
            if let Some(sig) = self.signal {
                self.exit_code = Some(128 + sig);
                self.cancelled = false;
            }
        }
    }

    /// The RPC `bash` response `data` (BashResult): `output` (the tail when truncated),
    /// `exitCode` (omitted when killed by a signal), `cancelled`, `truncated`, `fullOutputPath`
    /// (whenever a temp file exists).
    pub fn rpc_result(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("output".into(), self.output.clone().into());
        if let Some(code) = self.exit_code {
            m.insert("exitCode".into(), code.into());
        }
        m.insert(
            "cancelled".into(),
            (self.cancelled || self.timed_out).into(),
        );
        m.insert("truncated".into(), self.truncated.into());
        if let Some(p) = &self.full_output_path {
            m.insert(
                "fullOutputPath".into(),
                p.to_string_lossy().into_owned().into(),
            );
        }
        serde_json::Value::Object(m)
    }
}

/// A view of the output so far, given to `on_chunk` after new output arrived.
pub struct OutputSnapshot<'a> {
    pub truncation: &'a Truncation,
    pub full_output_path: Option<&'a Path>,
}

/// Pick the shell as the reference does: `shellPath` if it exists, `/bin/bash`, `bash` on PATH,
/// then `sh`.
pub fn resolve_shell(shell_path: Option<&str>) -> Result<String, String> {
    if let Some(p) = shell_path {
        if Path::new(p).exists() {
            return Ok(p.to_string());
        }
        return Err(format!("Custom shell path not found: {p}"));
    }
    if Path::new("/bin/bash").exists() {
        return Ok("/bin/bash".to_string());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("bash");
            if candidate.is_file() {
                return Ok(candidate.to_string_lossy().into_owned());
            }
        }
    }
    Ok("sh".to_string())
}

/// Run a command to completion, calling `on_chunk` whenever new output arrived (at most once per
/// `throttle`; the final state is always reported by the returned outcome, not by `on_chunk`).
/// `Err` is a spawn failure text.
pub fn run_command(
    spec: &CommandSpec,
    throttle: Duration,
    on_chunk: &mut dyn FnMut(&OutputSnapshot),
) -> Result<CommandOutcome, String> {
    let shell = resolve_shell(spec.shell_path)?;
    let full_command = match spec.prefix {
        Some(p) if !p.is_empty() => format!("{p}\n{}", spec.command),
        _ => spec.command.to_string(),
    };
    let (reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
    // Streaming output (pi 0.87.1's RPC bash) reads stdout and stderr apart, as pi does, so each
    // write arrives as its own piece; otherwise one pipe keeps their exact interleaving.
    let (reader2, writer2) = if spec.on_text.is_some() {
        let (r, w) = std::io::pipe().map_err(|e| e.to_string())?;
        (Some(r), w)
    } else {
        (None, writer.try_clone().map_err(|e| e.to_string())?)
    };
    let mut cmd = Command::new(&shell);
    cmd.arg("-c")
        .arg(&full_command)
        .current_dir(spec.cwd)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    if let Some(dir) = spec.path_prepend {
        cmd.env("PATH", prepend_path(dir));
    }
    for (k, v) in spec.env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let spawned = cmd.spawn();
    drop(cmd); // closes our copies of the write end, so EOF means "all writers gone"
    let mut child = spawned.map_err(|e| e.to_string())?;
    let (chunk_tx, chunks) = bounded::<Vec<u8>>(64);
    match reader2 {
        Some(r2) => spawn_pair_reader(reader, r2, chunk_tx),
        None => spawn_reader(reader, chunk_tx),
    }

    let mut out = OutputBuffer::new(spec.sanitize);
    out.counting = spec.line_counting;
    out.on_text = spec.on_text;
    let started = Instant::now();
    let mut last_update: Option<Instant> = None;
    let mut dirty = false;
    let mut cancelled = false;
    let mut timed_out = false;
    let mut exited_at: Option<Instant> = None;
    let tick = Duration::from_millis(20);

    let never = crossbeam_channel::never::<Vec<u8>>();
    let mut eof = false;
    loop {
        if exited_at.is_none() {
            if let Ok(Some(_)) = child.try_wait() {
                exited_at = Some(Instant::now());
            }
        }
        if let Some(t) = exited_at {
            if eof || t.elapsed() >= DRAIN_GRACE {
                break;
            }
        }
        if let Some(limit) = spec.timeout {
            if exited_at.is_none() && started.elapsed() >= limit {
                timed_out = true;
                kill_group(&child);
                break;
            }
        }
        let source = if eof { &never } else { &chunks };
        select! {
            recv(source) -> msg => match msg {
                Ok(data) => {
                    out.push(&data);
                    dirty = true;
                }
                Err(_) => eof = true,
            },
            recv(spec.cancel.receiver()) -> _ => {
                cancelled = true;
                kill_group(&child);
                break;
            },
            default(tick) => {}
        }
        if dirty && last_update.is_none_or(|t| t.elapsed() >= throttle) {
            dirty = false;
            last_update = Some(Instant::now());
            let snap = out.snapshot();
            on_chunk(&OutputSnapshot {
                truncation: &snap,
                full_output_path: out.file_path(),
            });
        }
    }
    // Anything left in the group (background children) dies with the command.
    kill_group(&child);
    let status = child.wait().map_err(|e| e.to_string())?;
    // The group is gone, so what it wrote is in the pipe: read to the end. On a loaded machine
    // the reader may not have run yet when the grace ended, and the output would be lost. A
    // process that left the group can still hold the pipe open: bounded.
    let deadline = Instant::now() + FINAL_READ_LIMIT;
    if !eof {
        while let Ok(data) = chunks.recv_deadline(deadline) {
            out.push(&data);
            dirty = true;
        }
    }
    if dirty {
        let snap = out.snapshot();
        on_chunk(&OutputSnapshot {
            truncation: &snap,
            full_output_path: out.file_path(),
        });
    }
    out.finish();
    let exit_code = status.code();
    if exit_code.is_none() && !timed_out {
        cancelled = true;
    }
    let mut outcome = out.into_outcome(exit_code, cancelled, timed_out);
    outcome.signal = std::os::unix::process::ExitStatusExt::signal(&status);
    Ok(outcome)
}

/// `PATH` with `dir` in front (unchanged if it is already listed).
fn prepend_path(dir: &Path) -> std::ffi::OsString {
    let current = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&current).any(|p| p == dir) {
        return current;
    }
    let mut all = vec![dir.to_path_buf()];
    all.extend(std::env::split_paths(&current));
    std::env::join_paths(all).unwrap_or(current)
}

fn spawn_reader(mut reader: std::io::PipeReader, tx: crossbeam_channel::Sender<Vec<u8>>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    });
}

#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

#[cfg(target_os = "linux")]
type NFds = std::ffi::c_ulong;
#[cfg(not(target_os = "linux"))]
type NFds = std::ffi::c_uint;

unsafe extern "C" {
    fn poll(fds: *mut PollFd, nfds: NFds, timeout: i32) -> i32;
}

const POLLIN: i16 = 0x1;
const POLLERR: i16 = 0x8;
const POLLHUP: i16 = 0x10;

/// One thread reading two pipes (stdout, stderr) in the order their data arrives: `poll(2)`
/// says which are readable, stdout first when both are. Two threads would race each other.
fn spawn_pair_reader(
    a: std::io::PipeReader,
    b: std::io::PipeReader,
    tx: crossbeam_channel::Sender<Vec<u8>>,
) {
    use std::os::fd::AsRawFd;
    std::thread::spawn(move || {
        let mut pipes = [Some(a), Some(b)];
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let mut fds: Vec<PollFd> = pipes
                .iter()
                .map(|p| PollFd {
                    fd: p.as_ref().map_or(-1, |r| r.as_raw_fd()),
                    events: POLLIN,
                    revents: 0,
                })
                .collect();
            if fds.iter().all(|f| f.fd < 0) {
                break;
            }
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for the whole call;
            // negative fds are ignored by poll(2).
            let n = unsafe { poll(fds.as_mut_ptr(), fds.len() as NFds, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            for (i, f) in fds.iter().enumerate() {
                if f.revents & (POLLIN | POLLHUP | POLLERR) == 0 {
                    continue;
                }
                let Some(r) = pipes[i].as_mut() else { continue };
                match r.read(&mut buf) {
                    Ok(0) => pipes[i] = None,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => pipes[i] = None,
                }
            }
        }
    });
}

/// SIGKILL the child's process group (its pid is the group id), falling back to the child alone.
pub fn kill_group(child: &Child) {
    let Ok(pid) = i32::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers; a stale group id fails with ESRCH and does nothing.
    unsafe {
        if kill(-pid, SIGKILL) != 0 {
            kill(pid, SIGKILL);
        }
    }
}

/// The rolling output buffer with spill-over to a temp file.
struct OutputBuffer<'a> {
    sanitize: bool,
    counting: super::truncate::LineCounting,
    on_text: Option<&'a (dyn Fn(&str) + Sync)>,
    /// Incomplete UTF-8 sequence carried to the next chunk.
    pending: Vec<u8>,
    chunks: VecDeque<String>,
    buffered: usize,
    raw_total: usize,
    file: Option<(PathBuf, File)>,
    /// Bytes of the current (last) line of the whole output.
    last_line_bytes: usize,
    /// Bytes and `\n`s of the whole (decoded, sanitised) output, not only of the buffered tail:
    /// the totals a truncation reports.
    text_bytes: usize,
    newlines: usize,
}

impl<'a> OutputBuffer<'a> {
    fn new(sanitize: bool) -> OutputBuffer<'a> {
        OutputBuffer {
            sanitize,
            counting: Default::default(),
            on_text: None,
            pending: Vec::new(),
            chunks: VecDeque::new(),
            buffered: 0,
            raw_total: 0,
            file: None,
            last_line_bytes: 0,
            text_bytes: 0,
            newlines: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.raw_total += data.len();
        self.pending.extend_from_slice(data);
        let cut = utf8_complete_prefix(&self.pending);
        let rest = self.pending.split_off(cut);
        let bytes = std::mem::replace(&mut self.pending, rest);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        self.add_text(text);
    }

    fn finish(&mut self) {
        if !self.pending.is_empty() {
            let bytes = std::mem::take(&mut self.pending);
            self.add_text(String::from_utf8_lossy(&bytes).into_owned());
        }
    }

    fn add_text(&mut self, text: String) {
        let text = if self.sanitize { sanitize(&text) } else { text };
        if text.is_empty() {
            return;
        }
        if let Some(f) = self.on_text {
            f(&text);
        }
        match text.rfind('\n') {
            Some(i) => self.last_line_bytes = text.len() - i - 1,
            None => self.last_line_bytes += text.len(),
        }
        self.text_bytes += text.len();
        self.newlines += text.bytes().filter(|&b| b == b'\n').count();
        if self.file.is_none() && self.raw_total > DEFAULT_MAX_BYTES {
            self.open_file();
        }
        if let Some((_, f)) = self.file.as_mut() {
            let _ = f.write_all(text.as_bytes());
        }
        self.buffered += text.len();
        self.chunks.push_back(text);
        while self.buffered > ROLLING_BUFFER_BYTES && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.buffered -= old.len();
            }
        }
    }

    /// Create the temp file and write what the buffer holds so far.
    fn open_file(&mut self) {
        if let Some((path, mut f)) = create_temp_log() {
            for c in &self.chunks {
                let _ = f.write_all(c.as_bytes());
            }
            self.file = Some((path, f));
        }
    }

    fn file_path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(p, _)| p.as_path())
    }

    fn joined(&self) -> String {
        let mut s = String::with_capacity(self.buffered);
        for c in &self.chunks {
            s.push_str(c);
        }
        s
    }

    fn snapshot(&self) -> Truncation {
        self.truncate(&self.joined(), self.counting)
    }

    /// The tail of the buffered `text`, with the totals of the whole output (the buffer may
    /// hold only its last part): 100 MB of output is `total_bytes` 100,000,000.
    fn truncate(&self, text: &str, counting: super::truncate::LineCounting) -> Truncation {
        use super::truncate::LineCounting;
        let mut t = super::truncate::truncate_tail_counting(
            text,
            DEFAULT_MAX_LINES,
            DEFAULT_MAX_BYTES,
            counting,
        );
        t.total_bytes = self.text_bytes;
        t.total_lines = match counting {
            LineCounting::Split => self.newlines + 1,
            // No line for the empty piece after a final newline (`last_line_bytes` is 0 then).
            LineCounting::IgnoreFinalNewline => {
                self.newlines + usize::from(self.last_line_bytes > 0)
            }
        };
        t
    }

    fn into_outcome(
        mut self,
        exit_code: Option<i32>,
        cancelled: bool,
        timed_out: bool,
    ) -> CommandOutcome {
        let raw_output = self.joined();
        let truncation = self.truncate(&raw_output, self.counting);
        // A truncated result always points at a file holding the whole output.
        if truncation.truncated && self.file.is_none() {
            self.open_file();
        }
        let full_output_path = self.file.take().map(|(p, mut f)| {
            let _ = f.flush();
            p
        });
        CommandOutcome {
            exit_code,
            signal: None,
            cancelled,
            timed_out,
            output: truncation.content.clone(),
            raw_output,
            truncated: truncation.truncated,
            total_lines: truncation.total_lines,
            total_bytes: truncation.total_bytes,
            output_lines: truncation.output_lines,
            output_bytes: truncation.output_bytes,
            truncation,
            full_output_path,
            last_line_bytes: self.last_line_bytes,
        }
    }
}

/// Length of the longest prefix that does not end inside a UTF-8 sequence.
fn utf8_complete_prefix(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=3.min(n) {
        let byte = b[n - back];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: look further back for the lead byte
        }
        let need = if byte >= 0xF0 {
            4
        } else if byte >= 0xE0 {
            3
        } else if byte >= 0xC0 {
            2
        } else {
            1
        };
        return if need > back { n - back } else { n };
    }
    n
}

/// `<tmpdir>/pi-bash-<16 hex>.log`, created exclusively.
fn create_temp_log() -> Option<(PathBuf, File)> {
    let dir = std::env::temp_dir();
    for attempt in 0..8u64 {
        let path = dir.join(format!("pi-bash-{}.log", random_hex(attempt)));
        if let Ok(f) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            return Some((path, f));
        }
    }
    None
}

/// 16 hex characters from /dev/urandom (time and pid as a fallback).
pub(crate) fn random_hex(salt: u64) -> String {
    let mut bytes = [0u8; 8];
    let ok = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mixed =
            t ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        bytes = mixed.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The RPC `bash` sanitiser: strip ANSI escape sequences, control characters other than tab
/// and newline, U+FFF9–U+FFFB, and every `\r`.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\u{9b}' => skip_csi(&mut chars),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {}
            '\u{fff9}'..='\u{fffb}' => {}
            c => out.push(c),
        }
    }
    out
}

fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars>) {
    match chars.peek() {
        Some('[') => {
            chars.next();
            skip_csi(chars);
        }
        Some(']') => {
            // OSC: up to BEL or ESC \
            chars.next();
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                    }
                    break;
                }
            }
        }
        Some('(' | ')' | '#' | '%') => {
            chars.next();
            chars.next();
        }
        Some(_) => {
            chars.next();
        }
        None => {}
    }
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars>) {
    // parameters and intermediates, then one final byte in @..~
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_strips_ansi_and_cr() {
        assert_eq!(sanitize("\u{1b}[31mred\u{1b}[0m\r\n"), "red\n");
        assert_eq!(sanitize("a\u{7}b\tc\u{fffa}"), "ab\tc");
        assert_eq!(sanitize("\u{1b}]0;title\u{7}x"), "x");
    }

    #[test]
    fn utf8_prefix_keeps_partial_sequences() {
        let e = "é".as_bytes();
        assert_eq!(utf8_complete_prefix(&[b'a', e[0]]), 1);
        assert_eq!(utf8_complete_prefix(&[b'a', e[0], e[1]]), 3);
        let euro = "€".as_bytes();
        assert_eq!(utf8_complete_prefix(&euro[..2]), 0);
    }

    #[test]
    fn split_utf8_across_chunks_decodes() {
        let mut b = OutputBuffer::new(false);
        let e = "é".as_bytes();
        b.push(&[b'x', e[0]]);
        b.push(&[e[1], b'\n']);
        b.finish();
        assert_eq!(b.joined(), "xé\n");
    }

    #[test]
    fn rolling_buffer_is_bounded() {
        let mut b = OutputBuffer::new(false);
        let chunk = vec![b'a'; 10_000];
        for _ in 0..30 {
            b.push(&chunk);
        }
        assert!(b.buffered <= ROLLING_BUFFER_BYTES + 10_000);
        let path = b.file_path().map(Path::to_path_buf).unwrap();
        drop(b);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 300_000);
        let _ = std::fs::remove_file(path);
    }
}
