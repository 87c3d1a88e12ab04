//! Entry lines left in the session file instead of kept in memory.
//!
//! A loaded entry needs its exact line only for the rare operations that copy or show entries
//! verbatim (fork, clone, export, `get_entries`, statistics over the whole file); everything the
//! agent works with is parsed from it once, at load. So a line read from a file, or appended to
//! one, is remembered by where it is: an open handle of the file, offset, length and a checksum.
//! Reading it back is one `pread`; the checksum catches a file changed in place behind pith's
//! back (the handle keeps the loaded file readable even when it is renamed or deleted).
//! A 20,000-entry session of 17 MB then keeps about 40 bytes per entry for its lines instead of
//! the 17 MB.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use super::line::is_canonical;
use super::store::to_line;

/// An open session file that stored lines are read back from.
#[derive(Debug)]
pub struct SessionFile {
    file: File,
    path: PathBuf,
    /// (device, inode) of the open file: appends through the path land in this same file only
    /// while the path still names it.
    identity: (u64, u64),
    /// A read-back failure was reported on stderr (once per file).
    warned: AtomicBool,
}

impl SessionFile {
    /// Open `path` for reading back lines.
    pub fn open(path: &Path) -> std::io::Result<Arc<SessionFile>> {
        let file = File::open(path)?;
        SessionFile::from_file(file, path)
    }

    /// A file already open for reading (the loader's).
    pub fn from_file(file: File, path: &Path) -> std::io::Result<Arc<SessionFile>> {
        let meta = file.metadata()?;
        Ok(Arc::new(SessionFile {
            file,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            warned: AtomicBool::new(false),
        }))
    }

    /// Whether `path` still names this file (same device and inode).
    pub fn is_at(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == self.identity)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Where an entry's line is.
#[derive(Clone, Debug)]
pub enum Line {
    /// In memory: built by pith and not written yet, written to a file pith cannot read back,
    /// or normalised from a line read the slow way.
    Text(Box<str>),
    /// In a session file.
    Stored(Stored),
}

/// A line in a session file (without its `\n`).
#[derive(Clone, Debug)]
pub struct Stored {
    file: Arc<SessionFile>,
    at: u64,
    len: u32,
    sum: u32,
}

impl Stored {
    /// The line `bytes` (already read, without `\n`) found at offset `at` of `file`. `None` for
    /// a line too long to describe (over 4 GiB; such a file is refused anyway).
    pub fn new(file: &Arc<SessionFile>, at: u64, bytes: &[u8]) -> Option<Stored> {
        Some(Stored {
            file: Arc::clone(file),
            at,
            len: u32::try_from(bytes.len()).ok()?,
            sum: checksum(bytes),
        })
    }

    /// The line's bytes, read back and checked.
    fn read(&self) -> Result<String, String> {
        let mut buf = vec![0u8; self.len as usize];
        let shown = self.file.path.display();
        self.file
            .file
            .read_exact_at(&mut buf, self.at)
            .map_err(|e| format!("Cannot read session file {shown}: {e}"))?;
        if checksum(&buf) != self.sum {
            return Err(format!(
                "Session file {shown} was changed by another program since pith loaded it"
            ));
        }
        String::from_utf8(buf)
            .map_err(|_| format!("Session file {shown} was changed since pith loaded it"))
    }
}

impl Line {
    /// The line in `JSON.stringify` form (a stored line that is not, because another program
    /// wrote it with other spacing or number forms, is normalised as when it was kept in
    /// memory).
    pub fn get(&self) -> Result<Cow<'_, str>, String> {
        match self {
            Line::Text(t) => Ok(Cow::Borrowed(t)),
            Line::Stored(s) => {
                let text = s.read()?;
                if is_canonical(&text) {
                    return Ok(Cow::Owned(text));
                }
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(map)) => Ok(Cow::Owned(to_line(&map))),
                    _ => Err(format!(
                        "Session file {} was changed since pith loaded it",
                        s.file.path.display()
                    )),
                }
            }
        }
    }

    /// Report a read-back failure on stderr, once per file.
    pub fn warn(&self, error: &str) {
        if let Line::Stored(s) = self {
            if !s.file.warned.swap(true, Ordering::Relaxed) {
                eprintln!("Warning: {error}");
            }
        }
    }
}

/// A fast 32-bit checksum of a line (eight bytes a step): tells a line read back from the
/// file from whatever replaced it. Not a defence against an adversary who can write the file.
pub fn checksum(bytes: &[u8]) -> u32 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(23) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    (h >> 32) as u32 ^ h as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_read_back_checked_and_normalised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let a = r#"{"type":"x","id":"a","n":1}"#;
        let b = r#"{ "type": "x", "id": "b", "n": 1.0 }"#;
        std::fs::write(&path, format!("{a}\n{b}\n")).unwrap();
        let file = SessionFile::open(&path).unwrap();
        assert!(file.is_at(&path));
        let la = Line::Stored(Stored::new(&file, 0, a.as_bytes()).unwrap());
        let lb = Line::Stored(Stored::new(&file, a.len() as u64 + 1, b.as_bytes()).unwrap());
        assert_eq!(la.get().unwrap(), a);
        // Not in JSON.stringify form: normalised as the loader always did.
        assert_eq!(lb.get().unwrap(), r#"{"type":"x","id":"b","n":1}"#);
        // Changed in place: refused, not misread.
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(b"{\"type\":\"y\"").unwrap();
        assert!(la.get().unwrap_err().contains("changed"));
        // Replaced by another file: the open handle still reads the loaded one.
        drop(f);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "other\n").unwrap();
        assert!(!file.is_at(&path));
        assert!(lb.get().is_ok());
    }

    #[test]
    fn checksum_sees_every_byte() {
        let base = b"{\"type\":\"message\",\"id\":\"0000abcd\"}".to_vec();
        let sum = checksum(&base);
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] ^= 1;
            assert_ne!(checksum(&changed), sum, "byte {i}");
        }
        assert_ne!(checksum(&base[..base.len() - 1]), sum);
    }
}
