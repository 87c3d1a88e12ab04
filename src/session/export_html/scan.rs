//! The export's first pass over a session (pure): what the page's top and sidebar need before
//! any entry is written — one row per entry for the tree (kind, a one-line excerpt, flags for the
//! filters), totals of tokens and cost (whole tree and current branch), counts, the models used,
//! the tool results by the id of the call they answer, and the system prompt as recorded on the
//! current branch (pi 0.86+ `role:"system"` messages).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::message::{AgentMessage, AssistantMessage, Content, StopReason, UserContent};
use crate::session::Session;
use crate::session::entry::{Entry, EntryKind};

use super::html::{compact_count, excerpt};
use super::order::Layout;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum RowKind {
    User,
    Assistant,
    Tool,
    Bash,
    Setting,
    Summary,
    Extension,
    System,
    Other,
}

impl RowKind {
    pub(super) fn class(self) -> &'static str {
        match self {
            RowKind::User => "k-user",
            RowKind::Assistant => "k-asst",
            RowKind::Tool => "k-tool",
            RowKind::Bash => "k-bash",
            RowKind::Setting => "k-set",
            RowKind::Summary => "k-sum",
            RowKind::Extension => "k-ext",
            RowKind::System => "k-sys",
            RowKind::Other => "k-other",
        }
    }
}

pub(super) struct Row {
    pub(super) kind: RowKind,
    /// Short role word shown first.
    pub(super) tag: &'static str,
    pub(super) text: String,
    /// An assistant message with no text (tool calls only), not an error: hidden by default.
    pub(super) no_text: bool,
    pub(super) error: bool,
}

#[derive(Default, Clone, Copy)]
pub(super) struct Totals {
    pub(super) input: u64,
    pub(super) output: u64,
    pub(super) cache_read: u64,
    pub(super) cache_write: u64,
    pub(super) cost: f64,
    pub(super) assistant: u64,
}

impl Totals {
    pub(super) fn add(&mut self, a: &AssistantMessage) {
        self.input += a.usage.input;
        self.output += a.usage.output;
        self.cache_read += a.usage.cache_read;
        self.cache_write += a.usage.cache_write;
        let c = &a.usage.cost;
        let total = if c.total > 0.0 {
            c.total
        } else {
            c.input + c.output + c.cache_read + c.cache_write
        };
        if total.is_finite() {
            self.cost += total;
        }
        self.assistant += 1;
    }
}

pub(super) struct Scan {
    pub(super) rows: Vec<Row>,
    /// Tool result entries by their tool call id.
    pub(super) results: HashMap<String, Vec<usize>>,
    pub(super) all: Totals,
    pub(super) path: Totals,
    pub(super) users: u64,
    pub(super) tool_results: u64,
    pub(super) tool_calls: u64,
    pub(super) compactions: u64,
    pub(super) branch_summaries: u64,
    pub(super) models: Vec<String>,
    /// The system prompt sections and tools last recorded on the current branch (`role:"system"`
    /// messages, pi 0.86+).
    pub(super) recorded_sections: Vec<(String, String)>,
    pub(super) recorded_tools: Vec<Value>,
}

/// A message entry's `role:"system"` object (pi 0.86+), read from its line.
pub(super) fn system_message(entry: &Entry) -> Option<Value> {
    match entry.kind() {
        EntryKind::Message { role, .. } if role == "system" => {
            let v: Value = serde_json::from_str(&entry.line()).ok()?;
            v.get("message").cloned()
        }
        _ => None,
    }
}

/// `read src/a.rs`, `$ cargo test`, … : a tool call in one line.
fn call_summary(name: &str, args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let path = if s("path").is_empty() {
        s("file_path")
    } else {
        s("path")
    };
    match name {
        "bash" => format!("$ {}", s("command")),
        "read" | "write" | "edit" => format!("{name} {path}"),
        "ls" => format!("ls {}", if path.is_empty() { "." } else { path }),
        "grep" | "find" => {
            let pattern = s("pattern");
            if path.is_empty() {
                format!("{name} {pattern}")
            } else {
                format!("{name} {pattern} in {path}")
            }
        }
        _ => {
            let args = serde_json::to_string(args).unwrap_or_default();
            format!("{name} {args}")
        }
    }
}

fn assistant_text(a: &AssistantMessage) -> String {
    let mut t = String::new();
    for c in &a.content {
        if let Content::Text(x) = c {
            if !t.is_empty() {
                t.push(' ');
            }
            t.push_str(&x.text);
            if t.len() > 400 {
                break;
            }
        }
    }
    t
}

const EXCERPT: usize = 100;

impl Scan {
    pub(super) fn new(session: &Session, layout: &Layout) -> Scan {
        let entries = session.entries();
        let mut scan = Scan {
            rows: Vec::with_capacity(entries.len()),
            results: HashMap::new(),
            all: Totals::default(),
            path: Totals::default(),
            users: 0,
            tool_results: 0,
            tool_calls: 0,
            compactions: 0,
            branch_summaries: 0,
            models: Vec::new(),
            recorded_sections: Vec::new(),
            recorded_tools: Vec::new(),
        };
        let mut calls: HashMap<String, String> = HashMap::new();
        let mut models: Vec<(String, String)> = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let row = scan.row(entry, i, layout, &mut calls, &mut models);
            scan.rows.push(row);
        }
        let mut models: Vec<String> = models
            .into_iter()
            .map(|(p, m)| if p.is_empty() { m } else { format!("{p}/{m}") })
            .collect();
        crate::sort::sort_by(&mut models, Ord::cmp);
        scan.models = models;
        // The system prompt as recorded on the current branch: sections patched in order.
        for &i in layout.order.iter().take(layout.path_len) {
            if let Some(m) = system_message(&entries[i]) {
                apply_system_patch(&mut scan.recorded_sections, &mut scan.recorded_tools, &m);
            }
        }
        scan
    }

    fn row(
        &mut self,
        entry: &Entry,
        i: usize,
        layout: &Layout,
        calls: &mut HashMap<String, String>,
        models: &mut Vec<(String, String)>,
    ) -> Row {
        let row = |kind, tag, text: String| Row {
            kind,
            tag,
            text,
            no_text: false,
            error: false,
        };
        match entry.kind() {
            EntryKind::Message { role, .. } if role == "system" => {
                row(RowKind::System, "system", "system prompt".into())
            }
            EntryKind::Message { role, .. } => match entry.message_uncached().as_deref() {
                Some(AgentMessage::User(u)) => {
                    self.users += 1;
                    let joined = u.content.joined_text();
                    if let Some((name, _, _, rest)) = skill_block(&joined) {
                        let text = format!("skill {name} · {}", excerpt(rest, EXCERPT));
                        return row(RowKind::User, "user", text);
                    }
                    let text = match &u.content {
                        UserContent::Text(t) => excerpt(t, EXCERPT),
                        UserContent::Blocks(b) => {
                            let t = u.content.joined_text();
                            let images =
                                b.iter().filter(|c| matches!(c, Content::Image(_))).count();
                            let mut s = excerpt(&t, EXCERPT);
                            if images > 0 {
                                let _ = write!(
                                    s,
                                    " [{images} image{}]",
                                    if images == 1 { "" } else { "s" }
                                );
                            }
                            s
                        }
                    };
                    row(RowKind::User, "user", text)
                }
                Some(AgentMessage::Assistant(a)) => {
                    self.all.add(a);
                    if layout.on_path[i] {
                        self.path.add(a);
                    }
                    if !a.model.is_empty()
                        && !models
                            .iter()
                            .any(|(p, m)| *p == a.provider && *m == a.model)
                    {
                        models.push((a.provider.clone(), a.model.clone()));
                    }
                    let mut names = Vec::new();
                    for c in &a.content {
                        if let Content::ToolCall(tc) = c {
                            self.tool_calls += 1;
                            calls.insert(tc.id.clone(), call_summary(&tc.name, &tc.arguments));
                            names.push(tc.name.as_str());
                        }
                    }
                    let text = assistant_text(a);
                    let error = matches!(a.stop_reason, StopReason::Error | StopReason::Aborted);
                    let shown = if !text.trim().is_empty() {
                        excerpt(text.trim_start().trim_start_matches('#'), EXCERPT)
                    } else if a.stop_reason == StopReason::Aborted {
                        "(aborted)".into()
                    } else if let Some(e) = a.error_message.as_deref().filter(|_| error) {
                        excerpt(e, EXCERPT)
                    } else if !names.is_empty() {
                        format!("({})", names.join(", "))
                    } else {
                        "(no text)".into()
                    };
                    Row {
                        kind: RowKind::Assistant,
                        tag: "assistant",
                        text: shown,
                        no_text: text.trim().is_empty() && !error,
                        error,
                    }
                }
                Some(AgentMessage::ToolResult(r)) => {
                    self.tool_results += 1;
                    self.results
                        .entry(r.tool_call_id.clone())
                        .or_default()
                        .push(i);
                    let text = calls
                        .get(&r.tool_call_id)
                        .cloned()
                        .unwrap_or_else(|| format!("[{}]", r.tool_name));
                    Row {
                        error: r.is_error,
                        ..row(RowKind::Tool, "tool", excerpt(&text, EXCERPT))
                    }
                }
                Some(AgentMessage::BashExecution(b)) => row(
                    RowKind::Bash,
                    "bash",
                    excerpt(&format!("! {}", b.command), EXCERPT),
                ),
                Some(AgentMessage::Custom(c)) => row(
                    RowKind::Extension,
                    "extension",
                    excerpt(
                        &format!("[{}] {}", c.custom_type, c.content.joined_text()),
                        EXCERPT,
                    ),
                ),
                Some(AgentMessage::BranchSummary(b)) => row(
                    RowKind::Summary,
                    "branch summary",
                    excerpt(&b.summary, EXCERPT),
                ),
                Some(AgentMessage::CompactionSummary(c)) => {
                    row(RowKind::Summary, "compaction", excerpt(&c.summary, EXCERPT))
                }
                #[allow(unreachable_patterns)]
                _ => row(RowKind::Other, "message", format!("[{role}]")),
            },
            EntryKind::ModelChange { provider, model_id } => {
                row(RowKind::Setting, "model", format!("{provider}/{model_id}"))
            }
            EntryKind::ThinkingLevelChange(level) => {
                row(RowKind::Setting, "thinking", level.clone())
            }
            EntryKind::Compaction { tokens_before, .. } => {
                self.compactions += 1;
                row(
                    RowKind::Summary,
                    "compaction",
                    format!("{} tokens summarized", compact_count(*tokens_before)),
                )
            }
            EntryKind::BranchSummary { summary, .. } => {
                self.branch_summaries += 1;
                row(
                    RowKind::Summary,
                    "branch summary",
                    excerpt(summary, EXCERPT),
                )
            }
            EntryKind::CustomMessage(m) => {
                let text = m.as_ref().map_or_else(String::new, |m| {
                    format!("[{}] {}", m.custom_type, m.content.joined_text())
                });
                row(RowKind::Extension, "extension", excerpt(&text, EXCERPT))
            }
            EntryKind::Custom => row(RowKind::Setting, "custom", raw_str(entry, "customType")),
            EntryKind::Label { target_id, label } => row(
                RowKind::Setting,
                "label",
                match label {
                    Some(l) if !l.is_empty() => format!("{l} → {target_id}"),
                    _ => format!("cleared on {target_id}"),
                },
            ),
            EntryKind::SessionInfo { name } => row(
                RowKind::Setting,
                "name",
                excerpt(name.as_deref().unwrap_or(""), EXCERPT),
            ),
            EntryKind::Unknown => match entry.entry_type() {
                "context_edit" => row(RowKind::Setting, "context edit", raw_str(entry, "targetId")),
                "usage" => row(RowKind::Setting, "usage", raw_str(entry, "kind")),
                other => row(RowKind::Other, "entry", format!("[{}]", excerpt(other, 40))),
            },
        }
    }
}

/// A string field of an entry's line (parsed, not kept).
fn raw_str(entry: &Entry, key: &str) -> String {
    serde_json::from_str::<Value>(&entry.line())
        .ok()
        .and_then(|v| v.get(key).and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

fn apply_system_patch(sections: &mut Vec<(String, String)>, tools: &mut Vec<Value>, m: &Value) {
    if let Some(obj) = m.get("sections").and_then(Value::as_object) {
        for (name, text) in obj {
            match text.as_str() {
                Some(t) => match sections.iter_mut().find(|(n, _)| n == name) {
                    Some(slot) => slot.1 = t.to_string(),
                    None => sections.push((name.clone(), t.to_string())),
                },
                None => sections.retain(|(n, _)| n != name),
            }
        }
    }
    if let Some(removed) = m.get("toolsRemoved").and_then(Value::as_array) {
        for r in removed {
            let name = r.get("name").and_then(Value::as_str).unwrap_or("");
            tools.retain(|t| t.get("name").and_then(Value::as_str) != Some(name));
        }
    }
    if let Some(added) = m.get("toolsAdded").and_then(Value::as_array) {
        for t in added {
            let name = t.get("name").and_then(Value::as_str);
            tools.retain(|x| x.get("name").and_then(Value::as_str) != name);
            tools.push(t.clone());
        }
    }
}

/// `<skill name="…" location="…">\n…\n</skill>\n\nrest`: (name, location, body, rest).
pub(super) fn skill_block(text: &str) -> Option<(&str, &str, &str, &str)> {
    let rest = text.strip_prefix("<skill name=\"")?;
    let (name, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(" location=\"")?;
    let (location, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(">\n")?;
    let (body, after) = rest.split_once("\n</skill>")?;
    Some((name, location, body, after.trim_start_matches('\n')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skill_blocks_parse() {
        let t = "<skill name=\"pdf\" location=\"/s/pdf/SKILL.md\">\nUse pdftotext.\n</skill>\n\nConvert a.pdf";
        assert_eq!(
            skill_block(t),
            Some(("pdf", "/s/pdf/SKILL.md", "Use pdftotext.", "Convert a.pdf"))
        );
        assert_eq!(skill_block("plain"), None);
    }

    #[test]
    fn system_patches_apply_in_order() {
        let mut sections = Vec::new();
        let mut tools = Vec::new();
        apply_system_patch(
            &mut sections,
            &mut tools,
            &json!({"sections":{"preamble":"A","rules":"R"},"toolsAdded":[{"name":"read"},{"name":"bash"}]}),
        );
        apply_system_patch(
            &mut sections,
            &mut tools,
            &json!({"sections":{"rules":null,"preamble":"B","cwd":"C"},"toolsRemoved":[{"name":"read"}],"toolsAdded":[{"name":"ls"}]}),
        );
        assert_eq!(
            sections,
            vec![
                ("preamble".to_string(), "B".to_string()),
                ("cwd".to_string(), "C".to_string())
            ]
        );
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names, ["bash", "ls"]);
    }

    #[test]
    fn calls_in_one_line() {
        assert_eq!(
            call_summary("bash", &json!({"command":"ls -la"})),
            "$ ls -la"
        );
        assert_eq!(call_summary("read", &json!({"path":"a.rs"})), "read a.rs");
        assert_eq!(
            call_summary("grep", &json!({"pattern":"x","path":"src"})),
            "grep x in src"
        );
        assert_eq!(call_summary("ls", &json!({})), "ls .");
        assert_eq!(call_summary("mcp", &json!({"q":1})), "mcp {\"q\":1}");
    }
}
