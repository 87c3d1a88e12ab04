//! The signal thread: SIGINT, SIGTERM and SIGHUP become [`Control::Signal`] messages so the state
//! machine can abort work, kill child process groups, flush the session and exit with 128+signal.
//! SIGPIPE is ignored by the Rust runtime, so a closed stdout shows up as `EPIPE` on write.

use crossbeam_channel::Sender;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
pub use signal_hook::iterator::Signals;

use crate::core::event::Control;

/// Install the handlers: from here on a signal is recorded (in signal-hook's self-pipe) instead
/// of ending the process, and waits there for [`forward`]. RPC mode installs them before its
/// first answer and starts the thread after it (`app.rs`, docs/architecture.md "Memory per
/// agent": cold start); print and json mode start it at once.
pub fn install() -> std::io::Result<Signals> {
    Signals::new([SIGINT, SIGTERM, SIGHUP])
}

/// The thread that turns the installed handlers' signals into [`Control::Signal`]s, including
/// those that arrived before it started.
pub fn forward(
    mut signals: Signals,
    tx: Sender<Control>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("signals".into())
        .stack_size(crate::THREAD_STACK)
        .spawn(move || {
            for sig in signals.forever() {
                if tx.send(Control::Signal(sig)).is_err() {
                    break;
                }
            }
        })
}

/// Give SIGINT, SIGTERM and SIGHUP their default action again (they end the process), for when
/// the forwarding thread cannot start: a handler nobody forwards from would swallow them.
pub fn restore_defaults() {
    unsafe extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIG_DFL: usize = 0;
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // SAFETY: SIG_DFL is a valid disposition for these signals; no handler code is involved.
        unsafe {
            signal(sig, SIG_DFL);
        }
    }
}
