//! The watch thread: what reaches pith from outside between two frames — SIGINT, SIGTERM or
//! SIGHUP, or the host closing stdout — becomes a [`Control`] message, so the state machine can
//! abort work, kill child process groups, flush the session and exit (128+signal after a signal).
//!
//! One thread sleeps in `poll(2)` on two descriptors:
//! - signal-hook's self-pipe: the handlers ([`install`]) record a signal and write a byte there;
//!   a signal that arrives before the thread starts waits in it.
//! - stdout, asking for no event at all: the kernel still reports `POLLERR` (a pipe whose reader
//!   closed) and `POLLHUP` (a socket or terminal that hung up), so the host's leaving is noticed
//!   at once, not at the next write — which may be long in coming (a tool that runs for minutes
//!   prints nothing). A file or `/dev/null` reports neither and never wakes it.
//!
//! One thread for both, not one each: a thread is a stack and a kernel task that hundreds of
//! agents on one host each pay for, and one more to start at every cold start.
//! SIGPIPE is ignored by the Rust runtime, so a closed stdout also shows up as `EPIPE` on write.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use crossbeam_channel::Sender;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::backend::SignalDelivery;
use signal_hook::iterator::exfiltrator::SignalOnly;

use crate::io::sys::{POLLERR, POLLHUP, POLLIN, POLLNVAL, PollFd, SIG_DFL, poll, signal};

/// What the watch thread (and the stdout writer) tell the state machine. Process-level events:
/// they travel on their own small channel so they are never stuck behind a backlog of worker
/// events.
#[derive(Debug)]
pub enum Control {
    /// SIGINT / SIGTERM / SIGHUP.
    Signal(i32),
    /// stdout is closed (the host went away).
    ClientGone,
}

/// The installed handlers and the self-pipe they write to.
pub struct Signals(SignalDelivery<UnixStream, SignalOnly>);

/// Install the handlers: from here on a signal is recorded (in the self-pipe) instead of ending
/// the process, and waits there for the watch thread ([`spawn`]). RPC mode installs them before
/// its first answer and starts the thread after it (`app.rs`, docs/architecture.md "Memory per
/// agent": cold start); print and json mode start it at once.
pub fn install() -> std::io::Result<Signals> {
    let (read, write) = UnixStream::pair()?;
    SignalDelivery::with_pipe(read, write, SignalOnly, [SIGINT, SIGTERM, SIGHUP]).map(Signals)
}

/// Start the watch thread: signals (those installed by [`install`], including any that arrived
/// before it started; none when `signals` is `None`) and the host hanging up stdout.
pub fn spawn(
    signals: Option<Signals>,
    tx: Sender<Control>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("watch".into())
        .stack_size(crate::THREAD_STACK)
        .spawn(move || run(signals, &tx))
}

/// Give SIGINT, SIGTERM and SIGHUP their default action again (they end the process), for when
/// the watch thread cannot start or stops: a handler nobody forwards from would swallow them.
pub fn restore_defaults() {
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // SAFETY: SIG_DFL is a valid disposition for these signals; no handler code is involved.
        unsafe {
            signal(sig, SIG_DFL);
        }
    }
}

/// stdout's descriptor.
const STDOUT: i32 = 1;

/// What one wake-up of [`run`]'s `poll` saw.
#[derive(Debug, PartialEq, Eq)]
struct Woken {
    /// Bytes wait in the self-pipe: signals to collect.
    signals: bool,
    /// The self-pipe cannot be waited on any more.
    signals_broken: bool,
    /// The host hung up stdout.
    hung_up: bool,
    /// stdout cannot be watched (not open): stop watching it, nothing to report.
    stdout_gone: bool,
}

fn woken(signal_revents: i16, stdout_revents: i16) -> Woken {
    Woken {
        signals: signal_revents & POLLIN != 0,
        signals_broken: signal_revents & (POLLERR | POLLHUP | POLLNVAL) != 0
            && signal_revents & POLLIN == 0,
        hung_up: stdout_revents & (POLLERR | POLLHUP) != 0,
        stdout_gone: stdout_revents & POLLNVAL != 0,
    }
}

/// The thread's loop: until the machine is gone (its channel closed) or there is nothing left
/// to watch. A negative descriptor is one `poll` ignores.
fn run(mut signals: Option<Signals>, tx: &Sender<Control>) {
    let mut stdout = STDOUT;
    // Signals seen so far: the first starts the orderly shutdown (the machine's), a second one
    // ends the process at once (pi 1.6.0's rpc mode: 143 after SIGTERM, 129 after SIGHUP).
    let mut seen = 0u32;
    loop {
        let pipe = signals.as_ref().map_or(-1, |s| s.0.get_read().as_raw_fd());
        if pipe < 0 && stdout < 0 {
            return;
        }
        let mut fds = [
            PollFd {
                fd: pipe,
                events: POLLIN,
                revents: 0,
            },
            PollFd {
                fd: stdout,
                events: 0,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds, for the duration of the call.
        let n = unsafe { poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // Nothing can be waited on any more: signals must end the process again.
            if signals.is_some() {
                restore_defaults();
            }
            return;
        }
        let w = woken(fds[0].revents, fds[1].revents);
        if w.signals {
            if let Some(s) = signals.as_mut() {
                for sig in s.0.pending() {
                    seen += 1;
                    if seen > 1 {
                        eprintln!("pith: signal {sig} during shutdown; exiting at once");
                        std::process::exit(128 + sig);
                    }
                    // The machine already gone (shutting down): the one signal changes nothing.
                    let _ = tx.send(Control::Signal(sig));
                }
            }
        }
        if w.signals_broken {
            restore_defaults();
            signals = None;
        }
        if w.hung_up {
            stdout = -1;
            if tx.send(Control::ClientGone).is_err() {
                return;
            }
        } else if w.stdout_gone {
            stdout = -1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_poll_reports_is_read_as_meant() {
        let nothing = Woken {
            signals: false,
            signals_broken: false,
            hung_up: false,
            stdout_gone: false,
        };
        assert_eq!(woken(0, 0), nothing);
        assert_eq!(
            woken(POLLIN, 0),
            Woken {
                signals: true,
                ..woken(0, 0)
            }
        );
        // Bytes still to read come first, even from a pipe that broke.
        assert!(!woken(POLLIN | POLLHUP, 0).signals_broken);
        assert!(woken(POLLNVAL, 0).signals_broken);
        assert!(woken(0, POLLERR).hung_up);
        assert!(woken(0, POLLHUP).hung_up);
        assert_eq!(
            woken(0, POLLNVAL),
            Woken {
                stdout_gone: true,
                ..nothing
            }
        );
    }

    #[test]
    fn a_pipe_without_reader_is_a_hangup() {
        // What the thread relies on: a write end whose reader is gone reports POLLERR even when
        // no event is asked for.
        let (reader, writer) = std::io::pipe().unwrap();
        let fd = writer.as_raw_fd();
        let t = std::thread::spawn(move || {
            let mut p = PollFd {
                fd,
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for the duration of the call.
            let n = unsafe { poll(&mut p, 1, 10_000) };
            (n, woken(0, p.revents).hung_up)
        });
        drop(reader);
        assert_eq!(t.join().unwrap(), (1, true));
        drop(writer);
    }
}
