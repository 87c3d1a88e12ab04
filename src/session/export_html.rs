//! `export_html`: the current branch of a session as one self-contained HTML page.
//!
//! The page needs nothing from the network (inline CSS, no scripts) and is rendered here, not in
//! the browser, so every piece of user or model text passes through [`escape`] exactly once on
//! its way into the markup: message text, thinking, tool names/arguments/results, bash commands
//! and output, summaries, the session name and header fields. Images are embedded as `data:` URLs
//! only when their MIME type and payload are plainly safe.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::message::{AgentMessage, AssistantMessage, Content, StopReason, UserContent};

use super::Session;
use super::entry::EntryKind;

pub const ERR_IN_MEMORY: &str = "Cannot export in-memory session to HTML";
pub const ERR_NOTHING_YET: &str = "Nothing to export yet - start a conversation first";

/// Write the export to `output_path`, or to `pi-session-<session file stem>.html` relative to
/// the process cwd. Returns the path as given/derived.
pub fn export_html(session: &Session, output_path: Option<&str>) -> Result<String, String> {
    let file = session.file().ok_or(ERR_IN_MEMORY)?;
    if !session.is_flushed() {
        return Err(ERR_NOTHING_YET.into());
    }
    let path = match output_path {
        Some(p) => p.to_string(),
        None => default_export_name(file),
    };
    std::fs::write(&path, render(session)).map_err(|e| format!("Failed to write {path}: {e}"))?;
    Ok(path)
}

/// `pi-session-<basename without .jsonl>.html`.
pub fn default_export_name(session_file: &Path) -> String {
    let name = session_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    format!("pi-session-{stem}.html")
}

/// HTML-escape text for element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
:root { --bg:#f7f7f8; --fg:#1d1d1f; --muted:#6b6b76; --card:#fff; --border:#e2e2e8;
  --user:#e8f0fe; --tool:#f3f0ff; --ok:#e9f7ef; --err:#fdecea; --sys:#fff8e1; --code:#f4f4f6; }
@media (prefers-color-scheme: dark) {
  :root { --bg:#17171a; --fg:#e6e6ea; --muted:#9a9aa6; --card:#222227; --border:#34343c;
    --user:#1f2a3d; --tool:#2a2540; --ok:#1d3026; --err:#3d2222; --sys:#3a331c; --code:#1b1b1f; }
}
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:15px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, sans-serif; }
main { max-width: 920px; margin: 0 auto; padding: 24px 16px 64px; }
header.session { border-bottom:1px solid var(--border); margin-bottom:20px; padding-bottom:12px; }
header.session h1 { font-size:20px; margin:0 0 6px; }
dl.meta { display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:0;
  color:var(--muted); font-size:13px; }
dl.meta dt { font-weight:600; } dl.meta dd { margin:0; word-break:break-all; }
.msg { background:var(--card); border:1px solid var(--border); border-radius:8px;
  padding:10px 14px; margin:12px 0; }
.msg .role { font-size:12px; font-weight:700; text-transform:uppercase; letter-spacing:.04em;
  color:var(--muted); margin-bottom:4px; }
.msg.user { background:var(--user); }
.msg.tool-result { background:var(--ok); } .msg.tool-result.error { background:var(--err); }
.msg.summary, .note { background:var(--sys); }
.note { font-size:12px; color:var(--muted); border-radius:6px; padding:4px 10px; margin:8px 0; }
.text { white-space:pre-wrap; word-wrap:break-word; }
pre { background:var(--code); border:1px solid var(--border); border-radius:6px; padding:8px 10px;
  margin:6px 0; overflow-x:auto; white-space:pre-wrap; word-wrap:break-word;
  font:13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
details.thinking { color:var(--muted); font-style:italic; margin:4px 0; }
details.thinking summary { cursor:pointer; font-style:normal; font-size:12px; }
.tool-call { background:var(--tool); border-radius:6px; padding:6px 10px; margin:6px 0; }
.tool-call .name, .bash .cmd { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-weight:600; }
.error-text { color:#c0392b; font-weight:600; }
img.embedded { max-width:100%; border-radius:6px; margin:6px 0; }
footer { color:var(--muted); font-size:12px; margin-top:32px; text-align:center; }
"#;

/// The whole page.
pub fn render(session: &Session) -> String {
    let mut h = String::with_capacity(16 * 1024);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    h.push_str("<title>Session Export</title>\n<style>");
    h.push_str(STYLE);
    h.push_str("</style>\n</head>\n<body>\n<main>\n");
    render_header(session, &mut h);
    for entry in session.branch_path() {
        match entry.kind() {
            EntryKind::Message { .. } => match entry.message() {
                Some(m) => render_message(m, &mut h),
                None => note(&mut h, "message with an unrecognised role"),
            },
            EntryKind::CustomMessage(_) | EntryKind::BranchSummary { .. } => {
                if let Some(m) = entry.context_message() {
                    render_message(&m, &mut h);
                }
            }
            EntryKind::Compaction {
                summary,
                tokens_before,
                ..
            } => {
                let title = format!("Compaction ({tokens_before} tokens summarized)");
                summary_block(&mut h, &title, summary);
            }
            EntryKind::ModelChange { provider, model_id } => {
                note(&mut h, &format!("Model: {provider}/{model_id}"));
            }
            EntryKind::ThinkingLevelChange(level) => {
                note(&mut h, &format!("Thinking level: {level}"))
            }
            EntryKind::SessionInfo { name: Some(n) } => note(&mut h, &format!("Session name: {n}")),
            _ => {}
        }
    }
    h.push_str("<footer>Exported from pith</footer>\n</main>\n</body>\n</html>\n");
    h
}

fn render_header(session: &Session, h: &mut String) {
    let title = session.session_name().unwrap_or_else(|| "Session".into());
    let _ = write!(
        h,
        "<header class=\"session\">\n<h1>{}</h1>\n<dl class=\"meta\">",
        escape(&title)
    );
    let mut row = |k: &str, v: &str| {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    };
    row("Session", session.id());
    if let Some(ts) = session.header().get("timestamp").and_then(Value::as_str) {
        row("Started", ts);
    }
    row("Directory", session.cwd());
    if let Some((provider, model)) = session.model() {
        row("Model", &format!("{provider}/{model}"));
    }
    let stats = session.stats(&session.build_context(), None);
    row(
        "Messages",
        &format!(
            "{} user, {} assistant, {} tool results",
            stats.user_messages, stats.assistant_messages, stats.tool_results
        ),
    );
    row(
        "Tokens",
        &format!(
            "{} in, {} out, {} cache read, {} cache write",
            stats.tokens.input,
            stats.tokens.output,
            stats.tokens.cache_read,
            stats.tokens.cache_write
        ),
    );
    row("Cost", &format!("${:.4}", stats.cost));
    h.push_str("</dl>\n</header>\n");
}

fn note(h: &mut String, text: &str) {
    let _ = writeln!(h, "<div class=\"note\">{}</div>", escape(text));
}

fn summary_block(h: &mut String, title: &str, summary: &str) {
    let _ = writeln!(
        h,
        "<section class=\"msg summary\"><div class=\"role\">{}</div><div class=\"text\">{}</div></section>",
        escape(title),
        escape(summary)
    );
}

fn open_msg(h: &mut String, class: &str, role: &str) {
    let _ = write!(
        h,
        "<section class=\"msg {class}\"><div class=\"role\">{}</div>",
        escape(role)
    );
}

fn render_message(m: &AgentMessage, h: &mut String) {
    match m {
        AgentMessage::User(u) => {
            open_msg(h, "user", "User");
            user_content(&u.content, h);
            h.push_str("</section>\n");
        }
        AgentMessage::Assistant(a) => render_assistant(a, h),
        // The system prompt (pi 0.87.1 transcripts) is not part of the conversation shown.
        AgentMessage::System(_) => {}
        AgentMessage::ToolResult(r) => {
            let class = if r.is_error {
                "tool-result error"
            } else {
                "tool-result"
            };
            open_msg(h, class, &format!("Tool result: {}", r.tool_name));
            blocks(&r.content, h, true);
            h.push_str("</section>\n");
        }
        AgentMessage::BashExecution(b) => {
            open_msg(h, "bash", "Bash");
            let _ = write!(h, "<div class=\"cmd\">$ {}</div>", escape(&b.command));
            let _ = write!(h, "<pre>{}</pre>", escape(&b.output));
            let mut status = match b.exit_code {
                Some(code) => format!("exit code {code}"),
                None => String::new(),
            };
            if b.cancelled {
                status.push_str(" (cancelled)");
            }
            if b.truncated {
                status.push_str(" (output truncated)");
            }
            if !status.is_empty() {
                note(h, status.trim());
            }
            h.push_str("</section>\n");
        }
        AgentMessage::Custom(c) => {
            open_msg(
                h,
                "custom",
                &format!("Extension message: {}", c.custom_type),
            );
            user_content(&c.content, h);
            h.push_str("</section>\n");
        }
        AgentMessage::BranchSummary(b) => summary_block(h, "Branch summary", &b.summary),
        AgentMessage::CompactionSummary(c) => summary_block(h, "Compaction summary", &c.summary),
    }
}

fn render_assistant(a: &AssistantMessage, h: &mut String) {
    open_msg(h, "assistant", &format!("Assistant ({})", a.model));
    for block in &a.content {
        match block {
            Content::Text(t) => {
                let _ = write!(h, "<div class=\"text\">{}</div>", escape(&t.text));
            }
            Content::Thinking(t) => {
                let _ = write!(
                    h,
                    "<details class=\"thinking\"><summary>Thinking</summary><div class=\"text\">{}</div></details>",
                    escape(&t.thinking)
                );
            }
            Content::ToolCall(tc) => {
                let args = serde_json::to_string_pretty(&tc.arguments).unwrap_or_default();
                let _ = write!(
                    h,
                    "<div class=\"tool-call\"><span class=\"name\">{}</span><pre>{}</pre></div>",
                    escape(&tc.name),
                    escape(&args)
                );
            }
            Content::Image(i) => image(i, h),
        }
    }
    match a.stop_reason {
        StopReason::Error => {
            let msg = a.error_message.as_deref().unwrap_or("error");
            let _ = write!(h, "<div class=\"error-text\">Error: {}</div>", escape(msg));
        }
        StopReason::Aborted => {
            let _ = write!(h, "<div class=\"error-text\">Aborted</div>");
        }
        _ => {}
    }
    h.push_str("</section>\n");
}

fn user_content(c: &UserContent, h: &mut String) {
    match c {
        UserContent::Text(s) => {
            let _ = write!(h, "<div class=\"text\">{}</div>", escape(s));
        }
        UserContent::Blocks(b) => blocks(b, h, false),
    }
}

fn blocks(b: &[Content], h: &mut String, preformatted: bool) {
    for block in b {
        match block {
            Content::Text(t) if preformatted => {
                let _ = write!(h, "<pre>{}</pre>", escape(&t.text));
            }
            Content::Text(t) => {
                let _ = write!(h, "<div class=\"text\">{}</div>", escape(&t.text));
            }
            Content::Image(i) => image(i, h),
            Content::Thinking(t) => {
                let _ = write!(h, "<div class=\"text\">{}</div>", escape(&t.thinking));
            }
            Content::ToolCall(tc) => {
                let _ = write!(h, "<div class=\"tool-call\">{}</div>", escape(&tc.name));
            }
        }
    }
}

/// Embed an image only when its MIME type is `image/<alnum+.-/>` and the payload is base64.
fn image(i: &crate::message::ImageContent, h: &mut String) {
    let mime_ok = i.mime_type.strip_prefix("image/").is_some_and(|sub| {
        !sub.is_empty()
            && sub
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"+.-".contains(&c))
    });
    let data_ok = i
        .data
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'=');
    if mime_ok && data_ok {
        let _ = write!(
            h,
            "<img class=\"embedded\" alt=\"image\" src=\"data:{};base64,{}\">",
            i.mime_type, i.data
        );
    } else {
        let _ = write!(
            h,
            "<div class=\"note\">[image: {}]</div>",
            escape(&i.mime_type)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>"a" & 'b'</script>"#),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn default_name_strips_jsonl() {
        let p = Path::new("/x/sessions/2026-11-21T22-24-46-733Z_01a2.jsonl");
        assert_eq!(
            default_export_name(p),
            "pi-session-2026-11-21T22-24-46-733Z_01a2.html"
        );
    }
}
