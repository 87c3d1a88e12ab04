//! Session persistence: the append-only JSONL tree of a conversation (spec section 11).
//!
//! A [`Session`] holds the header and every entry in file order, an index by id, and the leaf
//! (the entry new entries attach to). Entries keep their raw JSON so unknown types and fields
//! survive; appending never rewrites earlier lines.
//!
//! Flushing follows the reference exactly (spec 11.5): nothing is written until an assistant
//! message exists; then the header and all buffered entries are written at once, and from then on
//! each new entry is appended as one line. A session without a directory is in memory only.
//! A write that fails (full disk, read-only directory) leaves no torn line and loses nothing:
//! the entries wait in memory for the next write ([`WriteNotice`] tells the host).
//!
//! - `entry`: one line, raw plus a parsed view.
//! - `line`, `fastline`: reading a line into the fields the tree needs (by hand for the usual
//!   line, serde for the rest).
//! - `store`: file reading/writing, migrations, locating session files.
//! - `repair`: what a damaged file still holds (entries glued onto cut lines, links over them).
//! - `tree`: branch walking, context reconstruction, statistics.
//! - `export_html`: the self-contained HTML export.
//! - `ids`: UUID v7 session ids, 8-hex entry ids, ISO timestamps.

pub mod entry;
pub mod export_html;
mod fastline;
pub mod ids;
pub mod line;
pub mod projection;
pub mod repair;
mod short;
pub mod store;
pub mod stored;
pub mod tree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::message::{AgentMessage, Context, ThinkingLevel, UserContent};

pub use entry::{Entry, EntryKind};
pub use export_html::export_html;
pub use store::{default_session_dir, find_most_recent, resolve_session_arg};
pub use tree::{ContextUsage, SessionStats, TokenStats, last_assistant_text};

use entry::NewEntry;
use stored::{SessionFile, Stored};

/// The error of `fork` on anything but a user message entry.
pub const INVALID_FORK_ENTRY: &str = "Invalid entry ID for forking";

/// A user message offered for forking (`get_fork_messages`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForkMessage {
    #[serde(rename = "entryId")]
    pub entry_id: String,
    pub text: String,
}

/// One session: header, entries, tree index, leaf, and where (if anywhere) it is written.
/// `Clone`: `export_html` renders a copy on a worker thread (`core/export.rs`).
#[derive(Clone, Debug)]
pub struct Session {
    header: Map<String, Value>,
    id: String,
    cwd: String,
    entries: Vec<Entry>,
    by_id: HashMap<short::Short, usize>,
    /// Each entry's parent, resolved when the entry was added (walking a long branch then costs
    /// no hashing): see [`Parent`].
    parents: Vec<Parent>,
    /// Current label per target entry id, in first-set order (like the reference's `Map`).
    labels: Map<String, Value>,
    leaf: Option<usize>,
    /// The session file; `None` for in-memory sessions.
    file: Option<PathBuf>,
    /// Where `new`/`fork` put new files; `None` for in-memory sessions.
    session_dir: Option<PathBuf>,
    /// Header and buffered entries have been written (spec 11.5).
    flushed: bool,
    /// The header line is already on disk (a corrupt file replaced by a fresh header).
    header_written: bool,
    has_assistant: bool,
    /// The file ends without `\n` (a cut last line): start the next write with one.
    needs_newline: bool,
    /// The session file opened for reading lines back: entries whose lines are in it do not
    /// keep them in memory (`stored.rs`). `None` until there is a file (or when it cannot be
    /// opened: lines then stay in memory).
    stored: Option<Arc<SessionFile>>,
    /// How many entries (in file order) are in the file; the rest wait for the next write.
    saved: usize,
    /// The error of the last write while writes keep failing (reported once, when they start).
    write_failure: Option<String>,
    /// When the last failed write was tried (retries of a large backlog are spaced out).
    failed_at: Option<std::time::Instant>,
    /// Write failures and recoveries not yet reported to the host.
    notices: Vec<WriteNotice>,
    warnings: Vec<String>,
}

/// A change in whether the session file can be written, for the host (an event) and stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteNotice {
    /// Writing failed (reported once until a write succeeds again); `unsaved` entries wait in
    /// memory and are written by the next successful write.
    Failed {
        file: String,
        error: String,
        unsaved: usize,
    },
    /// A write succeeded again: the `saved` entries that were waiting are in the file now.
    Resumed { file: String, saved: usize },
}

impl Session {
    /// A new empty session. `session_dir: None` keeps it in memory (no file ever); otherwise the
    /// file is `<session_dir>/<timestamp>_<uuid>.jsonl`, written from the first assistant message.
    pub fn new(cwd: &str, session_dir: Option<PathBuf>, parent_session: Option<String>) -> Session {
        let id = ids::uuid_v7();
        let timestamp = ids::now_iso();
        let mut header = Map::new();
        header.insert("type".into(), Value::String("session".into()));
        header.insert("version".into(), Value::from(store::CURRENT_VERSION));
        header.insert("id".into(), Value::String(id.clone()));
        header.insert("timestamp".into(), Value::String(timestamp.clone()));
        header.insert("cwd".into(), Value::String(cwd.into()));
        if let Some(parent) = parent_session {
            header.insert("parentSession".into(), Value::String(parent));
        }
        let file = session_dir
            .as_ref()
            .map(|d| d.join(store::session_file_name(&timestamp, &id)));
        Session {
            header,
            id,
            cwd: cwd.into(),
            entries: Vec::new(),
            by_id: HashMap::new(),
            parents: Vec::new(),
            labels: Map::new(),
            leaf: None,
            file,
            session_dir,
            flushed: false,
            header_written: false,
            has_assistant: false,
            needs_newline: false,
            stored: None,
            saved: 0,
            write_failure: None,
            failed_at: None,
            notices: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// A new empty session with a chosen id (`--session-id`); its file is
    /// `<session_dir>/<timestamp>_<id>.jsonl`.
    pub fn with_id(cwd: &str, session_dir: Option<PathBuf>, id: &str) -> Session {
        let mut s = Session::new(cwd, session_dir, None);
        s.id = id.to_string();
        s.header.insert("id".into(), Value::String(id.into()));
        let timestamp = s
            .header
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        s.file = s
            .session_dir
            .as_ref()
            .map(|d| d.join(store::session_file_name(&timestamp, id)));
        s
    }

    /// Load a session file. Unparsable lines (e.g. a last line cut by a crash) are dropped with a
    /// warning (see [`Session::take_warnings`]), but what is intact around them is kept: a
    /// complete entry glued onto a cut one, and the history before a lost entry (see
    /// `repair.rs`). Older versions are migrated and the file rewritten. A missing file or one
    /// without a valid header is an error. Later `fork`/new files go to the file's directory.
    pub fn open(path: &Path) -> Result<Session, String> {
        Session::open_with(path, true, Load::Later)
    }

    /// [`Session::open`] at start-up (`--session`, `--continue`, `--session-id`), before any
    /// thread but main exists: a long file is parsed on more than one thread, each allocating
    /// in an arena of its own (`crate::malloc`). Later, with glibc's or musl's allocator, on one.
    pub fn open_at_start(path: &Path) -> Result<Session, String> {
        Session::open_with(path, true, Load::AtStart)
    }

    /// [`Session::open`] for reading only (`--export`, at start-up): an older file is migrated
    /// in memory and left unchanged on disk.
    pub fn open_read_only(path: &Path) -> Result<Session, String> {
        Session::open_with(path, false, Load::AtStart)
    }

    fn open_with(path: &Path, rewrite_migrated: bool, load: Load) -> Result<Session, String> {
        // Current files are turned into entries line by line; older ones are collected whole
        // first, since migrating them renumbers every entry.
        let file = store::open_regular(path)?;
        // The open file the lines are read back from later (the same one read now, whatever
        // happens to the path). Without it, lines stay in memory.
        let stored = file
            .try_clone()
            .ok()
            .and_then(|f| SessionFile::from_file(f, path).ok());
        // Lines are parsed into entries on the fast path (possibly on a second thread), then
        // added in file order; anything else takes the full path in `Opening`.
        let prepare = |line: &[u8], at: u64| Loader::prepare(line, at, stored.as_ref());
        // Entries of a long session average most of a KiB (a turn's tool output and messages);
        // capped, so a huge file of few lines does not reserve for millions.
        let len = file.metadata().map_or(0, |m| m.len());
        let expect = (len / 1024).min(1 << 16) as usize;
        let mut opening = Opening {
            path,
            loader: None,
            damage: Vec::new(),
            expect,
        };
        let wanted = store::helpers_for(len);
        let helpers = match load {
            Load::AtStart => crate::malloc::arenas_at_start(wanted),
            Load::Later => crate::malloc::side_by_side(wanted),
        };
        let report = store::read_lines_from(&file, path, &prepare, &mut opening, helpers)?;
        let loader = opening.loader.ok_or("Session file has no header")?;
        let (mut session, migrated, entry_warnings) = loader.finish(opening.damage);
        if !migrated {
            session.stored = stored;
        }
        session.saved = session.entries.len();
        // Grown by doubling while the file was read: a long session would keep up to half its
        // entry table empty.
        session.entries.shrink_to_fit();
        session.parents.shrink_to_fit();
        session.needs_newline = report.needs_newline;
        session.warnings = report.warnings;
        session.warnings.extend(entry_warnings);
        if migrated && rewrite_migrated {
            match session
                .all_lines()
                .and_then(|text| store::rewrite(path, &text))
            {
                Ok(()) => session.needs_newline = false,
                Err(e) => session.warnings.push(e),
            }
        }
        Ok(session)
    }

    /// The reference's `setSessionFile` (`--session <path>`): an existing session file is
    /// opened; a missing or empty file gives a new empty session written later at exactly `path`.
    /// A file that cannot be read as a session is an error and is left untouched (the reference
    /// replaces it by a fresh header, losing whatever it held), as is anything but a regular file.
    /// Used at start-up (a long file is parsed as [`Session::open_at_start`] parses it).
    pub fn open_or_create(path: &Path, cwd: &str) -> Result<Session, String> {
        let meta = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Session::create_at(path, cwd));
            }
            Err(e) => return Err(format!("Cannot open session file {}: {e}", path.display())),
            Ok(m) => m,
        };
        if !meta.is_file() {
            return Err(format!(
                "Cannot read session file {}: not a regular file",
                path.display()
            ));
        }
        if meta.len() == 0 {
            return Ok(Session::create_at(path, cwd));
        }
        Session::open_at_start(path).map_err(|e| {
            format!(
                "{e}; pith does not overwrite a file it cannot read as a session: move it away or name another path"
            )
        })
    }

    /// A new empty session to be written at exactly `path` (from the first assistant message, as
    /// always); later `new`/`fork` files go to its directory. The reference's `setSessionFile` for
    /// a file that does not exist.
    pub fn create_at(path: &Path, cwd: &str) -> Session {
        let mut s = Session::new(cwd, Some(parent_dir(path)), None);
        s.file = Some(path.to_path_buf());
        s
    }

    /// `--fork <path|id>` (pi's `forkFrom`): a new session file in `dir` — a new id, this `cwd`,
    /// `parentSession` naming the source — holding every entry of `source` (all branches),
    /// written at once. The source is read as [`Session::open_at_start`] reads it (start-up's
    /// `--fork`; an older version is migrated first).
    pub fn fork_from(
        source: &Path,
        cwd: &str,
        dir: PathBuf,
        id: Option<&str>,
    ) -> Result<Session, String> {
        let mut src = Session::open_at_start(source).map_err(|e| format!("Cannot fork: {e}"))?;
        let parent = source.to_string_lossy().into_owned();
        let mut fresh = match id {
            Some(id) => Session::with_id(cwd, Some(dir), id),
            None => Session::new(cwd, Some(dir), None),
        };
        fresh
            .header
            .insert("parentSession".into(), Value::String(parent));
        let file = fresh
            .file
            .clone()
            .ok_or("Cannot fork: no session directory")?;
        let mut text = format!("{}\n", store::to_line(&fresh.header));
        for e in &src.entries {
            text.push_str(&e.try_line().map_err(|e| format!("Cannot fork: {e}"))?);
            text.push('\n');
        }
        store::append(&file, &text, false).map_err(|e| e.message)?;
        let mut forked = Session::open(&file)?;
        forked.warnings.extend(src.take_warnings());
        Ok(forked)
    }

    fn from_header(header: Map<String, Value>, path: &Path) -> Session {
        let get = |k: &str| {
            header
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Session {
            id: get("id"),
            cwd: get("cwd"),
            header,
            entries: Vec::new(),
            by_id: HashMap::new(),
            parents: Vec::new(),
            labels: Map::new(),
            leaf: None,
            file: Some(path.to_path_buf()),
            session_dir: Some(parent_dir(path)),
            flushed: true,
            header_written: true,
            has_assistant: false,
            needs_newline: false,
            stored: None,
            saved: 0,
            write_failure: None,
            failed_at: None,
            notices: Vec::new(),
            warnings: Vec::new(),
        }
    }

    // ----- accessors -----

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The `cwd` recorded in the header.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// The header object as written.
    pub fn header(&self) -> &Map<String, Value> {
        &self.header
    }

    /// The session file (`None` in memory). It may not exist yet (see [`Session::is_flushed`]).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Stop writing: later entries stay in memory only (pi 0.87.1 disconnects its session when
    /// stdin ends, so the work it cancels then leaves no trace in the file).
    pub fn detach_file(&mut self) {
        self.file = None;
    }

    pub fn session_dir(&self) -> Option<&Path> {
        self.session_dir.as_deref()
    }

    /// Directory for later `new_session`/`fork` files (`--session-dir` overrides the default).
    pub fn set_session_dir(&mut self, dir: PathBuf) {
        if self.file.is_some() {
            self.session_dir = Some(dir);
        }
    }

    pub fn is_persisted(&self) -> bool {
        self.file.is_some()
    }

    /// Write the file from now on, also before any assistant message (pi 1.6.0 starts it at the
    /// first user message, so a prompt whose first turn never completes stays on disk).
    pub fn start_file(&mut self) {
        if !self.has_assistant {
            self.has_assistant = true;
            self.persist(true);
        }
    }

    /// Whether the file exists with everything so far (false until the first assistant message).
    pub fn is_flushed(&self) -> bool {
        self.flushed
    }

    /// All entries in file order (all branches).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.by_id.get(id).map(|&i| &self.entries[i])
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.map(|i| self.entries[i].id())
    }

    /// The leaf as an index into [`Session::entries`].
    pub fn leaf_index(&self) -> Option<usize> {
        self.leaf
    }

    /// The label currently set on an entry.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.labels.get(id).and_then(Value::as_str)
    }

    /// Warnings for stderr collected since the last call (dropped lines, failed writes).
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    // ----- appending -----

    fn new_entry(&self) -> NewEntry {
        NewEntry {
            id: ids::short_id(|id| self.by_id.contains_key(id)),
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: ids::now_iso(),
        }
    }

    fn push(&mut self, entry: Entry) -> usize {
        let index = self.entries.len();
        if entry.is_assistant_message() {
            self.has_assistant = true;
        }
        if let EntryKind::Label { target_id, label } = entry.kind() {
            match label.as_deref().filter(|l| !l.is_empty()) {
                Some(l) => {
                    self.labels
                        .insert(target_id.clone(), Value::String(l.to_string()));
                }
                None => {
                    self.labels.shift_remove(target_id);
                }
            }
        }
        let parent = match entry.parent_id() {
            None => Parent::Root,
            Some(p) => self.by_id.get(p).map_or(Parent::Lookup, |&i| Parent::At(i)),
        };
        if self
            .by_id
            .insert(short::Short::new(entry.id()), index)
            .is_some()
        {
            // A repeated id changes what earlier links resolve to: look every link up by id from
            // now on, as the walk always did.
            self.parents.iter_mut().for_each(|p| {
                if matches!(p, Parent::At(_)) {
                    *p = Parent::Lookup;
                }
            });
        }
        self.parents.push(parent);
        self.entries.push(entry);
        self.leaf = Some(index);
        index
    }

    /// The index of entry `i`'s parent (`None` at a root or a missing parent).
    pub fn parent_index(&self, i: usize) -> Option<usize> {
        self.parent_of(i)
    }

    /// The index of entry `i`'s parent.
    fn parent_of(&self, i: usize) -> Option<usize> {
        match self.parents.get(i)? {
            Parent::Root => None,
            Parent::At(p) | Parent::Bridged(p) => Some(*p),
            Parent::Lookup => self.entries[i]
                .parent_id()
                .and_then(|p| self.by_id.get(p).copied()),
        }
    }

    /// After loading a damaged file: entries whose parent was on a lost line hang from where it
    /// most likely hung instead of becoming roots (which would cut the history before them off
    /// the branch).
    fn repair_links(&mut self, repairs: &repair::Repairs, warnings: &mut Vec<String>) {
        if repairs.is_empty() {
            return;
        }
        for i in 0..self.entries.len() {
            if !matches!(self.parents[i], Parent::Lookup) {
                continue;
            }
            let Some(missing) = self.entries[i].parent_id() else {
                continue;
            };
            if self.by_id.contains_key(missing) {
                continue;
            }
            let by_id = &self.by_id;
            let bridge = repairs.bridge(i, missing, |id| by_id.get(id).copied());
            let (parent, to) = match bridge {
                None => continue,
                Some(repair::Bridge::Root) => (Parent::Root, "the start".to_string()),
                Some(repair::Bridge::At(p)) => {
                    (Parent::Bridged(p), self.entries[p].id().to_string())
                }
            };
            warnings.push(format!(
                "session file {}: entry {} hung from {missing}, which was lost with a damaged line; attached to {to}",
                self.file.as_deref().unwrap_or(Path::new("")).display(),
                self.entries[i].id(),
            ));
            self.parents[i] = parent;
        }
    }

    /// Add an entry read from a file (fails when it has no string id).
    fn push_object(&mut self, obj: Map<String, Value>) -> Result<(), String> {
        self.push(Entry::from_raw(obj)?);
        Ok(())
    }

    fn append_raw(&mut self, raw: Map<String, Value>) -> String {
        let entry = match Entry::from_raw(raw) {
            Ok(e) => e,
            // Unreachable: every builder sets a string id.
            Err(e) => {
                self.warnings.push(e);
                return String::new();
            }
        };
        let id = entry.id().to_string();
        self.push(entry);
        self.persist(false);
        id
    }

    /// Write per spec 11.5: nothing before an assistant message exists; then everything at once;
    /// then one line per entry. Entries a failed write left out are written by the next
    /// attempt, in file order, before the new one: a full disk or a read-only directory loses
    /// nothing as long as the process lives on and a later write succeeds. The first failure of
    /// a series is reported once (warning and [`WriteNotice::Failed`]); the first success after
    /// it gives [`WriteNotice::Resumed`].
    fn persist(&mut self, now: bool) {
        if let Err(e) = self.write_unsaved(now) {
            self.warnings.push(e);
        }
    }

    /// [`Session::persist`]; `Err` only when the line of an entry to write cannot be read back
    /// (a copied entry whose file was changed in place): nothing is written then.
    fn write_unsaved(&mut self, now: bool) -> Result<(), String> {
        let Some(path) = self.file.clone() else {
            return Ok(());
        };
        if !self.has_assistant || self.saved == self.entries.len() && self.header_written {
            return Ok(());
        }
        if !now && self.backing_off() {
            return Ok(());
        }
        let mut text = String::new();
        if !self.header_written {
            text.push_str(&store::to_line(&self.header));
            text.push('\n');
        }
        let lines_at = text.len();
        text.push_str(&self.entry_lines(self.saved..self.entries.len())?);
        match store::append(&path, &text, self.needs_newline) {
            Ok(at) => {
                let first = self.saved;
                let waited = self.entries.len() - self.saved;
                self.saved = self.entries.len();
                self.flushed = true;
                self.header_written = true;
                self.needs_newline = false;
                self.forget_written(&path, first, at + lines_at as u64, &text[lines_at..]);
                if self.write_failure.take().is_some() {
                    self.notices.push(WriteNotice::Resumed {
                        file: path.display().to_string(),
                        saved: waited,
                    });
                }
            }
            Err(e) => {
                self.failed_at = Some(std::time::Instant::now());
                // A torn line that could not be cut off: the next write starts a fresh line.
                self.needs_newline |= e.torn;
                if self.write_failure.is_none() {
                    self.warnings.push(format!(
                        "{}; the session is kept in memory and written when writing works again",
                        e.message
                    ));
                    self.notices.push(WriteNotice::Failed {
                        file: path.display().to_string(),
                        error: e.message.clone(),
                        unsaved: self.entries.len() - self.saved,
                    });
                }
                self.write_failure = Some(e.message);
            }
        }
        Ok(())
    }

    /// The lines `text` of entries `first..` are now in the file at `path` from offset `at`: read
    /// them back from there instead of keeping them (the file is opened for that once; a path
    /// that names another file than before gets the new one).
    fn forget_written(&mut self, path: &Path, first: usize, mut at: u64, text: &str) {
        let current = self.stored.as_ref().filter(|f| f.is_at(path)).cloned();
        let Some(file) = current.or_else(|| SessionFile::open(path).ok()) else {
            return;
        };
        for (entry, line) in self.entries[first..]
            .iter_mut()
            .zip(text.split_terminator('\n'))
        {
            if let Some(s) = Stored::new(&file, at, line.as_bytes()) {
                entry.stored_at(s);
            }
            at += line.len() as u64 + 1;
        }
        self.stored = Some(file);
    }

    /// While writes fail, every new entry tries again with all that waits; once that is more
    /// than 64 KiB, at most once a second (a long outage must not cost a growing write per entry).
    fn backing_off(&self) -> bool {
        const RETRY_FREELY_BYTES: usize = 64 * 1024;
        let Some(at) = self.failed_at.filter(|_| self.write_failure.is_some()) else {
            return false;
        };
        if at.elapsed() >= std::time::Duration::from_secs(1) {
            return false;
        }
        let mut waiting = 0;
        for e in &self.entries[self.saved..] {
            waiting += e.line().len() + 1;
            if waiting > RETRY_FREELY_BYTES {
                return true;
            }
        }
        false
    }

    /// Try again, now, to write what earlier writes left out (nothing to do when nothing waits).
    pub fn retry_writes(&mut self) {
        if self.write_failure.is_some() {
            self.persist(true);
        }
    }

    /// What dropping the session does for entries a failed write left in memory (one more
    /// attempt, then a line on stderr for what is still lost), for a session that is left to
    /// the OS at exit instead of dropped. Once: a later drop does nothing more.
    pub fn close_writes(&mut self) {
        self.retry_writes();
        if let Some(error) = self.write_failure.take() {
            eprintln!(
                "Error: {} session entries were not saved: {error}",
                self.entries.len() - self.saved
            );
        }
    }

    /// Entries that are only in memory because writing the session file failed.
    pub fn unsaved_entries(&self) -> usize {
        match self.write_failure {
            Some(_) => self.entries.len() - self.saved,
            None => 0,
        }
    }

    /// Write failures and recoveries since the last call (see [`WriteNotice`]).
    pub fn take_write_notices(&mut self) -> Vec<WriteNotice> {
        std::mem::take(&mut self.notices)
    }

    fn entry_lines(&self, range: std::ops::Range<usize>) -> Result<String, String> {
        let mut text = String::new();
        for e in &self.entries[range] {
            text.push_str(&e.try_line()?);
            text.push('\n');
        }
        Ok(text)
    }

    fn all_lines(&self) -> Result<String, String> {
        Ok(format!(
            "{}\n{}",
            store::to_line(&self.header),
            self.entry_lines(0..self.entries.len())?
        ))
    }

    /// Append a `message` entry; returns its id.
    pub fn append_message(&mut self, message: &AgentMessage) -> String {
        let value = serde_json::to_value(message).unwrap_or(Value::Null);
        let raw = self
            .new_entry()
            .standard("message", vec![("message", Some(value))]);
        self.append_raw(raw)
    }

    pub fn append_model_change(&mut self, provider: &str, model_id: &str) -> String {
        let raw = self.new_entry().standard(
            "model_change",
            vec![
                ("provider", Some(provider.into())),
                ("modelId", Some(model_id.into())),
            ],
        );
        self.append_raw(raw)
    }

    pub fn append_thinking_level_change(&mut self, level: ThinkingLevel) -> String {
        let raw = self.new_entry().standard(
            "thinking_level_change",
            vec![("thinkingLevel", Some(level.as_str().into()))],
        );
        self.append_raw(raw)
    }

    /// `session_info` with the trimmed name.
    pub fn append_session_info(&mut self, name: &str) -> String {
        let raw = self
            .new_entry()
            .standard("session_info", vec![("name", Some(name.trim().into()))]);
        self.append_raw(raw)
    }

    /// A `compaction` entry (`details` omitted when `None`; pith's own compactions pass
    /// `from_hook: Some(false)`).
    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> String {
        let raw = self.new_entry().standard(
            "compaction",
            vec![
                ("summary", Some(summary.into())),
                ("firstKeptEntryId", Some(first_kept_entry_id.into())),
                ("tokensBefore", Some(tokens_before.into())),
                ("details", details),
                ("fromHook", from_hook.map(Value::Bool)),
            ],
        );
        self.append_raw(raw)
    }

    /// pi 0.87.1's `compaction` entry: also the summary requests' `usage` and the system prompt
    /// checkpoint (`systemMessage`, stamped with the entry's time) that replaces the system
    /// messages of the summarized part. `checkpoint` gets the entry's timestamp in Unix ms.
    /// `from_hook`: an extension wrote the summary.
    #[allow(clippy::too_many_arguments)]
    pub fn append_compaction_with_checkpoint(
        &mut self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: u64,
        details: Option<Value>,
        usage: Option<Value>,
        from_hook: bool,
        checkpoint: impl FnOnce(u64) -> Option<Value>,
    ) -> String {
        let new = self.new_entry();
        let ms = ids::parse_iso_ms(&new.timestamp).unwrap_or(0);
        let raw = new.standard(
            "compaction",
            vec![
                ("summary", Some(summary.into())),
                ("firstKeptEntryId", Some(first_kept_entry_id.into())),
                ("tokensBefore", Some(tokens_before.into())),
                ("details", details),
                ("usage", usage),
                ("fromHook", Some(Value::Bool(from_hook))),
                ("systemMessage", checkpoint(ms)),
            ],
        );
        self.append_raw(raw)
    }

    /// pi 0.87.1's `context_edit`: `target_id`'s messages leave the context (`replacement:
    /// null`). Returns the entry as written (for `entry_appended`).
    pub fn append_context_edit(&mut self, target_id: &str) -> Option<Value> {
        let raw = self.new_entry().standard(
            "context_edit",
            vec![
                ("targetId", Some(target_id.into())),
                ("replacement", Some(Value::Null)),
            ],
        );
        let id = self.append_raw(raw);
        self.entry(&id).map(|e| Value::Object(e.raw().clone()))
    }

    /// A `custom` entry (extension state, not in the context).
    pub fn append_custom(&mut self, custom_type: &str, data: Option<Value>) -> String {
        let raw = self.new_entry().fields_first(
            "custom",
            vec![("customType", Some(custom_type.into())), ("data", data)],
        );
        self.append_raw(raw)
    }

    /// A `custom_message` entry (enters the context as a `custom` message).
    pub fn append_custom_message(
        &mut self,
        custom_type: &str,
        content: &UserContent,
        display: bool,
        details: Option<Value>,
    ) -> String {
        let content = serde_json::to_value(content).unwrap_or(Value::Null);
        let raw = self.new_entry().fields_first(
            "custom_message",
            vec![
                ("customType", Some(custom_type.into())),
                ("content", Some(content)),
                ("display", Some(Value::Bool(display))),
                ("details", details),
            ],
        );
        self.append_raw(raw)
    }

    /// Set (or with `None`/empty, clear) the label of an existing entry.
    pub fn append_label(&mut self, target_id: &str, label: Option<&str>) -> Result<String, String> {
        if !self.by_id.contains_key(target_id) {
            return Err(format!("Entry {target_id} not found"));
        }
        let raw = self.new_entry().standard(
            "label",
            vec![
                ("targetId", Some(target_id.into())),
                ("label", label.map(Value::from)),
            ],
        );
        Ok(self.append_raw(raw))
    }

    /// Move the leaf to `from` (`None` = before the first entry) and append a `branch_summary`.
    pub fn branch_with_summary(
        &mut self,
        from: Option<&str>,
        summary: &str,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> Result<String, String> {
        self.leaf = match from {
            Some(id) => Some(
                *self
                    .by_id
                    .get(id)
                    .ok_or_else(|| format!("Entry {id} not found"))?,
            ),
            None => None,
        };
        let raw = self.new_entry().standard(
            "branch_summary",
            vec![
                ("fromId", Some(from.unwrap_or("root").into())),
                ("summary", Some(summary.into())),
                ("details", details),
                ("fromHook", from_hook.map(Value::Bool)),
            ],
        );
        Ok(self.append_raw(raw))
    }

    /// Move the leaf to an existing entry; the next append starts a sibling branch.
    pub fn branch(&mut self, entry_id: &str) -> Result<(), String> {
        let i = *self
            .by_id
            .get(entry_id)
            .ok_or_else(|| format!("Entry {entry_id} not found"))?;
        self.leaf = Some(i);
        Ok(())
    }

    /// Leaf before the first entry: the context becomes empty, the next append is a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf = None;
    }

    // ----- reading the tree -----

    fn path(&self) -> Vec<usize> {
        tree::branch_indices(self.entries.len(), |i| self.parent_of(i), self.leaf)
    }

    /// Entries from the root to the leaf.
    pub fn branch_path(&self) -> Vec<&Entry> {
        self.path().into_iter().map(|i| &self.entries[i]).collect()
    }

    /// The agent context of the current branch (spec 11.4).
    pub fn build_context(&self) -> Vec<AgentMessage> {
        tree::build_context(&self.entries, &self.path())
    }

    /// [`Session::build_context`] for a session just loaded: messages parsed while the file was
    /// read are moved into the context instead of parsed again or copied (entries parse them
    /// again on demand later).
    pub fn take_context(&mut self) -> Context {
        let plan = tree::context_plan(&self.entries, &self.path());
        let mut messages: Vec<Arc<AgentMessage>> = plan
            .compaction
            .map(|c| {
                tree::compaction_messages(&self.entries[c])
                    .into_iter()
                    .map(Arc::new)
                    .collect()
            })
            .unwrap_or_default();
        messages.reserve(plan.entries.len());
        for i in plan.entries {
            if let Some(m) = self.entries[i].take_context_message() {
                messages.push(m);
            }
        }
        // Messages parsed at load but not in this context (other branches) are dropped: the
        // line stays the only copy, as for every entry.
        for e in &mut self.entries {
            e.forget_parsed();
        }
        messages.into()
    }

    /// The latest non-empty `session_info` name in the whole file.
    pub fn session_name(&self) -> Option<String> {
        self.entries.iter().rev().find_map(|e| match e.kind() {
            EntryKind::SessionInfo { name: Some(n) } if !n.is_empty() => Some(n.clone()),
            _ => None,
        })
    }

    /// The last `(provider, model id)` on the branch (model change or assistant message).
    pub fn model(&self) -> Option<(String, String)> {
        tree::model(&self.entries, &self.path())
    }

    /// The last thinking level recorded on the branch (`None`: none recorded, or unknown).
    pub fn thinking_level(&self) -> Option<ThinkingLevel> {
        tree::thinking_level(&self.entries, &self.path()).and_then(|l| ThinkingLevel::parse(&l))
    }

    /// Every user message entry in the whole file (all branches), file order, empty text skipped.
    pub fn user_messages_for_fork(&self) -> Vec<ForkMessage> {
        self.entries
            .iter()
            .filter_map(|e| {
                let text = e.user_text()?;
                (!text.is_empty()).then(|| ForkMessage {
                    entry_id: e.id().to_string(),
                    text,
                })
            })
            .collect()
    }

    /// `fork` (spec 4.9): a new session holding the branch up to (not including) the user message
    /// `entry_id`, and that message's text. A root user message gives an empty new session.
    pub fn fork_at(&self, entry_id: &str) -> Result<(Session, String), String> {
        let entry = self.entry(entry_id).ok_or(INVALID_FORK_ENTRY)?;
        let text = entry.user_text().ok_or(INVALID_FORK_ENTRY)?;
        let session = match entry.parent_id().and_then(|p| self.by_id.get(p)) {
            Some(&parent) => self.branched_session(parent)?,
            None => Session::new(&self.cwd, self.session_dir.clone(), self.parent_link()),
        };
        Ok((session, text))
    }

    /// `clone`: a new session holding the current branch.
    pub fn clone_branch(&self) -> Result<Session, String> {
        match self.leaf {
            Some(leaf) => self.branched_session(leaf),
            None => Ok(Session::new(
                &self.cwd,
                self.session_dir.clone(),
                self.parent_link(),
            )),
        }
    }

    fn parent_link(&self) -> Option<String> {
        self.file.as_ref().map(|f| f.to_string_lossy().into_owned())
    }

    /// `createBranchedSession(leaf)`: root → leaf without labels, then the labels of kept entries
    /// re-created; written at once if the branch holds an assistant message, else deferred.
    /// Fails when a line to copy cannot be read back from this session's file (changed in
    /// place by another program since it was loaded): nothing is written then.
    fn branched_session(&self, leaf: usize) -> Result<Session, String> {
        let mut s = Session::new(&self.cwd, self.session_dir.clone(), self.parent_link());
        let path = tree::branch_indices(self.entries.len(), |i| self.parent_of(i), Some(leaf));
        for i in path {
            if !matches!(self.entries[i].kind(), EntryKind::Label { .. }) {
                s.push(self.entries[i].clone());
            }
        }
        for (target, label) in &self.labels {
            if s.by_id.contains_key(target.as_str()) {
                let raw = s.new_entry().standard(
                    "label",
                    vec![
                        ("targetId", Some(target.as_str().into())),
                        ("label", Some(label.clone())),
                    ],
                );
                if let Ok(e) = Entry::from_raw(raw) {
                    s.push(e);
                }
            }
        }
        // Lines copied from this session's file are read back as they are written: one that
        // cannot be (the file was changed in place) fails the whole copy before anything is
        // written.
        s.write_unsaved(true)?;
        Ok(s)
    }

    /// `get_session_stats` as pi 0.73.1 answers it ([`Session::stats_for`] over the context).
    pub fn stats(&self, messages: &[AgentMessage], context_window: Option<u64>) -> SessionStats {
        self.stats_for(
            messages,
            context_window,
            crate::protocol::SessionStats::Context,
        )
    }

    /// `get_session_stats`, with `contextUsage` for the current model's context window over the
    /// agent's current context `messages`. The counts and token sums: pi 0.73.1 takes them over
    /// the context (after a compaction, the kept messages only); pi 0.87.1 over every entry of
    /// the session file (all branches, compacted messages included, and the usage recorded on
    /// compaction, branch summary and `usage` entries).
    pub fn stats_for<M: std::borrow::Borrow<AgentMessage>>(
        &self,
        messages: &[M],
        context_window: Option<u64>,
        scope: crate::protocol::SessionStats,
    ) -> SessionStats {
        let counts = match scope {
            crate::protocol::SessionStats::Context => tree::message_stats(messages),
            crate::protocol::SessionStats::SessionFile => tree::entry_stats(&self.entries),
        };
        let path = self.path();
        SessionStats {
            session_file: self.parent_link(),
            session_id: self.id.clone(),
            user_messages: counts.users,
            assistant_messages: counts.assistants,
            tool_calls: counts.tool_calls,
            tool_results: counts.tool_results,
            total_messages: counts.total,
            tokens: counts.tokens,
            cost: counts.cost,
            context_usage: tree::context_usage(&self.entries, &path, messages, context_window),
        }
    }
}

/// The last chance for entries a failed write left in memory: one more attempt when the session
/// is closed (replaced by another one, or at exit), and a line on stderr for what is still lost.
impl Drop for Session {
    fn drop(&mut self) {
        self.close_writes();
    }
}

/// Where an entry's parent is.
#[derive(Clone, Copy, Debug)]
enum Parent {
    /// `parentId` is null or absent.
    Root,
    /// Resolved when the entry was added.
    At(usize),
    /// Not known when the entry was added (a forward reference, a dangling id, or ids repeated
    /// in the file): looked up by id at each walk.
    Lookup,
    /// The parent was lost with a damaged line: the entry it most likely hung from
    /// ([`Session::repair_links`]).
    Bridged(usize),
}

/// [`Session::open`]'s reader: the loader once the header is read, and the damaged lines met.
struct Opening<'p> {
    path: &'p Path,
    loader: Option<Loader>,
    damage: Vec<repair::Damage>,
    /// About how many entries the file holds (from its size), to size the entry tables once.
    expect: usize,
}

impl store::LineSink<Option<Entry>> for Opening<'_> {
    fn line(
        &mut self,
        line: &[u8],
        first: bool,
        _at: u64,
        prepared: Option<Entry>,
    ) -> store::LineRead {
        // Current files are turned into entries line by line (most already by
        // `Loader::prepare`); older ones are collected whole first, since migrating them
        // renumbers every entry.
        if let (Some(l), Some(entry)) = (&mut self.loader, prepared) {
            if l.add_prepared(entry) {
                return store::LineRead::Object;
            }
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(obj)) => match &mut self.loader {
                Some(l) => {
                    l.add(obj);
                    store::LineRead::Object
                }
                None if first && !store::is_header(&obj) => store::LineRead::NotHeader,
                None => {
                    self.loader = Some(Loader::new(obj, self.path, self.expect));
                    store::LineRead::Object
                }
            },
            _ => store::LineRead::Unparsable,
        }
    }

    fn damaged(&mut self, line: &[u8]) {
        let Some(l) = &self.loader else { return };
        // The line's own head, and that of every cut entry glued onto it.
        let before = l.entries_so_far();
        let starts = std::iter::once(0).chain(repair::object_starts(line));
        for at in starts {
            let head = repair::TornHead::read(&line[at..]);
            if at == 0 || head.id.is_some() {
                self.damage.push(repair::Damage {
                    entries_before: before,
                    head,
                });
            }
        }
    }

    fn fragment(&mut self, part: &[u8], _first: bool) -> bool {
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(part) else {
            return false;
        };
        match &mut self.loader {
            None if store::is_header(&obj) => {
                self.loader = Some(Loader::new(obj, self.path, self.expect));
                true
            }
            None => false,
            Some(l) => {
                // An entry (a version 1 entry has no id yet), not a piece of the cut one.
                let key = if l.session.is_some() { "id" } else { "type" };
                let whole = obj.get(key).is_some_and(Value::is_string);
                if whole {
                    l.add(obj);
                }
                whole
            }
        }
    }
}

/// When a file is loaded: at start-up, before any thread but main exists, or later (see
/// `crate::malloc`: whether helper threads may parse a long file).
#[derive(Clone, Copy)]
enum Load {
    AtStart,
    Later,
}

/// Builds a [`Session`] from the objects of a file as they are read (header first).
struct Loader {
    path: PathBuf,
    /// The session so far: entries are added as they are read. `None` for an older file, whose
    /// objects are collected in `legacy` (header first) because migrating renumbers them all.
    session: Option<Session>,
    legacy: Vec<Map<String, Value>>,
    /// Objects seen after the header (numbers the "skipped entry" warnings).
    count: usize,
    warnings: Vec<String>,
}

impl Loader {
    /// `expect`: about how many entries follow (the tables are sized for them; they still grow
    /// if there are more).
    fn new(header: Map<String, Value>, path: &Path, expect: usize) -> Loader {
        let version = header.get("version").and_then(Value::as_u64).unwrap_or(1);
        let (session, legacy) = if version < store::CURRENT_VERSION {
            (None, vec![header])
        } else {
            let mut s = Session::from_header(header, path);
            // Grown step by step, the id table would hash every id again at each step.
            s.entries.reserve(expect);
            s.parents.reserve(expect);
            s.by_id.reserve(expect);
            (Some(s), Vec::new())
        };
        Loader {
            path: path.to_path_buf(),
            session,
            legacy,
            count: 0,
            warnings: Vec::new(),
        }
    }

    /// The fast path for a current-version file: a line becomes an entry without a `Value`
    /// ([`Entry::from_line`]), its text left in `file` at offset `at` (kept in memory when there
    /// is no file to read it back from). `None`: parse it fully. Pure: runs on any thread.
    fn prepare(line: &[u8], at: u64, file: Option<&Arc<SessionFile>>) -> Option<Entry> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let text = line::utf8(line)?;
        let stored = file.and_then(|f| Stored::new(f, at, line));
        Entry::from_line(text, stored)
    }

    /// Add an entry [`Loader::prepare`] made of a line. `false`: not taken (an older file,
    /// whose objects are collected whole), parse the line fully and call [`Loader::add`].
    fn add_prepared(&mut self, entry: Entry) -> bool {
        let Some(session) = &mut self.session else {
            return false;
        };
        self.count += 1;
        session.push(entry);
        true
    }

    fn add(&mut self, obj: Map<String, Value>) {
        match &mut self.session {
            Some(session) => {
                self.count += 1;
                if let Err(e) = session.push_object(obj) {
                    self.warnings
                        .push(skipped_entry(&self.path, self.count, &e));
                }
            }
            None => self.legacy.push(obj),
        }
    }

    /// Entries read so far (what a damaged line met now comes after).
    fn entries_so_far(&self) -> usize {
        match &self.session {
            Some(s) => s.entries.len(),
            None => self.legacy.len().saturating_sub(1),
        }
    }

    /// The session, whether it was migrated (its file must then be rewritten), and warnings
    /// about skipped entries and links repaired around the `damage`d lines.
    fn finish(self, damage: Vec<repair::Damage>) -> (Session, bool, Vec<String>) {
        let mut warnings = self.warnings;
        let repairs = repair::Repairs::new(damage);
        if let Some(mut session) = self.session {
            session.repair_links(&repairs, &mut warnings);
            return (session, false, warnings);
        }
        let mut objects = self.legacy;
        let migrated = store::migrate(&mut objects, |taken| ids::short_id(taken));
        let mut objects = objects.into_iter();
        let header = objects.next().unwrap_or_default();
        let mut session = Session::from_header(header, &self.path);
        for (n, obj) in objects.enumerate() {
            if let Err(e) = session.push_object(obj) {
                warnings.push(skipped_entry(&self.path, n + 1, &e));
            }
        }
        session.repair_links(&repairs, &mut warnings);
        (session, migrated, warnings)
    }
}

fn skipped_entry(path: &Path, number: usize, error: &str) -> String {
    format!(
        "session file {}: skipped entry {number}: {error}",
        path.display()
    )
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
