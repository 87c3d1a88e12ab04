//! Names and one-line summaries of MCP servers and tools as pi 1.6.0 shows them to the model
//! (pure): tool names, namespaces, server summaries and the `mcp_servers` prompt section.

use ring::digest;

/// Provider tool names are at most 64 characters.
const MAX_TOOL_NAME: usize = 64;

/// `mcp__<server>__<tool>` with every character but `[A-Za-z0-9_]` as `_` (so a script can call
/// it by that name too). A name longer than 64 characters, or one `taken` by another MCP tool
/// (sanitizing maps `a-b` and `a_b` together), is cut and given an 8-digit hash of server and
/// tool.
pub fn tool_name(server: &str, tool: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let name: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.chars().count() <= MAX_TOOL_NAME && !taken(&name) {
        return name;
    }
    let mut input = Vec::with_capacity(server.len() + tool.len() + 1);
    input.extend_from_slice(server.as_bytes());
    input.push(0);
    input.extend_from_slice(tool.as_bytes());
    let d = digest::digest(&digest::SHA256, &input);
    let hash: String = d.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
    // The name is ASCII: a byte index is a character index.
    let keep = MAX_TOOL_NAME - hash.len() - 1;
    format!("{}_{hash}", &name[..name.len().min(keep)])
}

/// A server's namespace: `mcp__<server>` with `-` as `_`.
pub fn namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

/// The first line of the configured description, else of the server's `instructions`.
pub fn summary(description: Option<&str>, instructions: Option<&str>) -> String {
    let text = description
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .or_else(|| instructions.map(str::trim))
        .unwrap_or("");
    text.split('\n').next().unwrap_or("").trim().to_string()
}

/// How the model reaches a listed server's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    Codemode,
    ToolSearch,
}

impl Reach {
    fn as_str(self) -> &'static str {
        match self {
            Reach::Codemode => "codemode",
            Reach::ToolSearch => "tool_search",
        }
    }
}

/// One server of the section: its name, how it is reached, its summary.
pub struct Listed<'a> {
    pub name: &'a str,
    pub reach: Reach,
    pub summary: String,
}

const MAX_DESCRIPTION_CHARS: usize = 250;
const MAX_SECTION_CHARS: usize = 4096;

/// The `mcp_servers` section (without its tags): servers sorted by name, each with how it is
/// reached and its summary, descriptions shortened so the section stays within 4096
/// characters (servers that still do not fit are counted in a last line). None without servers.
pub fn servers_section(mut listed: Vec<Listed>) -> Option<String> {
    if listed.is_empty() {
        return None;
    }
    listed.sort_by(|a, b| compare_names(a.name, b.name));
    let mut intro = String::from("MCP servers whose tools are not declared to you.");
    if listed.iter().any(|l| l.reach == Reach::Codemode) {
        intro.push_str(" Call the tools of `codemode` servers from codemode scripts.");
    }
    if listed.iter().any(|l| l.reach == Reach::ToolSearch) {
        intro.push_str(" Load the tools of `tool_search` servers with `tool_search`.");
    }
    let heads: Vec<String> = listed
        .iter()
        .map(|l| format!("- {} ({})", namespace(l.name), l.reach.as_str()))
        .collect();
    let omitted = |n: usize| -> Vec<String> {
        if n == 0 {
            Vec::new()
        } else {
            let s = if n == 1 { "" } else { "s" };
            vec![format!(
                "- … {n} more server{s}; find their tools with searchTools()"
            )]
        }
    };
    let size = |kept: usize| -> usize {
        let mut parts: Vec<&str> = vec![&intro];
        parts.extend(heads[..kept].iter().map(String::as_str));
        let o = omitted(listed.len() - kept);
        let extra: usize = o.iter().map(|x| x.chars().count() + 1).sum();
        parts.iter().map(|p| p.chars().count()).sum::<usize>() + parts.len() - 1 + extra
    };
    let mut kept = listed.len();
    while kept > 0 && size(kept) > MAX_SECTION_CHARS {
        kept -= 1;
    }
    let per_server = match MAX_SECTION_CHARS
        .saturating_sub(size(kept))
        .checked_div(kept)
    {
        Some(room) => MAX_DESCRIPTION_CHARS.min(room.saturating_sub(2)),
        None => 0,
    };
    let mut lines = vec![intro.clone()];
    for (l, head) in listed.iter().zip(&heads).take(kept) {
        let summary = if per_server > 0 {
            shorten(&l.summary, per_server)
        } else {
            String::new()
        };
        if summary.is_empty() {
            lines.push(head.clone());
        } else {
            lines.push(format!("{head}: {summary}"));
        }
    }
    lines.extend(omitted(listed.len() - kept));
    Some(lines.join("\n"))
}

/// `text` in at most `max` characters, an ellipsis marking a cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max <= 1 {
        return String::new();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{}…", head.trim_end())
}

/// Server names compared as JavaScript's `localeCompare` orders plain ASCII names: letters
/// case-insensitively first, punctuation before digits before letters.
fn compare_names(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |s: &str| -> Vec<(u8, u8)> {
        s.bytes()
            .map(|c| {
                let class = if c.is_ascii_alphabetic() {
                    2
                } else if c.is_ascii_digit() {
                    1
                } else {
                    0
                };
                (class, c.to_ascii_lowercase())
            })
            .collect()
    };
    key(a).cmp(&key(b)).then_with(|| b.cmp(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(tool_name("echo", "echo", &|_| false), "mcp__echo__echo");
        assert_eq!(
            tool_name("my-srv", "get.x", &|_| false),
            "mcp__my_srv__get_x"
        );
        let taken = tool_name("a", "b-c", &|n| n == "mcp__a__b_c");
        assert!(
            taken.starts_with("mcp__a__b_c_") && taken.len() == 20,
            "{taken}"
        );
        let long = tool_name("s", &"x".repeat(80), &|_| false);
        assert_eq!(long.len(), 64);
        assert_eq!(namespace("dev-radius"), "mcp__dev_radius");
    }

    #[test]
    fn summaries_and_section() {
        assert_eq!(summary(Some("  Echo tools\nmore"), Some("x")), "Echo tools");
        assert_eq!(summary(Some(" "), Some("Use me.\nno")), "Use me.");
        assert_eq!(summary(None, None), "");
        let s = servers_section(vec![
            Listed {
                name: "zeta",
                reach: Reach::ToolSearch,
                summary: String::new(),
            },
            Listed {
                name: "echo",
                reach: Reach::Codemode,
                summary: "Echo test tools".into(),
            },
        ])
        .unwrap();
        assert_eq!(
            s,
            "MCP servers whose tools are not declared to you. Call the tools of `codemode` servers from codemode scripts. Load the tools of `tool_search` servers with `tool_search`.\n- mcp__echo (codemode): Echo test tools\n- mcp__zeta (tool_search)"
        );
        assert!(servers_section(Vec::new()).is_none());
        let many: Vec<Listed> = (0..300)
            .map(|i| Listed {
                name: Box::leak(format!("server{i:03}").into_boxed_str()),
                reach: Reach::Codemode,
                summary: "x".repeat(300),
            })
            .collect();
        let s = servers_section(many).unwrap();
        assert!(s.chars().count() <= 4096, "{}", s.len());
        assert!(s.ends_with("more servers; find their tools with searchTools()"));
    }
}
