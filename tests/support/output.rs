//! A finished pith's output (`std::process::Output`) as text and as JSON lines.

use std::process::Output;

use serde_json::Value;

/// stdout as text (bytes that are not UTF-8 become U+FFFD).
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text (bytes that are not UTF-8 become U+FFFD).
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout, which must be UTF-8.
pub fn stdout_utf8(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

/// stderr, which must be UTF-8.
pub fn stderr_utf8(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

/// Every line of `text` as JSON (panics on a line that is not).
pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The JSON lines of stdout (panics on a line that is not JSON).
pub fn stdout_lines(o: &Output) -> Vec<Value> {
    json_lines(&stdout(o))
}

/// `base` then `more`, as one argument list.
pub fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    let mut v = base.to_vec();
    v.extend_from_slice(more);
    v
}
