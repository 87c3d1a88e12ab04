//! Output truncation shared by every tool (the reference's `truncate.ts`).
//!
//! Tool output sent to the model is capped at [`DEFAULT_MAX_LINES`] lines and [`DEFAULT_MAX_BYTES`]
//! bytes. `read`, `grep`, `find` and `ls` keep the head of the text, `bash` keeps the tail. Lines
//! are the pieces of `text.split('\n')` (a trailing newline yields an empty last line that
//! counts); sizes are UTF-8 bytes. The result is serialised into tool `details.truncation` with the
//! reference's field names and order. Everything here is pure.

use serde_json::{Value, json};

use crate::message::Content;

pub const DEFAULT_MAX_LINES: usize = 2000;
pub const DEFAULT_MAX_BYTES: usize = 51200;
/// Longest line `grep` shows before cutting it.
pub const GREP_MAX_LINE_LENGTH: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruncatedBy {
    Lines,
    Bytes,
}

/// The reference's `TruncationResult`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub content: String,
    pub truncated: bool,
    pub truncated_by: Option<TruncatedBy>,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    pub last_line_partial: bool,
    pub first_line_exceeds_limit: bool,
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Truncation {
    /// `details.truncation` as the reference serialises it (content included).
    pub fn to_json(&self) -> Value {
        json!({
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": match self.truncated_by {
                None => Value::Null,
                Some(TruncatedBy::Lines) => json!("lines"),
                Some(TruncatedBy::Bytes) => json!("bytes"),
            },
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        })
    }

    fn untouched(content: &str, lines: usize, max_lines: usize, max_bytes: usize) -> Truncation {
        Truncation {
            content: content.to_string(),
            truncated: false,
            truncated_by: None,
            total_lines: lines,
            total_bytes: content.len(),
            output_lines: lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines,
            max_bytes,
        }
    }
}

/// `formatSize`: `512B`, `50.0KB`, `1.5MB`.
pub fn format_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// Keep whole lines from the start.
pub fn truncate_head(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines: Vec<&str> = content.split('\n').collect();
    let total_lines = lines.len();
    if total_lines <= max_lines && content.len() <= max_bytes {
        return Truncation::untouched(content, total_lines, max_lines, max_bytes);
    }
    let mut result = Truncation::untouched("", 0, max_lines, max_bytes);
    result.total_lines = total_lines;
    result.total_bytes = content.len();
    result.truncated = true;
    if lines[0].len() > max_bytes {
        result.truncated_by = Some(TruncatedBy::Bytes);
        result.first_line_exceeds_limit = true;
        return result;
    }
    let mut kept = 0usize;
    let mut bytes = 0usize;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let cost = line.len() + usize::from(i > 0);
        if bytes + cost > max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        bytes += cost;
        kept += 1;
    }
    if kept >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    result.content = lines[..kept].join("\n");
    result.truncated_by = Some(by);
    result.output_lines = kept;
    result.output_bytes = result.content.len();
    result
}

/// How lines are counted (the profile's `tools.line_counting`).
pub use crate::protocol::LineCounting;

impl LineCounting {
    fn lines(self, content: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = content.split('\n').collect();
        if self == LineCounting::IgnoreFinalNewline && content.ends_with('\n') {
            lines.pop();
        }
        if self == LineCounting::IgnoreFinalNewline && content.is_empty() {
            lines.clear();
        }
        lines
    }
}

/// Keep whole lines from the end; a single last line longer than `max_bytes` keeps its tail.
pub fn truncate_tail(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    truncate_tail_counting(content, max_lines, max_bytes, LineCounting::Split)
}

/// [`truncate_tail`] with the given line counting.
pub fn truncate_tail_counting(
    content: &str,
    max_lines: usize,
    max_bytes: usize,
    counting: LineCounting,
) -> Truncation {
    let lines: Vec<&str> = counting.lines(content);
    let total_lines = lines.len();
    if total_lines <= max_lines && content.len() <= max_bytes {
        return Truncation::untouched(content, total_lines, max_lines, max_bytes);
    }
    let mut result = Truncation::untouched("", 0, max_lines, max_bytes);
    result.total_lines = total_lines;
    result.total_bytes = content.len();
    result.truncated = true;
    let mut start = lines.len();
    let mut bytes = 0usize;
    let mut by = TruncatedBy::Lines;
    let mut partial: Option<&str> = None;
    while start > 0 && lines.len() - start < max_lines {
        let line = lines[start - 1];
        let cost = line.len() + usize::from(start < lines.len());
        if bytes + cost > max_bytes {
            by = TruncatedBy::Bytes;
            if start == lines.len() {
                partial = Some(tail_bytes(line, max_bytes));
            }
            break;
        }
        bytes += cost;
        start -= 1;
    }
    if let Some(tail) = partial {
        result.content = tail.to_string();
        result.output_lines = 1;
        result.last_line_partial = true;
        bytes = tail.len();
    } else {
        result.content = lines[start..].join("\n");
        result.output_lines = lines.len() - start;
    }
    if result.output_lines >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    result.truncated_by = Some(by);
    result.output_bytes = result.content.len();
    result
}

/// The last `max` bytes of `s`, moved forward to a character boundary.
fn tail_bytes(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Cut one line to `max_chars` characters (UTF-16 units in the reference; chars here), marking
/// the cut with `... [truncated]`. Returns whether it was cut.
/// `truncateLine`: lines longer than `max_units` UTF-16 code units (JavaScript's `length`) are cut
/// there and marked. A surrogate pair straddling the cut is dropped whole (JavaScript would keep
/// its lone first half, which a Rust string cannot hold).
pub fn truncate_line(line: &str, max_units: usize) -> (String, bool) {
    let mut units = 0;
    for (idx, c) in line.char_indices() {
        let next = units + c.len_utf16();
        if next > max_units {
            return (format!("{}... [truncated]", &line[..idx]), true);
        }
        units = next;
    }
    (line.to_string(), false)
}

/// The text blocks of a remote tool's result (`owner`: `MCP tool`, `extension tool`) held to
/// the limits every tool's output has ([`DEFAULT_MAX_LINES`] lines, [`DEFAULT_MAX_BYTES`]),
/// keeping the head: one shared cut for every output pith does not produce itself. Within them
/// nothing changes; over them the texts are joined (one per line) and cut, the cut text takes
/// the first text block's place followed by a note, and the returned truncation (the caller's
/// `details.truncation`) tells how.
pub fn bound_text(content: Vec<Content>, owner: &str) -> (Vec<Content>, Option<Value>) {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let bytes: usize = texts.iter().map(|t| t.len() + 1).sum();
    let lines: usize = texts.iter().map(|t| t.split('\n').count()).sum();
    if bytes <= DEFAULT_MAX_BYTES + 1 && lines <= DEFAULT_MAX_LINES {
        return (content, None);
    }
    let joined = texts.join("\n");
    let t = truncate_head(&joined, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    if !t.truncated {
        return (content, None);
    }
    let note = if t.first_line_exceeds_limit {
        format!(
            "[The {owner}'s first line is {}, over the {} limit: output not shown]",
            format_size(joined.split('\n').next().map_or(0, str::len)),
            format_size(DEFAULT_MAX_BYTES)
        )
    } else {
        format!(
            "[Showing lines 1-{} of {} of the {owner}'s output ({} limit); the rest was cut]",
            t.output_lines,
            t.total_lines,
            if t.truncated_by == Some(TruncatedBy::Lines) {
                format!("{DEFAULT_MAX_LINES} lines")
            } else {
                format_size(DEFAULT_MAX_BYTES)
            }
        )
    };
    let text = if t.content.is_empty() {
        note
    } else {
        format!("{}\n\n{note}", t.content)
    };
    let mut out = Vec::with_capacity(content.len());
    let mut placed = false;
    for c in content {
        match c {
            Content::Text(_) if placed => {}
            Content::Text(_) => {
                out.push(Content::text(text.clone()));
                placed = true;
            }
            other => out.push(other),
        }
    }
    (out, Some(t.to_json()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_counting_per_version() {
        let text: String = (1..=5000).map(|i| format!("{i}\n")).collect();
        let old = truncate_tail(&text, 2000, 51200);
        assert_eq!(old.total_lines, 5001);
        assert!(old.content.starts_with("3002\n") && old.content.ends_with("5000\n"));
        let new = truncate_tail_counting(&text, 2000, 51200, LineCounting::IgnoreFinalNewline);
        assert_eq!(new.total_lines, 5000);
        assert!(new.content.starts_with("3001\n") && new.content.ends_with("\n5000"));
        let empty = truncate_tail_counting("", 2000, 51200, LineCounting::IgnoreFinalNewline);
        assert_eq!((empty.total_lines, empty.truncated), (0, false));
    }

    #[test]
    fn format_size_matches_reference() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(51200), "50.0KB");
        assert_eq!(format_size(1536), "1.5KB");
        assert_eq!(format_size(3 * 1024 * 1024), "3.0MB");
    }

    #[test]
    fn head_no_op_when_small() {
        let t = truncate_head("a\nb\n", 2000, 51200);
        assert!(!t.truncated);
        assert_eq!((t.total_lines, t.output_lines, t.total_bytes), (3, 3, 4));
        assert_eq!(t.to_json()["truncatedBy"], Value::Null);
    }

    #[test]
    fn head_by_lines() {
        let t = truncate_head("1\n2\n3\n4\n", 2, 51200);
        assert_eq!(t.content, "1\n2");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!((t.total_lines, t.output_lines, t.output_bytes), (5, 2, 3));
    }

    #[test]
    fn head_by_bytes_and_first_line() {
        let t = truncate_head("aaaa\nbbbb\ncccc", 100, 9);
        assert_eq!(t.content, "aaaa\nbbbb");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        let t = truncate_head("aaaaaaaaaaaa\nb", 100, 9);
        assert!(t.first_line_exceeds_limit);
        assert_eq!(t.content, "");
        assert_eq!(t.output_lines, 0);
    }

    #[test]
    fn tail_by_lines_keeps_trailing_empty_line() {
        let text: String = (1..=3000).map(|i| format!("{i}\n")).collect();
        let t = truncate_tail(&text, 2000, 51200);
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!(t.total_lines, 3001);
        assert_eq!(t.output_lines, 2000);
        assert!(t.content.starts_with("1002\n"));
        assert!(t.content.ends_with("3000\n"));
    }

    #[test]
    fn tail_partial_last_line() {
        let t = truncate_tail("x\né123456789", 100, 5);
        assert!(t.last_line_partial);
        assert_eq!(t.content, "56789");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        // cutting inside 'é' moves forward to a boundary
        let t = truncate_tail("aé", 100, 2);
        assert_eq!(t.content, "é");
    }

    #[test]
    fn json_field_order() {
        let t = truncate_head("a\nb", 1, 100);
        let s = serde_json::to_string(&t.to_json()).unwrap();
        assert_eq!(
            s,
            r#"{"content":"a","truncated":true,"truncatedBy":"lines","totalLines":2,"totalBytes":3,"outputLines":1,"outputBytes":1,"lastLinePartial":false,"firstLineExceedsLimit":false,"maxLines":1,"maxBytes":100}"#
        );
    }

    #[test]
    fn line_cut() {
        assert_eq!(truncate_line("abc", 3), ("abc".to_string(), false));
        assert_eq!(
            truncate_line("abcd", 3),
            ("abc... [truncated]".to_string(), true)
        );
    }
}
