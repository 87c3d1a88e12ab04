//! Entry points that take arbitrary bytes: the bodies of the fuzz targets under `fuzz/` and of
//! the regression tests for what they found (`tests/fuzz_regressions.rs`), so both run exactly
//! the same code. Each drives a part of pith the way the threads around it do, and checks what
//! must hold whatever the input — beyond "no panic, no hang, no unbounded allocation", which the
//! fuzzer itself watches:
//!
//! - [`rpc_input`]: stdin bytes through the line splitter, the JSON parser and the real state
//!   machine: every command line gets exactly one response, every frame is one JSON line, and
//!   splitting the bytes into other read sizes changes nothing.
//! - [`sse`]: the SSE parser gives the same events however the bytes are split.
//! - [`provider_stream`]: one API's stream decoder over SSE events, as `llm/stream.rs` runs it,
//!   then the machine's copy of the partial message and the spliced `message_update` snapshot:
//!   the stream ends with exactly one final event, and the snapshot is the message's JSON.
//! - [`provider_bedrock`]: lines `<event-type> <JSON payload>` encoded as AWS event-stream
//!   messages (valid CRCs, so the fuzzer reaches the decoder; a `!` first byte sends the rest
//!   raw instead, for the framing itself), then as [`provider_stream`].
//! - [`session_file`]: the session loader on a file's bytes: every complete entry line is
//!   loaded, the tree queries work, and an append followed by a reload keeps everything.
//! - [`tool_arguments`]: argument preparation and validation for every built-in tool; what
//!   passes validation passes it again unchanged.
//! - [`error_body`]: an HTTP error body made readable stays bounded.
//! - [`resource_file`]: a prompt template or skill file (YAML frontmatter, body) as both pi
//!   versions read it, then expanded with arguments.
//! - [`config_files`]: `models.json`, `registerProvider`, `mcp.json` and `settings.json` as
//!   read: a project's `mcp.json` override never moves a global server elsewhere.
//! - [`export_html`]: a session file exported as a page: nothing the session holds becomes
//!   markup (no script, style, frame or form of its making, no event handler, no unsafe link or
//!   image source), and the page's JSON data blocks cannot be ended early.
//! - [`extension_message`], [`mcp_message`]: lines an extension or an MCP server writes, decoded
//!   as the plugin host decodes them, with the tools they declare validated against their own
//!   schemas; every line pith would write back (and every RPC frame) is one JSON line.
//!
//! Nothing here runs a shell command or writes outside a private temporary directory: the
//! `bash` and `export_html` commands are only decoded, never executed.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

use crate::core::event::{Event, Worker};
use crate::core::machine::{Channels, Machine, Startup};
use crate::io::stdin::{Input, parse_line};
use crate::llm::api::{Builder, Framing};
use crate::llm::sse::{SseEvent, SseParser};
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{AgentMessage, AssistantMessage};
use crate::rpc::frame::{Frame, LineSplitter};

/// Split `data` into pieces whose sizes come from `seed` (1..=64 bytes, cycling), so the same
/// input is also tried with awkward read boundaries.
fn pieces<'a>(data: &'a [u8], seed: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut at = 0;
    let mut i = 0;
    std::iter::from_fn(move || {
        if at >= data.len() {
            return None;
        }
        let size = seed
            .get(i % seed.len().max(1))
            .map_or(7, |b| usize::from(b % 64) + 1);
        i += 1;
        let end = (at + size).min(data.len());
        let piece = &data[at..end];
        at = end;
        Some(piece)
    })
}

fn split_lines(data: &[u8], cap: usize, seed: Option<&[u8]>) -> Vec<Frame> {
    let mut splitter = LineSplitter::new(cap);
    let mut out = Vec::new();
    match seed {
        Some(seed) => pieces(data, seed).for_each(|p| splitter.feed(p, &mut out)),
        None => splitter.feed(data, &mut out),
    }
    splitter.finish(&mut out);
    out
}

/// The protocol version an input is run under: its first byte picks one of [`Version::ALL`]
/// (so every version's emitters get fuzzed, and an input always runs the same way).
///
/// [`Version::ALL`]: crate::protocol::Version::ALL
fn version_for(data: &[u8]) -> crate::protocol::Version {
    match data.first() {
        Some(b) => {
            let all = crate::protocol::Version::ALL;
            all[usize::from(*b) % all.len()]
        }
        None => crate::protocol::Version::default(),
    }
}

/// A private temporary directory for this process (the machine's cwd, session files).
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pith-harness-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

/// Commands that touch the machine outside this harness (a shell, files at any path).
fn executes_outside(obj: &serde_json::Map<String, Value>) -> bool {
    matches!(
        obj.get("type").and_then(Value::as_str),
        Some("bash" | "export_html" | "switch_session")
    )
}

/// stdin bytes through framing, JSON parsing and the state machine (in-memory session; a model
/// whose requests are refused at once, retries and automatic compaction off). After each
/// command the machine's workers are drained until it is idle, so a run is deterministic.
pub fn rpc_input(data: &[u8]) {
    // A small cap so the oversized-line path is reached too.
    const CAP: usize = 512;
    let whole = split_lines(data, CAP, None);
    assert_eq!(
        whole,
        split_lines(data, CAP, Some(data)),
        "framing depends on read sizes"
    );

    let (_input_tx, input_rx) = crossbeam_channel::bounded(1);
    let (_control_tx, control_rx) = crossbeam_channel::unbounded();
    let (worker_tx, worker_rx) = crossbeam_channel::unbounded::<Worker>();
    let (stdout_tx, stdout_rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    let cwd = scratch().clone();
    let startup = Startup {
        agent_dir: cwd.join("agent"),
        settings: crate::config::Settings::from_value(serde_json::json!({
            "retry": {"enabled": false},
            "compaction": {"enabled": false}
        })),
        registry: registry().clone(),
        auth: auth(),
        model: None,
        thinking: crate::message::ThinkingLevel::Off,
        scoped_models: Vec::new(),
        // What a session switch under 0.87 starts from: as the start-up, no model.
        defaults: crate::core::machine::SessionDefaults {
            cli_model: None,
            cli_level: None,
            scoped: None,
            settings_default: None,
            initial: std::cell::OnceCell::from(None),
        },
        session: crate::session::Session::new(&cwd.to_string_lossy(), None, None),
        tools: crate::tools::DEFAULT_TOOLS
            .iter()
            .filter_map(|n| crate::tools::builtin_tool(n))
            .map(std::sync::Arc::from)
            .collect(),
        custom_system_prompt: None,
        append_system_prompt: None,
        no_context_files: true,
        faux_script: None,
        partials: crate::rpc::event::Partials::Full,
        sandbox: None,
        compat: version_for(data),
        limits: Default::default(),
        heartbeat: None,
        output_schema: None,
        resources: crate::resources::LazyResources::new(crate::resources::LoadOptions {
            cwd: cwd.to_string_lossy().into_owned(),
            agent_dir: cwd.join("agent").to_string_lossy().into_owned(),
            home: None,
            global_settings: serde_json::Map::new(),
            project_settings: None,
            cli_skills: Vec::new(),
            cli_templates: Vec::new(),
            no_skills: true,
            no_templates: true,
            profile: &version_for(data).profile().resources,
            project_trusted: false,
        }),
        plugins: crate::core::plugins::PluginConfig {
            ui: true,
            mode: "rpc",
            ..Default::default()
        },
        cwd,
    };
    let mut machine = Machine::new(
        startup,
        Channels {
            input: input_rx,
            control: control_rx,
            // A second receiver of the same channel: the harness hands the events over itself.
            worker: worker_rx.clone(),
            worker_tx,
            stdout: stdout_tx,
        },
    );
    let mut commands = 0usize;
    for frame in whole {
        let input = match frame {
            Frame::Line(line) => parse_line(&line),
            Frame::Oversized { bytes } => Input::Oversized { bytes },
        };
        let mut answered = true;
        if let Input::Json(Value::Object(obj)) = &input {
            if let Some(Value::String(ty)) = obj.get("type") {
                let _ = crate::rpc::command::decode(ty, obj);
                if executes_outside(obj) {
                    continue;
                }
                // Answers a dialog: no response of its own, by design.
                answered = ty != "extension_ui_response";
            }
        }
        commands += usize::from(answered);
        let _ = machine.handle_event(Event::Input(input));
        settle(&mut machine, &worker_rx);
    }
    let _ = machine.handle_event(Event::Input(Input::Eof));
    settle(&mut machine, &worker_rx);
    drop(machine);
    let mut responses = 0;
    for frame in stdout_rx.try_iter() {
        assert_eq!(frame.last(), Some(&b'\n'), "a frame without its newline");
        let body = &frame[..frame.len() - 1];
        assert!(!body.contains(&b'\n'), "a frame split over lines");
        let v: Value = serde_json::from_slice(body).expect("a frame that is not JSON");
        if v.get("type").and_then(Value::as_str) == Some("response") {
            responses += 1;
        }
    }
    assert_eq!(
        responses, commands,
        "every command gets exactly one response"
    );
}

/// A small registry: two custom providers at a port where nothing listens (a request fails at
/// once with "Connection error."). Cloning the full built-in list for every input would be most
/// of the work.
/// Keys for the two providers of [`registry`] (so prompts run, and fail at the connection).
fn auth() -> crate::llm::models::Auth {
    let mut auth = crate::llm::models::Auth::empty(std::sync::Arc::new(|_: &str| None));
    auth.set_runtime_key("fake", "k");
    auth.set_runtime_key("other", "k");
    auth
}

/// Hand the machine its workers' events until it is idle (each request fails at once; a bound
/// of 10 s turns a hang into a failure). An auto-retry back-off (seconds) is cut short: its
/// timer's event is handed over at once (the timer's own, later, is stale and ignored).
fn settle(machine: &mut Machine, workers: &crossbeam_channel::Receiver<Worker>) {
    while !machine.is_idle() {
        if let Some(id) = machine.retry.wait.as_ref().map(|(id, _)| *id) {
            let _ = machine.handle_event(Event::Worker(Worker::RetryDue { id }));
            continue;
        }
        match workers.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(w) => {
                let _ = machine.handle_event(Event::Worker(w));
            }
            Err(_) => panic!("the machine stays busy without any worker event"),
        }
    }
}

fn registry() -> &'static crate::llm::models::Registry {
    static REGISTRY: OnceLock<crate::llm::models::Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let models = r#"{"providers":{
            "fake":{"baseUrl":"http://127.0.0.1:9","api":"anthropic-messages","apiKey":"k",
                "models":[{"id":"m1","reasoning":true},{"id":"m2"}]},
            "other":{"baseUrl":"http://127.0.0.1:9","api":"openai-completions","apiKey":"k",
                "models":[{"id":"o1","reasoning":true}]}}}"#;
        crate::llm::models::Registry::from_models_json(models)
            .unwrap_or_else(|_| crate::llm::models::Registry::builtin())
    })
}

fn parse_sse<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> (Vec<SseEvent>, Option<String>) {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for c in chunks {
        if let Err(e) = parser.feed(c, &mut events) {
            return (events, Some(e.to_string()));
        }
    }
    parser.finish();
    (events, None)
}

/// The SSE parser: the same events (or the same error) whatever the read sizes.
pub fn sse(data: &[u8]) {
    let (whole, err) = parse_sse(std::iter::once(data));
    let (split, split_err) = parse_sse(pieces(data, data));
    assert_eq!(err.is_some(), split_err.is_some());
    if err.is_none() {
        assert_eq!(whole, split, "events depend on read sizes");
    }
}

/// The frames of a body: SSE, or AWS event-stream messages (Bedrock), as `llm/stream.rs` cuts
/// them.
enum Frames {
    Sse(SseParser),
    EventStream(crate::llm::aws::Framer),
}

impl Frames {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        match self {
            Frames::Sse(p) => p.feed(bytes, out).map_err(|e| e.to_string()),
            Frames::EventStream(p) => p.feed(bytes, out),
        }
    }

    fn finish(&mut self) -> Result<(), String> {
        match self {
            Frames::Sse(p) => {
                p.finish();
                Ok(())
            }
            Frames::EventStream(p) => p.finish(),
        }
    }
}

/// One API's decoder over the frames of `data`, run as `llm/stream.rs` runs it; then the events
/// applied to the machine's partial message and its `message_update` encoder.
pub fn provider_stream(api: &str, data: &[u8]) {
    let Some(kind) = crate::llm::stream::api_for(api) else {
        panic!("unknown api {api}");
    };
    let mut model = crate::llm::faux::model();
    model.api = api.to_string();
    model.provider = "fuzz".into();
    model.id = "fuzz-model".into();
    let req = LlmRequest {
        model,
        api_key: Some("sk-fuzz-key-0123".into()),
        system_prompt: String::new(),
        messages: Vec::new().into(),
        tools: Vec::new(),
        thinking: crate::message::ThinkingLevel::Medium,
        session_id: None,
        max_tokens: None,
        timeouts: crate::llm::Timeouts::default(),
        faux_script: None,
        sdk: version_for(data).profile().llm.sdk,
        no_cache: false,
        tool_arguments_error: false,
        extra: Default::default(),
    };
    let mut decoder = kind.decoder(&req);
    let mut b = Builder::new(&req.model).redacting(req.api_key.as_deref());
    b.sdk = req.sdk;
    let mut out = Vec::new();
    let mut parser = match kind.framing() {
        Framing::Sse => Frames::Sse(SseParser::new()),
        Framing::EventStream => Frames::EventStream(Default::default()),
    };
    let mut events = Vec::new();
    // As `stream_body`: a body that never gave an event but had text is an unexpected response.
    let mut saw_event = false;
    let mut preview = Vec::new();
    for chunk in pieces(data, data) {
        if let Err(e) = parser.feed(chunk, &mut events) {
            b.fail(e, false, None, &mut out);
        }
        saw_event |= !events.is_empty();
        let room = crate::llm::stream::PREVIEW_BYTES.saturating_sub(preview.len());
        if !saw_event {
            preview.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        for ev in events.drain(..) {
            if b.finished {
                break;
            }
            decoder.event(&ev, &mut b, &mut out);
        }
        if b.finished {
            break;
        }
    }
    if !b.finished {
        let framing = parser.finish();
        crate::llm::stream::end_of_body(
            framing,
            saw_event,
            &preview,
            decoder.as_mut(),
            &mut b,
            &mut out,
        );
    }
    assert!(b.finished, "the stream ended without a final event");
    let finals = out
        .iter()
        .filter(|e| matches!(e, StreamEvent::Done { .. } | StreamEvent::Error { .. }))
        .count();
    assert_eq!(finals, 1, "exactly one final event");
    assert!(
        matches!(
            out.last(),
            Some(StreamEvent::Done { .. } | StreamEvent::Error { .. })
        ),
        "the final event is the last"
    );
    follow_partial(&out);
}

/// What the machine does with stream events (`core/agent.rs`): apply them to its copy of the
/// partial and keep the spliced snapshot; the snapshot must always be the message's JSON.
fn follow_partial(events: &[StreamEvent]) {
    let mut partial: Option<AssistantMessage> = None;
    let mut encoder = crate::rpc::partial::PartialEncoder::new();
    for (n, ev) in events.iter().enumerate() {
        match ev {
            StreamEvent::Start { partial: p } => {
                encoder.update(ev, p);
                partial = Some(p.clone());
            }
            StreamEvent::Done { message } | StreamEvent::Error { message, .. } => {
                let text = serde_json::to_string(&AgentMessage::Assistant(message.clone()))
                    .expect("the final message serialises");
                assert!(serde_json::from_str::<Value>(&text).is_ok());
            }
            other => {
                let Some(p) = partial.as_mut() else { continue };
                crate::core::agent::apply_event(p, other);
                encoder.update(other, p);
                // Checking every snapshot is quadratic; every 8th and the last are enough.
                if n % 8 == 0 || n + 2 >= events.len() {
                    let snapshot: Value = serde_json::from_slice(encoder.snapshot(p))
                        .expect("the message_update snapshot is JSON");
                    let direct = serde_json::to_value(AgentMessage::Assistant(p.clone()))
                        .expect("the partial serialises");
                    assert_eq!(
                        snapshot, direct,
                        "the spliced snapshot differs from the message"
                    );
                }
            }
        }
    }
}

/// The ids of the lines of a version-3 file that are complete entries on their own.
fn complete_entry_ids(data: &[u8]) -> Option<HashSet<String>> {
    let mut lines = data.split(|&b| b == b'\n');
    let header = lines.by_ref().find_map(|l| {
        serde_json::from_slice::<Value>(l)
            .ok()
            .filter(Value::is_object)
    })?;
    let is_v3 = header.get("type").and_then(Value::as_str) == Some("session")
        && header.get("id").is_some_and(Value::is_string)
        && header.get("version").and_then(Value::as_u64) == Some(3);
    if !is_v3 {
        return None;
    }
    Some(
        lines
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .filter_map(|v| v.get("id")?.as_str().map(str::to_string))
            .collect(),
    )
}

/// The session loader on `data` as a file: complete entry lines are never lost, the tree
/// queries answer, and appending then reloading keeps every entry and makes the new one the leaf.
pub fn session_file(data: &[u8]) {
    let path = scratch().join("fuzz.jsonl");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(mut s) = crate::session::Session::open(&path) else {
        return;
    };
    if let Some(ids) = complete_entry_ids(data) {
        for id in &ids {
            assert!(
                s.entry(id).is_some(),
                "the complete entry {id} was not loaded"
            );
        }
    }
    let _ = s.take_context();
    let _ = s.build_context();
    let _ = s.branch_path();
    let _ = s.session_name();
    let _ = s.model();
    let _ = s.thinking_level();
    let _ = s.user_messages_for_fork();
    let _ = s.stats(&[], Some(1000));
    let _ = s.take_warnings();
    let before = s.entries().len();
    // The loader may have renumbered a migrated file: compare with what it wrote back.
    let Ok(reread) = crate::session::Session::open(&path) else {
        panic!("a file that loaded once no longer loads");
    };
    assert_eq!(reread.entries().len(), before);
    drop(reread);
    let size = |p: &PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let size_before = size(&path);
    let id = s.append_session_info("after");
    // Nothing is written while the session has no assistant message (spec 11.5).
    let written = size(&path) > size_before;
    assert!(written || s.entries().iter().all(|e| !e.is_assistant_message()));
    drop(s);
    if written {
        let again = crate::session::Session::open(&path).expect("the file loads after an append");
        assert_eq!(
            again.leaf_id(),
            Some(id.as_str()),
            "the appended entry is the leaf"
        );
        assert!(again.entries().len() > before, "the append was lost");
    }
}

/// Argument preparation and validation for every built-in tool.
pub fn tool_arguments(data: &[u8]) {
    let Ok(args) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for name in crate::tools::ALL_TOOLS {
        let Some(tool) = crate::tools::builtin_tool(name) else {
            continue;
        };
        if let Ok(valid) = crate::tools::prepare_and_validate(tool.as_ref(), &args) {
            let again = crate::tools::prepare_and_validate(tool.as_ref(), &valid)
                .expect("validated arguments validate again");
            assert_eq!(again, valid, "validation is not idempotent for {name}");
        }
    }
}

/// The bash line splitter of the permission rules: bounded output, and a line without any
/// shell syntax is one certain command, its words joined by one space.
pub fn bash_split(data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    let s = crate::perms::shell::split(&line);
    let out: usize = s.commands.iter().map(String::len).sum();
    assert!(
        out <= (crate::perms::shell::MAX_DEPTH + 2) * line.len().max(1),
        "{out} bytes of commands from {} bytes",
        line.len()
    );
    assert!(s.commands.len() <= line.len() + 1);
    if line
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-' || c == '.' || c == '/')
    {
        let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        // `case`, `function`, `select`, `coproc` open syntax the splitter does not read.
        let opaque = words
            .iter()
            .any(|w| ["case", "function", "select", "coproc"].contains(w));
        assert!(s.certain || opaque, "plain words are certain");
        let shown: Vec<String> = if words.is_empty() {
            Vec::new()
        } else {
            vec![words.join(" ")]
        };
        let keyword = words.first().is_some_and(|w| {
            [
                "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
            ]
            .contains(w)
        });
        if !keyword && !opaque && !words.iter().any(|w| w.contains('=')) {
            assert_eq!(s.commands, shown);
        }
    }
}

/// Permission rules: lines `allow|ask|deny RULE`, then the call (`TOOL SUBJECT`). Parsing
/// never panics; adding a deny rule never makes a decision looser, nor an ask rule one a rule
/// made; a deny rule
/// without a pattern on the tool always denies.
pub fn permission_rule(data: &[u8]) {
    use crate::perms::rules::{Anchors, Level, Rule, RuleSet, Subject};
    let text = String::from_utf8_lossy(data);
    let mut lines: Vec<&str> = text.lines().collect();
    let Some(call) = lines.pop() else { return };
    let (tool, subject) = call.split_once(' ').unwrap_or((call, ""));
    let anchors = Anchors {
        cwd: std::path::PathBuf::from("/w"),
        home: Some(std::path::PathBuf::from("/h")),
    };
    let mut rules = Vec::new();
    for l in lines.iter().take(16) {
        let (level, rule) = l.split_once(' ').unwrap_or((l, ""));
        let _ = crate::perms::rules::parse_rule(rule);
        if let (Some(level), Ok(r)) = (
            Level::parse(level),
            Rule::compile(rule, Level::parse(level).unwrap_or(Level::Deny), &anchors),
        ) {
            assert_eq!(r.level, level);
            rules.push(r);
        }
    }
    let split = crate::perms::shell::split(subject);
    let path = std::path::Path::new(subject);
    let decide = |set: &RuleSet| {
        [
            set.decide(tool, Subject::Command(&split, subject), Level::Ask),
            set.decide(tool, Subject::Path(path), Level::Allow),
            set.decide(tool, Subject::Call, Level::Deny),
        ]
    };
    let Ok(set) = RuleSet::new(rules.clone(), None) else {
        return;
    };
    let base = decide(&set);
    for (extra, level) in [
        ("bash(*)", Level::Deny),
        ("*", Level::Ask),
        ("r*(*)", Level::Ask),
    ] {
        let Ok(r) = Rule::compile(extra, level, &anchors) else {
            continue;
        };
        let mut more = rules.clone();
        more.push(r);
        let Ok(set) = RuleSet::new(more, None) else {
            continue;
        };
        for (a, b) in base.iter().zip(decide(&set).iter()) {
            // A rule overrides the default; it never loosens what a rule decided.
            if matches!(a.by, crate::perms::rules::By::Rule { .. }) || level == Level::Deny {
                assert!(b.level >= a.level, "{extra} loosened {a:?} to {b:?}");
            }
        }
    }
    if !tool.is_empty() && !tool.contains(['*', '?', '[', '{', '\\']) {
        if let Ok(r) = Rule::compile(tool, Level::Deny, &anchors) {
            let mut more = rules;
            more.push(r);
            let Ok(set) = RuleSet::new(more, None) else {
                return;
            };
            for v in decide(&set) {
                assert_eq!(v.level, Level::Deny);
            }
        }
    }
}

/// An HTTP error body made readable stays bounded.
pub fn error_body(data: &[u8]) {
    let body = String::from_utf8_lossy(data);
    let readable = crate::llm::error_body::readable(&body);
    if body.trim_start().starts_with('<') {
        assert!(
            readable.len() <= 600,
            "{} bytes from a page",
            readable.len()
        );
    } else if readable.len() > crate::llm::error_body::MAX_TEXT_BYTES + 40 {
        assert_eq!(readable, body, "only JSON passes long");
    }
}

/// One line pith writes to a child or to stdout: JSON, no newline inside.
fn check_line(line: &[u8]) {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    assert!(!body.contains(&b'\n'), "a line split in two");
    serde_json::from_slice::<Value>(body).expect("a line that is not JSON");
}

/// A tool result as it goes into a `tool_execution_end` frame.
fn check_output(o: &crate::tools::ToolOutput) {
    let v = serde_json::json!({"content": o.content, "details": o.details});
    check_line(&crate::rpc::response::line(&v));
}

/// The JSON values on the lines of `data` (what the child line reader hands over).
fn json_lines(data: &[u8]) -> impl Iterator<Item = Value> + '_ {
    data.split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
}

/// Validate some arguments against a schema that came from outside (an extension's or an MCP
/// server's tool): the validator must cope with any schema, and what passes passes again.
fn validate_with(name: &str, schema: &Value, samples: &[&Value]) {
    for args in samples {
        if let Ok(valid) = crate::tools::validate::validate_args(name, schema, args) {
            let again = crate::tools::validate::validate_args(name, schema, &valid)
                .expect("validated arguments validate again");
            assert_eq!(again, valid, "validation is not idempotent");
        }
    }
}

/// Lines an extension writes (`docs/extensions.md`), decoded as the plugin host does.
pub fn extension_message(data: &[u8]) {
    use crate::ext::protocol::{self, FromExt};
    let empty = serde_json::json!({});
    for v in json_lines(data) {
        let _ = protocol::decode_tool_call_result(&v);
        let _ = protocol::decode_cancel(&v);
        if let Ok(out) = protocol::decode_tool_result(Ok(v.clone())) {
            check_output(&out);
        }
        match protocol::decode(&v) {
            Ok(FromExt::Register(reg)) => {
                for t in &reg.tools {
                    validate_with(&t.name, &t.parameters, &[&empty, &v]);
                    check_line(&protocol::execute_tool(1, "call_1", &t.name, &v));
                }
                for c in &reg.commands {
                    check_line(&protocol::command(2, &c.name, &c.name));
                }
            }
            Ok(FromExt::Result { outcome, .. }) => {
                let _ = protocol::decode_tool_result(outcome);
            }
            Ok(FromExt::ToolUpdate { output, .. }) => {
                check_output(&output);
            }
            Ok(FromExt::Ui { id, request }) => {
                check_line(&crate::rpc::response::line(&crate::ext::ui::request_frame(
                    "ui-1", &request,
                )));
                if let (Some(id), Some(obj)) = (id, v.as_object()) {
                    let answer = crate::ext::ui::parse_answer(obj);
                    let fields = crate::ext::ui::answer_fields(request.method(), &answer);
                    check_line(&protocol::ui_response(&id, fields));
                }
            }
            Ok(FromExt::SendMessage(m)) => {
                check_line(&crate::rpc::response::line(&m.content));
            }
            Ok(FromExt::SendUserMessage { content, .. }) => {
                check_line(&crate::rpc::response::line(&content));
            }
            Ok(FromExt::NodeTooOld { version }) => {
                check_line(&crate::rpc::response::line(&version));
            }
            Ok(FromExt::StartupFailed { errors }) => {
                check_line(&crate::rpc::response::line(&errors));
            }
            Ok(FromExt::Call { params, .. }) => {
                check_line(&crate::rpc::response::line(&params));
            }
            Ok(FromExt::Error { error, .. }) => {
                check_line(&crate::rpc::response::line(&error));
            }
            Err(_) => {}
        }
        check_line(&protocol::event(Some(3), &v));
    }
}

/// Lines an MCP server writes (JSON-RPC), decoded as the plugin host does.
pub fn mcp_message(data: &[u8]) {
    use crate::mcp::protocol::{self, Incoming};
    let empty = serde_json::json!({});
    for v in json_lines(data) {
        match protocol::classify(&v) {
            Incoming::Response { result: Ok(r), .. } => {
                let _ = protocol::check_initialize(&r);
                if let Ok((tools, _cursor)) = protocol::parse_tools_page(&r) {
                    for t in &tools {
                        let name = protocol::tool_name("server", &t.name);
                        assert!(!name.is_empty());
                        validate_with(&name, &t.input_schema, &[&empty, &v]);
                        check_line(&protocol::request(
                            7,
                            "tools/call",
                            Some(protocol::call_params(&t.name, &v, 8)),
                        ));
                    }
                }
                if let Ok(out) = protocol::call_result(&r) {
                    check_output(&out);
                }
            }
            Incoming::Request { id, method } => {
                check_line(&protocol::error_response(&id, -32601, &method));
                check_line(&protocol::result_response(&id, v.clone()));
            }
            Incoming::Notification { params, .. } => {
                let _ = protocol::progress_text(&params);
            }
            Incoming::Response { result: Err(_), .. } | Incoming::Invalid(_) => {}
        }
    }
}

/// Configuration files a user or a checkout writes, parts separated by NUL bytes: `models.json`
/// (over each version's catalog) and an extension's `registerProvider` config; pi 1.6's
/// `mcp.json`, global and project; `settings.json`, global and project, with every accessor and
/// the `mcpServers` format. Nothing runs (`!command` values fail) and the environment is a fixed
/// map. What must hold: a project `mcp.json` entry without `command`, `url` or `type` never
/// changes where the global server of that name is reached (a checkout cannot point a user's
/// server, and its credentials, elsewhere).
pub fn config_files(data: &[u8]) {
    use std::path::Path;
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let mut next = || parts.next().unwrap_or("").to_string();
    let (models, provider, global_mcp, project_mcp, global_settings, project_settings) =
        (next(), next(), next(), next(), next(), next());
    let env = |k: &str| match k {
        "HOME" => Some("/home/u".to_string()),
        "TOKEN" => Some("secret".to_string()),
        _ => None,
    };
    for catalog in [
        crate::protocol::Catalog::V073,
        crate::protocol::Catalog::V087,
        crate::protocol::Catalog::V16,
    ] {
        let Ok(mut registry) = crate::llm::models::Registry::from_models_json_for(&models, catalog)
        else {
            continue;
        };
        if let Ok(config) = serde_json::from_str::<Value>(&provider) {
            let _ = registry.register_provider("fuzz", &config, &env);
            let _ = registry.models_of("fuzz");
        }
    }

    let read_with = |project: bool| {
        let (g, p) = (global_mcp.clone(), project_mcp.clone());
        move |path: &Path| -> Result<Option<String>, String> {
            if path.starts_with("/project") {
                Ok(project.then(|| p.clone()))
            } else {
                Ok(Some(g.clone()))
            }
        }
    };
    let run = |_: &str| None;
    let inputs = crate::mcp::mcp_json::Inputs {
        env: &env,
        home: Some(PathBuf::from("/home/u")),
        run: &run,
    };
    let (agent, project, sessions) = (
        Path::new("/agent"),
        Path::new("/project"),
        Path::new("/sessions"),
    );
    let global_only = crate::mcp::mcp_json::load(agent, None, sessions, &read_with(false), &inputs);
    let both =
        crate::mcp::mcp_json::load(agent, Some(project), sessions, &read_with(true), &inputs);
    let overrides: HashSet<String> = serde_json::from_str::<Value>(&project_mcp)
        .ok()
        .and_then(|v| v.get("mcpServers")?.as_object().cloned())
        .map(|m| {
            m.into_iter()
                .filter(|(_, e)| {
                    e.as_object().is_some_and(|e| {
                        !e.contains_key("command")
                            && !e.contains_key("url")
                            && !e.contains_key("type")
                    })
                })
                .map(|(name, _)| name)
                .collect()
        })
        .unwrap_or_default();
    for server in &both.servers {
        if overrides.contains(&server.name) {
            let global = global_only
                .servers
                .iter()
                .find(|g| g.name == server.name)
                .expect("an override applies only to a global server");
            assert_eq!(
                global.transport, server.transport,
                "a project override moved the server {}",
                server.name
            );
        }
        let _ = server.exposure_of("tool");
    }

    let dir = scratch().join("config");
    let agent_dir = dir.join("agent");
    let cwd = dir.join("cwd");
    if std::fs::create_dir_all(&agent_dir).is_err()
        || std::fs::create_dir_all(cwd.join(".pi")).is_err()
        || std::fs::write(agent_dir.join("settings.json"), &global_settings).is_err()
        || std::fs::write(cwd.join(".pi").join("settings.json"), &project_settings).is_err()
    {
        return;
    }
    let (settings, _warnings) = crate::config::Settings::load(&agent_dir, &cwd);
    for s in [settings.global_only(), settings] {
        let _ = (
            s.default_project_trust(),
            s.default_provider(),
            s.default_model(),
        );
        let _ = (
            s.default_thinking_level(),
            s.model_thinking_level("fake", "fake-model"),
        );
        let _ = (
            s.steering_mode(),
            s.follow_up_mode(),
            s.compaction_enabled(),
        );
        let _ = (
            s.compaction_reserve_tokens(),
            s.compaction_keep_recent_tokens(),
        );
        let _ = (
            s.retry_enabled(),
            s.retry_max_retries(),
            s.retry_base_delay_ms(),
        );
        let _ = (s.retry_max_agent_delay_ms(), s.retry_max_delay_ms());
        let _ = (
            s.codemode_presentation(),
            s.shell_path(),
            s.shell_command_prefix(),
        );
        let _ = (
            s.enabled_models(),
            s.default_tools(true),
            s.default_tools(false),
        );
        let _ = (s.block_images(), s.thinking_budgets(), s.protocol_version());
        let _ = (
            s.stream_stall_timeout_secs(),
            s.eof_idle_timeout_secs(),
            s.limits(),
        );
        let _ = (
            s.cache_warming_note(),
            s.confirm_tools(),
            s.project_confirm_tools(),
        );
        let _ = (
            s.permissions(),
            s.confirm_timeout_secs(),
            s.extension_timeout_secs(),
        );
        let _ = (s.node_path(), s.extension_tool_timeout_secs());
        let _ = (s.mcp_startup_timeout_secs(), s.mcp_tool_timeout_secs());
        let _ = s.connect_timeout_secs();
        let dot_mcp = serde_json::from_str::<Value>(&project_settings).ok();
        let _ = crate::mcp::config::resolve(
            s.mcp_servers(),
            dot_mcp.as_ref().map(|v| (v, cwd.as_path())),
            &cwd,
            &env,
        );
    }
}

/// A session file's bytes exported as a page (`export_html`, `--export`): the page is UTF-8,
/// and nothing the session holds becomes markup — every element is one the exporter writes
/// (no script, style, frame, object, form or base of the session's making), no element has an
/// event-handler or `style` attribute, links go only to `#…`, `http(s):`, `mailto:`, scheme-less
/// targets or the page's own JSONL download, images load only `data:image/…` base64, and the
/// JSON data blocks hold no `<` (nothing can end them early).
pub fn export_html(data: &[u8]) {
    let path = scratch().join("export.jsonl");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(session) = crate::session::Session::open_read_only(&path) else {
        return;
    };
    let extras = crate::session::export_html::Extras {
        system_prompt: Some(String::from_utf8_lossy(data).into_owned()),
        tools: Vec::new(),
    };
    let mut page = Vec::new();
    crate::session::export_html::render(&session, &extras, &mut page)
        .expect("rendering into memory cannot fail");
    let page = String::from_utf8(page).expect("the page is UTF-8");
    check_page(&page);
}

/// The properties [`export_html`] checks on a rendered page (see there).
fn check_page(page: &str) {
    const VIEWER_END: &str = "</script>\n</body>\n</html>\n";
    assert!(page.starts_with("<!DOCTYPE html>\n"), "the doctype first");
    assert!(page.ends_with(VIEWER_END), "the page ends with its viewer");
    // The viewer script (the page's own constant) is the last `<script>`.
    let viewer = page.rfind("<script>").expect("the viewer script");
    let mut rest = &page[..viewer];
    // The stylesheet: one block, in the head, before anything from the session.
    let style_start = rest.find("<style>").expect("the stylesheet");
    let style_end = rest.find("</style>").expect("the stylesheet's end");
    assert!(style_end > style_start);
    let mut markup = String::with_capacity(rest.len());
    markup.push_str(&rest[..style_start]);
    rest = &rest[style_end + "</style>".len()..];
    // The data blocks: JSON whose `<` are escaped.
    for open in [
        "<script type=\"application/json\" id=\"pith-data\">",
        "<script type=\"application/x-ndjson\" id=\"pith-jsonl\">",
    ] {
        if let Some(at) = rest.find(open) {
            let body_start = at + open.len();
            let len = rest[body_start..]
                .find("</script>")
                .expect("a data block ends");
            assert!(
                !rest[body_start..body_start + len].contains('<'),
                "a `<` inside the data block {open}"
            );
            markup.push_str(&rest[..at]);
            rest = &rest[body_start + len + "</script>".len()..];
        }
    }
    markup.push_str(rest);
    let head_end = markup.find("</head>").expect("the head ends");
    let mut at = 0;
    while let Some(off) = markup[at..].find('<') {
        let start = at + off;
        let end = start
            + markup[start..]
                .find('>')
                .expect("every `<` of the page opens a tag that ends");
        let tag = &markup[start + 1..end];
        at = end + 1;
        if tag.starts_with("!DOCTYPE") {
            assert_eq!(start, 0, "a doctype only at the start");
            continue;
        }
        let name_len = tag
            .trim_start_matches('/')
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(tag.trim_start_matches('/').len());
        let name = tag.trim_start_matches('/')[..name_len].to_ascii_lowercase();
        assert!(!name.is_empty(), "a bare `<` in the markup: {tag:?}");
        assert!(
            !matches!(
                name.as_str(),
                "script"
                    | "style"
                    | "iframe"
                    | "frame"
                    | "frameset"
                    | "object"
                    | "embed"
                    | "applet"
                    | "base"
                    | "form"
                    | "textarea"
                    | "svg"
                    | "math"
                    | "template"
                    | "link"
                    | "noscript"
            ) && (name != "meta" || start < head_end),
            "an element the exporter never writes: <{tag}>"
        );
        check_attributes(tag);
    }
}

/// A tag's attributes: all `name="value"` (the exporter always quotes with `"`, and escaping
/// keeps `"` out of values), none an event handler or `style`, and `href`/`src` safe.
fn check_attributes(tag: &str) {
    let Some(space) = tag.find(' ') else {
        return;
    };
    let mut rest = tag[space..].trim_start();
    while !rest.is_empty() {
        let (name, after) = match rest.find('=') {
            Some(eq) if !rest[..eq].contains(' ') => (&rest[..eq], &rest[eq + 1..]),
            _ => {
                // A boolean attribute (no value).
                let end = rest.find(' ').unwrap_or(rest.len());
                let name = &rest[..end];
                assert!(
                    name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                    "an odd attribute {name:?} in <{tag}>"
                );
                rest = rest[end..].trim_start();
                continue;
            }
        };
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
            "an odd attribute name {name:?} in <{tag}>"
        );
        assert!(
            !name.starts_with("on") && name != "style" && name != "srcdoc",
            "the attribute {name} in <{tag}>"
        );
        let value_and_rest = after.strip_prefix('"').expect("a quoted value");
        let close = value_and_rest.find('"').expect("the value ends");
        let value = unescape_attribute(&value_and_rest[..close]);
        match name {
            "href" => assert!(safe_href(&value), "the link {value:?} in <{tag}>"),
            "src" => assert!(
                value.starts_with("data:image/")
                    && value.split_once(";base64,").is_some_and(|(_, b64)| b64
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))),
                "the image source {value:?} in <{tag}>"
            ),
            _ => {}
        }
        rest = value_and_rest[close + 1..].trim_start();
    }
}

/// What a browser reads in an attribute value the exporter escaped.
fn unescape_attribute(v: &str) -> String {
    v.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A link the page may hold: its own anchors, its JSONL download, `http(s):`, `mailto:` or no
/// scheme (a browser ignores whitespace and control characters inside a scheme).
fn safe_href(v: &str) -> bool {
    if v.starts_with('#') || v.starts_with("data:application/x-ndjson;base64,") {
        return true;
    }
    let cleaned: String = v
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control())
        .collect::<String>()
        .to_ascii_lowercase();
    match cleaned.find(':') {
        Some(colon)
            if cleaned[..colon]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
                && colon > 0 =>
        {
            matches!(&cleaned[..colon], "http" | "https" | "mailto")
        }
        _ => true,
    }
}

/// A prompt template or a skill file, read as both versions read it, then expanded.
pub fn resource_file(data: &[u8]) {
    use crate::resources::{SourceInfo, skills, templates, yaml};
    let content = String::from_utf8_lossy(data);
    let _ = yaml::parse(&content);
    let source = SourceInfo {
        path: "/p/x".into(),
        source: "local".into(),
        scope: "temporary".into(),
        origin: "top-level".into(),
        base_dir: None,
    };
    // The first line doubles as the arguments of the expansions.
    let args = content.lines().next().unwrap_or("");
    for version in crate::protocol::Version::ALL {
        let profile = &version.profile().resources;
        let (template, _) =
            templates::from_file("/p/prompts/x.md", &content, profile, source.clone());
        if let Some(t) = template {
            let dialect = profile.template_args;
            let parsed = templates::parse_args(args, dialect);
            let _ = templates::substitute(&content, &parsed, dialect);
            let expanded =
                templates::expand(&format!("/x {args}"), std::slice::from_ref(&t), dialect);
            assert!(
                expanded.is_some(),
                "a template does not expand its own command"
            );
        }
        let (skill, _) =
            skills::from_file("/p/skills/x/SKILL.md", &content, profile, source.clone());
        if let Some(sk) = skill {
            let _ =
                skills::format_for_prompt(std::slice::from_ref(&sk), skills::ReadTool::Read, "");
            let _ = skills::expansion(&sk, &content, args);
        }
        let _ = skills::parse_command(&content);
    }
}

/// Bedrock's event-stream: each line `<event-type> <payload>` becomes one message with valid
/// CRCs (`exception:<name>` makes an exception message); a first byte `!` sends the rest raw.
pub fn provider_bedrock(data: &[u8]) {
    use crate::llm::aws::eventstream::encode;
    let bytes = match data.strip_prefix(b"!") {
        Some(raw) => raw.to_vec(),
        None => {
            let mut out = Vec::new();
            for line in data.split(|&b| b == b'\n') {
                let text = String::from_utf8_lossy(line);
                let (kind, payload) = text.split_once(' ').unwrap_or((&text, ""));
                let message = match kind.strip_prefix("exception:") {
                    Some(name) => encode(
                        &[(":message-type", "exception"), (":exception-type", name)],
                        payload.as_bytes(),
                    ),
                    None => encode(
                        &[
                            (":message-type", "event"),
                            (":event-type", kind),
                            (":content-type", "application/json"),
                        ],
                        payload.as_bytes(),
                    ),
                };
                out.extend_from_slice(&message);
            }
            out
        }
    };
    provider_stream("bedrock-converse-stream", &bytes);
}
