//! The command line as pi 0.73.1 and 0.87.1 have it, run as real processes: `--list-models`
//! with pi's exact table, piped stdin and `@file`s joined into the first prompt exactly as pi
//! joins them (and further messages as prompts of their own), the flags that mean something
//! without a terminal (`--verbose`, `--no-context-files`, `--no-builtin-tools`, repeated
//! `--append-system-prompt`, `--fork`), pi's terminal-only flags accepted with one warning line
//! each, pi's own commands, and exit code 2 only for what neither pi accepts.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::FAKE_NO_SESSION as FAKE;
use support::anthropic::text_replies as replies;
use support::fake_llm::FakeLlm;
use support::frames::{request_body, strip_cache_control};
use support::output::{stderr_utf8 as err, stdout_utf8 as out, with};
use support::{World, fake_world};

/// Runs pith in `w`; `stdin`: text piped in (then closed), or `None` for no stdin at all.
fn pith(w: &World, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = w
        .command(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pith");
    if let Some(text) = stdin {
        let mut sin = child.stdin.take().expect("stdin");
        sin.write_all(text.as_bytes()).expect("write stdin");
    }
    let pid = child.id();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(out) => out.expect("wait for pith"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("pith {args:?} did not exit within 20 s");
        }
    }
}

/// The user text of request `i`'s last message.
fn last_user_text(srv: &FakeLlm, i: usize) -> Value {
    let msgs = strip_cache_control(request_body(srv, i)["messages"].clone());
    msgs.as_array()
        .and_then(|m| m.last())
        .cloned()
        .expect("a message")["content"]
        .clone()
}

fn system_prompt(srv: &FakeLlm, i: usize) -> String {
    request_body(srv, i)["system"][0]["text"]
        .as_str()
        .expect("system text")
        .to_string()
}

// ------------------------------------------------------------------------------------------------
// --list-models

/// The table pi 0.73.1 and 0.87.1 print for the oracle's models.json (checked against both).
const TABLE: &str = "\
provider     model           context  max-out  thinking  images
fake         fake-model      200K     16.4K    yes       yes   
fake         fake-model-2    100K     8.2K     no        no    
fake-openai  fake-oai-model  128K     16.4K    no        no    
";

#[test]
fn list_models_prints_pis_table_and_exits() {
    let (w, srv) = fake_world(vec![]);
    let o = pith(&w, &["--list-models"], None);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), TABLE);
    assert_eq!(err(&o), "");
    // A search (pi-tui's fuzzy filter over "provider id"), a search that finds nothing, and
    // `--list-models` before another flag (no search then).
    let o = pith(&w, &["--list-models", "oai"], None);
    assert_eq!(
        out(&o),
        "provider     model           context  max-out  thinking  images\n\
         fake-openai  fake-oai-model  128K     16.4K    no        no    \n"
    );
    let o = pith(&w, &["--list-models", "zzz"], None);
    assert_eq!(out(&o), "No models matching \"zzz\"\n");
    let o = pith(&w, &["--list-models", "--verbose"], None);
    assert_eq!(out(&o), TABLE);
    // Nothing is asked of the provider.
    assert!(srv.requests().is_empty());
}

/// The table is sorted as pi sorts it (JavaScript's `localeCompare`: accents and then case only
/// break ties, so `E1 é1 e2` and `o Ø`; `é1` and `Ø` sorted after every ASCII id before), and a
/// models.json model that overrides a built-in one is listed once, with its own figures (pi
/// 0.73.1's output; 0.87.1 sorts the same, over its own catalogue of built-in models).
#[test]
fn list_models_sorts_and_overrides_as_pi() {
    let w = World::new();
    w.write_agent_file(
        "models.json",
        &json!({"providers":{
            "anthropic":{"models":[{"id":"claude-sonnet-4-5","name":"Mine","contextWindow":1000,"maxTokens":100}]},
            "Lab":{"baseUrl":"http://127.0.0.1:9","api":"openai-completions","apiKey":"k","models":[
                {"id":"é1","contextWindow":1000,"maxTokens":100},
                {"id":"e2","contextWindow":1000,"maxTokens":100},
                {"id":"E1","contextWindow":1000,"maxTokens":100},
                {"id":"Ø","contextWindow":1000,"maxTokens":100},
                {"id":"o","contextWindow":1000,"maxTokens":100}]}}})
        .to_string(),
    );
    let mut cmd = w.command(&["--list-models", "Lab "]);
    cmd.env("ANTHROPIC_API_KEY", "x");
    let o = cmd.output().unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "provider  model  context  max-out  thinking  images\n\
         Lab       E1     1K       100      no        no    \n\
         Lab       é1     1K       100      no        no    \n\
         Lab       e2     1K       100      no        no    \n\
         Lab       o      1K       100      no        no    \n\
         Lab       Ø      1K       100      no        no    \n"
    );
    let mut cmd = w.command(&["--list-models", "claude-sonnet-4-5"]);
    cmd.env("ANTHROPIC_API_KEY", "x");
    let o = cmd.output().unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "provider   model                       context  max-out  thinking  images\n\
         anthropic  claude-sonnet-4-20250514    200K     64K      yes       yes   \n\
         anthropic  claude-sonnet-4-5           1K       100      no        no    \n\
         anthropic  claude-sonnet-4-5-20250929  200K     64K      yes       yes   \n"
    );
}

#[test]
fn list_models_without_any_key_says_how_to_get_one() {
    let w = World::new();
    let o = pith(&w, &["--list-models"], None);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        out(&o),
        "No models available. Set a provider's API key in the environment (e.g. ANTHROPIC_API_KEY), in auth.json or with --api-key, or configure a provider in models.json.\n"
    );
}

// ------------------------------------------------------------------------------------------------
// The prompts of print / json mode

#[test]
fn piped_stdin_is_joined_to_the_first_message_as_pi_joins_it() {
    let (w, srv) = fake_world(replies(&["One.", "Two."]));
    let o = pith(
        &w,
        &with(&FAKE, &["-p", "summarize", "and then this"]),
        Some("  text from a pipe\n\n"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // Text mode prints the last answer only.
    assert_eq!(out(&o), "Two.\n");
    assert_eq!(srv.requests().len(), 2);
    // pi: stdin (trimmed), the @files, the first message, joined with nothing in between.
    assert_eq!(
        last_user_text(&srv, 0),
        json!([{"type":"text","text":"text from a pipesummarize"}])
    );
    // Each further message is a prompt of its own, after the first run.
    assert_eq!(
        last_user_text(&srv, 1),
        json!([{"type":"text","text":"and then this"}])
    );
    let msgs = strip_cache_control(request_body(&srv, 1)["messages"].clone());
    assert_eq!(msgs.as_array().map(Vec::len), Some(3));
}

#[test]
fn piped_stdin_alone_is_the_prompt_and_an_empty_pipe_is_none() {
    let (w, srv) = fake_world(replies(&["Read it."]));
    let o = pith(&w, &with(&FAKE, &["-p"]), Some("just the pipe"));
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "Read it.\n");
    assert_eq!(
        last_user_text(&srv, 0),
        json!([{"type":"text","text":"just the pipe"}])
    );
    let o = pith(&w, &with(&FAKE, &["-p"]), Some(" \n\t\n"));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        err(&o),
        "Error: no prompt given (pith -p \"prompt\", @files or piped stdin)\n"
    );
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn file_arguments_are_wrapped_as_pi_wraps_them() {
    let (w, srv) = fake_world(replies(&["Seen."]));
    std::fs::write(w.cwd().join("notes.txt"), "alpha\nbeta").unwrap();
    std::fs::write(w.cwd().join("empty.txt"), "").unwrap();
    std::fs::write(w.cwd().join("pic.png"), b"\x89PNG\r\n\x1a\nrest").unwrap();
    let o = pith(
        &w,
        &with(
            &FAKE,
            &[
                "-p",
                "@notes.txt",
                "@empty.txt",
                "@pic.png",
                "What is this?",
            ],
        ),
        Some("piped"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let cwd = w.cwd();
    let cwd = cwd.display();
    assert_eq!(
        last_user_text(&srv, 0),
        json!([
            {"type":"text","text":format!(
                "piped<file name=\"{cwd}/notes.txt\">\nalpha\nbeta\n</file>\n<file name=\"{cwd}/pic.png\"></file>\nWhat is this?")},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgpyZXN0"}}
        ])
    );
    // A missing file stops before anything is sent (pi: exit 1).
    let o = pith(&w, &with(&FAKE, &["-p", "@gone.txt", "hi"]), None);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(err(&o), format!("Error: File not found: {cwd}/gone.txt\n"));
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn stdin_is_not_read_in_rpc_mode() {
    // In rpc mode stdin carries the commands: a piped prompt is a (bad) command, not text.
    let (w, srv) = fake_world(vec![]);
    let o = pith(
        &w,
        &[
            "--mode",
            "rpc",
            "--provider",
            "fake",
            "--model",
            "fake-model",
        ],
        Some("hello\n"),
    );
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_str(out(&o).lines().next().expect("a line")).unwrap();
    assert_eq!(v["command"], "parse");
    assert!(srv.requests().is_empty());
}

// ------------------------------------------------------------------------------------------------
// Flags that mean something without a terminal

#[test]
fn context_files_builtin_tools_and_appended_prompts() {
    let (w, srv) = fake_world(replies(&["A.", "B.", "C."]));
    std::fs::write(w.cwd().join("AGENTS.md"), "Always answer in haiku.").unwrap();
    std::fs::write(w.cwd().join("extra.md"), "From a file.").unwrap();
    let o = pith(&w, &with(&FAKE, &["-p", "one"]), None);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(system_prompt(&srv, 0).contains("Always answer in haiku."));
    assert_eq!(
        request_body(&srv, 0)["tools"]
            .as_array()
            .map(|t| t.iter().map(|t| t["name"].clone()).collect::<Vec<_>>()),
        Some(vec![
            json!("read"),
            json!("bash"),
            json!("edit"),
            json!("write")
        ])
    );

    let o = pith(
        &w,
        &with(
            &FAKE,
            &[
                "-nc",
                "-nbt",
                "--append-system-prompt",
                "First addition.",
                "--append-system-prompt",
                "extra.md",
                "-p",
                "two",
            ],
        ),
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let sp = system_prompt(&srv, 1);
    assert!(!sp.contains("haiku"), "{sp}");
    assert!(sp.contains("\n\nFirst addition.\n\nFrom a file."), "{sp}");
    assert!(request_body(&srv, 1).get("tools").is_none());

    // --no-builtin-tools with --tools: the named ones only.
    let o = pith(
        &w,
        &with(&FAKE, &["--no-builtin-tools", "-t", "ls", "-p", "three"]),
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(request_body(&srv, 2)["tools"][0]["name"], "ls");
    assert_eq!(
        request_body(&srv, 2)["tools"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn verbose_reports_the_start_on_stderr() {
    let (w, _srv) = fake_world(replies(&["Hi."]));
    std::fs::write(w.cwd().join("AGENTS.md"), "x").unwrap();
    let o = pith(&w, &with(&FAKE, &["--verbose", "-p", "hi"]), None);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "Hi.\n");
    let e = err(&o);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines[0], "pith: model fake/fake-model (thinking medium)");
    assert!(lines[1].starts_with("pith: session in memory ("), "{e}");
    assert_eq!(
        lines[2],
        format!("pith: context file {}", w.cwd().join("AGENTS.md").display())
    );
    assert_eq!(lines[3], "pith: tools read, bash, edit, write");
    assert_eq!(lines[4], "pith: protocol pi 0.73");
    assert_eq!(lines.len(), 5, "{e}");
}

#[test]
fn fork_copies_a_session_into_a_new_file() {
    let (w, srv) = fake_world(replies(&["First.", "On the fork."]));
    let sessions = w.dir.path().join("sessions");
    let dir = sessions.to_str().unwrap();
    let base = [
        "--provider",
        "fake",
        "--model",
        "fake-model",
        "--session-dir",
        dir,
    ];
    let o = pith(&w, &with(&base, &["-p", "original"]), None);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let files: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let source = files[0].clone();
    let source_text = std::fs::read_to_string(&source).unwrap();
    let id = serde_json::from_str::<Value>(source_text.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    // By id prefix, as --session takes it.
    let o = pith(
        &w,
        &with(&base, &["--fork", &id[..8], "-p", "continue"]),
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(std::fs::read_to_string(&source).unwrap(), source_text);
    let mut files: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| *p != source)
        .collect();
    assert_eq!(files.len(), 1);
    let forked = std::fs::read_to_string(files.pop().unwrap()).unwrap();
    let lines: Vec<Value> = forked
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "session");
    assert_ne!(lines[0]["id"], json!(id));
    assert_eq!(lines[0]["parentSession"], source.to_str().unwrap());
    assert_eq!(lines[0]["cwd"], w.cwd().to_str().unwrap());
    // Every entry of the source, verbatim, then the new turn.
    let src_entries: Vec<&str> = source_text.lines().skip(1).collect();
    let fork_entries: Vec<&str> = forked.lines().skip(1).collect();
    assert_eq!(&fork_entries[..src_entries.len()], &src_entries[..]);
    assert_eq!(fork_entries.len(), src_entries.len() + 2);
    // The fork's request carries the copied conversation.
    let msgs = strip_cache_control(request_body(&srv, 1)["messages"].clone());
    assert_eq!(
        msgs,
        json!([
            {"role":"user","content":[{"type":"text","text":"original"}]},
            {"role":"assistant","content":[{"type":"text","text":"First."}]},
            {"role":"user","content":[{"type":"text","text":"continue"}]}
        ])
    );
    // pi refuses --fork with --session, --continue, --resume or --no-session.
    let o = pith(&w, &["--fork", "x.jsonl", "--no-session", "-p", "hi"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).starts_with("pith: --fork cannot be combined with --no-session\n"),
        "{}",
        err(&o)
    );
}

// ------------------------------------------------------------------------------------------------
// Accepted, ignored, refused

#[test]
fn terminal_only_flags_are_accepted_with_one_warning_each() {
    let (w, srv) = fake_world(replies(&["Fine."]));
    let o = pith(
        &w,
        &with(
            &FAKE,
            &[
                "--theme",
                "dark.json",
                "--no-themes",
                "-r",
                "--use-theme",
                "dark",
                "--tui-mode",
                "fullscreen",
                "--offline",
                "--thinking",
                "loud",
                "-p",
                "hi",
            ],
        ),
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "Fine.\n");
    assert_eq!(
        err(&o),
        "Warning: --theme loads a theme for pi's terminal UI; pith has no terminal UI, ignored\n\
         Warning: --no-themes concerns pi's terminal UI; pith has no terminal UI, ignored\n\
         Warning: --resume opens pi's interactive session picker; pith has no terminal UI, ignored (use --session <path|id> or --continue)\n\
         Warning: --use-theme selects a theme of pi's terminal UI; pith has no terminal UI, ignored\n\
         Warning: --tui-mode sets how pi's terminal UI draws; pith has no terminal UI, ignored\n\
         Warning: Invalid thinking level \"loud\". Valid values: off, minimal, low, medium, high, xhigh, max\n"
    );
    // The invalid level was ignored: the default (medium) thinking budget went out.
    assert_eq!(
        request_body(&srv, 0)["thinking"]["budget_tokens"],
        json!(8192)
    );
}

#[test]
fn only_what_neither_pi_accepts_exits_2() {
    let w = World::new();
    for (args, msg) in [
        (vec!["--bogus"], "Unknown option: --bogus"),
        (vec!["--bogus=1", "-p", "x"], "Unknown option: --bogus"),
        (vec!["-q"], "Unknown option: -q"),
        (
            vec!["--tui-mode", "sideways"],
            "Invalid TUI mode \"sideways\". Valid values: regular, fullscreen",
        ),
    ] {
        let o = pith(&w, &args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(
            err(&o),
            format!("pith: {msg}\nTry 'pith --help' for more information.\n"),
            "{args:?}"
        );
        assert_eq!(out(&o), "");
    }
}

#[test]
fn pis_own_commands_are_not_taken_for_prompts() {
    let (w, srv) = fake_world(vec![]);
    for cmd in ["install", "list", "config", "update", "auth"] {
        let o = pith(&w, &[cmd, "npm:x"], None);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert_eq!(out(&o), "");
        assert!(
            err(&o).starts_with(&format!("pith: `{cmd}` is a command of pi")),
            "{}",
            err(&o)
        );
    }
    assert!(srv.requests().is_empty());
}

#[test]
fn help_lists_the_flags() {
    let w = World::new();
    let o = pith(&w, &["--help"], None);
    assert_eq!(o.status.code(), Some(0));
    let h = out(&o);
    for flag in [
        "--list-models",
        "--verbose",
        "--no-context-files",
        "--no-builtin-tools",
        "--fork",
        "--append-system-prompt",
        "--offline",
        "--resume",
    ] {
        assert!(h.contains(flag), "{flag} missing from --help");
    }
}

/// `--mode` with a value pi does not know, or without one: pi 0.87.1's message on stderr and
/// exit 1 (pi 0.73.1 ignores the value and starts its terminal UI, which pith has not). Before,
/// pith printed a message of its own and exited 2.
#[test]
fn an_invalid_mode_gets_pis_message() {
    let w = World::new();
    for (args, message) in [
        (
            &["--mode", "tui"][..],
            "Error: Invalid mode \"tui\". Valid values: text, json, rpc\n",
        ),
        (
            &["--mode"][..],
            "Error: --mode requires text, json, or rpc\n",
        ),
        (
            &["--mode", "--no-session"][..],
            "Error: --mode requires text, json, or rpc\n",
        ),
    ] {
        let o = pith(&w, args, None);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(out(&o), "");
        assert_eq!(err(&o), message, "{args:?}");
    }
    let o = pith(&w, &support::faux_mode("text", &["hi"]), None);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "This is the faux provider. You said: hi\n");
}
