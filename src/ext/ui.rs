//! The extension UI sub-protocol, pure: the UI methods an extension (or `--confirm-tools`) asks
//! for, the `extension_ui_request` frames pith writes for them (exactly seed 001's / pi 0.87.1's
//! shapes and key order; absent options are left out as `JSON.stringify` leaves out
//! `undefined`), the host's `extension_ui_response` read back, and what the asker gets when the
//! host answers, dismisses, or lets the dialog time out.

use serde_json::{Map, Value, json};

use super::protocol::{DecodeError, Fields};

/// One UI method call.
#[derive(Clone, Debug, PartialEq)]
pub enum UiRequest {
    Select {
        title: String,
        options: Vec<String>,
        timeout: Option<u64>,
    },
    Confirm {
        title: String,
        message: String,
        timeout: Option<u64>,
    },
    Input {
        title: String,
        placeholder: Option<String>,
        timeout: Option<u64>,
    },
    /// pi's `editor` has no timeout; pith accepts one (documented extension).
    Editor {
        title: String,
        prefill: Option<String>,
        timeout: Option<u64>,
    },
    Notify {
        message: String,
        notify_type: Option<String>,
    },
    SetStatus {
        key: String,
        text: Option<String>,
    },
    SetWidget {
        key: String,
        lines: Option<Vec<String>>,
        placement: Option<String>,
    },
    SetTitle {
        title: String,
    },
    SetEditorText {
        text: String,
    },
}

impl UiRequest {
    /// Dialogs wait for the host's answer; the others are fire-and-forget.
    pub fn is_dialog(&self) -> bool {
        matches!(
            self,
            UiRequest::Select { .. }
                | UiRequest::Confirm { .. }
                | UiRequest::Input { .. }
                | UiRequest::Editor { .. }
        )
    }

    pub fn method(&self) -> &'static str {
        match self {
            UiRequest::Select { .. } => "select",
            UiRequest::Confirm { .. } => "confirm",
            UiRequest::Input { .. } => "input",
            UiRequest::Editor { .. } => "editor",
            UiRequest::Notify { .. } => "notify",
            UiRequest::SetStatus { .. } => "setStatus",
            UiRequest::SetWidget { .. } => "setWidget",
            UiRequest::SetTitle { .. } => "setTitle",
            UiRequest::SetEditorText { .. } => "set_editor_text",
        }
    }

    /// The dialog's timeout in milliseconds (0 counts as none, as in pi).
    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            UiRequest::Select { timeout, .. }
            | UiRequest::Confirm { timeout, .. }
            | UiRequest::Input { timeout, .. }
            | UiRequest::Editor { timeout, .. } => timeout.filter(|t| *t > 0),
            _ => None,
        }
    }
}

/// Decode the method and its fields of an extension's `ui` message.
pub(crate) fn decode_request(f: &Fields) -> Result<UiRequest, DecodeError> {
    let method = f.string("method")?;
    let f = Fields {
        what: &format!("ui {method}"),
        obj: f.obj,
    };
    Ok(match method.as_str() {
        "select" => UiRequest::Select {
            title: f.string("title")?,
            options: f.strings("options")?.ok_or_else(|| {
                DecodeError::Invalid(format!(
                    "{}: missing field \"options\" (expected an array of strings)",
                    f.what
                ))
            })?,
            timeout: f.opt_u64("timeout")?,
        },
        "confirm" => UiRequest::Confirm {
            title: f.string("title")?,
            message: f.opt_string("message")?.unwrap_or_default(),
            timeout: f.opt_u64("timeout")?,
        },
        "input" => UiRequest::Input {
            title: f.string("title")?,
            placeholder: f.opt_string("placeholder")?,
            timeout: f.opt_u64("timeout")?,
        },
        "editor" => UiRequest::Editor {
            title: f.string("title")?,
            prefill: f.opt_string("prefill")?,
            timeout: f.opt_u64("timeout")?,
        },
        "notify" => UiRequest::Notify {
            message: f.string("message")?,
            notify_type: f.opt_string("notifyType")?,
        },
        "setStatus" => UiRequest::SetStatus {
            key: f.string("statusKey")?,
            text: f.opt_string("statusText")?,
        },
        "setWidget" => UiRequest::SetWidget {
            key: f.string("widgetKey")?,
            lines: f.strings("widgetLines")?,
            placement: f.opt_string("widgetPlacement")?,
        },
        "setTitle" => UiRequest::SetTitle {
            title: f.string("title")?,
        },
        "set_editor_text" => UiRequest::SetEditorText {
            text: f.string("text")?,
        },
        other => {
            return Err(DecodeError::Invalid(format!(
                "ui: unknown method \"{other}\" (select, confirm, input, editor, notify, setStatus, setWidget, setTitle, set_editor_text)"
            )));
        }
    })
}

/// The `extension_ui_request` frame for `req` with request id `id`.
pub fn request_frame(id: &str, req: &UiRequest) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!("extension_ui_request"));
    m.insert("id".into(), json!(id));
    m.insert("method".into(), json!(req.method()));
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    match req {
        UiRequest::Select {
            title,
            options,
            timeout,
        } => {
            put("title", Some(json!(title)));
            put("options", Some(json!(options)));
            put("timeout", timeout.map(|t| json!(t)));
        }
        UiRequest::Confirm {
            title,
            message,
            timeout,
        } => {
            put("title", Some(json!(title)));
            put("message", Some(json!(message)));
            put("timeout", timeout.map(|t| json!(t)));
        }
        UiRequest::Input {
            title,
            placeholder,
            timeout,
        } => {
            put("title", Some(json!(title)));
            put("placeholder", placeholder.as_ref().map(|p| json!(p)));
            put("timeout", timeout.map(|t| json!(t)));
        }
        UiRequest::Editor {
            title,
            prefill,
            timeout,
        } => {
            put("title", Some(json!(title)));
            put("prefill", prefill.as_ref().map(|p| json!(p)));
            put("timeout", timeout.map(|t| json!(t)));
        }
        UiRequest::Notify {
            message,
            notify_type,
        } => {
            put("message", Some(json!(message)));
            put("notifyType", notify_type.as_ref().map(|t| json!(t)));
        }
        UiRequest::SetStatus { key, text } => {
            put("statusKey", Some(json!(key)));
            put("statusText", text.as_ref().map(|t| json!(t)));
        }
        UiRequest::SetWidget {
            key,
            lines,
            placement,
        } => {
            put("widgetKey", Some(json!(key)));
            put("widgetLines", lines.as_ref().map(|l| json!(l)));
            put("widgetPlacement", placement.as_ref().map(|p| json!(p)));
        }
        UiRequest::SetTitle { title } => put("title", Some(json!(title))),
        UiRequest::SetEditorText { text } => put("text", Some(json!(text))),
    }
    Value::Object(m)
}

/// How a dialog ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The host sent `value` (select, input, editor).
    Value(Value),
    /// The host sent `confirmed`.
    Confirmed(bool),
    /// The host sent `cancelled: true`, or nothing usable.
    Cancelled,
    /// Nobody answered within the dialog's timeout.
    TimedOut,
    /// No host can answer (print and json modes).
    NoUi,
}

/// Read the host's `extension_ui_response` (pi's precedence: `cancelled` first, then `confirmed`,
/// then `value`).
pub fn parse_answer(obj: &Map<String, Value>) -> Answer {
    if obj.get("cancelled") == Some(&Value::Bool(true)) {
        return Answer::Cancelled;
    }
    if let Some(Value::Bool(b)) = obj.get("confirmed") {
        return Answer::Confirmed(*b);
    }
    match obj.get("value") {
        Some(v) => Answer::Value(v.clone()),
        None => Answer::Cancelled,
    }
}

/// What the asking extension receives in its `ui_response` (besides `type` and `id`): for
/// `confirm` always `confirmed` (false unless the host confirmed); for the other dialogs `value`
/// when the host gave one, else `cancelled: true`. `timedOut: true` marks a timeout.
pub fn answer_fields(method: &str, answer: &Answer) -> Map<String, Value> {
    let mut m = Map::new();
    if method == "confirm" {
        let confirmed = match answer {
            Answer::Confirmed(b) => *b,
            _ => false,
        };
        m.insert("confirmed".into(), json!(confirmed));
        if matches!(answer, Answer::Cancelled | Answer::NoUi) {
            m.insert("cancelled".into(), json!(true));
        }
    } else {
        match answer {
            Answer::Value(v) if !v.is_null() => {
                m.insert("value".into(), v.clone());
            }
            _ => {
                m.insert("cancelled".into(), json!(true));
            }
        }
    }
    if *answer == Answer::TimedOut {
        m.insert("timedOut".into(), json!(true));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(v: Value) -> String {
        let obj = v.as_object().unwrap().clone();
        let f = Fields {
            what: "ui",
            obj: &obj,
        };
        let req = decode_request(&f).unwrap();
        serde_json::to_string(&request_frame("uuid-1", &req)).unwrap()
    }

    #[test]
    fn frames_have_the_reference_shapes_and_order() {
        assert_eq!(
            frame(
                json!({"method":"select","title":"Allow?","options":["Allow","Block"],"timeout":10000})
            ),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"select","title":"Allow?","options":["Allow","Block"],"timeout":10000}"#
        );
        assert_eq!(
            frame(json!({"method":"confirm","title":"Clear?","message":"All lost."})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"confirm","title":"Clear?","message":"All lost."}"#
        );
        assert_eq!(
            frame(json!({"method":"input","title":"Enter","placeholder":"type..."})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"input","title":"Enter","placeholder":"type..."}"#
        );
        assert_eq!(
            frame(json!({"method":"editor","title":"Edit","prefill":"a\nb"})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"editor","title":"Edit","prefill":"a\nb"}"#
        );
        assert_eq!(
            frame(json!({"method":"notify","message":"Blocked","notifyType":"warning"})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"notify","message":"Blocked","notifyType":"warning"}"#
        );
        assert_eq!(
            frame(json!({"method":"setStatus","statusKey":"k","statusText":"Turn 3"})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"setStatus","statusKey":"k","statusText":"Turn 3"}"#
        );
        assert_eq!(
            frame(json!({"method":"setStatus","statusKey":"k"})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"setStatus","statusKey":"k"}"#
        );
        assert_eq!(
            frame(
                json!({"method":"setWidget","widgetKey":"w","widgetLines":["a"],"widgetPlacement":"belowEditor"})
            ),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"setWidget","widgetKey":"w","widgetLines":["a"],"widgetPlacement":"belowEditor"}"#
        );
        assert_eq!(
            frame(json!({"method":"setTitle","title":"pi"})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"setTitle","title":"pi"}"#
        );
        assert_eq!(
            frame(json!({"method":"set_editor_text","text":"x"})),
            r#"{"type":"extension_ui_request","id":"uuid-1","method":"set_editor_text","text":"x"}"#
        );
    }

    #[test]
    fn answers() {
        let a = |v: Value| parse_answer(v.as_object().unwrap());
        assert_eq!(a(json!({"cancelled":true,"value":"x"})), Answer::Cancelled);
        assert_eq!(a(json!({"confirmed":true})), Answer::Confirmed(true));
        assert_eq!(a(json!({"value":"Allow"})), Answer::Value(json!("Allow")));
        assert_eq!(a(json!({})), Answer::Cancelled);
        let f = |m: &str, ans: Answer| serde_json::to_string(&answer_fields(m, &ans)).unwrap();
        assert_eq!(
            f("confirm", Answer::Confirmed(true)),
            r#"{"confirmed":true}"#
        );
        assert_eq!(
            f("confirm", Answer::TimedOut),
            r#"{"confirmed":false,"timedOut":true}"#
        );
        assert_eq!(
            f("confirm", Answer::Cancelled),
            r#"{"confirmed":false,"cancelled":true}"#
        );
        assert_eq!(f("select", Answer::Value(json!("B"))), r#"{"value":"B"}"#);
        assert_eq!(
            f("input", Answer::TimedOut),
            r#"{"cancelled":true,"timedOut":true}"#
        );
        assert_eq!(
            f("editor", Answer::Confirmed(true)),
            r#"{"cancelled":true}"#
        );
    }

    #[test]
    fn unknown_methods_and_missing_fields() {
        let obj = json!({"method":"custom"}).as_object().unwrap().clone();
        let e = decode_request(&Fields {
            what: "ui",
            obj: &obj,
        });
        assert!(
            matches!(e, Err(DecodeError::Invalid(m)) if m.starts_with("ui: unknown method \"custom\""))
        );
        let obj = json!({"method":"select","title":"t"})
            .as_object()
            .unwrap()
            .clone();
        let e = decode_request(&Fields {
            what: "ui",
            obj: &obj,
        });
        assert!(matches!(e, Err(DecodeError::Invalid(m)) if m.contains("\"options\"")));
    }
}
