//! The agent's messages → what a provider sees (`convertToLlm`, spec 7.1). Provider-side hygiene
//! (dropping errored/aborted assistant messages, synthetic results for orphaned tool calls,
//! foreign thinking as text) is applied by the request builders in `llm`.

use crate::llm::LlmMessages;
use crate::message::{
    AgentMessage, BashExecutionMessage, Content, Context, LlmMessage, UserContent, UserMessage,
};

/// `bashExecutionToText` of the reference, exactly.
pub fn bash_execution_text(m: &BashExecutionMessage) -> String {
    let mut t = format!("Ran `{}`\n", m.command);
    if m.output.is_empty() {
        t.push_str("(no output)");
    } else {
        t.push_str("```\n");
        t.push_str(&m.output);
        t.push_str("\n```");
    }
    if m.cancelled {
        t.push_str("\n\n(command cancelled)");
    } else if let Some(code) = m.exit_code.filter(|c| *c != 0) {
        t.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if m.truncated {
        if let Some(p) = &m.full_output_path {
            t.push_str(&format!("\n\n[Output truncated. Full output: {p}]"));
        }
    }
    t
}

fn user_text(text: String, timestamp: u64) -> LlmMessage {
    LlmMessage::User(UserMessage {
        content: UserContent::Blocks(vec![Content::text(text)]),
        timestamp,
    })
}

/// The history of a request over the agent's context: [`to_llm`] ([`to_llm_keeping_system`] with
/// `keep_system`), with the messages a provider sees as they are shared instead of copied.
pub fn to_request(context: &Context, block_images: bool, keep_system: bool) -> LlmMessages {
    let mut out = LlmMessages::with_capacity(context.len());
    for m in context.as_slice() {
        let has_image = |b: &[Content]| b.iter().any(|c| matches!(c, Content::Image(_)));
        let as_is = match &**m {
            AgentMessage::User(u) => match &u.content {
                UserContent::Blocks(b) => !block_images || !has_image(b),
                UserContent::Text(_) => true,
            },
            AgentMessage::ToolResult(t) => !block_images || !has_image(&t.content),
            AgentMessage::Assistant(_) => true,
            _ => false,
        };
        if as_is && out.push_shared(m) {
            continue;
        }
        for converted in convert(std::slice::from_ref(&**m), block_images, keep_system) {
            out.push(converted);
        }
    }
    out
}

/// Convert the context; `block_images` replaces every image with the reference's placeholder.
pub fn to_llm(messages: &[AgentMessage], block_images: bool) -> Vec<LlmMessage> {
    convert(messages, block_images, false)
}

/// [`to_llm`] for a request under `--compat 0.87`: the transcript's system messages stay in
/// place (pi 0.87.1's agent sends them; the provider APIs fold them or send them as they are).
pub fn to_llm_keeping_system(messages: &[AgentMessage], block_images: bool) -> Vec<LlmMessage> {
    convert(messages, block_images, true)
}

fn convert(messages: &[AgentMessage], block_images: bool, keep_system: bool) -> Vec<LlmMessage> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let converted = match m {
            AgentMessage::User(u) => LlmMessage::User(u.clone()),
            AgentMessage::Assistant(a) => LlmMessage::Assistant(a.clone()),
            AgentMessage::ToolResult(t) => LlmMessage::ToolResult(t.clone()),
            AgentMessage::BashExecution(b) => {
                if b.exclude_from_context == Some(true) {
                    continue;
                }
                user_text(bash_execution_text(b), b.timestamp)
            }
            AgentMessage::Custom(c) => LlmMessage::User(UserMessage {
                content: match &c.content {
                    UserContent::Text(s) => UserContent::Blocks(vec![Content::text(s.clone())]),
                    blocks => blocks.clone(),
                },
                timestamp: c.timestamp,
            }),
            AgentMessage::BranchSummary(b) => user_text(
                format!(
                    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{}</summary>",
                    b.summary
                ),
                b.timestamp,
            ),
            // pi 0.87.1's system messages: kept for a request under 0.87, else the request's
            // system prompt holds them.
            AgentMessage::System(s) if keep_system => LlmMessage::System(s.clone()),
            AgentMessage::System(_) => continue,
            AgentMessage::CompactionSummary(c) => user_text(
                format!(
                    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{}\n</summary>",
                    c.summary
                ),
                c.timestamp,
            ),
        };
        out.push(if block_images {
            without_images(converted)
        } else {
            converted
        });
    }
    out
}

fn strip(blocks: &mut Vec<Content>) {
    let mut outb: Vec<Content> = Vec::with_capacity(blocks.len());
    for b in blocks.drain(..) {
        let b = match b {
            Content::Image(_) => Content::text("Image reading is disabled."),
            other => other,
        };
        let dup = matches!((&b, outb.last()), (Content::Text(t), Some(Content::Text(p)))
            if t.text == "Image reading is disabled." && p.text == t.text);
        if !dup {
            outb.push(b);
        }
    }
    *blocks = outb;
}

fn without_images(m: LlmMessage) -> LlmMessage {
    match m {
        LlmMessage::User(mut u) => {
            if let UserContent::Blocks(b) = &mut u.content {
                strip(b);
            }
            LlmMessage::User(u)
        }
        LlmMessage::ToolResult(mut t) => {
            strip(&mut t.content);
            LlmMessage::ToolResult(t)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(output: &str, exit: Option<i32>, cancelled: bool) -> BashExecutionMessage {
        BashExecutionMessage {
            command: "cmd".into(),
            output: output.into(),
            exit_code: exit,
            cancelled,
            truncated: false,
            full_output_path: None,
            timestamp: 0,
            exclude_from_context: None,
        }
    }

    #[test]
    fn bash_execution_texts() {
        assert_eq!(
            bash_execution_text(&bash("out\n", Some(3), false)),
            "Ran `cmd`\n```\nout\n\n```\n\nCommand exited with code 3"
        );
        assert_eq!(
            bash_execution_text(&bash("", Some(0), false)),
            "Ran `cmd`\n(no output)"
        );
        assert_eq!(
            bash_execution_text(&bash("x", None, true)),
            "Ran `cmd`\n```\nx\n```\n\n(command cancelled)"
        );
    }
}
