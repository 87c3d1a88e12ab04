//! Cancellation without shared mutable state: a [`CancelSource`] owns the sending half of a
//! channel that never carries a message; cancelling drops it, so every [`CancelToken`] sees the
//! channel disconnect. Workers poll [`CancelToken::is_cancelled`] or `select!` on
//! [`CancelToken::receiver`] to wake up the moment it happens.

use crossbeam_channel::{Receiver, Sender, TryRecvError};

pub struct CancelSource(Option<Sender<()>>);

#[derive(Clone)]
pub struct CancelToken(Receiver<()>);

pub fn cancel_pair() -> (CancelSource, CancelToken) {
    let (tx, rx) = crossbeam_channel::bounded(0);
    (CancelSource(Some(tx)), CancelToken(rx))
}

impl CancelSource {
    pub fn cancel(&mut self) {
        self.0.take();
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.is_none()
    }
}

impl CancelToken {
    /// A token that is never cancelled (one per process: its source is leaked on purpose).
    pub fn never() -> CancelToken {
        static NEVER: std::sync::OnceLock<CancelToken> = std::sync::OnceLock::new();
        NEVER
            .get_or_init(|| {
                let (src, tok) = cancel_pair();
                std::mem::forget(src);
                tok
            })
            .clone()
    }
    pub fn is_cancelled(&self) -> bool {
        matches!(self.0.try_recv(), Err(TryRecvError::Disconnected))
    }
    /// For `select!`: becomes ready (with `Err(RecvError)`) when cancelled.
    pub fn receiver(&self) -> &Receiver<()> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cancel_is_seen_by_every_clone() {
        let (mut src, tok) = super::cancel_pair();
        let tok2 = tok.clone();
        assert!(!tok.is_cancelled());
        src.cancel();
        assert!(tok.is_cancelled() && tok2.is_cancelled());
    }
}
