//! The `grep` tool: search file contents (spec 14.7) with ripgrep's own crates, configured as
//! the reference runs ripgrep: `rg --json --line-number --color=never --hidden [--ignore-case]
//! [--fixed-strings] [--glob G] -- PATTERN PATH`.
//!
//! - The matcher is `grep-regex`'s, built with rg's settings (Unicode, `^`/`$` at line ends, `\n`
//!   and NUL banned), so syntax, flags, classes and error texts are rg's; rg's hints are added to
//!   its errors (`-U` for a literal `\n`, `-a` for a NUL).
//! - The searcher is `grep-searcher`'s, line by line: binary files found while walking are
//!   searched up to their first NUL (block by block, so matches before it are reported); a file
//!   given explicitly is searched whole as rg searches it (as one memory block, NULs kept).
//!   UTF-16 files with a BOM are transcoded, as rg does.
//! - The walk is [`super::walk`]'s rg flavour; `--glob` is rg's override glob, relative to the
//!   tool's working directory as rg's is to its cwd.
//!
//! The matches are then formatted the way the reference formats rg's JSON: `path:N: text`, or
//! for context lines and lines that are not UTF-8, lines re-read from the file (split on
//! `\r\n`, `\r` and `\n`) as `path-N- text` blocks.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use serde_json::{Map, Value, json};

use super::ls::finish_listing;
use super::ordered_walk::{Entry, Visitor, Walker};
use super::paths::resolve_to_cwd;
use super::regular::{CancelRead, DirOpener, open_read, special_kind};
use super::truncate::{GREP_MAX_LINE_LENGTH, truncate_line};
use super::walk::{Flavor, relative};
use super::{
    ABORTED, Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, js_num,
    js_value, text_output,
};
use crate::cancel::CancelToken;

pub const DEFAULT_LIMIT: usize = 100;
/// An explicitly given file up to this size is searched as one block (rg memory-maps it);
/// a larger one is streamed, which differs only in how NUL bytes split its lines.
const EXPLICIT_SLICE_LIMIT: u64 = 64 * 1024 * 1024;
/// The longest line grep holds in memory while walking (rg has no limit; a file with a longer
/// line is skipped instead of growing pith's memory without bound).
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Bytes kept of a line shown from a re-read file (more than 500 UTF-16 units need).
const KEEP_LINE_BYTES: usize = 4 * GREP_MAX_LINE_LENGTH + 8;

/// `relative_globs`: pi 1.6.0's `glob`, rooted at the searched directory, a leading `./` dropped
/// (`Tools::find_paths_anchored`).
#[derive(Default)]
pub struct GrepTool {
    pub relative_globs: bool,
}

impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> String {
        "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to 100 matches or 50KB (whichever is hit first). Long lines are truncated to 500 chars.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Search file contents for patterns (respects .gitignore)"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        static SCHEMA_16: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        let base = || {
            super::schema(
                &SCHEMA,
                r#"{
            "type": "object",
            "required": ["pattern"],
            "properties": {
                "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
                "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
                "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
                "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
                "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
            }
        }"#,
            )
        };
        if self.relative_globs {
            // pi 1.6.0's text.
            return super::schema_variant(
                &SCHEMA_16,
                base,
                "glob",
                "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth",
            );
        }
        base()
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let pattern = arg_str(args, "pattern").ok_or("Invalid grep arguments.")?;
        check_cancel(ctx)?;
        let root = resolve_to_cwd(
            arg_str(args, "path")
                .filter(|p| !p.is_empty())
                .unwrap_or("."),
            &ctx.cwd,
        );
        let meta =
            std::fs::metadata(&root).map_err(|_| format!("Path not found: {}", root.display()))?;
        if let Some(kind) = special_kind(&meta) {
            // rg would block on a FIFO and never finish /dev/zero.
            return Err(super::regular::special_file_error("search", &root, kind));
        }
        let opts = Options {
            ignore_case: args
                .get("ignoreCase")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            literal: args
                .get("literal")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            context: arg_f64(args, "context")
                .filter(|c| *c > 0.0)
                .map(|c| c.min(1e6) as usize)
                .unwrap_or(0),
            // `Math.max(1, limit ?? 100)`: a fractional limit stops at the next whole match
            // (pi 1.6.0: `Math.max(1, Math.floor(limit ?? 100))`).
            limit: arg_f64(args, "limit")
                .filter(|l| !l.is_nan())
                .map(|l| {
                    if ctx.profile.limits_probed {
                        l.floor()
                    } else {
                        l
                    }
                })
                .unwrap_or(DEFAULT_LIMIT as f64)
                .max(1.0),
            rg_lines: ctx.profile.grep_rg_lines,
            probe: ctx.profile.limits_probed,
        };
        let glob = arg_str(args, "glob").filter(|g| !g.is_empty());
        // pi 1.6.0 runs rg in the searched directory (its globs are rooted there) and drops a
        // leading `./` (after a `!`); before, rg ran in pi's cwd.
        let glob: Option<std::borrow::Cow<'_, str>> = match glob {
            Some(g) if self.relative_globs => {
                let (neg, mut rest) = g.strip_prefix('!').map_or(("", g), |r| ("!", r));
                while let Some(r) = rest.strip_prefix("./") {
                    rest = r;
                }
                Some(format!("{neg}{rest}").into())
            }
            other => other.map(Into::into),
        };
        let glob_root = if self.relative_globs && meta.is_dir() {
            root.as_path()
        } else {
            ctx.cwd.as_path()
        };
        let found = search(
            pattern,
            &root,
            meta.is_dir(),
            glob.as_deref().map(|g| (g, glob_root)),
            &opts,
            ctx,
        )?;
        format_result(found, &opts)
    }
}

struct Options {
    ignore_case: bool,
    literal: bool,
    context: usize,
    limit: f64,
    /// `Tools::grep_rg_lines`.
    rg_lines: bool,
    /// `Tools::limits_probed`: one match more than `limit` is looked for (it decides the notice).
    probe: bool,
}

impl Options {
    /// How many matches the search collects.
    fn wanted(&self) -> f64 {
        if self.probe {
            self.limit + 1.0
        } else {
            self.limit
        }
    }
}

/// One reported line.
struct Match {
    /// Index into [`Found::files`].
    file: usize,
    line: u64,
    /// The line as rg's JSON carries it (`\r` removed, cut to 500 units); `None` when the line
    /// is not UTF-8 (rg sends its bytes base64-encoded and the reference re-reads the file).
    text: Option<(String, bool)>,
}

struct Found {
    /// Searched files with matches: (path, displayed path).
    files: Vec<(PathBuf, String)>,
    matches: Vec<Match>,
    limit_reached: bool,
}

/// rg's matcher for the reference's flags; errors are rg's stderr text.
pub fn build_matcher(
    pattern: &str,
    literal: bool,
    ignore_case: bool,
) -> Result<RegexMatcher, String> {
    let mut b = RegexMatcherBuilder::new();
    b.multi_line(true)
        .unicode(true)
        .octal(false)
        .fixed_strings(literal)
        .case_insensitive(ignore_case)
        .line_terminator(Some(b'\n'))
        .dot_matches_new_line(false)
        .ban_byte(Some(0));
    b.build(pattern)
        .map_err(|e| format!("rg: {}", suggest_text(suggest_multiline(e.to_string()))))
}

/// rg's hint after a literal line terminator in the pattern.
fn suggest_multiline(msg: String) -> String {
    if msg.contains("the literal") && msg.contains("not allowed") {
        format!(
            "{msg}\n\nConsider enabling multiline mode with the --multiline flag (or -U for short).\nWhen multiline mode is enabled, new line characters can be matched."
        )
    } else {
        msg
    }
}

/// rg's hint after a NUL in the pattern.
fn suggest_text(msg: String) -> String {
    if msg.contains("pattern contains \"\\0\"") {
        format!(
            "{msg}\n\nConsider enabling text mode with the --text flag (or -a for short). Otherwise,\nbinary detection is enabled and matching a NUL byte is impossible."
        )
    } else {
        msg
    }
}

fn search(
    pattern: &str,
    root: &Path,
    is_dir: bool,
    glob: Option<(&str, &Path)>,
    opts: &Options,
    ctx: &ToolContext,
) -> Result<Found, String> {
    // rg builds its globs before its matcher: a bad glob is reported first. `glob`: the glob and
    // the directory it is rooted at (rg's cwd).
    let mut overrides =
        ignore::overrides::OverrideBuilder::new(glob.map_or(ctx.cwd.as_path(), |g| g.1));
    if let Some((g, _)) = glob {
        overrides.add(g).map_err(|e| format!("rg: {e}"))?;
    }
    let overrides = overrides.build().map_err(|e| format!("rg: {e}"))?;
    let matcher = build_matcher(pattern, opts.literal, opts.ignore_case)?;
    let mut found = Found {
        files: Vec::new(),
        matches: Vec::new(),
        limit_reached: false,
    };
    let mut errors: Vec<String> = Vec::new();
    let aborted = || ctx.cancel.is_cancelled();
    if is_dir {
        // Past `ceil(limit)` matches nothing more is needed.
        let wanted = if opts.wanted() >= usize::MAX as f64 {
            usize::MAX
        } else {
            opts.wanted().ceil() as usize
        };
        let walker = Walker::new(root, &ctx.cwd, Flavor::Rg(overrides), wanted);
        let visitor = GrepVisitor {
            matcher: &matcher,
            opts,
            cancel: &ctx.cancel,
        };
        walker.run(
            &visitor,
            &ctx.cancel,
            &mut |item: Searched| match item.hits {
                Ok(hits) => {
                    let display = relative(&item.path, root);
                    found.add(item.path, display, hits, opts.wanted())
                }
                Err(e) => {
                    errors.push(e);
                    false
                }
            },
        );
    } else {
        // An explicit file is always searched, binary or not (NULs do not stop it).
        let mut searcher = SearcherBuilder::new().line_number(true).build();
        searcher.set_binary_detection(BinaryDetection::convert(0));
        let display = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match search_explicit(&mut searcher, &matcher, root, opts, &aborted) {
            Ok(hits) => {
                found.add(root.to_path_buf(), display, hits, opts.wanted());
            }
            Err(e) => errors.push(format!("rg: {}: {e}", root.display())),
        }
    }
    check_cancel(ctx)?;
    // rg exits with status 2 after an I/O error and the reference reports its stderr instead
    // of the matches (unless it stopped rg at the match limit first).
    if !errors.is_empty() && !found.limit_reached {
        return Err(errors.join("\n"));
    }
    Ok(found)
}

/// A walked file with matches, or an error in rg's words.
struct Searched {
    path: PathBuf,
    hits: Result<Hits, String>,
}

/// The lines one file contributed: line number and rg's JSON text (`None`: not UTF-8).
type Hits = Vec<(u64, Option<(String, bool)>)>;

impl Found {
    /// Append a file's lines up to the limit; true once the limit is reached.
    fn add(&mut self, path: PathBuf, display: String, hits: Hits, limit: f64) -> bool {
        if hits.is_empty() {
            return self.limit_reached;
        }
        let file = self.files.len();
        self.files.push((path, display));
        for (line, text) in hits {
            self.matches.push(Match { file, line, text });
            if self.matches.len() as f64 >= limit {
                self.limit_reached = true;
                break;
            }
        }
        self.limit_reached
    }
}

/// rg's per-entry work: search the regular files the walk meets (rg skips symlinks, devices,
/// FIFOs and sockets it meets while walking).
struct GrepVisitor<'a> {
    matcher: &'a RegexMatcher,
    opts: &'a Options,
    cancel: &'a CancelToken,
}

/// A search thread's searcher, the buffer it reads files into, and how it opens them.
struct SearchState {
    searcher: Searcher,
    buf: Vec<u8>,
    opener: DirOpener,
}

impl Visitor for GrepVisitor<'_> {
    type State = SearchState;
    type Out = Searched;

    fn state(&self) -> SearchState {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .heap_limit(Some(MAX_LINE_BYTES))
            .build();
        searcher.set_binary_detection(BinaryDetection::quit(0));
        SearchState {
            searcher,
            buf: vec![0; READ_AHEAD],
            opener: DirOpener::default(),
        }
    }

    fn visit(&self, state: &mut SearchState, entry: &Entry) -> Option<Searched> {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                return Some(Searched {
                    path: PathBuf::new(),
                    hits: Err(format!("rg: {e}")),
                });
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return None;
        }
        let stop = || self.cancel.is_cancelled();
        let hits = match search_walked(state, self.matcher, entry.path(), self.opts, &stop) {
            Ok(hits) if hits.is_empty() => return None,
            // A line over MAX_LINE_BYTES: the file is skipped (documented in docs/rpc.md).
            Err(e) if e.to_string().starts_with("configured allocation limit") => return None,
            r => r.map_err(|e| format!("rg: {}: {e}", entry.path().display())),
        };
        Some(Searched {
            path: entry.path().to_path_buf(),
            hits,
        })
    }

    fn weight(&self, out: &Searched) -> usize {
        out.hits.as_ref().map_or(0, Vec::len)
    }
}

/// Search a file met while walking. Its first [`READ_AHEAD`] bytes are read into the thread's
/// buffer first, so a small file costs one `read` and the one that finds its end (the searcher
/// alone also reads its first three bytes apart, to look for a BOM); the searcher then reads
/// exactly what it would read from the file ([`ReadAhead`]), so lines and binary detection are
/// the same.
fn search_walked(
    state: &mut SearchState,
    matcher: &RegexMatcher,
    path: &Path,
    opts: &Options,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Hits> {
    // The walk saw a regular file. Should it have been swapped for a FIFO or a device since,
    // O_NONBLOCK keeps `open` and `read` from blocking and binary detection stops at the first
    // NUL, so no `fstat` is spent per file here.
    let mut file = CancelRead::new(state.opener.open(path)?, stop);
    let buf = &mut state.buf;
    let mut len = 0;
    let mut end = false;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => {
                end = true;
                break;
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let mut sink = Collect::new(opts.wanted(), opts.rg_lines, stop);
    let reader = ReadAhead {
        head: &buf[..len],
        rest: file,
        end,
    };
    state.searcher.search_reader(matcher, reader, &mut sink)?;
    Ok(sink.hits)
}

/// Bytes of a walked file read ahead in one go (files up to this size are read whole): the
/// searcher's own buffer, so a binary file costs what it costs rg, one buffer up to its first
/// NUL (at 256 KiB, a tree of binaries cost twice rg's system time: issue 29).
const READ_AHEAD: usize = 64 * 1024;

/// A file whose first bytes are already in `head`: every read returns what the same read of
/// the file itself would (`min(wanted, left)` bytes), so the searcher fills its buffer the same
/// way.
struct ReadAhead<'a, R> {
    head: &'a [u8],
    rest: R,
    /// `rest` is at its end.
    end: bool,
}

impl<R: Read> Read for ReadAhead<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.head.is_empty() {
            return if self.end { Ok(0) } else { self.rest.read(buf) };
        }
        let n = buf.len().min(self.head.len());
        buf[..n].copy_from_slice(&self.head[..n]);
        self.head = &self.head[n..];
        if n == buf.len() || self.end {
            return Ok(n);
        }
        // The head ran out inside this read: the file gives the rest of it (an error shows on
        // the next read).
        match self.rest.read(&mut buf[n..]) {
            Ok(m) => {
                self.end = m == 0;
                Ok(n + m)
            }
            Err(_) => Ok(n),
        }
    }
}

fn search_explicit(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
    opts: &Options,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Hits> {
    let file = open_read(path, "search").map_err(|e| match e {
        Ok(msg) => std::io::Error::other(msg),
        Err(e) => e,
    })?;
    let len = file.metadata()?.len();
    let mut reader = CancelRead::new(file, stop);
    let mut sink = Collect::new(opts.wanted(), opts.rg_lines, stop);
    if len == 0 || len > EXPLICIT_SLICE_LIMIT {
        searcher.search_reader(matcher, reader, &mut sink)?;
    } else {
        let mut bytes = Vec::with_capacity(len as usize);
        (&mut reader)
            .take(EXPLICIT_SLICE_LIMIT)
            .read_to_end(&mut bytes)?;
        searcher.search_slice(matcher, &bytes, &mut sink)?;
    }
    Ok(sink.hits)
}

/// The sink: a file's matching lines, at most `limit` of them (no file needs more).
struct Collect<'a> {
    hits: Hits,
    limit: f64,
    /// `Options::rg_lines`.
    rg_lines: bool,
    stop: &'a dyn Fn() -> bool,
}

impl<'a> Collect<'a> {
    fn new(limit: f64, rg_lines: bool, stop: &'a dyn Fn() -> bool) -> Collect<'a> {
        Collect {
            hits: Vec::new(),
            limit,
            rg_lines,
            stop,
        }
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if (self.stop)() {
            return Err(std::io::Error::other(ABORTED));
        }
        if self.rg_lines {
            // pi 1.6.0: rg's line (bytes that are not UTF-8 decoded with replacements), its
            // terminator removed.
            let line = String::from_utf8_lossy(mat.bytes());
            let line = line.strip_suffix('\n').unwrap_or(&line);
            let line = line.strip_suffix('\r').unwrap_or(line);
            let text = truncate_line(line, GREP_MAX_LINE_LENGTH);
            self.hits.push((mat.line_number().unwrap_or(0), Some(text)));
            return Ok((self.hits.len() as f64) < self.limit);
        }
        let text = std::str::from_utf8(mat.bytes()).ok().map(|line| {
            // The reference: `\r\n` → `\n`, every `\r` removed, one final `\n` removed.
            let line = line.replace('\r', "");
            let line = line.strip_suffix('\n').unwrap_or(&line);
            truncate_line(line, GREP_MAX_LINE_LENGTH)
        });
        self.hits.push((mat.line_number().unwrap_or(0), text));
        Ok((self.hits.len() as f64) < self.limit)
    }
}

fn format_result(mut found: Found, opts: &Options) -> ToolResult {
    if found.matches.is_empty() {
        return Ok(text_output("No matches found"));
    }
    if opts.probe {
        // The match past the limit only proves that there are more.
        let limit = opts.limit as usize;
        found.limit_reached = found.matches.len() > limit;
        found.matches.truncate(limit);
    }
    let (out, lines_truncated) = if opts.rg_lines && opts.context > 0 {
        rg_context_lines(&found, opts.context as u64)
    } else {
        block_lines(&found, opts)
    };
    finish_result(out, lines_truncated, found.limit_reached, opts)
}

/// pi 1.6.0's lines with context: per file, the windows around its matches merged, each line
/// once, up to the file's last line; a line is a match line (`:`) only for a kept match.
fn rg_context_lines(found: &Found, c: u64) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut cut_any = false;
    let mut i = 0;
    while i < found.matches.len() {
        let file = found.matches[i].file;
        let mut lines = Vec::new();
        while i < found.matches.len() && found.matches[i].file == file {
            lines.push(found.matches[i].line);
            i += 1;
        }
        let ranges: Vec<(u64, u64)> = lines
            .iter()
            .map(|l| (l.saturating_sub(c).max(1), l.saturating_add(c)))
            .collect();
        let (path, display) = &found.files[file];
        let Some(fl) = FileLines::read(path, &ranges, false) else {
            for l in &lines {
                out.push(format!("{display}:{l}: (unable to read file)"));
            }
            continue;
        };
        let last = if fl.last_empty {
            fl.total - 1
        } else {
            fl.total
        };
        let mut next = 1;
        for (a, b) in ranges {
            for cur in a.max(next)..=b.min(last) {
                let (text, cut) = fl.get(cur);
                cut_any |= cut;
                let sep = if lines.contains(&cur) { ':' } else { '-' };
                out.push(format!("{display}{sep}{cur}{sep} {text}"));
                next = cur + 1;
            }
        }
    }
    (out, cut_any)
}

/// pi 0.73.1 / 0.87.1's lines: one block per match, context re-read from the file.
fn block_lines(found: &Found, opts: &Options) -> (Vec<String>, bool) {
    // Files whose lines must be re-read: context lines, or a matched line that is not UTF-8.
    let mut wanted: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for m in &found.matches {
        if opts.context > 0 || m.text.is_none() {
            let c = opts.context as u64;
            wanted
                .entry(m.file)
                .or_default()
                .push((m.line.saturating_sub(c).max(1), m.line.saturating_add(c)));
        }
    }
    let reread: BTreeMap<usize, Option<FileLines>> = wanted
        .into_iter()
        .map(|(f, ranges)| (f, FileLines::read(&found.files[f].0, &ranges, true)))
        .collect();

    let mut lines_truncated = false;
    let mut out: Vec<String> = Vec::new();
    for m in &found.matches {
        let display = &found.files[m.file].1;
        if let (0, Some((text, cut))) = (opts.context, &m.text) {
            lines_truncated |= *cut;
            out.push(format!("{display}:{}: {text}", m.line));
            continue;
        }
        match reread.get(&m.file).and_then(Option::as_ref) {
            None => out.push(format!("{display}:{}: (unable to read file)", m.line)),
            Some(lines) => {
                let c = opts.context as u64;
                let start = if c > 0 {
                    m.line.saturating_sub(c).max(1)
                } else {
                    m.line
                };
                let end = if c > 0 {
                    (m.line + c).min(lines.total)
                } else {
                    m.line
                };
                for cur in start..=end {
                    let (text, cut) = lines.get(cur);
                    lines_truncated |= cut;
                    let sep = if cur == m.line { ':' } else { '-' };
                    out.push(format!("{display}{sep}{cur}{sep} {text}"));
                }
            }
        }
    }
    (out, lines_truncated)
}

fn finish_result(
    out: Vec<String>,
    lines_truncated: bool,
    limit_reached: bool,
    opts: &Options,
) -> ToolResult {
    let mut notices = Vec::new();
    let mut details = Map::new();
    if limit_reached {
        notices.push(format!(
            "{} matches limit reached. Use limit={} for more, or refine pattern",
            js_num(opts.limit),
            js_num(opts.limit * 2.0)
        ));
        details.insert("matchLimitReached".into(), js_value(opts.limit));
    }
    let mut after = Vec::new();
    if lines_truncated {
        after.push(format!(
            "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        ));
    }
    let mut out = finish_listing(&out.join("\n"), notices, after, details);
    if lines_truncated {
        let mut d = out
            .details
            .take()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        d.insert("linesTruncated".into(), json!(true));
        out.details = Some(Value::Object(d));
    }
    Ok(out)
}

/// Lines of a file as the reference re-reads them (`readFile` as UTF-8, split on `\r\n`, `\r`
/// and `\n`), streamed in bounded memory: only lines inside the wanted ranges are kept (cut to
/// what a 500-unit display needs), plus the line count.
struct FileLines {
    total: u64,
    kept: BTreeMap<u64, (String, bool)>,
    /// The last line is empty (the file ends with a line break, or is empty).
    last_empty: bool,
}

impl FileLines {
    /// `None` when the file cannot be read (the reference then prints `(unable to read file)`).
    /// `cr_breaks`: `\r` ends a line too (the reference's re-read); without, lines end at `\n`
    /// and lose a `\r` before it (rg's lines).
    fn read(path: &Path, ranges: &[(u64, u64)], cr_breaks: bool) -> Option<FileLines> {
        let mut file = open_read(path, "search").ok()?;
        let wanted = |n: u64| ranges.iter().any(|(a, b)| *a <= n && n <= *b);
        let mut kept = BTreeMap::new();
        let mut line_no = 1u64;
        let mut cur: Vec<u8> = Vec::new();
        let mut after_cr = false;
        let mut empty = true;
        let mut buf = vec![0u8; 64 * 1024];
        let mut finish = |n: u64, cur: &mut Vec<u8>| {
            if wanted(n) {
                if !cr_breaks && cur.last() == Some(&b'\r') {
                    cur.pop();
                }
                // A line cut at KEEP_LINE_BYTES is over 500 UTF-16 units already, so the
                // display (and its `... [truncated]`) is the same as for the whole line.
                let text = String::from_utf8_lossy(cur);
                kept.insert(n, truncate_line(&text, GREP_MAX_LINE_LENGTH));
            }
            cur.clear();
        };
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            for &b in &buf[..n] {
                match b {
                    b'\n' if after_cr => after_cr = false,
                    b'\n' | b'\r' if b == b'\n' || cr_breaks => {
                        finish(line_no, &mut cur);
                        line_no += 1;
                        after_cr = b == b'\r';
                        empty = true;
                    }
                    _ => {
                        after_cr = false;
                        empty = false;
                        if cur.len() < KEEP_LINE_BYTES && wanted(line_no) {
                            cur.push(b);
                        }
                    }
                }
            }
        }
        finish(line_no, &mut cur);
        Some(FileLines {
            total: line_no,
            kept,
            last_empty: empty,
        })
    }

    /// Line `n` (1-based) for display; lines past the end are empty.
    fn get(&self, n: u64) -> (String, bool) {
        self.kept.get(&n).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(pattern: &str) -> String {
        build_matcher(pattern, false, false)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn regex_errors_are_rgs() {
        assert_eq!(
            err("a\\nb"),
            "rg: the literal \"\\n\" is not allowed in a regex\n\nConsider enabling multiline mode with the --multiline flag (or -U for short).\nWhen multiline mode is enabled, new line characters can be matched."
        );
        assert_eq!(
            err("(?<=a)b"),
            "rg: regex parse error:\n    (?:(?<=a)b)\n       ^^^^\nerror: look-around, including look-ahead and look-behind, is not supported"
        );
        assert!(build_matcher("(?i)\\p{Greek}\\w+", false, false).is_ok());
        assert!(build_matcher("a(b", true, false).is_ok());
    }

    #[test]
    fn reread_lines_split_like_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"one\r\ntwo\rthree\nfour\xff\n").unwrap();
        let l = FileLines::read(&p, &[(1, 10)], true).unwrap();
        assert_eq!(l.total, 5);
        assert_eq!(l.get(2).0, "two");
        assert_eq!(l.get(3).0, "three");
        assert_eq!(l.get(4).0, "four\u{fffd}");
        assert_eq!(l.get(5).0, "");
        std::fs::write(&p, "x".repeat(10_000)).unwrap();
        let l = FileLines::read(&p, &[(1, 1)], true).unwrap();
        let (text, cut) = l.get(1);
        assert!(cut);
        assert_eq!(text, format!("{}... [truncated]", "x".repeat(500)));
    }
}
