//! pi's `withFileMutationQueue`: the `edit` and `write` calls of one file run one after the
//! other, in the order the calls were started, so parallel calls on the same file never lose
//! each other's changes. The state machine takes a [`Ticket`] when it starts such a call (in call
//! order); the tool's thread waits for its turn before it reads the file, and the turn passes on
//! when the ticket is dropped (the call ended, or its thread was abandoned and ended later).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::CancelToken;

/// Per file, the tickets waiting or holding the turn (front).
static QUEUES: Mutex<Queues> = Mutex::new(None);
static TURN: Condvar = Condvar::new();
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

type Queues = Option<HashMap<PathBuf, VecDeque<u64>>>;

/// The queues (a panic while they were held leaves them usable).
fn queues() -> MutexGuard<'static, Queues> {
    QUEUES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A place in one file's queue.
#[derive(Debug)]
pub struct Ticket {
    key: PathBuf,
    id: u64,
}

/// A ticket for a call of `tool` with `args` that writes a file (`edit`, `write`), keyed by the
/// file's absolute path; `None` for other calls.
pub fn enqueue(tool: &str, args: &serde_json::Value, cwd: &std::path::Path) -> Option<Ticket> {
    if !matches!(tool, "edit" | "write") {
        return None;
    }
    let path = args.get("path")?.as_str()?;
    let key = super::paths::resolve_to_cwd(path, cwd);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut q = queues();
    q.get_or_insert_with(HashMap::new)
        .entry(key.clone())
        .or_default()
        .push_back(id);
    Some(Ticket { key, id })
}

impl Ticket {
    /// Wait until every call on this file started before this one has ended; returns early
    /// when `cancel` fires (the tool then stops on its own abort check).
    pub fn wait(&self, cancel: &CancelToken) {
        let mut q = queues();
        loop {
            let front = q
                .as_ref()
                .and_then(|m| m.get(&self.key))
                .and_then(|d| d.front().copied());
            if front.is_none_or(|f| f == self.id) || cancel.is_cancelled() {
                return;
            }
            q = TURN
                .wait_timeout(q, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut q = queues();
        if let Some(m) = q.as_mut() {
            if let Some(d) = m.get_mut(&self.key) {
                d.retain(|i| *i != self.id);
                if d.is_empty() {
                    m.remove(&self.key);
                }
            }
        }
        TURN.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_on_one_file_take_turns_in_order() {
        let cwd = std::path::Path::new("/nonexistent-mutation-test");
        let a = enqueue("edit", &json!({"path": "f.txt"}), cwd).unwrap();
        let b = enqueue("write", &json!({"path": "./f.txt"}), cwd).unwrap();
        let other = enqueue("write", &json!({"path": "g.txt"}), cwd).unwrap();
        assert!(enqueue("read", &json!({"path": "f.txt"}), cwd).is_none());
        let never = CancelToken::never();
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let t = std::thread::spawn(move || {
            b.wait(&CancelToken::never());
            o.lock().unwrap().push("b");
        });
        other.wait(&never); // another file: its turn at once
        std::thread::sleep(Duration::from_millis(100));
        a.wait(&never);
        order.lock().unwrap().push("a");
        drop(a);
        t.join().unwrap();
        assert_eq!(*order.lock().unwrap(), ["a", "b"]);
    }
}
