//! The steering and follow-up queues and their delivery modes.

use std::collections::VecDeque;

use crate::message::AgentMessage;
use crate::rpc::command::QueueMode;

/// A queued message (a user message, or an extension's custom message) and the text shown in
/// `queue_update`.
#[derive(Clone, Debug)]
pub struct Queued {
    pub text: String,
    pub message: AgentMessage,
}

#[derive(Debug)]
pub struct Queue {
    pub mode: QueueMode,
    items: VecDeque<Queued>,
}

impl Queue {
    pub fn new(mode: QueueMode) -> Queue {
        Queue {
            mode,
            items: VecDeque::new(),
        }
    }
    pub fn push(&mut self, q: Queued) {
        self.items.push_back(q);
    }
    /// `one-at-a-time`: the first message only; `all`: every message.
    pub fn take(&mut self) -> Vec<Queued> {
        match self.mode {
            QueueMode::OneAtATime => self.items.pop_front().into_iter().collect(),
            QueueMode::All => self.items.drain(..).collect(),
        }
    }
    pub fn clear(&mut self) {
        self.items.clear();
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn texts(&self) -> Vec<String> {
        self.items.iter().map(|q| q.text.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{UserContent, UserMessage};

    fn q(t: &str) -> Queued {
        Queued {
            text: t.into(),
            message: AgentMessage::User(UserMessage {
                content: UserContent::Text(t.into()),
                timestamp: 0,
            }),
        }
    }

    #[test]
    fn modes() {
        let mut a = Queue::new(QueueMode::OneAtATime);
        a.push(q("1"));
        a.push(q("2"));
        assert_eq!(a.take().len(), 1);
        assert_eq!(a.texts(), vec!["2"]);
        a.mode = QueueMode::All;
        a.push(q("3"));
        assert_eq!(a.take().len(), 2);
        assert!(a.is_empty());
    }
}
