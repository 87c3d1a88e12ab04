//! The signal thread: SIGINT, SIGTERM and SIGHUP become [`Control::Signal`] messages so the state
//! machine can abort work, kill child process groups, flush the session and exit with 128+signal.
//! SIGPIPE is ignored by the Rust runtime, so a closed stdout shows up as `EPIPE` on write.

use crossbeam_channel::Sender;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::core::event::Control;

pub fn spawn(tx: Sender<Control>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
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
