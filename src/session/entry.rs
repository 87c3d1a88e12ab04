//! One line of a session file, kept losslessly and compactly.
//!
//! Every entry has its JSON line exactly as pith writes it (`JSON.stringify` form, key order
//! kept), so unknown entry types and unknown fields survive a load/fork/rewrite untouched and
//! copies are byte-identical. Next to it sits a small parsed view ([`EntryKind`]) of only the
//! fields pith needs. The line is the only full copy, and once it is in a file it is not kept in
//! memory but read back from there when needed (`stored.rs`): the JSON object ([`Entry::raw`])
//! and the agent message of a `message` entry ([`Entry::message`]) are parsed from it on demand,
//! so a session of many entries costs a few dozen bytes per entry besides its context. New entries are built with
//! the reference's key order (`type`, `id`, `parentId`, `timestamp`, then the type's fields; the
//! extension entry types `custom`/`custom_message` put their own fields first, as the reference
//! does).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::message::{AgentMessage, CustomMessage, UserContent};

use super::short::Short;
use super::stored::{Line, Stored};
use super::{ids, store};

/// The agent message of a `message` entry, parsed from the entry's line on first use of
/// [`Entry::message`] and then kept. `None` inside: the message did not parse.
#[derive(Clone, Debug, Default)]
pub struct MessageCell(OnceLock<Option<Arc<AgentMessage>>>);

/// The interpreted part of an entry. Anything pith does not understand is `Unknown` (still kept
/// and written back verbatim).
#[derive(Clone, Debug)]
pub enum EntryKind {
    /// A `message` entry. Its message ([`Entry::message`]) is `None` when the message object did
    /// not parse as an [`AgentMessage`] (an unknown role, say): it then takes no part in the
    /// context.
    Message {
        role: String,
        message: MessageCell,
    },
    ModelChange {
        provider: String,
        model_id: String,
    },
    ThinkingLevelChange(String),
    Compaction {
        summary: String,
        first_kept_entry_id: String,
        tokens_before: u64,
    },
    BranchSummary {
        from_id: String,
        summary: String,
    },
    Custom,
    CustomMessage(Option<Box<CustomMessage>>),
    Label {
        target_id: String,
        label: Option<String>,
    },
    SessionInfo {
        name: Option<String>,
    },
    Unknown,
}

/// One entry (every line of a session file except the header).
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's line as written to the file (without the newline): in memory until it is in
    /// a file, then read back from there.
    line: Line,
    id: Short,
    parent_id: Option<Short>,
    entry_type: Short,
    /// The ISO `timestamp` in Unix ms (0 when absent or unparsable).
    timestamp_ms: u64,
    kind: EntryKind,
    /// The JSON object, parsed from `line` on first use of [`Entry::raw`].
    raw: OnceLock<Box<Map<String, Value>>>,
}

fn str_field(raw: &Map<String, Value>, key: &str) -> Option<String> {
    raw.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Only the `message` field of an entry line, read straight as the struct of a known role
/// (serde's internally tagged [`AgentMessage`] would first buffer the whole message to find the
/// `role`, which the loader already knows, and its derived deserialiser, with one copy of every
/// role's struct read from the buffer, is 120 KB of code: `docs/architecture.md`, "Binary size").
#[derive(Deserialize)]
struct RoleField<T> {
    message: T,
}

fn parse_as<T: serde::de::DeserializeOwned>(line: &str) -> Option<T> {
    serde_json::from_str::<RoleField<T>>(line)
        .ok()
        .map(|f| f.message)
}

/// The agent message of a `message` entry line, `None` when it does not parse. `role` is the
/// message's own `role`, as the tagged enum would dispatch on it; an unknown role is no message.
fn parse_message(line: &str, role: &str) -> Option<AgentMessage> {
    use crate::message as m;
    match role {
        "user" => parse_as::<m::UserMessage>(line).map(AgentMessage::User),
        "assistant" => parse_as::<m::AssistantMessage>(line).map(AgentMessage::Assistant),
        "toolResult" => parse_as::<m::ToolResultMessage>(line).map(AgentMessage::ToolResult),
        "bashExecution" => {
            parse_as::<m::BashExecutionMessage>(line).map(AgentMessage::BashExecution)
        }
        "custom" => parse_as::<m::CustomMessage>(line).map(AgentMessage::Custom),
        "branchSummary" => {
            parse_as::<m::BranchSummaryMessage>(line).map(AgentMessage::BranchSummary)
        }
        "compactionSummary" => {
            parse_as::<m::CompactionSummaryMessage>(line).map(AgentMessage::CompactionSummary)
        }
        "system" => parse_as::<m::SystemMessage>(line).map(AgentMessage::System),
        _ => None,
    }
}

/// An agent message given as JSON (an extension's `context` answer), read the way a session
/// line's message is (by its `role`, without the tagged enum's deserialiser).
pub(crate) fn message_from_json(v: &Value) -> Option<AgentMessage> {
    let role = v.get("role")?.as_str()?;
    let line = serde_json::to_string(&serde_json::json!({ "message": v })).ok()?;
    parse_message(&line, role)
}

impl Entry {
    /// Interpret a JSON object read from a file. Fails only when it has no string `id`.
    pub fn from_raw(raw: Map<String, Value>) -> Result<Entry, String> {
        let id = str_field(&raw, "id").ok_or("entry has no string id")?;
        let parent_id = raw.get("parentId").and_then(Value::as_str).map(Short::new);
        let entry_type = raw.get("type").and_then(Value::as_str).unwrap_or("").into();
        let timestamp_ms = raw
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(ids::parse_iso_ms)
            .unwrap_or(0);
        let kind = parse_kind(&raw);
        Ok(Entry {
            line: Line::Text(store::to_line(&raw).into_boxed_str()),
            id: Short::new(&id),
            parent_id,
            entry_type,
            timestamp_ms,
            kind,
            raw: OnceLock::new(),
        })
    }

    /// The fast path of loading: an entry straight from a file line when its interpreted fields
    /// read cleanly ([`super::line`]). The line is left where it is (`stored`), or kept verbatim
    /// in memory when it is in `JSON.stringify` form. `None`: the caller must use
    /// [`Entry::from_raw`] on the parsed object (which then decides, with the same result as
    /// always).
    pub fn from_line(line: &str, stored: Option<Stored>) -> Option<Entry> {
        if stored.is_none() && !super::line::is_canonical(line) {
            return None;
        }
        let h = super::line::head(line)?;
        let id = Short::new(h.id.as_str()?);
        let entry_type = h.ty.as_str().unwrap_or("");
        let s = |f: &super::line::LStr| f.owned().unwrap_or_default();
        let kind = match entry_type {
            "message" => EntryKind::Message {
                role: s(&h.message.role),
                message: match h.message.parsed {
                    Some(m) => MessageCell(OnceLock::from(Some(Arc::new(m)))),
                    None => MessageCell::default(),
                },
            },
            "model_change" => EntryKind::ModelChange {
                provider: s(&h.provider),
                model_id: s(&h.model_id),
            },
            "thinking_level_change" => EntryKind::ThinkingLevelChange(s(&h.thinking_level)),
            "compaction" => EntryKind::Compaction {
                summary: s(&h.summary),
                first_kept_entry_id: s(&h.first_kept_entry_id),
                tokens_before: h.tokens_before.0.unwrap_or(0),
            },
            "branch_summary" => EntryKind::BranchSummary {
                from_id: s(&h.from_id),
                summary: s(&h.summary),
            },
            "custom" => EntryKind::Custom,
            // Rare, and its content needs the full parse.
            "custom_message" => return None,
            "label" => EntryKind::Label {
                target_id: s(&h.target_id),
                label: h.label.owned(),
            },
            "session_info" => EntryKind::SessionInfo {
                name: h.name.owned(),
            },
            _ => EntryKind::Unknown,
        };
        Some(Entry {
            line: match stored {
                Some(s) => Line::Stored(s),
                None => Line::Text(line.into()),
            },
            id,
            parent_id: h.parent_id.as_str().map(Short::new),
            entry_type: entry_type.into(),
            timestamp_ms: h
                .timestamp
                .as_str()
                .and_then(ids::parse_iso_ms)
                .unwrap_or(0),
            kind,
            raw: OnceLock::new(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_deref()
    }

    /// The entry's `type` string (`""` if absent).
    pub fn entry_type(&self) -> &str {
        &self.entry_type
    }

    pub fn kind(&self) -> &EntryKind {
        &self.kind
    }

    /// The entry as one line of the session file (`JSON.stringify` form, no newline). A line
    /// that cannot be read back (the file was changed in place by another program since it was
    /// loaded) is reported on stderr and stands in as the entry's tree fields only
    /// (`{"type","id","parentId"}`); [`Entry::try_line`] says so instead.
    pub fn line(&self) -> Cow<'_, str> {
        match self.line.get() {
            Ok(l) => l,
            Err(e) => {
                self.line.warn(&e);
                let mut m = Map::new();
                m.insert("type".into(), Value::String(self.entry_type.to_string()));
                m.insert("id".into(), Value::String(self.id.to_string()));
                let parent = self.parent_id.as_deref().map(Value::from);
                m.insert("parentId".into(), parent.unwrap_or(Value::Null));
                Cow::Owned(store::to_line(&m))
            }
        }
    }

    /// [`Entry::line`], or why it cannot be read back.
    pub fn try_line(&self) -> Result<Cow<'_, str>, String> {
        self.line.get()
    }

    /// The line, for parsing: `None` (reported once on stderr) when it cannot be read back.
    fn text(&self) -> Option<Cow<'_, str>> {
        self.line.get().map_err(|e| self.line.warn(&e)).ok()
    }

    /// The line is in memory only (not in a file pith can read it back from).
    pub fn is_in_memory(&self) -> bool {
        matches!(self.line, Line::Text(_))
    }

    /// The line has been written to a file at `stored`: read it back from there from now on
    /// instead of keeping it.
    pub(crate) fn stored_at(&mut self, stored: Stored) {
        self.line = Line::Stored(stored);
    }

    /// The raw JSON object, as loaded or built (parsed from [`Entry::line`] on first use).
    pub fn raw(&self) -> &Map<String, Value> {
        self.raw.get_or_init(|| {
            // The line is always the serialisation of an object.
            match self.text().map(|t| serde_json::from_str::<Value>(&t)) {
                Some(Ok(Value::Object(map))) => Box::new(map),
                _ => Box::default(),
            }
        })
    }

    /// The entry's ISO `timestamp` in Unix ms (0 when absent or unparsable).
    pub fn timestamp_ms(&self) -> u64 {
        self.timestamp_ms
    }

    /// The agent message when this is a `message` entry that parsed (parsed once, then kept).
    pub fn message(&self) -> Option<&AgentMessage> {
        match &self.kind {
            EntryKind::Message { message, role } => message
                .0
                .get_or_init(|| parse_message(&self.text()?, role).map(Arc::new))
                .as_deref(),
            _ => None,
        }
    }

    /// Like [`Entry::message`], but a message not parsed yet is parsed into a fresh value and
    /// not kept: for walks over many entries (the context, the fork list).
    pub fn message_uncached(&self) -> Option<Cow<'_, AgentMessage>> {
        let EntryKind::Message { message, role } = &self.kind else {
            return None;
        };
        match message.0.get() {
            Some(parsed) => parsed.as_deref().map(Cow::Borrowed),
            None => parse_message(&self.text()?, role).map(Cow::Owned),
        }
    }

    pub fn is_assistant_message(&self) -> bool {
        matches!(&self.kind, EntryKind::Message { role, .. } if role == "assistant")
    }

    /// Text of a user `message` entry (text blocks joined), `None` for anything else.
    pub fn user_text(&self) -> Option<String> {
        if !matches!(&self.kind, EntryKind::Message { role, .. } if role == "user") {
            return None;
        }
        match self.message_uncached().as_deref() {
            Some(AgentMessage::User(u)) => Some(u.content.joined_text()),
            _ => None,
        }
    }

    /// [`Entry::context_message`], moving a message parsed at load out of its cache instead of
    /// copying it.
    pub fn take_context_message(&mut self) -> Option<Arc<AgentMessage>> {
        if let EntryKind::Message { message, .. } = &mut self.kind {
            if let Some(Some(m)) = message.0.take() {
                return Some(m);
            }
        }
        self.context_message().map(Arc::new)
    }

    /// Drop the parsed message kept with the line (it is parsed again on demand).
    pub fn forget_parsed(&mut self) {
        if let EntryKind::Message { message, .. } = &mut self.kind {
            message.0 = OnceLock::new();
        }
    }

    /// The message this entry contributes to the LLM context, if any (spec 11.4).
    pub fn context_message(&self) -> Option<AgentMessage> {
        match &self.kind {
            EntryKind::Message { .. } => self.message_uncached().map(Cow::into_owned),
            EntryKind::CustomMessage(Some(m)) => {
                let mut m = (**m).clone();
                m.timestamp = self.timestamp_ms();
                Some(AgentMessage::Custom(m))
            }
            EntryKind::BranchSummary { from_id, summary } if !summary.is_empty() => Some(
                AgentMessage::BranchSummary(crate::message::BranchSummaryMessage {
                    summary: summary.clone(),
                    from_id: from_id.clone(),
                    timestamp: self.timestamp_ms(),
                }),
            ),
            _ => None,
        }
    }
}

fn parse_kind(raw: &Map<String, Value>) -> EntryKind {
    let s = |k: &str| str_field(raw, k).unwrap_or_default();
    match raw.get("type").and_then(Value::as_str).unwrap_or("") {
        "message" => EntryKind::Message {
            role: raw
                .get("message")
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            message: MessageCell::default(),
        },
        "model_change" => EntryKind::ModelChange {
            provider: s("provider"),
            model_id: s("modelId"),
        },
        "thinking_level_change" => EntryKind::ThinkingLevelChange(s("thinkingLevel")),
        "compaction" => EntryKind::Compaction {
            summary: s("summary"),
            first_kept_entry_id: s("firstKeptEntryId"),
            tokens_before: raw
                .get("tokensBefore")
                .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64)))
                .unwrap_or(0),
        },
        "branch_summary" => EntryKind::BranchSummary {
            from_id: s("fromId"),
            summary: s("summary"),
        },
        "custom" => EntryKind::Custom,
        "custom_message" => EntryKind::CustomMessage(parse_custom_message(raw).map(Box::new)),
        "label" => EntryKind::Label {
            target_id: s("targetId"),
            label: str_field(raw, "label"),
        },
        "session_info" => EntryKind::SessionInfo {
            name: str_field(raw, "name"),
        },
        _ => EntryKind::Unknown,
    }
}

fn parse_custom_message(raw: &Map<String, Value>) -> Option<CustomMessage> {
    let content: UserContent = serde_json::from_value(raw.get("content")?.clone()).ok()?;
    Some(CustomMessage {
        custom_type: str_field(raw, "customType").unwrap_or_default(),
        content,
        display: raw.get("display").and_then(Value::as_bool).unwrap_or(false),
        details: raw.get("details").cloned(),
        timestamp: 0,
    })
}

/// Builds new entries with the reference's key order.
pub(crate) struct NewEntry {
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
}

impl NewEntry {
    fn base(&self, map: &mut Map<String, Value>) {
        map.insert("id".into(), Value::String(self.id.clone()));
        let parent = self.parent_id.clone().map_or(Value::Null, Value::String);
        map.insert("parentId".into(), parent);
        map.insert("timestamp".into(), Value::String(self.timestamp.clone()));
    }

    /// `{type, id, parentId, timestamp, ...fields}` (fields with `None` are omitted, like
    /// `undefined` in `JSON.stringify`).
    pub fn standard(&self, ty: &str, fields: Vec<(&str, Option<Value>)>) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(ty.into()));
        self.base(&mut map);
        for (k, v) in fields {
            if let Some(v) = v {
                map.insert(k.into(), v);
            }
        }
        map
    }

    /// `{type, ...fields, id, parentId, timestamp}` (the order of `custom`/`custom_message`).
    pub fn fields_first(&self, ty: &str, fields: Vec<(&str, Option<Value>)>) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(ty.into()));
        for (k, v) in fields {
            if let Some(v) = v {
                map.insert(k.into(), v);
            }
        }
        self.base(&mut map);
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Entry {
        let v: Value = serde_json::from_str(line).unwrap();
        match v {
            Value::Object(m) => Entry::from_raw(m).unwrap(),
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn unknown_types_and_fields_are_kept() {
        let e =
            parse(r#"{"type":"future","id":"aa","parentId":null,"timestamp":"x","z":1,"a":[2]}"#);
        assert!(matches!(e.kind(), EntryKind::Unknown));
        assert_eq!(
            serde_json::to_string(e.raw()).unwrap(),
            r#"{"type":"future","id":"aa","parentId":null,"timestamp":"x","z":1,"a":[2]}"#
        );
    }

    #[test]
    fn branch_summary_with_empty_summary_is_not_context() {
        let e = parse(
            r#"{"type":"branch_summary","id":"b","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","fromId":"root","summary":""}"#,
        );
        assert!(e.context_message().is_none());
        let e = parse(
            r#"{"type":"branch_summary","id":"b","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","fromId":"root","summary":"S"}"#,
        );
        match e.context_message() {
            Some(AgentMessage::BranchSummary(b)) => {
                assert_eq!(
                    (b.summary.as_str(), b.from_id.as_str(), b.timestamp),
                    ("S", "root", 1_767_225_600_000)
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn messages_are_parsed_from_the_line_on_demand() {
        let line = r#"{"type":"message","id":"m","parentId":"p","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":5},"extra":{"b":1.5,"a":0.00003}}"#;
        let e = parse(line);
        assert_eq!(e.line(), line);
        assert_eq!(
            (e.id(), e.parent_id(), e.entry_type()),
            ("m", Some("p"), "message")
        );
        assert_eq!(e.timestamp_ms(), 1_767_225_600_000);
        assert_eq!(e.user_text().as_deref(), Some("hi"));
        assert!(matches!(e.context_message(), Some(AgentMessage::User(u)) if u.timestamp == 5));
        assert!(matches!(e.message(), Some(AgentMessage::User(_))));
        assert_eq!(serde_json::to_string(e.raw()).unwrap(), line);
        let copy = e.clone();
        assert_eq!(copy.line(), line);
        assert!(matches!(copy.message(), Some(AgentMessage::User(_))));

        let odd = parse(
            r#"{"type":"message","id":"o","parentId":null,"timestamp":"x","message":{"role":"alien","content":"?"}}"#,
        );
        assert!(odd.message().is_none());
        assert!(odd.context_message().is_none());
        assert!(odd.user_text().is_none());
        assert_eq!(odd.timestamp_ms(), 0);
        assert!(matches!(odd.kind(), EntryKind::Message { role, .. } if role == "alien"));
    }

    #[test]
    fn the_fast_path_reads_what_the_full_path_reads() {
        for line in [
            r#"{"type":"message","id":"m","parentId":"p","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":5}}"#,
            r#"{"type":"model_change","id":"a","parentId":null,"timestamp":"x","provider":"p","modelId":"m"}"#,
            r#"{"type":"thinking_level_change","id":"a","parentId":null,"timestamp":"x","thinkingLevel":"high"}"#,
            r#"{"type":"compaction","id":"c","parentId":"a","timestamp":"x","summary":"S","firstKeptEntryId":"k","tokensBefore":12.7}"#,
            r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"x","fromId":"f","summary":"S"}"#,
            r#"{"type":"label","id":"l","parentId":"a","timestamp":"x","targetId":"t","label":"L"}"#,
            r#"{"type":"label","id":"l","parentId":"a","timestamp":"x","targetId":"t"}"#,
            r#"{"type":"session_info","id":"s","parentId":"a","timestamp":"x","name":"N"}"#,
            r#"{"type":"future","id":"f","parentId":"a","z":[1,{"q":null}]}"#,
            r#"{"type":"custom","id":"u","parentId":"a","customType":"x","data":{}}"#,
        ] {
            let fast = Entry::from_line(line, None).expect(line);
            let full = parse(line);
            assert_eq!(fast.line(), full.line());
            assert_eq!(
                (
                    fast.id(),
                    fast.parent_id(),
                    fast.entry_type(),
                    fast.timestamp_ms()
                ),
                (
                    full.id(),
                    full.parent_id(),
                    full.entry_type(),
                    full.timestamp_ms()
                )
            );
            let mut fast = fast;
            fast.forget_parsed();
            assert_eq!(format!("{:?}", fast.kind()), format!("{:?}", full.kind()));
            assert_eq!(
                format!("{:?}", fast.message()),
                format!("{:?}", full.message())
            );
        }
        // Left to the full path: non-canonical text, custom messages, missing ids.
        assert!(Entry::from_line(r#"{ "type":"x","id":"i"}"#, None).is_none());
        assert!(
            Entry::from_line(
                r#"{"type":"custom_message","customType":"c","content":"x","id":"i"}"#,
                None
            )
            .is_none()
        );
        assert!(Entry::from_line(r#"{"type":"x","id":5}"#, None).is_none());
    }

    #[test]
    fn lines_are_written_the_reference_way() {
        // Whitespace and number forms are normalised like `JSON.stringify`.
        let e = parse(r#"{ "type": "x", "id": "i", "n": 1.0, "f": 1e-7 }"#);
        assert_eq!(e.line(), r#"{"type":"x","id":"i","n":1,"f":1e-7}"#);
    }
}
