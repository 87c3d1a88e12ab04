//! Files the tools may open: regular files only. A device (`/dev/zero`, `/dev/urandom`), a FIFO
//! or a socket never ends, blocks at `open`, or fails oddly, and the reference would hang on
//! them (its `readFile` of `/dev/zero` never returns). Every file tool refuses them up front
//! with [`special_file_error`], and opens with `O_NONBLOCK` so that a file swapped for a FIFO
//! between the check and the `open` cannot block either (a FIFO without a writer opens at
//! once in that mode; `O_NONBLOCK` has no effect on regular files).

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::cancel::CancelToken;

/// `O_NONBLOCK` (the same value on every Linux architecture pith builds for).
#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(target_os = "linux"))]
const O_NONBLOCK: i32 = 0x0004; // the BSDs and macOS

/// What kind of non-regular file `meta` describes, or `None` for a regular file or directory.
pub fn special_kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() || t.is_dir() {
        None
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// The error every tool gives for a device, FIFO or socket.
pub fn special_file_error(verb: &str, path: &Path, kind: &str) -> String {
    format!(
        "Cannot {verb} {}: it is {kind}, not a regular file",
        path.display()
    )
}

/// `Some(error)` when `path` exists and is a device, FIFO or socket (symlinks followed).
pub fn refuse_special(verb: &str, path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    special_kind(&meta).map(|kind| special_file_error(verb, path, kind))
}

/// Open `path` for reading with `O_NONBLOCK`, whatever it is.
pub fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
}

unsafe extern "C" {
    fn openat(
        dirfd: std::ffi::c_int,
        path: *const std::ffi::c_char,
        flags: std::ffi::c_int,
        ...
    ) -> std::ffi::c_int;
}

/// `O_CLOEXEC` (Linux; the BSDs and macOS have their own value).
#[cfg(target_os = "linux")]
const O_CLOEXEC: i32 = 0o2000000;
#[cfg(not(target_os = "linux"))]
const O_CLOEXEC: i32 = 0x0100_0000;

/// Opens the files of a walk with `openat` relative to their directory, which stays open while
/// its files come one after the other: the kernel then looks up one name per file instead of
/// every component of the path again (a tenth of what a whole-tree search costs). Files are
/// opened as [`open_nonblocking`] opens them.
#[derive(Default)]
pub struct DirOpener {
    /// The directory of the previous file, and its descriptor.
    dir: Option<(std::path::PathBuf, File)>,
    /// The file name, NUL-terminated.
    name: Vec<u8>,
}

impl DirOpener {
    pub fn open(&mut self, path: &Path) -> std::io::Result<File> {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::ffi::OsStrExt;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return open_nonblocking(path);
        };
        if self.dir.as_ref().is_none_or(|(d, _)| d != parent) {
            self.dir = None;
            // A directory that cannot be opened (say, execute-only) still lets its files be.
            // O_NONBLOCK: should it have been swapped for a FIFO, the open does not wait.
            let Ok(dir) = open_nonblocking(parent) else {
                return open_nonblocking(path);
            };
            self.dir = Some((parent.to_path_buf(), dir));
        }
        let Some((_, dir)) = &self.dir else {
            return open_nonblocking(path);
        };
        self.name.clear();
        self.name.extend_from_slice(name.as_bytes());
        if self.name.contains(&0) {
            return open_nonblocking(path);
        }
        self.name.push(0);
        // SAFETY: a directory descriptor we own and a NUL-terminated name; the descriptor
        // returned is new and owned by the `File` from here on.
        let fd = unsafe {
            openat(
                dir.as_raw_fd(),
                self.name.as_ptr().cast(),
                O_NONBLOCK | O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a valid descriptor that nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }
}

/// Open `path` for reading without ever blocking in `open`; a file that turns out not to be
/// regular (or a directory) is refused with `Err(Ok(message))`, I/O errors are `Err(Err(e))`.
pub fn open_read(path: &Path, verb: &str) -> Result<File, Result<String, std::io::Error>> {
    let file = open_nonblocking(path).map_err(Err)?;
    let meta = file.metadata().map_err(Err)?;
    match special_kind(&meta) {
        Some(kind) => Err(Ok(special_file_error(verb, path, kind))),
        None => Ok(file),
    }
}

/// Create or truncate `path` and write `bytes`, never blocking in `open` (a FIFO without a
/// reader fails with `ENXIO` instead); a file that turns out not to be regular is refused with
/// `Err(Ok(message))` before anything is written.
pub fn write_regular(path: &Path, bytes: &[u8]) -> Result<(), Result<String, std::io::Error>> {
    use std::io::Write;
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(Err)?;
    let meta = file.metadata().map_err(Err)?;
    if let Some(kind) = special_kind(&meta) {
        return Err(Ok(special_file_error("write", path, kind)));
    }
    file.write_all(bytes).map_err(Err)
}

/// A reader that fails with `Operation aborted` once `stop` says so (the run was aborted), so
/// reading a long file never holds up an abort by more than one read.
pub struct CancelRead<'a, R> {
    inner: R,
    stop: &'a dyn Fn() -> bool,
}

impl<'a, R: Read> CancelRead<'a, R> {
    pub fn new(inner: R, stop: &'a dyn Fn() -> bool) -> CancelRead<'a, R> {
        CancelRead { inner, stop }
    }
}

impl<R: Read> Read for CancelRead<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if (self.stop)() {
            return Err(std::io::Error::other(super::ABORTED));
        }
        self.inner.read(buf)
    }
}

/// `stop` for [`CancelRead`] from a run's cancel token.
pub fn cancelled(token: &CancelToken) -> impl Fn() -> bool + '_ {
    || token.is_cancelled()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_special_regular_files_are_not() {
        let zero = std::fs::metadata("/dev/zero").unwrap();
        assert_eq!(special_kind(&zero), Some("a character device"));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        assert_eq!(special_kind(&std::fs::metadata(&f).unwrap()), None);
        assert_eq!(special_kind(&std::fs::metadata(dir.path()).unwrap()), None);
        assert_eq!(
            refuse_special("read", Path::new("/dev/zero")).as_deref(),
            Some("Cannot read /dev/zero: it is a character device, not a regular file")
        );
        assert!(refuse_special("read", &f).is_none());
        assert!(open_read(&f, "read").is_ok());
        assert!(matches!(
            open_read(Path::new("/dev/zero"), "read"),
            Err(Ok(_))
        ));
    }
}
