//! Tool approval without an extension (`--confirm-tools`), pure: which tools need the host's
//! confirmation, the `confirm` dialog's title and message (naming the tool and showing what it
//! will do), and the error result a denied call gets.

use serde_json::Value;

/// Which tools need confirmation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ConfirmTools {
    #[default]
    None,
    All,
    Some(Vec<String>),
}

impl ConfirmTools {
    /// `all`, `none` / empty, or a comma list of tool names.
    pub fn parse(s: &str) -> ConfirmTools {
        let names: Vec<String> = s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        if names.iter().any(|n| n == "all") {
            return ConfirmTools::All;
        }
        if names.is_empty() || names.iter().all(|n| n == "none") {
            return ConfirmTools::None;
        }
        ConfirmTools::Some(names)
    }

    /// settings `pith.confirmTools`: a string as for the flag, or an array of names.
    pub fn from_setting(v: &Value) -> Option<ConfirmTools> {
        match v {
            Value::String(s) => Some(ConfirmTools::parse(s)),
            Value::Array(a) => {
                let names: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                Some(ConfirmTools::parse(&names.join(",")))
            }
            _ => None,
        }
    }

    pub fn needs(&self, tool: &str) -> bool {
        match self {
            ConfirmTools::None => false,
            ConfirmTools::All => true,
            ConfirmTools::Some(names) => names.iter().any(|n| n == tool),
        }
    }

    pub fn is_none(&self) -> bool {
        *self == ConfirmTools::None
    }
}

/// Most bytes of one argument shown in a message. The host must see what it approves: a file's
/// content and an edit's texts are shown whole up to this (far more than a model writes in one
/// reply), longer text is cut with a note of how much was left out.
pub const SHOW_BYTES: usize = 1024 * 1024;

fn clip(text: &str) -> String {
    if text.len() <= SHOW_BYTES {
        return text.to_string();
    }
    let mut cut = SHOW_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let lines = |t: &str| t.split('\n').count();
    format!(
        "{}\n… [cut here: the first {cut} of {} bytes shown, {} of {} lines]",
        &text[..cut],
        text.len(),
        lines(&text[..cut]),
        lines(text)
    )
}

fn s<'a>(args: &'a Value, k: &str) -> Option<&'a str> {
    args.get(k).and_then(Value::as_str)
}

/// The dialog's title and message for a call of `tool` with `args`.
pub fn describe(tool: &str, args: &Value) -> (String, String) {
    let title = format!("Allow {tool}?");
    let path = s(args, "path").unwrap_or("?");
    let message = match tool {
        "bash" => {
            // Never cut: the command is the action, and what the host approves must be all of
            // what runs (a harmless start can hide the rest). Its size is bounded by what the
            // model may write in one reply.
            let mut m = format!("Run this command:\n{}", s(args, "command").unwrap_or(""));
            if let Some(t) = args.get("timeout").and_then(Value::as_f64) {
                m.push_str(&format!("\n(timeout {t} s)"));
            }
            m
        }
        "write" => {
            let content = s(args, "content").unwrap_or("");
            format!(
                "Write {} bytes to {path}:\n{}",
                content.len(),
                clip(content)
            )
        }
        "edit" => {
            let mut m = format!("Edit {path}:");
            let edits: Vec<(String, String)> = match args.get("edits").and_then(Value::as_array) {
                Some(list) => list
                    .iter()
                    .map(|e| {
                        (
                            s(e, "oldText").unwrap_or("").to_string(),
                            s(e, "newText").unwrap_or("").to_string(),
                        )
                    })
                    .collect(),
                None => vec![(
                    s(args, "oldText").unwrap_or("").to_string(),
                    s(args, "newText").unwrap_or("").to_string(),
                )],
            };
            for (old, new) in edits {
                m.push_str(&format!(
                    "\n--- replace:\n{}\n+++ with:\n{}",
                    clip(&old),
                    clip(&new)
                ));
            }
            m
        }
        "read" => format!("Read {path}"),
        "ls" => format!("List {}", s(args, "path").unwrap_or(".")),
        "grep" | "find" => format!(
            "Search for {} in {}",
            s(args, "pattern").unwrap_or("?"),
            s(args, "path").unwrap_or(".")
        ),
        _ => {
            let json = serde_json::to_string_pretty(args).unwrap_or_default();
            format!("Call {tool} with:\n{}", clip(&json))
        }
    };
    (title, message)
}

/// Why a call was not allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    Declined,
    Cancelled,
    TimedOut(u64),
    NoUi,
}

/// The error result of a denied call (the model reads it).
pub fn denial_text(tool: &str, why: Denial) -> String {
    match why {
        Denial::Declined => format!("Tool call denied: the user declined to run {tool}."),
        Denial::Cancelled => {
            format!("Tool call denied: the confirmation for {tool} was cancelled.")
        }
        Denial::TimedOut(secs) => {
            format!("Tool call denied: no confirmation for {tool} within {secs} seconds.")
        }
        Denial::NoUi => format!(
            "Tool call denied: {tool} needs confirmation (--confirm-tools) and no host can answer in this mode."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_lists() {
        assert_eq!(ConfirmTools::parse("all"), ConfirmTools::All);
        assert_eq!(ConfirmTools::parse(""), ConfirmTools::None);
        assert_eq!(ConfirmTools::parse("none"), ConfirmTools::None);
        let c = ConfirmTools::parse("bash, write");
        assert!(c.needs("bash") && c.needs("write") && !c.needs("read"));
        assert!(ConfirmTools::All.needs("mcp__x__y"));
        assert_eq!(
            ConfirmTools::from_setting(&json!(["bash"])),
            Some(ConfirmTools::Some(vec!["bash".into()]))
        );
        assert_eq!(ConfirmTools::from_setting(&json!(3)), None);
    }

    #[test]
    fn messages_name_the_tool_and_what_it_does() {
        let (t, m) = describe("bash", &json!({"command":"rm -rf build"}));
        assert_eq!(t, "Allow bash?");
        assert_eq!(m, "Run this command:\nrm -rf build");
        let (_, m) = describe("write", &json!({"path":"a.txt","content":"hi\n"}));
        assert_eq!(m, "Write 3 bytes to a.txt:\nhi\n");
        let (_, m) = describe(
            "edit",
            &json!({"path":"a.rs","edits":[{"oldText":"x","newText":"y"}]}),
        );
        assert_eq!(m, "Edit a.rs:\n--- replace:\nx\n+++ with:\ny");
        let (t, m) = describe("mcp__time__now", &json!({"tz":"UTC"}));
        assert_eq!(t, "Allow mcp__time__now?");
        assert_eq!(m, "Call mcp__time__now with:\n{\n  \"tz\": \"UTC\"\n}");
        // Shown whole up to SHOW_BYTES, lines and all.
        let long = "x\n".repeat(100);
        let (_, m) = describe("write", &json!({"path":"b","content":long}));
        assert_eq!(m, format!("Write 200 bytes to b:\n{long}"));
        let huge = "é".repeat(SHOW_BYTES / 2) + "\nrm -rf /";
        let (_, m) = describe("write", &json!({"path":"b","content":huge}));
        assert_eq!(
            m,
            format!(
                "Write {} bytes to b:\n{}\n… [cut here: the first {SHOW_BYTES} of {} bytes shown, 1 of 2 lines]",
                huge.len(),
                "é".repeat(SHOW_BYTES / 2),
                huge.len()
            )
        );
    }

    #[test]
    fn denials() {
        assert_eq!(
            denial_text("bash", Denial::TimedOut(60)),
            "Tool call denied: no confirmation for bash within 60 seconds."
        );
        assert!(denial_text("write", Denial::Declined).starts_with("Tool call denied"));
    }
}
