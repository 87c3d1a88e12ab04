//! The `edit` tool: exact-text replacements in one file (the reference 0.73 multi-edit form,
//! `edits: [{oldText, newText}]`, plus the legacy top-level `oldText`/`newText`).
//!
//! Every edit is matched against the original content (after BOM stripping and CRLF → LF); if
//! an exact match fails, a fuzzy match (NFKC, ignoring trailing whitespace and Unicode
//! quote/dash/space variants) is tried, and then the whole file is processed in that normalised form, as the
//! reference does. Line endings and the BOM are restored on write. The result carries the
//! reference's numbered diff (`details.diff`) and the first changed line.

use std::io::Read;

use serde_json::{Value, json};

use super::paths::approved_target;
use super::regular::{CancelRead, cancelled, open_read, refuse_special, write_regular};
use crate::protocol::FuzzyRewrite;

use super::{Tool, ToolContext, ToolOutput, ToolResult, arg_str, check_cancel, text_output};

pub struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn description(&self) -> String {
        "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Make precise file edits with exact text replacement, including multiple disjoint edits in one call"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        super::schema(
            &SCHEMA,
            r#"{
            "type": "object",
            "required": ["path", "edits"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["oldText", "newText"],
                        "properties": {
                            "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
                            "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
                        },
                        "additionalProperties": false
                    },
                    "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead."
                }
            },
            "additionalProperties": false
        }"#,
        )
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let path = arg_str(args, "path").ok_or("Invalid edit arguments.")?;
        let edits = parse_edits(args)?;
        check_cancel(ctx)?;
        let abs = approved_target(path, &ctx.cwd, ctx.approved_target.as_deref())?;
        // A FIFO or device passes the reference's access check and then hangs its readFile.
        if let Some(e) = refuse_special("edit", &abs) {
            return Err(e);
        }
        // pi checks `access(R_OK | W_OK)` first: a path that is not there is `Could not edit
        // file: <path>. Error code: ENOENT.`; a directory passes it and fails to be read.
        match std::fs::metadata(&abs) {
            Err(e) => {
                let code = super::paths::node_code(&e).map_or("ENOENT", |(c, _)| c);
                return Err(format!("Could not edit file: {path}. Error code: {code}."));
            }
            Ok(m) if m.is_dir() => {
                return Err("EISDIR: illegal operation on a directory, read".to_string());
            }
            Ok(_) => {}
        }
        let writable = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&abs);
        // A file that exists but may not be written (permissions, a read-only mount, the
        // sandbox) is said to be so, as the write would say it.
        let not_editable = |e: &std::io::Error| {
            let code = super::paths::node_code(e).map_or("ENOENT", |(c, _)| c);
            format!("Could not edit file: {path}. Error code: {code}.")
        };
        if let Err(e) = &writable {
            if matches!(e.raw_os_error(), Some(1 | 13 | 30)) {
                return Err(super::paths::node_error(e, "open", &abs));
            }
            return Err(not_editable(e));
        }
        let mut bytes = Vec::new();
        let file = open_read(&abs, "edit").map_err(|e| match e {
            Ok(special) => special,
            Err(e) => not_editable(&e),
        })?;
        let stop = cancelled(&ctx.cancel);
        CancelRead::new(file, &stop)
            .read_to_end(&mut bytes)
            .map_err(|e| {
                if ctx.cancel.is_cancelled() {
                    super::ABORTED.to_string()
                } else {
                    super::paths::node_error(&e, "read", &abs)
                }
            })?;
        check_cancel(ctx)?;
        let raw = String::from_utf8_lossy(&bytes);
        let edited = edit_text(&raw, &edits, path, ctx.profile.edit_fuzzy_rewrite)?;
        check_cancel(ctx)?;
        write_regular(&abs, edited.written.as_bytes()).map_err(|e| match e {
            Ok(special) => special,
            Err(e) => super::paths::node_error(&e, "open", &abs),
        })?;
        check_cancel(ctx)?;
        Ok(edited.output(path, ctx.profile))
    }
}

/// A file's text after `edit`: what to write, and what the result reports.
pub struct Edited {
    /// The new text with the file's BOM and line endings.
    pub written: String,
    /// The text the edits were matched against and the result, both with `\n` line ends.
    base: String,
    new_content: String,
    count: usize,
}

/// pi's `edit` on a file's whole text (pure): a leading BOM kept, the edits applied to the
/// text with `\n` line ends, and CRLF restored when the file used it.
pub fn edit_text(
    raw: &str,
    edits: &[Edit],
    path: &str,
    fuzzy_rewrite: crate::protocol::FuzzyRewrite,
) -> Result<Edited, String> {
    let (bom, content) = match raw.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", raw),
    };
    let crlf = detect_crlf(content);
    let normalized = normalize_to_lf(content);
    let (base, new_content) = apply_edits_as(&normalized, edits, path, fuzzy_rewrite)?;
    let restored = if crlf {
        new_content.replace('\n', "\r\n")
    } else {
        new_content.clone()
    };
    Ok(Edited {
        written: format!("{bom}{restored}"),
        base,
        new_content,
        count: edits.len(),
    })
}

impl Edited {
    /// The tool's result: the count of blocks, the diff (and the patch where the version has it).
    pub fn output(&self, path: &str, profile: &crate::protocol::Tools) -> ToolOutput {
        let (diff, first_changed) = diff_string(&self.base, &self.new_content, 4);
        let mut out = text_output(format!(
            "Successfully replaced {} block(s) in {path}.",
            self.count
        ));
        let mut details = json!({"diff": diff});
        if profile.edit_patch {
            details["patch"] = json!(unified_patch(path, &self.base, &self.new_content, 4));
        }
        if let Some(line) = first_changed {
            details["firstChangedLine"] = json!(line);
        }
        out.details = Some(details);
        out
    }
}

/// One replacement.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    pub old_text: String,
    pub new_text: String,
}

/// The reference's `prepareArguments`: `edits` given as a JSON string is parsed; a single edit
/// object becomes a one-element array; top-level `oldText`/`newText` become one more edit.
pub fn prepare_edit_arguments(args: &Value) -> Value {
    let Some(obj) = args.as_object() else {
        return args.clone();
    };
    let mut obj = obj.clone();
    if let Some(Value::String(s)) = obj.get("edits") {
        match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Array(_)) => {
                obj.insert("edits".into(), v);
            }
            Ok(v) if is_single_edit(&v) => {
                obj.insert("edits".into(), Value::Array(vec![v]));
            }
            _ => {}
        }
    } else if obj.get("edits").is_some_and(is_single_edit) {
        if let Some(v) = obj.remove("edits") {
            obj.insert("edits".into(), Value::Array(vec![v]));
        }
    }
    let (Some(Value::String(old)), Some(Value::String(new))) =
        (obj.get("oldText"), obj.get("newText"))
    else {
        return Value::Object(obj);
    };
    let extra = json!({"oldText": old, "newText": new});
    let mut edits = match obj.get("edits") {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    edits.push(extra);
    obj.remove("oldText");
    obj.remove("newText");
    obj.insert("edits".into(), Value::Array(edits));
    Value::Object(obj)
}

fn is_single_edit(v: &Value) -> bool {
    v.get("oldText").is_some_and(Value::is_string) && v.get("newText").is_some_and(Value::is_string)
}

pub(crate) fn parse_edits(args: &Value) -> Result<Vec<Edit>, String> {
    let list = match args.get("edits") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => {
            return Err(
                "Edit tool input is invalid. edits must contain at least one replacement."
                    .to_string(),
            );
        }
    };
    list.iter()
        .map(|e| {
            match (
                e.get("oldText").and_then(Value::as_str),
                e.get("newText").and_then(Value::as_str),
            ) {
                (Some(o), Some(n)) => Ok(Edit {
                    old_text: o.to_string(),
                    new_text: n.to_string(),
                }),
                _ => Err("Invalid edit arguments.".to_string()),
            }
        })
        .collect()
}

/// CRLF if the first `\r\n` comes before (is) the first `\n`.
pub fn detect_crlf(content: &str) -> bool {
    match (content.find("\r\n"), content.find('\n')) {
        (Some(c), Some(l)) => c < l,
        _ => false,
    }
}

pub fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Fuzzy form, the reference's `normalizeForFuzzyMatch`: NFKC, trailing whitespace per line
/// removed (JavaScript's `trimEnd`), smart quotes, dashes and special spaces replaced by ASCII.
pub fn normalize_fuzzy(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let nfkc: String = text.nfkc().collect();
    let trimmed: Vec<&str> = nfkc.split('\n').map(js_trim_end).collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}'..='\u{201b}' => '\'',
            '\u{201c}'..='\u{201f}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{a0}' | '\u{2002}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// JavaScript's `trimEnd`: white space and line terminators (which include U+FEFF but not
/// U+0085, unlike Rust's `trim_end`).
fn js_trim_end(s: &str) -> &str {
    s.trim_end_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}')
}

/// Apply all edits to LF content; returns `(base, new)` where `base` is the content the edits
/// were applied to (the fuzzy form when any edit needed fuzzy matching).
pub fn apply_edits(content: &str, edits: &[Edit], path: &str) -> Result<(String, String), String> {
    apply_edits_as(content, edits, path, FuzzyRewrite::WholeFile)
}

/// [`apply_edits`] writing a fuzzy match as `rewrite` says: with
/// [`FuzzyRewrite::TouchedLines`] (pi 0.87.1) an edit that needed fuzzy matching rewrites only
/// the lines it touches (from the fuzzy form); every other line keeps its original bytes, and
/// `base` is the original content.
pub fn apply_edits_as(
    content: &str,
    edits: &[Edit],
    path: &str,
    rewrite: FuzzyRewrite,
) -> Result<(String, String), String> {
    let n = edits.len();
    let edits: Vec<Edit> = edits
        .iter()
        .map(|e| Edit {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
        })
        .collect();
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(if n == 1 {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            });
        }
    }
    let fuzzy_content = normalize_fuzzy(content);
    let needs_fuzzy = edits.iter().any(|e| !content.contains(&e.old_text));
    let base = if needs_fuzzy {
        fuzzy_content.clone()
    } else {
        content.to_string()
    };
    let mut matched: Vec<(usize, usize, usize)> = Vec::new(); // (start, len, edit index)
    for (i, e) in edits.iter().enumerate() {
        let fuzzy_old = normalize_fuzzy(&e.old_text);
        let found = match base.find(&e.old_text) {
            Some(idx) => Some((idx, e.old_text.len())),
            None => normalize_fuzzy(&base)
                .find(&fuzzy_old)
                .map(|idx| (idx, fuzzy_old.len())),
        };
        let Some((start, len)) = found else {
            return Err(if n == 1 {
                format!(
                    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )
            } else {
                format!(
                    "Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            });
        };
        let occurrences = if fuzzy_old.is_empty() {
            0
        } else {
            normalize_fuzzy(&base).matches(&fuzzy_old).count()
        };
        if occurrences > 1 {
            return Err(if n == 1 {
                format!(
                    "Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            } else {
                format!(
                    "Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
                )
            });
        }
        matched.push((start, len, i));
    }
    crate::sort::sort_by(&mut matched, Ord::cmp);
    for w in matched.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(format!(
                "edits[{}] and edits[{}] overlap in {path}. Merge them into one edit or target disjoint regions.",
                w[0].2, w[1].2
            ));
        }
    }
    if rewrite == FuzzyRewrite::TouchedLines {
        let new_content = if needs_fuzzy {
            preserve_unchanged_lines(content, &base, &matched, &edits)?
        } else {
            replace_all(&base, &matched, &edits, path)?
        };
        if new_content == content {
            return Err(no_change_error(path, n));
        }
        return Ok((content.to_string(), new_content));
    }
    let mut new_content = String::with_capacity(base.len());
    let mut pos = 0;
    for (start, len, i) in &matched {
        // Fuzzy matches in a normalised base may land off a char boundary only if the base
        // changed under us; guard anyway.
        let (Some(before), Some(_)) = (base.get(pos..*start), base.get(*start..start + len)) else {
            return Err(format!("Could not apply edits[{i}] in {path}."));
        };
        new_content.push_str(before);
        new_content.push_str(&edits[*i].new_text);
        pos = start + len;
    }
    new_content.push_str(base.get(pos..).unwrap_or(""));
    if new_content == base {
        return Err(no_change_error(path, n));
    }
    Ok((base, new_content))
}

fn no_change_error(path: &str, n: usize) -> String {
    if n == 1 {
        format!(
            "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
        )
    } else {
        format!("No changes made to {path}. The replacements produced identical content.")
    }
}

/// `base` with the sorted, disjoint matches `(start, len, edit)` replaced.
fn replace_all(
    base: &str,
    matched: &[(usize, usize, usize)],
    edits: &[Edit],
    path: &str,
) -> Result<String, String> {
    let mut out = String::with_capacity(base.len());
    let mut pos = 0;
    for (start, len, i) in matched {
        let (Some(before), Some(_)) = (base.get(pos..*start), base.get(*start..start + len)) else {
            return Err(format!("Could not apply edits[{i}] in {path}."));
        };
        out.push_str(before);
        out.push_str(&edits[*i].new_text);
        pos = start + len;
    }
    out.push_str(base.get(pos..).unwrap_or(""));
    Ok(out)
}

/// Lines with their `\n`, as JavaScript's `/[^\n]*\n|[^\n]+/g` finds them (an empty last piece
/// is no line), as byte ranges.
fn line_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if b == b'\n' {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < s.len() {
        spans.push((start, s.len()));
    }
    spans
}

/// pi 0.87.1's `applyReplacementsPreservingUnchangedLines`: the replacements were matched in
/// `base` (the fuzzy form of `original`, line for line); each is widened to the lines it touches,
/// those lines are rewritten from `base`, all other lines are copied from `original`.
fn preserve_unchanged_lines(
    original: &str,
    base: &str,
    matched: &[(usize, usize, usize)],
    edits: &[Edit],
) -> Result<String, String> {
    let orig = line_spans(original);
    let lines = line_spans(base);
    if orig.len() != lines.len() {
        return Err(
            "Cannot preserve unchanged lines because the base content has a different line count."
                .to_string(),
        );
    }
    const OUTSIDE: &str = "Replacement range is outside the base content.";
    // Groups of replacements (start, len, edit) over the line range [first, end).
    type Group = (usize, usize, Vec<(usize, usize, usize)>);
    let mut groups: Vec<Group> = Vec::new();
    for &(start, len, i) in matched {
        let first = lines
            .iter()
            .position(|(s, e)| start >= *s && start < *e)
            .ok_or(OUTSIDE)?;
        let mut last = first;
        while last < lines.len() && lines[last].1 < start + len {
            last += 1;
        }
        if last >= lines.len() {
            return Err(OUTSIDE.to_string());
        }
        match groups.last_mut() {
            Some(g) if first < g.1 => {
                g.1 = g.1.max(last + 1);
                g.2.push((start, len, i));
            }
            _ => groups.push((first, last + 1, vec![(start, len, i)])),
        }
    }
    let mut out = String::with_capacity(original.len());
    let mut next = 0;
    for (first, end, reps) in &groups {
        for (s, e) in &orig[next..*first] {
            out.push_str(&original[*s..*e]);
        }
        let (from, to) = (lines[*first].0, lines[*end - 1].1);
        let mut piece = base[from..to].to_string();
        for (start, len, i) in reps.iter().rev() {
            let at = start - from;
            if piece.get(at..at + len).is_none() {
                return Err(OUTSIDE.to_string());
            }
            piece.replace_range(at..at + len, &edits[*i].new_text);
        }
        out.push_str(&piece);
        next = *end;
    }
    for (s, e) in &orig[next..] {
        out.push_str(&original[*s..*e]);
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Same,
    Removed,
    Added,
}

/// Lines with their `\n` kept, like jsdiff's line tokens.
fn line_tokens(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

/// A line diff as runs of `(kind, lines)`; within a change, removals come before additions.
fn diff_parts<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Kind, Vec<&'a str>)> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let am = &a[prefix..a.len() - suffix];
    let bm = &b[prefix..b.len() - suffix];
    let mut ops: Vec<(Kind, &str)> = a[..prefix].iter().map(|l| (Kind::Same, *l)).collect();
    if am.len().saturating_mul(bm.len()) <= 4_000_000 {
        // LCS table on suffixes.
        let w = bm.len() + 1;
        let mut t = vec![0u32; (am.len() + 1) * w];
        for i in (0..am.len()).rev() {
            for j in (0..bm.len()).rev() {
                t[i * w + j] = if am[i] == bm[j] {
                    t[(i + 1) * w + j + 1] + 1
                } else {
                    t[(i + 1) * w + j].max(t[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < am.len() || j < bm.len() {
            if i < am.len() && j < bm.len() && am[i] == bm[j] {
                ops.push((Kind::Same, am[i]));
                i += 1;
                j += 1;
            } else if j >= bm.len() || (i < am.len() && t[(i + 1) * w + j] >= t[i * w + j + 1]) {
                ops.push((Kind::Removed, am[i]));
                i += 1;
            } else {
                ops.push((Kind::Added, bm[j]));
                j += 1;
            }
        }
    } else {
        ops.extend(am.iter().map(|l| (Kind::Removed, *l)));
        ops.extend(bm.iter().map(|l| (Kind::Added, *l)));
    }
    ops.extend(a[a.len() - suffix..].iter().map(|l| (Kind::Same, *l)));
    // Group: common runs, and change runs split into removed-then-added.
    let mut parts: Vec<(Kind, Vec<&str>)> = Vec::new();
    let mut k = 0;
    while k < ops.len() {
        if ops[k].0 == Kind::Same {
            let mut run = Vec::new();
            while k < ops.len() && ops[k].0 == Kind::Same {
                run.push(ops[k].1);
                k += 1;
            }
            parts.push((Kind::Same, run));
        } else {
            let (mut rem, mut add) = (Vec::new(), Vec::new());
            while k < ops.len() && ops[k].0 != Kind::Same {
                if ops[k].0 == Kind::Removed {
                    rem.push(ops[k].1)
                } else {
                    add.push(ops[k].1)
                }
                k += 1;
            }
            if !rem.is_empty() {
                parts.push((Kind::Removed, rem));
            }
            if !add.is_empty() {
                parts.push((Kind::Added, add));
            }
        }
    }
    parts
}

/// pi 0.87.1's `details.patch`: jsdiff's `createTwoFilesPatch(path, path, old, new)` with
/// `context` lines and file headers only (`--- path`, `+++ path`, hunks, `\ No newline at end
/// of file` where a side lacks its final newline).
pub fn unified_patch(path: &str, old: &str, new: &str, context: usize) -> String {
    let a = line_tokens(old);
    let b = line_tokens(new);
    let parts = diff_parts(&a, &b);
    struct Hunk {
        old_start: usize,
        old_lines: usize,
        new_start: usize,
        new_lines: usize,
        lines: Vec<String>,
    }
    let mut hunks: Vec<Hunk> = Vec::new();
    let (mut old_start, mut new_start) = (0usize, 0usize);
    let mut cur: Vec<String> = Vec::new();
    let (mut old_line, mut new_line) = (1usize, 1usize);
    let n = parts.len();
    for (i, (kind, lines)) in parts.iter().enumerate() {
        if *kind != Kind::Same {
            if old_start == 0 {
                old_start = old_line;
                new_start = new_line;
                if i > 0 {
                    let prev = &parts[i - 1].1;
                    cur = prev[prev.len().saturating_sub(context)..]
                        .iter()
                        .map(|l| format!(" {l}"))
                        .collect();
                    old_start -= cur.len();
                    new_start -= cur.len();
                }
            }
            let sign = if *kind == Kind::Added { '+' } else { '-' };
            cur.extend(lines.iter().map(|l| format!("{sign}{l}")));
            if *kind == Kind::Added {
                new_line += lines.len();
            } else {
                old_line += lines.len();
            }
        } else {
            if old_start != 0 {
                // jsdiff appends an empty part: the last real part is at n - 1.
                if lines.len() <= context * 2 && i + 1 < n {
                    cur.extend(lines.iter().map(|l| format!(" {l}")));
                } else {
                    let size = lines.len().min(context);
                    cur.extend(lines[..size].iter().map(|l| format!(" {l}")));
                    hunks.push(Hunk {
                        old_start,
                        old_lines: old_line - old_start + size,
                        new_start,
                        new_lines: new_line - new_start + size,
                        lines: std::mem::take(&mut cur),
                    });
                    old_start = 0;
                    new_start = 0;
                }
            }
            old_line += lines.len();
            new_line += lines.len();
        }
    }
    if old_start != 0 {
        hunks.push(Hunk {
            old_start,
            old_lines: old_line - old_start,
            new_start,
            new_lines: new_line - new_start,
            lines: cur,
        });
    }
    let mut out = format!("--- {path}\n+++ {path}\n");
    for mut h in hunks {
        if h.old_lines == 0 {
            h.old_start = h.old_start.saturating_sub(1);
        }
        if h.new_lines == 0 {
            h.new_start = h.new_start.saturating_sub(1);
        }
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            h.old_start, h.old_lines, h.new_start, h.new_lines
        ));
        for l in &h.lines {
            match l.strip_suffix('\n') {
                Some(body) => {
                    out.push_str(body);
                    out.push('\n');
                }
                None => {
                    out.push_str(l);
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
    }
    out
}

/// The reference's `generateDiffString`: numbered lines (`+N`, `-N`, ` N`), `context` lines of
/// context around changes, ` ...` for skipped runs. Returns the first changed line (new file).
pub fn diff_string(old: &str, new: &str, context: usize) -> (String, Option<usize>) {
    let a = line_tokens(old);
    let b = line_tokens(new);
    let parts = diff_parts(&a, &b);
    let width = old
        .split('\n')
        .count()
        .max(new.split('\n').count())
        .to_string()
        .len();
    let mut out: Vec<String> = Vec::new();
    let (mut old_n, mut new_n) = (1usize, 1usize);
    let mut last_was_change = false;
    let mut first_changed = None;
    let strip = |l: &str| l.strip_suffix('\n').unwrap_or(l).to_string();
    let skip_line = format!(" {} ...", " ".repeat(width));
    for (idx, (kind, lines)) in parts.iter().enumerate() {
        match kind {
            Kind::Added | Kind::Removed => {
                first_changed.get_or_insert(new_n);
                for l in lines {
                    if *kind == Kind::Added {
                        out.push(format!("+{new_n:>width$} {}", strip(l)));
                        new_n += 1;
                    } else {
                        out.push(format!("-{old_n:>width$} {}", strip(l)));
                        old_n += 1;
                    }
                }
                last_was_change = true;
            }
            Kind::Same => {
                let next_is_change = parts.get(idx + 1).is_some_and(|p| p.0 != Kind::Same);
                let show =
                    |ls: &[&str], out: &mut Vec<String>, old_n: &mut usize, new_n: &mut usize| {
                        for l in ls {
                            out.push(format!(" {:>width$} {}", *old_n, strip(l)));
                            *old_n += 1;
                            *new_n += 1;
                        }
                    };
                let len = lines.len();
                if last_was_change && next_is_change {
                    if len <= context * 2 {
                        show(lines, &mut out, &mut old_n, &mut new_n);
                    } else {
                        show(&lines[..context], &mut out, &mut old_n, &mut new_n);
                        out.push(skip_line.clone());
                        old_n += len - context * 2;
                        new_n += len - context * 2;
                        show(&lines[len - context..], &mut out, &mut old_n, &mut new_n);
                    }
                } else if last_was_change {
                    show(&lines[..len.min(context)], &mut out, &mut old_n, &mut new_n);
                    if len > context {
                        out.push(skip_line.clone());
                        old_n += len - context;
                        new_n += len - context;
                    }
                } else if next_is_change {
                    let skipped = len.saturating_sub(context);
                    if skipped > 0 {
                        out.push(skip_line.clone());
                        old_n += skipped;
                        new_n += skipped;
                    }
                    show(&lines[skipped..], &mut out, &mut old_n, &mut new_n);
                } else {
                    old_n += len;
                    new_n += len;
                }
                last_was_change = false;
            }
        }
    }
    (out.join("\n"), first_changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_matches_reference_example() {
        let (d, first) = diff_string("alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n", 4);
        assert_eq!(d, " 1 alpha\n-2 beta\n+2 BETA\n 3 gamma");
        assert_eq!(first, Some(2));
    }

    #[test]
    fn unified_patch_like_jsdiff() {
        assert_eq!(
            unified_patch(
                "notes.txt",
                "alpha\nbeta\ngamma\n",
                "alpha\nBETA\ngamma\n",
                4
            ),
            "--- notes.txt\n+++ notes.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"
        );
        // No final newline on either side.
        assert_eq!(
            unified_patch("f", "a\nb", "a\nc", 4),
            "--- f\n+++ f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
        );
        // Two changes far apart: two hunks with 4 lines of context each.
        let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l2\n", "L2\n").replace("l19\n", "L19\n");
        let p = unified_patch("f", &old, &new, 4);
        assert!(
            p.starts_with("--- f\n+++ f\n@@ -1,6 +1,6 @@\n l1\n-l2\n+L2\n l3\n"),
            "{p}"
        );
        assert!(p.contains("@@ -15,6 +15,6 @@\n l15\n"), "{p}");
        assert!(p.ends_with("+L19\n l20\n"), "{p}");
    }

    #[test]
    fn diff_skips_far_context() {
        let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l10\n", "X\n");
        let (d, _) = diff_string(&old, &new, 4);
        let expected = "    ...\n  6 l6\n  7 l7\n  8 l8\n  9 l9\n-10 l10\n+10 X\n 11 l11\n 12 l12\n 13 l13\n 14 l14\n    ...";
        assert_eq!(d, expected);
    }

    #[test]
    fn legacy_arguments_become_edits() {
        let v = prepare_edit_arguments(&json!({"path":"a","oldText":"x","newText":"y"}));
        assert_eq!(
            v,
            json!({"path":"a","edits":[{"oldText":"x","newText":"y"}]})
        );
        let v = prepare_edit_arguments(
            &json!({"path":"a","edits":"[{\"oldText\":\"x\",\"newText\":\"y\"}]"}),
        );
        assert_eq!(
            v,
            json!({"path":"a","edits":[{"oldText":"x","newText":"y"}]})
        );
    }

    #[test]
    fn apply_errors() {
        let e = |o: &str, n: &str| Edit {
            old_text: o.into(),
            new_text: n.into(),
        };
        assert_eq!(
            apply_edits("a a", &[e("a", "b")], "f").unwrap_err(),
            "Found 2 occurrences of the text in f. The text must be unique. Please provide more context to make it unique."
        );
        assert_eq!(
            apply_edits("abc", &[e("ab", "x"), e("bc", "y")], "f").unwrap_err(),
            "edits[0] and edits[1] overlap in f. Merge them into one edit or target disjoint regions."
        );
        assert_eq!(
            apply_edits("abc", &[e("", "y")], "f").unwrap_err(),
            "oldText must not be empty in f."
        );
        let (_, new) = apply_edits(
            "x = \u{201c}q\u{201d};  \ny\n",
            &[e("x = \"q\";", "x = 1;")],
            "f",
        )
        .unwrap();
        assert_eq!(new, "x = 1;\ny\n");
        let (_, new) = apply_edits("a\nb\nc\n", &[e("a", "A"), e("c", "C")], "f").unwrap();
        assert_eq!(new, "A\nb\nC\n");
    }
}
