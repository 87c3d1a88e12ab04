//! Command-line flags (lexopt), help text and exit codes.

use std::ffi::OsString;

use crate::message::ThinkingLevel;
use crate::protocol::Version;
use crate::rpc::event::Partials;

/// pith's exit codes (the same in print and json modes; `--help` and README list them). A
/// signal ends pith with 128 + its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    Ok = 0,
    /// The run ended in an error (provider error, abort).
    Failure = 1,
    /// Bad usage or configuration.
    Usage = 2,
    /// A turn, tool-call, cost or repeat limit ended the run.
    Limit = 3,
    /// The deadline ended the run.
    Deadline = 4,
    /// The requested sandbox is unavailable.
    SandboxUnavailable = 5,
    /// The structured output did not validate against its schema.
    OutputSchema = 6,
}

impl ExitCode {
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The exit code of a run that this limit ended.
    pub fn of_limit(kind: crate::limits::Kind) -> ExitCode {
        match kind {
            crate::limits::Kind::Deadline => ExitCode::Deadline,
            _ => ExitCode::Limit,
        }
    }
}

pub const EXIT_OK: i32 = ExitCode::Ok.code();
/// A run in print/json mode ended with an error (provider error, abort).
pub const EXIT_FAILURE: i32 = ExitCode::Failure.code();
/// Bad command line.
pub const EXIT_USAGE: i32 = ExitCode::Usage.code();
/// The requested sandbox is unavailable (no Landlock, or not the ABI the mode needs; a malformed
/// `pith.sandbox` setting): pith refuses to start unless `--sandbox-fallback warn`.
pub const EXIT_SANDBOX: i32 = ExitCode::SandboxUnavailable.code();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Rpc,
    Json,
    Print,
    /// The Agent Client Protocol (JSON-RPC 2.0 on stdio; `src/acp/`, docs/acp.md).
    Acp,
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
    /// `--append-system-prompt`, once per use (each a file or text; joined with blank lines).
    pub append_system_prompt: Vec<String>,
    /// `None` = the default tool set; `Some(list)` from `--tools` / `--no-tools`.
    pub tools: Option<Vec<String>>,
    /// The `--tools` list as given (pi 1.6.0 reads `+name` / `-name` entries and patterns in it).
    pub tools_arg: Option<Vec<String>>,
    /// `--no-tools` or `--no-builtin-tools`: the default set is empty.
    pub no_tools_base: bool,
    /// `--no-builtin-tools` / `-nbt`: no built-in tool unless `--tools` names it.
    pub no_builtin_tools: bool,
    /// `--no-context-files` / `-nc`: no `AGENTS.md` / `CLAUDE.md` in the system prompt.
    pub no_context_files: bool,
    /// `--fork <path|id>`: start from a copy of that session.
    pub fork: Option<String>,
    /// `--list-models [search]`: print the available models and exit.
    pub list_models: Option<Option<String>>,
    /// `--verbose`: start-up details on stderr.
    pub verbose: bool,
    /// One line each for flags pi has that mean nothing without a terminal (printed on stderr).
    pub warnings: Vec<String>,
    pub faux_script: Option<String>,
    pub partials: Partials,
    /// `--compat`: which pi protocol version to emit (None = settings, else 0.73).
    pub version: Option<Version>,
    /// `--session-id`: the exact id of the session to open or create (pi 0.77).
    pub session_id: Option<String>,
    /// `--name` / `-n`: the session's display name from the start (pi 0.78).
    pub name: Option<String>,
    /// `--exclude-tools` / `-xt`: tools left out of the active set (pi 0.77).
    pub exclude_tools: Vec<String>,
    /// `--approve` (`Some(true)`) / `--no-approve` (`Some(false)`): project trust for this run.
    pub approve: Option<bool>,
    /// Positional arguments: the prompt in print/json mode.
    pub messages: Vec<String>,
    /// `@file` arguments (rejected in rpc mode).
    pub file_args: Vec<String>,
    /// `--export <session.jsonl>`: export that file to HTML (output: the first message) and exit.
    pub export: Option<String>,
    /// `-e/--extension PATH` (repeatable).
    pub extensions: Vec<String>,
    /// `--no-extensions` / `-ne`: no extensions from settings (`-e` ones still load).
    pub no_extensions: bool,
    /// Long flags pith does not know, for pi's extensions (`pi.registerFlag`), in order, each
    /// name once (the last value wins, in the first one's place): `--name=value`, `--name value` (the next argument when
    /// it does not start with `-` or `@`), or `--name` alone (`None`). Without a pi extension to
    /// register them they are `Unknown option` errors ([`unknown_flags_error`]).
    pub extension_flags: Vec<(String, Option<String>)>,
    /// `--no-mcp`: no MCP servers.
    pub no_mcp: bool,
    /// `--confirm-tools TOOLS` (comma list or `all`).
    pub confirm_tools: Option<String>,
    /// `--confirm-timeout SECONDS` (0 = no limit).
    pub confirm_timeout: Option<u64>,
    /// `--allow RULE` / `--ask RULE` / `--deny RULE` (repeatable), in order: permission rules.
    pub permission_rules: Vec<(crate::perms::rules::Level, String)>,
    /// `--permission-default ask|allow|deny`.
    pub permission_default: Option<crate::perms::rules::Level>,
    /// `--skill` paths (repeatable; loaded even with `--no-skills`).
    pub skills: Vec<String>,
    /// `--no-skills` / `-ns`: no discovery, no settings entries.
    pub no_skills: bool,
    /// `--prompt-template` paths (repeatable).
    pub prompt_templates: Vec<String>,
    /// `--no-prompt-templates` / `-np`.
    pub no_prompt_templates: bool,
    /// `--max-turns`, `--max-tool-calls`, `--max-cost`, `--deadline`, `--max-repeats`: run limits
    /// of every prompt (over settings `pith.limits`; a prompt's `limits` over these).
    pub limits: crate::limits::Limits,
    /// `--result-file PATH`: print/json modes write the result record there (atomically).
    pub result_file: Option<String>,
    /// `--output-schema FILE`: every prompt's final answer is a JSON value of this schema
    /// (`output_schema.rs`; a prompt's `outputSchema` over it).
    pub output_schema: Option<String>,
    /// `--heartbeat SECONDS`: a `heartbeat` event this often while a run is active.
    pub heartbeat: Option<std::time::Duration>,
    /// `--heartbeat-file PATH`: touch this file instead of the event.
    pub heartbeat_file: Option<String>,
    /// `--sandbox MODE` and `--sandbox-fallback warn|fail` (src/sandbox.rs).
    pub sandbox: crate::sandbox::CliSandbox,
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Box<Options>),
    Help,
    Version,
    /// One of pi's own commands (`pi install`, `pi list`, `pi config`, `pi auth` ...): pith has
    /// none of them; the text says so.
    PiCommand(String),
    /// A command line pi refuses with this message (e.g. pi 0.87.1's `Error: Invalid mode
    /// "tui". Valid values: text, json, rpc`): printed on stderr, exit 1 as pi.
    Refused(String),
    /// `pith schema [--compat VERSION]`: print the protocol's JSON Schema (`schema.rs`).
    Schema(Version),
}

/// pi's subcommands (its package manager, config TUI and 0.87's `auth`), recognised as the first
/// argument as pi does, so `pith list` is not taken for a prompt.
const PI_COMMANDS: &[&str] = &[
    "install",
    "remove",
    "uninstall",
    "update",
    "list",
    "config",
    "auth",
];

/// pi's multi-letter short options, spelled out before lexopt reads them (it would take `-nt`
/// for `-n -t`).
const MULTI_LETTER_SHORT: &[(&str, &str)] = &[
    ("-xt", "--exclude-tools"),
    ("-na", "--no-approve"),
    ("-nt", "--no-tools"),
    ("-nbt", "--no-builtin-tools"),
    ("-nc", "--no-context-files"),
    ("-ne", "--no-extensions"),
    ("-ns", "--no-skills"),
    ("-np", "--no-prompt-templates"),
];

/// Options that take a value (so a value that looks like `-nt` is left alone).
const TAKES_VALUE: &[&str] = &[
    "--session-id",
    "--name",
    "-n",
    "--exclude-tools",
    "--mode",
    "--provider",
    "--model",
    "--thinking",
    "--models",
    "--session-dir",
    "--session",
    "--fork",
    "--api-key",
    "--system-prompt",
    "--append-system-prompt",
    "--tools",
    "-t",
    "--faux-script",
    "--rpc-partials",
    "--compat",
    "--theme",
    "--use-theme",
    "--tui-mode",
    "-e",
    "--extension",
    "--confirm-tools",
    "--confirm-timeout",
    "--allow",
    "--ask",
    "--deny",
    "--permission-default",
    "--skill",
    "--prompt-template",
    "--max-turns",
    "--max-tool-calls",
    "--max-cost",
    "--deadline",
    "--max-repeats",
    "--result-file",
    "--output-schema",
    "--heartbeat",
    "--heartbeat-file",
    "--sandbox",
    "--sandbox-fallback",
];

fn spell_out_short_options(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut value_next = false;
    let mut rest = false;
    for a in args {
        let s = a.to_str();
        if rest || value_next {
            value_next = false;
            out.push(a);
            continue;
        }
        if s == Some("--") {
            rest = true;
        } else if let Some((_, long)) = MULTI_LETTER_SHORT
            .iter()
            .find(|(short, _)| Some(*short) == s)
        {
            out.push(OsString::from(long));
            continue;
        }
        value_next = s.is_some_and(|s| TAKES_VALUE.contains(&s));
        out.push(a);
    }
    out
}

/// A flag pi has for its terminal UI: accepted, with one warning line.
fn terminal_only(flag: &str, what: &str) -> String {
    format!("Warning: {flag} {what}; pith has no terminal UI, ignored")
}

pub const HELP: &str = "\
pith — a headless coding agent speaking the pi RPC protocol

USAGE:
    pith --mode rpc [OPTIONS]          JSON commands on stdin, responses and events on stdout
    pith -p [OPTIONS] \"prompt\"         print the final answer, exit
    pith --mode json [OPTIONS] \"prompt\" every event as a JSON line, exit
    pith --mode acp [OPTIONS]          the Agent Client Protocol (editors: Zed, JetBrains, ...)

USAGE (print and json modes):
    pith -p [OPTIONS] [@files...] [messages...]
    Piped stdin, the @files and the first message make the first prompt (in that order, as pi);
    each further message is sent as its own prompt after the previous run.

OPTIONS:
    --mode <rpc|json|print|text|acp> Mode (default: rpc, or print when a prompt is given)
    -p, --print                    Print mode
    --provider <name>              Provider of --model
    --model <pattern>              Model id, provider/id, fuzzy pattern; ':<level>' suffix sets thinking
    --thinking <level>             off, minimal, low, medium, high, xhigh, max
    --models <p1,p2,...>           Models for cycle_model (globs and ':<level>' allowed)
    --list-models [search]         List the available models (fuzzy search) and exit
    --api-key <key>                API key for the selected model's provider (not persisted)
    --system-prompt <text|file>    Replace the system prompt
    --append-system-prompt <text|file>  Append to the system prompt (repeatable)
    --no-context-files, -nc        No AGENTS.md / CLAUDE.md in the system prompt
    --tools, -t <a,b,...>          Tools to enable: read,bash,edit,write,grep,find,ls
    --no-tools, -nt                Start without tools
    --no-builtin-tools, -nbt       Start without built-in tools (--tools still adds some)
    --no-session                   Keep the session in memory only
    --session-dir <dir>            Directory for session files
    --session <path|id-prefix>     Open a session file (a new one at a path that does not exist)
    --fork <path|id-prefix>        Start a new session from a copy of that session
    -c, --continue                 Continue the most recent session of this directory
    --verbose                      Start-up details (model, session, context files, tools) on stderr
    --offline                      Accepted (pith makes no start-up network requests)
    --faux-script <file>           Script for the offline `faux` provider (see docs/faux.md)
    --rpc-partials <full|none>     message_update partial snapshots (default full)
    --session-id <id>              Open the session with this exact id, or create it with that id
    -n, --name <name>              Session name (a session_info entry first)
    -xt, --exclude-tools <a,b,...> Tools to leave out of the active set
    -a, --approve                  Trust project-local files (.pi/settings.json, SYSTEM.md, ...)
    -na, --no-approve              Ignore project-local files for this run
    --compat <0.73|0.87>           pi protocol version to speak (default 0.73; settings pith.compat)
    --max-turns <n>                At most n LLM requests per run (settings pith.limits.maxTurns)
    --max-tool-calls <n>           At most n tool calls per run (pith.limits.maxToolCalls)
    --max-cost <usd>               End the run once its cost reaches this (pith.limits.maxCostUsd)
    --deadline <seconds>           Abort the run after this wall-clock time (pith.limits.deadlineMs)
    --max-repeats <n>              The same tool call n times in a row ends the run (maxRepeats)
    --result-file <path>           Print/json modes: write the result record there (atomically)
    --output-schema <file>         The final answer is JSON matching this JSON Schema (exit 6 if not)
    --heartbeat <seconds>          A heartbeat event this often while a run is active
    --heartbeat-file <path>        Touch this file instead (every --heartbeat seconds, default 10)
    --export <file> [out.html]     Export a session file to HTML and exit
    -e, --extension <path>         Load an extension executable (repeatable; docs/extensions.md)
    -ne, --no-extensions           No extensions from settings (-e ones still load)
    --no-mcp                       Start no MCP servers (settings mcpServers, .mcp.json)
    --confirm-tools <a,b|all>      Ask the host (extension_ui_request confirm) before these tools run
    --confirm-timeout <seconds>    How long that confirmation waits (default 60; 0 = no limit)
    --allow <rule>                 Permission rule TOOL or TOOL(PATTERN): run without asking (repeatable)
    --ask <rule>                   Permission rule: ask the host first (repeatable)
    --deny <rule>                  Permission rule: never run (repeatable; deny > ask > allow)
    --permission-default <level>   ask|allow|deny for calls no rule matches (docs/security.md)
    --skill <path>                 Load a skill file or directory (repeatable)
    -ns, --no-skills               No skill discovery (--skill paths still load)
    --prompt-template <path>       Load a prompt template file or directory (repeatable)
    -np, --no-prompt-templates     No prompt template discovery
    --sandbox <mode>               Confine tools with Landlock: off, read-only, workspace-write
                                   (settings pith.sandbox; exit 5 where the kernel cannot)
    --sandbox-fallback <warn|fail> warn: run unsandboxed (with a warning) where Landlock is missing
    --                             End of options: everything after is the prompt
    -h, --help                     Show this help
    -v, --version                  Show the version

    pi's terminal-UI flags (--resume/-r, --theme, --no-themes, --use-theme, --tui-mode) are
    accepted and ignored with a warning.

ENVIRONMENT:
    PI_CODING_AGENT_DIR            Config dir (default ~/.pi/agent): settings.json, models.json, auth.json, sessions/
    ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...   Provider API keys

EXIT CODES:
    0 success / stdin closed, 1 run failed (print/json),
    2 bad command line or configuration (unknown model or provider, no model with a key),
    3 a turn/tool-call/cost/repeat limit ended the run, 4 the deadline ended the run,
    5 the requested sandbox is unavailable, 6 the final answer did not match --output-schema,
    128+N killed by signal N

SUBCOMMANDS:
    pith schema [--compat <v>]     Print the JSON Schema (2020-12) of every command, response
                                   and event of that protocol version
";

fn value(parser: &mut lexopt::Parser, flag: &str) -> Result<String, String> {
    let v: OsString = parser
        .value()
        .map_err(|_| format!("{flag} requires a value"))?;
    v.into_string()
        .map_err(|_| format!("{flag}: value is not valid UTF-8"))
}

/// A whole number of at least `min` (the count limits).
fn count(parser: &mut lexopt::Parser, flag: &str, min: u64) -> Result<u64, String> {
    let v = value(parser, flag)?;
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= min)
        .ok_or_else(|| format!("{flag}: '{v}' is not a whole number of at least {min}"))
}

fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// `pith schema [--compat VERSION]`.
fn parse_schema(args: &[OsString]) -> Result<Parsed, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args.iter().cloned());
    let mut version = Version::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("compat") => {
                let v = value(&mut p, "--compat")?;
                version = Version::parse(&v).ok_or_else(|| {
                    format!("--compat: unknown version '{v}' (expected 0.73, 0.87, 1.6 or latest)")
                })?;
            }
            Short('h') | Long("help") => return Ok(Parsed::Help),
            other => return Err(format!("pith schema: {}", other.unexpected())),
        }
    }
    Ok(Parsed::Schema(version))
}

/// Long flags no extension can take (no pi extension is configured, or the run does not load
/// extensions: `--export`, `--list-models`, ACP): the usage error they were before extensions
/// could register flags, naming the first.
pub fn unknown_flags_error(flags: &[(String, Option<String>)]) -> Option<String> {
    flags.first().map(|(n, _)| format!("Unknown option: --{n}"))
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    use lexopt::prelude::*;
    let args: Vec<OsString> = args.into_iter().collect();
    if let Some(cmd) = args
        .first()
        .and_then(|a| a.to_str())
        .filter(|a| PI_COMMANDS.contains(a))
    {
        return Ok(Parsed::PiCommand(format!(
            "pith: `{cmd}` is a command of pi (its package manager, configuration UI and logins); pith has none. Run pi for it, or give the prompt as `pith -p \"{cmd} ...\"`."
        )));
    }
    if args.first().and_then(|a| a.to_str()) == Some("schema") {
        return parse_schema(&args[1..]);
    }
    let mut p = lexopt::Parser::from_args(spell_out_short_options(args));
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
        append_system_prompt: Vec::new(),
        tools: None,
        no_builtin_tools: false,
        tools_arg: None,
        no_tools_base: false,
        no_context_files: false,
        fork: None,
        list_models: None,
        verbose: false,
        warnings: Vec::new(),
        faux_script: None,
        partials: Partials::Full,
        version: None,
        session_id: None,
        name: None,
        exclude_tools: Vec::new(),
        approve: None,
        messages: Vec::new(),
        file_args: Vec::new(),
        export: None,
        extensions: Vec::new(),
        no_extensions: false,
        extension_flags: Vec::new(),
        no_mcp: false,
        confirm_tools: None,
        confirm_timeout: None,
        permission_rules: Vec::new(),
        permission_default: None,
        skills: Vec::new(),
        no_skills: false,
        prompt_templates: Vec::new(),
        no_prompt_templates: false,
        limits: Default::default(),
        result_file: None,
        output_schema: None,
        heartbeat: None,
        heartbeat_file: None,
        sandbox: Default::default(),
    };
    let mut no_tools = false;
    let mut resume = false;
    let mut tools: Option<Vec<String>> = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("mode") => {
                // pi 0.87.1's messages (0.73.1 ignores a bad value and starts its TUI, which
                // pith does not have).
                let requires =
                    || Parsed::Refused("Error: --mode requires text, json, or rpc".into());
                let Ok(v) = value(&mut p, "--mode") else {
                    return Ok(requires());
                };
                mode = Some(match v.as_str() {
                    "rpc" => Mode::Rpc,
                    "json" => Mode::Json,
                    "print" | "text" => Mode::Print,
                    "acp" => Mode::Acp,
                    v if v.starts_with('-') => return Ok(requires()),
                    other => {
                        return Ok(Parsed::Refused(format!(
                            "Error: Invalid mode \"{other}\". Valid values: text, json, rpc"
                        )));
                    }
                });
            }
            Short('p') | Long("print") => mode = Some(Mode::Print),
            Long("provider") => o.provider = Some(value(&mut p, "--provider")?),
            Long("model") => o.model = Some(value(&mut p, "--model")?),
            Long("thinking") => {
                let v = value(&mut p, "--thinking")?;
                // As pi: an unknown level is a warning and the flag is ignored.
                match ThinkingLevel::parse(&v) {
                    Some(l) => o.thinking = Some(l),
                    None => o.warnings.push(format!(
                        "Warning: Invalid thinking level \"{v}\". Valid values: off, minimal, low, medium, high, xhigh, max"
                    )),
                }
            }
            Long("models") => o.models = comma_list(&value(&mut p, "--models")?),
            Long("no-session") => o.no_session = true,
            Long("session-dir") => o.session_dir = Some(value(&mut p, "--session-dir")?),
            Long("session") => o.session = Some(value(&mut p, "--session")?),
            Short('c') | Long("continue") => o.continue_session = true,
            Long("api-key") => o.api_key = Some(value(&mut p, "--api-key")?),
            Long("system-prompt") => o.system_prompt = Some(value(&mut p, "--system-prompt")?),
            Long("append-system-prompt") => o
                .append_system_prompt
                .push(value(&mut p, "--append-system-prompt")?),
            Long("tools") | Short('t') => tools = Some(comma_list(&value(&mut p, "--tools")?)),
            Long("no-tools") => no_tools = true,
            Long("no-builtin-tools") => o.no_builtin_tools = true,
            Long("no-context-files") => o.no_context_files = true,
            Long("fork") => o.fork = Some(value(&mut p, "--fork")?),
            Long("list-models") => {
                // As pi: the next argument is the search unless it looks like a flag or @file.
                let search = match p.optional_value() {
                    Some(v) => v.into_string().ok(),
                    None => match p.try_raw_args() {
                        Some(mut raw) => match raw.peek().and_then(|a| a.to_str()) {
                            Some(a) if !a.starts_with('-') && !a.starts_with('@') => {
                                raw.next().and_then(|a| a.into_string().ok())
                            }
                            _ => None,
                        },
                        None => None,
                    },
                };
                o.list_models = Some(search);
            }
            Long("verbose") => o.verbose = true,
            Short('r') | Long("resume") => {
                resume = true;
                o.warnings.push(
                "Warning: --resume opens pi's interactive session picker; pith has no terminal UI, ignored (use --session <path|id> or --continue)".to_string(),
            )
            }
            Long("theme") => {
                value(&mut p, "--theme")?;
                o.warnings.push(terminal_only(
                    "--theme",
                    "loads a theme for pi's terminal UI",
                ));
            }
            Long("no-themes") => o
                .warnings
                .push(terminal_only("--no-themes", "concerns pi's terminal UI")),
            Long("use-theme") => {
                value(&mut p, "--use-theme")?;
                o.warnings.push(terminal_only(
                    "--use-theme",
                    "selects a theme of pi's terminal UI",
                ));
            }
            Long("tui-mode") => {
                let v = value(&mut p, "--tui-mode")?;
                if v != "regular" && v != "fullscreen" {
                    return Err(format!(
                        "Invalid TUI mode \"{v}\". Valid values: regular, fullscreen"
                    ));
                }
                o.warnings.push(terminal_only(
                    "--tui-mode",
                    "sets how pi's terminal UI draws",
                ));
            }
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
                o.version = Some(Version::parse(&v).ok_or_else(|| {
                    format!("--compat: unknown version '{v}' (expected 0.73, 0.87, 1.6 or latest)")
                })?);
            }
            Long("export") => o.export = Some(value(&mut p, "--export")?),
            Long("session-id") => o.session_id = Some(value(&mut p, "--session-id")?),
            Short('n') | Long("name") => o.name = Some(value(&mut p, "--name")?),
            Long("exclude-tools") => {
                o.exclude_tools
                    .extend(comma_list(&value(&mut p, "--exclude-tools")?));
            }
            Short('a') | Long("approve") => o.approve = Some(true),
            Long("no-approve") => o.approve = Some(false),
            Short('e') | Long("extension") => o.extensions.push(value(&mut p, "--extension")?),
            Long("no-extensions") => o.no_extensions = true,
            Long("no-mcp") => o.no_mcp = true,
            Long("confirm-tools") => o.confirm_tools = Some(value(&mut p, "--confirm-tools")?),
            Long("confirm-timeout") => {
                let v = value(&mut p, "--confirm-timeout")?;
                o.confirm_timeout =
                    Some(v.trim().parse().map_err(|_| {
                        format!("--confirm-timeout: '{v}' is not a number of seconds")
                    })?);
            }
            Long(flag @ ("allow" | "ask" | "deny")) => {
                let level = crate::perms::rules::Level::parse(flag)
                    .unwrap_or(crate::perms::rules::Level::Deny);
                let flag = format!("--{flag}");
                let v = value(&mut p, &flag)?;
                crate::perms::rules::parse_rule(&v).map_err(|e| format!("{flag}: {e}"))?;
                o.permission_rules.push((level, v));
            }
            Long("permission-default") => {
                let v = value(&mut p, "--permission-default")?;
                o.permission_default = Some(crate::perms::rules::Level::parse(v.trim()).ok_or_else(|| {
                    format!("--permission-default: unknown value '{v}' (expected ask, allow or deny)")
                })?);
            }
            Long("skill") => o.skills.push(value(&mut p, "--skill")?),
            Long("no-skills") => o.no_skills = true,
            Long("prompt-template") => o.prompt_templates.push(value(&mut p, "--prompt-template")?),
            Long("no-prompt-templates") => o.no_prompt_templates = true,
            Long("max-turns") => o.limits.max_turns = Some(count(&mut p, "--max-turns", 1)?),
            Long("max-tool-calls") => {
                o.limits.max_tool_calls = Some(count(&mut p, "--max-tool-calls", 0)?)
            }
            Long("max-repeats") => o.limits.max_repeats = Some(count(&mut p, "--max-repeats", 1)?),
            Long("max-cost") => {
                let v = value(&mut p, "--max-cost")?;
                o.limits.max_cost_usd = Some(
                    v.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|c| c.is_finite() && *c >= 0.0)
                        .ok_or_else(|| {
                            format!("--max-cost: '{v}' is not an amount of US dollars")
                        })?,
                );
            }
            Long("deadline") => {
                let v = value(&mut p, "--deadline")?;
                let secs = v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e12)
                    .ok_or_else(|| format!("--deadline: '{v}' is not a number of seconds"))?;
                o.limits.deadline_ms = Some(((secs * 1000.0).round() as u64).max(1));
            }
            Long("result-file") => o.result_file = Some(value(&mut p, "--result-file")?),
            Long("output-schema") => o.output_schema = Some(value(&mut p, "--output-schema")?),
            Long("heartbeat") => {
                let v = value(&mut p, "--heartbeat")?;
                let secs = v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.01 && *s < 1e9)
                    .ok_or_else(|| format!("--heartbeat: '{v}' is not a number of seconds"))?;
                o.heartbeat = Some(std::time::Duration::from_secs_f64(secs));
            }
            Long("heartbeat-file") => o.heartbeat_file = Some(value(&mut p, "--heartbeat-file")?),
            Long("sandbox") => {
                let v = value(&mut p, "--sandbox")?;
                o.sandbox.mode = Some(crate::sandbox::Mode::parse(&v).ok_or_else(|| {
                    format!("--sandbox: unknown mode \"{v}\" (off, read-only, workspace-write)")
                })?);
            }
            Long("sandbox-fallback") => {
                let v = value(&mut p, "--sandbox-fallback")?;
                o.sandbox.fallback =
                    Some(crate::sandbox::Fallback::parse(&v).ok_or_else(|| {
                        format!("--sandbox-fallback: unknown value \"{v}\" (warn, fail)")
                    })?);
            }
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
            Long(name) => {
                // pi's rule for a flag an extension may register: `--x=v`, else the next
                // argument unless it looks like a flag or an `@file`.
                let name = name.to_string();
                let value = match p.optional_value() {
                    Some(v) => Some(
                        v.into_string()
                            .map_err(|_| format!("--{name}: value is not valid UTF-8"))?,
                    ),
                    None => {
                        let mut raw = p.raw_args().map_err(|e| e.to_string())?;
                        let takes = raw
                            .peek()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| !n.starts_with('-') && !n.starts_with('@'));
                        if takes {
                            raw.next().and_then(|v| v.into_string().ok())
                        } else {
                            None
                        }
                    }
                };
                // A name given again keeps its place (a JavaScript `Map`, as pi's).
                match o.extension_flags.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = value,
                    None => o.extension_flags.push((name, value)),
                }
            }
            Short(c) => return Err(format!("Unknown option: -{c}")),
        }
    }
    if o.fork.is_some() {
        let conflicting: Vec<&str> = [
            (o.session.is_some(), "--session"),
            (o.continue_session, "--continue"),
            (resume, "--resume"),
            (o.no_session, "--no-session"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, f)| *f)
        .collect();
        if !conflicting.is_empty() {
            return Err(format!(
                "--fork cannot be combined with {}",
                conflicting.join(", ")
            ));
        }
    }
    o.tools_arg = tools.clone();
    o.no_tools_base = no_tools || o.no_builtin_tools;
    o.tools = match (no_tools || o.no_builtin_tools, tools) {
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
            run(&["--compat", "0.87"]).unwrap().version,
            Some(Version::V087)
        );
        assert_eq!(run(&[]).unwrap().version, None);
        let o = run(&["--export", "s.jsonl", "out.html"]).unwrap();
        assert_eq!(o.export.as_deref(), Some("s.jsonl"));
        assert_eq!(o.messages, vec!["out.html".to_string()]);
        let o = run(&[
            "--skill",
            "a",
            "--skill",
            "-ns",
            "-ns",
            "--prompt-template",
            "t.md",
            "-np",
        ])
        .unwrap();
        assert_eq!(o.skills, ["a", "-ns"]);
        assert_eq!(o.prompt_templates, ["t.md"]);
        assert!(o.no_skills && o.no_prompt_templates);
        assert!(run(&["--skill"]).is_err());
        let o = run(&[
            "--session-id",
            "fixed-1",
            "-n",
            "Startup Name",
            "-xt",
            "bash, edit",
            "-na",
        ])
        .unwrap();
        assert_eq!(o.session_id.as_deref(), Some("fixed-1"));
        assert_eq!(o.name.as_deref(), Some("Startup Name"));
        assert_eq!(o.exclude_tools, ["bash", "edit"]);
        assert_eq!(o.approve, Some(false));
        assert_eq!(run(&["-a"]).unwrap().approve, Some(true));
        assert_eq!(
            run(&["--thinking", "max"]).unwrap().thinking,
            Some(ThinkingLevel::Max)
        );
        // `--` ends the options: what follows is the prompt, `-xt` included.
        let o = run(&["--", "-xt", "--help"]).unwrap();
        assert_eq!(o.messages, ["-xt", "--help"]);
        assert_eq!(o.mode, Mode::Print);
        let o = run(&[
            "-e",
            "a.sh",
            "--extension",
            "b.py",
            "-ne",
            "--no-mcp",
            "--confirm-tools",
            "bash,write",
            "--confirm-timeout",
            "5",
        ])
        .unwrap();
        assert_eq!(o.extensions, vec!["a.sh", "b.py"]);
        assert!(o.no_extensions && o.no_mcp);
        assert_eq!(o.confirm_tools.as_deref(), Some("bash,write"));
        assert_eq!(o.confirm_timeout, Some(5));
        assert!(run(&["--confirm-timeout", "soon"]).is_err());
        use crate::perms::rules::Level;
        let o = run(&[
            "--allow",
            "read",
            "--deny",
            "bash(rm *)",
            "--ask",
            "write",
            "--permission-default",
            "deny",
        ])
        .unwrap();
        assert_eq!(
            o.permission_rules,
            vec![
                (Level::Allow, "read".to_string()),
                (Level::Deny, "bash(rm *)".to_string()),
                (Level::Ask, "write".to_string())
            ]
        );
        assert_eq!(o.permission_default, Some(Level::Deny));
        assert!(run(&["--allow", "bash("]).is_err());
        assert!(run(&["--permission-default", "maybe"]).is_err());
    }

    #[test]
    fn every_flag_of_pi_is_accepted() {
        let o = run(&[
            "-t",
            "read,ls",
            "-nc",
            "--verbose",
            "--offline",
            "--append-system-prompt",
            "one",
            "--append-system-prompt",
            "two.md",
            "--theme",
            "t.json",
            "--no-themes",
            "--use-theme",
            "dark",
            "--tui-mode",
            "fullscreen",
            "--fork",
            "abc",
        ])
        .unwrap();
        assert_eq!(o.tools, Some(vec!["read".to_string(), "ls".to_string()]));
        assert!(o.no_context_files && o.verbose);
        assert_eq!(o.append_system_prompt, ["one", "two.md"]);
        assert_eq!(o.fork.as_deref(), Some("abc"));
        assert_eq!(o.warnings.len(), 4, "{:?}", o.warnings);
        assert!(o.warnings.iter().all(|w| w.starts_with("Warning: --")));
        let o = run(&["-r"]).unwrap();
        assert_eq!(o.warnings.len(), 1);
        assert!(o.warnings[0].contains("--session <path|id> or --continue"));
        assert_eq!(run(&["-nt"]).unwrap().tools, Some(vec![]));
        let o = run(&["-nbt", "--tools", "read"]).unwrap();
        assert!(o.no_builtin_tools);
        assert_eq!(o.tools, Some(vec!["read".to_string()]));
        assert_eq!(run(&["-nbt"]).unwrap().tools, Some(vec![]));
        // A value that looks like a short alias is still a value.
        assert_eq!(
            run(&["--system-prompt", "-nt"])
                .unwrap()
                .system_prompt
                .as_deref(),
            Some("-nt")
        );
        assert_eq!(run(&["--list-models"]).unwrap().list_models, Some(None));
        assert_eq!(
            run(&["--list-models", "sonnet", "-p", "x"])
                .unwrap()
                .list_models,
            Some(Some("sonnet".into()))
        );
        assert_eq!(
            run(&["--list-models", "--verbose"]).unwrap().list_models,
            Some(None)
        );
        assert_eq!(
            run(&["--list-models=gpt"]).unwrap().list_models,
            Some(Some("gpt".into()))
        );
        assert!(matches!(
            parse(["list", "--x"].iter().map(OsString::from)),
            Ok(Parsed::PiCommand(_))
        ));
        // A prompt that starts with such a word is still a prompt when it is not the first word.
        assert_eq!(run(&["-p", "list files"]).unwrap().messages, ["list files"]);
    }

    #[test]
    fn errors() {
        // An unknown long flag is kept for pi's extensions (start-up refuses it without one).
        assert_eq!(
            run(&["--bogus"]).unwrap().extension_flags,
            [("bogus".to_string(), None)]
        );
        assert_eq!(
            parse(["--mode", "tui"].iter().map(OsString::from)),
            Ok(Parsed::Refused(
                "Error: Invalid mode \"tui\". Valid values: text, json, rpc".into()
            ))
        );
        for args in [&["--mode"][..], &["--mode", "--no-session"]] {
            assert_eq!(
                parse(args.iter().map(OsString::from)),
                Ok(Parsed::Refused(
                    "Error: --mode requires text, json, or rpc".into()
                ))
            );
        }
        // As pi: an unknown thinking level is a warning, not an error.
        let o = run(&["--thinking", "bogus"]).unwrap();
        assert_eq!(o.thinking, None);
        assert_eq!(
            o.warnings,
            [
                "Warning: Invalid thinking level \"bogus\". Valid values: off, minimal, low, medium, high, xhigh, max"
            ]
        );
        // Long flags pith does not know are kept for pi's extensions, parsed as pi parses them.
        let o = run(&[
            "--bogus", "x", "--a=1", "--b", "-p", "--c", "@f", "--b=2", "--d", "m",
        ])
        .unwrap();
        assert_eq!(
            o.extension_flags,
            [
                ("bogus".to_string(), Some("x".to_string())),
                ("a".to_string(), Some("1".to_string())),
                ("b".to_string(), Some("2".to_string())),
                ("c".to_string(), None),
                ("d".to_string(), Some("m".to_string())),
            ]
        );
        assert_eq!(o.file_args, ["f"]);
        assert!(o.messages.is_empty());
        assert_eq!(
            unknown_flags_error(&o.extension_flags).as_deref(),
            Some("Unknown option: --bogus")
        );
        assert_eq!(run(&["-x"]).unwrap_err(), "Unknown option: -x");
        assert!(run(&["--tui-mode", "sideways"]).is_err());
        assert_eq!(
            run(&["--fork", "a.jsonl", "--no-session", "-c"]).unwrap_err(),
            "--fork cannot be combined with --continue, --no-session"
        );
        assert!(run(&["--model"]).is_err());
        assert!(run(&["--compat", "1.0"]).is_err());
        assert!(run(&["--export"]).is_err());
    }
}
