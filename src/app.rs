//! Wiring: resolve the start-up state from CLI, config and registry, spawn the edge threads, run
//! the state machine on the main thread, and turn its end into an exit code.

use std::path::PathBuf;

use crate::cli::{self, Mode, Options};
use crate::config::{self, Settings};
use crate::core::machine::{Channels, Exit, Machine, Startup};
use crate::initial_message;
use crate::io;
use crate::llm::models::{Auth, Registry, parse_scoped_models, process_env, resolve_cli_model};
use crate::message::ThinkingLevel;
use crate::prompt as system_prompt;
use crate::session::Session;
use crate::session::store::{default_session_dir, find_most_recent, resolve_session_arg};
use crate::tools::{self, Tool};
use std::sync::Arc;

/// Run pith with parsed options; returns the process exit code.
pub fn run(opts: Options) -> i32 {
    for w in &opts.warnings {
        eprintln!("{w}");
    }
    if let Some(input) = &opts.export {
        return run_export(input, opts.messages.first().map(String::as_str));
    }
    if let Some(search) = &opts.list_models {
        if has_pi_extensions(&opts) {
            return list_models_after_extensions(&opts, search.as_deref());
        }
        if let Some(e) = cli::unknown_flags_error(&opts.extension_flags) {
            eprintln!("pith: {e}\nTry 'pith --help' for more information.");
            return cli::EXIT_USAGE;
        }
        return list_models(search.as_deref(), opts.version);
    }
    if opts.mode == Mode::Rpc && !opts.file_args.is_empty() {
        eprintln!("Error: @file arguments are not supported in RPC mode");
        return cli::EXIT_USAGE;
    }
    let mut startup = match startup(&opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}", e.message);
            return if e.config && (opts.mode != Mode::Rpc || e.every_mode) {
                cli::EXIT_USAGE
            } else {
                cli::EXIT_FAILURE
            };
        }
    };
    match start_sandbox(&opts, &startup) {
        Ok(sandbox) => startup.sandbox = sandbox,
        Err(e) => {
            eprintln!("{e}");
            return cli::EXIT_SANDBOX;
        }
    }
    if opts.mode == Mode::Rpc {
        // From here on a signal is recorded for the machine instead of killing pith; the thread
        // that forwards it starts a few milliseconds later (`run_rpc`).
        let signals = match io::watch::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("pith: cannot listen for signals: {e}");
                return cli::EXIT_FAILURE;
            }
        };
        if opts.verbose {
            report_startup(&startup);
        }
        return run_rpc(startup, signals);
    }
    if opts.verbose {
        report_startup(&startup);
    }
    // Print / json mode. Piped stdin is read before signal handlers go in: a Ctrl-C while it
    // blocks still ends pith.
    match oneshot_prompts(&opts, &startup.cwd) {
        Ok(prompts) if prompts.is_empty() => {
            eprintln!("Error: no prompt given (pith -p \"prompt\", @files or piped stdin)");
            cli::EXIT_USAGE
        }
        Ok(_) if startup.model.is_none() && startup.plugins.deferred_model.is_none() => {
            // pi stops here too, before any output (pi exits 1; pith's code for a configuration
            // that cannot run is 2).
            eprintln!("{}", crate::list_models::NO_MODELS);
            cli::EXIT_USAGE
        }
        Ok(prompts) => run_oneshot(
            startup,
            opts.mode,
            prompts,
            opts.result_file.as_deref().map(PathBuf::from),
        ),
        Err(e) => {
            eprintln!("{e}");
            cli::EXIT_FAILURE
        }
    }
}

/// `--sandbox` / settings `pith.sandbox` (a trusted project's may only tighten): the sandbox the
/// tool threads enter, `None` without one. `Err`: the kernel cannot enforce it (or the setting is
/// malformed) and `--sandbox-fallback warn` was not given: pith refuses to start (exit 5).
pub(crate) fn start_sandbox(
    opts: &Options,
    s: &Startup,
) -> Result<Option<Arc<crate::sandbox::Sandbox>>, String> {
    use crate::sandbox::{Fallback, Sandbox, Unavailable};
    let mut warnings = Vec::new();
    let pith = |m: &serde_json::Map<String, serde_json::Value>| {
        m.get("pith")
            .and_then(serde_json::Value::as_object)
            .cloned()
    };
    let resolved = crate::sandbox::resolve_policy(
        opts.sandbox,
        pith(s.settings.global()).as_ref(),
        pith(s.settings.project()).as_ref(),
        &s.cwd,
        config::home_dir().as_deref(),
        &mut warnings,
    );
    for w in warnings {
        eprintln!("{w}");
    }
    let policy = match resolved {
        Ok(Some(p)) => p,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("pith: the sandbox cannot start: {e}")),
    };
    let tmp = std::env::temp_dir();
    let mode = policy.mode.as_str();
    match Sandbox::start(policy.clone(), &s.cwd, &tmp) {
        Ok(sb) => Ok(Some(Arc::new(sb))),
        Err(Unavailable(why)) if policy.fallback == Fallback::Warn => {
            eprintln!(
                "Warning: the {mode} sandbox cannot be enforced: {why}. Running UNSANDBOXED (--sandbox-fallback warn)."
            );
            Ok(Some(Arc::new(Sandbox::unenforced(
                policy, &s.cwd, &tmp, why,
            ))))
        }
        Err(Unavailable(why)) => Err(format!(
            "pith: the {mode} sandbox is unavailable: {why}. Refusing to run unsandboxed (--sandbox-fallback warn would run without it)."
        )),
    }
}

/// Print/json mode: piped stdin, the @files and the messages as pi turns them into prompts.
fn oneshot_prompts(
    opts: &Options,
    cwd: &std::path::Path,
) -> Result<Vec<initial_message::Prompt>, String> {
    let stdin = initial_message::read_piped_stdin()?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let (text, images) = initial_message::file_arguments(&opts.file_args, cwd, home.as_deref())?;
    Ok(initial_message::compose(
        stdin,
        text,
        images,
        &opts.messages,
    ))
}

/// `--list-models [search]`: pi's table of the models that have a key, on stdout.
fn list_models(search: Option<&str>, version: Option<crate::protocol::Version>) -> i32 {
    let agent_dir = config::agent_dir();
    let version = version
        .or_else(|| Settings::load_global(&agent_dir).0.protocol_version())
        .unwrap_or_default();
    let (registry, auth) = load_models(version, &agent_dir);
    let models = registry.available(&auth);
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in crate::list_models::lines(&models, search) {
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    cli::EXIT_OK
}

/// Whether a pi TypeScript extension would load (`-e` or settings, the project's when trusted).
fn has_pi_extensions(opts: &Options) -> bool {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let agent_dir = config::agent_dir();
    let (_, _, trusted, _) = trust_and_settings(opts, &cwd, &agent_dir);
    pi_extension_configured(opts, trusted, &agent_dir, &cwd)
}

/// Whether the extensions that would load (`-e`, settings, a trusted project's) include one of
/// pi's TypeScript extensions (hosted by node).
fn pi_extension_configured(
    opts: &Options,
    project_trusted: bool,
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
) -> bool {
    let (extensions, _) = crate::ext::load::resolve(
        &opts.extensions,
        opts.no_extensions,
        project_trusted,
        agent_dir,
        cwd,
    );
    extensions
        .iter()
        .any(|e| e.kind == crate::ext::load::Kind::Node)
}

/// `--list-models` with pi extensions: pi lists once its extensions have loaded, their
/// `registerProvider` models included. pith starts as for a run (no session) and asks its machine
/// `get_available_models`, which is answered once the node host has loaded; a start-up that
/// fails (an extension that does not load) is reported as for a run.
fn list_models_after_extensions(opts: &Options, search: Option<&str>) -> i32 {
    let mut o = opts.clone();
    o.list_models = None;
    o.mode = Mode::Rpc;
    o.no_session = true;
    o.session = None;
    o.continue_session = false;
    o.fork = None;
    let startup = match startup(&o) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}", e.message);
            return if e.config && e.every_mode {
                cli::EXIT_USAGE
            } else {
                cli::EXIT_FAILURE
            };
        }
    };
    let (
        channels,
        Local {
            input_tx,
            stdout_rx,
            ..
        },
    ) = local_channels();
    let machine = Machine::new(startup, channels);
    let running = std::thread::spawn(move || machine.run_to_exit().code());
    let ask = serde_json::json!({"id": "list-models", "type": "get_available_models"});
    let _ = input_tx.send(io::stdin::Input::Json(ask));
    let mut rows: Option<Vec<crate::list_models::Row>> = None;
    for line in stdout_rx.iter() {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        if v["type"] == "response" && v["id"] == "list-models" {
            rows = v["data"]["models"].as_array().map(|models| {
                models
                    .iter()
                    .filter_map(crate::list_models::Row::of_json)
                    .collect()
            });
            break;
        }
    }
    let _ = input_tx.send(io::stdin::Input::Eof);
    drop(input_tx);
    // Whatever the machine still writes until it ends.
    for _ in stdout_rx.iter() {}
    let code = running.join().unwrap_or(cli::EXIT_FAILURE);
    let Some(rows) = rows else {
        return if code == 0 { cli::EXIT_FAILURE } else { code };
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in crate::list_models::lines_of(rows, search) {
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    cli::EXIT_OK
}

/// `--verbose`: what pith starts with, on stderr.
fn report_startup(s: &Startup) {
    match &s.model {
        Some(m) => eprintln!(
            "pith: model {}/{} (thinking {})",
            m.provider,
            m.id,
            s.thinking.as_str()
        ),
        None => eprintln!("pith: no model selected"),
    }
    match s.session.file() {
        Some(f) => eprintln!("pith: session {} ({})", f.display(), s.session.id()),
        None => eprintln!("pith: session in memory ({})", s.session.id()),
    }
    if !s.no_context_files {
        for (path, _) in system_prompt::context_files(&s.cwd, &s.agent_dir) {
            eprintln!("pith: context file {}", path.display());
        }
    }
    let tools: Vec<&str> = s.tools.iter().map(|t| t.name()).collect();
    eprintln!("pith: tools {}", tools.join(", "));
    eprintln!("pith: protocol pi {}", s.compat.as_str());
    if let Some(sb) = &s.sandbox {
        eprintln!("pith: sandbox {}", sb.state_json());
    }
}

/// `--export <session.jsonl> [out.html]`: write the HTML export and exit, with pi's messages.
fn run_export(input: &str, output: Option<&str>) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match crate::session::export_html::export_file(input, output, &cwd) {
        Ok(path) => {
            println!("Exported to: {path}");
            cli::EXIT_OK
        }
        Err(e) => {
            eprintln!("Error: {e}");
            cli::EXIT_FAILURE
        }
    }
}

/// Worker events (LLM deltas, tool updates) queued for the machine at most. Enough to keep the
/// workers busy while the machine writes a frame; the slots are allocated (and resident) up
/// front, so not more: an agent among hundreds on a host pays for each one.
const WORKER_QUEUE: usize = 128;

/// Everything the machine starts with: settings, registry, auth, model, thinking, session, tools.
/// Why pith could not start: the message for stderr, and whether it is a configuration error
/// (an unknown model or provider, bad `pith.limits`): exit 2 in print and json modes, where
/// pith's exit codes apply (rpc mode keeps pi's 1).
#[derive(Debug)]
pub struct StartupError {
    pub message: String,
    pub config: bool,
    /// Exit 2 in rpc mode too (a pi extension configured that cannot run).
    pub every_mode: bool,
}

impl StartupError {
    fn config(message: String) -> StartupError {
        StartupError {
            message,
            config: true,
            every_mode: false,
        }
    }
}

impl From<String> for StartupError {
    fn from(message: String) -> StartupError {
        StartupError {
            message,
            config: false,
            every_mode: false,
        }
    }
}

/// An `-e` path that does not exist stops start-up, as in pi (exit 1 in rpc mode).
fn check_extension_paths(opts: &Options, cwd: &std::path::Path) -> Result<(), StartupError> {
    let missing = crate::ext::load::missing_cli_paths(&opts.extensions, cwd);
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = missing
        .iter()
        .map(|p| {
            format!(
                "Error: Failed to load extension \"{0}\": Extension path does not exist: {0}",
                p.display()
            )
        })
        .collect();
    lines.push("Hint: Start without extensions using \"pith -ne\".".into());
    Err(StartupError::config(lines.join("\n")))
}

/// Long flags pith does not know are for pi's extensions (`pi.registerFlag`): without one
/// configured they are the usage error they always were (exit 2, before anything happens);
/// with one, the node host checks them once its extensions have loaded, as pi does.
fn check_extension_flags(
    opts: &Options,
    project_trusted: bool,
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
) -> Result<(), StartupError> {
    let Some(error) = cli::unknown_flags_error(&opts.extension_flags) else {
        return Ok(());
    };
    if pi_extension_configured(opts, project_trusted, agent_dir, cwd) {
        return Ok(());
    }
    Err(StartupError {
        message: format!("pith: {error}\nTry 'pith --help' for more information."),
        config: true,
        every_mode: true,
    })
}

pub fn startup(opts: &Options) -> Result<Startup, StartupError> {
    startup_in(
        opts,
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    )
}

/// [`startup`] for a session whose working directory is `cwd` (an ACP session's).
pub fn startup_in(opts: &Options, cwd: PathBuf) -> Result<Startup, StartupError> {
    let agent_dir = config::agent_dir();
    let (settings, version, project_trusted) = resolve_trust_and_settings(opts, &cwd, &agent_dir);
    check_extension_paths(opts, &cwd)?;
    check_extension_flags(opts, project_trusted, &agent_dir, &cwd)?;
    check_tool_options(opts, version.profile())?;
    let (registry, mut auth) = load_models(version, &agent_dir);
    let mut session = open_session(opts, &cwd, &agent_dir, settings.session_dir())?;
    let resumed = session
        .entries()
        .iter()
        .any(|e| e.entry_type() == "message");
    let mode = match opts.mode {
        Mode::Rpc => "rpc",
        Mode::Json => "json",
        Mode::Print => "print",
        // Extensions see an ACP session as an RPC host: dialogs are answered (docs/acp.md).
        Mode::Acp => "rpc",
    };
    let (plugins, plugin_warnings) = crate::core::plugins::PluginConfig::resolve(
        &opts.extensions,
        opts.no_extensions,
        opts.no_mcp,
        project_trusted,
        opts.confirm_tools.as_deref(),
        opts.confirm_timeout,
        &settings,
        &agent_dir,
        &cwd,
        mode,
        version.profile().tools.mcp,
    );
    // A pi extension may register the `--provider` / `--model` asked for (`registerProvider`).
    let may_defer = plugins
        .extensions
        .iter()
        .any(|e| e.kind == crate::ext::load::Kind::Node);
    let mut deferred = None;
    let picked = pick_model(
        opts,
        &settings,
        &registry,
        &mut auth,
        &session,
        resumed,
        may_defer.then_some(&mut deferred),
    )?;
    // A model left for the extensions gets its level (and its session entries) with it.
    let thinking = if deferred.is_some() {
        ThinkingLevel::Off
    } else {
        pick_thinking(
            &picked,
            &settings,
            &registry,
            &mut session,
            resumed,
            version,
        )
    };
    let active = active_tools(opts, &settings, &version.profile().tools);

    for w in plugin_warnings {
        eprintln!("{w}");
    }
    let mut plugins = plugins;
    plugins.deferred_model = deferred;
    plugins.extension_flags = opts.extension_flags.clone();
    plugins.node_host = node_host(&plugins, &settings, project_trusted)?;
    permissions(opts, &settings, &cwd, &mut plugins)?;
    let mut active = active;
    if plugins.mcp_dialect == crate::protocol::McpDialect::Pi {
        plugins.mcp_filter = crate::mcp::config::ToolFilter::from_cli(
            opts.tools_arg.as_deref(),
            &opts.exclude_tools,
        );
        activate_discovery(&plugins, &mut active, &version.profile().tools);
        // Tools of built-in extensions turned off (`-builtin:codemode`, `-builtin:tool-search`).
        active.retain(|t| {
            let ext = match t.name() {
                "codemode" => "codemode",
                "tool_search" => "tool-search",
                _ => return true,
            };
            !plugins.builtins_off.iter().any(|b| b == ext)
        });
    }

    let resources = resource_options(
        opts,
        &settings,
        &cwd,
        &agent_dir,
        version.profile(),
        project_trusted,
    );
    let cwd_for_files = cwd.clone();
    let limits = settings
        .limits()
        .map_err(StartupError::config)?
        .overridden_by(&opts.limits);

    Ok(Startup {
        resources,
        plugins,
        custom_system_prompt: system_prompt::custom_prompt(
            opts.system_prompt.as_deref(),
            &cwd,
            &agent_dir,
            project_trusted,
        ),
        append_system_prompt: system_prompt::append_prompts(
            &opts.append_system_prompt,
            &cwd,
            &agent_dir,
            project_trusted,
        ),
        no_context_files: opts.no_context_files,
        cwd,
        agent_dir,
        settings,
        registry,
        auth,
        model: picked.model,
        thinking,
        defaults: picked.defaults,
        scoped_models: picked.scoped_models,
        session,
        tools: active,
        faux_script: opts.faux_script.as_ref().map(PathBuf::from),
        partials: opts.partials,
        compat: version,
        limits,
        output_schema: match &opts.output_schema {
            Some(f) => Some(
                crate::output_schema::OutputSchema::from_file(&cwd_for_files.join(f))
                    .map_err(StartupError::config)?,
            ),
            None => None,
        },
        heartbeat: (opts.heartbeat.is_some() || opts.heartbeat_file.is_some()).then(|| {
            crate::core::machine::Heartbeat {
                every: opts.heartbeat.unwrap_or(std::time::Duration::from_secs(10)),
                file: opts.heartbeat_file.as_ref().map(|f| cwd_for_files.join(f)),
            }
        }),
        sandbox: None,
    })
}

/// pi's TypeScript extensions are configured: the node that hosts them, or pith's refusal to
/// start without them (exit 2 in every mode).
fn node_host(
    plugins: &crate::core::plugins::PluginConfig,
    settings: &Settings,
    project_trusted: bool,
) -> Result<Option<crate::core::plugins::NodeHostSetup>, StartupError> {
    use crate::ext::load::Kind;
    let pi: Vec<PathBuf> = plugins
        .extensions
        .iter()
        .filter(|e| e.kind == Kind::Node)
        .map(|e| e.path.clone())
        .collect();
    if pi.is_empty() {
        return Ok(None);
    }
    match crate::ext::node_host::find(settings.node_path()) {
        Ok(node) => Ok(Some(crate::core::plugins::NodeHostSetup {
            node,
            project_trusted,
        })),
        Err(problem) => Err(StartupError {
            message: crate::ext::node_host::refusal(&problem, &pi),
            config: true,
            every_mode: true,
        }),
    }
}

/// The settings, the protocol version and whether the project is trusted, decided together:
/// the flag wins over settings `pith.compat` (default 0.73), and a project's `pith.compat` counts
/// only in a project trusted by pi 0.87.1's rules (under 0.87 an untrusted project's settings
/// are never read, so it cannot choose the version that would read them). Then project trust
/// (`--approve` / `--no-approve`, the version's rules): an untrusted project's `.pi` files are
/// not read. The settings' warnings go to stderr.
fn resolve_trust_and_settings(
    opts: &Options,
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
) -> (Settings, crate::protocol::Version, bool) {
    let (settings, version, project_trusted, warnings) = trust_and_settings(opts, cwd, agent_dir);
    for w in warnings {
        eprintln!("{w}");
    }
    if let Some(note) = settings.cache_warming_note() {
        eprintln!("{note}");
    }
    (settings, version, project_trusted)
}

/// [`resolve_trust_and_settings`] without printing: its warnings are returned.
fn trust_and_settings(
    opts: &Options,
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
) -> (Settings, crate::protocol::Version, bool, Vec<String>) {
    let (settings, warnings) = Settings::load(agent_dir, cwd);
    let global = settings.global_only();
    let version = opts.version.unwrap_or_else(|| {
        let own = global.protocol_version().unwrap_or_default();
        match settings.protocol_version() {
            Some(project) if project != own => {
                // Judged by the newest version's rules (project trust asked for), so an
                // untrusted project cannot pick the version that would read its files.
                let trusted = crate::trust::project_trusted(
                    &crate::protocol::Version::LATEST.profile().resources,
                    opts.approve,
                    cwd,
                    agent_dir,
                    global.default_project_trust(),
                );
                if trusted { project } else { own }
            }
            _ => own,
        }
    });
    let project_trusted = crate::trust::project_trusted(
        &version.profile().resources,
        opts.approve,
        cwd,
        agent_dir,
        global.default_project_trust(),
    );
    let (settings, warnings) = if project_trusted {
        (settings, warnings)
    } else {
        Settings::load_global(agent_dir)
    };
    (settings, version, project_trusted, warnings)
}

/// The model registry (built-in catalog and `models.json`) and the credentials, with their
/// warnings on stderr.
fn load_models(version: crate::protocol::Version, agent_dir: &std::path::Path) -> (Registry, Auth) {
    let profile = version.profile();
    let (registry, warnings) =
        Registry::load_for(profile.llm.catalog, agent_dir, &|k| std::env::var(k).ok());
    for w in warnings {
        eprintln!("{w}");
    }
    let (mut auth, warnings) = Auth::load(agent_dir, registry.provider_api_keys(), process_env());
    auth.set_sdk(profile.llm.sdk);
    for w in warnings {
        eprintln!("{w}");
    }
    (registry, auth)
}

/// The session to start with (`--no-session`, `--fork`, `--session-id`, `--session`,
/// `--continue`, else a new one), its load warnings on stderr, named by `--name`. It comes
/// before the model: a resumed session may name its model and thinking level.
fn open_session(
    opts: &Options,
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
    from_settings: Option<PathBuf>,
) -> Result<Session, StartupError> {
    let cwd_str = cwd.to_string_lossy().to_string();
    // As pi: `--session-dir`, else `$PI_CODING_AGENT_SESSION_DIR`, else settings `sessionDir`
    // (a relative one is taken as given, from the working directory), else the default.
    let configured = opts
        .session_dir
        .as_ref()
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var("PI_CODING_AGENT_SESSION_DIR")
                .ok()
                .filter(|d| !d.is_empty())
                .map(|d| config::expand_tilde(&d))
        })
        .or(from_settings);
    let session_dir = match &configured {
        Some(d) => d.clone(),
        None => default_session_dir(agent_dir, &cwd_str),
    };
    if let Some(id) = &opts.session_id {
        check_session_id(id, opts)?;
    }
    let mut session = if opts.no_session {
        match &opts.session_id {
            Some(id) => Session::with_id(&cwd_str, None, id),
            None => Session::new(&cwd_str, None, None),
        }
    } else if let Some(arg) = &opts.fork {
        // pi 0.87.1: `--session-id` names the fork, unless a session of this directory has it.
        if let Some(id) = &opts.session_id {
            if find_session_by_id(&session_dir, id).is_some() {
                return Err(format!("Session already exists with id '{id}'").into());
            }
        }
        let path = if arg.contains('/') || arg.contains('\\') || arg.ends_with(".jsonl") {
            cwd.join(arg)
        } else {
            resolve_session_arg(arg, &session_dir)?
        };
        Session::fork_from(
            &path,
            &cwd_str,
            session_dir.clone(),
            opts.session_id.as_deref(),
        )
        .map_err(|e| format!("Error: {e}"))?
    } else if let Some(id) = &opts.session_id {
        // pi 0.87.1: the session of this directory with exactly this id, else a new one with it.
        match find_session_by_id(&session_dir, id) {
            Some(p) => Session::open_at_start(&p)?,
            None => {
                eprintln!(
                    "Warning: No project session found with id '{id}'; creating a new session with that id."
                );
                Session::with_id(&cwd_str, Some(session_dir.clone()), id)
            }
        }
    } else if let Some(arg) = &opts.session {
        let path = if arg.contains('/') || arg.contains('\\') || arg.ends_with(".jsonl") {
            cwd.join(arg)
        } else {
            resolve_session_arg(arg, &session_dir)?
        };
        let mut s = Session::open_or_create(&path, &cwd_str).map_err(|e| format!("Error: {e}"))?;
        if configured.is_some() {
            s.set_session_dir(session_dir.clone());
        }
        s
    } else if opts.continue_session {
        match find_most_recent(&session_dir) {
            Some(p) => Session::open_at_start(&p)?,
            None => Session::new(&cwd_str, Some(session_dir.clone()), None),
        }
    } else {
        Session::new(&cwd_str, Some(session_dir.clone()), None)
    };
    for w in session.take_warnings() {
        // The loader's own warnings already say `Warning:`; write errors do not.
        if w.starts_with("Warning:") {
            eprintln!("{w}");
        } else {
            eprintln!("Warning: {w}");
        }
    }
    if let Some(name) = &opts.name {
        // pi 0.78: named from the start (on a new session the `session_info` entry is the root).
        let name = name.trim();
        if name.is_empty() {
            return Err("Error: --name requires a non-empty value"
                .to_string()
                .into());
        }
        session.append_session_info(name);
    }
    Ok(session)
}

/// What [`pick_model`] chose.
struct PickedModel {
    model: Option<crate::llm::Model>,
    /// The level `--thinking`, a `--model` suffix or the scoped pick asked for.
    cli_level: Option<ThinkingLevel>,
    defaults: crate::core::machine::SessionDefaults,
    scoped_models: Vec<(crate::llm::Model, Option<ThinkingLevel>)>,
}

/// The model: `--model`, else scoped models (`--models`, settings `enabledModels`), else the
/// resumed session's, else settings / the first with a key. `--api-key` is set for its provider.
fn pick_model(
    opts: &Options,
    settings: &Settings,
    registry: &Registry,
    auth: &mut Auth,
    session: &Session,
    resumed: bool,
    mut defer: Option<&mut Option<crate::core::plugins::DeferredModel>>,
) -> Result<PickedModel, StartupError> {
    let mut cli_level = opts.thinking;
    let mut model = None;
    if let Some(pattern) = &opts.model {
        let resolved = if crate::llm::faux::is_selected(opts.provider.as_deref(), pattern) {
            Ok((crate::llm::faux::model(), None, None))
        } else {
            let usable = |p: &str| registry.has_configured_auth(p, auth);
            let cx = crate::llm::models::resolve::CliContext {
                usable: &usable,
                inline_key: opts.api_key.is_some(),
                thinking: opts.thinking,
            };
            resolve_cli_model(registry, opts.provider.as_deref(), pattern, &cx)
        };
        match (resolved, defer.as_deref_mut()) {
            (Ok((m, level, warning)), _) => {
                if let Some(w) = warning {
                    eprintln!("Warning: {w}");
                }
                if cli_level.is_none() {
                    cli_level = level;
                }
                model = Some(m);
            }
            // Not known yet: a pi extension's factory may register it (resolved, or this
            // error given, once the extensions have loaded).
            (Err(_), Some(slot)) => {
                *slot = Some(crate::core::plugins::DeferredModel {
                    wanted: crate::core::plugins::Wanted::Cli {
                        provider: opts.provider.clone(),
                        pattern: pattern.clone(),
                    },
                    api_key: opts.api_key.clone(),
                    level: cli_level,
                    resumed,
                });
            }
            // pi prints its start-up diagnostics as `Error: <text>`.
            (Err(e), None) => return Err(StartupError::config(format!("Error: {e}"))),
        }
    }
    let deferred = defer.as_ref().is_some_and(|d| d.is_some());
    if let Some(key) = &opts.api_key {
        match &model {
            Some(m) => auth.set_runtime_key(&m.provider, key),
            None if deferred => {}
            None => {
                return Err(
                    "--api-key requires a model to be specified via --model, --provider/--model, or --models".to_string().into()
                );
            }
        }
    }
    let patterns = if opts.models.is_empty() {
        settings.enabled_models()
    } else {
        opts.models.clone()
    };
    let (scoped_models, warnings) = if patterns.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        parse_scoped_models(registry, auth, &patterns)
    };
    for w in warnings {
        eprintln!("{w}");
    }
    // What pi 0.87.1 applies again whenever it builds a session's runtime (new_session,
    // switch_session, fork, clone): the CLI's model and level and the scoped pick.
    let mut defaults = crate::core::machine::SessionDefaults {
        cli_model: model.clone(),
        cli_level,
        scoped: None,
        settings_default: settings
            .default_provider()
            .zip(settings.default_model())
            .map(|(p, i)| (p.to_string(), i.to_string())),
        initial: Default::default(),
    };
    if model.is_none() && !scoped_models.is_empty() {
        let default = settings.default_provider().zip(settings.default_model());
        let pick = scoped_models
            .iter()
            .find(|(m, _)| default.is_some_and(|(p, i)| m.provider == p && m.id == i))
            .or_else(|| scoped_models.first());
        if let Some((m, level)) = pick {
            defaults.scoped = Some((m.clone(), *level));
            if !resumed {
                model = Some(m.clone());
                if cli_level.is_none() {
                    cli_level = *level;
                }
            }
        }
    }
    let mut deferred = deferred;
    if model.is_none() && resumed {
        if let Some((p, i)) = session.model() {
            model = registry
                .lookup(&p, &i)
                .filter(|m| auth.has_auth(&m.provider));
            // Its provider may come from a pi extension: looked up again once they have loaded.
            if let (None, Some(slot)) = (&model, defer) {
                if !deferred && !registry.models_of(&p).iter().any(|m| m.id == i) {
                    *slot = Some(crate::core::plugins::DeferredModel {
                        wanted: crate::core::plugins::Wanted::Session { provider: p, id: i },
                        api_key: None,
                        level: cli_level,
                        resumed,
                    });
                    deferred = true;
                }
            }
        }
    }
    if model.is_none() && !deferred {
        model = defaults.initial(registry, auth);
    }
    Ok(PickedModel {
        model,
        cli_level,
        defaults,
        scoped_models,
    })
}

/// The thinking level: the CLI's, else the resumed session's, else (0.87) the model's own
/// setting, else the settings' default, else medium; clamped to what the model supports (off
/// without reasoning). A new session records the model and level; a resumed one the level
/// when it has none.
fn pick_thinking(
    picked: &PickedModel,
    settings: &Settings,
    registry: &Registry,
    session: &mut Session,
    resumed: bool,
    version: crate::protocol::Version,
) -> ThinkingLevel {
    let model = &picked.model;
    let level = picked
        .cli_level
        .or(if resumed {
            session.thinking_level()
        } else {
            None
        })
        .or(model
            .as_ref()
            .filter(|_| {
                version.profile().agent.thinking_on_model_change
                    == crate::protocol::ThinkingOnModelChange::ModelSetting
            })
            .and_then(|m| settings.model_thinking_level(&m.provider, &m.id)))
        .or(settings.default_thinking_level())
        .unwrap_or(ThinkingLevel::Medium);
    let thinking = match model {
        Some(m) if m.reasoning => crate::llm::clamp_thinking(&registry.thinking_levels(m), level),
        _ => ThinkingLevel::Off,
    };
    if !resumed {
        if let Some(m) = model {
            session.append_model_change(&m.provider, &m.id);
        }
        session.append_thinking_level_change(thinking);
    } else if session.thinking_level().is_none() {
        session.append_thinking_level_change(thinking);
    }
    thinking
}

/// pi 1.6.0's start-up refusals of the command line, before anything else happens:
/// `--provider` without `--model`, a `--tools` list mixing names with `+name` / `-name`.
fn check_tool_options(
    opts: &Options,
    profile: &crate::protocol::Profile,
) -> Result<(), StartupError> {
    if profile.llm.provider_requires_model && opts.model.is_none() {
        if let Some(p) = &opts.provider {
            return Err(format!(
                "Error: --provider requires --model (for example: --provider {p} --model <pattern>)"
            )
            .into());
        }
    }
    if profile.tools.tool_list_modifiers {
        if let Some(e) = opts
            .tools_arg
            .as_deref()
            .and_then(tools::selection::tool_list_error)
        {
            return Err(format!("Error: --tools: {e}").into());
        }
    }
    Ok(())
}

/// The built-in tools `--tools` / `--exclude-tools` leave active (the default set otherwise);
/// an unknown name is a warning. The default set is settings `defaultTools` if set. pi 1.6.0's `+name` / `-name` entries and `*` patterns follow
/// the profile ([`tools::selection`]).
fn active_tools(
    opts: &Options,
    settings: &Settings,
    profile: &crate::protocol::Tools,
) -> Vec<Arc<dyn Tool>> {
    let defaults: Vec<String> = if opts.no_tools_base {
        Vec::new()
    } else {
        settings
            .default_tools(profile.tool_list_modifiers)
            .unwrap_or_else(|| tools::DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect())
    };
    let names = if profile.tool_list_modifiers {
        // What a pattern can activate: the built-in tools in pi 1.6.0's registration order,
        // then its built-in extensions' tools (pi's `powershell` is not one of pith's).
        let mut registry: Vec<&str> = tools::ALL_TOOLS.to_vec();
        if profile.codemode {
            registry.push(crate::codemode::NAME);
        }
        if profile.mcp == crate::protocol::McpDialect::Pi {
            registry.push(tools::tool_search::NAME);
        }
        tools::selection::select(
            &defaults,
            opts.tools_arg.as_deref(),
            &opts.exclude_tools,
            true,
            &registry,
        )
    } else {
        tools::selection::select(
            &defaults,
            opts.tools.as_deref(),
            &opts.exclude_tools,
            false,
            &[],
        )
    };
    let mut active: Vec<Arc<dyn Tool>> = Vec::new();
    for n in &names {
        match tool_for(n, profile) {
            Some(t) => active.push(Arc::from(t)),
            None => eprintln!(
                "Warning: Unknown tool \"{n}\". Valid tools: {}",
                tools::ALL_TOOLS.join(", ")
            ),
        }
    }
    active
}

/// A tool of the version's tool set by name: `codemode` (pi 1.6.0's, `crate::codemode`, which
/// sits above the tools), else [`tools::tool_for`].
fn tool_for(name: &str, profile: &crate::protocol::Tools) -> Option<Box<dyn Tool>> {
    if profile.codemode && name == crate::codemode::NAME {
        return Some(Box::new(crate::codemode::CodemodeTool {
            docs_path: crate::codemode::docs_path(),
        }));
    }
    tools::tool_for(name, profile)
}

/// pi 1.6.0 activates the tools that reach MCP tools not declared to the model, from the
/// configuration: `tool_search` for servers with `deferred` tools, `codemode` (when this build
/// has it and `autoEnableCodemode` is not false) for servers with `codemode` tools.
fn activate_discovery(
    plugins: &crate::core::plugins::PluginConfig,
    active: &mut Vec<Arc<dyn Tool>>,
    profile: &crate::protocol::Tools,
) {
    use crate::mcp::config::Exposure;
    let enabled = || plugins.mcp.iter().filter(|s| s.enabled);
    let has = |e: Exposure| enabled().any(|s| s.configured_exposures().any(|x| x == e));
    let mut wanted: Vec<&str> = Vec::new();
    if has(Exposure::Codemode) && plugins.auto_enable_codemode {
        wanted.push("codemode");
    }
    if has(Exposure::Deferred) {
        wanted.push(tools::tool_search::NAME);
    }
    for name in wanted {
        if active.iter().any(|t| t.name() == name) {
            continue;
        }
        if let Some(t) = tool_for(name, profile) {
            active.push(Arc::from(t));
        }
    }
}

/// Permission rules (`--allow` / `--ask` / `--deny`, `--permission-default`, settings
/// `pith.permissions`) and `--confirm-tools`, merged: a project only adds (its `confirmTools`
/// joins the command line's or the user's list, its `allow` rules and looser default are
/// ignored). A rule pith cannot read stops the start.
fn permissions(
    opts: &Options,
    settings: &Settings,
    cwd: &std::path::Path,
    plugins: &mut crate::core::plugins::PluginConfig,
) -> Result<(), String> {
    if opts.confirm_tools.is_some() {
        let project = settings.project_confirm_tools().unwrap_or_default();
        plugins.confirm_tools = std::mem::take(&mut plugins.confirm_tools).union(project);
    }
    let (user, project) = settings.permissions();
    if opts.permission_rules.is_empty()
        && opts.permission_default.is_none()
        && user.is_none()
        && project.is_none()
        && plugins.confirm_tools.is_none()
    {
        // Nothing to decide (pi's behaviour): no policy, and no path resolved at start-up.
        return Ok(());
    }
    let canonical = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let (policy, warnings) = crate::perms::Policy::build(&crate::perms::Sources {
        cli: &opts.permission_rules,
        cli_default: opts.permission_default,
        user,
        project,
        confirm: &plugins.confirm_tools,
        ui: plugins.ui,
        anchors: crate::perms::anchors(
            canonical,
            config::home_dir().map(|h| std::fs::canonicalize(&h).unwrap_or(h)),
        ),
    })
    .map_err(|e| format!("Error: {e}"))?;
    for w in warnings {
        eprintln!("{w}");
    }
    plugins.permissions = policy;
    Ok(())
}

/// Where skills and prompt templates will be read from (on first use).
fn resource_options(
    opts: &Options,
    settings: &Settings,
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
    profile: &'static crate::protocol::Profile,
    project_trusted: bool,
) -> crate::resources::LazyResources {
    let cwd = cwd.to_string_lossy().into_owned();
    let agent_dir = crate::resources::paths::resolve(&cwd, &agent_dir.to_string_lossy());
    crate::resources::LazyResources::new(crate::resources::LoadOptions {
        cwd,
        agent_dir,
        home: config::home_dir().map(|h| h.to_string_lossy().into_owned()),
        global_settings: settings.global().clone(),
        project_settings: project_trusted.then(|| settings.project().clone()),
        cli_skills: opts.skills.clone(),
        cli_templates: opts.prompt_templates.clone(),
        no_skills: opts.no_skills,
        no_templates: opts.no_prompt_templates,
        profile: &profile.resources,
        project_trusted,
    })
}

/// pi 0.87.1's `--session-id` rules: a safe id, not combined with `--session` / `--continue`.
fn check_session_id(id: &str, opts: &Options) -> Result<(), String> {
    let conflicts: Vec<&str> = [
        opts.session.as_ref().map(|_| "--session"),
        opts.continue_session.then_some("--continue"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !conflicts.is_empty() {
        return Err(format!(
            "Error: --session-id cannot be combined with {}",
            conflicts.join(", ")
        ));
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid = edge(id.chars().next())
        && edge(id.chars().last())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        return Err("Error: Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character".to_string());
    }
    Ok(())
}

/// The session file in `dir` whose header has exactly this id.
pub(crate) fn find_session_by_id(dir: &std::path::Path, id: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .find(|p| {
            crate::session::store::read_header(p)
                .is_some_and(|h| h.get("id").and_then(|v| v.as_str()) == Some(id))
        })
}

/// pith's own ends of a machine it drives in-process (print/json modes, `--list-models` with
/// extensions): commands go in, frames come out, signals and stdout's state go to `control_tx`.
struct Local {
    input_tx: crossbeam_channel::Sender<io::stdin::Input>,
    control_tx: crossbeam_channel::Sender<io::watch::Control>,
    stdout_rx: crossbeam_channel::Receiver<Vec<u8>>,
}

/// The channels of a machine driven in-process, and pith's ends of them.
fn local_channels() -> (Channels, Local) {
    let (input_tx, input_rx) = crossbeam_channel::bounded(4);
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let (worker_tx, worker_rx) = crossbeam_channel::bounded(WORKER_QUEUE);
    let (stdout_tx, stdout_rx) = crossbeam_channel::bounded::<Vec<u8>>(io::stdout::QUEUE_FRAMES);
    (
        Channels {
            input: input_rx,
            control: control_rx,
            worker: worker_rx,
            worker_tx,
            stdout: stdout_tx,
        },
        Local {
            input_tx,
            control_tx,
            stdout_rx,
        },
    )
}

/// `-p` / `--mode json`: one prompt through the same machine, its frames filtered here instead of
/// going to stdout as they are. Print mode writes the final assistant text; json mode writes
/// every event line. Exit 1 (message on stderr) when the prompt or the run fails.
fn run_oneshot(
    startup: Startup,
    mode: Mode,
    prompts: Vec<initial_message::Prompt>,
    result_file: Option<PathBuf>,
) -> i32 {
    let started = std::time::Instant::now();
    let output_wanted = startup.output_schema.is_some();
    let session_id = startup.session.id().to_string();
    let session_file = startup
        .session
        .file()
        .map(|f| f.to_string_lossy().into_owned());
    let (
        channels,
        Local {
            input_tx,
            control_tx: _control_tx,
            stdout_rx,
        },
    ) = local_channels();
    let signals = io::watch::install();
    if signals.is_err() {
        eprintln!("pith: cannot listen for signals");
    }
    if io::watch::spawn(signals.ok(), _control_tx.clone()).is_err() {
        eprintln!("pith: cannot listen for signals or watch stdout");
        io::watch::restore_defaults();
    }
    // json mode starts with the session header, as pi's; under `--sandbox` a `sandbox` line
    // follows (pith's own, docs/rpc.md).
    let header = (mode == Mode::Json).then(|| {
        let mut h = format!(
            "{}\n",
            crate::session::store::to_line(startup.session.header())
        );
        if let Some(sb) = &startup.sandbox {
            let mut line = serde_json::json!({"type": "sandbox"});
            if let (Some(l), serde_json::Value::Object(state)) =
                (line.as_object_mut(), sb.state_json())
            {
                l.extend(state);
            }
            h.push_str(&format!("{line}\n"));
        }
        h
    });
    // The prompts go in one at a time: the next once the previous run has settled (as pi awaits
    // each prompt); a refused prompt ends the sequence. Dropping the sender ends the input.
    let mut pending: std::collections::VecDeque<serde_json::Value> = prompts
        .into_iter()
        .map(|p| {
            let mut cmd = serde_json::json!({"type": "prompt", "message": p.text});
            if !p.images.is_empty() {
                cmd["images"] = serde_json::to_value(&p.images).unwrap_or_default();
            }
            cmd
        })
        .collect();
    let mut input = Some(input_tx);
    let mut send_next =
        move |input: &mut Option<crossbeam_channel::Sender<io::stdin::Input>>| match (
            pending.pop_front(),
            input.as_ref(),
        ) {
            (Some(cmd), Some(tx)) => {
                if tx.send(io::stdin::Input::Json(cmd)).is_err() {
                    input.take();
                }
            }
            _ => {
                input.take();
            }
        };
    send_next(&mut input);
    let collector = std::thread::spawn(move || {
        use std::io::Write;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if let Some(h) = header {
            let _ = out.write_all(h.as_bytes()).and_then(|_| out.flush());
        }
        let mut failure: Option<String> = None;
        let mut final_text: Option<String> = None;
        // The last limit that ended a run (`run_limit_reached`): its kind, limit and use.
        let mut limit: Option<(crate::limits::Kind, f64, f64)> = None;
        let mut summary = crate::result_record::Summary {
            output_wanted,
            ..Default::default()
        };
        for line in stdout_rx.iter() {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else {
                continue;
            };
            let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or("");
            summary.observe(&v);
            if ty == "response" {
                if v.get("success") == Some(&serde_json::Value::Bool(false)) {
                    failure = v.get("error").and_then(|e| e.as_str()).map(str::to_string);
                    input.take();
                }
                continue;
            }
            if ty == "agent_settled" {
                send_next(&mut input);
            }
            if ty == "run_limit_reached" {
                let kind = v["limit"].as_str().and_then(crate::limits::Kind::from_name);
                let num = |k: &str| v[k].as_f64().unwrap_or(0.0);
                limit = kind.map(|k| (k, num("value"), num("used")));
                // No further prompt: a limit ends the job.
                input.take();
            }
            if mode == Mode::Json && out.write_all(&line).and_then(|_| out.flush()).is_err() {
                break;
            }
            if ty == "agent_end" {
                let last = v["messages"]
                    .as_array()
                    .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"));
                if let Some(a) = last {
                    match a["stopReason"].as_str() {
                        Some("error") | Some("aborted") => {
                            failure = Some(
                                a["errorMessage"]
                                    .as_str()
                                    .unwrap_or("the run failed")
                                    .to_string(),
                            );
                        }
                        _ => {
                            failure = None;
                            let text: String = a["content"]
                                .as_array()
                                .map(|c| {
                                    c.iter()
                                        .filter_map(|b| b["text"].as_str())
                                        .collect::<Vec<_>>()
                                        .join("")
                                })
                                .unwrap_or_default();
                            final_text = Some(text);
                        }
                    }
                }
            }
        }
        if mode == Mode::Print {
            // With an output schema, the answer is the structured output (one line of JSON).
            let printed = match (&summary.structured, output_wanted) {
                (Some(v), true) => Some(v.to_string()),
                (None, true) => None,
                (_, false) => final_text.clone(),
            };
            if let Some(t) = printed {
                let _ = writeln!(out, "{t}");
            }
        }
        let output_failed = (failure.is_none() && limit.is_none() && output_wanted)
            .then(|| summary.structured.is_none().then(|| summary.output_error()))
            .flatten();
        // The result record: json mode's last line, and `--result-file`.
        let record = summary.record(&crate::result_record::Ending {
            error: failure.as_deref(),
            text: final_text.as_deref(),
            session_id: &session_id,
            session_file: session_file.as_deref(),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        let line = crate::rpc::response::line(&record);
        if mode == Mode::Json {
            let _ = out.write_all(&line).and_then(|_| out.flush());
        }
        if let Some(path) = &result_file {
            if let Err(e) = crate::result_record::write_atomically(path, &line) {
                eprintln!("pith: cannot write the result file {}: {e}", path.display());
            }
        }
        (failure, limit, output_failed)
    });
    let machine = Machine::new(startup, channels);
    let exit = machine.run_to_exit();
    match collector.join() {
        Ok((_, Some((kind, value, used)), _)) if exit.code() == 0 => {
            eprintln!(
                "pith: run limit reached: {} {value} (used {used})",
                kind.name()
            );
            cli::ExitCode::of_limit(kind).code()
        }
        Ok((Some(err), _, _)) => {
            eprintln!("{err}");
            if exit.code() != 0 {
                exit.code()
            } else {
                cli::EXIT_FAILURE
            }
        }
        Ok((None, _, Some(why))) if exit.code() == 0 => {
            eprintln!("pith: {why}");
            cli::ExitCode::OutputSchema.code()
        }
        Ok((None, _, _)) => exit.code(),
        Err(_) => cli::EXIT_FAILURE,
    }
}

fn run_rpc(startup: Startup, signals: io::watch::Signals) -> i32 {
    let (input_tx, input_rx) = crossbeam_channel::bounded(64);
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let (worker_tx, worker_rx) = crossbeam_channel::bounded(WORKER_QUEUE);
    let (stdout_tx, stdout_rx) = crossbeam_channel::bounded(io::stdout::QUEUE_FRAMES);

    // Only what the first answer needs starts before it: the stdin reader first (the host's
    // first command is read while the rest starts), then the stdout writer. The signal handlers
    // are in already (`run`); the watch thread that forwards them and notices the host hanging up
    // starts later (`Machine::with_late_start`).
    let spawned = (|| {
        io::stdin::spawn(input_tx)?;
        io::stdout::spawn(stdout_rx, control_tx.clone())
    })();
    let writer = match spawned {
        Ok(w) => w,
        Err(e) => {
            eprintln!("pith: cannot start threads: {e}");
            return cli::EXIT_FAILURE;
        }
    };
    let late = Box::new(move || {
        if let Err(e) = io::watch::spawn(Some(signals), control_tx) {
            eprintln!("pith: cannot listen for signals or watch stdout: {e}");
            io::watch::restore_defaults();
        }
    });

    let machine = Machine::new(
        startup,
        Channels {
            input: input_rx,
            control: control_rx,
            worker: worker_rx,
            worker_tx,
            stdout: stdout_tx,
        },
    )
    .with_late_start(late);
    let exit = machine.run_to_exit();
    // The machine and its senders are gone: the writer drains what is queued and stops. (The
    // stdin thread may still be blocked in read(2); exiting the process ends it.) After a signal
    // the host may not be reading at all, so the drain gets a short grace period only.
    // A failed start-up (an unknown model, an extension that failed to load) stops pith while
    // the host may still be writing to it (the
    // stdin thread holds a sender until its read ends): the same short drain.
    if matches!(exit, Exit::Signal(_) | Exit::StartupFailed { .. }) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        while !writer.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    } else {
        let _ = writer.join();
    }
    exit.code()
}
