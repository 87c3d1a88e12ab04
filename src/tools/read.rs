//! The `read` tool: a text file's lines with offset/limit and head truncation, or an image as an
//! attachment (spec 14.3). Images are sniffed by content (JPEG, PNG, GIF, WebP) and sent as-is:
//! pith has no image codec, so the reference's resizing is not done.

use std::io::Read;

use serde_json::{Value, json};

use super::paths::{node_error, resolve_read_path};
use super::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head};
use super::{
    Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, text_output,
};
use crate::message::{Content, ImageContent};

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
        json!({
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                "limit": {"type": "number", "description": "Maximum number of lines to read"}
            }
        })
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let path = arg_str(args, "path").ok_or("Invalid read arguments.")?;
        check_cancel(ctx)?;
        let abs = resolve_read_path(path, &ctx.cwd);
        let mut file = std::fs::File::open(&abs).map_err(|e| node_error(&e, "access", &abs))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| node_error(&e, "read", &abs))?;
        check_cancel(ctx)?;
        if let Some(mime) = image_mime(&bytes) {
            return Ok(ToolOutput {
                content: vec![
                    Content::text(format!("Read image file [{mime}]")),
                    Content::Image(ImageContent {
                        data: base64(&bytes),
                        mime_type: mime.to_string(),
                    }),
                ],
                details: None,
            });
        }
        let text = String::from_utf8_lossy(&bytes);
        read_text(&text, path, arg_f64(args, "offset"), arg_f64(args, "limit"))
    }
}

/// The text part of `read`, on the decoded file content.
pub fn read_text(text: &str, path: &str, offset: Option<f64>, limit: Option<f64>) -> ToolResult {
    let lines: Vec<&str> = text.split('\n').collect();
    let total = lines.len();
    let start = match offset {
        Some(o) if o >= 1.0 => (o - 1.0).min(usize::MAX as f64) as usize,
        _ => 0,
    };
    if start >= total {
        let shown = super::js_num(offset.unwrap_or(0.0));
        return Err(format!(
            "Offset {shown} is beyond end of file ({total} lines total)"
        ));
    }
    let (selected, user_end) = match limit {
        Some(l) => {
            let l = if l.is_finite() && l > 0.0 {
                l.floor() as usize
            } else {
                0
            };
            let end = start.saturating_add(l).min(total);
            (lines[start..end].join("\n"), Some(end))
        }
        None => (lines[start..].join("\n"), None),
    };
    let t = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let first = start + 1;
    if t.first_line_exceeds_limit {
        let size = format_size(lines[start].len());
        let text = format!(
            "[Line {first} is {size}, exceeds {} limit. Use bash: sed -n '{first}p' {path} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return Ok(ToolOutput {
            content: vec![Content::text(text)],
            details: Some(json!({"truncation": t.to_json()})),
        });
    }
    if t.truncated {
        let last = first + t.output_lines - 1;
        let limit_note = if t.truncated_by == Some(super::truncate::TruncatedBy::Lines) {
            String::new()
        } else {
            format!(" ({} limit)", format_size(DEFAULT_MAX_BYTES))
        };
        let text = format!(
            "{}\n\n[Showing lines {first}-{last} of {total}{limit_note}. Use offset={} to continue.]",
            t.content,
            last + 1
        );
        return Ok(ToolOutput {
            content: vec![Content::text(text)],
            details: Some(json!({"truncation": t.to_json()})),
        });
    }
    if let Some(end) = user_end.filter(|e| *e < total) {
        let remaining = total - end;
        return Ok(text_output(format!(
            "{}\n\n[{remaining} more lines in file. Use offset={} to continue.]",
            t.content,
            end + 1
        )));
    }
    Ok(text_output(t.content))
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
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
