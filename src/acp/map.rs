//! Pure mappings between pi's concepts and ACP's: a tool call's title, kind and locations, a
//! prompt's content blocks, a run's stop reason, the session modes. No I/O.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// What a tool call looks like to the editor: `tool_call`'s `title`, `kind` and `locations`.
pub fn tool_call(tool: &str, args: &Value, cwd: &Path) -> Value {
    let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .map(|p| absolute(p, cwd));
    let shown = |p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (title, kind) = match tool {
        "read" => (format!("Read {}", shown(&path)), "read"),
        "write" => (format!("Write {}", shown(&path)), "edit"),
        "edit" => (format!("Edit {}", shown(&path)), "edit"),
        "ls" => (format!("List {}", shown(&path).if_empty(".")), "read"),
        "grep" => (format!("grep {}", s("pattern")), "search"),
        "find" => (format!("find {}", s("pattern")), "search"),
        "bash" => (first_line(s("command"), 200), "execute"),
        "tool_search" => ("tool_search".to_string(), "search"),
        other => (other.to_string(), "other"),
    };
    let title = if title.trim().is_empty() {
        tool.to_string()
    } else {
        title
    };
    let mut locations = Vec::new();
    if let Some(p) = &path {
        let mut loc = json!({"path": p.to_string_lossy()});
        // `read`'s offset is the first line it shows (1-based, as ACP's `line`).
        if tool == "read" {
            if let Some(n) = args.get("offset").and_then(Value::as_u64) {
                loc["line"] = json!(n);
            }
        }
        locations.push(loc);
    }
    json!({"title": title, "kind": kind, "locations": locations})
}

trait IfEmpty {
    fn if_empty(self, other: &str) -> String;
}

impl IfEmpty for String {
    fn if_empty(self, other: &str) -> String {
        if self.is_empty() {
            other.to_string()
        } else {
            self
        }
    }
}

/// `p` against the session's working directory (`~` is the user's home, as pi's tools read it).
pub fn absolute(p: &str, cwd: &Path) -> PathBuf {
    let p = p.strip_prefix('@').unwrap_or(p);
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(home) = crate::config::home_dir() {
            return home.join(rest);
        }
    }
    cwd.join(p)
}

/// The first line of `s`, at most `max` characters (a bash command as a title).
fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if out.len() < line.len() || s.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// The 1-based line where `needle` starts in `text` (an edit's first change).
pub fn line_of(text: &str, needle: &str) -> Option<u64> {
    if needle.is_empty() {
        return None;
    }
    let at = text.find(needle)?;
    Some(text[..at].bytes().filter(|&b| b == b'\n').count() as u64 + 1)
}

/// A prompt's content blocks as pi's prompt: the text (resources inlined as pi-acp does, as
/// `<context>` blocks after the text) and the images. `Err`: a block pith cannot take.
pub fn prompt(blocks: &[Value]) -> Result<(String, Vec<Value>), String> {
    let mut text = String::new();
    let mut context = String::new();
    let mut images = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("image") => {
                let (Some(data), Some(mime)) = (
                    b.get("data").and_then(Value::as_str),
                    b.get("mimeType").and_then(Value::as_str),
                ) else {
                    return Err("an image block needs data and mimeType".into());
                };
                images.push(json!({"type": "image", "data": data, "mimeType": mime}));
            }
            Some("resource_link") => {
                let uri = b.get("uri").and_then(Value::as_str).unwrap_or("");
                if !text.is_empty() && !text.ends_with(char::is_whitespace) {
                    text.push(' ');
                }
                text.push_str(&format!("@{}", uri.strip_prefix("file://").unwrap_or(uri)));
            }
            Some("resource") => {
                let r = b.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => context.push_str(&format!(
                        "\n<context ref=\"{}\">\n{t}\n</context>",
                        uri.strip_prefix("file://").unwrap_or(uri)
                    )),
                    None => {
                        return Err(format!("resource {uri}: only text resources are supported"));
                    }
                }
            }
            Some("audio") => return Err("audio prompts are not supported".into()),
            other => return Err(format!("unknown content block type {other:?}")),
        }
    }
    text.push_str(&context);
    Ok((text, images))
}

/// How a run ended, as ACP's stop reason (`None`: it failed, with this message).
pub fn stop_reason(assistant: &Value) -> Result<&'static str, String> {
    match assistant.get("stopReason").and_then(Value::as_str) {
        Some("length") => Ok("max_tokens"),
        Some("aborted") => Ok("cancelled"),
        Some("error") => {
            let msg = assistant
                .get("errorMessage")
                .and_then(Value::as_str)
                .unwrap_or("the run failed");
            // The providers' refusal stops (Anthropic's `refusal`, `sensitive`) are errors in pi.
            if msg == "The model refused to complete the request"
                || msg.starts_with("Provider stopped with: sensitive")
            {
                Ok("refusal")
            } else {
                Err(msg.to_string())
            }
        }
        _ => Ok("end_turn"),
    }
}

/// The session modes: permission presets for the calls no permission rule of the user decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Reads run; edits, writes, bash and other tools ask.
    Ask,
    /// Reads, edits and writes run; bash and other tools ask.
    AcceptEdits,
    /// Everything runs (pi's behaviour).
    Full,
    /// Reads run; everything else is refused.
    ReadOnly,
}

pub const MODES: [Mode; 4] = [Mode::Ask, Mode::AcceptEdits, Mode::Full, Mode::ReadOnly];

/// What a mode does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    Ask,
}

/// Tools that only read.
pub fn is_read_only(tool: &str) -> bool {
    matches!(tool, "read" | "grep" | "find" | "ls" | "tool_search")
}

impl Mode {
    pub fn id(self) -> &'static str {
        match self {
            Mode::Ask => "default",
            Mode::AcceptEdits => "acceptEdits",
            Mode::Full => "fullAccess",
            Mode::ReadOnly => "readOnly",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Ask => "Ask before changes",
            Mode::AcceptEdits => "Accept edits",
            Mode::Full => "Full access",
            Mode::ReadOnly => "Read only",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Mode::Ask => "Reads run; edits, writes, bash and other tools ask first",
            Mode::AcceptEdits => "Reads, edits and writes run; bash and other tools ask first",
            Mode::Full => "Every tool runs without asking (pi's behaviour)",
            Mode::ReadOnly => "Reads run; edits, writes, bash and other tools are refused",
        }
    }

    pub fn parse(id: &str) -> Option<Mode> {
        MODES.into_iter().find(|m| m.id() == id)
    }

    /// A call that asks: `rule` is the user's ask rule that asked (`None`: no rule of the user
    /// decided it, the mode does). A user's ask rule always asks, except where the mode refuses.
    pub fn decide(self, tool: &str, rule: Option<&str>) -> Verdict {
        let read = is_read_only(tool);
        let edit = matches!(tool, "write" | "edit");
        match (self, rule) {
            (Mode::ReadOnly, _) if !read => Verdict::Deny,
            (_, Some(_)) => Verdict::Ask,
            (_, None) if read => Verdict::Allow,
            (Mode::Full, None) => Verdict::Allow,
            (Mode::AcceptEdits, None) if edit => Verdict::Allow,
            _ => Verdict::Ask,
        }
    }
}

/// `session/new`'s and `session/load`'s `modes`.
pub fn modes_state(current: Mode) -> Value {
    json!({
        "currentModeId": current.id(),
        "availableModes": MODES.iter().map(|m| json!({
            "id": m.id(), "name": m.name(), "description": m.description(),
        })).collect::<Vec<_>>(),
    })
}

/// The permission options offered for an ask.
pub fn permission_options() -> Value {
    json!([
        {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_titles_kinds_and_locations() {
        let cwd = Path::new("/w");
        assert_eq!(
            tool_call("read", &json!({"path": "a.rs", "offset": 10}), cwd),
            json!({"title": "Read /w/a.rs", "kind": "read", "locations": [{"path": "/w/a.rs", "line": 10}]})
        );
        assert_eq!(
            tool_call("edit", &json!({"path": "/x/b.rs"}), cwd),
            json!({"title": "Edit /x/b.rs", "kind": "edit", "locations": [{"path": "/x/b.rs"}]})
        );
        assert_eq!(
            tool_call("bash", &json!({"command": "ls -la\necho hi"}), cwd)["title"],
            json!("ls -la…")
        );
        assert_eq!(
            tool_call("mcp__x__y", &json!({}), cwd),
            json!({"title": "mcp__x__y", "kind": "other", "locations": []})
        );
    }

    #[test]
    fn line_of_finds_the_first_change() {
        assert_eq!(line_of("a\nb\nc\n", "c"), Some(3));
        assert_eq!(line_of("abc", "abc"), Some(1));
        assert_eq!(line_of("abc", "x"), None);
        assert_eq!(line_of("abc", ""), None);
    }

    #[test]
    fn prompt_blocks_become_text_and_images() {
        let (t, i) = prompt(&[
            json!({"type": "text", "text": "look at"}),
            json!({"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"}),
            json!({"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}),
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
        ])
        .unwrap();
        assert_eq!(
            t,
            "look at @/w/a.rs\n<context ref=\"/w/b.rs\">\nfn b() {}\n</context>"
        );
        assert_eq!(
            i,
            vec![json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})]
        );
        assert!(prompt(&[json!({"type": "audio", "data": "", "mimeType": "audio/wav"})]).is_err());
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(stop_reason(&json!({"stopReason": "stop"})), Ok("end_turn"));
        assert_eq!(
            stop_reason(&json!({"stopReason": "length"})),
            Ok("max_tokens")
        );
        assert_eq!(
            stop_reason(&json!({"stopReason": "aborted"})),
            Ok("cancelled")
        );
        assert_eq!(
            stop_reason(
                &json!({"stopReason": "error", "errorMessage": "The model refused to complete the request"})
            ),
            Ok("refusal")
        );
        assert_eq!(
            stop_reason(&json!({"stopReason": "error", "errorMessage": "529 overloaded"})),
            Err("529 overloaded".to_string())
        );
    }

    #[test]
    fn modes_decide_unruled_calls() {
        use Verdict::*;
        assert_eq!(Mode::Ask.decide("read", None), Allow);
        assert_eq!(Mode::Ask.decide("edit", None), Ask);
        assert_eq!(Mode::AcceptEdits.decide("edit", None), Allow);
        assert_eq!(Mode::AcceptEdits.decide("bash", None), Ask);
        assert_eq!(Mode::Full.decide("bash", None), Allow);
        assert_eq!(Mode::Full.decide("bash", Some("bash")), Ask);
        assert_eq!(Mode::ReadOnly.decide("write", Some("write")), Deny);
        assert_eq!(Mode::ReadOnly.decide("grep", None), Allow);
        assert_eq!(Mode::parse("acceptEdits"), Some(Mode::AcceptEdits));
        assert_eq!(Mode::parse("nope"), None);
    }
}
