//! Commands a host sends on stdin, decoded and validated.
//!
//! Decoding is strict where the reference is accidental: a missing or mistyped field is an error
//! response naming the command, the field and what was expected (the reference throws a
//! JavaScript `TypeError` instead). Unknown extra fields are ignored, as in the reference.

use serde_json::{Map, Value};

use crate::message::{Content, ImageContent, ThinkingLevel};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMode {
    All,
    OneAtATime,
}

impl QueueMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::All => "all",
            QueueMode::OneAtATime => "one-at-a-time",
        }
    }
    pub fn parse(s: &str) -> Option<QueueMode> {
        match s {
            "all" => Some(QueueMode::All),
            "one-at-a-time" => Some(QueueMode::OneAtATime),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterruptMode {
    Immediate,
    Wait,
}

impl InterruptMode {
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptMode::Immediate => "immediate",
            InterruptMode::Wait => "wait",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamingBehavior {
    Steer,
    FollowUp,
}

/// A user message as sent by the host (`message` + optional `images`, and seed 000's
/// `attachments`, already mapped onto content blocks).
#[derive(Clone, Debug, PartialEq)]
pub struct UserInput {
    pub text: String,
    pub images: Vec<ImageContent>,
    /// Seed 000 `attachments`, in order: images as image blocks, documents as text blocks.
    pub attachments: Vec<Content>,
    /// pith's own: the run limits of a `prompt` / `abort_and_prompt` (`limits.rs`); `None`
    /// when the command has no `limits` (steer and follow-up never start a run: not read).
    pub limits: Option<crate::limits::Limits>,
    /// pith's own: the `outputSchema` of the command (`output_schema.rs`), checked here; a
    /// message that does not start a run (steer, follow-up, a queued prompt) is refused with it.
    pub output_schema: Option<crate::output_schema::OutputSchema>,
}

impl UserInput {
    /// Content blocks of the user message: the text, the images, then the attachments.
    pub fn content(&self) -> Vec<Content> {
        let mut c = vec![Content::text(self.text.clone())];
        c.extend(self.images.iter().cloned().map(Content::Image));
        c.extend(self.attachments.iter().cloned());
        c
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Prompt {
        input: UserInput,
        streaming_behavior: Option<StreamingBehavior>,
    },
    Steer(UserInput),
    FollowUp(UserInput),
    Abort,
    AbortAndPrompt(UserInput),
    NewSession {
        parent_session: Option<String>,
    },
    GetState,
    /// pith's own (issue 27): a liveness check, answered at once.
    Ping,
    GetMessages,
    SetModel {
        provider: String,
        model_id: String,
    },
    CycleModel,
    GetAvailableModels,
    SetThinkingLevel(ThinkingLevel),
    CycleThinkingLevel,
    SetSteeringMode(QueueMode),
    SetFollowUpMode(QueueMode),
    SetInterruptMode(InterruptMode),
    Compact {
        custom_instructions: Option<String>,
    },
    SetAutoCompaction(bool),
    SetAutoRetry(bool),
    AbortRetry,
    Bash {
        command: String,
        /// pi 0.77: recorded, but left out of the LLM context.
        exclude_from_context: bool,
    },
    AbortBash,
    GetSessionStats,
    ExportHtml {
        output_path: Option<String>,
    },
    SwitchSession {
        session_path: String,
    },
    /// `fork` and its alias `branch`; `command` is the name the host used.
    Fork {
        entry_id: String,
    },
    /// Copy the current branch into a new session file and continue there.
    Clone,
    /// `get_fork_messages` and its alias `get_branch_messages`.
    GetForkMessages,
    GetLastAssistantText,
    SetSessionName(String),
    GetCommands,
    /// pi 0.84: empty both queues, answer what they held.
    ClearQueue,
    /// pi 0.81: the current model's thinking levels.
    GetAvailableThinkingLevels,
    /// pi 0.79: the session's entries (after `since`) and the leaf.
    GetEntries {
        since: Option<String>,
    },
    /// pi 0.79: the session's entries as a tree.
    GetTree,
    /// A reply to an extension UI request; pith loads no extensions, so it is ignored silently.
    ExtensionUiResponse,
}

/// Every command name pith knows (the reference's 28 plus the aliases and additions of seeds 002-004).
pub const COMMAND_NAMES: &[&str] = &[
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "abort_and_prompt",
    "new_session",
    "get_state",
    "get_messages",
    "set_model",
    "cycle_model",
    "get_available_models",
    "set_thinking_level",
    "cycle_thinking_level",
    "set_steering_mode",
    "set_follow_up_mode",
    "set_interrupt_mode",
    "compact",
    "set_auto_compaction",
    "set_auto_retry",
    "abort_retry",
    "bash",
    "abort_bash",
    "get_session_stats",
    "export_html",
    "switch_session",
    "fork",
    "branch",
    "clone",
    "get_fork_messages",
    "get_branch_messages",
    "get_last_assistant_text",
    "set_session_name",
    "get_commands",
    "extension_ui_response",
    "clear_queue",
    "get_available_thinking_levels",
    "get_entries",
    "get_tree",
];

/// Why a command could not be decoded.
#[derive(Debug, PartialEq)]
pub enum DecodeError {
    /// Not a command pith knows.
    Unknown,
    /// A field is missing or has the wrong type/value; the text is the error message.
    Invalid(String),
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct Fields<'a> {
    command: &'a str,
    obj: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn err(&self, field: &str, expected: &str, got: Option<&Value>) -> DecodeError {
        DecodeError::Invalid(match got {
            None => format!(
                "{}: missing required field \"{field}\" (expected {expected})",
                self.command
            ),
            Some(v) => format!(
                "{}: field \"{field}\" must be {expected}, got {}",
                self.command,
                describe(v)
            ),
        })
    }

    /// Present and not null.
    fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field).filter(|v| !v.is_null())
    }

    fn string(&self, field: &str) -> Result<String, DecodeError> {
        match self.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            other => Err(self.err(field, "a string", other)),
        }
    }

    fn opt_string(&self, field: &str) -> Result<Option<String>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            other => Err(self.err(field, "a string", other)),
        }
    }

    fn boolean(&self, field: &str) -> Result<bool, DecodeError> {
        match self.get(field) {
            Some(Value::Bool(b)) => Ok(*b),
            other => Err(self.err(field, "a boolean", other)),
        }
    }

    fn one_of<T>(&self, field: &str, choices: &[(&str, T)]) -> Result<T, DecodeError>
    where
        T: Copy,
    {
        let names: Vec<String> = choices.iter().map(|(n, _)| format!("\"{n}\"")).collect();
        let expected = format!("one of {}", names.join(", "));
        match self.get(field) {
            Some(Value::String(s)) => match choices.iter().find(|(n, _)| n == s) {
                Some((_, v)) => Ok(*v),
                None => Err(DecodeError::Invalid(format!(
                    "{}: field \"{field}\" must be {expected}, got \"{s}\"",
                    self.command
                ))),
            },
            other => Err(self.err(field, &expected, other)),
        }
    }

    fn user_input(&self) -> Result<UserInput, DecodeError> {
        let text = self.string("message")?;
        let images = match self.get("images") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    parse_image(v).map_err(|e| {
                        DecodeError::Invalid(format!("{}: images[{i}]: {e}", self.command))
                    })
                })
                .collect::<Result<_, _>>()?,
            other => return Err(self.err("images", "an array of images", other)),
        };
        let attachments = match self.get("attachments") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    parse_attachment(v).map_err(|e| {
                        DecodeError::Invalid(format!("{}: attachments[{i}]: {e}", self.command))
                    })
                })
                .collect::<Result<_, _>>()?,
            other => return Err(self.err("attachments", "an array of attachments", other)),
        };
        let limits = match (self.command, self.get("limits")) {
            ("prompt" | "abort_and_prompt", Some(v)) => {
                Some(crate::limits::Limits::from_json(v).map_err(|e| {
                    DecodeError::Invalid(format!("{}: field \"limits\": {e}", self.command))
                })?)
            }
            _ => None,
        };
        let output_schema = match self.get("outputSchema") {
            Some(v) => Some(
                crate::output_schema::OutputSchema::new(v.clone()).map_err(|e| {
                    DecodeError::Invalid(format!("{}: field \"outputSchema\": {e}", self.command))
                })?,
            ),
            None => None,
        };
        Ok(UserInput {
            text,
            images,
            attachments,
            limits,
            output_schema,
        })
    }
}

/// Seed 000's `Attachment` (`{id, type: "image"|"document", fileName, mimeType, size, content,
/// extractedText?, preview?}`) onto today's content, as pi's agent once mapped it: an image is an
/// image block (`content` is its base64 data), a document is its extracted text under a
/// `[Document: <fileName>]` line. A document without `extractedText` has nothing that maps (no
/// content type carries a raw document): an error, never a silent drop.
fn parse_attachment(v: &Value) -> Result<Content, String> {
    let obj = v.as_object().ok_or("expected an object")?;
    let text = |k: &str| obj.get(k).and_then(Value::as_str);
    match text("type") {
        Some("image") => {
            let data = text("content").ok_or("missing string \"content\" (base64 image data)")?;
            let mime = text("mimeType").ok_or("missing string \"mimeType\"")?;
            Ok(Content::Image(ImageContent {
                data: data.to_string(),
                mime_type: mime.to_string(),
            }))
        }
        Some("document") => {
            let name = text("fileName").unwrap_or("document");
            match text("extractedText") {
                Some(extracted) => Ok(Content::text(format!(
                    "\n\n[Document: {name}]\n{extracted}"
                ))),
                None => Err(format!(
                    "document \"{name}\" has no \"extractedText\": pith sends documents to the model as text only"
                )),
            }
        }
        Some(other) => Err(format!(
            "unknown attachment type \"{other}\" (expected \"image\" or \"document\")"
        )),
        None => Err("missing string \"type\" (\"image\" or \"document\")".to_string()),
    }
}

/// Accepts the image shapes of the seeds: `{type:"image",data,mimeType}` (seed 001),
/// `{type:"image",source:{type:"base64",mediaType,data}}` (seed 002) and seed 003's URL source
/// `{type:"image",source:{type:"url",url}}` when the URL is a `data:<mime>;base64,` URL. pith
/// fetches nothing for the host: any other URL is an error naming it.
fn parse_image(v: &Value) -> Result<ImageContent, String> {
    let obj = v.as_object().ok_or("expected an object")?;
    let text =
        |o: &Map<String, Value>, k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(src) = obj.get("source") {
        let src = src.as_object().ok_or("\"source\" must be an object")?;
        match src.get("type").and_then(Value::as_str) {
            None | Some("base64") => {}
            Some("url") => {
                let url = text(src, "url").ok_or("missing string \"source.url\"")?;
                return data_url_image(&url);
            }
            Some(other) => {
                return Err(format!(
                    "unknown image source type \"{other}\" (expected \"base64\" or \"url\")"
                ));
            }
        }
        let data = text(src, "data").ok_or("missing string \"source.data\"")?;
        let mime = text(src, "mediaType")
            .or_else(|| text(src, "media_type"))
            .or_else(|| text(src, "mimeType"))
            .ok_or("missing string \"source.mediaType\"")?;
        return Ok(ImageContent {
            data,
            mime_type: mime,
        });
    }
    let data = text(obj, "data").ok_or("missing string \"data\"")?;
    let mime = text(obj, "mimeType").ok_or("missing string \"mimeType\"")?;
    Ok(ImageContent {
        data,
        mime_type: mime,
    })
}

/// A `data:<mime>;base64,<data>` URL as an image; any other URL is refused (pith does not fetch).
fn data_url_image(url: &str) -> Result<ImageContent, String> {
    let shown: String = url.chars().take(80).collect();
    let Some(rest) = url.strip_prefix("data:") else {
        return Err(format!(
            "image URL \"{shown}\" is not supported: pith does not fetch images; send the image as base64 (a data: URL or source type \"base64\")"
        ));
    };
    let (meta, data) = rest.split_once(',').ok_or("malformed data: URL (no ',')")?;
    let mime = meta
        .strip_suffix(";base64")
        .filter(|m| !m.is_empty())
        .ok_or("only base64 data: URLs with a media type are supported (data:<mime>;base64,...)")?;
    Ok(ImageContent {
        data: data.to_string(),
        mime_type: mime.to_string(),
    })
}

const QUEUE_MODES: [(&str, QueueMode); 2] = [
    ("all", QueueMode::All),
    ("one-at-a-time", QueueMode::OneAtATime),
];

/// Decode the command named `command` from its JSON object.
pub fn decode(command: &str, obj: &Map<String, Value>) -> Result<Command, DecodeError> {
    let f = Fields { command, obj };
    Ok(match command {
        "prompt" => {
            let input = f.user_input()?;
            // The reference treats any value other than followUp as steer; `follow-up` is seed 002's spelling.
            let streaming_behavior = match f.get("streamingBehavior") {
                None => None,
                Some(Value::String(s)) if s == "followUp" || s == "follow-up" => {
                    Some(StreamingBehavior::FollowUp)
                }
                Some(Value::String(s)) if s == "steer" => Some(StreamingBehavior::Steer),
                Some(other) => {
                    return Err(DecodeError::Invalid(format!(
                        "prompt: field \"streamingBehavior\" must be one of \"steer\", \"followUp\", got {}",
                        match other {
                            Value::String(s) => format!("\"{s}\""),
                            v => describe(v).to_string(),
                        }
                    )));
                }
            };
            Command::Prompt {
                input,
                streaming_behavior,
            }
        }
        "steer" => Command::Steer(f.user_input()?),
        "follow_up" => Command::FollowUp(f.user_input()?),
        "abort" => Command::Abort,
        "abort_and_prompt" => Command::AbortAndPrompt(f.user_input()?),
        "new_session" => Command::NewSession {
            parent_session: f.opt_string("parentSession")?,
        },
        "get_state" => Command::GetState,
        "ping" => Command::Ping,
        "get_messages" => Command::GetMessages,
        "set_model" => Command::SetModel {
            provider: f.string("provider")?,
            model_id: f.string("modelId")?,
        },
        "cycle_model" => Command::CycleModel,
        "get_available_models" => Command::GetAvailableModels,
        "set_thinking_level" => {
            let levels: Vec<(&str, ThinkingLevel)> = ThinkingLevel::ALL
                .iter()
                .map(|l| (l.as_str(), *l))
                .collect();
            Command::SetThinkingLevel(f.one_of("level", &levels)?)
        }
        "cycle_thinking_level" => Command::CycleThinkingLevel,
        "set_steering_mode" => Command::SetSteeringMode(f.one_of("mode", &QUEUE_MODES)?),
        "set_follow_up_mode" => Command::SetFollowUpMode(f.one_of("mode", &QUEUE_MODES)?),
        "set_interrupt_mode" => Command::SetInterruptMode(f.one_of(
            "mode",
            &[
                ("immediate", InterruptMode::Immediate),
                ("wait", InterruptMode::Wait),
            ],
        )?),
        "compact" => Command::Compact {
            custom_instructions: f.opt_string("customInstructions")?,
        },
        "set_auto_compaction" => Command::SetAutoCompaction(f.boolean("enabled")?),
        "set_auto_retry" => Command::SetAutoRetry(f.boolean("enabled")?),
        "abort_retry" => Command::AbortRetry,
        "bash" => Command::Bash {
            command: f.string("command")?,
            exclude_from_context: match f.get("excludeFromContext") {
                None => false,
                Some(_) => f.boolean("excludeFromContext")?,
            },
        },
        "abort_bash" => Command::AbortBash,
        "get_session_stats" => Command::GetSessionStats,
        "export_html" => Command::ExportHtml {
            output_path: f.opt_string("outputPath")?,
        },
        "switch_session" => Command::SwitchSession {
            session_path: f.string("sessionPath")?,
        },
        "fork" | "branch" => Command::Fork {
            entry_id: f.string("entryId")?,
        },
        "clone" => Command::Clone,
        "get_fork_messages" | "get_branch_messages" => Command::GetForkMessages,
        "get_last_assistant_text" => Command::GetLastAssistantText,
        "set_session_name" => Command::SetSessionName(f.string("name")?),
        "get_commands" => Command::GetCommands,
        "extension_ui_response" => Command::ExtensionUiResponse,
        "clear_queue" => Command::ClearQueue,
        "get_available_thinking_levels" => Command::GetAvailableThinkingLevels,
        "get_entries" => Command::GetEntries {
            since: f.opt_string("since")?,
        },
        "get_tree" => Command::GetTree,
        _ => return Err(DecodeError::Unknown),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dec(v: Value) -> Result<Command, DecodeError> {
        let obj = v.as_object().unwrap().clone();
        let ty = obj["type"].as_str().unwrap().to_string();
        decode(&ty, &obj)
    }

    #[test]
    fn every_known_name_decodes_or_names_a_field() {
        for name in COMMAND_NAMES {
            match dec(json!({"type": name})) {
                Ok(_) => {}
                Err(DecodeError::Invalid(e)) => assert!(e.starts_with(&format!("{name}: ")), "{e}"),
                Err(DecodeError::Unknown) => panic!("{name} unknown"),
            }
        }
    }

    #[test]
    fn missing_and_mistyped_fields_are_named() {
        assert_eq!(
            dec(json!({"type":"set_model","provider":"x"})),
            Err(DecodeError::Invalid(
                "set_model: missing required field \"modelId\" (expected a string)".into()
            ))
        );
        assert_eq!(
            dec(json!({"type":"set_auto_retry","enabled":"yes"})),
            Err(DecodeError::Invalid(
                "set_auto_retry: field \"enabled\" must be a boolean, got a string".into()
            ))
        );
        assert_eq!(
            dec(json!({"type":"set_steering_mode","mode":"sometimes"})),
            Err(DecodeError::Invalid(
                "set_steering_mode: field \"mode\" must be one of \"all\", \"one-at-a-time\", got \"sometimes\"".into()
            ))
        );
    }

    #[test]
    fn both_image_shapes_are_accepted() {
        let c = dec(json!({"type":"prompt","message":"m","images":[
            {"type":"image","data":"AA","mimeType":"image/png"},
            {"type":"image","source":{"type":"base64","mediaType":"image/jpeg","data":"BB"}}]}))
        .unwrap();
        let Command::Prompt { input, .. } = c else {
            panic!()
        };
        assert_eq!(
            input.images[1],
            ImageContent {
                data: "BB".into(),
                mime_type: "image/jpeg".into()
            }
        );
    }

    #[test]
    fn data_urls_are_images_other_urls_a_clear_error() {
        let c = dec(json!({"type":"prompt","message":"m","images":[
            {"type":"image","source":{"type":"url","url":"data:image/png;base64,QUJD"}}]}))
        .unwrap();
        let Command::Prompt { input, .. } = c else {
            panic!()
        };
        assert_eq!(
            input.images,
            [ImageContent {
                data: "QUJD".into(),
                mime_type: "image/png".into()
            }]
        );
        assert_eq!(
            dec(json!({"type":"steer","message":"m","images":[
                {"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]})),
            Err(DecodeError::Invalid("steer: images[0]: image URL \"https://example.com/a.png\" is not supported: pith does not fetch images; send the image as base64 (a data: URL or source type \"base64\")".into()))
        );
        for bad in [
            "data:image/png,QUJD",
            "data:;base64,QUJD",
            "data:image/png;base64",
        ] {
            let r = dec(json!({"type":"prompt","message":"m","images":[
                {"type":"image","source":{"type":"url","url":bad}}]}));
            assert!(matches!(r, Err(DecodeError::Invalid(_))), "{bad}: {r:?}");
        }
        assert_eq!(
            dec(json!({"type":"prompt","message":"m","images":[
                {"type":"image","source":{"type":"file","path":"/x"}}]})),
            Err(DecodeError::Invalid("prompt: images[0]: unknown image source type \"file\" (expected \"base64\" or \"url\")".into()))
        );
    }

    #[test]
    fn seed_000_attachments_map_onto_content() {
        let c = dec(json!({"type":"prompt","message":"m","attachments":[
            {"id":"a1","type":"image","fileName":"x.png","mimeType":"image/png","size":3,"content":"QUJD"},
            {"id":"a2","type":"document","fileName":"r.pdf","mimeType":"application/pdf","size":9,
             "content":"JVBERi0=","extractedText":"Hello doc"}]}))
        .unwrap();
        let Command::Prompt { input, .. } = c else {
            panic!()
        };
        assert_eq!(
            input.content(),
            [
                Content::text("m".to_string()),
                Content::Image(ImageContent {
                    data: "QUJD".into(),
                    mime_type: "image/png".into()
                }),
                Content::text("\n\n[Document: r.pdf]\nHello doc".to_string()),
            ]
        );
        assert_eq!(
            dec(json!({"type":"prompt","message":"m","attachments":[
                {"id":"a2","type":"document","fileName":"r.pdf","mimeType":"application/pdf","size":9,"content":"JVBERi0="}]})),
            Err(DecodeError::Invalid("prompt: attachments[0]: document \"r.pdf\" has no \"extractedText\": pith sends documents to the model as text only".into()))
        );
        assert!(matches!(
            dec(json!({"type":"prompt","message":"m","attachments":[{"type":"video"}]})),
            Err(DecodeError::Invalid(e)) if e == "prompt: attachments[0]: unknown attachment type \"video\" (expected \"image\" or \"document\")"
        ));
        assert!(matches!(
            dec(json!({"type":"prompt","message":"m","attachments":{"a":1}})),
            Err(DecodeError::Invalid(e)) if e == "prompt: field \"attachments\" must be an array of attachments, got an object"
        ));
    }

    #[test]
    fn follow_up_spellings() {
        for s in ["followUp", "follow-up"] {
            let c = dec(json!({"type":"prompt","message":"m","streamingBehavior":s})).unwrap();
            assert!(matches!(
                c,
                Command::Prompt {
                    streaming_behavior: Some(StreamingBehavior::FollowUp),
                    ..
                }
            ));
        }
    }
}
