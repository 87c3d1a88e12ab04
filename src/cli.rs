//! Command-line flags (lexopt), help text and exit codes.

use std::ffi::OsString;

use crate::compat::Compat;
use crate::message::ThinkingLevel;
use crate::rpc::event::Partials;

pub const EXIT_OK: i32 = 0;
/// A run in print/json mode ended with an error (provider error, abort).
pub const EXIT_FAILURE: i32 = 1;
/// Bad command line.
pub const EXIT_USAGE: i32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Rpc,
    Json,
    Print,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub mode: Mode,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<ThinkingLevel>,
    pub models: Vec<String>,
    pub no_session: bool,
    pub session_dir: Option<String>,
    pub session: Option<String>,
    pub continue_session: bool,
    pub api_key: Option<String>,
    pub system_prompt: Option<String>,
    pub append_system_prompt: Option<String>,
    /// `None` = the default tool set; `Some(list)` from `--tools` / `--no-tools`.
    pub tools: Option<Vec<String>>,
    pub faux_script: Option<String>,
    pub partials: Partials,
    /// `--compat`: which pi protocol version to emit (None = settings, else 0.73).
    pub compat: Option<Compat>,
    /// Positional arguments: the prompt in print/json mode.
    pub messages: Vec<String>,
    /// `@file` arguments (rejected in rpc mode).
    pub file_args: Vec<String>,
    /// `--export <session.jsonl>`: export that file to HTML (output: the first message) and exit.
    pub export: Option<String>,
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Box<Options>),
    Help,
    Version,
}

pub const HELP: &str = "\
pith — a headless coding agent speaking the pi RPC protocol

USAGE:
    pith --mode rpc [OPTIONS]          JSON commands on stdin, responses and events on stdout
    pith -p [OPTIONS] \"prompt\"         print the final answer, exit
    pith --mode json [OPTIONS] \"prompt\" every event as a JSON line, exit

OPTIONS:
    --mode <rpc|json|print>        Mode (default: rpc, or print when a prompt is given)
    -p, --print                    Print mode
    --provider <name>              Provider of --model
    --model <pattern>              Model id, provider/id, fuzzy pattern; ':<level>' suffix sets thinking
    --thinking <level>             off, minimal, low, medium, high, xhigh
    --models <p1,p2,...>           Models for cycle_model (globs and ':<level>' allowed)
    --api-key <key>                API key for the selected model's provider (not persisted)
    --system-prompt <text|file>    Replace the system prompt
    --append-system-prompt <text|file>  Append to the system prompt
    --tools <a,b,...>              Tools to enable: read,bash,edit,write,grep,find,ls
    --no-tools                     Start without built-in tools
    --no-session                   Keep the session in memory only
    --session-dir <dir>            Directory for session files
    --session <path|id-prefix>     Open a session file
    -c, --continue                 Continue the most recent session of this directory
    --faux-script <file>           Script for the offline `faux` provider (see docs/faux.md)
    --rpc-partials <full|none>     message_update partial snapshots (default full)
    --compat <0.73|0.87>           pi protocol version to speak (default 0.73; settings pith.compat)
    --export <file> [out.html]     Export a session file to HTML and exit
    -h, --help                     Show this help
    -v, --version                  Show the version

ENVIRONMENT:
    PI_CODING_AGENT_DIR            Config dir (default ~/.pi/agent): settings.json, models.json, auth.json, sessions/
    ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...   Provider API keys

EXIT CODES:
    0 success / stdin closed, 1 run failed (print/json), 2 bad command line, 128+N killed by signal N
";

fn value(parser: &mut lexopt::Parser, flag: &str) -> Result<String, String> {
    let v: OsString = parser
        .value()
        .map_err(|_| format!("{flag} requires a value"))?;
    v.into_string()
        .map_err(|_| format!("{flag}: value is not valid UTF-8"))
}

fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut mode: Option<Mode> = None;
    let mut o = Options {
        mode: Mode::Rpc,
        provider: None,
        model: None,
        thinking: None,
        models: Vec::new(),
        no_session: false,
        session_dir: None,
        session: None,
        continue_session: false,
        api_key: None,
        system_prompt: None,
        append_system_prompt: None,
        tools: None,
        faux_script: None,
        partials: Partials::Full,
        compat: None,
        messages: Vec::new(),
        file_args: Vec::new(),
        export: None,
    };
    let mut no_tools = false;
    let mut tools: Option<Vec<String>> = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("mode") => {
                let v = value(&mut p, "--mode")?;
                mode = Some(match v.as_str() {
                    "rpc" => Mode::Rpc,
                    "json" => Mode::Json,
                    "print" | "text" => Mode::Print,
                    other => {
                        return Err(format!(
                            "--mode: unknown mode '{other}' (expected rpc, json or print)"
                        ));
                    }
                });
            }
            Short('p') | Long("print") => mode = Some(Mode::Print),
            Long("provider") => o.provider = Some(value(&mut p, "--provider")?),
            Long("model") => o.model = Some(value(&mut p, "--model")?),
            Long("thinking") => {
                let v = value(&mut p, "--thinking")?;
                o.thinking = Some(ThinkingLevel::parse(&v).ok_or_else(|| {
                    format!("--thinking: unknown level '{v}' (expected off, minimal, low, medium, high, xhigh)")
                })?);
            }
            Long("models") => o.models = comma_list(&value(&mut p, "--models")?),
            Long("no-session") => o.no_session = true,
            Long("session-dir") => o.session_dir = Some(value(&mut p, "--session-dir")?),
            Long("session") => o.session = Some(value(&mut p, "--session")?),
            Short('c') | Long("continue") => o.continue_session = true,
            Long("api-key") => o.api_key = Some(value(&mut p, "--api-key")?),
            Long("system-prompt") => o.system_prompt = Some(value(&mut p, "--system-prompt")?),
            Long("append-system-prompt") => {
                o.append_system_prompt = Some(value(&mut p, "--append-system-prompt")?)
            }
            Long("tools") => tools = Some(comma_list(&value(&mut p, "--tools")?)),
            Long("no-tools") => no_tools = true,
            Long("faux-script") => o.faux_script = Some(value(&mut p, "--faux-script")?),
            Long("rpc-partials") => {
                o.partials = match value(&mut p, "--rpc-partials")?.as_str() {
                    "full" => Partials::Full,
                    "none" => Partials::None,
                    other => {
                        return Err(format!(
                            "--rpc-partials: unknown value '{other}' (expected full or none)"
                        ));
                    }
                }
            }
            Long("compat") => {
                let v = value(&mut p, "--compat")?;
                o.compat = Some(Compat::parse(&v).ok_or_else(|| {
                    format!("--compat: unknown version '{v}' (expected 0.73 or 0.87)")
                })?);
            }
            Long("export") => o.export = Some(value(&mut p, "--export")?),
            Long("offline") => {}
            Short('h') | Long("help") => return Ok(Parsed::Help),
            Short('v') | Long("version") => return Ok(Parsed::Version),
            Value(v) => {
                let v = v
                    .into_string()
                    .map_err(|_| "argument is not valid UTF-8".to_string())?;
                if let Some(file) = v.strip_prefix('@') {
                    o.file_args.push(file.to_string());
                } else {
                    o.messages.push(v);
                }
            }
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    o.tools = match (no_tools, tools) {
        (true, t) => Some(t.unwrap_or_default()),
        (false, t) => t,
    };
    o.mode = mode.unwrap_or(if o.messages.is_empty() {
        Mode::Rpc
    } else {
        Mode::Print
    });
    Ok(Parsed::Run(Box::new(o)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, String> {
        match parse(args.iter().map(OsString::from))? {
            Parsed::Run(o) => Ok(*o),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn flags() {
        let o = run(&[
            "--mode",
            "rpc",
            "--provider",
            "fake",
            "--model",
            "m:high",
            "--no-session",
            "--tools",
            "read, ls",
        ])
        .unwrap();
        assert_eq!(o.mode, Mode::Rpc);
        assert_eq!(o.model.as_deref(), Some("m:high"));
        assert!(o.no_session);
        assert_eq!(o.tools, Some(vec!["read".to_string(), "ls".to_string()]));
        assert_eq!(run(&["-p", "hi"]).unwrap().mode, Mode::Print);
        assert_eq!(run(&["hi"]).unwrap().mode, Mode::Print);
        assert_eq!(run(&["--no-tools"]).unwrap().tools, Some(vec![]));
        assert_eq!(
            run(&["--compat", "0.87"]).unwrap().compat,
            Some(Compat::V087)
        );
        assert_eq!(run(&[]).unwrap().compat, None);
        let o = run(&["--export", "s.jsonl", "out.html"]).unwrap();
        assert_eq!(o.export.as_deref(), Some("s.jsonl"));
        assert_eq!(o.messages, vec!["out.html".to_string()]);
    }

    #[test]
    fn errors() {
        assert!(run(&["--bogus"]).unwrap_err().contains("--bogus"));
        assert!(run(&["--mode", "tui"]).is_err());
        assert!(run(&["--thinking", "max"]).is_err());
        assert!(run(&["--model"]).is_err());
        assert!(run(&["--compat", "1.0"]).is_err());
        assert!(run(&["--export"]).is_err());
    }
}
