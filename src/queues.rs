//! The steering and follow-up queues and their delivery modes.

use std::collections::VecDeque;

use crate::message::{AgentMessage, Content, UserContent};
use crate::rpc::command::QueueMode;

/// A queued message (a user message, or an extension's custom message) and the text shown in
/// `queue_update`.
#[derive(Clone, Debug)]
pub struct Queued {
    pub text: String,
    pub message: AgentMessage,
}

impl Queued {
    /// What the message holds, roughly: its texts and image data (what makes it big).
    fn bytes(&self) -> usize {
        let content = match &self.message {
            AgentMessage::User(u) => &u.content,
            AgentMessage::Custom(c) => &c.content,
            _ => return self.text.len(),
        };
        match content {
            UserContent::Text(t) => t.len(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .map(|b| match b {
                    Content::Text(t) => t.text.len(),
                    Content::Image(i) => i.data.len(),
                    _ => 0,
                })
                .sum(),
        }
    }
}

/// Messages one queue holds at most: every `queue_update` lists them all, and each waits in
/// memory until the agent takes it.
pub const MAX_QUEUED: usize = 1000;
/// Bytes of messages one queue holds at most (one larger message is still taken alone).
pub const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;

/// A queue that cannot take one more message: how many it holds and their size.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull {
    pub messages: usize,
    pub bytes: usize,
}

impl QueueFull {
    /// The error a `steer` / `follow_up` / queued `prompt` gets (`kind`: `steering`,
    /// `follow-up`).
    pub fn message(&self, kind: &str) -> String {
        format!(
            "Queue full: {} {kind} messages ({}) are already waiting, the most pith queues ({MAX_QUEUED} messages or {} MiB); wait until the agent takes them, or abort",
            self.messages,
            crate::tools::truncate::format_size(self.bytes),
            MAX_QUEUED_BYTES >> 20
        )
    }
}

#[derive(Debug)]
pub struct Queue {
    pub mode: QueueMode,
    items: VecDeque<Queued>,
    /// [`Queued::bytes`] of everything in `items`.
    bytes: usize,
}

impl Queue {
    pub fn new(mode: QueueMode) -> Queue {
        Queue {
            mode,
            items: VecDeque::new(),
            bytes: 0,
        }
    }
    /// Queue `q`, unless the queue is full ([`MAX_QUEUED`], [`MAX_QUEUED_BYTES`]).
    pub fn push(&mut self, q: Queued) -> Result<(), QueueFull> {
        let size = q.bytes();
        let over_bytes =
            !self.items.is_empty() && self.bytes.saturating_add(size) > MAX_QUEUED_BYTES;
        if self.items.len() >= MAX_QUEUED || over_bytes {
            return Err(QueueFull {
                messages: self.items.len(),
                bytes: self.bytes,
            });
        }
        self.bytes += size;
        self.items.push_back(q);
        Ok(())
    }
    /// `one-at-a-time`: the first message only; `all`: every message.
    pub fn take(&mut self) -> Vec<Queued> {
        let taken: Vec<Queued> = match self.mode {
            QueueMode::OneAtATime => self.items.pop_front().into_iter().collect(),
            QueueMode::All => self.items.drain(..).collect(),
        };
        let size: usize = taken.iter().map(Queued::bytes).sum();
        self.bytes = self.bytes.saturating_sub(size);
        taken
    }
    pub fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
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
    use crate::message::UserMessage;

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
        a.push(q("1")).unwrap();
        a.push(q("2")).unwrap();
        assert_eq!(a.take().len(), 1);
        assert_eq!(a.texts(), vec!["2"]);
        a.mode = QueueMode::All;
        a.push(q("3")).unwrap();
        assert_eq!(a.take().len(), 2);
        assert!(a.is_empty());
    }

    #[test]
    fn bounded_by_count_and_bytes() {
        let mut a = Queue::new(QueueMode::All);
        for _ in 0..MAX_QUEUED {
            a.push(q("x")).unwrap();
        }
        assert_eq!(
            a.push(q("x")),
            Err(QueueFull {
                messages: MAX_QUEUED,
                bytes: MAX_QUEUED
            })
        );
        a.take();
        let big = "y".repeat(MAX_QUEUED_BYTES + 1);
        a.push(q(&big)).unwrap(); // alone, it is taken
        assert_eq!(
            a.push(q("z")).unwrap_err().message("steering"),
            "Queue full: 1 steering messages (64.0MB) are already waiting, the most pith queues (1000 messages or 64 MiB); wait until the agent takes them, or abort"
        );
        a.clear();
        a.push(q("z")).unwrap();
    }
}
