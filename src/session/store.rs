//! Disk side of sessions: reading and migrating JSONL files, writing lines the way the reference
//! does (`JSON.stringify` output, one object per `\n`-terminated line), and finding session files
//! (`--continue`, `--session <path or id prefix>`, the default per-project directory).
//!
//! Writes are small: one `write` of one line per appended entry (the first flush writes the
//! header and the buffered entries in a single `write`). Whole-file rewrites (migration, a
//! corrupt file replaced by a fresh header) go through a temporary file and a rename.

use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The session format version pith writes.
pub const CURRENT_VERSION: u64 = 3;

/// Largest session file pith will read (a guard against reading something that is not one).
const MAX_FILE_BYTES: u64 = 1 << 30;

/// A `serde_json` formatter printing floats like JavaScript's `Number.prototype.toString`
/// (`0.00003`, `1e-7`, `1e+21`, `3`), so lines match `JSON.stringify` byte for byte.
pub struct JsFormatter;

impl serde_json::ser::Formatter for JsFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(js_number(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(js_number(f64::from(value)).as_bytes())
    }
}

/// JavaScript's string form of a number (`null` for non-finite values, as `JSON.stringify`).
pub fn js_number(v: f64) -> String {
    if !v.is_finite() {
        return "null".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    // Shortest round-trip digits and exponent, e.g. "3.0000000000000003e-4".
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exp + 1; // value = 0.digits × 10^n
    let sign = if v < 0.0 { "-" } else { "" };
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        let rest = if k > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        format!("{}{rest}e{e_sign}{}", &digits[..1], e.abs())
    };
    format!("{sign}{body}")
}

/// One JSON object as a file line (without the trailing newline).
pub fn to_line(obj: &Map<String, Value>) -> String {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, JsFormatter);
    // Serialising a Map of Values into memory cannot fail.
    if serde::Serialize::serialize(obj, &mut ser).is_err() {
        return "{}".into();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// What [`read_file`] found.
pub struct RawFile {
    /// Parsed objects in file order; the first is the header (`type: "session"`, string `id`).
    pub objects: Vec<Map<String, Value>>,
    /// Problems worth a line on stderr (skipped lines, a cut last line).
    pub warnings: Vec<String>,
    /// The file does not end with `\n`: the next append must start a new line first.
    pub needs_newline: bool,
}

/// Read a session file: one JSON object per line, unparsable lines skipped with a warning.
/// Errors when the file cannot be read or holds no valid header line.
pub fn read_file(path: &Path) -> Result<RawFile, String> {
    let shown = path.display();
    let file =
        fs::File::open(path).map_err(|e| format!("Cannot open session file {shown}: {e}"))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_FILE_BYTES {
        return Err(format!("Session file {shown} is too large ({len} bytes)"));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    BufReader::new(file)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("Cannot read session file {shown}: {e}"))?;
    let needs_newline = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let mut objects = Vec::new();
    let mut warnings = Vec::new();
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last_nonempty = lines.iter().rposition(|l| !l.trim_ascii().is_empty());
    for (i, line) in lines.iter().enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(obj)) => objects.push(obj),
            _ if Some(i) == last_nonempty && needs_newline => warnings.push(format!(
                "Warning: session file {shown}: dropped an incomplete last line (line {})",
                i + 1
            )),
            _ => warnings.push(format!(
                "Warning: session file {shown}: skipped unparsable line {}",
                i + 1
            )),
        }
    }
    if !objects.first().is_some_and(is_header) {
        return Err(format!(
            "Cannot load session file {shown}: no valid session header (first line must be a JSON object with \"type\":\"session\" and a string \"id\")"
        ));
    }
    Ok(RawFile {
        objects,
        warnings,
        needs_newline,
    })
}

/// `{type: "session", id: <string>}`.
pub fn is_header(obj: &Map<String, Value>) -> bool {
    obj.get("type").and_then(Value::as_str) == Some("session")
        && obj.get("id").is_some_and(Value::is_string)
}

/// Bring objects (header first) to version 3 in place (spec 11.6). Returns whether anything
/// changed (the caller then rewrites the file).
///
/// - v1 (no `version`) → v2: fresh ids, a linear `parentId` chain, `firstKeptEntryIndex` (an
///   index into the file's lines, header included) → `firstKeptEntryId`.
/// - v2 → v3: message role `hookMessage` → `custom`.
pub fn migrate(
    objects: &mut [Map<String, Value>],
    mut new_id: impl FnMut(&dyn Fn(&str) -> bool) -> String,
) -> bool {
    let Some(header) = objects.first() else {
        return false;
    };
    let version = header.get("version").and_then(Value::as_u64).unwrap_or(1);
    if version >= CURRENT_VERSION {
        return false;
    }
    if version < 2 {
        let mut taken = std::collections::HashSet::new();
        let mut prev: Option<String> = None;
        for obj in objects.iter_mut().skip(1) {
            let id = new_id(&|candidate| taken.contains(candidate));
            taken.insert(id.clone());
            obj.insert("id".into(), Value::String(id.clone()));
            obj.insert("parentId".into(), prev.map_or(Value::Null, Value::String));
            prev = Some(id);
        }
        for i in 1..objects.len() {
            let index = objects[i]
                .get("firstKeptEntryIndex")
                .and_then(Value::as_u64);
            let Some(index) = index else { continue };
            let target = objects
                .get(index as usize)
                .filter(|o| !is_header(o))
                .and_then(|o| o.get("id").cloned());
            if let Some(id) = target {
                objects[i].insert("firstKeptEntryId".into(), id);
            }
            objects[i].shift_remove("firstKeptEntryIndex");
        }
    }
    for obj in objects.iter_mut().skip(1) {
        let is_message = obj.get("type").and_then(Value::as_str) == Some("message");
        if let Some(Value::Object(m)) = obj.get_mut("message").filter(|_| is_message) {
            if m.get("role").and_then(Value::as_str) == Some("hookMessage") {
                m.insert("role".into(), Value::String("custom".into()));
            }
        }
    }
    if let Some(header) = objects.first_mut() {
        header.insert("version".into(), Value::from(CURRENT_VERSION));
    }
    true
}

/// Append `text` (whole lines, `\n`-terminated) to `path`, creating the file and its directory.
pub fn append(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| format!("Cannot create {}: {e}", dir.display()))?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("Cannot open {} for appending: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("Cannot write {}: {e}", path.display()))
}

/// Replace `path` with `text` atomically (temporary file in the same directory, then rename).
pub fn rewrite(path: &Path, text: &str) -> Result<(), String> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|e| format!("Cannot create {}: {e}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .map_err(|e| format!("Cannot create a temporary file in {}: {e}", dir.display()))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
    tmp.persist(path)
        .map(|_| ())
        .map_err(|e| format!("Cannot replace {}: {e}", path.display()))
}

/// `<agent_dir>/sessions/--<cwd without leading separator, / \ : replaced by ->--/`.
pub fn default_session_dir(agent_dir: &Path, cwd: &str) -> PathBuf {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    let safe: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    agent_dir.join("sessions").join(format!("--{safe}--"))
}

/// The file name of a new session: ISO timestamp with `:` and `.` replaced by `-`, then the id.
pub fn session_file_name(iso_timestamp: &str, session_id: &str) -> String {
    let ts: String = iso_timestamp
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .collect();
    format!("{ts}_{session_id}.jsonl")
}

/// The header of a file if its first line (read up to 64 KiB) is a valid session header.
pub fn read_header(path: &Path) -> Option<Map<String, Value>> {
    let f = fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(f.take(64 * 1024))
        .read_until(b'\n', &mut line)
        .ok()?;
    match serde_json::from_slice::<Value>(line.trim_ascii()) {
        Ok(Value::Object(obj)) if is_header(&obj) => Some(obj),
        _ => None,
    }
}

fn session_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect()
}

/// `--continue`: the most recently modified (mtime) valid session file in `dir`.
pub fn find_most_recent(dir: &Path) -> Option<PathBuf> {
    session_files(dir)
        .into_iter()
        .filter(|p| read_header(p).is_some())
        .filter_map(|p| {
            let mtime = fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((mtime, p))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
        .map(|(_, p)| p)
}

/// When a session was last active: the latest user/assistant message timestamp, else the
/// header timestamp, else the file's mtime (ms).
pub fn modified_ms(path: &Path) -> u64 {
    let mtime = || {
        fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64)
    };
    let Ok(raw) = read_file(path) else {
        return mtime();
    };
    let mut latest = 0u64;
    for obj in raw.objects.iter().skip(1) {
        if obj.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        let Some(msg) = obj.get("message") else {
            continue;
        };
        let role = msg.get("role").and_then(Value::as_str);
        if !matches!(role, Some("user" | "assistant")) || msg.get("content").is_none() {
            continue;
        }
        let t = msg.get("timestamp").and_then(Value::as_u64).or_else(|| {
            obj.get("timestamp")
                .and_then(Value::as_str)
                .and_then(super::ids::parse_iso_ms)
        });
        latest = latest.max(t.unwrap_or(0));
    }
    if latest > 0 {
        return latest;
    }
    raw.objects[0]
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(super::ids::parse_iso_ms)
        .unwrap_or_else(mtime)
}

/// `--session <arg>`: a path when `arg` contains `/` or `\` or ends with `.jsonl` (returned as
/// given; it may not exist yet), else the newest-modified session in `dir` whose id starts with
/// `arg`. No match: `No session found matching '<arg>'` (searching other projects is the
/// caller's business).
pub fn resolve_session_arg(arg: &str, dir: &Path) -> Result<PathBuf, String> {
    if arg.contains(['/', '\\']) || arg.ends_with(".jsonl") {
        return Ok(PathBuf::from(arg));
    }
    session_files(dir)
        .into_iter()
        .filter(|p| {
            read_header(p)
                .and_then(|h| {
                    h.get("id")
                        .and_then(Value::as_str)
                        .map(|id| id.starts_with(arg))
                })
                .unwrap_or(false)
        })
        .map(|p| (modified_ms(&p), p))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
        .map(|(_, p)| p)
        .ok_or_else(|| format!("No session found matching '{arg}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_javascript() {
        let cases = [
            (0.00003, "0.00003"),
            (0.00030000000000000003, "0.00030000000000000003"),
            (0.00033000000000000005, "0.00033000000000000005"),
            (3.0, "3"),
            (0.3, "0.3"),
            (3.75, "3.75"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (1e20, "100000000000000000000"),
            (-2.5, "-2.5"),
            (123456.789, "123456.789"),
            (0.935, "0.935"),
            (f64::NAN, "null"),
        ];
        for (v, want) in cases {
            assert_eq!(js_number(v), want, "{v}");
        }
    }

    #[test]
    fn cwd_encoding_matches_reference() {
        let d = default_session_dir(Path::new("/root/.pi/agent"), "/tmp/pitest/work");
        assert_eq!(
            d,
            PathBuf::from("/root/.pi/agent/sessions/--tmp-pitest-work--")
        );
        let d = default_session_dir(Path::new("/a"), "C:\\x\\y");
        assert_eq!(d, PathBuf::from("/a/sessions/--C--x-y--"));
    }

    #[test]
    fn file_name_from_timestamp() {
        assert_eq!(
            session_file_name("2026-11-21T22:10:33.616Z", "49b5"),
            "2026-11-21T22-10-33-616Z_49b5.jsonl"
        );
    }

    #[test]
    fn v1_migration_links_entries_and_converts_index() {
        let lines = [
            r#"{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"a","timestamp":1}}"#,
            r#"{"type":"message","timestamp":"t","message":{"role":"hookMessage","customType":"x","content":"h","display":true,"timestamp":2}}"#,
            r#"{"type":"compaction","timestamp":"t","summary":"S","firstKeptEntryIndex":2,"tokensBefore":5}"#,
        ];
        let mut objs: Vec<Map<String, Value>> = lines
            .iter()
            .map(|l| match serde_json::from_str(l).unwrap() {
                Value::Object(m) => m,
                _ => unreachable!(),
            })
            .collect();
        let mut n = 0;
        let changed = migrate(&mut objs, |_| {
            n += 1;
            format!("id{n}")
        });
        assert!(changed);
        assert_eq!(objs[0]["version"], 3);
        assert_eq!(objs[1]["id"], "id1");
        assert_eq!(objs[1]["parentId"], Value::Null);
        assert_eq!(objs[2]["parentId"], "id1");
        assert_eq!(objs[2]["message"]["role"], "custom");
        assert_eq!(objs[3]["firstKeptEntryId"], "id2");
        assert!(objs[3].get("firstKeptEntryIndex").is_none());
        assert!(!migrate(&mut objs, |_| unreachable!()));
    }
}
