//! One line of a session file, kept losslessly.
//!
//! Every entry keeps the JSON object it was read from (or built as), in key order, so unknown
//! entry types and unknown fields survive a load/fork/rewrite untouched. Next to it sits a small
//! parsed view ([`EntryKind`]) of only the fields pith needs. New entries are built with the
//! reference's key order (`type`, `id`, `parentId`, `timestamp`, then the type's fields; the
//! extension entry types `custom`/`custom_message` put their own fields first, as the reference
//! does).

use serde_json::{Map, Value};

use crate::message::{AgentMessage, CustomMessage, UserContent};

use super::ids;

/// The interpreted part of an entry. Anything pith does not understand is `Unknown` (still kept
/// and written back verbatim).
#[derive(Clone, Debug)]
pub enum EntryKind {
    /// A `message` entry. `message` is `None` when the message object did not parse as an
    /// [`AgentMessage`] (an unknown role, say): it then takes no part in the context.
    Message {
        role: String,
        message: Option<Box<AgentMessage>>,
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
    raw: Map<String, Value>,
    id: String,
    parent_id: Option<String>,
    kind: EntryKind,
}

fn str_field(raw: &Map<String, Value>, key: &str) -> Option<String> {
    raw.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Entry {
    /// Interpret a JSON object read from a file. Fails only when it has no string `id`.
    pub fn from_raw(raw: Map<String, Value>) -> Result<Entry, String> {
        let id = str_field(&raw, "id").ok_or("entry has no string id")?;
        let parent_id = str_field(&raw, "parentId");
        let kind = parse_kind(&raw);
        Ok(Entry {
            raw,
            id,
            parent_id,
            kind,
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
        self.raw.get("type").and_then(Value::as_str).unwrap_or("")
    }

    pub fn kind(&self) -> &EntryKind {
        &self.kind
    }

    /// The raw JSON object, exactly as loaded or built.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// The entry's ISO `timestamp` in Unix ms (0 when absent or unparsable).
    pub fn timestamp_ms(&self) -> u64 {
        self.raw
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(ids::parse_iso_ms)
            .unwrap_or(0)
    }

    /// The agent message when this is a `message` entry that parsed.
    pub fn message(&self) -> Option<&AgentMessage> {
        match &self.kind {
            EntryKind::Message { message, .. } => message.as_deref(),
            _ => None,
        }
    }

    pub fn is_assistant_message(&self) -> bool {
        matches!(&self.kind, EntryKind::Message { role, .. } if role == "assistant")
    }

    /// Text of a user `message` entry (text blocks joined), `None` for anything else.
    pub fn user_text(&self) -> Option<String> {
        match self.message() {
            Some(AgentMessage::User(u)) => Some(u.content.joined_text()),
            _ => None,
        }
    }

    /// The message this entry contributes to the LLM context, if any (spec 11.4).
    pub fn context_message(&self) -> Option<AgentMessage> {
        match &self.kind {
            EntryKind::Message { message, .. } => message.as_deref().cloned(),
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
        "message" => {
            let value = raw.get("message");
            let role = value
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let message = value
                .and_then(|m| serde_json::from_value::<AgentMessage>(m.clone()).ok())
                .map(Box::new);
            EntryKind::Message { role, message }
        }
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
}
