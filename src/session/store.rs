//! Disk side of sessions: reading and migrating JSONL files, writing lines the way the reference
//! does (`JSON.stringify` output, one object per `\n`-terminated line), and finding session files
//! (`--continue`, `--session <path or id prefix>`, the default per-project directory).
//!
//! Writes are small: one `write` of one line per appended entry (the first flush writes the
//! header and the buffered entries in a single `write`). A write that fails part-way is cut back
//! to the last complete line ([`append`]). Whole-file rewrites (migration, a
//! corrupt file replaced by a fresh header) go through a temporary file and a rename.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The session format version pith writes.
pub const CURRENT_VERSION: u64 = 3;

/// Largest session file pith will read (a guard against reading something that is not one).
const MAX_FILE_BYTES: u64 = 1 << 30;

pub use crate::json::{JsFormatter, js_number};

/// One JSON object as a file line (without the trailing newline).
pub fn to_line(obj: &Map<String, Value>) -> String {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, JsFormatter);
    // Serialising a Map of Values into memory cannot fail.
    if serde::Serialize::serialize(obj, &mut ser).is_err() {
        return "{}".into();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// What [`read_file`] found.
pub struct RawFile {
    /// Parsed objects in file order; the first is the header (`type: "session"`, string `id`).
    pub objects: Vec<Map<String, Value>>,
    /// Problems worth a line on stderr (skipped lines, a cut last line).
    pub warnings: Vec<String>,
    /// The file does not end with `\n`: the next append must start a new line first.
    pub needs_newline: bool,
}

/// What [`read_objects`] reports besides the objects it handed out.
pub struct ReadReport {
    /// Problems worth a line on stderr (skipped lines, a cut last line).
    pub warnings: Vec<String>,
    /// The file does not end with `\n`: the next append must start a new line first.
    pub needs_newline: bool,
}

/// Read a session file: one JSON object per line, unparsable lines skipped with a warning.
/// Errors when the file cannot be read or holds no valid header line.
pub fn read_file(path: &Path) -> Result<RawFile, String> {
    let mut objects = Vec::new();
    let report = read_objects(path, |obj| objects.push(obj))?;
    Ok(RawFile {
        objects,
        warnings: report.warnings,
        needs_newline: report.needs_newline,
    })
}

/// Stream a session file line by line, handing each parsed object to `each` in file order (the
/// first one is the header), so only one line is in memory at a time. Unparsable lines are
/// skipped with a warning (an unparsable last line cut by a crash gets its own wording). Errors
/// when the file cannot be read or its first object is not a valid header.
pub fn read_objects(
    path: &Path,
    mut each: impl FnMut(Map<String, Value>),
) -> Result<ReadReport, String> {
    read_lines(
        path,
        &mut |line: &[u8], first| match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(obj)) => {
                if first && !is_header(&obj) {
                    return LineRead::NotHeader;
                }
                each(obj);
                LineRead::Object
            }
            _ => LineRead::Unparsable,
        },
    )
}

/// What the reader of [`read_lines`] made of one line.
pub enum LineRead {
    /// A JSON object, taken.
    Object,
    /// The first object is not a session header: the file is refused.
    NotHeader,
    /// Not a JSON object: skipped with a warning.
    Unparsable,
}

/// What [`read_lines`] hands the lines of a file to, with what a `prepare` stage made of each
/// (`P`; nothing for [`read_lines`]).
pub trait LineSink<P = ()> {
    /// A non-blank line (with its `\n`, if any), whether no object was taken yet, its offset in
    /// the file, and what `prepare` made of it. The sink parses it as it likes (the session
    /// loader's fast path keeps canonical lines without building a `Value`).
    fn line(&mut self, line: &[u8], first: bool, at: u64, prepared: P) -> LineRead;

    /// A line that [`LineSink::line`] found unparsable, before the complete object that may be
    /// glued onto its end is offered to [`LineSink::fragment`].
    fn damaged(&mut self, _line: &[u8]) {}

    /// The part of a damaged line from a `{"type":"` on: take it only if it is a complete object
    /// of the file's kind (an entry), not a piece of the damaged one.
    fn fragment(&mut self, part: &[u8], first: bool) -> bool;
}

impl<F: FnMut(&[u8], bool) -> LineRead> LineSink for F {
    fn line(&mut self, line: &[u8], first: bool, _at: u64, (): ()) -> LineRead {
        self(line, first)
    }

    fn fragment(&mut self, part: &[u8], first: bool) -> bool {
        matches!(self(part, first), LineRead::Object)
    }
}

/// The loop under [`read_objects`]: hands each non-blank line to `sink`. A line that does not
/// parse may be the torn end of a cut write with a complete entry glued onto it (a writer that
/// did not start the next line on a fresh one): that entry is kept (see `repair.rs`). Warnings
/// and errors as [`read_objects`].
pub fn read_lines(path: &Path, sink: &mut impl LineSink) -> Result<ReadReport, String> {
    let file = open_regular(path)?;
    read_lines_from(&file, path, &|_, _| (), sink, 0)
}

/// Open a session file for reading, refusing anything but a regular file: a device would be
/// read without end (`/dev/zero`), a FIFO would block the open itself. Looks before opening,
/// and again at what was opened.
pub fn open_regular(path: &Path) -> Result<fs::File, String> {
    let shown = path.display();
    let regular = |m: &fs::Metadata| m.is_file();
    if fs::metadata(path).is_ok_and(|m| !regular(&m)) {
        return Err(format!("Session file {shown} is not a regular file"));
    }
    let file =
        fs::File::open(path).map_err(|e| format!("Cannot open session file {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("Cannot read session file {shown}: {e}"))?;
    if !regular(&meta) {
        return Err(format!("Session file {shown} is not a regular file"));
    }
    Ok(file)
}

/// Bytes read from the file at a time (a batch of whole lines).
const READ_CHUNK: usize = 256 * 1024;

/// Files larger than this are prepared on more than one thread ([`read_lines_from`]).
const PARALLEL_ABOVE: u64 = 2 * 1024 * 1024;

/// At most this many threads help the calling one prepare a large file.
const MAX_HELPERS: usize = 3;

/// How many helper threads a file of `len` bytes is worth: none up to [`PARALLEL_ABOVE`], else one
/// fewer than the cores this process may use (the calling thread is the other), at most
/// [`MAX_HELPERS`]. Whether they get to run is the allocator's say (`crate::malloc`): helpers
/// that share one `malloc` lock with the calling thread are slower than none.
pub fn helpers_for(len: u64) -> usize {
    if len > PARALLEL_ABOVE {
        std::thread::available_parallelism().map_or(0, |n| (n.get() - 1).min(MAX_HELPERS))
    } else {
        0
    }
}

/// Batches read ahead of the one the calling thread adds next.
const AHEAD: usize = 6;

/// [`read_lines`] over a file already open ([`open_regular`]; `path` names it in messages),
/// with a stage that runs first on every non-blank line, possibly on another thread and out of
/// order: `prepare(line, offset)` (the session loader parses entries there). `sink` then gets
/// the lines in file order with what `prepare` made of them. The file is read in batches of
/// lines that `helpers` scoped threads ([`helpers_for`]; none for a small file) and the calling
/// thread prepare, whichever is free taking the next (the parse of a long session is most of
/// resuming it); `sink` runs on the calling thread only.
pub fn read_lines_from<P: Send>(
    file: &fs::File,
    path: &Path,
    prepare: &(dyn Fn(&[u8], u64) -> P + Sync),
    sink: &mut impl LineSink<P>,
    helpers: usize,
) -> Result<ReadReport, String> {
    let shown = path.display();
    let len = file
        .metadata()
        .map_err(|e| format!("Cannot read session file {shown}: {e}"))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(format!("Session file {shown} is too large ({len} bytes)"));
    }
    let mut lines = Lines {
        shown: shown.to_string(),
        warnings: Vec::new(),
        needs_newline: false,
        seen_object: false,
        failed_line: None,
        number: 0,
    };
    let mut batches = Batches {
        file: file.take(MAX_FILE_BYTES),
        carry: Vec::new(),
        offset: 0,
        done: false,
        spare: Vec::new(),
    };
    let read_error = |e: std::io::Error| format!("Cannot read session file {shown}: {e}");
    let stopped = || format!("Cannot read session file {shown}: the reading thread stopped");
    let helpers = helpers.min(MAX_HELPERS);
    let no_header = std::thread::scope(|scope| -> Result<bool, String> {
        // Batches read and not yet prepared, numbered in file order; any helper takes the next
        // one, and so does the calling thread whenever the batch it must add next is not ready:
        // no fixed share, so a thread the scheduler holds back (a busy machine) does not hold
        // the others up.
        let (todo_tx, todo_rx) = crossbeam_channel::bounded::<(usize, Batch)>(AHEAD);
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<(usize, Batch, Vec<P>)>();
        let mut started = 0;
        for _ in 0..helpers {
            let (todo, done) = (todo_rx.clone(), done_tx.clone());
            let spawned = std::thread::Builder::new()
                .name("session-load".into())
                .stack_size(crate::THREAD_STACK)
                .spawn_scoped(scope, move || {
                    for (seq, b) in todo {
                        let p = b.prepare(prepare);
                        if done.send((seq, b, p)).is_err() {
                            break;
                        }
                    }
                });
            started += usize::from(spawned.is_ok());
        }
        drop(done_tx);
        // Prepared batches that came back before their turn, by number.
        let mut ready: std::collections::HashMap<usize, (Batch, Vec<P>)> =
            std::collections::HashMap::new();
        let (mut read, mut taken, mut at_end) = (0usize, 0usize, false);
        loop {
            // Keep up to AHEAD batches read ahead.
            while !at_end && read - taken < AHEAD {
                match batches.next().map_err(read_error)? {
                    Some(b) if started > 0 => {
                        todo_tx.send((read, b)).map_err(|_| stopped())?;
                        read += 1;
                    }
                    Some(b) => {
                        let p = b.prepare(prepare);
                        ready.insert(read, (b, p));
                        read += 1;
                    }
                    None => at_end = true,
                }
            }
            if taken == read {
                break;
            }
            let (b, p) = loop {
                if let Some(x) = ready.remove(&taken) {
                    break x;
                }
                if let Ok((seq, b, p)) = done_rx.try_recv() {
                    ready.insert(seq, (b, p));
                } else if let Ok((seq, b)) = todo_rx.try_recv() {
                    let p = b.prepare(prepare);
                    ready.insert(seq, (b, p));
                } else {
                    // Every batch up to this one is with a helper: wait for one to come back.
                    let (seq, b, p) = done_rx.recv().map_err(|_| stopped())?;
                    ready.insert(seq, (b, p));
                }
            };
            taken += 1;
            if lines.take(&b, p, sink) {
                return Ok(true);
            }
            batches.recycle(b);
        }
        Ok(false)
    })?;
    let no_header_text = || {
        format!(
            "Cannot load session file {shown}: no valid session header (first line must be a JSON object with \"type\":\"session\" and a string \"id\")"
        )
    };
    if no_header {
        return Err(no_header_text());
    }
    let mut warnings = lines.warnings;
    if let Some(n) = lines.failed_line {
        warnings.push(if lines.needs_newline {
            format!("session file {shown}: dropped an incomplete last line (line {n})")
        } else {
            format!("session file {shown}: skipped unparsable line {n}")
        });
    }
    if !lines.seen_object {
        return Err(no_header_text());
    }
    Ok(ReadReport {
        warnings,
        needs_newline: lines.needs_newline,
    })
}

/// Whole lines of a file (the last may lack its `\n`), starting at `start`.
struct Batch {
    start: u64,
    bytes: Vec<u8>,
}

impl Batch {
    /// Each line with its `\n` (if any) and its offset in the file.
    fn lines(&self) -> impl Iterator<Item = (&[u8], u64)> {
        let mut rest: &[u8] = &self.bytes;
        let mut at = self.start;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let end = super::line::find_newline(rest).map_or(rest.len(), |i| i + 1);
            let (line, tail) = rest.split_at(end);
            rest = tail;
            let here = at;
            at += end as u64;
            Some((line, here))
        })
    }

    fn prepare<P>(&self, prepare: &(dyn Fn(&[u8], u64) -> P + Sync)) -> Vec<P> {
        // Room for lines of 512 bytes on average (a long session's are longer), so the vector
        // is not grown from four slots by doubling, copying its entries at every step; counting
        // the lines first would cost more than that.
        let mut out = Vec::with_capacity(self.bytes.len() / 512 + 8);
        out.extend(
            self.lines()
                .filter(|(l, _)| !l.trim_ascii().is_empty())
                .map(|(l, at)| prepare(l, at)),
        );
        out
    }
}

/// Reads a file in batches of whole lines.
struct Batches<R> {
    file: R,
    /// The start of a line cut by the end of the last read.
    carry: Vec<u8>,
    /// Offset of `carry` in the file.
    offset: u64,
    done: bool,
    /// Buffers of batches already taken, read into again: a long session is read through a
    /// handful of buffers instead of one fresh allocation per batch (each a few hundred pages
    /// the kernel would have to fault in and clear again).
    spare: Vec<Vec<u8>>,
}

impl<R: Read> Batches<R> {
    /// Hand a batch's buffer back once its lines are taken.
    fn recycle(&mut self, batch: Batch) {
        let mut bytes = batch.bytes;
        if bytes.capacity() <= 2 * READ_CHUNK {
            bytes.clear();
            self.spare.push(bytes);
        }
    }

    fn next(&mut self) -> std::io::Result<Option<Batch>> {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.extend_from_slice(&self.carry);
        self.carry.clear();
        loop {
            if !self.done {
                let want = READ_CHUNK.saturating_sub(bytes.len()).max(READ_CHUNK / 4);
                // One allocation per batch (`read_to_end` would grow it step by step).
                bytes.reserve_exact(want + 1);
                let n = (&mut self.file).take(want as u64).read_to_end(&mut bytes)?;
                self.done = n == 0;
            }
            match bytes.iter().rposition(|&c| c == b'\n') {
                Some(last) if !self.done => {
                    self.carry.extend_from_slice(&bytes[last + 1..]);
                    bytes.truncate(last + 1);
                    break;
                }
                // A line longer than what was read so far: read on.
                None if !self.done => continue,
                _ => break,
            }
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        let batch = Batch {
            start: self.offset,
            bytes,
        };
        self.offset += batch.bytes.len() as u64;
        Ok(Some(batch))
    }
}

/// The line-by-line bookkeeping of [`read_lines_from`], in file order.
struct Lines {
    /// The file, as warnings name it.
    shown: String,
    /// Warnings about lines followed by more lines.
    warnings: Vec<String>,
    needs_newline: bool,
    seen_object: bool,
    /// The latest non-empty line, when it did not parse: its warning depends on what follows.
    failed_line: Option<usize>,
    number: usize,
}

impl Lines {
    /// Hand a batch's lines to `sink`; `true` when the file has no header.
    fn take<P>(&mut self, batch: &Batch, prepared: Vec<P>, sink: &mut impl LineSink<P>) -> bool {
        let mut prepared = prepared.into_iter();
        for (line, at) in batch.lines() {
            self.number += 1;
            self.needs_newline = !line.ends_with(b"\n");
            // What `prepare` made of the line (it saw every line that is not blank as it is).
            if line.trim_ascii().is_empty() {
                continue;
            }
            let Some(p) = prepared.next() else {
                continue;
            };
            let (line, at) = match line.strip_prefix(BOM) {
                Some(rest) if self.number == 1 => (rest, at + BOM.len() as u64),
                _ => (line, at),
            };
            if line.trim_ascii().is_empty() {
                continue;
            }
            if let Some(n) = self.failed_line.take() {
                let shown = &self.shown;
                self.warnings
                    .push(format!("session file {shown}: skipped unparsable line {n}"));
            }
            match sink.line(line, !self.seen_object, at, p) {
                LineRead::Object => self.seen_object = true,
                LineRead::NotHeader => return true,
                LineRead::Unparsable => {
                    sink.damaged(line);
                    let glued = super::repair::object_starts(line)
                        .find(|&from| sink.fragment(&line[from..], !self.seen_object));
                    match glued {
                        Some(_) => {
                            self.seen_object = true;
                            self.warnings.push(format!(
                                "session file {}: line {} starts with a cut entry; kept the complete entry after it",
                                self.shown, self.number
                            ));
                        }
                        None => self.failed_line = Some(self.number),
                    }
                }
            }
        }
        false
    }
}

/// A UTF-8 byte-order mark, which some editors put at the start of a file: skipped there, as pi's
/// reader does (JavaScript's `trim` counts it as whitespace).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `{type: "session", id: <string>}`.
pub fn is_header(obj: &Map<String, Value>) -> bool {
    obj.get("type").and_then(Value::as_str) == Some("session")
        && obj.get("id").is_some_and(Value::is_string)
}

/// Bring objects (header first) to version 3 in place (spec 11.6). Returns whether anything
/// changed (the caller then rewrites the file).
///
/// - v1 (no `version`) → v2: fresh ids, a linear `parentId` chain, `firstKeptEntryIndex` (an
///   index into the file's lines, header included) → `firstKeptEntryId`.
/// - v2 → v3: message role `hookMessage` → `custom`.
pub fn migrate(
    objects: &mut [Map<String, Value>],
    mut new_id: impl FnMut(&dyn Fn(&str) -> bool) -> String,
) -> bool {
    let Some(header) = objects.first() else {
        return false;
    };
    let version = header.get("version").and_then(Value::as_u64).unwrap_or(1);
    if version >= CURRENT_VERSION {
        return false;
    }
    if version < 2 {
        let mut taken = std::collections::HashSet::new();
        let mut prev: Option<String> = None;
        for obj in objects.iter_mut().skip(1) {
            let id = new_id(&|candidate| taken.contains(candidate));
            taken.insert(id.clone());
            obj.insert("id".into(), Value::String(id.clone()));
            obj.insert("parentId".into(), prev.map_or(Value::Null, Value::String));
            prev = Some(id);
        }
        for i in 1..objects.len() {
            let index = objects[i]
                .get("firstKeptEntryIndex")
                .and_then(Value::as_u64);
            let Some(index) = index else { continue };
            let target = objects
                .get(index as usize)
                .filter(|o| !is_header(o))
                .and_then(|o| o.get("id").cloned());
            if let Some(id) = target {
                objects[i].insert("firstKeptEntryId".into(), id);
            }
            objects[i].shift_remove("firstKeptEntryIndex");
        }
    }
    for obj in objects.iter_mut().skip(1) {
        let is_message = obj.get("type").and_then(Value::as_str) == Some("message");
        if let Some(Value::Object(m)) = obj.get_mut("message").filter(|_| is_message) {
            if m.get("role").and_then(Value::as_str) == Some("hookMessage") {
                m.insert("role".into(), Value::String("custom".into()));
            }
        }
    }
    if let Some(header) = objects.first_mut() {
        header.insert("version".into(), Value::from(CURRENT_VERSION));
    }
    true
}

/// A failed [`append`].
#[derive(Debug)]
pub struct AppendError {
    /// What went wrong, for stderr and the `session_write_error` event.
    pub message: String,
    /// Part of the text stayed in the file and could not be cut off again: the file now ends in
    /// a torn line, so the next write must start on a fresh line.
    pub torn: bool,
}

/// Append `text` (whole lines, `\n`-terminated) to `path`, creating the file and its directory.
/// When the file does not end with `\n` (a line cut by a crash, by another program, or by an
/// earlier failed write that could not be undone; `fresh_line` says the caller knows it is), a
/// `\n` goes first so the text starts on a line of its own. A write that fails part-way (a full
/// disk, a file size limit) never leaves half a line behind for the next append to be glued
/// onto: the file is cut back to its length before the write, and when even that fails the
/// error says the file is torn. Returns the offset of `text` in the file (entries remember it
/// to read their lines back instead of keeping them; another writer appending at the same
/// moment would make it wrong, and reading back notices that: `stored.rs`).
pub fn append(path: &Path, text: &str, fresh_line: bool) -> Result<u64, AppendError> {
    let fail = |message: String| AppendError {
        message,
        torn: false,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .map_err(|e| fail(format!("Cannot create {}: {e}", dir.display())))?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| fail(format!("Cannot open {} for appending: {e}", path.display())))?;
    let before = f
        .metadata()
        .map_err(|e| fail(format!("Cannot write {}: {e}", path.display())))?
        .len();
    let newline: &[u8] = if before > 0 && ends_mid_line(&f, before).unwrap_or(fresh_line) {
        b"\n"
    } else {
        b""
    };
    let mut written = 0u64;
    let mut result = Ok(());
    for part in [newline, text.as_bytes()] {
        if let Err(e) = write_counting(&mut f, part, &mut written) {
            result = Err(e);
            break;
        }
    }
    let Err(e) = result else {
        return Ok(before + newline.len() as u64);
    };
    let message = format!("Cannot write {}: {e}", path.display());
    if written == 0 {
        return Err(fail(message));
    }
    // Cut the partial write off again, but only if the file holds exactly what was there plus
    // what this call wrote (never cut another writer's lines).
    let cut = f.metadata().is_ok_and(|m| m.len() == before + written) && f.set_len(before).is_ok();
    Err(AppendError {
        message,
        torn: !cut,
    })
}

/// Whether the file's last byte (at `len - 1`) is something else than `\n`; `None` when it
/// cannot be read.
fn ends_mid_line(f: &fs::File, len: u64) -> Option<bool> {
    use std::os::unix::fs::FileExt;
    let mut last = [0u8];
    match f.read_at(&mut last, len.checked_sub(1)?) {
        Ok(1) => Some(last[0] != b'\n'),
        _ => None,
    }
}

/// `write_all` that counts what reached the file, so a failure part-way can be undone.
fn write_counting(f: &mut fs::File, mut buf: &[u8], written: &mut u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match f.write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *written += n as u64;
                buf = &buf[n..];
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Replace `path` with `text` atomically (temporary file in the same directory, then rename).
pub fn rewrite(path: &Path, text: &str) -> Result<(), String> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|e| format!("Cannot create {}: {e}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .map_err(|e| format!("Cannot create a temporary file in {}: {e}", dir.display()))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
    tmp.persist(path)
        .map(|_| ())
        .map_err(|e| format!("Cannot replace {}: {e}", path.display()))
}

/// `<agent_dir>/sessions/--<cwd without leading separator, / \ : replaced by ->--/`.
pub fn default_session_dir(agent_dir: &Path, cwd: &str) -> PathBuf {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    let safe: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    agent_dir.join("sessions").join(format!("--{safe}--"))
}

/// The file name of a new session: ISO timestamp with `:` and `.` replaced by `-`, then the id.
pub fn session_file_name(iso_timestamp: &str, session_id: &str) -> String {
    let ts: String = iso_timestamp
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .collect();
    format!("{ts}_{session_id}.jsonl")
}

/// The header of a file if its first line (read up to 64 KiB) is a valid session header.
pub fn read_header(path: &Path) -> Option<Map<String, Value>> {
    let f = fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(f.take(64 * 1024))
        .read_until(b'\n', &mut line)
        .ok()?;
    let line = line.strip_prefix(BOM).unwrap_or(&line);
    match serde_json::from_slice::<Value>(line.trim_ascii()) {
        Ok(Value::Object(obj)) if is_header(&obj) => Some(obj),
        _ => None,
    }
}

fn session_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect()
}

/// `--continue`: the most recently modified (mtime) valid session file in `dir`.
pub fn find_most_recent(dir: &Path) -> Option<PathBuf> {
    session_files(dir)
        .into_iter()
        .filter(|p| read_header(p).is_some())
        .filter_map(|p| {
            let mtime = fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((mtime, p))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
        .map(|(_, p)| p)
}

/// When a session was last active: the latest user/assistant message timestamp, else the
/// header timestamp, else the file's mtime (ms).
pub fn modified_ms(path: &Path) -> u64 {
    let mtime = || {
        fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64)
    };
    let mut header_ms = None;
    let mut first = true;
    let mut latest = 0u64;
    let read = read_objects(path, |obj| {
        if std::mem::take(&mut first) {
            header_ms = obj
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(super::ids::parse_iso_ms);
        } else {
            latest = latest.max(message_ms(&obj).unwrap_or(0));
        }
    });
    if read.is_err() {
        return mtime();
    }
    if latest > 0 {
        return latest;
    }
    header_ms.unwrap_or_else(mtime)
}

/// The time of a user/assistant `message` entry: its message's `timestamp`, else the entry's.
/// `None` for other entries (and when neither timestamp is usable).
fn message_ms(obj: &Map<String, Value>) -> Option<u64> {
    if obj.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let msg = obj.get("message")?;
    let role = msg.get("role").and_then(Value::as_str);
    if !matches!(role, Some("user" | "assistant")) || msg.get("content").is_none() {
        return None;
    }
    msg.get("timestamp").and_then(Value::as_u64).or_else(|| {
        obj.get("timestamp")
            .and_then(Value::as_str)
            .and_then(super::ids::parse_iso_ms)
    })
}

/// `--session <arg>`: a path when `arg` contains `/` or `\` or ends with `.jsonl` (returned as
/// given; it may not exist yet), else the newest-modified session in `dir` whose id starts with
/// `arg`. No match: `No session found matching '<arg>'` (searching other projects is the
/// caller's business).
pub fn resolve_session_arg(arg: &str, dir: &Path) -> Result<PathBuf, String> {
    if arg.contains(['/', '\\']) || arg.ends_with(".jsonl") {
        return Ok(PathBuf::from(arg));
    }
    session_files(dir)
        .into_iter()
        .filter(|p| {
            read_header(p)
                .and_then(|h| {
                    h.get("id")
                        .and_then(Value::as_str)
                        .map(|id| id.starts_with(arg))
                })
                .unwrap_or(false)
        })
        .map(|p| (modified_ms(&p), p))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
        .map(|(_, p)| p)
        .ok_or_else(|| format!("No session found matching '{arg}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_javascript() {
        let cases = [
            (0.00003, "0.00003"),
            (0.00030000000000000003, "0.00030000000000000003"),
            (0.00033000000000000005, "0.00033000000000000005"),
            (3.0, "3"),
            (0.3, "0.3"),
            (3.75, "3.75"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (1e20, "100000000000000000000"),
            (-2.5, "-2.5"),
            (123456.789, "123456.789"),
            (0.935, "0.935"),
            (f64::NAN, "null"),
        ];
        for (v, want) in cases {
            assert_eq!(js_number(v), want, "{v}");
        }
    }

    #[test]
    fn cwd_encoding_matches_reference() {
        let d = default_session_dir(Path::new("/root/.pi/agent"), "/tmp/pitest/work");
        assert_eq!(
            d,
            PathBuf::from("/root/.pi/agent/sessions/--tmp-pitest-work--")
        );
        let d = default_session_dir(Path::new("/a"), "C:\\x\\y");
        assert_eq!(d, PathBuf::from("/a/sessions/--C--x-y--"));
    }

    #[test]
    fn file_name_from_timestamp() {
        assert_eq!(
            session_file_name("2026-11-21T22:10:33.616Z", "49b5"),
            "2026-11-21T22-10-33-616Z_49b5.jsonl"
        );
    }

    #[test]
    fn v1_migration_links_entries_and_converts_index() {
        let lines = [
            r#"{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"a","timestamp":1}}"#,
            r#"{"type":"message","timestamp":"t","message":{"role":"hookMessage","customType":"x","content":"h","display":true,"timestamp":2}}"#,
            r#"{"type":"compaction","timestamp":"t","summary":"S","firstKeptEntryIndex":2,"tokensBefore":5}"#,
        ];
        let mut objs: Vec<Map<String, Value>> = lines
            .iter()
            .map(|l| match serde_json::from_str(l).unwrap() {
                Value::Object(m) => m,
                _ => unreachable!(),
            })
            .collect();
        let mut n = 0;
        let changed = migrate(&mut objs, |_| {
            n += 1;
            format!("id{n}")
        });
        assert!(changed);
        assert_eq!(objs[0]["version"], 3);
        assert_eq!(objs[1]["id"], "id1");
        assert_eq!(objs[1]["parentId"], Value::Null);
        assert_eq!(objs[2]["parentId"], "id1");
        assert_eq!(objs[2]["message"]["role"], "custom");
        assert_eq!(objs[3]["firstKeptEntryId"], "id2");
        assert!(objs[3].get("firstKeptEntryIndex").is_none());
        assert!(!migrate(&mut objs, |_| unreachable!()));
    }

    #[test]
    fn streaming_read_reports_bad_lines_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let text = concat!(
            "not json\n",
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
            "\n\n[1]\n",
            r#"{"type":"message","id":"a","parentId":null}"#,
            "\n",
            r#"{"type":"mess"#,
            "\n  ",
        );
        fs::write(&path, text).unwrap();
        let mut ids = Vec::new();
        let report = read_objects(&path, |o| ids.push(o["id"].as_str().unwrap().to_string()));
        let report = report.unwrap();
        assert_eq!(ids, ["s", "a"]);
        assert!(report.needs_newline);
        let shown = path.display();
        assert_eq!(
            report.warnings,
            [
                format!("session file {shown}: skipped unparsable line 1"),
                format!("session file {shown}: skipped unparsable line 4"),
                format!("session file {shown}: dropped an incomplete last line (line 6)"),
            ]
        );
        fs::write(&path, &text[..text.len() - 2]).unwrap();
        let report = read_objects(&path, |_| {}).unwrap();
        assert!(!report.needs_newline);
        assert_eq!(
            report.warnings[2],
            format!("session file {shown}: skipped unparsable line 6")
        );
        fs::write(&path, "{\"type\":\"message\",\"id\":\"a\"}\n").unwrap();
        assert!(read_objects(&path, |_| {}).is_err());
    }

    #[test]
    fn large_files_are_prepared_on_three_threads_and_taken_in_order() {
        // Over the parallel threshold, with blank lines, garbage, a line longer than a read,
        // and a last line without its newline; every line must reach `each` in order, at its
        // offset, with what `prepare` made of that very line.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut text = String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n");
        let long = "x".repeat(READ_CHUNK + 1000);
        let mut i = 0;
        while (text.len() as u64) < PARALLEL_ABOVE * 2 {
            match i % 97 {
                13 => text.push('\n'),
                29 => text.push_str("garbage\n"),
                71 if i == 71 => text.push_str(&format!("{{\"long\":\"{long}\"}}\n")),
                _ => text.push_str(&format!("{{\"type\":\"message\",\"id\":\"{i}\"}}\n")),
            }
            i += 1;
        }
        text.push_str("{\"type\":\"message\",\"id\":\"last\"");
        fs::write(&path, &text).unwrap();
        let file = fs::File::open(&path).unwrap();
        let prepare = |line: &[u8], at: u64| (at, line.len());
        struct Check<'t> {
            text: &'t str,
            seen: Vec<(u64, bool)>,
        }
        impl LineSink<(u64, usize)> for Check<'_> {
            fn line(&mut self, line: &[u8], first: bool, at: u64, p: (u64, usize)) -> LineRead {
                assert_eq!(p, (at, line.len()));
                assert_eq!(
                    &self.text.as_bytes()[at as usize..at as usize + line.len()],
                    line
                );
                self.seen.push((at, first));
                if line.starts_with(b"garbage") || !line.ends_with(b"\n") {
                    LineRead::Unparsable
                } else {
                    LineRead::Object
                }
            }
            fn fragment(&mut self, _: &[u8], _: bool) -> bool {
                false
            }
        }
        let mut check = Check {
            text: &text,
            seen: Vec::new(),
        };
        // Two helpers whatever the machine: the order must not depend on who finishes first.
        let report = read_lines_from(&file, &path, &prepare, &mut check, 2).unwrap();
        let seen = check.seen;
        // The reference: split by hand.
        let mut want = Vec::new();
        let mut at = 0u64;
        let mut garbage = Vec::new();
        for (n, l) in text.split_inclusive('\n').enumerate() {
            if !l.trim().is_empty() {
                want.push((at, want.is_empty()));
                if l.starts_with("garbage") {
                    garbage.push(n + 1);
                }
            }
            at += l.len() as u64;
        }
        assert_eq!(seen, want);
        let shown = path.display();
        let mut warnings: Vec<String> = garbage
            .iter()
            .map(|n| format!("session file {shown}: skipped unparsable line {n}"))
            .collect();
        let lines = text.split_inclusive('\n').count();
        warnings.push(format!(
            "session file {shown}: dropped an incomplete last line (line {lines})"
        ));
        assert_eq!(report.warnings, warnings);
        assert!(report.needs_newline);
    }

    #[test]
    fn a_byte_order_mark_before_the_header_is_skipped_on_both_paths() {
        // A small file (one thread) and one over the parallel threshold: the header is read
        // without the mark, and every line's offset still points at that line.
        for (entries, helpers) in [(3, 0), (40_000, 1)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.jsonl");
            let mut text =
                String::from("\u{feff}{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n");
            for i in 0..entries {
                text.push_str(&format!(
                    "{{\"type\":\"message\",\"id\":\"{i:08}\",\"pad\":\"{}\"}}\n",
                    "x".repeat(40)
                ));
            }
            fs::write(&path, &text).unwrap();
            let file = fs::File::open(&path).unwrap();
            struct Check<'t> {
                text: &'t str,
                n: usize,
            }
            impl LineSink<usize> for Check<'_> {
                fn line(&mut self, line: &[u8], first: bool, at: u64, len: usize) -> LineRead {
                    assert_eq!(line.first(), Some(&b'{'));
                    assert_eq!(first, self.n == 0);
                    let at = at as usize;
                    assert_eq!(&self.text.as_bytes()[at..at + line.len()], line);
                    // `prepare` saw the line as it is in the file, mark included.
                    assert_eq!(len, line.len() + if self.n == 0 { 3 } else { 0 });
                    self.n += 1;
                    LineRead::Object
                }
                fn fragment(&mut self, _: &[u8], _: bool) -> bool {
                    false
                }
            }
            let mut check = Check { text: &text, n: 0 };
            let report =
                read_lines_from(&file, &path, &|l: &[u8], _| l.len(), &mut check, helpers).unwrap();
            assert_eq!(check.n, entries + 1);
            assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        }
    }
}
