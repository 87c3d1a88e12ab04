//! Reading the small text files a checkout brings along (`AGENTS.md` / `CLAUDE.md`,
//! `.pi/settings.json`, `.pi/SYSTEM.md`, `.mcp.json`, …) without trusting them: pith reads them
//! by itself, at start-up or for every run, from whatever directory it was started in. A symlink
//! to `/dev/zero` would be read without end, a FIFO would block forever, a huge file would be
//! copied into every request. Only regular files up to [`MAX_TEXT_FILE`] are read.

use std::io::Read;
use std::path::Path;

/// Largest project text file pith reads (far beyond any prompt a model accepts).
pub const MAX_TEXT_FILE: u64 = 16 * 1024 * 1024;

#[derive(Debug)]
pub enum ReadError {
    /// No such file (not worth a warning: most of these files are optional).
    NotFound,
    /// A directory, FIFO, socket or device (after following symlinks).
    NotAFile,
    /// Larger than the limit.
    TooLarge,
    Io(std::io::Error),
}

impl ReadError {
    /// The warning for stderr, or `None` when the file is simply not there.
    pub fn warning(&self, path: &Path) -> Option<String> {
        let p = path.display();
        match self {
            ReadError::NotFound => None,
            ReadError::NotAFile => Some(format!("Warning: {p} is not a regular file; ignored")),
            ReadError::TooLarge => Some(format!(
                "Warning: {p} is larger than {} MiB; ignored",
                MAX_TEXT_FILE / (1024 * 1024)
            )),
            ReadError::Io(e) => Some(format!("Warning: cannot read {p}: {e}")),
        }
    }
}

/// The text of `path` (invalid UTF-8 is an error, as `read_to_string`), if it is a regular file
/// of at most [`MAX_TEXT_FILE`] bytes. The size is checked before and while reading (a file may
/// grow meanwhile).
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let bytes = read_bytes(path, MAX_TEXT_FILE)?;
    String::from_utf8(bytes).map_err(|_| {
        ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// The bytes of `path` if it is a regular file of at most `max` bytes, checked before and while
/// reading (a file may grow meanwhile). For paths a user names (`@file` arguments): never a
/// read without end, never a whole disk in memory.
pub fn read_bytes(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Io(e),
    })?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile);
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge);
    }
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge);
    }
    Ok(bytes)
}

/// [`read_text`], with any warning written to stderr at once.
pub fn read_text_or_warn(path: &Path) -> Option<String> {
    match read_text(path) {
        Ok(t) => Some(t),
        Err(e) => {
            if let Some(w) = e.warning(path) {
                eprintln!("{w}");
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("a.md");
        std::fs::write(&ok, "hello").unwrap();
        assert_eq!(read_text(&ok).unwrap(), "hello");
        assert!(matches!(
            read_text(&dir.path().join("missing")),
            Err(ReadError::NotFound)
        ));
        assert!(matches!(read_text(dir.path()), Err(ReadError::NotAFile)));
        assert!(matches!(
            read_text(Path::new("/dev/zero")),
            Err(ReadError::NotAFile)
        ));
        let big = dir.path().join("big.md");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_TEXT_FILE + 1).unwrap();
        assert!(matches!(read_text(&big), Err(ReadError::TooLarge)));
        assert_eq!(
            ReadError::TooLarge
                .warning(Path::new("/x/CLAUDE.md"))
                .unwrap(),
            "Warning: /x/CLAUDE.md is larger than 16 MiB; ignored"
        );
    }
}
