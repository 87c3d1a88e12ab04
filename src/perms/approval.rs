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

    /// Both lists: what a project adds to the user's (it can never take any away).
    pub fn union(self, other: ConfirmTools) -> ConfirmTools {
        match (self, other) {
            (ConfirmTools::All, _) | (_, ConfirmTools::All) => ConfirmTools::All,
            (ConfirmTools::None, o) | (o, ConfirmTools::None) => o,
            (ConfirmTools::Some(mut a), ConfirmTools::Some(b)) => {
                for n in b {
                    if !a.contains(&n) {
                        a.push(n);
                    }
                }
                ConfirmTools::Some(a)
            }
        }
    }

    /// The tool names as `ask` rules (`*` for all).
    pub fn as_rules(&self) -> Vec<String> {
        match self {
            ConfirmTools::None => Vec::new(),
            ConfirmTools::All => vec!["*".to_string()],
            ConfirmTools::Some(names) => names.clone(),
        }
    }
}

/// Where a file tool's path lands, for the dialog: shown when it differs from the path given
/// (a symlink), and said when a write or edit goes outside the working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The resolved path.
    pub resolved: String,
    /// It is not the path the model gave (made absolute): a symlink was followed.
    pub moved: bool,
    /// It is outside the working directory.
    pub outside: bool,
}

fn where_to(tool: &str, target: Option<&Target>) -> String {
    let Some(t) = target else {
        return String::new();
    };
    let outside = t.outside && matches!(tool, "write" | "edit");
    match (t.moved, outside) {
        (false, false) => String::new(),
        (true, false) => format!(" (→ {})", t.resolved),
        (false, true) => " (outside the working directory)".to_string(),
        (true, true) => format!(" (→ {}, outside the working directory)", t.resolved),
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

/// The dialog's title and message for a call of `tool` with `args`; `target`: where a file
/// tool's path resolves.
pub fn describe(tool: &str, args: &Value, target: Option<&Target>) -> (String, String) {
    let title = format!("Allow {tool}?");
    let path = s(args, "path").unwrap_or("?");
    let to = where_to(tool, target);
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
                "Write {} bytes to {path}{to}:\n{}",
                content.len(),
                clip(content)
            )
        }
        "edit" => {
            let mut m = format!("Edit {path}{to}:");
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
        "read" => format!("Read {path}{to}"),
        "ls" => format!("List {}{to}", s(args, "path").unwrap_or(".")),
        "grep" | "find" => format!(
            "Search for {} in {}{to}",
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

/// The error result of a call a permission rule denies. `part`: the simple command of a bash
/// line the rule matched.
pub fn rule_denial_text(tool: &str, rule: &str, part: Option<&str>) -> String {
    match part {
        Some(p) => format!(
            "Permission denied: the rule deny \"{rule}\" blocks this {tool} call (command: {p}). Do not retry it; ask the user if it is needed."
        ),
        None => format!(
            "Permission denied: the rule deny \"{rule}\" blocks this {tool} call. Do not retry it; ask the user if it is needed."
        ),
    }
}

/// The error result of a call no rule allows, denied by the default (`--permission-default`,
/// or fail-closed in print and json modes).
pub fn default_denial_text(tool: &str, part: Option<&str>) -> String {
    let what = match part {
        Some(p) => format!("this {tool} call (command: {p})"),
        None => format!("this {tool} call"),
    };
    format!(
        "Permission denied: no permission rule allows {what}, and calls no rule allows are denied here (--permission-default). Do not retry it; ask the user if it is needed."
    )
}

/// The error result of an `ask` that no host can answer (print and json modes): asked by this
/// rule, by `--confirm-tools` (`confirm_tools`), or by `--permission-default ask` (neither).
pub fn ask_without_host_text(tool: &str, rule: Option<&str>, confirm_tools: bool) -> String {
    match rule {
        _ if confirm_tools => denial_text(tool, Denial::NoUi),
        Some(r) => format!(
            "Tool call denied: {tool} needs confirmation (permission rule ask \"{r}\") and no host can answer in this mode."
        ),
        None => format!(
            "Tool call denied: {tool} needs confirmation (--permission-default ask) and no host can answer in this mode."
        ),
    }
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
        let (t, m) = describe("bash", &json!({"command":"rm -rf build"}), None);
        assert_eq!(t, "Allow bash?");
        assert_eq!(m, "Run this command:\nrm -rf build");
        let (_, m) = describe("write", &json!({"path":"a.txt","content":"hi\n"}), None);
        assert_eq!(m, "Write 3 bytes to a.txt:\nhi\n");
        let (_, m) = describe(
            "edit",
            &json!({"path":"a.rs","edits":[{"oldText":"x","newText":"y"}]}),
            None,
        );
        assert_eq!(m, "Edit a.rs:\n--- replace:\nx\n+++ with:\ny");
        let (t, m) = describe("mcp__time__now", &json!({"tz":"UTC"}), None);
        assert_eq!(t, "Allow mcp__time__now?");
        assert_eq!(m, "Call mcp__time__now with:\n{\n  \"tz\": \"UTC\"\n}");
        // Shown whole up to SHOW_BYTES, lines and all.
        let long = "x\n".repeat(100);
        let (_, m) = describe("write", &json!({"path":"b","content":long}), None);
        assert_eq!(m, format!("Write 200 bytes to b:\n{long}"));
        let huge = "é".repeat(SHOW_BYTES / 2) + "\nrm -rf /";
        let (_, m) = describe("write", &json!({"path":"b","content":huge}), None);
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
    fn the_dialog_shows_where_the_bytes_land() {
        let t = |resolved: &str, moved, outside| Target {
            resolved: resolved.into(),
            moved,
            outside,
        };
        let args = json!({"path":"notes.txt","content":"hello world"});
        let (_, m) = describe("write", &args, Some(&t("/w/notes.txt", false, false)));
        assert_eq!(m, "Write 11 bytes to notes.txt:\nhello world");
        let (_, m) = describe("write", &args, Some(&t("/tmp/x.txt", true, true)));
        assert_eq!(
            m,
            "Write 11 bytes to notes.txt (→ /tmp/x.txt, outside the working directory):\nhello world"
        );
        let args = json!({"path":"/etc/hosts","edits":[]});
        let (_, m) = describe("edit", &args, Some(&t("/etc/hosts", false, true)));
        assert_eq!(m, "Edit /etc/hosts (outside the working directory):");
        let (_, m) = describe(
            "read",
            &json!({"path":"l"}),
            Some(&t("/w/real", true, false)),
        );
        assert_eq!(m, "Read l (→ /w/real)");
        // Reads outside say where, not "outside".
        let (_, m) = describe(
            "read",
            &json!({"path":"/etc/x"}),
            Some(&t("/etc/x", false, true)),
        );
        assert_eq!(m, "Read /etc/x");
    }

    #[test]
    fn confirm_lists_only_grow() {
        let some = |v: &[&str]| ConfirmTools::Some(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            ConfirmTools::All.union(ConfirmTools::None),
            ConfirmTools::All
        );
        assert_eq!(ConfirmTools::None.union(some(&["bash"])), some(&["bash"]));
        assert_eq!(some(&["bash"]).union(ConfirmTools::None), some(&["bash"]));
        assert_eq!(
            some(&["bash"]).union(some(&["write", "bash"])),
            some(&["bash", "write"])
        );
        assert_eq!(ConfirmTools::All.as_rules(), ["*"]);
    }

    #[test]
    fn asks_without_a_host_say_what_asked() {
        assert_eq!(
            ask_without_host_text("bash", Some("bash"), true),
            denial_text("bash", Denial::NoUi)
        );
        assert_eq!(
            ask_without_host_text("bash", Some("bash(x *)"), false),
            "Tool call denied: bash needs confirmation (permission rule ask \"bash(x *)\") and no host can answer in this mode."
        );
        assert_eq!(
            ask_without_host_text("read", None, false),
            "Tool call denied: read needs confirmation (--permission-default ask) and no host can answer in this mode."
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
