//! The prompts of print and json mode, built as pi builds them (`readPipedStdin`,
//! `processFileArguments`, `buildInitialMessage`): the first prompt is piped stdin (read whole
//! and trimmed, only when stdin is not a terminal), then the `@file` arguments, then the first
//! message — joined with nothing in between, exactly as pi does (`echo text | pith -p
//! "summarize"` sends `textsummarize`; add the separator you want to the text). Every further
//! message is a prompt of its own, sent after the previous run.
//!
//! [`compose`] is the pure part; [`read_piped_stdin`] and [`file_arguments`] do the reading.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use crate::message::ImageContent;

/// Piped stdin larger than this is refused instead of being held whole in memory.
pub const MAX_STDIN_BYTES: u64 = 64 * 1024 * 1024;

/// One prompt to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// Whitespace as JavaScript's `String.prototype.trim` removes it.
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// Piped stdin, trimmed; `None` when stdin is a terminal, or empty after trimming.
pub fn read_piped_stdin() -> Result<Option<String>, String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("Error: cannot read stdin: {e}"))?;
    if bytes.len() as u64 > MAX_STDIN_BYTES {
        return Err(format!(
            "Error: piped stdin is larger than {} MiB",
            MAX_STDIN_BYTES / (1024 * 1024)
        ));
    }
    Ok(stdin_text(&bytes))
}

/// Decoded (invalid UTF-8 replaced, as node's `setEncoding("utf8")`) and trimmed.
pub fn stdin_text(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let t = text.trim_matches(js_space);
    (!t.is_empty()).then(|| t.to_string())
}

/// `~` and `~/...` expanded, relative paths taken from `cwd`.
fn resolve(arg: &str, cwd: &Path, home: Option<&Path>) -> PathBuf {
    let expanded = match (arg.strip_prefix('~'), home) {
        (Some(""), Some(h)) => h.to_path_buf(),
        (Some(rest), Some(h)) if rest.starts_with('/') => h.join(&rest[1..]),
        _ => PathBuf::from(arg),
    };
    cwd.join(expanded)
}

/// The `@file` arguments as pi sends them: each text file as `<file name="ABS">\n…\n</file>\n`,
/// each image (PNG, JPEG, GIF, WebP by their bytes) attached, with `<file name="ABS"></file>\n`
/// in the text; empty files are skipped. A missing file is an error (pi: `File not found`).
/// pith does not resize images (pi shrinks large ones first).
pub fn file_arguments(
    files: &[String],
    cwd: &Path,
    home: Option<&Path>,
) -> Result<(String, Vec<ImageContent>), String> {
    let mut text = String::new();
    let mut images = Vec::new();
    for f in files {
        let path = resolve(f, cwd, home);
        let shown = path.display();
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("Error: File not found: {shown}"));
            }
            Err(e) => return Err(format!("Error: Could not read file {shown}: {e}")),
        };
        // Skipped when empty, as pi skips them: so are devices and FIFOs (their size is 0), which
        // would otherwise be read without end (`/dev/zero`) or block (a FIFO).
        if meta.len() == 0 && !meta.is_dir() {
            continue;
        }
        use crate::files::{MAX_TEXT_FILE, ReadError, read_bytes};
        let bytes = match read_bytes(&path, MAX_TEXT_FILE) {
            Ok(b) => b,
            Err(ReadError::NotFound) => return Err(format!("Error: File not found: {shown}")),
            Err(ReadError::NotAFile) if meta.is_dir() => {
                return Err(format!(
                    "Error: Could not read file {shown}: is a directory"
                ));
            }
            Err(ReadError::NotAFile) => continue,
            Err(ReadError::TooLarge) => {
                return Err(format!(
                    "Error: Could not read file {shown}: larger than {} MiB",
                    MAX_TEXT_FILE / (1024 * 1024)
                ));
            }
            Err(ReadError::Io(e)) => {
                return Err(format!("Error: Could not read file {shown}: {e}"));
            }
        };
        if bytes.is_empty() {
            continue;
        }
        match crate::tools::read::image_mime(&bytes) {
            Some(mime) => {
                images.push(ImageContent {
                    data: crate::tools::read::base64(&bytes),
                    mime_type: mime.to_string(),
                });
                text.push_str(&format!("<file name=\"{shown}\"></file>\n"));
            }
            None => {
                let content = String::from_utf8_lossy(&bytes);
                text.push_str(&format!("<file name=\"{shown}\">\n{content}\n</file>\n"));
            }
        }
    }
    Ok((text, images))
}

/// The prompts: stdin, file text and the first message joined into the first prompt (with the
/// file images), then one prompt per further message.
pub fn compose(
    stdin: Option<String>,
    file_text: String,
    file_images: Vec<ImageContent>,
    messages: &[String],
) -> Vec<Prompt> {
    let mut first = String::new();
    let mut any = false;
    if let Some(s) = stdin {
        first.push_str(&s);
        any = true;
    }
    if !file_text.is_empty() {
        first.push_str(&file_text);
        any = true;
    }
    let mut rest = messages.iter();
    if let Some(m) = rest.next() {
        first.push_str(m);
        any = true;
    }
    let mut prompts = Vec::new();
    if any {
        prompts.push(Prompt {
            text: first,
            images: file_images,
        });
    }
    prompts.extend(rest.map(|m| Prompt {
        text: m.clone(),
        images: Vec::new(),
    }));
    prompts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(p: &[Prompt]) -> Vec<&str> {
        p.iter().map(|p| p.text.as_str()).collect()
    }

    #[test]
    fn joined_with_nothing_in_between_like_pi() {
        let m = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            texts(&compose(
                Some("text".into()),
                String::new(),
                vec![],
                &m(&["summarize"])
            )),
            ["textsummarize"]
        );
        assert_eq!(
            texts(&compose(
                Some("in".into()),
                "<file name=\"/a\">\nx\n</file>\n".into(),
                vec![],
                &m(&["first", "second"])
            )),
            ["in<file name=\"/a\">\nx\n</file>\nfirst", "second"]
        );
        assert_eq!(
            texts(&compose(
                Some("only stdin".into()),
                String::new(),
                vec![],
                &[]
            )),
            ["only stdin"]
        );
        assert!(compose(None, String::new(), vec![], &[]).is_empty());
    }

    #[test]
    fn stdin_is_trimmed_like_javascript() {
        assert_eq!(stdin_text(b"\xef\xbb\xbf  hello\n\n"), Some("hello".into()));
        assert_eq!(stdin_text(b" \n\t "), None);
        assert_eq!(stdin_text(b"a\xffb\n"), Some("a\u{fffd}b".into()));
        // U+0085 is whitespace to Rust but not to JavaScript's trim.
        assert_eq!(stdin_text("\u{85}x".as_bytes()), Some("\u{85}x".into()));
    }

    #[test]
    fn files_like_pi() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "alpha").unwrap();
        std::fs::write(d.path().join("empty.txt"), "").unwrap();
        std::fs::write(d.path().join("i.png"), b"\x89PNG\r\n\x1a\n1234").unwrap();
        let (text, images) = file_arguments(
            &["a.txt".into(), "empty.txt".into(), "i.png".into()],
            d.path(),
            None,
        )
        .unwrap();
        let dir = d.path().display();
        assert_eq!(
            text,
            format!(
                "<file name=\"{dir}/a.txt\">\nalpha\n</file>\n<file name=\"{dir}/i.png\"></file>\n"
            )
        );
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].mime_type, "image/png");
        assert_eq!(
            file_arguments(&["nope.txt".into()], d.path(), None),
            Err(format!("Error: File not found: {dir}/nope.txt"))
        );
        let (text, _) =
            file_arguments(&["~/a.txt".into()], Path::new("/"), Some(d.path())).unwrap();
        assert!(
            text.starts_with(&format!("<file name=\"{dir}/a.txt\">")),
            "{text}"
        );
    }
}
