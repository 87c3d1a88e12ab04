//! The response envelope: `{"id"?, "type":"response", "command", "success", "data"|"error"}` in
//! that key order. `id` is echoed exactly as sent (string, number, anything) and omitted when the
//! command had none. `data` is omitted for commands without data but kept when it is JSON `null`.

use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    #[serde(rename = "type")]
    ty: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a str>,
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// One serialised line (with the trailing `\n`).
pub fn success(id: Option<&Value>, command: &str, data: Option<&Value>) -> Vec<u8> {
    line(&Envelope {
        id,
        ty: "response",
        command: Some(command),
        success: true,
        data,
        error: None,
    })
}

/// A success line whose `data` is already serialised JSON (large data spliced, not rebuilt).
pub fn success_raw(id: Option<&Value>, command: &str, data: &[u8]) -> Vec<u8> {
    let mut head = line(&Envelope {
        id,
        ty: "response",
        command: Some(command),
        success: true,
        data: None,
        error: None,
    });
    // `…,"success":true}\n` → `…,"success":true,"data":<data>}\n`
    head.truncate(head.len().saturating_sub(2));
    head.reserve_exact(data.len() + 10);
    head.extend_from_slice(b",\"data\":");
    head.extend_from_slice(data);
    head.extend_from_slice(b"}\n");
    head
}

pub fn error(id: Option<&Value>, command: Option<&str>, message: &str) -> Vec<u8> {
    line(&Envelope {
        id,
        ty: "response",
        command,
        success: false,
        data: None,
        error: Some(message),
    })
}

/// What became of a prompt, a steer or a follow-up (pi 1.6.0's `data.disposition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// A run started with it.
    Started,
    /// It waits in the steering or follow-up queue.
    Queued,
    /// A command consumed it: no run, nothing added to the messages.
    Handled,
}

impl Disposition {
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Started => "started",
            Disposition::Queued => "queued",
            Disposition::Handled => "handled",
        }
    }
}

/// The `data` of a successful `prompt`, `steer` or `follow_up`: `{"disposition":…}` when the
/// version says it (`shown`, the profile's `answers.prompt_disposition`), else none.
pub fn disposition(d: Disposition, shown: bool) -> Option<Value> {
    shown.then(|| serde_json::json!({ "disposition": d.as_str() }))
}

/// Serialise any frame as one JSON line. Serialising our own types cannot fail (no maps with
/// non-string keys, no failing `Serialize` impls); should it ever, the line says so instead of
/// panicking.
pub fn line<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    if write_js(&mut out, value).is_err() {
        out.clear();
        out.extend_from_slice(br#"{"type":"response","success":false,"error":"internal error: unserialisable frame"}"#);
    }
    out.push(b'\n');
    out
}

/// Serialise as JavaScript's `JSON.stringify` would (numbers in JS form: `0.00003`, `3`).
pub fn write_js<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, crate::json::JsFormatter);
    value.serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_id_echo() {
        let id = json!(42);
        assert_eq!(
            String::from_utf8(success(Some(&id), "get_state", Some(&json!({"a":1})))).unwrap(),
            "{\"id\":42,\"type\":\"response\",\"command\":\"get_state\",\"success\":true,\"data\":{\"a\":1}}\n"
        );
        assert_eq!(
            String::from_utf8(success(None, "cycle_model", Some(&Value::Null))).unwrap(),
            "{\"type\":\"response\",\"command\":\"cycle_model\",\"success\":true,\"data\":null}\n"
        );
        assert_eq!(
            String::from_utf8(success_raw(Some(&id), "get_tree", b"{\"tree\":[]}")).unwrap(),
            "{\"id\":42,\"type\":\"response\",\"command\":\"get_tree\",\"success\":true,\"data\":{\"tree\":[]}}\n"
        );
        assert_eq!(
            String::from_utf8(error(None, Some("parse"), "bad")).unwrap(),
            "{\"type\":\"response\",\"command\":\"parse\",\"success\":false,\"error\":\"bad\"}\n"
        );
    }

    #[test]
    fn prompt_disposition_data() {
        assert_eq!(disposition(Disposition::Started, false), None);
        let id = json!("p1");
        let data = disposition(Disposition::Queued, true);
        assert_eq!(
            String::from_utf8(success(Some(&id), "steer", data.as_ref())).unwrap(),
            "{\"id\":\"p1\",\"type\":\"response\",\"command\":\"steer\",\"success\":true,\"data\":{\"disposition\":\"queued\"}}\n"
        );
        assert_eq!(
            disposition(Disposition::Handled, true),
            Some(json!({"disposition": "handled"}))
        );
        assert_eq!(
            disposition(Disposition::Started, true),
            Some(json!({"disposition": "started"}))
        );
    }
}
