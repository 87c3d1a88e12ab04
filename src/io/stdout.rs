//! The stdout writer thread: the only code that writes to stdout. Frames arrive already
//! serialised (one JSON object + `\n` each), so a frame is never split or interleaved. The channel
//! is bounded: when the host stops reading, pith stops producing instead of buffering without
//! limit. Frames that are queued together go out in one `write`. A closed stdout (`EPIPE`) means
//! the host is gone: the writer reports it on the control channel and stops.

use std::io::Write;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::core::event::Control;

/// Frames queued for stdout at most (each is one line).
pub const QUEUE_FRAMES: usize = 16;
const BATCH_BYTES: usize = 256 * 1024;

pub fn spawn(
    rx: Receiver<Vec<u8>>,
    control: Sender<Control>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("stdout".into())
        .spawn(move || {
            if let Err(e) = run(std::io::stdout().lock(), &rx) {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    eprintln!("pith: writing stdout failed: {e}");
                }
                let _ = control.send(Control::ClientGone);
            }
        })
}

/// Write frames until the channel closes. Generic over the sink so tests can drive it.
pub fn run(mut sink: impl Write, rx: &Receiver<Vec<u8>>) -> std::io::Result<()> {
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
    while let Ok(first) = rx.recv() {
        batch.clear();
        batch.extend_from_slice(&first);
        loop {
            if batch.len() >= BATCH_BYTES {
                break;
            }
            match rx.try_recv() {
                Ok(frame) => batch.extend_from_slice(&frame),
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
            }
        }
        sink.write_all(&batch)?;
        sink.flush()?;
        if batch.capacity() > 4 * BATCH_BYTES {
            batch = Vec::with_capacity(BATCH_BYTES);
        }
    }
    sink.flush()
}
