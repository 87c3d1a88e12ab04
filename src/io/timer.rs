//! A one-shot timer on a thread of its own: after a delay it sends one value on a channel,
//! unless cancelled first. The state machine uses it for the auto-retry delay, the summary
//! retries' backoff, the pause before continuing, and the bash jobs' abandon deadline.

use std::time::Duration;

use crossbeam_channel::Sender;

use crate::cancel::{CancelSource, cancel_pair};

/// Start a timer thread that sends `value` on `tx` after `delay` unless the returned source is
/// cancelled (or dropped) first.
pub fn after<T: Send + 'static>(delay: Duration, tx: Sender<T>, value: T) -> CancelSource {
    let (source, token) = cancel_pair();
    let spawned = std::thread::Builder::new()
        .name("timer".into())
        .stack_size(crate::THREAD_STACK)
        .spawn(move || {
            crossbeam_channel::select! {
                recv(token.receiver()) -> _ => {}
                default(delay) => {
                    let _ = tx.send(value);
                }
            }
        });
    if spawned.is_err() {
        eprintln!("pith: cannot start a timer thread");
    }
    source
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_and_cancels() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let _keep = after(Duration::from_millis(10), tx.clone(), 1u32);
        assert_eq!(rx.recv_timeout(Duration::from_secs(2)), Ok(1));
        let mut c = after(Duration::from_millis(50), tx, 2u32);
        c.cancel();
        assert!(rx.recv_timeout(Duration::from_millis(150)).is_err());
    }
}
