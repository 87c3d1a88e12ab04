//! The kernel sandbox (`--sandbox`, src/sandbox.rs) through the real binary: Landlock confines
//! the tool threads and every process they start; pith's own threads stay free. Tests that need
//! Landlock print `SKIP` and return where the kernel has none (or too old an ABI); the refusal
//! paths (exit 5) use the debug build's `PITH_TEST_NO_LANDLOCK=1` and run everywhere.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use support::anthropic::{Sse, text, tool_call};
use support::fake_llm::FakeLlm;
use support::output::{stderr, stdout_lines as lines};
use support::{Pith, World, faux};

const EXIT_SANDBOX: i32 = 5;

/// The faux script's file, written into the world's config dir (outside the workspace).
fn faux_script(world: &World, lines: &[Value]) -> String {
    let path = world.agent_dir().join("faux.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n")).unwrap();
    path.to_string_lossy().into_owned()
}

/// `pith --mode json` on the faux provider with `script`, the prompt "go", then `extra`.
fn json_cmd(world: &World, script: &[Value], extra: &[&str]) -> Command {
    let path = faux_script(world, script);
    let mut args = support::faux_mode("json", &["--no-session", "--faux-script", &path]);
    args.extend_from_slice(extra);
    args.push("go");
    let mut c = world.command(&args);
    c.stdin(Stdio::null());
    c
}

fn run(mut c: Command) -> Output {
    c.output().expect("run pith")
}

/// The text and error flag of each tool result, by tool call id.
fn results(frames: &[Value]) -> std::collections::HashMap<String, (String, bool)> {
    frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .map(|f| {
            let text = support::frames::joined_text(&f["result"]["content"]);
            (
                f["toolCallId"].as_str().unwrap_or("").to_string(),
                (text, f["isError"] == true),
            )
        })
        .collect()
}

/// A faux turn that calls these tools at once; ids are `faux_1_<n>` in order.
fn calls(list: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = list
        .iter()
        .map(|(name, args)| json!({"name": name, "arguments": args}))
        .collect();
    json!({"toolCalls": calls})
}

fn bash(command: &str) -> (&'static str, Value) {
    ("bash", json!({"command": command}))
}

/// Whether this kernel can run the sandbox (network off needs Landlock ABI 4); prints why not.
fn landlock_ok(test: &str) -> bool {
    let world = World::new();
    let out = run(json_cmd(
        &world,
        &[json!({"text": "hi"})],
        &["--sandbox", "workspace-write"],
    ));
    if out.status.code() == Some(EXIT_SANDBOX) {
        eprintln!(
            "SKIP {test}: the kernel cannot enforce the sandbox here: {}",
            stderr(&out).trim()
        );
        return false;
    }
    assert!(out.status.success(), "probe failed: {}", stderr(&out));
    true
}

fn id(n: usize) -> String {
    format!("faux_1_{n}")
}

#[test]
fn workspace_write_confines_writes_and_network_of_tools_only() {
    if !landlock_ok("workspace_write_confines_writes_and_network_of_tools_only") {
        return;
    }
    let world = World::new();
    let cwd = world.cwd();
    let outside = world.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("edit-me.txt"), "hello\n").unwrap();
    std::os::unix::fs::symlink(&outside, cwd.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("edit-me.txt"), cwd.join("elink")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out_s = outside.to_string_lossy().into_owned();
    let tcp = format!(
        "python3 -c \"import socket; s=socket.socket(); s.connect(('127.0.0.1', {port})); print('connected')\""
    );
    let dev_tcp = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let udp = format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {port})); print('sent')\""
    );
    let script = [
        calls(&[
            bash("echo in > inside.txt && mkdir -p sub && echo deep > sub/d.txt && echo ok-inside"),
            bash(&format!("echo out > {out_s}/bash.txt")),
            bash(&format!(
                "python3 -c \"open('{out_s}/py.txt', 'w').write('x')\""
            )),
            bash("echo x > link/escaped.txt"),
            ("write", json!({"path": "link/w.txt", "content": "x"})),
            ("write", json!({"path": "written.txt", "content": "ok"})),
            bash(&tcp),
            bash(&dev_tcp),
            bash(&udp),
            bash(
                "echo t > \"$TMPDIR/t.txt\" && cat \"$TMPDIR/t.txt\" && echo x > /dev/null && echo devnull-ok",
            ),
            (
                "edit",
                json!({"path": "elink", "edits": [{"oldText": "hello", "newText": "bye"}]}),
            ),
            bash(
                "python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'u'); print('unix', b.recv(1))\"",
            ),
            ("read", json!({"path": "link/edit-me.txt"})),
            bash("kill -0 $PPID && echo signalled"),
        ]),
        json!({"text": "done"}),
    ];
    let out = run(json_cmd(&world, &script, &["--sandbox", "workspace-write"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let frames = lines(&out);
    let r = results(&frames);
    let ok = |n: usize, want: &str| {
        let (t, err) = &r[&id(n)];
        assert!(!err && t.contains(want), "call {n}: {t:?} (error {err})");
    };
    let denied = |n: usize, want: &str| {
        let (t, err) = &r[&id(n)];
        assert!(*err && t.contains(want), "call {n}: {t:?} (error {err})");
    };
    ok(0, "ok-inside");
    denied(1, "Permission denied");
    denied(2, "PermissionError");
    denied(3, "Permission denied");
    denied(4, "EACCES: permission denied");
    ok(5, "Successfully wrote");
    denied(6, "Operation not permitted");
    denied(7, "Operation not permitted");
    denied(8, "Operation not permitted");
    ok(9, "devnull-ok");
    denied(10, "EACCES: permission denied");
    ok(11, "unix b'u'");
    ok(12, "hello");
    // Landlock ABI 6 scopes signals: the shell cannot signal pith (its parent).
    if frames[1]["enforced"]
        .as_str()
        .and_then(|e| e.strip_prefix("landlock-abi-"))
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n >= 6)
    {
        denied(13, "Operation not permitted");
    }
    assert!(!r[&id(10)].0.contains("File not found"));
    // Nothing landed outside; what was inside did.
    for f in ["bash.txt", "py.txt", "escaped.txt", "w.txt"] {
        assert!(!outside.join(f).exists(), "{f} was written outside");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("edit-me.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("sub/d.txt")).unwrap(),
        "deep\n"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("written.txt")).unwrap(),
        "ok"
    );
    assert_eq!(
        std::fs::read_to_string(world.tmp().join("t.txt")).unwrap(),
        "t\n"
    );
    // The json output reports the sandbox in effect (second line, after the session header).
    assert_eq!(frames[1]["type"], "sandbox");
    assert_eq!(frames[1]["mode"], "workspace-write");
    assert_eq!(frames[1]["network"], false);
    let last = frames
        .iter()
        .rev()
        .find(|f| f["type"] == "agent_end")
        .unwrap();
    assert_eq!(
        last["messages"].as_array().unwrap().last().unwrap()["content"][0]["text"],
        "done"
    );
}

#[test]
fn the_runs_own_llm_calls_reach_a_local_server_while_the_tools_cannot() {
    if !landlock_ok("the_runs_own_llm_calls_reach_a_local_server_while_the_tools_cannot") {
        return;
    }
    // The tool tries a server on 127.0.0.1 while pith streams from another one there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cmd = format!(
        "python3 -c \"import socket; s=socket.socket(); s.connect(('127.0.0.1', {})); print('connected')\"",
        listener.local_addr().unwrap().port()
    );
    let args = serde_json::to_string(&json!({"command": cmd})).unwrap();
    let llm = FakeLlm::start(vec![
        Sse::numbered(1).reply(&[tool_call("toolu_1", "bash", &[&args])]),
        Sse::numbered(2).reply(&[text(&["all ", "done"])]),
    ]);
    let world = World::new();
    world.fake_models(llm.port);
    let mut c = world.command(&[
        "--mode",
        "json",
        "--provider",
        "fake",
        "--model",
        "fake-model",
        "--no-session",
        "--sandbox",
        "workspace-write",
        "go",
    ]);
    c.stdin(Stdio::null());
    let out = run(c);
    assert!(out.status.success(), "{}", stderr(&out));
    let frames = lines(&out);
    let r = results(&frames);
    let (t, err) = &r["toolu_1"];
    assert!(*err && t.contains("Operation not permitted"), "{t:?}");
    // Both LLM requests went out over TCP from pith's own (unconfined) threads.
    assert_eq!(llm.requests().len(), 2);
    let end = frames
        .iter()
        .rev()
        .find(|f| f["type"] == "agent_end")
        .unwrap();
    assert_eq!(
        end["messages"].as_array().unwrap().last().unwrap()["content"][0]["text"],
        "all done"
    );
}

#[test]
fn read_only_allows_only_tmpdir() {
    if !landlock_ok("read_only_allows_only_tmpdir") {
        return;
    }
    let world = World::new();
    let script = [
        calls(&[
            bash("echo x > inside.txt"),
            ("write", json!({"path": "w.txt", "content": "x"})),
            bash("echo t > \"$TMPDIR/ro.txt\" && cat ../cwd/.keep && echo read-ok"),
        ]),
        json!({"text": "done"}),
    ];
    std::fs::write(world.cwd().join(".keep"), "kept\n").unwrap();
    let out = run(json_cmd(&world, &script, &["--sandbox", "read-only"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let frames = lines(&out);
    let r = results(&frames);
    assert!(
        r[&id(0)].1 && r[&id(0)].0.contains("Permission denied"),
        "{:?}",
        r[&id(0)]
    );
    assert!(
        r[&id(1)].1 && r[&id(1)].0.contains("EACCES"),
        "{:?}",
        r[&id(1)]
    );
    assert!(
        !r[&id(2)].1 && r[&id(2)].0.contains("kept\nread-ok"),
        "{:?}",
        r[&id(2)]
    );
    assert!(!world.cwd().join("inside.txt").exists());
    assert!(!world.cwd().join("w.txt").exists());
    assert!(world.tmp().join("ro.txt").exists());
    assert_eq!(frames[1]["mode"], "read-only");
}

#[test]
fn secret_variables_are_dropped_from_the_shell_unless_inherit() {
    if !landlock_ok("secret_variables_are_dropped_from_the_shell_unless_inherit") {
        return;
    }
    let cmd = "echo \"k=${FOO_API_KEY:-unset} s=${my_secret:-unset} t=${GH_TOKEN:-unset} p=${DB_PASSWORD:-unset} plain=$PLAIN\"";
    let script = [calls(&[bash(cmd)]), json!({"text": "done"})];
    let go = |world: &World, extra: &[&str]| {
        let mut c = json_cmd(world, &script, extra);
        c.env("FOO_API_KEY", "sekrit")
            .env("my_secret", "s2")
            .env("GH_TOKEN", "t3")
            .env("DB_PASSWORD", "p4")
            .env("PLAIN", "visible");
        let out = run(c);
        assert!(out.status.success(), "{}", stderr(&out));
        results(&lines(&out))[&id(0)].0.clone()
    };
    let world = World::new();
    assert_eq!(
        go(&world, &["--sandbox", "workspace-write"]).trim(),
        "k=unset s=unset t=unset p=unset plain=visible"
    );
    // No sandbox: nothing is dropped (pi's behaviour).
    assert_eq!(
        go(&world, &[]).trim(),
        "k=sekrit s=s2 t=t3 p=p4 plain=visible"
    );
    // `pith.sandbox.env: "inherit"` keeps them under the sandbox.
    world.write_agent_file(
        "settings.json",
        r#"{"pith": {"sandbox": {"env": "inherit"}}}"#,
    );
    assert_eq!(
        go(&world, &["--sandbox", "workspace-write"]).trim(),
        "k=sekrit s=s2 t=t3 p=p4 plain=visible"
    );
}

#[test]
fn the_rpc_bash_command_is_confined_and_get_state_reports_the_sandbox() {
    if !landlock_ok("the_rpc_bash_command_is_confined_and_get_state_reports_the_sandbox") {
        return;
    }
    for compat in ["0.73", "0.87"] {
        rpc_bash_confined(compat);
    }
}

fn rpc_bash_confined(compat: &str) {
    let world = World::new();
    let outside = world.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let extra = world.dir.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    world.write_agent_file(
        "settings.json",
        &json!({"pith": {"sandbox": {"mode": "workspace-write", "writableRoots": [extra]}}})
            .to_string(),
    );
    let mut p = world.spawn(&faux(&["--no-session", "--compat", compat]));
    let st = p.call(json!({"type": "get_state"}), "s");
    let cwd = std::fs::canonicalize(world.cwd()).unwrap();
    let tmp = world.tmp();
    let abi = st["data"]["sandbox"]["enforced"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(abi.starts_with("landlock-abi-"), "{abi}");
    assert_eq!(
        st["data"]["sandbox"],
        json!({"mode": "workspace-write", "network": false,
               "writableRoots": [cwd, extra, tmp], "env": "filter", "enforced": abi})
    );
    let out = outside.to_string_lossy();
    let r = p.call(
        json!({"type": "bash", "command": format!("echo x > {out}/rpc.txt; echo e > {}/e.txt; echo i > i.txt", extra.display())}),
        "b",
    );
    assert_eq!(r["success"], true, "{r}");
    let text = r["data"]["output"].as_str().unwrap();
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!outside.join("rpc.txt").exists());
    assert!(extra.join("e.txt").exists(), "a writable root is writable");
    assert!(world.cwd().join("i.txt").exists());
    p.close_stdin();
    let _ = p.wait(support::TIMEOUT);
}

#[test]
fn print_mode_runs_sandboxed() {
    if !landlock_ok("print_mode_runs_sandboxed") {
        return;
    }
    let world = World::new();
    let outside = world.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let path = faux_script(
        &world,
        &[
            calls(&[bash(&format!("echo x > {}/p.txt", outside.display()))]),
            json!({"text": "finished"}),
        ],
    );
    let mut c = world.command(&[
        "--provider",
        "faux",
        "--model",
        "faux",
        "--no-session",
        "--faux-script",
        &path,
        "--sandbox",
        "workspace-write",
        "-p",
        "go",
    ]);
    c.stdin(Stdio::null());
    let out = run(c);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "finished\n");
    assert!(!outside.join("p.txt").exists());
}

#[test]
fn get_state_has_no_sandbox_field_without_a_sandbox() {
    let world = World::new();
    let mut p = world.spawn(&faux(&["--no-session"]));
    let st = p.call(json!({"type": "get_state"}), "s");
    assert!(st["data"].get("sandbox").is_none(), "{st}");
    p.close_stdin();
    let _ = p.wait(support::TIMEOUT);
    // `--sandbox off` is no sandbox, and json mode has no `sandbox` line.
    let out = run(json_cmd(
        &world,
        &[json!({"text": "hi"})],
        &["--sandbox", "off"],
    ));
    assert!(out.status.success());
    assert!(lines(&out).iter().all(|l| l["type"] != "sandbox"));
}

/// A command that sees no Landlock (the debug build's test switch).
fn no_landlock(mut c: Command) -> Command {
    c.env("PITH_TEST_NO_LANDLOCK", "1");
    c
}

#[test]
fn without_landlock_a_sandboxed_run_refuses_to_start_in_every_mode() {
    let world = World::new();
    let check = |out: Output, mode: &str| {
        assert_eq!(
            out.status.code(),
            Some(EXIT_SANDBOX),
            "{mode}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "{mode}: nothing on stdout");
        let e = stderr(&out);
        assert!(
            e.contains("Landlock") && e.contains("Refusing to run unsandboxed"),
            "{mode}: {e}"
        );
    };
    // json
    check(
        run(no_landlock(json_cmd(
            &world,
            &[json!({"text": "hi"})],
            &["--sandbox", "workspace-write"],
        ))),
        "json",
    );
    // print
    let mut c = world.command(&[
        "--provider",
        "faux",
        "--model",
        "faux",
        "--no-session",
        "--sandbox",
        "read-only",
        "-p",
        "hi",
    ]);
    c.stdin(Stdio::null());
    check(run(no_landlock(c)), "print");
    // rpc: settings turn it on; pith exits before reading a command.
    world.write_agent_file(
        "settings.json",
        r#"{"pith": {"sandbox": {"mode": "workspace-write"}}}"#,
    );
    let mut c = world.command(&["--mode", "rpc", "--provider", "faux", "--model", "faux"]);
    c.stdin(Stdio::piped());
    let child = no_landlock(c)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check(child.wait_with_output().unwrap(), "rpc");
}

#[test]
fn sandbox_fallback_warn_runs_unsandboxed_and_says_so() {
    let world = World::new();
    let outside = world.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let script = [
        calls(&[bash(&format!(
            "echo x > {}/f.txt && echo wrote",
            outside.display()
        ))]),
        json!({"text": "done"}),
    ];
    let out = run(no_landlock(json_cmd(
        &world,
        &script,
        &["--sandbox", "workspace-write", "--sandbox-fallback", "warn"],
    )));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("UNSANDBOXED"), "{}", stderr(&out));
    let frames = lines(&out);
    assert_eq!(frames[1]["type"], "sandbox");
    assert_eq!(frames[1]["enforced"], "none");
    assert!(frames[1]["reason"].as_str().unwrap().contains("Landlock"));
    assert!(outside.join("f.txt").exists(), "nothing was confined");
    // Settings can ask for the fallback too; get_state reports it.
    world.write_agent_file(
        "settings.json",
        r#"{"pith": {"sandbox": {"mode": "read-only", "fallback": "warn"}}}"#,
    );
    let c = no_landlock(world.command(&["--mode", "rpc", "--provider", "faux", "--model", "faux"]));
    let mut p = Pith::start(c);
    let st = p.call(json!({"type": "get_state"}), "s");
    assert_eq!(st["data"]["sandbox"]["mode"], "read-only");
    assert_eq!(st["data"]["sandbox"]["enforced"], "none");
    p.close_stdin();
    let _ = p.wait(support::TIMEOUT);
}

#[test]
fn malformed_sandbox_settings_refuse_to_start() {
    let world = World::new();
    world.write_agent_file(
        "settings.json",
        r#"{"pith": {"sandbox": {"mode": "readonly"}}}"#,
    );
    let out = run(json_cmd(&world, &[json!({"text": "hi"})], &[]));
    assert_eq!(out.status.code(), Some(EXIT_SANDBOX));
    assert!(
        stderr(&out).contains("pith.sandbox.mode"),
        "{}",
        stderr(&out)
    );
    // A bad flag is a usage error.
    let out = run(json_cmd(
        &world,
        &[json!({"text": "hi"})],
        &["--sandbox", "on"],
    ));
    assert_eq!(out.status.code(), Some(2));
}

fn project_settings(world: &World, v: Value) {
    let dir = world.cwd().join(".pi");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("settings.json"), v.to_string()).unwrap();
}

#[test]
fn project_settings_cannot_loosen_the_sandbox() {
    if !landlock_ok("project_settings_cannot_loosen_the_sandbox") {
        return;
    }
    let world = World::new();
    let outside = world.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    world.write_agent_file(
        "settings.json",
        r#"{"pith": {"sandbox": {"mode": "workspace-write"}}}"#,
    );
    project_settings(
        &world,
        json!({"pith": {"sandbox": {"mode": "off", "network": true, "env": "inherit",
            "writableRoots": [outside], "fallback": "warn"}}}),
    );
    let script = [
        calls(&[bash(&format!("echo x > {}/p.txt", outside.display()))]),
        json!({"text": "done"}),
    ];
    let out = run(json_cmd(&world, &script, &["--approve"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let e = stderr(&out);
    assert_eq!(e.matches("may only tighten").count(), 5, "{e}");
    let frames = lines(&out);
    let sb = &frames[1];
    assert_eq!(sb["mode"], "workspace-write");
    assert_eq!(sb["network"], false);
    assert_eq!(sb["env"], "filter");
    assert_eq!(sb["writableRoots"].as_array().unwrap().len(), 2, "{sb}");
    assert!(results(&frames)[&id(0)].1);
    assert!(!outside.join("p.txt").exists());
    // Nor does a project's fallback hide a missing Landlock.
    let out = run(no_landlock(json_cmd(&world, &script, &["--approve"])));
    assert_eq!(out.status.code(), Some(EXIT_SANDBOX), "{}", stderr(&out));
}

#[test]
fn project_settings_can_tighten_the_sandbox() {
    if !landlock_ok("project_settings_can_tighten_the_sandbox") {
        return;
    }
    let world = World::new();
    project_settings(&world, json!({"pith": {"sandbox": {"mode": "read-only"}}}));
    let script = [
        calls(&[bash("echo x > inside.txt")]),
        json!({"text": "done"}),
    ];
    let out = run(json_cmd(
        &world,
        &script,
        &["--approve", "--sandbox", "workspace-write"],
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    let frames = lines(&out);
    assert_eq!(frames[1]["mode"], "read-only");
    assert!(results(&frames)[&id(0)].1);
    assert!(!world.cwd().join("inside.txt").exists());
    // An untrusted project's settings are not read at all.
    let out = run(json_cmd(&world, &script, &["--no-approve"]));
    assert!(lines(&out).iter().all(|l| l["type"] != "sandbox"));
    assert!(Path::new(&world.cwd().join("inside.txt")).exists());
}
