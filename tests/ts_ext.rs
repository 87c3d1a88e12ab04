//! pi's TypeScript extensions hosted by node (docs/extensions.md, "pi's TypeScript extensions"),
//! driven through the real binary with the project's own extensions (`fixtures/ts-ext/`) on the
//! offline `faux` provider. They need node >= 22.18: `PITH_TEST_NODE`, else the node the interop
//! suite installs (`tests/interop/deps/16`), else a `node` on PATH that is new enough; without one
//! they are skipped with a message. The refusal without node needs none.
//!
//! Each test was compared by hand with pi 1.6.0 running the same extensions over RPC against the
//! oracle's fake LLM (`../shared/oracle/setup-1.6.sh`, `fakellm.py`); the differences are noted
//! where they occur.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::frames::{keys, tool_end, ui};
use support::node::{node_version_ok, ts_fixture as fixture};
use support::{Pith, World};

/// A node too old to host pi's extensions (`PITH_TEST_OLD_NODE`, or one on PATH).
fn old_node() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("PITH_TEST_OLD_NODE") {
        candidates.push(p.into());
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        candidates.push(Path::new(dir).join("node"));
    }
    candidates.into_iter().find(|p| {
        p.is_file()
            && !node_version_ok(p)
            && std::process::Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
    })
}

/// `--mode rpc` on the faux provider with `script`, the node host on `node`, then `extra`.
fn spawn(world: &World, node: &Path, script: &str, extra: &[&str]) -> Pith {
    let mut args = vec!["--no-session"];
    args.extend_from_slice(extra);
    let mut cmd = world.faux_command(&world.tmp(), script, &args);
    cmd.env("PITH_NODE", node);
    Pith::spawn_cmd(cmd)
}

fn without_updates(frames: Vec<Value>) -> Vec<Value> {
    frames
        .into_iter()
        .filter(|f| f["type"] != "message_update")
        .collect()
}

/// gate.ts and toolbox.ts together: the input transformer, the confirm gate on bash (denied,
/// then allowed), a call's arguments changed by `tool_call` and its result by `tool_result`, a
/// tool's streamed updates, a tool aborted (its abort signal fires), an input handled by the
/// extension, a command, and a cancelled `new_session`.
///
/// pi 1.6.0 on the same two extensions: the same `extension_ui_request` confirm
/// (`{"method":"confirm","title":"Run bash?","message":"echo no > no.txt"}`), the same block
/// reason as the tool's error result, the same `tool_execution_update`s (`at 1 lines`: the
/// changed arguments) and reviewed result, `HELLO!` as the user
/// message, `ping` answered without a run, `/greet` notifying `Hello, Ada!`, and
/// `{"cancelled":true}` for `new_session`.
#[test]
fn gate_tools_command_input_and_switch() {
    let node = need_node!();
    let w = World::new();
    let script = r#"{"toolCalls":[{"name":"count_up","arguments":{"n":2}},{"name":"bash","arguments":{"command":"echo no > no.txt"}}]}
{"toolCalls":[{"name":"bash","arguments":{"command":"echo yes > yes.txt"}}]}
{"toolCalls":[{"name":"wait_abort","arguments":{}}]}
"#;
    let mut p = spawn(
        &w,
        &node,
        script,
        &["-e", &fixture("gate.ts"), "-e", &fixture("toolbox.ts")],
    );
    // The input transformer runs before the prompt: the model gets its text.
    let r = p.call(json!({"type":"prompt","message":"shout hello"}), "p");
    assert_eq!(r["success"], true, "{r}");
    let user = p.recv_until(|f| f["type"] == "message_end");
    assert_eq!(
        user.last().unwrap()["message"]["content"],
        json!([{"type":"text","text":"HELLO!"}])
    );
    // The gate asks before bash (the count_up call runs meanwhile).
    let confirm = loop {
        let f = p.recv();
        if f["type"] == "extension_ui_request" {
            break f;
        }
    };
    assert_eq!(
        keys(&confirm),
        vec!["type", "id", "method", "title", "message"]
    );
    assert_eq!(confirm["method"], "confirm");
    assert_eq!(confirm["title"], "Run bash?");
    assert_eq!(confirm["message"], "echo no > no.txt");
    p.send(json!({"type":"extension_ui_response","id":confirm["id"],"confirmed":false}));
    // Allowed the second time.
    let frames = without_updates(p.recv_until(|f| f["type"] == "extension_ui_request"));
    let denied = tool_end(&frames, "faux_1_1");
    assert_eq!(
        denied["result"],
        json!({"content":[{"type":"text","text":"gate: the user declined echo no > no.txt"}],"details":{}})
    );
    assert_eq!(denied["isError"], true);
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_update")
        .collect();
    assert_eq!(
        updates
            .iter()
            .map(|u| u["partialResult"].clone())
            .collect::<Vec<_>>(),
        vec![
            json!({"content":[{"type":"text","text":"at 1 lines"}],"details":{"i":1}}),
            json!({"content":[{"type":"text","text":"at 2 lines"}],"details":{"i":2}}),
        ]
    );
    assert_eq!(
        tool_end(&frames, "faux_1_0")["result"],
        json!({"content":[{"type":"text","text":"counted 2 lines"}],"details":{"n":2,"second":2,"reviewed":true}})
    );
    let confirm2 = frames.last().unwrap().clone();
    assert_eq!(confirm2["message"], "echo yes > yes.txt");
    p.send(json!({"type":"extension_ui_response","id":confirm2["id"],"confirmed":true}));
    // The waiting tool: its update, then abort ends it and fires its signal.
    let frames = without_updates(
        p.recv_until(|f| f["type"] == "tool_execution_update" && f["toolName"] == "wait_abort"),
    );
    assert_eq!(tool_end(&frames, "faux_4_0")["isError"], false);
    assert!(!w.cwd().join("no.txt").exists());
    assert!(w.cwd().join("yes.txt").exists());
    // A steer while the tool runs goes through the input hook too (as in pi 1.6.0).
    p.send(json!({"id":"st","type":"steer","message":"shout later"}));
    let frames = p.recv_until(|f| f["id"] == "st");
    assert_eq!(frames.last().unwrap()["success"], true, "{frames:#?}");
    let queued = frames
        .iter()
        .find(|f| f["type"] == "queue_update")
        .expect("queue_update");
    assert_eq!(queued["steering"], json!(["LATER!"]));
    p.send(json!({"id":"a","type":"abort"}));
    let frames = without_updates(p.recv_until(|f| f["type"] == "agent_settled"));
    assert!(
        frames
            .iter()
            .any(|f| f["id"] == "a" && f["success"] == true)
    );
    let aborted = tool_end(&frames, "faux_6_0");
    assert_eq!(aborted["isError"], true, "{aborted}");
    let until = Instant::now() + Duration::from_secs(10);
    while !w.cwd().join("aborted.txt").exists() {
        assert!(
            Instant::now() < until,
            "the tool's abort signal never fired"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // `handled` by the input handler: answered, no run.
    let r = p.call(json!({"type":"prompt","message":"ping"}), "ping");
    assert_eq!(
        r,
        json!({"id":"ping","type":"response","command":"prompt","success":true})
    );
    // A command: its notify, its message (recorded: the agent is idle), then the response.
    p.send(json!({"id":"g","type":"prompt","message":"/greet Ada"}));
    let n = ui(&mut p, "notify");
    assert_eq!(n["message"], "Hello, Ada!");
    assert_eq!(n["notifyType"], "info");
    let frames = p.recv_until(|f| f["id"] == "g");
    let custom = frames
        .iter()
        .find(|f| f["type"] == "message_end")
        .expect("the command's message");
    assert_eq!(custom["message"]["role"], "custom");
    assert_eq!(custom["message"]["customType"], "greeting");
    assert_eq!(custom["message"]["content"], "greeted Ada");
    // The switch canceller.
    let r = p.call(json!({"type":"new_session"}), "n");
    assert_eq!(r["data"], json!({"cancelled":true}));
    // get_commands names the extension that registered the command.
    let r = p.call(json!({"type":"get_commands"}), "c");
    assert_eq!(
        r["data"]["commands"],
        json!([{"name":"greet","description":"Greet someone","source":"extension","path":fixture("toolbox.ts")}])
    );
}

/// throws.ts, unsupported.ts and hangs.ts together (one host), with a 1-second call timeout:
/// each failure is an `extension_error` naming the extension, and the others keep running.
///
/// pi 1.6.0: the same `extension_error`s for the throwing `agent_start` handler and `/boom`
/// (`"extensionPath":"command:boom"`); it runs `registerProvider` with a `streamSimple` (pith
/// names it in an error instead: a custom stream needs pi's model runtime), gives `before_agent_start`
/// handlers its structured `systemPromptOptions` (pith builds its prompt itself and names the
/// field in an error) and waits for the hanging
/// `tool_call` handler forever (pith gives up after the call timeout and blocks the call, its
/// fail-safe default, then drops that extension alone).
#[test]
fn throwing_unsupported_and_hanging_extensions_are_reported() {
    let node = need_node!();
    let w = World::new();
    w.write_agent_file("settings.json", r#"{"pith":{"extensionTimeoutSeconds":1}}"#);
    let script = r#"{"toolCalls":[{"name":"bash","arguments":{"command":"echo ran > ran.txt"}}]}
{"text":"done"}
"#;
    let mut p = spawn(
        &w,
        &node,
        script,
        &[
            "-e",
            &fixture("throws.ts"),
            "-e",
            &fixture("unsupported.ts"),
            "-e",
            &fixture("hangs.ts"),
        ],
    );
    let r = p.call(json!({"type":"get_commands"}), "c");
    let names: Vec<&str> = r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["boom", "provide", "still"]);
    p.send(json!({"id":"u","type":"prompt","message":"/provide"}));
    assert_eq!(
        p.recv(),
        json!({"type":"extension_error","extensionPath":"command:provide","event":"command",
               "error":"pith does not support pi.registerProvider(\"mine\", {streamSimple}) (docs/extensions.md)"})
    );
    assert_eq!(p.recv()["id"], "u");
    p.send(json!({"id":"b","type":"prompt","message":"/boom"}));
    assert_eq!(
        p.recv(),
        json!({"type":"extension_error","extensionPath":"command:boom","event":"command","error":"throws: boom"})
    );
    assert_eq!(p.recv()["id"], "b");
    p.send(json!({"id":"p","type":"prompt","message":"run it"}));
    let frames = without_updates(p.recv_until(|f| f["type"] == "agent_settled"));
    let errors: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "extension_error")
        .collect();
    assert!(
        errors.contains(
            &&json!({"type":"extension_error","extensionPath":fixture("throws.ts"),
            "event":"agent_start","error":"throws: agent_start handler failed"})
        ),
        "{errors:#?}"
    );
    assert!(
        errors.contains(
            &&json!({"type":"extension_error","extensionPath":fixture("unsupported.ts"),
            "event":"before_agent_start",
            "error":"pith does not support before_agent_start's event.systemPromptOptions (docs/extensions.md)"})
        ),
        "{errors:#?}"
    );
    assert!(
        errors.contains(
            &&json!({"type":"extension_error","extensionPath":fixture("hangs.ts"),
            "event":"tool_call","error":"did not answer tool_call within 1 seconds"})
        ),
        "{errors:#?}"
    );
    let blocked = tool_end(&frames, "faux_1_0");
    assert_eq!(blocked["isError"], true);
    assert_eq!(
        blocked["result"]["content"][0]["text"],
        "Extension failed, blocking execution: did not answer tool_call within 1 seconds"
    );
    assert!(!w.cwd().join("ran.txt").exists());
    // The hanging extension is gone; the others stay.
    let r = p.call(json!({"type":"get_commands"}), "c2");
    let names: Vec<&str> = r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["boom", "provide"]);
}

/// api.ts under pi 1.6.0's protocol: pith's state read synchronously (model, thinking level,
/// idle, tools), a flag's default, the event bus, `exec`, and session writes (`setSessionName`
/// → `session_info_changed`, `appendEntry` → 1.6.0's `entry_appended`), as pi 1.6.0 emits them.
#[test]
fn api_reads_and_session_writes() {
    let node = need_node!();
    let w = World::new();
    let mut p = spawn(
        &w,
        &node,
        "",
        &["--compat", "1.6", "-e", &fixture("api.ts")],
    );
    p.send(json!({"id":"a","type":"prompt","message":"/api"}));
    let frames = p.recv_until(|f| f["id"] == "a");
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec![
            "session_info_changed",
            "entry_appended",
            "extension_ui_request",
            "response"
        ],
        "{frames:#?}"
    );
    assert_eq!(
        frames[0],
        json!({"type":"session_info_changed","name":"named by api"})
    );
    let entry = &frames[1]["entry"];
    assert_eq!(entry["type"], "custom");
    assert_eq!(entry["customType"], "bookmark");
    assert_eq!(entry["data"], json!({"at":1}));
    assert_eq!(
        frames[2]["message"],
        "model=faux thinking=off idle=true bash=true flag=dflt exec=hi/0 event=pong ui=true trusted=true session=id"
    );
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["sessionName"], "named by api");
}

/// `--sandbox workspace-write`: the node host is confined like pith's tools (writes outside the
/// working directory and `$TMPDIR` refused, no network). Skipped where the kernel has no
/// Landlock. (pi has no sandbox: nothing to compare.)
#[test]
fn the_host_is_sandboxed_like_tools() {
    let node = need_node!();
    let w = World::new();
    let outside = w.dir.path().join("home/out.txt");
    let script =
        json!({"toolCalls":[{"name":"escape","arguments":{"outside":outside}}]}).to_string();
    std::fs::write(w.tmp().join("faux.jsonl"), script).unwrap();
    let faux = w.tmp().join("faux.jsonl").to_string_lossy().to_string();
    let out = w
        .command(&support::faux_mode(
            "json",
            &[
                "--faux-script",
                &faux,
                "--no-session",
                "--sandbox",
                "workspace-write",
                "-e",
                &fixture("escape.ts"),
                "go",
            ],
        ))
        .env("PITH_NODE", &node)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    if out.status.code() == Some(5) {
        eprintln!(
            "SKIPPED: the kernel cannot enforce the sandbox: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let end: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|f| f["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool end: {stdout}"));
    assert_eq!(
        end["result"]["content"][0]["text"],
        "inside=ok outside=EACCES network=EPERM"
    );
    assert!(w.cwd().join("inside.txt").exists());
    assert!(!outside.exists());
}

/// Without a usable node, a configured pi extension stops pith before it starts: exit 2 in
/// every mode, with a message naming the extension and the ways on. `--no-extensions` starts.
#[test]
fn no_node_no_start() {
    let w = World::new();
    let ext_dir = w.agent_dir().join("extensions");
    std::fs::create_dir_all(&ext_dir).unwrap();
    std::fs::copy(fixture("gate.ts"), ext_dir.join("gate.ts")).unwrap();
    let gate = ext_dir.canonicalize().unwrap().join("gate.ts");
    // A PATH without node.
    let empty = w.tmp().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let run = |args: &[&str], node: Option<&str>| {
        let mut c = w.command(args);
        c.env("PATH", &empty).stdin(std::process::Stdio::null());
        if let Some(n) = node {
            c.env("PITH_NODE", n);
        }
        c.output().unwrap()
    };
    for mode in ["rpc", "json", "print"] {
        let out = run(&support::faux_mode(mode, &["hi"]), None);
        assert_eq!(out.status.code(), Some(2), "{mode}");
        assert!(out.stdout.is_empty(), "{mode}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&gate.to_string_lossy().to_string()), "{err}");
        assert!(err.contains("no `node` was found"), "{err}");
        assert!(err.contains("install node >= 22.18"), "{err}");
        assert!(err.contains("--no-extensions"), "{err}");
        assert!(err.contains("remove the extension"), "{err}");
    }
    // A node that dies before loading anything: no run either.
    let broken = w.tmp().join("broken-node");
    std::fs::write(&broken, "#!/bin/sh\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(
        &["-p", "--provider", "faux", "--model", "faux", "hi"],
        Some(&broken.to_string_lossy()),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the host of pi's extensions failed (startup): exited before registering (exit code 3)"
        ),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // A real node that is too old (this machine's PATH may have one: the host says so).
    if let Some(old) = old_node() {
        let out = run(
            &[
                "--mode",
                "json",
                "--provider",
                "faux",
                "--model",
                "faux",
                "hi",
            ],
            Some(&old.to_string_lossy()),
        );
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(", older than 22.18"), "{err}");
    } else {
        eprintln!("(no node older than 22.18 here: the too-old case is not run)");
    }
    // --no-extensions: pith starts without it.
    let out = run(
        &[
            "-p",
            "--no-extensions",
            "--provider",
            "faux",
            "--model",
            "faux",
            "hi",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// standins.ts: what real extensions from the npm registry import from pi's packages at run time
/// (`tests/interop/ts-ext/` runs some through pith and pi), served by the host's stand-ins: the
/// TypeBox and `StringEnum` schemas in TypeBox 1.x's key order, pi's output truncation, sizes,
/// agent dir, pi-tui's text helpers; and a handler for an event no pi emits, accepted silently.
///
/// pi 1.6.0 on the same extension: the same message, except that pi's theme colours the text
/// (`theme=` and the ellipsis of `trunc=` carry ANSI escapes there; the stand-ins do no styling).
#[test]
fn stand_ins_of_pi_packages() {
    let node = need_node!();
    let w = World::new();
    let mut p = spawn(
        &w,
        &node,
        "",
        &["--compat", "1.6", "-e", &fixture("standins.ts")],
    );
    p.send(json!({"id":"s","type":"prompt","message":"/standins"}));
    let frames = p.recv_until(|f| f["id"] == "s");
    assert_eq!(frames.len(), 2, "no extension_error at load: {frames:#?}");
    let schema = r#"{"type":"object","required":["action","pair","map"],"properties":{"action":{"type":"string","enum":["start","stop"],"description":"What to do"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2,"description":"Tags"},"pair":{"type":"array","additionalItems":false,"items":[{"type":"string"},{"type":"number"}],"minItems":2},"map":{"type":"object","patternProperties":{"^.*$":{"type":"number"}}}}}"#;
    assert_eq!(
        frames[0]["message"],
        format!(
            "schema={schema} size=999B,2.0KB,3.0MB tail=\"b\\nc\"/lines/3 head=\"abc\"/bytes/3 \
             agentDir=true theme=x width=3 trunc=ab... wrap=abcd|ef fuzzy=gamma keys=false \
             component=function"
        ),
        "{frames:#?}"
    );
    assert_eq!(frames[1]["data"]["disposition"], "handled");
}

fn spawn_fake(world: &World, node: &Path, extra: &[&str]) -> Pith {
    let mut args = support::fake_rpc(&["--no-session"]);
    args.extend_from_slice(extra);
    let mut cmd = world.command(&args);
    cmd.env("PITH_NODE", node);
    Pith::spawn_cmd(cmd)
}

fn notify_text(p: &mut Pith) -> String {
    let f = ui(p, "notify");
    f["message"].as_str().unwrap_or_default().to_string()
}

/// The system prompt of request `i` (Anthropic's `system` blocks, joined).
fn request_system(llm: &support::fake_llm::FakeLlm, i: usize) -> String {
    support::frames::request_body(llm, i)["system"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default()
}

/// hooks.ts on a fake Anthropic server, where each request can be read: `before_agent_start`
/// adds a custom message after the prompt and two handlers chain their system prompts (the run's
/// requests carry it, the next run's do not), `context` changes what one request sends (the
/// session keeps the user's words), the session manager's reads, context usage, the system
/// prompt, `getCommands`, `setActiveTools` (the next request offers only `read`) and `compact`
/// with its `onComplete` (no `compact` response: nobody sent the command).
///
/// pi 1.6.0 (`emitBeforeAgentStart`, `emitContext`, `_prepareRun` in its dist): the same order
/// of the run's messages (the prompt, then the handlers' custom messages), the same chaining (a
/// handler's `event.systemPrompt` and `ctx.getSystemPrompt()` are the earlier one's
/// replacement), the replacement only for that run, `context` changing the request alone, and
/// `ctx.compact()` answering through its callbacks. Run by hand through the oracle's `drive.py`
/// (the same commands, prompts and compactions on `fakellm.py`), pi 1.6.0 and `pith --compat
/// 1.6` wrote the same frames in the same order (the `/reads` line too: there with 1.6.0's
/// transcript system message among the entries and its `llama` / `mcp` commands) and sent the
/// same six requests: the forced prompt in the first only, `[redacted]` in every one, only `read`
/// offered after `/tools read`, the custom instructions in the summary request, none for the
/// extension's own summary (entry `fromHook: true`), the extension's tool offered until
/// `/tools read`. Only the `session_compact` handler's notify comes later in pith (a
/// notification handler runs while pith goes on; pi awaits it). pith's `estimatedTokensAfter`
/// differs from pi's by the same amount with or without an extension's summary (pith's
/// estimate).
#[test]
fn events_with_results_and_session_reads() {
    use support::anthropic::text_sse;
    use support::fake_llm::Reply;
    let node = need_node!();
    let (w, llm) = support::fake_world(vec![
        Reply::sse(text_sse(1, &["ok one"])),
        Reply::sse(text_sse(2, &["ok two"])),
        Reply::sse(text_sse(3, &["ok three"])),
        Reply::sse(text_sse(4, &["history summary"])),
        Reply::sse(text_sse(5, &["prefix summary"])),
        Reply::sse(text_sse(6, &["ok four"])),
    ]);
    w.write_agent_file("settings.json", r#"{"compaction":{"keepRecentTokens":1}}"#);
    let mut p = spawn_fake(&w, &node, &["-e", &fixture("hooks.ts")]);
    let r = p.call(json!({"type":"prompt","message":"inject: my secret"}), "p1");
    assert_eq!(r["success"], true, "{r}");
    let frames = without_updates(p.recv_until(|f| f["type"] == "agent_settled"));
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        types[..8],
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end"
        ],
        "{frames:#?}"
    );
    // The prompt as the user wrote it, then the handler's message, in the events (and session).
    assert_eq!(
        frames[3]["message"]["content"],
        json!([{"type":"text","text":"inject: my secret"}])
    );
    let hint = &frames[5]["message"];
    assert_eq!(
        (&hint["role"], &hint["customType"], &hint["content"]),
        (
            &json!("custom"),
            &json!("hint"),
            &json!("a hint from hooks")
        )
    );
    // The request: `context` redacted it; the custom message follows as user text.
    assert_eq!(
        support::frames::request_messages(&llm, 0),
        json!([{"role":"user","content":[{"type":"text","text":"inject: my [redacted]"}]},
               {"role":"user","content":[{"type":"text","text":"a hint from hooks"}]}])
    );
    let tools0: Vec<Value> = support::frames::request_body(&llm, 0)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(tools0.last(), Some(&json!("hooks_tool")));
    let forced = request_system(&llm, 0);
    assert!(
        forced.ends_with("\nAnswer briefly.\nChained: true."),
        "{forced}"
    );
    // The next run has pith's own prompt again.
    let r = p.call(json!({"type":"prompt","message":"plain"}), "p2");
    assert_eq!(r["success"], true, "{r}");
    p.recv_until(|f| f["type"] == "agent_settled");
    let own = request_system(&llm, 1);
    assert_eq!(format!("{own}\nAnswer briefly.\nChained: true."), forced);
    // Session reads (a label set by one command is read by the next).
    p.send(json!({"id":"l","type":"prompt","message":"/label"}));
    p.recv_until(|f| f["id"] == "l");
    p.send(json!({"id":"r","type":"prompt","message":"/reads"}));
    assert_eq!(
        notify_text(&mut p),
        "entries=8 branch=model_change,thinking_level_change,message,custom_message,message,message,message,label \
         leaf=true header=session label=start tree=1/-/1 window=200000 \
         commands=label,reads,prompt,tools,compact-now"
    );
    p.recv_until(|f| f["id"] == "r");
    let r = p.call(json!({"type":"get_entries"}), "e");
    assert_eq!(r["data"]["entries"].as_array().unwrap().len(), 8);
    // `ctx.getSystemPrompt()`: what the last request sent.
    p.send(json!({"id":"sp","type":"prompt","message":"/prompt"}));
    assert_eq!(notify_text(&mut p), own);
    p.recv_until(|f| f["id"] == "sp");
    // setActiveTools: only `read` from the next run on; getAllTools still lists the others.
    p.send(json!({"id":"t","type":"prompt","message":"/tools read"}));
    assert_eq!(notify_text(&mut p), "active=read all-has-bash=true");
    p.recv_until(|f| f["id"] == "t");
    let st = p.call(json!({"type":"prompt","message":"which tools?"}), "p3");
    assert_eq!(st["success"], true, "{st}");
    p.recv_until(|f| f["type"] == "agent_settled");
    let offered: Vec<Value> = support::frames::request_body(&llm, 2)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(offered, vec![json!("read")]);
    // ctx.compact(): compaction events, no `compact` response, then `onComplete` (and the
    // `session_compact` notification's notify, in either order: handlers run concurrently).
    p.send(json!({"id":"c","type":"prompt","message":"/compact-now"}));
    let mut frames = p.recv_until(|f| f["type"] == "extension_ui_request");
    frames.extend(p.recv_until(|f| f["type"] == "extension_ui_request"));
    let notes: Vec<String> = frames
        .iter()
        .filter(|f| f["type"] == "extension_ui_request")
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        notes.contains(&"session_compact: compaction false false manual".to_string()),
        "{notes:?}"
    );
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert!(
        !frames.iter().any(|f| f["command"] == "compact"),
        "{frames:#?}"
    );
    assert!(types.contains(&"compaction_start") && types.contains(&"compaction_end"));
    let end = frames
        .iter()
        .find(|f| f["type"] == "compaction_end")
        .unwrap();
    let summary = end["result"]["summary"].as_str().unwrap().to_string();
    assert!(summary.contains("history summary"), "{end}");
    assert!(
        notes.contains(&format!("compacted: {summary}")),
        "{notes:?}"
    );
    // The custom instructions reach the summary request.
    let summaries = format!(
        "{}{}",
        support::frames::request_body(&llm, 3),
        support::frames::request_body(&llm, 4)
    );
    assert!(summaries.contains("Keep it short."), "{summaries}");
    // session_before_compact: a cancel ends the compaction as aborted (pi's `Compaction
    // cancelled`); an extension's own summary is written without asking the model.
    let r = p.call(json!({"type":"prompt","message":"more"}), "p4");
    assert_eq!(r["success"], true, "{r}");
    p.recv_until(|f| f["type"] == "agent_settled");
    let r = p.call(
        json!({"type":"compact","customInstructions":"cancel"}),
        "k1",
    );
    assert_eq!(r["error"], "Compaction cancelled", "{r}");
    p.send(json!({"id":"k2","type":"compact","customInstructions":"mine"}));
    let frames = p.recv_until(|f| f["id"] == "k2");
    let r = frames.last().unwrap();
    assert_eq!(r["success"], true, "{frames:#?}");
    let summary = r["data"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("mine: "), "{summary}");
    assert!(summary.ends_with(" entries, manual"), "{summary}");
    // Its `session_compact` notification (handled concurrently: before or after the response).
    let note = "session_compact: compaction true true manual";
    if !frames.iter().any(|f| f["message"] == note) {
        p.recv_until(|f| f["message"] == note);
    }
    assert_eq!(r["data"]["details"], json!({"by":"hooks"}));
    assert_eq!(llm.requests().len(), 6);
    let r = p.call(json!({"type":"get_entries"}), "e2");
    let last = r["data"]["entries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (&last["type"], &last["summary"], &last["fromHook"]),
        (&json!("compaction"), &json!(summary), &json!(true))
    );
    // An abort while `before_agent_start` handlers run: as pi 1.6.0 (checked with the oracle's
    // driver), the prompt is answered once they have, the run starts with its messages and ends
    // aborted before any request, then the abort is answered.
    p.send(json!({"id":"s","type":"prompt","message":"slow"}));
    p.send(json!({"id":"a","type":"abort"}));
    let frames = without_updates(p.recv_until(|f| f["id"] == "a"));
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        (types[0], frames[0]["id"].as_str(), types[1]),
        ("response", Some("s"), "agent_start"),
        "{frames:#?}"
    );
    let assistant = frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
        .expect("the aborted reply");
    assert_eq!(assistant["message"]["stopReason"], "aborted");
    assert_eq!(frames.last().unwrap()["success"], true);
    assert_eq!(llm.requests().len(), 6);
    // A new session: the host's entries are the new session's (not the old ones plus more).
    let r = p.call(json!({"type":"new_session"}), "n");
    assert_eq!(r["success"], true, "{r}");
    let count = p.call(json!({"type":"get_entries"}), "e3")["data"]["entries"]
        .as_array()
        .unwrap()
        .len();
    p.send(json!({"id":"r2","type":"prompt","message":"/reads"}));
    let reads = notify_text(&mut p);
    assert!(reads.starts_with(&format!("entries={count} ")), "{reads}");
    p.recv_until(|f| f["id"] == "r2");
}

/// A node too old, and a host whose stdin closes at once (`pith --mode rpc < /dev/null`): pith
/// waits for the host's verdict and exits 2, under 0.73 (exit at idle) and 1.6 (pi's disposal at
/// end of input) alike. The node is a stand-in that says what the host says on an old node
/// (`node_too_old`), late, as a slow old node would. (pi has no such refusal.)
#[test]
fn too_old_node_with_closed_stdin_exits_2() {
    let w = World::new();
    let old = w.tmp().join("old-node");
    std::fs::write(
        &old,
        "#!/bin/sh\nsleep 0.3\necho '{\"type\":\"node_too_old\",\"version\":\"v20.1.0\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    for compat in ["0.73", "1.6"] {
        let out = w
            .command(&[
                "--mode",
                "rpc",
                "--compat",
                compat,
                "--provider",
                "faux",
                "--model",
                "faux",
                "--no-session",
                "-e",
                &fixture("gate.ts"),
            ])
            .env("PITH_NODE", &old)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{compat}: {err}");
        assert!(err.contains("is node v20.1.0, older than 22.18"), "{err}");
        assert!(out.stdout.is_empty(), "{compat}");
    }
}

/// fresh.ts: `ctx.newSession()` in a command starts a new session as `new_session` does (the
/// extensions' `session_before_switch` first: a cancel leaves the session as it was) and answers
/// `{cancelled}`; a `setup` callback (pi's writable SessionManager) raises an error naming it.
///
/// pi 1.6.0 does the same with pi-aliases' `/clear` (`tests/interop/ts-ext/` runs it through
/// both and compares the frames and the empty `get_messages` after it). After the refused
/// switch the session still has its five entries (model, thinking level, the 1.6 system
/// message, the prompt, the reply).
#[test]
fn new_session_from_a_command() {
    let node = need_node!();
    let w = World::new();
    let mut p = spawn(
        &w,
        &node,
        "{\"text\": \"Hello.\"}\n",
        &["--compat", "1.6", "-e", &fixture("fresh.ts")],
    );
    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    p.recv_until(|f| f["type"] == "agent_settled");
    p.send(json!({"id":"r","type":"prompt","message":"/fresh refuse"}));
    let frames = p.recv_until(|f| f["id"] == "r");
    let notify = frames
        .iter()
        .find(|f| f["method"] == "notify")
        .expect("notify");
    assert_eq!(
        notify["message"], "cancelled=true messages=5",
        "{frames:#?}"
    );
    p.send(json!({"id":"f","type":"prompt","message":"/fresh"}));
    let frames = p.recv_until(|f| f["id"] == "f");
    let notify = frames
        .iter()
        .find(|f| f["method"] == "notify")
        .expect("notify");
    assert!(
        notify["message"]
            .as_str()
            .unwrap()
            .starts_with("cancelled=false messages="),
        "{frames:#?}"
    );
    p.send(json!({"id":"m","type":"get_messages"}));
    let m = p.recv_until(|f| f["id"] == "m");
    assert_eq!(m.last().unwrap()["data"]["messages"], json!([]));
    p.send(json!({"id":"s","type":"prompt","message":"/fresh-setup"}));
    let frames = p.recv_until(|f| f["id"] == "s");
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("pith does not support ctx.newSession({setup})"),
        "{err}"
    );
}

/// pith with `args` (faux provider, no session) and its input closed at once: exit code, stdout,
/// stderr.
fn run_closed(w: &World, node: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec![
        "--mode",
        "rpc",
        "--provider",
        "faux",
        "--model",
        "faux",
        "--no-session",
    ];
    all.extend_from_slice(args);
    let out = w
        .command(&all)
        .env("PITH_NODE", node)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Flags pith does not know go to pi's extensions, parsed as pi parses them: api.ts registers
/// `--greeting` (a string, default `dflt`), which `/api` reads back. A flag no extension
/// registers, or a string flag without its value, stops pith at start-up as it stops pi 1.6.0
/// (the same `Error: …` lines, exit 1 in RPC mode); without any pi extension an unknown flag is
/// pith's usage error before anything starts (exit 2). pi 0.73.1 and 0.87.1 print the same.
#[test]
fn extension_flags_from_the_command_line() {
    let node = need_node!();
    let w = World::new();
    let api = fixture("api.ts");
    for greeting in [&["--greeting", "hello"][..], &["--greeting=hello"][..]] {
        let mut args = vec!["--compat", "1.6", "-e", api.as_str()];
        args.extend_from_slice(greeting);
        let mut p = spawn(&w, &node, "", &args);
        p.send(json!({"id":"a","type":"prompt","message":"/api"}));
        let frames = p.recv_until(|f| f["id"] == "a");
        let notify = frames
            .iter()
            .find(|f| f["type"] == "extension_ui_request")
            .expect("the notify");
        let text = notify["message"].as_str().unwrap();
        assert!(text.contains(" flag=hello "), "{greeting:?}: {text}");
    }
    for compat in ["0.73", "1.6"] {
        let (code, _, err) = run_closed(&w, &node, &["--compat", compat, "-e", &api, "--greeting"]);
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(
            err,
            "Error: Extension flag \"--greeting\" requires a value\n"
        );
        let (code, _, err) = run_closed(
            &w,
            &node,
            &[
                "--compat",
                compat,
                "-e",
                &api,
                "--nope",
                "--greeting",
                "x",
                "--also=1",
            ],
        );
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err, "Error: Unknown options: --nope, --also\n");
    }
    let (code, out, err) = run_closed(&w, &node, &["--greeting", "x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty());
    assert_eq!(
        err,
        "pith: Unknown option: --greeting\nTry 'pith --help' for more information.\n"
    );
}

/// An extension that fails to load (its factory throws, or the module has no default export)
/// stops pith at start-up, as pi 0.73.1, 0.87.1 and 1.6.0 stop: every failure on its own
/// `Error: Failed to load extension "<path>": …` line, then the way on, exit 1 in RPC mode
/// (pi names `pi -ne`). The other extensions do not run without it.
#[test]
fn an_extension_that_fails_to_load_stops_pith() {
    let node = need_node!();
    let w = World::new();
    let broken = fixture("broken.ts");
    let no_default = w.tmp().join("nodefault.ts");
    std::fs::write(&no_default, "export const x = 1;\n").unwrap();
    let no_default = no_default.to_string_lossy().into_owned();
    for compat in ["0.73", "0.87", "1.6"] {
        let (code, _, err) = run_closed(
            &w,
            &node,
            &[
                "--compat",
                compat,
                "-e",
                &fixture("api.ts"),
                "-e",
                &broken,
                "-e",
                &no_default,
            ],
        );
        assert_eq!(code, Some(1), "{compat}: {err}");
        assert_eq!(
            err,
            format!(
                "Error: Failed to load extension \"{broken}\": Failed to load extension: broken at load\n\
                 Error: Failed to load extension \"{no_default}\": Extension does not export a valid factory function: {no_default}\n\
                 Hint: Start without extensions using \"pith -ne\".\n"
            ),
            "{compat}"
        );
    }
    // A prompt sent before the host reported the failure is answered, not run.
    let mut p = spawn(&w, &node, r#"{"text":"never"}"#, &["-e", &broken]);
    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    let r = p.recv_until(|f| f["id"] == "p");
    let last = r.last().unwrap();
    assert_eq!(last["success"], false, "{r:#?}");
    assert_eq!(
        last["error"],
        "Prompt cancelled: a pi extension failed to start"
    );
}

/// A provider that a factory registers and pith refuses is one of pi's start-up errors (pi
/// 0.73.1, 0.87.1 and 1.6.0 stop, exit 1, each with its own wording of the check), listed before
/// the flags' errors and the failed loads, as pi lists them.
#[test]
fn a_refused_provider_in_a_factory_stops_pith() {
    let node = need_node!();
    let w = World::new();
    let bad = fixture("badprovider.ts");
    let broken = fixture("broken.ts");
    for (compat, text) in [
        (
            "0.73",
            "Provider px: \"baseUrl\" is required when defining models.",
        ),
        (
            "0.87",
            "Provider px, model m: no \"api\" specified. Set at provider or model level.",
        ),
        (
            "1.6",
            "Provider px, model m: no \"api\" specified. Set it at model level or provider level.",
        ),
    ] {
        let (code, _, err) = run_closed(&w, &node, &["--compat", compat, "-e", &bad]);
        assert_eq!(code, Some(1), "{compat}: {err}");
        assert_eq!(err, format!("Error: Extension \"{bad}\" error: {text}\n"));
        let (code, _, err) = run_closed(
            &w,
            &node,
            &["--compat", compat, "-e", &broken, "-e", &bad, "--nope"],
        );
        assert_eq!(code, Some(1), "{compat}: {err}");
        assert_eq!(
            err,
            format!(
                "Error: Extension \"{bad}\" error: {text}\n\
                 Error: Unknown option: --nope\n\
                 Error: Failed to load extension \"{broken}\": Failed to load extension: broken at load\n\
                 Hint: Start without extensions using \"pith -ne\".\n"
            ),
            "{compat}"
        );
    }
}

/// fresh.ts: `ctx.fork(entryId)` and `ctx.switchSession(path)` from commands run as the `fork`
/// and `switch_session` commands do (a new session file holding what came before the entry; the
/// file switched to) and resolve to `{cancelled}` only, as pi 1.6.0's RPC mode answers them;
/// `position: "at"` (pith's `fork` forks before the entry) raises an error naming it.
#[test]
fn fork_and_switch_session_from_commands() {
    let node = need_node!();
    let w = World::new();
    let sessions = w.tmp().join("sessions");
    let sessions = sessions.to_string_lossy().into_owned();
    let mut cmd = w.faux_command(
        &w.tmp(),
        "{\"text\": \"Hello.\"}\n",
        &[
            "--compat",
            "1.6",
            "--session-dir",
            &sessions,
            "-e",
            &fixture("fresh.ts"),
        ],
    );
    cmd.env("PITH_NODE", &node);
    let mut p = Pith::spawn_cmd(cmd);
    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    p.recv_until(|f| f["type"] == "agent_settled");
    let first = p.call(json!({"type":"get_state"}), "s1")["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let notify = |frames: &[Value]| {
        frames
            .iter()
            .find(|f| f["method"] == "notify")
            .map(|f| f["message"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no notify: {frames:#?}"))
    };
    p.send(json!({"id":"f","type":"prompt","message":"/forkfirst"}));
    let frames = p.recv_until(|f| f["id"] == "f");
    assert_eq!(
        notify(&frames),
        "fork cancelled=false keys=cancelled newfile=true"
    );
    // Forked before the first user message: only 1.6's system message is left.
    let m = p.call(json!({"type":"get_messages"}), "m0");
    let roles: Vec<&str> = m["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system"]);
    let forked = p.call(json!({"type":"get_state"}), "s2")["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(forked, first);
    p.send(json!({"id":"w","type":"prompt","message":format!("/switchto {first}")}));
    let frames = p.recv_until(|f| f["id"] == "w");
    assert_eq!(
        notify(&frames),
        format!("switch cancelled=false file={first}")
    );
    let m = p.call(json!({"type":"get_messages"}), "m");
    let roles: Vec<&str> = m["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
    p.send(json!({"id":"a","type":"prompt","message":"/fork-at"}));
    let frames = p.recv_until(|f| f["id"] == "a");
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("pith does not support ctx.fork({position: \"at\"})"),
        "{err}"
    );
}
