//! A `tools/call` result as pi 1.6.0's MCP client reports it (pure; the file a long text is
//! saved to comes from the caller): text and image blocks for the model (audio, links and
//! binary resources described in text), text over 20 KB cut in the middle with the full text in
//! a file, `details: {server, tool[, fullOutputPath]}`, and the whole `CallToolResult` (less
//! `_meta`) as `structuredContent`, which `tool_execution_end` shows and codemode scripts
//! receive. `isError: true` is an error result that keeps all of that.

use serde_json::{Map, Value, json};

use crate::message::Content;
use crate::tools::ToolOutput;

/// Model-facing text beyond this many bytes is cut in the middle.
pub const MAX_TEXT_BYTES: usize = 20 * 1024;

/// Where a long text or a binary resource goes: the path written, or why not.
pub type Save<'a> = &'a dyn Fn(&[u8], &str) -> Result<String, String>;

/// Convert `result` of `server`'s `tool`. `readable`: the resource tools exist (links say how to
/// read them). An invalid result (not an object, `content` not an array) is an error text.
pub fn convert(
    server: &str,
    tool: &str,
    result: &Value,
    readable: bool,
    save: Save,
) -> Result<ToolOutput, String> {
    let Some(obj) = result.as_object() else {
        return Err("Invalid MCP tools/call result".into());
    };
    let blocks = match obj.get("content") {
        Some(Value::Array(a)) => a.as_slice(),
        None | Some(Value::Null) => &[],
        Some(_) => return Err("Invalid MCP tools/call result".into()),
    };
    let is_error = obj.get("isError") == Some(&Value::Bool(true));
    let mut content: Vec<Content> = if blocks.is_empty() {
        match obj.get("structuredContent") {
            Some(s) if !s.is_null() => vec![Content::text(pretty(s))],
            _ => Vec::new(),
        }
    } else {
        blocks
            .iter()
            .map(|b| block(server, b, readable, save))
            .collect()
    };
    if is_error && text_of(&content).is_empty() {
        content.push(Content::text(format!(
            "MCP tool {server}/{tool} returned an error"
        )));
    }
    let (content, full) = limit(content, save);
    let mut details = Map::new();
    details.insert("server".into(), json!(server));
    details.insert("tool".into(), json!(tool));
    if let Some(p) = full {
        details.insert("fullOutputPath".into(), json!(p));
    }
    let mut structured = obj.clone();
    structured.remove("_meta");
    Ok(ToolOutput {
        content,
        details: Some(Value::Object(details)),
        structured: Some(Value::Object(structured)),
        is_error,
    })
}

/// JSON with two-space indentation (JavaScript's `JSON.stringify(v, null, 2)`).
fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn text_of(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn format_size(n: usize) -> String {
    crate::tools::truncate::format_size(n)
}

fn block(server: &str, b: &Value, readable: bool, save: Save) -> Content {
    let s = |k: &str| b.get(k).and_then(Value::as_str);
    match s("type") {
        Some("text") => Content::text(s("text").unwrap_or("")),
        Some("image") => super::protocol::image_block(s("data"), s("mimeType")),
        Some("audio") => Content::text(format!("[audio {} omitted]", s("mimeType").unwrap_or(""))),
        Some("resource_link") => {
            let mut facts: Vec<String> = Vec::new();
            if let Some(m) = s("mimeType").filter(|m| !m.is_empty()) {
                facts.push(m.to_string());
            }
            if let Some(n) = b.get("size").and_then(Value::as_u64) {
                facts.push(format_size(n as usize));
            }
            let facts = if facts.is_empty() {
                String::new()
            } else {
                format!(" ({})", facts.join(", "))
            };
            let description = s("description")
                .filter(|d| !d.is_empty())
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let read = if readable {
                format!(". Read it with read_mcp_resource (server \"{server}\")")
            } else {
                String::new()
            };
            Content::text(format!(
                "[Resource {} \"{}\"{facts}{description}{read}]",
                s("uri").unwrap_or(""),
                s("title").or(s("name")).unwrap_or("")
            ))
        }
        Some("resource") => {
            let r = b.get("resource").cloned().unwrap_or(Value::Null);
            let rs = |k: &str| r.get(k).and_then(Value::as_str);
            let uri = rs("uri").unwrap_or("");
            let mime = rs("mimeType");
            if let Some(t) = rs("text") {
                return Content::text(t);
            }
            let blob = rs("blob").unwrap_or("");
            if mime.is_some_and(|m| m.starts_with("image/")) {
                return super::protocol::image_block(Some(blob), mime);
            }
            let Some(data) = base64_decode(blob) else {
                return Content::text(format!(
                    "[binary resource {uri} ({}) omitted]",
                    mime.unwrap_or("unknown type")
                ));
            };
            if mime.is_some_and(is_text_mime) {
                return Content::text(String::from_utf8_lossy(&data));
            }
            let kind = format!(
                "{}, {}",
                mime.unwrap_or("unknown type"),
                format_size(data.len())
            );
            match save(&data, &extension_of(uri)) {
                Ok(p) => Content::text(format!("[Binary resource {uri} ({kind}) saved to {p}]")),
                Err(e) => Content::text(format!(
                    "[Binary resource {uri} ({kind}) could not be saved: {e}]"
                )),
            }
        }
        other => Content::text(format!(
            "[unsupported MCP content {}]",
            other.unwrap_or("undefined")
        )),
    }
}

fn is_text_mime(m: &str) -> bool {
    let t = m
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    t.starts_with("text/") || t == "application/json" || t.ends_with("+json") || t.ends_with("+xml")
}

/// The extension a URI's path ends in (`.png`), else `.bin`.
fn extension_of(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let last = path.rsplit('/').next().unwrap_or(path);
    match last.rfind('.') {
        Some(i)
            if (2..=9).contains(&(last.len() - i))
                && last[i + 1..].bytes().all(|c| c.is_ascii_alphanumeric()) =>
        {
            last[i..].to_string()
        }
        _ => ".bin".into(),
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let b: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(b.len() / 4 * 3 + 3);
    for chunk in b.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        match chunk.len() {
            4 => out.extend_from_slice(&bytes),
            3 => out.extend_from_slice(&bytes[..2]),
            2 => out.push(bytes[0]),
            _ => return None,
        }
    }
    Some(out)
}

/// Keep the model-facing text within [`MAX_TEXT_BYTES`]: longer text becomes one block (the start
/// and the end, the middle replaced by a marker), images follow; the full text is saved.
fn limit(content: Vec<Content>, save: Save) -> (Vec<Content>, Option<String>) {
    let combined = text_of(&content);
    if combined.len() <= MAX_TEXT_BYTES {
        return (content, None);
    }
    let half = MAX_TEXT_BYTES / 2;
    let mut head_end = half;
    while !combined.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = combined.len() - (MAX_TEXT_BYTES - half);
    while !combined.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let removed = combined[head_end..tail_start].chars().count();
    let lines = combined.split('\n').count() - usize::from(combined.ends_with('\n'));
    let (where_, path) = match save(combined.as_bytes(), ".txt") {
        Ok(p) => (
            format!("\n\n[Full output: {p} (read it with offset/limit)]"),
            Some(p),
        ),
        Err(e) => (format!("\n\n[Could not save the full output: {e}]"), None),
    };
    let tokens = combined.len().div_ceil(4);
    let text = format!(
        "Warning: truncated output (original token count: {tokens})\nTotal output lines: {lines}\n\n{}…{removed} chars truncated…{}{where_}",
        &combined[..head_end],
        &combined[tail_start..]
    );
    let mut out = vec![Content::text(text)];
    out.extend(
        content
            .into_iter()
            .filter(|c| matches!(c, Content::Image(_))),
    );
    (out, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_save(_: &[u8], _: &str) -> Result<String, String> {
        Err("no".into())
    }

    #[test]
    fn shapes() {
        let r = json!({"content": [{"type": "text", "text": "echo: hi"}],
                       "structuredContent": {"echoed": "hi"}, "_meta": {"x": 1}});
        let o = convert("echo", "echo", &r, false, &no_save).unwrap();
        assert_eq!(o.content, vec![Content::text("echo: hi")]);
        assert_eq!(o.details, Some(json!({"server": "echo", "tool": "echo"})));
        assert_eq!(
            o.structured,
            Some(
                json!({"content": [{"type": "text", "text": "echo: hi"}], "structuredContent": {"echoed": "hi"}})
            )
        );
        assert!(!o.is_error);
        let r = json!({"content": [], "isError": true});
        let o = convert("s", "t", &r, false, &no_save).unwrap();
        assert!(o.is_error);
        assert_eq!(
            o.content,
            vec![Content::text("MCP tool s/t returned an error")]
        );
        let r = json!({"content": [], "structuredContent": {"a": 1}});
        let o = convert("s", "t", &r, false, &no_save).unwrap();
        assert_eq!(o.content, vec![Content::text("{\n  \"a\": 1\n}")]);
        assert!(convert("s", "t", &json!([]), false, &no_save).is_err());
        let r = json!({"content": [{"type": "resource_link", "uri": "file:///a.txt", "name": "a",
                                     "mimeType": "text/plain", "size": 2048, "description": "A file"},
                                    {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
                                    {"type": "resource", "resource": {"uri": "x://b.json", "mimeType": "application/json", "blob": "eyJhIjoxfQ=="}},
                                    {"type": "weird"}]});
        let o = convert("s", "t", &r, true, &no_save).unwrap();
        assert_eq!(
            o.content,
            vec![
                Content::text(
                    "[Resource file:///a.txt \"a\" (text/plain, 2.0KB): A file. Read it with read_mcp_resource (server \"s\")]"
                ),
                Content::text("[audio audio/wav omitted]"),
                Content::text("{\"a\":1}"),
                Content::text("[unsupported MCP content weird]"),
            ]
        );
    }

    #[test]
    fn long_text_is_cut_in_the_middle() {
        let text = format!("{}\n{}", "a".repeat(15_000), "é".repeat(10_000));
        let r = json!({"content": [{"type": "text", "text": text}]});
        let saved = std::cell::RefCell::new(0usize);
        let save = |d: &[u8], ext: &str| {
            assert_eq!(ext, ".txt");
            *saved.borrow_mut() = d.len();
            Ok("/tmp/pi-mcp-x.txt".to_string())
        };
        let o = convert("s", "t", &r, false, &save).unwrap();
        assert_eq!(*saved.borrow(), text.len());
        let Content::Text(t) = &o.content[0] else {
            panic!()
        };
        assert!(t.text.starts_with(
            "Warning: truncated output (original token count: 8751)\nTotal output lines: 2\n\naaa"
        ));
        assert!(t.text.contains("… chars truncated…") || t.text.contains(" chars truncated…"));
        assert!(
            t.text
                .ends_with("é\n\n[Full output: /tmp/pi-mcp-x.txt (read it with offset/limit)]")
        );
        assert_eq!(o.details.unwrap()["fullOutputPath"], "/tmp/pi-mcp-x.txt");
    }
}
