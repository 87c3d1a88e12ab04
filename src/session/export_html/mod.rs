//! `export_html` and `--export`: a session as one self-contained HTML page — a viewer of the
//! whole session tree that needs no network and no script to be read.
//!
//! The page itself is a pure function of the session ([`page::render`]: entries → HTML bytes,
//! streamed to any writer); this module is the thin glue around it: where the file goes, what
//! errors say, and writing it so that a failed export never leaves a half-written file behind.
//!
//! - `page`: the page (layout of entries, sidebar, header, the entries themselves).
//! - `scan`: the first pass (tree rows, totals, tool results by call).
//! - `order`: the order of a session tree on the page (pure, indices only).
//! - `markdown`: markdown → safe HTML (pulldown-cmark's parser, our writer).
//! - `highlight`: a small syntax highlighter for code blocks and tool output.
//! - `html`: escaping and other small output helpers.
//! - `viewer.css`, `viewer.js`: the page's inline stylesheet and script (hashed into its
//!   Content-Security-Policy).

mod highlight;
mod html;
mod markdown;
mod order;
mod page;
mod scan;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use html::escape;
pub use page::{Extras, ToolSpec, render};

use super::Session;
use crate::cancel::CancelToken;

pub const ERR_IN_MEMORY: &str = "Cannot export in-memory session to HTML";
pub const ERR_NOTHING_YET: &str = "Nothing to export yet - start a conversation first";

/// `export_html` (RPC): write the export of the live session to `output_path`, or to
/// `pi-session-<session file stem>.html` relative to the process cwd. Returns the path as
/// given/derived.
pub fn export_html(
    session: &Session,
    output_path: Option<&str>,
    extras: &Extras,
) -> Result<String, String> {
    let path = export_target(session, output_path)?;
    write_page(session, extras, &path, &temporary_path(&path), None)?;
    Ok(path)
}

/// What `export_html` decides before anything is rendered: whether the session can be exported
/// (a file, and something in it) and where the page goes. Cheap, so the state machine asks it
/// and leaves the rendering ([`write_page`]) to a worker thread.
pub fn export_target(session: &Session, output_path: Option<&str>) -> Result<String, String> {
    let file = session.file().ok_or(ERR_IN_MEMORY)?;
    if !session.is_flushed() {
        return Err(ERR_NOTHING_YET.into());
    }
    Ok(match output_path {
        Some(p) => p.to_string(),
        None => default_export_name(file),
    })
}

/// The tools of the live agent as the export lists them.
pub fn tool_specs(tools: &[Arc<dyn crate::tools::Tool>]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name().to_string(),
            description: t.description(),
            parameters: t.parameters(),
        })
        .collect()
}

/// `--export <session.jsonl> [out.html]`: export a session file (read only: an older format is
/// migrated in memory, the file is left as it is). Returns the output path as given/derived.
/// An empty file exports as an empty session, as the reference does.
pub fn export_file(input: &str, output: Option<&str>, cwd: &Path) -> Result<String, String> {
    let resolved = resolve(input, cwd);
    let meta = std::fs::metadata(&resolved)
        .map_err(|_| format!("File not found: {}", resolved.display()))?;
    if meta.is_dir() {
        return Err(format!(
            "{} is a directory, not a session file",
            resolved.display()
        ));
    }
    let session = if meta.len() == 0 {
        Session::new(&cwd.to_string_lossy(), None, None)
    } else {
        let mut s = Session::open_read_only(&resolved).map_err(|e| {
            // Readable but without a header (opened, not read: it may be huge).
            if super::store::read_header(&resolved).is_none()
                && std::fs::File::open(&resolved).is_ok()
            {
                format!(
                    "Session file is not a valid pi session: {}",
                    resolved.display()
                )
            } else {
                e
            }
        })?;
        for w in s.take_warnings() {
            eprintln!("{w}");
        }
        s
    };
    let path = match output {
        Some(p) => expand_tilde(p),
        None => default_export_name(&resolved),
    };
    write_page(
        &session,
        &Extras::default(),
        &path,
        &temporary_path(&path),
        None,
    )?;
    Ok(path)
}

/// `~`, `~/…` expanded; relative paths resolved against `cwd`.
fn resolve(p: &str, cwd: &Path) -> PathBuf {
    let p = PathBuf::from(expand_tilde(p));
    if p.is_absolute() { p } else { cwd.join(p) }
}

fn expand_tilde(p: &str) -> String {
    let home = std::env::var("HOME").ok().filter(|h| !h.is_empty());
    match (p, home) {
        ("~", Some(h)) => h,
        (p, Some(h)) if p.starts_with("~/") => format!("{}/{}", h.trim_end_matches('/'), &p[2..]),
        (p, _) => p.to_string(),
    }
}

/// `pi-session-<basename without .jsonl>.html`.
pub fn default_export_name(session_file: &Path) -> String {
    let name = session_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    format!("pi-session-{stem}.html")
}

/// Where [`write_page`] renders a page for `path` before renaming it into place: a new name
/// (random) beside it. Chosen before the render starts, so that whoever starts a render on
/// another thread can remove what it leaves if it has to go before the render ends (pith
/// shutting down, `core/export.rs`).
pub fn temporary_path(path: &str) -> PathBuf {
    let dir = match Path::new(path).parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut random = [0u8; 8];
    crate::session::ids::random_bytes(&mut random);
    let hex = crate::session::ids::hex(&random);
    dir.join(format!(".pith-export-{hex}.html.tmp"))
}

/// Render into a new file at `temporary` (see [`temporary_path`]), then rename it into place at
/// `path`: a full disk, a cancellation (`cancel`, checked at every write of the page) or any
/// other failure leaves no partial page (and an older export at `path` intact).
pub fn write_page(
    session: &Session,
    extras: &Extras,
    path: &str,
    temporary: &Path,
    cancel: Option<&CancelToken>,
) -> Result<(), String> {
    let target = Path::new(path);
    // pi writes the page with `writeFileSync`: its failures read as Node's (`ENOENT: no such
    // file or directory, open '<path>'`), in RPC and on the command line alike.
    let fail = |e: &std::io::Error| match node_errno(e) {
        Some(code) => crate::tools::paths::node_error(
            &std::io::Error::from_raw_os_error(code),
            "open",
            target,
        ),
        None => format!("Failed to write {path}: {}", plain_io_error(e)),
    };
    let dir = match temporary.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = temporary.file_name().unwrap_or_default();
    let mut builder = tempfile::Builder::new();
    // Exactly `temporary` (created new: an existing file of that name is an error, not reused).
    builder.prefix(name).rand_bytes(0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Like any newly created file (the umask applies), not the temp file's 0600.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let tmp = builder.tempfile_in(dir).map_err(|e| fail(&e))?;
    let mut w = std::io::BufWriter::with_capacity(256 * 1024, Cancellable { tmp, cancel });
    render(session, extras, &mut w).map_err(|e| fail(&e))?;
    w.flush().map_err(|e| fail(&e))?;
    let tmp = w.into_inner().map_err(|e| fail(e.error()))?.tmp;
    tmp.persist(target).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// The temporary page, refusing further writes once the export is cancelled (pith shutting
/// down): the render stops at its next flush and the temporary file is removed.
struct Cancellable<'a> {
    tmp: tempfile::NamedTempFile,
    cancel: Option<&'a CancelToken>,
}

impl Write for Cancellable<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(std::io::Error::other("export cancelled"));
        }
        self.tmp.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.flush()
    }
}

/// The OS error number of `e`, also through `tempfile`'s wrapper (which keeps only the kind).
fn node_errno(e: &std::io::Error) -> Option<i32> {
    use std::io::ErrorKind as K;
    e.raw_os_error().or(match e.kind() {
        K::PermissionDenied => Some(13),
        K::NotFound => Some(2),
        K::AlreadyExists => Some(17),
        K::NotADirectory => Some(20),
        K::IsADirectory => Some(21),
        K::StorageFull => Some(28),
        K::ReadOnlyFilesystem => Some(30),
        K::InvalidFilename => Some(36),
        _ => None,
    })
}

/// An I/O error without the temporary file's name that `tempfile` adds to it (`… at path
/// ".pith-export-Ab12Cd.html.tmp"`; its wrapper exposes no other way to the OS error): the host
/// asked for `path`, not for our scratch file.
fn plain_io_error(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at path \"") {
        Some(i) if e.get_ref().is_some() => text[..i].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_strips_jsonl() {
        let p = Path::new("/x/sessions/2026-11-21T22-24-46-733Z_01a2.jsonl");
        assert_eq!(
            default_export_name(p),
            "pi-session-2026-11-21T22-24-46-733Z_01a2.html"
        );
    }

    #[test]
    fn paths_resolve_against_cwd() {
        let cwd = Path::new("/work/dir");
        assert_eq!(resolve("/abs/s.jsonl", cwd), PathBuf::from("/abs/s.jsonl"));
        assert_eq!(
            resolve("rel/s.jsonl", cwd),
            PathBuf::from("/work/dir/rel/s.jsonl")
        );
    }
}
