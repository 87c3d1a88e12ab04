//! The stdout writer thread: the only code that writes to stdout. Frames arrive already
//! serialised (one JSON object + `\n` each), so a frame is never split or interleaved. The channel
//! is bounded: when the host stops reading, pith stops producing instead of buffering without
//! limit. Frames that are queued together go out in one `write`. A closed stdout (`EPIPE`) means
//! the host is gone: the writer reports it on the control channel and stops. (A host that leaves
//! while nothing is written is noticed by the watch thread, `io/watch.rs`.)

use std::io::Write;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::io::watch::Control;

/// Frames queued for stdout at most (each is one line).
pub const QUEUE_FRAMES: usize = 16;
const BATCH_BYTES: usize = 256 * 1024;

pub fn spawn(
    rx: Receiver<Vec<u8>>,
    control: Sender<Control>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("stdout".into())
        .stack_size(crate::THREAD_STACK)
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
    // Only frames that are already queued together are copied into one batch; a lone frame (the
    // common case) is written as it is. The batch grows only when used, so an idle agent keeps no
    // buffer resident.
    let mut batch: Vec<u8> = Vec::new();
    while let Ok(first) = rx.recv() {
        let second = match rx.try_recv() {
            Ok(frame) => frame,
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => {
                sink.write_all(&first)?;
                sink.flush()?;
                continue;
            }
        };
        batch.clear();
        batch.extend_from_slice(&first);
        batch.extend_from_slice(&second);
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
            batch = Vec::new();
        }
    }
    sink.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that records each `write_all` as one write.
    struct Writes(Vec<Vec<u8>>);
    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn queued_frames_go_out_together_and_a_lone_frame_alone() {
        let (tx, rx) = crossbeam_channel::bounded(QUEUE_FRAMES);
        for f in ["a\n", "b\n", "c\n"] {
            tx.send(f.as_bytes().to_vec()).unwrap();
        }
        drop(tx);
        let mut sink = Writes(Vec::new());
        run(&mut sink, &rx).unwrap();
        assert_eq!(sink.0, vec![b"a\nb\nc\n".to_vec()]);

        let (tx, rx) = crossbeam_channel::bounded(QUEUE_FRAMES);
        tx.send(b"only\n".to_vec()).unwrap();
        drop(tx);
        let mut sink = Writes(Vec::new());
        run(&mut sink, &rx).unwrap();
        assert_eq!(sink.0, vec![b"only\n".to_vec()]);
    }
}
