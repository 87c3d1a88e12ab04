//! The message model shared by every part of pith: the agent's messages (what the session stores,
//! what events carry) and their content blocks. Field names and order follow the reference's JSON
//! exactly (`role` first, optional fields omitted rather than `null`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Milliseconds since the Unix epoch (the reference's `Date.now()`).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    pub text: String,
    #[serde(
        rename = "textSignature",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub text_signature: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkingContent {
    pub thinking: String,
    #[serde(
        rename = "thinkingSignature",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageContent {
    pub data: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Raw arguments as the model produced them (an object; `{}` when unparsable).
    pub arguments: Value,
    /// pi 1.6.0: why the complete arguments text of the call is not a JSON object (V8's
    /// `JSON.parse` message, then the text); `arguments` is `{}` and the tool does not run.
    #[serde(
        rename = "argumentsError",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub arguments_error: Option<String>,
    #[serde(
        rename = "thoughtSignature",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub thought_signature: Option<String>,
}

/// One block of message content. Serialised with `type` first: `{"type":"text","text":…}`.
/// Deserialised by hand (`ContentVisitor`): serde's derive for internally tagged enums buffers every
/// block before reading it, which dominated loading long sessions.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Content {
    #[serde(rename = "text")]
    Text(TextContent),
    #[serde(rename = "thinking")]
    Thinking(ThinkingContent),
    #[serde(rename = "image")]
    Image(ImageContent),
    #[serde(rename = "toolCall")]
    ToolCall(ToolCall),
}

impl Content {
    pub fn text(s: impl Into<String>) -> Content {
        Content::Text(TextContent {
            text: s.into(),
            text_signature: None,
        })
    }
}

/// A user message's content: the reference accepts a plain string or an array of blocks.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<Content>),
}

impl<'de> Deserialize<'de> for UserContent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = UserContent;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<UserContent, E> {
                Ok(UserContent::Text(v.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<UserContent, E> {
                Ok(UserContent::Text(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<UserContent, A::Error> {
                read_blocks(&mut seq).map(UserContent::Blocks)
            }
        }
        d.deserialize_any(V).map_err(|_: D::Error| {
            serde::de::Error::custom("data did not match any variant of untagged enum UserContent")
        })
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ContentVisitor)
    }
}

/// A key read as "the tag" or any other key (kept for the buffered path).
enum Key {
    Tag,
    Other(String),
}

struct FirstKey(&'static str);

impl<'de> serde::de::DeserializeSeed<'de> for FirstKey {
    type Value = Key;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FirstKey {
    type Value = Key;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(if v == self.0 {
            Key::Tag
        } else {
            Key::Other(v.to_string())
        })
    }
}

struct ContentVisitor;

impl<'de> serde::de::Visitor<'de> for ContentVisitor {
    type Value = Content;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a content block object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
        use serde::de::Error;
        match map.next_key_seed(FirstKey("type"))? {
            None => Err(A::Error::missing_field("type")),
            // The usual case (`JSON.stringify` of the reference's blocks): the variant's struct
            // reads the rest of the object in place.
            Some(Key::Tag) => {
                let tag: String = map.next_value()?;
                content_variant(&tag, serde::de::value::MapAccessDeserializer::new(map))
            }
            // The tag comes later: buffer the object, then read it.
            Some(Key::Other(k)) => {
                let mut obj = serde_json::Map::new();
                obj.insert(k, map.next_value::<Value>()?);
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    obj.insert(k, v);
                }
                let tag = obj
                    .get("type")
                    .and_then(Value::as_str)
                    .ok_or_else(|| A::Error::missing_field("type"))?
                    .to_string();
                content_variant(&tag, Value::Object(obj)).map_err(A::Error::custom)
            }
        }
    }
}

fn content_variant<'de, D: serde::Deserializer<'de>>(tag: &str, d: D) -> Result<Content, D::Error> {
    match tag {
        "text" => TextContent::deserialize(d).map(Content::Text),
        "thinking" => ThinkingContent::deserialize(d).map(Content::Thinking),
        "image" => ImageContent::deserialize(d).map(Content::Image),
        "toolCall" => ToolCall::deserialize(d).map(Content::ToolCall),
        _ => Err(serde::de::Error::unknown_variant(
            tag,
            &["text", "thinking", "image", "toolCall"],
        )),
    }
}

/// The blocks of a sequence, in a vector no larger than they need. serde's `Vec` grows by
/// doubling from four slots, and most messages hold one block: a long session's context would
/// carry three empty slots (over 400 bytes) per message.
fn read_blocks<'de, A: serde::de::SeqAccess<'de>>(seq: &mut A) -> Result<Vec<Content>, A::Error> {
    let Some(first) = seq.next_element::<Content>()? else {
        return Ok(Vec::new());
    };
    let Some(second) = seq.next_element::<Content>()? else {
        return Ok(vec![first]);
    };
    let mut blocks = vec![first, second];
    while let Some(b) = seq.next_element::<Content>()? {
        blocks.push(b);
    }
    blocks.shrink_to_fit();
    Ok(blocks)
}

/// `content` of assistant and tool-result messages: a sequence of blocks ([`read_blocks`]).
fn content_blocks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Content>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<Content>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            read_blocks(&mut seq)
        }
    }
    d.deserialize_seq(V)
}

impl UserContent {
    /// The text blocks joined without separator (the reference's "text of a user message").
    pub fn joined_text(&self) -> String {
        match self {
            UserContent::Text(s) => s.clone(),
            UserContent::Blocks(b) => b
                .iter()
                .filter_map(|c| match c {
                    Content::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    #[serde(serialize_with = "js_f64")]
    pub input: f64,
    #[serde(serialize_with = "js_f64")]
    pub output: f64,
    #[serde(rename = "cacheRead", serialize_with = "js_f64")]
    pub cache_read: f64,
    #[serde(rename = "cacheWrite", serialize_with = "js_f64")]
    pub cache_write: f64,
    #[serde(serialize_with = "js_f64")]
    pub total: f64,
    /// pi 1.6.0: whether the provider reported the total (pith computes it: `false`). Set under
    /// `--compat 1.6` only (`events.cost_total_from_provider`).
    #[serde(
        rename = "totalFromProvider",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub total_from_provider: Option<bool>,
}

/// Serialise an `f64` as an integer when it is integral (`3`, not `3.0`), so that also
/// `serde_json::Value`s built from our types compare equal to parsed reference JSON; text output
/// gets JavaScript's number format from [`crate::json::JsFormatter`] either way. Non-finite
/// values become `null`, as in JavaScript.
pub fn js_f64<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if !v.is_finite() {
        s.serialize_none()
    } else if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

/// Token usage of one assistant message. `cache_write_1h` (Anthropic) and `reasoning` are pi
/// 0.87.1's additions: the decoders fill them under `--compat 0.87` only
/// (`llm::stream::Builder::compat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    #[serde(rename = "cacheRead")]
    pub cache_read: u64,
    #[serde(rename = "cacheWrite")]
    pub cache_write: u64,
    #[serde(rename = "totalTokens")]
    pub total_tokens: u64,
    pub cost: Cost,
    #[serde(rename = "cacheWrite1h", default)]
    pub cache_write_1h: Option<u64>,
    #[serde(default)]
    pub reasoning: Option<u64>,
}

/// The reference's key order: `reasoning` sits before `totalTokens` where the OpenAI decoder
/// builds the object with it, and `cacheWrite1h` (then a late `reasoning`) after `cost` where the
/// Anthropic decoder adds them to an existing object.
impl Serialize for Usage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let early_reasoning = self.cache_write_1h.is_none();
        let n =
            6 + usize::from(self.cache_write_1h.is_some()) + usize::from(self.reasoning.is_some());
        let mut m = s.serialize_map(Some(n))?;
        m.serialize_entry("input", &self.input)?;
        m.serialize_entry("output", &self.output)?;
        m.serialize_entry("cacheRead", &self.cache_read)?;
        m.serialize_entry("cacheWrite", &self.cache_write)?;
        if let (true, Some(r)) = (early_reasoning, self.reasoning) {
            m.serialize_entry("reasoning", &r)?;
        }
        m.serialize_entry("totalTokens", &self.total_tokens)?;
        m.serialize_entry("cost", &self.cost)?;
        if let Some(w) = self.cache_write_1h {
            m.serialize_entry("cacheWrite1h", &w)?;
            if let Some(r) = self.reasoning {
                m.serialize_entry("reasoning", &r)?;
            }
        }
        m.end()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    #[default]
    #[serde(rename = "stop")]
    Stop,
    #[serde(rename = "length")]
    Length,
    #[serde(rename = "toolUse")]
    ToolUse,
    #[serde(rename = "error")]
    Error,
    #[serde(rename = "aborted")]
    Aborted,
    /// pi 0.87.1: an assistant message still streaming (its `message_start`).
    #[serde(rename = "pending")]
    Pending,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    pub content: UserContent,
    pub timestamp: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    #[serde(deserialize_with = "content_blocks")]
    pub content: Vec<Content>,
    pub api: String,
    pub provider: String,
    pub model: String,
    /// pi 0.87.1: the effort a model with managed effort (`compat.supportsMidConvoEffort`)
    /// answered at; sent back with the history.
    #[serde(
        rename = "providerThinkingLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_thinking_level: Option<String>,
    pub usage: Usage,
    #[serde(rename = "stopReason")]
    pub stop_reason: StopReason,
    pub timestamp: u64,
    #[serde(
        rename = "responseId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub response_id: Option<String>,
    /// The model the provider says answered, when it differs from `model` (OpenAI-compatible
    /// routers). Set on the first chunk, so it comes before `rawStopReason`.
    #[serde(
        rename = "responseModel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub response_model: Option<String>,
    /// pi 0.87.1: the provider's own stop reason (`end_turn`, `tool_use`, `stop`, ...).
    #[serde(
        rename = "rawStopReason",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub raw_stop_reason: Option<String>,
    #[serde(
        rename = "errorMessage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub error_message: Option<String>,
    /// pi 0.87.1's structured failure details (`bedrock_response_failure`: HTTP status, error
    /// code, request id) beside `errorMessage`, which stays as it was. Boxed: rare, and every
    /// message in memory pays for the inline size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Box<Vec<serde_json::Value>>>,
    /// pi 1.6.0: the request's wall time in ms (`events.message_duration`).
    #[serde(
        rename = "durationMs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// pi 1.6.0: the thinking level the request ran at (`events.message_thinking_level`). A
    /// level pith does not know reads as none (one byte here: every message in memory has it).
    #[serde(
        rename = "thinkingLevel",
        default,
        deserialize_with = "lenient_level",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_level: Option<ThinkingLevel>,
}

/// A thinking level, or none for `null` or a level pith does not know.
fn lenient_level<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<ThinkingLevel>, D::Error> {
    let v = Option::<std::borrow::Cow<'de, str>>::deserialize(d)?;
    Ok(v.as_deref().and_then(ThinkingLevel::parse))
}

impl AssistantMessage {
    /// The empty partial a stream starts from (`content: []`, zero usage, `stopReason: "stop"`).
    pub fn empty(api: &str, provider: &str, model: &str) -> AssistantMessage {
        AssistantMessage {
            api: api.to_string(),
            provider: provider.to_string(),
            model: model.to_string(),
            timestamp: now_ms(),
            ..Default::default()
        }
    }

    /// A copy without the content blocks (the large part), e.g. to serialise the rest.
    pub fn clone_without_content(&self) -> AssistantMessage {
        AssistantMessage {
            content: Vec::new(),
            api: self.api.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            usage: self.usage,
            stop_reason: self.stop_reason,
            timestamp: self.timestamp,
            response_id: self.response_id.clone(),
            response_model: self.response_model.clone(),
            provider_thinking_level: self.provider_thinking_level.clone(),
            raw_stop_reason: self.raw_stop_reason.clone(),
            error_message: self.error_message.clone(),
            diagnostics: self.diagnostics.clone(),
            duration_ms: self.duration_ms,
            thinking_level: self.thinking_level,
        }
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|c| match c {
            Content::ToolCall(t) => Some(t),
            _ => None,
        })
    }

    /// Text blocks concatenated (no separator).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    #[serde(rename = "toolCallId")]
    pub tool_call_id: String,
    #[serde(rename = "toolName")]
    pub tool_name: String,
    #[serde(deserialize_with = "content_blocks")]
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(rename = "isError")]
    pub is_error: bool,
    /// pi 1.6.0: how long the tool ran, in ms; absent when it did not run
    /// (`events.message_duration`).
    #[serde(
        rename = "durationMs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    pub timestamp: u64,
    /// pi 1.6.0's `codemode`: the script's nested tool calls (`{calls, complete}`); kept in the
    /// session, never sent to the model.
    #[serde(
        rename = "nestedCalls",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub nested_calls: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BashExecutionMessage {
    pub command: String,
    pub output: String,
    #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(
        rename = "fullOutputPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub full_output_path: Option<String>,
    pub timestamp: u64,
    #[serde(
        rename = "excludeFromContext",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub exclude_from_context: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CustomMessage {
    #[serde(rename = "customType")]
    pub custom_type: String,
    pub content: UserContent,
    pub display: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub timestamp: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchSummaryMessage {
    pub summary: String,
    #[serde(rename = "fromId")]
    pub from_id: String,
    pub timestamp: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionSummaryMessage {
    pub summary: String,
    #[serde(rename = "tokensBefore")]
    pub tokens_before: u64,
    pub timestamp: u64,
}

/// A tool as a system message declares it to the model (pi 0.87.1 `toolsAdded`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    #[serde(
        rename = "constrainedSampling",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub constrained_sampling: Option<Value>,
}

/// A tool a system message withdraws (`toolsRemoved`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRef {
    pub name: String,
}

/// pi 0.87.1's `role:"system"` message: the system prompt as named sections (a later message
/// patches them by name, `null` removes one) and the tools it declares or withdraws. Only
/// emitted under `--compat 0.87`; see `prompt/sections.rs` and `core/prompt.rs`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct SystemMessage {
    pub content: UserContent,
    #[serde(default)]
    pub sections: Option<serde_json::Map<String, Value>>,
    pub timestamp: u64,
    #[serde(rename = "toolsAdded", default)]
    pub tools_added: Option<Vec<ToolDeclaration>>,
    #[serde(rename = "toolsRemoved", default)]
    pub tools_removed: Option<Vec<ToolRef>>,
    /// Written in the key order of a replayed checkpoint (`toolsAdded` before `timestamp`, as the
    /// reference's compaction checkpoint has it) instead of a fresh message's.
    #[serde(skip)]
    pub checkpoint: bool,
}

impl Serialize for SystemMessage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("SystemMessage", 5)?;
        m.serialize_field("content", &self.content)?;
        if let Some(x) = &self.sections {
            m.serialize_field("sections", x)?;
        }
        if !self.checkpoint {
            m.serialize_field("timestamp", &self.timestamp)?;
        }
        if let Some(x) = &self.tools_added {
            m.serialize_field("toolsAdded", x)?;
        }
        if let Some(x) = &self.tools_removed {
            m.serialize_field("toolsRemoved", x)?;
        }
        if self.checkpoint {
            m.serialize_field("timestamp", &self.timestamp)?;
        }
        m.end()
    }
}

/// Every message the agent keeps in its context. Serialised with `role` first.
///
/// `#[repr(u8)]` with the same first three variants (and discriminants) as [`LlmMessage`]: a
/// user, assistant or tool-result message is laid out exactly as the `LlmMessage` of that role,
/// which lets a request borrow the agent's messages instead of copying them
/// ([`AgentMessage::as_llm`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
#[repr(u8)]
pub enum AgentMessage {
    #[serde(rename = "user")]
    User(UserMessage) = 0,
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage) = 1,
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage) = 2,
    #[serde(rename = "bashExecution")]
    BashExecution(BashExecutionMessage),
    #[serde(rename = "custom")]
    Custom(CustomMessage),
    #[serde(rename = "branchSummary")]
    BranchSummary(BranchSummaryMessage),
    #[serde(rename = "compactionSummary")]
    CompactionSummary(CompactionSummaryMessage),
    /// pi 0.87.1 only (`--compat 0.87`): the system prompt and tools as a transcript message.
    #[serde(rename = "system")]
    System(SystemMessage),
}

/// A message as sent to a provider (after `convertToLlm`): only these three roles exist there.
/// Laid out as the first three variants of [`AgentMessage`] (see there).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
#[repr(u8)]
pub enum LlmMessage {
    #[serde(rename = "user")]
    User(UserMessage) = 0,
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage) = 1,
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage) = 2,
    /// pi 0.87.1 (`--compat 0.87`): a system message of the transcript, in place. Providers fold
    /// them into the request's system prompt and tools ([`crate::llm::LlmRequest`]'s
    /// `system_prompt` and `tools` already hold the result); the APIs of models that take system
    /// messages mid-conversation send the later ones where they are. (Not laid out as
    /// `AgentMessage::System`: converted, never viewed in place.)
    #[serde(rename = "system")]
    System(SystemMessage) = 3,
}

impl AgentMessage {
    /// A user, assistant or tool-result message seen as what a provider gets, without a copy;
    /// `None` for the roles `convertToLlm` turns into something else.
    pub fn as_llm(&self) -> Option<&LlmMessage> {
        match self {
            AgentMessage::User(_) | AgentMessage::Assistant(_) | AgentMessage::ToolResult(_) => {
                // SAFETY: both enums are `#[repr(u8)]`, so each is laid out as a `repr(C)` union
                // of `repr(C)` structs `{ tag: u8, payload }`, one per variant (RFC 2195). The
                // three variants matched here have the same tag values and payload types in
                // both enums, so a value of one of them is a valid `LlmMessage` of the same
                // variant at the same address; `LlmMessage` is no larger and no more aligned than
                // `AgentMessage` (checked below), so the reference stays inside the value.
                Some(unsafe { &*(self as *const AgentMessage).cast::<LlmMessage>() })
            }
            _ => None,
        }
    }
}

const _: () = assert!(
    std::mem::size_of::<LlmMessage>() <= std::mem::size_of::<AgentMessage>()
        && std::mem::align_of::<LlmMessage>() <= std::mem::align_of::<AgentMessage>()
);

/// The agent's context: its messages in order, each shared (`Arc`) with the requests that carry
/// it, so a request over a long history copies pointers instead of the history (the state
/// machine keeps appending to its context while the request is on the wire). Reads like a list
/// of [`AgentMessage`]s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Context(Vec<std::sync::Arc<AgentMessage>>);

impl Context {
    pub fn push(&mut self, m: AgentMessage) {
        self.0.push(std::sync::Arc::new(m));
    }

    pub fn pop(&mut self) -> Option<std::sync::Arc<AgentMessage>> {
        self.0.pop()
    }

    pub fn last(&self) -> Option<&AgentMessage> {
        self.0.last().map(|m| &**m)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &AgentMessage> + ExactSizeIterator {
        self.0.iter().map(|m| &**m)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&AgentMessage) -> bool) {
        self.0.retain(|m| keep(m));
    }

    /// Owned copies of the messages.
    pub fn to_vec(&self) -> Vec<AgentMessage> {
        self.iter().cloned().collect()
    }

    /// The shared messages (for functions generic over `Borrow<AgentMessage>`).
    pub fn as_slice(&self) -> &[std::sync::Arc<AgentMessage>] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Context {
    type Item = &'a AgentMessage;
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, std::sync::Arc<AgentMessage>>,
        fn(&'a std::sync::Arc<AgentMessage>) -> &'a AgentMessage,
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|m| &**m)
    }
}

impl From<Vec<std::sync::Arc<AgentMessage>>> for Context {
    fn from(v: Vec<std::sync::Arc<AgentMessage>>) -> Context {
        Context(v)
    }
}

impl From<Vec<AgentMessage>> for Context {
    fn from(v: Vec<AgentMessage>) -> Context {
        Context(v.into_iter().map(std::sync::Arc::new).collect())
    }
}

impl Serialize for Context {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Thinking (reasoning) effort. `Off` means no reasoning parameters are sent.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    #[default]
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    /// pi 0.80: only on models whose thinking level map names it; elsewhere it clamps down.
    Max,
}

impl ThinkingLevel {
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }

    pub fn parse(s: &str) -> Option<ThinkingLevel> {
        ThinkingLevel::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_message_serialises_in_reference_order() {
        let mut m = AssistantMessage::empty("anthropic-messages", "fake", "fake-model");
        m.timestamp = 1;
        m.content.push(Content::text("hi"));
        let s = serde_json::to_string(&AgentMessage::Assistant(m)).unwrap();
        assert_eq!(
            s,
            r#"{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"anthropic-messages","provider":"fake","model":"fake-model","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1}"#
        );
    }

    #[test]
    fn user_content_accepts_string_and_blocks() {
        let a: AgentMessage =
            serde_json::from_str(r#"{"role":"user","content":"x","timestamp":5}"#).unwrap();
        let b: AgentMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"x"}],"timestamp":5}"#,
        )
        .unwrap();
        match (a, b) {
            (AgentMessage::User(a), AgentMessage::User(b)) => {
                assert_eq!(a.content.joined_text(), b.content.joined_text())
            }
            _ => panic!("wrong role"),
        }
    }

    #[test]
    fn content_blocks_read_by_hand_as_the_derive_did() {
        let read = |j: &str| serde_json::from_str::<Content>(j).map_err(|e| e.to_string());
        assert_eq!(
            read(r#"{"type":"text","text":"a","x":1}"#),
            Ok(Content::text("a"))
        );
        // The tag later in the object.
        assert_eq!(
            read(r#"{"text":"a","type":"text"}"#),
            Ok(Content::text("a"))
        );
        assert_eq!(
            read(r#"{"type":"toolCall","id":"i","name":"n","arguments":{"a":[1]}}"#),
            Ok(Content::ToolCall(ToolCall {
                id: "i".into(),
                name: "n".into(),
                arguments: serde_json::json!({"a":[1]}),
                thought_signature: None,
                arguments_error: None
            }))
        );
        assert_eq!(
            read(r#"{"data":"QQ==","mimeType":"image/png","type":"image"}"#),
            Ok(Content::Image(ImageContent {
                data: "QQ==".into(),
                mime_type: "image/png".into()
            }))
        );
        assert!(read(r#"{"type":"video","url":"x"}"#).is_err());
        assert!(read(r#"{"text":"a"}"#).is_err());
        assert!(read(r#"{"type":"text"}"#).is_err());
        assert!(read(r#"{"type":5,"text":"a"}"#).is_err());
        assert!(read(r#""text""#).is_err());
        assert!(read("{}").is_err());
        // Through a buffered value too (serde_json::from_value).
        let v = serde_json::json!({"thinking":"t","type":"thinking","redacted":true});
        assert!(matches!(
            serde_json::from_value::<Content>(v),
            Ok(Content::Thinking(ThinkingContent {
                redacted: Some(true),
                ..
            }))
        ));
    }

    #[test]
    fn user_content_is_a_string_or_blocks() {
        let read = |j: &str| serde_json::from_str::<UserContent>(j).map_err(|e| e.to_string());
        assert_eq!(read(r#""hi""#), Ok(UserContent::Text("hi".into())));
        assert_eq!(
            read(r#"[{"type":"text","text":"a"}]"#),
            Ok(UserContent::Blocks(vec![Content::text("a")]))
        );
        assert_eq!(read("[]"), Ok(UserContent::Blocks(vec![])));
        for bad in ["5", "{}", r#"[{"type":"nope"}]"#, "null"] {
            assert!(
                read(bad).unwrap_err().contains("untagged enum UserContent"),
                "{bad}"
            );
        }
    }
}
