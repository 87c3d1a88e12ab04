//! pi 0.87.1's transcript system messages as the provider APIs read them (`--compat 0.87`).
//!
//! Under 0.87 a request's messages carry the transcript's `role:"system"` messages in place
//! ([`LlmMessage::System`]). Most APIs fold them into one leading prompt and the current tools:
//! the request's `system_prompt` and `tools` already hold that, so they skip them. The APIs of
//! models whose `compat.supportsMidConvoSystemMessages` is set (Anthropic, OpenAI completions
//! and Responses, Azure, Codex, Mistral) send the first one as the leading prompt and the later
//! ones where they are, rendered as an update; some also declare tools added later in place.
//! Pure code.

use serde_json::{Map, Value};

use crate::llm::{LlmRequest, ToolSchema};
use crate::message::{LlmMessage, SystemMessage, ToolDeclaration, UserContent};

/// pi 0.87.1's `normalizeContext`: under 0.87 a request whose messages do not start with a
/// system message (a summary request, which has only a prompt) gets one holding its prompt and
/// tools, so the APIs that read the prompt from the transcript find it there.
pub fn normalize(req: &mut LlmRequest) {
    if !req.sdk.reads_system_messages() || initial(&req.messages).is_some() {
        return;
    }
    if req.system_prompt.is_empty() && req.tools.is_empty() {
        return;
    }
    let tools: Vec<ToolDeclaration> = req
        .tools
        .iter()
        .map(|t| ToolDeclaration {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
            constrained_sampling: t.constrained_sampling.clone(),
        })
        .collect();
    let system = SystemMessage {
        content: UserContent::Text(req.system_prompt.clone()),
        sections: None,
        timestamp: 0,
        tools_added: (!tools.is_empty()).then_some(tools),
        tools_removed: None,
        checkpoint: false,
    };
    req.messages.insert(0, LlmMessage::System(system));
}

/// Whether the request keeps later system messages in place (the model's
/// `compat.supportsMidConvoSystemMessages`, pi 0.87.1).
pub fn mid_convo(req: &LlmRequest) -> bool {
    req.sdk.reads_system_messages()
        && crate::llm::strict::compat_flag(&req.model, "supportsMidConvoSystemMessages", false)
}

/// The messages without their system messages (what an API that folds them sends).
pub fn collapsed(mut msgs: Vec<LlmMessage>) -> Vec<LlmMessage> {
    msgs.retain(|m| !matches!(m, LlmMessage::System(_)));
    msgs
}

/// The text blocks of a system message's content, joined by newlines (`contentText`).
fn content_text(c: &UserContent) -> String {
    match c {
        UserContent::Text(s) => s.clone(),
        UserContent::Blocks(b) => b
            .iter()
            .filter_map(|x| match x {
                crate::message::Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// A system message as a whole prompt: its content, then its sections (`getSystemMessageText`).
pub fn system_text(m: &SystemMessage) -> String {
    let mut parts = vec![content_text(&m.content)];
    if let Some(s) = &m.sections {
        for v in s.values() {
            if let Some(t) = v.as_str() {
                parts.push(t.to_string());
            }
        }
    }
    parts.retain(|p| !p.is_empty());
    parts.join("\n\n")
}

/// A later system message as an update (`renderSystemMessageUpdate`): its content, then each
/// changed section framed by its name.
pub fn render_update(m: &SystemMessage) -> String {
    let mut parts = Vec::new();
    let text = content_text(&m.content);
    if !text.is_empty() {
        parts.push(text);
    }
    if let Some(s) = &m.sections {
        for (name, v) in s {
            parts.push(match v.as_str() {
                None => format!("Removed system prompt section \"{name}\"."),
                Some(t) => format!("Updated system prompt section \"{name}\":\n\n{t}"),
            });
        }
    }
    parts.join("\n\n")
}

/// The request's leading prompt: the first system message's whole text when later ones are sent
/// in place, else the folded prompt.
pub fn leading_prompt(req: &LlmRequest) -> String {
    if mid_convo(req) {
        initial(&req.messages).map(system_text).unwrap_or_default()
    } else {
        req.system_prompt.clone()
    }
}

/// The leading system message, when the messages start with one.
pub fn initial<'a>(
    messages: impl IntoIterator<Item = &'a LlmMessage>,
) -> Option<&'a SystemMessage> {
    match messages.into_iter().next() {
        Some(LlmMessage::System(s)) => Some(s),
        _ => None,
    }
}

fn systems<'a>(
    messages: impl IntoIterator<Item = &'a LlmMessage>,
) -> impl Iterator<Item = &'a SystemMessage> {
    messages.into_iter().filter_map(|m| match m {
        LlmMessage::System(s) => Some(s),
        _ => None,
    })
}

/// A declaration as a request tool.
pub fn schema(d: &ToolDeclaration) -> ToolSchema {
    ToolSchema {
        name: d.name.clone(),
        description: d.description.clone(),
        parameters: d.parameters.clone(),
        constrained_sampling: d.constrained_sampling.clone(),
    }
}

/// Every definition the system messages declare, in first-declaration order (a redeclared name
/// keeps its first place and takes the last definition: `getDeclaredTools`).
pub fn declared_tools<'a>(messages: impl IntoIterator<Item = &'a LlmMessage>) -> Vec<ToolSchema> {
    let mut out: Vec<ToolSchema> = Vec::new();
    for s in systems(messages) {
        for t in s.tools_added.iter().flatten() {
            match out.iter_mut().find(|x| x.name == t.name) {
                Some(slot) => *slot = schema(t),
                None => out.push(schema(t)),
            }
        }
    }
    out
}

/// The declaration as pi compares two (`toToolDeclaration` serialised).
fn declaration_key(d: &ToolDeclaration) -> String {
    let mut o = Map::new();
    o.insert("name".into(), Value::String(d.name.clone()));
    o.insert("description".into(), Value::String(d.description.clone()));
    o.insert("parameters".into(), d.parameters.clone());
    if let Some(c) = &d.constrained_sampling {
        o.insert("constrainedSampling".into(), c.clone());
    }
    Value::Object(o).to_string()
}

/// Whether a tool name was declared twice with different definitions (`hasToolRedefinitions`).
pub fn has_tool_redefinitions<'a>(messages: impl IntoIterator<Item = &'a LlmMessage>) -> bool {
    let mut seen: Vec<(&str, String)> = Vec::new();
    for s in systems(messages) {
        for t in s.tools_added.iter().flatten() {
            let key = declaration_key(t);
            match seen.iter_mut().find(|(n, _)| *n == t.name) {
                Some((_, k)) if *k != key => return true,
                Some(_) => {}
                None => seen.push((&t.name, key)),
            }
        }
    }
    false
}

/// Whether a tool was removed or a name declared twice (`hasNonAdditiveToolChanges`).
pub fn has_non_additive_tool_changes<'a>(
    messages: impl IntoIterator<Item = &'a LlmMessage>,
) -> bool {
    let mut seen: Vec<&str> = Vec::new();
    for s in systems(messages) {
        if s.tools_removed.as_ref().is_some_and(|r| !r.is_empty()) {
            return true;
        }
        for t in s.tools_added.iter().flatten() {
            if seen.contains(&t.name.as_str()) {
                return true;
            }
            seen.push(&t.name);
        }
    }
    false
}

/// `resolveTranscriptTools`: with `additions` (an API that can declare tools in place) and only
/// additions in the history, the request lists the first system message's tools (later ones are
/// declared where they were added); otherwise the current tools. Returns the tools to list and
/// whether additions are anchored in place.
pub fn request_tools(req: &LlmRequest, additions: bool) -> (Vec<ToolSchema>, bool) {
    let anchored = additions
        && req
            .messages
            .iter()
            .any(|m| matches!(m, LlmMessage::System(_)))
        && !has_non_additive_tool_changes(&req.messages);
    if anchored {
        let tools = initial(&req.messages)
            .and_then(|s| s.tools_added.as_ref())
            .map(|t| t.iter().map(schema).collect())
            .unwrap_or_default();
        return (tools, true);
    }
    (req.tools.clone(), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SdkGeneration;
    use serde_json::json;

    fn sys(v: Value) -> SystemMessage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn texts() {
        let m = sys(
            json!({"content":"","sections":{"preamble":"A","rules":null,"cwd":"C"},"timestamp":1}),
        );
        assert_eq!(system_text(&m), "A\n\nC");
        assert_eq!(
            render_update(&m),
            "Updated system prompt section \"preamble\":\n\nA\n\nRemoved system prompt section \"rules\".\n\nUpdated system prompt section \"cwd\":\n\nC"
        );
        let only_tools = sys(json!({"content":"","toolsRemoved":[{"name":"x"}],"timestamp":1}));
        assert_eq!(render_update(&only_tools), "");
    }

    #[test]
    fn a_prompt_only_request_gets_its_system_message() {
        let mut req = crate::llm::LlmRequest {
            system_prompt: "Summarize.".into(),
            messages: vec![LlmMessage::User(
                serde_json::from_value(json!({"role":"user","content":"x","timestamp":1})).unwrap(),
            )]
            .into(),
            sdk: SdkGeneration::Pi087,
            model: crate::llm::faux::model(),
            api_key: None,
            tools: Vec::new(),
            thinking: crate::message::ThinkingLevel::Off,
            session_id: None,
            max_tokens: None,
            timeouts: Default::default(),
            faux_script: None,
            no_cache: false,
            tool_arguments_error: false,
            extra: Default::default(),
        };
        normalize(&mut req);
        assert_eq!(
            initial(&req.messages).map(system_text).as_deref(),
            Some("Summarize.")
        );
        assert_eq!(req.messages.len(), 2);
        // Once only, and never under 0.73.
        normalize(&mut req);
        assert_eq!(req.messages.len(), 2);
        req.messages = req.messages.iter().skip(1).cloned().collect();
        req.sdk = SdkGeneration::Pi073;
        normalize(&mut req);
        assert_eq!(req.messages.len(), 1);
    }

    #[test]
    fn tool_history() {
        let d = |n: &str, desc: &str| json!({"name": n, "description": desc, "parameters": {}});
        let msgs = vec![
            LlmMessage::System(sys(
                json!({"content":"","toolsAdded":[d("a","A"), d("b","B")],"timestamp":1}),
            )),
            LlmMessage::System(sys(
                json!({"content":"","toolsAdded":[d("c","C")],"timestamp":2}),
            )),
        ];
        assert!(!has_non_additive_tool_changes(&msgs));
        assert!(!has_tool_redefinitions(&msgs));
        let mut more = msgs.clone();
        more.push(LlmMessage::System(sys(
            json!({"content":"","toolsRemoved":[{"name":"a"}],"toolsAdded":[d("a","A2")],"timestamp":3}),
        )));
        assert!(has_non_additive_tool_changes(&more));
        assert!(has_tool_redefinitions(&more));
        let names: Vec<String> = declared_tools(&more)
            .into_iter()
            .map(|t| t.description)
            .collect();
        assert_eq!(names, ["A2", "B", "C"]);
    }
}
