//! The system prompt, built like the reference's (spec 18, 0.73 wording): identity, tool list,
//! guidelines, appended text, project context files (`AGENTS.md` / `CLAUDE.md`), date and cwd.
//! The reference's "Pi documentation" block (paths of its installed docs) is left out: pith ships
//! no docs tree to point at (listed in docs/rpc.md).

pub mod sections;

use std::path::{Path, PathBuf};

/// Inputs that decide the prompt. Built once per run from CLI, config dir and cwd.
pub struct PromptInputs<'a> {
    pub cwd: &'a Path,
    pub agent_dir: &'a Path,
    /// `(name, one-liner)` of each active tool, in order.
    pub tools: &'a [(&'a str, &'a str)],
    /// The guidelines of the active extension tools (their `promptGuidelines`), in tool order.
    pub guidelines: &'a [&'a str],
    pub custom: Option<&'a str>,
    pub append: Option<&'a str>,
    /// The skills block (`resources::skills::format_for_prompt`), empty when none is listed.
    pub skills: &'a str,
    /// `--no-context-files`: leave `AGENTS.md` / `CLAUDE.md` out.
    pub no_context_files: bool,
    /// `YYYY-MM-DD` (UTC).
    pub date: &'a str,
}

/// `--system-prompt` / `--append-system-prompt` values: an existing file's contents, else the
/// text. A file that cannot be read is a warning and the text is used, as pi does; a device,
/// FIFO or directory is not read (pi would read `/dev/zero` without end), nor a file over
/// [`crate::files::MAX_TEXT_FILE`].
pub fn file_or_literal(v: &str, cwd: &Path, description: &str) -> String {
    let p = cwd.join(v);
    if std::fs::symlink_metadata(&p).is_err() {
        return v.to_string();
    }
    match crate::files::read_bytes(&p, crate::files::MAX_TEXT_FILE) {
        // Invalid UTF-8 replaced, as node's `readFileSync(…, "utf-8")`.
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            let why = match e {
                crate::files::ReadError::NotFound => return v.to_string(),
                crate::files::ReadError::NotAFile => "not a regular file".to_string(),
                crate::files::ReadError::TooLarge => format!(
                    "larger than {} MiB",
                    crate::files::MAX_TEXT_FILE / (1024 * 1024)
                ),
                crate::files::ReadError::Io(e) => e.to_string(),
            };
            eprintln!("Warning: Could not read {description} file {v}: {why}");
            v.to_string()
        }
    }
}

fn read_first(paths: &[PathBuf]) -> Option<String> {
    paths
        .iter()
        .find_map(|p| crate::files::read_text_or_warn(p))
}

/// The candidates for `name`: the project's `.pi/<name>` (when the project is trusted, see
/// [`crate::trust`]), then the config dir's.
fn candidates(name: &str, cwd: &Path, agent_dir: &Path, trusted: bool) -> Vec<PathBuf> {
    let project = trusted.then(|| cwd.join(".pi").join(name));
    project.into_iter().chain([agent_dir.join(name)]).collect()
}

/// Custom prompt: the CLI value, else `.pi/SYSTEM.md` in cwd, else `SYSTEM.md` in the config dir.
pub fn custom_prompt(
    cli: Option<&str>,
    cwd: &Path,
    agent_dir: &Path,
    trusted: bool,
) -> Option<String> {
    match cli {
        Some(v) => Some(file_or_literal(v, cwd, "system prompt")),
        None => read_first(&candidates("SYSTEM.md", cwd, agent_dir, trusted)),
    }
}

/// Appended text: the CLI value, else `.pi/APPEND_SYSTEM.md` in cwd, else in the config dir.
pub fn append_prompt(
    cli: Option<&str>,
    cwd: &Path,
    agent_dir: &Path,
    trusted: bool,
) -> Option<String> {
    match cli {
        Some(v) => Some(file_or_literal(v, cwd, "append system prompt")),
        None => read_first(&candidates("APPEND_SYSTEM.md", cwd, agent_dir, trusted)),
    }
}

/// Every `--append-system-prompt` value (each a file or text) joined with blank lines, as pi
/// joins them; without any, [`append_prompt`]'s files.
pub fn append_prompts(
    cli: &[String],
    cwd: &Path,
    agent_dir: &Path,
    trusted: bool,
) -> Option<String> {
    if cli.is_empty() {
        return append_prompt(None, cwd, agent_dir, trusted);
    }
    Some(
        cli.iter()
            .map(|v| file_or_literal(v, cwd, "append system prompt"))
            .collect::<Vec<_>>()
            .join("\n\n"),
    )
}

/// Context files: the global one, then one per directory from `/` down to cwd.
pub fn context_files(cwd: &Path, agent_dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let pick = |dir: &Path| -> Option<(PathBuf, String)> {
        ["AGENTS.md", "CLAUDE.md"].iter().find_map(|n| {
            let p = dir.join(n);
            crate::files::read_text_or_warn(&p).map(|c| (p, c))
        })
    };
    if let Some(f) = pick(agent_dir) {
        out.push(f);
    }
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for d in dirs {
        if let Some(f) = pick(d) {
            if !out.iter().any(|(p, _)| *p == f.0) {
                out.push(f);
            }
        }
    }
    out
}

/// Today's UTC date as `YYYY-MM-DD`.
pub fn utc_date() -> String {
    let days = (crate::message::now_ms() / 86_400_000) as i64;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Per-tool guidelines (the tools' `promptGuidelines` in pi 0.73.1).
fn tool_guidelines(name: &str) -> &'static [&'static str] {
    match name {
        "read" => &["Use read to examine files instead of cat or sed."],
        "edit" => &[
            "Use edit for precise changes (edits[].oldText must match exactly)",
            "When changing multiple separate locations in one file, use one edit call with multiple entries in edits[] instead of multiple edit calls",
            "Each edits[].oldText is matched against the original file, not after earlier edits are applied. Do not emit overlapping or nested edits. Merge nearby changes into one edit.",
            "Keep edits[].oldText as small as possible while still being unique in the file. Do not pad with large unchanged regions.",
        ],
        "write" => &["Use write only for new files or complete rewrites."],
        _ => &[],
    }
}

/// The guideline bullets: file exploration, each tool's own (in tool order), then the two that
/// are always there; duplicates dropped.
fn guidelines<'a>(tools: &[(&str, &str)], remote: &[&'a str]) -> Vec<&'a str> {
    let has = |n: &str| tools.iter().any(|(t, _)| *t == n);
    let mut g: Vec<&'a str> = Vec::new();
    let explore = has("grep") || has("find") || has("ls");
    if has("bash") && !explore {
        g.push("Use bash for file operations like ls, rg, find");
    } else if has("bash") {
        g.push("Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)");
    }
    let always = [
        "Be concise in your responses",
        "Show file paths clearly when working with files",
    ];
    for line in tools
        .iter()
        .flat_map(|(t, _)| tool_guidelines(t))
        .copied()
        .chain(remote.iter().copied())
        .chain(always)
    {
        if !g.contains(&line) {
            g.push(line);
        }
    }
    g
}

pub fn build(i: &PromptInputs<'_>) -> String {
    let mut s = String::new();
    match i.custom {
        Some(c) => s.push_str(c),
        None => {
            s.push_str(
                "You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, executing commands, editing code, and writing new files.\n\nAvailable tools:\n",
            );
            if i.tools.is_empty() {
                s.push_str("(none)\n");
            }
            for (name, line) in i.tools {
                s.push_str(&format!("- {name}: {line}\n"));
            }
            s.push_str(
                "\nIn addition to the tools above, you may have access to other custom tools depending on the project.\n\nGuidelines:\n",
            );
            let g = guidelines(i.tools, i.guidelines);
            s.push_str(
                &g.iter()
                    .map(|l| format!("- {l}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
    }
    if let Some(a) = i.append {
        s.push_str("\n\n");
        s.push_str(a);
    }
    let files = if i.no_context_files {
        Vec::new()
    } else {
        context_files(i.cwd, i.agent_dir)
    };
    if !files.is_empty() {
        s.push_str("\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n");
        for (p, c) in files {
            s.push_str(&format!("## {}\n\n{}\n\n", p.display(), c));
        }
    }
    s.push_str(i.skills);
    s.push_str(&format!("\nCurrent date: {}", i.date));
    s.push_str(&format!(
        "\nCurrent working directory: {}",
        i.cwd.display().to_string().replace('\\', "/")
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_prompt_with_the_four_default_tools() {
        let d = tempfile::tempdir().unwrap();
        let tools = [
            ("read", "Read file contents"),
            ("bash", "Execute bash commands (ls, grep, find, etc.)"),
            (
                "edit",
                "Make precise file edits with exact text replacement, including multiple disjoint edits in one call",
            ),
            ("write", "Create or overwrite files"),
        ];
        let p = build(&PromptInputs {
            cwd: d.path(),
            agent_dir: d.path(),
            tools: &tools,
            guidelines: &[],
            custom: None,
            append: None,
            skills: "",
            no_context_files: false,
            date: "2026-11-21",
        });
        assert!(p.starts_with("You are an expert coding assistant operating inside pi"));
        assert!(p.contains("Available tools:\n- read: Read file contents\n- bash: "));
        assert!(p.contains(
            "- Use write only for new files or complete rewrites.\n- Be concise in your responses\n- Show file paths clearly when working with files\nCurrent date: 2026-11-21\nCurrent working directory: "
        ));
    }

    #[test]
    fn context_files_global_first_then_root_down_to_cwd() {
        let d = tempfile::tempdir().unwrap();
        let agent = d.path().join("agent");
        let proj = d.path().join("proj");
        let sub = proj.join("sub");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(agent.join("AGENTS.md"), "global").unwrap();
        std::fs::write(proj.join("CLAUDE.md"), "project").unwrap();
        std::fs::write(sub.join("AGENTS.md"), "sub").unwrap();
        std::fs::write(sub.join("CLAUDE.md"), "ignored: AGENTS.md wins").unwrap();
        let files = context_files(&sub, &agent);
        let texts: Vec<&str> = files.iter().map(|(_, c)| c.as_str()).collect();
        assert_eq!(texts, ["global", "project", "sub"]);
        let p = build(&PromptInputs {
            cwd: &sub,
            agent_dir: &agent,
            tools: &[],
            guidelines: &[],
            custom: Some("Custom."),
            append: Some("Appended."),
            skills: "",
            no_context_files: false,
            date: "2026-01-02",
        });
        assert!(p.starts_with("Custom.\n\nAppended.\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n## "));
        assert!(p.contains("/sub/AGENTS.md\n\nsub\n\n"));
        assert!(p.ends_with(&format!(
            "\nCurrent date: 2026-01-02\nCurrent working directory: {}",
            sub.display()
        )));
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_413), (2025, 11, 21));
    }
}
