//! The history a request carries ([`LlmMessages`]): the agent's user, assistant and tool-result
//! messages shared with its context instead of copied, and the few messages `convertToLlm`
//! rewrites (bash executions, summaries, custom messages, blocked images) held converted.
//!
//! A request over a 20,000-message session used to clone every message for the streaming
//! thread (megabytes of text, tens of millions of instructions, and as much freeing afterwards);
//! now it copies one pointer per message. Request builders read it like a slice of
//! [`LlmMessage`]s (`iter`, `len`, `last`, indexing).

use std::sync::Arc;

use crate::message::{AgentMessage, LlmMessage};

/// A request's messages, in order.
#[derive(Clone, Debug, Default)]
pub struct LlmMessages(Vec<Item>);

#[derive(Clone, Debug)]
enum Item {
    /// A message of the agent's context that a provider sees as it is.
    Shared(Arc<AgentMessage>),
    /// A message converted for the provider (boxed: most items are shared, two words each).
    Owned(Box<LlmMessage>),
}

impl Item {
    fn get(&self) -> &LlmMessage {
        match self {
            Item::Owned(m) => m,
            // Only user, assistant and tool-result messages are ever shared (`push_shared`).
            Item::Shared(m) => m.as_llm().unwrap_or(&PLACEHOLDER),
        }
    }
}

/// Never returned: stands in for a shared message of another role, which `push_shared` refuses.
static PLACEHOLDER: LlmMessage = LlmMessage::User(crate::message::UserMessage {
    content: crate::message::UserContent::Text(String::new()),
    timestamp: 0,
});

impl LlmMessages {
    pub fn with_capacity(n: usize) -> LlmMessages {
        LlmMessages(Vec::with_capacity(n))
    }

    /// Share a message of the agent's context; `false` (nothing added) when its role is not one
    /// a provider sees as it is.
    pub fn push_shared(&mut self, m: &Arc<AgentMessage>) -> bool {
        let ok = m.as_llm().is_some();
        if ok {
            self.0.push(Item::Shared(Arc::clone(m)));
        }
        ok
    }

    pub fn push(&mut self, m: LlmMessage) {
        self.0.push(Item::Owned(Box::new(m)));
    }

    /// Put `m` at `index` (pi 0.87.1's leading system message).
    pub fn insert(&mut self, index: usize, m: LlmMessage) {
        self.0.insert(index, Item::Owned(Box::new(m)));
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&LlmMessage> {
        self.0.get(i).map(Item::get)
    }

    pub fn first(&self) -> Option<&LlmMessage> {
        self.get(0)
    }

    pub fn last(&self) -> Option<&LlmMessage> {
        self.0.last().map(Item::get)
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.iter())
    }

    /// Owned copies (tests, inspection).
    pub fn to_vec(&self) -> Vec<LlmMessage> {
        self.iter().cloned().collect()
    }
}

/// Iterator over [`LlmMessages`].
pub struct Iter<'a>(std::slice::Iter<'a, Item>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a LlmMessage;
    fn next(&mut self) -> Option<&'a LlmMessage> {
        self.0.next().map(Item::get)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(Item::get)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a LlmMessages {
    type Item = &'a LlmMessage;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl std::ops::Index<usize> for LlmMessages {
    type Output = LlmMessage;
    fn index(&self, i: usize) -> &LlmMessage {
        self.0[i].get()
    }
}

impl From<Vec<LlmMessage>> for LlmMessages {
    fn from(v: Vec<LlmMessage>) -> LlmMessages {
        LlmMessages(v.into_iter().map(|m| Item::Owned(Box::new(m))).collect())
    }
}

impl FromIterator<LlmMessage> for LlmMessages {
    fn from_iter<I: IntoIterator<Item = LlmMessage>>(iter: I) -> LlmMessages {
        LlmMessages(iter.into_iter().map(|m| Item::Owned(Box::new(m))).collect())
    }
}

impl PartialEq for LlmMessages {
    fn eq(&self, other: &LlmMessages) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{
        AssistantMessage, BranchSummaryMessage, Content, ToolResultMessage, UserContent,
        UserMessage,
    };

    #[test]
    fn shared_messages_read_as_the_llm_messages_they_are() {
        let user = UserMessage {
            content: UserContent::Blocks(vec![Content::text("hello")]),
            timestamp: 7,
        };
        let mut assistant = AssistantMessage::empty("anthropic-messages", "p", "m");
        assistant.content.push(Content::text("hi"));
        let result = ToolResultMessage {
            tool_call_id: "t".into(),
            tool_name: "bash".into(),
            content: vec![Content::text("out")],
            details: Some(serde_json::json!({"a": [1]})),
            is_error: true,
            duration_ms: None,
            timestamp: 9,
            nested_calls: None,
        };
        let agent = [
            Arc::new(AgentMessage::User(user.clone())),
            Arc::new(AgentMessage::Assistant(assistant.clone())),
            Arc::new(AgentMessage::ToolResult(result.clone())),
        ];
        let mut m = LlmMessages::default();
        for a in &agent {
            assert!(m.push_shared(a));
        }
        let summary = Arc::new(AgentMessage::BranchSummary(BranchSummaryMessage {
            summary: "s".into(),
            from_id: "f".into(),
            timestamp: 1,
        }));
        assert!(!m.push_shared(&summary));
        let want = vec![
            LlmMessage::User(user),
            LlmMessage::Assistant(assistant),
            LlmMessage::ToolResult(result),
        ];
        assert_eq!(m.to_vec(), want);
        assert_eq!(m.len(), 3);
        assert_eq!(m.last(), want.last());
        assert_eq!(&m[1], &want[1]);
        assert_eq!(
            serde_json::to_value(m.iter().collect::<Vec<_>>()).unwrap(),
            serde_json::to_value(&want).unwrap()
        );
        // Shared, not copied.
        assert_eq!(Arc::strong_count(&agent[0]), 2);
    }
}
