//! The `read` tool: a text file's lines with offset/limit and head truncation, or an image as an
//! attachment (spec 14.3). Images are sniffed by content (JPEG, PNG, GIF, WebP) and sent as-is:
//! pith has no image codec, so the reference's resizing is not done.

use std::io::Read;

use serde_json::{Value, json};

use super::paths::{node_error, resolve_read_path};
use super::regular::{CancelRead, cancelled, open_read, refuse_special};
use super::truncate::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, LineCounting, TruncatedBy, Truncation, format_size,
};
use super::{
    ABORTED, Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, text_output,
};
use crate::message::{Content, ImageContent};
use crate::protocol::ImageTypes;

pub struct ReadTool;

impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        "read"
    }

    fn description(&self) -> String {
        "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as attachments. For text files, output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Read file contents"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        super::schema(
            &SCHEMA,
            r#"{
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                "limit": {"type": "number", "description": "Maximum number of lines to read"}
            }
        }"#,
        )
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let mut out = read_file(args, ctx)?;
        if ctx.profile.structured_content {
            out.structured = Some(structured_read(&out.content));
        }
        Ok(out)
    }
}

/// pi 1.6.0's `structuredContent` of a read: the text of its first text block, or for an image
/// `{type:"image",data,mimeType,note}` with that text as the note.
fn structured_read(content: &[Content]) -> Value {
    let text = content
        .iter()
        .find_map(|c| match c {
            Content::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    match content.iter().find_map(|c| match c {
        Content::Image(i) => Some(i),
        _ => None,
    }) {
        Some(i) => json!({"type": "image", "data": i.data, "mimeType": i.mime_type, "note": text}),
        None => Value::String(text),
    }
}

fn read_file(args: &Value, ctx: &ToolContext) -> ToolResult {
    let path = arg_str(args, "path").ok_or("Invalid read arguments.")?;
    check_cancel(ctx)?;
    let abs = resolve_read_path(path, &ctx.cwd);
    // A device, FIFO or socket never ends or blocks (the reference hangs on them).
    if let Some(e) = refuse_special("read", &abs) {
        return Err(e);
    }
    let file = match open_read(&abs, "read") {
        Ok(f) => f,
        Err(Ok(special)) => return Err(special),
        Err(Err(e)) => return Err(node_error(&e, "access", &abs)),
    };
    let read_error = |e: std::io::Error| {
        if ctx.cancel.is_cancelled() {
            ABORTED.to_string()
        } else {
            node_error(&e, "read", &abs)
        }
    };
    // Every read checks for an abort, so a huge file never holds one up.
    let stop = cancelled(&ctx.cancel);
    let mut file = CancelRead::new(file, &stop);
    // Sniff the first bytes (as the reference does) before deciding how to read.
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(read_error)?;
    check_cancel(ctx)?;
    if ctx.profile.read_images == ImageTypes::MagicBytes {
        if let Some(mime) = image_mime_by_magic(&head) {
            let mut bytes = head;
            file.read_to_end(&mut bytes).map_err(read_error)?;
            check_cancel(ctx)?;
            return Ok(image_output_converting_bmp(mime, bytes));
        }
    } else if let Some(mime) = image_mime(&head) {
        let mut bytes = head;
        file.read_to_end(&mut bytes).map_err(read_error)?;
        return Ok(ToolOutput {
            content: vec![
                Content::text(format!("Read image file [{mime}]")),
                Content::Image(ImageContent {
                    data: base64(&bytes),
                    mime_type: mime.to_string(),
                }),
            ],
            details: None,
            ..Default::default()
        });
    }
    let (offset, limit) = (arg_f64(args, "offset"), arg_f64(args, "limit"));
    // pi's first line index: `offset ? Math.max(0, offset - 1) : 0`.
    let start_at = offset
        .filter(|o| *o != 0.0 && !o.is_nan())
        .map_or(0.0, |o| (o - 1.0).max(0.0));
    if start_at.fract() != 0.0 || limit.is_some_and(|l| l < 0.0 || l.fract() != 0.0) {
        // A fractional offset or limit, or a negative limit: pi slices the file's lines as a
        // JavaScript array (`allLines.slice(start, Math.min(start + limit, total))`), so
        // `limit: -1` is every line but the last, and the notices name fractional lines.
        drop(file);
        let total = count_lines(&abs, ctx).map_err(read_error)?;
        let end_at = limit.map(|l| (start_at + l).min(total as f64));
        let a = js_slice_index(start_at, total);
        let b = end_at.map_or(total, |e| js_slice_index(e, total)).max(a);
        let reader = open_read(&abs, "read").map_err(|e| match e {
            Ok(special) => special,
            Err(e) => node_error(&e, "open", &abs),
        })?;
        let reader = CancelRead::new(reader, &stop);
        let mut scan = scan_lines_counting(reader, a, Some(b), ctx.profile.line_counting)
            .map_err(read_error)?;
        scan.total_lines = total;
        return format_text(&scan, path, offset, start_at, end_at);
    }
    let reader = std::io::Cursor::new(head).chain(file);
    let (start, end) = selection(offset, limit);
    let scan =
        scan_lines_counting(reader, start, end, ctx.profile.line_counting).map_err(read_error)?;
    let end_at = limit.is_some().then_some(scan.end as f64);
    format_text(&scan, path, offset, scan.start as f64, end_at)
}

/// The file's line count as `text.split("\n").length` gives it (one pass, bounded memory).
fn count_lines(abs: &std::path::Path, ctx: &ToolContext) -> std::io::Result<usize> {
    let file = open_read(abs, "read").map_err(|e| match e {
        Ok(_) => std::io::Error::other("not a regular file"),
        Err(e) => e,
    })?;
    let stop = cancelled(&ctx.cancel);
    let mut file = CancelRead::new(file, &stop);
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = 1;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count();
    }
}

/// `Array.prototype.slice`'s index: truncated toward zero, negative counted from the end.
fn js_slice_index(i: f64, len: usize) -> usize {
    let i = i.trunc();
    if i < 0.0 {
        (len as f64 + i).max(0.0) as usize
    } else {
        i.min(len as f64) as usize
    }
}

/// How many leading bytes decide whether a file is an image.
const SNIFF_BYTES: usize = 4100;

/// `(first line index, end line index)` from the `offset`/`limit` arguments.
fn selection(offset: Option<f64>, limit: Option<f64>) -> (usize, Option<usize>) {
    let start = match offset {
        Some(o) if o >= 1.0 => (o - 1.0).min(u32::MAX as f64) as usize,
        _ => 0,
    };
    let end = limit.map(|l| {
        let l = if l.is_finite() && l > 0.0 {
            l.min(u32::MAX as f64).floor() as usize
        } else {
            0
        };
        start.saturating_add(l)
    });
    (start, end)
}

/// What a streaming pass over a file found: the line count and the head-truncated selection.
#[derive(Debug)]
pub struct Scan {
    pub total_lines: usize,
    pub start: usize,
    /// End of the selection (exclusive), clamped to the file.
    pub end: usize,
    pub truncation: Truncation,
    pub first_line_bytes: usize,
}

/// One pass over `reader` in bounded memory: count lines (`split('\n')` semantics) and keep
/// the selected lines `[start, end)` only up to the output limits, which gives the same result
/// as `truncate_head` on the joined selection.
pub fn scan_lines<R: Read>(reader: R, start: usize, end: Option<usize>) -> std::io::Result<Scan> {
    scan_lines_counting(reader, start, end, LineCounting::Split)
}

/// [`scan_lines`] with the selection's lines counted as `counting` says (pi 0.87.1's
/// `truncateHead` does not count the empty piece after a final newline: a selection that ends
/// in an empty line is one line shorter for the limits).
pub fn scan_lines_counting<R: Read>(
    mut reader: R,
    start: usize,
    end: Option<usize>,
    counting: LineCounting,
) -> std::io::Result<Scan> {
    let mut st = ScanState {
        start,
        end: end.unwrap_or(usize::MAX),
        ignore_final_empty: counting == LineCounting::IgnoreFinalNewline,
        ..ScanState::default()
    };
    st.keeping = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut rest = &buf[..n];
        while let Some(pos) = rest.iter().position(|b| *b == b'\n') {
            st.extend(&rest[..pos]);
            st.finish_line();
            rest = &rest[pos + 1..];
        }
        st.extend(rest);
    }
    st.finish_line();
    Ok(st.into_scan())
}

#[derive(Default)]
struct ScanState {
    start: usize,
    end: usize,
    line: usize,
    cur: Vec<u8>,
    cur_len: usize,
    selected: usize,
    selected_bytes: usize,
    first_line_bytes: usize,
    keeping: bool,
    stopped_by_bytes: bool,
    kept: Vec<String>,
    kept_bytes: usize,
    /// pi 0.87.1's counting: a final empty selected line is not a line.
    ignore_final_empty: bool,
    /// The last selected line was empty.
    last_selected_empty: bool,
}

impl ScanState {
    fn in_selection(&self) -> bool {
        self.line >= self.start && self.line < self.end
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.cur_len += bytes.len();
        // Only a line that can still be kept is buffered, and never past the byte limit.
        if self.keeping
            && self.in_selection()
            && self.cur.len() + bytes.len() <= DEFAULT_MAX_BYTES + 1
        {
            self.cur.extend_from_slice(bytes);
        }
    }

    fn finish_line(&mut self) {
        if self.in_selection() {
            let text = String::from_utf8_lossy(&self.cur).into_owned();
            let len = if self.cur.len() == self.cur_len {
                text.len()
            } else {
                self.cur_len
            };
            if self.selected == 0 {
                self.first_line_bytes = len;
            }
            self.last_selected_empty = self.cur_len == 0;
            self.selected_bytes += len + usize::from(self.selected > 0);
            if self.keeping {
                let cost = len + usize::from(!self.kept.is_empty());
                if self.kept.len() >= DEFAULT_MAX_LINES {
                    self.keeping = false;
                } else if self.kept_bytes + cost > DEFAULT_MAX_BYTES {
                    self.keeping = false;
                    self.stopped_by_bytes = true;
                } else {
                    self.kept_bytes += cost;
                    self.kept.push(text);
                }
            }
            self.selected += 1;
        }
        self.cur.clear();
        self.cur_len = 0;
        self.line += 1;
    }

    fn into_scan(self) -> Scan {
        let total_lines = self.line;
        // The lines the limits count (0.87: without a final empty one).
        let counted = if self.ignore_final_empty && self.last_selected_empty {
            self.selected.saturating_sub(1)
        } else {
            self.selected
        };
        let truncated = counted > DEFAULT_MAX_LINES || self.selected_bytes > DEFAULT_MAX_BYTES;
        let first_exceeds = truncated && self.first_line_bytes > DEFAULT_MAX_BYTES;
        let mut content = if first_exceeds {
            String::new()
        } else {
            self.kept.join("\n")
        };
        if !truncated && self.kept.len() < self.selected {
            // Only the final empty line can be left out of an untruncated selection (0.87
            // counting): the text keeps its final newline.
            content.push('\n');
        }
        let output_lines = if first_exceeds { 0 } else { self.kept.len() };
        let by = if !truncated {
            None
        } else if first_exceeds {
            Some(TruncatedBy::Bytes)
        } else if output_lines >= DEFAULT_MAX_LINES || !self.stopped_by_bytes {
            Some(TruncatedBy::Lines)
        } else {
            Some(TruncatedBy::Bytes)
        };
        let truncation = Truncation {
            output_bytes: content.len(),
            content,
            truncated,
            truncated_by: by,
            total_lines: counted,
            total_bytes: self.selected_bytes,
            output_lines,
            last_line_partial: false,
            first_line_exceeds_limit: first_exceeds,
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
        };
        Scan {
            total_lines,
            start: self.start,
            end: self.end.min(total_lines),
            truncation,
            first_line_bytes: self.first_line_bytes,
        }
    }
}

/// The text part of `read` on already-decoded content (used by tests and callers with text).
pub fn read_text(text: &str, path: &str, offset: Option<f64>, limit: Option<f64>) -> ToolResult {
    let (start, end) = selection(offset, limit);
    let scan = scan_lines(text.as_bytes(), start, end).map_err(|e| e.to_string())?;
    let end_at = limit.is_some().then_some(scan.end as f64);
    format_text(&scan, path, offset, scan.start as f64, end_at)
}

/// The reference's output text and details for a scanned file.
/// `start_at`: pi's first line index (fractional for a fractional offset); `end_at`: with a
/// `limit`, `Math.min(start + limit, total)`.
fn format_text(
    scan: &Scan,
    path: &str,
    offset: Option<f64>,
    start_at: f64,
    end_at: Option<f64>,
) -> ToolResult {
    use super::js_num;
    let total = scan.total_lines;
    if start_at >= total as f64 {
        let shown = js_num(offset.unwrap_or(0.0));
        return Err(format!(
            "Offset {shown} is beyond end of file ({total} lines total)"
        ));
    }
    let t = &scan.truncation;
    let first = start_at + 1.0;
    if t.first_line_exceeds_limit {
        let size = format_size(scan.first_line_bytes);
        let first = js_num(first);
        let text = format!(
            "[Line {first} is {size}, exceeds {} limit. Use bash: sed -n '{first}p' {path} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return Ok(ToolOutput {
            content: vec![Content::text(text)],
            details: Some(json!({"truncation": t.to_json()})),
            ..Default::default()
        });
    }
    if t.truncated {
        let last = first + t.output_lines as f64 - 1.0;
        let limit_note = if t.truncated_by == Some(TruncatedBy::Lines) {
            String::new()
        } else {
            format!(" ({} limit)", format_size(DEFAULT_MAX_BYTES))
        };
        let text = format!(
            "{}\n\n[Showing lines {}-{} of {total}{limit_note}. Use offset={} to continue.]",
            t.content,
            js_num(first),
            js_num(last),
            js_num(last + 1.0)
        );
        return Ok(ToolOutput {
            content: vec![Content::text(text)],
            details: Some(json!({"truncation": t.to_json()})),
            ..Default::default()
        });
    }
    if let Some(end) = end_at.filter(|e| *e < total as f64) {
        return Ok(text_output(format!(
            "{}\n\n[{} more lines in file. Use offset={} to continue.]",
            t.content,
            js_num(total as f64 - end),
            js_num(end + 1.0)
        )));
    }
    Ok(text_output(t.content.clone()))
}

/// The four image types the reference accepts, by magic bytes.
pub fn image_mime(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if b.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        Some("image/png")
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// pi 0.87.1's image types by magic bytes: JPEG (not JPEG-LS), a PNG that is not animated,
/// GIF, WebP and BMP.
pub fn image_mime_by_magic(b: &[u8]) -> Option<&'static str> {
    const PNG: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return (b.get(3) != Some(&0xF7)).then_some("image/jpeg");
    }
    if b.starts_with(&PNG) {
        let be32 = |at: usize| {
            b.get(at..at + 4)
                .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        };
        let is_png = b.len() >= 16 && be32(8) == 13 && &b[12..16] == b"IHDR";
        // Animated (APNG): an `acTL` chunk before the first `IDAT`.
        let mut at = PNG.len();
        let mut animated = false;
        while at + 8 <= b.len() {
            let kind = &b[at + 4..at + 8];
            if kind == b"acTL" {
                animated = true;
                break;
            }
            if kind == b"IDAT" {
                break;
            }
            let next = at + 12 + be32(at) as usize;
            if next <= at || next > b.len() {
                break;
            }
            at = next;
        }
        return (is_png && !animated).then_some("image/png");
    }
    if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    super::bmp::is_bmp(b).then_some("image/bmp")
}

/// pi 0.87.1's result for an image: a BMP goes to the model converted to PNG (with a note
/// saying so), or as a note alone when it cannot be converted.
fn image_output_converting_bmp(mime: &str, bytes: Vec<u8>) -> ToolOutput {
    let (mime, data, hint) = if mime == "image/bmp" {
        match super::bmp::to_png(&bytes) {
            Some(png) => (
                "image/png",
                png,
                Some("[Image converted from image/bmp to image/png.]"),
            ),
            None => {
                return text_output(format!(
                    "Read image file [{mime}]\n[Image omitted: could not be converted to a supported inline image format.]"
                ));
            }
        }
    } else {
        (mime, bytes, None)
    };
    let mut note = format!("Read image file [{mime}]");
    if let Some(h) = hint {
        note.push('\n');
        note.push_str(h);
    }
    ToolOutput {
        content: vec![
            Content::text(note),
            Content::Image(ImageContent {
                data: base64(&data),
                mime_type: mime.to_string(),
            }),
        ],
        details: None,
        ..Default::default()
    }
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_matches_truncate_head() {
        use crate::tools::truncate::truncate_head;
        let cases = [
            "a\nb\nc".to_string(),
            "a\nb\n".to_string(),
            (0..2500).map(|i| format!("l{i}\n")).collect::<String>(),
            (0..100)
                .map(|_| format!("{}\n", "x".repeat(1000)))
                .collect::<String>(),
            format!("{}\nrest", "y".repeat(60000)),
            "é".repeat(30000),
        ];
        for text in &cases {
            for (start, end) in [(0, None), (1, Some(3)), (5, Some(2005)), (2, None)] {
                let lines: Vec<&str> = text.split('\n').collect();
                if start >= lines.len() {
                    continue;
                }
                let stop = end.unwrap_or(usize::MAX).min(lines.len());
                let expected = truncate_head(
                    &lines[start..stop].join("\n"),
                    DEFAULT_MAX_LINES,
                    DEFAULT_MAX_BYTES,
                );
                let scan = scan_lines(text.as_bytes(), start, end).unwrap();
                assert_eq!(scan.truncation, expected, "start {start} end {end:?}");
                assert_eq!(scan.total_lines, lines.len());
            }
        }
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
