//! Permission rules through the real binary (docs/security.md): `--allow` / `--ask` /
//! `--deny`, `--permission-default`, settings `pith.permissions`, each rule form, compound bash
//! lines, symlinked targets (the dialog shows where the bytes land, a write re-checks it),
//! project settings trying to loosen anything, print/json mode denials, and the exact
//! `permission_decision` events. The model is the offline `faux` provider with a script.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::frames::{answer, settle};
use support::{Pith, World};

/// `--mode rpc` on the faux provider with `script`, then `extra`.
fn spawn(world: &World, script: &str, extra: &[&str]) -> Pith {
    world.spawn_faux(script, extra)
}

/// One `--mode json` (or `-p`) run; returns (exit code, stdout frames or lines, stderr).
fn oneshot(world: &World, script: &str, extra: &[&str]) -> (i32, String, String) {
    std::fs::write(world.cwd().join("faux.jsonl"), script).unwrap();
    let mut args = vec![
        "--provider",
        "faux",
        "--model",
        "faux",
        "--no-session",
        "--faux-script",
        "faux.jsonl",
    ];
    args.extend_from_slice(extra);
    args.push("go");
    let out = world.command(&args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// One assistant turn calling these tools, then a closing text.
fn turn(calls: &[(&str, Value)]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(n, a)| json!({"name": n, "arguments": a}))
        .collect();
    support::calls_then_done(json!(calls))
}

/// The `tool_execution_end` texts in call order (the order of their starts).
fn results(frames: &[Value]) -> Vec<(bool, String)> {
    let order: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_start")
        .map(|f| &f["toolCallId"])
        .collect();
    let mut ends: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .collect();
    ends.sort_by_key(|f| order.iter().position(|id| **id == f["toolCallId"]));
    ends.into_iter()
        .map(|f| {
            (
                f["isError"] == true,
                f["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

/// The `permission_decision` events, whole.
fn decisions(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "permission_decision")
        .cloned()
        .collect()
}

/// Events without their call ids (faux numbers them by turn).
fn decided(frames: &[Value]) -> Vec<Value> {
    decisions(frames)
        .into_iter()
        .map(|mut d| {
            assert!(d["toolCallId"].as_str().is_some_and(|s| !s.is_empty()));
            d.as_object_mut().unwrap().remove("toolCallId");
            d
        })
        .collect()
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn denied_by(rule: &str, tool: &str, part: Option<&str>) -> String {
    match part {
        Some(p) => format!(
            "Permission denied: the rule deny \"{rule}\" blocks this {tool} call (command: {p}). Do not retry it; ask the user if it is needed."
        ),
        None => format!(
            "Permission denied: the rule deny \"{rule}\" blocks this {tool} call. Do not retry it; ask the user if it is needed."
        ),
    }
}

fn denied_by_default(tool: &str, part: Option<&str>) -> String {
    let what = match part {
        Some(p) => format!("this {tool} call (command: {p})"),
        None => format!("this {tool} call"),
    };
    format!(
        "Permission denied: no permission rule allows {what}, and calls no rule allows are denied here (--permission-default). Do not retry it; ask the user if it is needed."
    )
}

#[test]
fn allow_rules_run_and_the_default_asks_in_rpc_mode() {
    let w = World::new();
    std::fs::write(w.cwd().join("notes.txt"), "some notes\n").unwrap();
    let script = turn(&[
        ("read", json!({"path":"notes.txt"})),
        ("bash", json!({"command":"echo hi"})),
        ("bash", json!({"command":"echo hi; touch pwned"})),
    ]);
    let mut p = spawn(&w, &script, &["--allow", "read", "--allow", "bash(echo *)"]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    assert_eq!(d["method"], "confirm");
    assert_eq!(d["title"], "Allow bash?");
    assert_eq!(d["message"], "Run this command:\necho hi; touch pwned");
    answer(&mut p, &d, json!({"confirmed": false}));
    let mut frames = p.seen.clone();
    frames.extend(settle(&mut p));
    assert_eq!(
        decided(&frames),
        vec![
            json!({"type":"permission_decision","toolName":"read","decision":"allow","by":"rule","rule":"read"}),
            json!({"type":"permission_decision","toolName":"bash","decision":"allow","by":"rule","rule":"bash(echo *)"}),
            json!({"type":"permission_decision","toolName":"bash","decision":"deny","by":"host"}),
        ]
    );
    // The event comes right after the call's start, before its dialog or result.
    let starts: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i]["type"] == "tool_execution_start")
        .collect();
    assert_eq!(frames[starts[0] + 1]["type"], "permission_decision");
    assert_eq!(
        frames[starts[0] + 1]["toolCallId"],
        frames[starts[0]]["toolCallId"]
    );
    assert_eq!(
        results(&frames),
        vec![
            (false, "some notes\n".to_string()),
            (false, "hi\n".to_string()),
            (
                true,
                "Tool call denied: the user declined to run bash.".to_string()
            ),
        ]
    );
    assert!(!w.cwd().join("pwned").exists());
}

#[test]
fn deny_beats_allow_across_flags_and_settings() {
    let w = World::new();
    std::fs::write(w.cwd().join("keep.txt"), "keep\n").unwrap();
    w.write_agent_file(
        "settings.json",
        &json!({"pith":{"permissions":{"deny":["bash(rm *)","wr*"]}}}).to_string(),
    );
    let script = turn(&[
        ("bash", json!({"command":"rm keep.txt"})),
        ("bash", json!({"command":"git status; rm  -f 'keep.txt'"})),
        ("write", json!({"path":"new.txt","content":"x"})),
        ("bash", json!({"command":"echo fine"})),
    ]);
    let (code, out, _) = oneshot(&w, &script, &["--mode", "json", "--allow", "*"]);
    assert_eq!(code, 0);
    let frames = json_lines(&out);
    assert_eq!(
        results(&frames),
        vec![
            (true, denied_by("bash(rm *)", "bash", Some("rm keep.txt"))),
            (
                true,
                denied_by("bash(rm *)", "bash", Some("rm -f keep.txt"))
            ),
            (true, denied_by("wr*", "write", None)),
            (false, "fine\n".to_string()),
        ]
    );
    assert_eq!(
        decided(&frames),
        vec![
            json!({"type":"permission_decision","toolName":"bash","decision":"deny","by":"rule","rule":"bash(rm *)"}),
            json!({"type":"permission_decision","toolName":"bash","decision":"deny","by":"rule","rule":"bash(rm *)"}),
            json!({"type":"permission_decision","toolName":"write","decision":"deny","by":"rule","rule":"wr*"}),
            json!({"type":"permission_decision","toolName":"bash","decision":"allow","by":"rule","rule":"*"}),
        ]
    );
    assert!(w.cwd().join("keep.txt").exists());
    assert!(!w.cwd().join("new.txt").exists());
}

#[test]
fn compound_bash_lines_are_allowed_only_when_every_part_is() {
    let w = World::new();
    let script = turn(&[
        ("bash", json!({"command":"echo a && echo b | cat"})),
        ("bash", json!({"command":"echo $(touch sub)"})),
        ("bash", json!({"command":"echo `touch back`"})),
        ("bash", json!({"command":"(echo a; touch paren)"})),
        ("bash", json!({"command":"echo 'unterminated; touch q"})),
        ("bash", json!({"command":"cat <<EOF\nx\nEOF"})),
    ]);
    let (_, out, _) = oneshot(
        &w,
        &script,
        &[
            "--mode",
            "json",
            "--allow",
            "bash(echo *)",
            "--allow",
            "bash(cat)",
        ],
    );
    let frames = json_lines(&out);
    let r = results(&frames);
    assert_eq!(r[0], (false, "a\nb\n".to_string()));
    assert_eq!(r[1], (true, denied_by_default("bash", Some("touch sub"))));
    assert_eq!(r[2], (true, denied_by_default("bash", Some("touch back"))));
    assert_eq!(r[3], (true, denied_by_default("bash", Some("touch paren"))));
    // Lines the splitter cannot read are never allowed by a pattern.
    assert_eq!(
        r[4],
        (
            true,
            denied_by_default("bash", Some("echo 'unterminated; touch q"))
        )
    );
    assert_eq!(
        r[5],
        (true, denied_by_default("bash", Some("cat <<EOF\nx\nEOF")))
    );
    for f in ["sub", "back", "paren", "q"] {
        assert!(!w.cwd().join(f).exists(), "{f}");
    }
    let d = decided(&frames);
    assert_eq!(
        d[1],
        json!({"type":"permission_decision","toolName":"bash","decision":"deny","by":"default"})
    );
}

#[test]
fn print_and_json_modes_deny_what_no_rule_allows() {
    for compat in ["0.73", "0.87"] {
        let w = World::new();
        std::fs::write(w.cwd().join("f.txt"), "f\n").unwrap();
        let script = turn(&[
            ("read", json!({"path":"f.txt"})),
            ("bash", json!({"command":"touch made"})),
        ]);
        let (code, out, _) = oneshot(
            &w,
            &script,
            &["--compat", compat, "--mode", "json", "--allow", "read"],
        );
        assert_eq!(code, 0, "{compat}");
        let frames = json_lines(&out);
        let r = results(&frames);
        assert!(!r[0].0, "{compat}: {r:?}");
        assert_eq!(
            r[1],
            (true, denied_by_default("bash", Some("touch made"))),
            "{compat}"
        );
        assert_eq!(
            decided(&frames),
            vec![
                json!({"type":"permission_decision","toolName":"read","decision":"allow","by":"rule","rule":"read"}),
                json!({"type":"permission_decision","toolName":"bash","decision":"deny","by":"default"}),
            ],
            "{compat}"
        );
        assert!(!w.cwd().join("made").exists());
        // Print mode: the same denial, no event on stdout.
        let (code, out, _) = oneshot(&w, &script, &["--compat", compat, "-p", "--allow", "read"]);
        assert_eq!(code, 0);
        assert!(!out.contains("permission_decision"), "{out}");
        assert!(!w.cwd().join("made").exists());
        // An ask rule cannot be answered here: denied, saying why.
        let (_, out, _) = oneshot(
            &w,
            &script,
            &["--compat", compat, "--mode", "json", "--ask", "bash"],
        );
        let frames = json_lines(&out);
        assert_eq!(
            results(&frames)[1],
            (
                true,
                "Tool call denied: bash needs confirmation (permission rule ask \"bash\") and no host can answer in this mode.".to_string()
            )
        );
        assert_eq!(
            decided(&frames)[1],
            json!({"type":"permission_decision","toolName":"bash","decision":"deny","by":"rule","rule":"bash"})
        );
        // Nothing configured: pi's behaviour, no event.
        let (_, out, _) = oneshot(&w, &script, &["--compat", compat, "--mode", "json"]);
        assert!(!out.contains("permission_decision"), "{out}");
        assert!(w.cwd().join("made").exists());
        std::fs::remove_file(w.cwd().join("made")).unwrap();
    }
}

#[test]
fn permission_default_allow_and_deny() {
    let w = World::new();
    let script = turn(&[
        ("bash", json!({"command":"echo ok"})),
        ("bash", json!({"command":"touch x"})),
    ]);
    let (_, out, _) = oneshot(
        &w,
        &script,
        &[
            "--mode",
            "json",
            "--permission-default",
            "allow",
            "--deny",
            "bash(touch *)",
        ],
    );
    let frames = json_lines(&out);
    assert_eq!(
        results(&frames),
        vec![
            (false, "ok\n".to_string()),
            (true, denied_by("bash(touch *)", "bash", Some("touch x"))),
        ]
    );
    assert_eq!(
        decided(&frames)[0],
        json!({"type":"permission_decision","toolName":"bash","decision":"allow","by":"default"})
    );
    // `deny` in rpc mode: no dialog at all.
    let mut p = spawn(&w, &script, &["--permission-default", "deny"]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    assert!(!frames.iter().any(|f| f["type"] == "extension_ui_request"));
    assert_eq!(
        results(&frames),
        vec![
            (true, denied_by_default("bash", Some("echo ok"))),
            (true, denied_by_default("bash", Some("touch x"))),
        ]
    );
    assert!(!w.cwd().join("x").exists());
}

#[test]
fn path_rules_match_the_resolved_path_and_the_dialog_shows_it() {
    let w = World::new();
    let outside = w.tmp().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("target.txt"), "precious\n").unwrap();
    std::os::unix::fs::symlink(outside.join("target.txt"), w.cwd().join("link.txt")).unwrap();
    // A dangling link: its target does not exist yet.
    std::os::unix::fs::symlink(outside.join("new.txt"), w.cwd().join("dangling.txt")).unwrap();
    let script = turn(&[
        ("write", json!({"path":"real.txt","content":"hello world"})),
        ("write", json!({"path":"link.txt","content":"hello world"})),
        (
            "write",
            json!({"path":"dangling.txt","content":"hello world"}),
        ),
        ("read", json!({"path":"link.txt"})),
    ]);
    let out_real = canonical(&outside);
    let mut p = spawn(
        &w,
        &script,
        &[
            "--allow",
            "write(*.txt)",
            "--deny",
            &format!("read({out_real}/**)"),
        ],
    );
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    assert_eq!(
        d["message"],
        format!(
            "Write 11 bytes to link.txt (→ {out_real}/target.txt, outside the working directory):\nhello world"
        )
    );
    answer(&mut p, &d, json!({"confirmed": false}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    assert_eq!(
        d["message"],
        format!(
            "Write 11 bytes to dangling.txt (→ {out_real}/new.txt, outside the working directory):\nhello world"
        )
    );
    answer(&mut p, &d, json!({"confirmed": false}));
    let mut frames = p.seen.clone();
    frames.extend(settle(&mut p));
    let r = results(&frames);
    assert!(!r[0].0, "{r:?}");
    assert!(r[1].0 && r[2].0);
    let deny = format!("read({out_real}/**)");
    assert_eq!(r[3], (true, denied_by(&deny, "read", None)));
    assert_eq!(
        std::fs::read_to_string(outside.join("target.txt")).unwrap(),
        "precious\n"
    );
    assert!(!outside.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(w.cwd().join("real.txt")).unwrap(),
        "hello world"
    );
}

/// Finding 3: `--confirm-tools write` on a symlink out of the working directory shows where
/// the bytes land; a target changed after the approval is refused, not followed.
#[test]
fn confirm_tools_shows_the_resolved_target_and_writes_recheck_it() {
    let w = World::new();
    let outside = w.tmp().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "precious\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), w.cwd().join("notes.txt")).unwrap();
    std::fs::write(w.cwd().join("plain.txt"), "plain\n").unwrap();
    let script = format!(
        "{}\n{}\n{}\n",
        json!({"toolCalls":[{"name":"write","arguments":{"path":"notes.txt","content":"hello world"}}]}),
        json!({"toolCalls":[{"name":"write","arguments":{"path":"plain.txt","content":"changed"}}]}),
        json!({"text":"done"})
    );
    let mut p = spawn(&w, &script, &["--confirm-tools", "write"]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    let real = canonical(&outside.join("secret.txt"));
    assert_eq!(
        d["message"],
        format!(
            "Write 11 bytes to notes.txt (→ {real}, outside the working directory):\nhello world"
        )
    );
    // The host approves knowingly: the bytes land there.
    answer(&mut p, &d, json!({"confirmed": true}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    assert_eq!(d["message"], "Write 7 bytes to plain.txt:\nchanged");
    // While the dialog is open, plain.txt becomes a symlink out of the directory.
    std::fs::remove_file(w.cwd().join("plain.txt")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), w.cwd().join("plain.txt")).unwrap();
    answer(&mut p, &d, json!({"confirmed": true}));
    let mut frames = p.seen.clone();
    frames.extend(settle(&mut p));
    let r = results(&frames);
    assert_eq!(
        r[0],
        (
            false,
            "Successfully wrote 11 bytes to notes.txt".to_string()
        )
    );
    let cwd = canonical(&w.cwd());
    assert_eq!(
        r[1],
        (
            true,
            format!(
                "Permission check failed: plain.txt now resolves to {real}, not to the approved {cwd}/plain.txt; nothing was changed."
            )
        )
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "hello world"
    );
    assert_eq!(
        decided(&frames),
        vec![
            json!({"type":"permission_decision","toolName":"write","decision":"allow","by":"host","rule":"write"}),
            json!({"type":"permission_decision","toolName":"write","decision":"allow","by":"host","rule":"write"}),
        ]
    );
}

/// Finding 2 and the rest: nothing from a project weakens the user's settings or the
/// command line; it may tighten.
#[test]
fn a_project_cannot_loosen_anything() {
    let w = World::new();
    w.write_agent_file(
        "settings.json",
        &json!({"pith":{"confirmTools":"all"}}).to_string(),
    );
    std::fs::create_dir_all(w.cwd().join(".pi")).unwrap();
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        json!({"confirmTools":"none","pith":{"confirmTools":"none","permissions":{"allow":["*"],"default":"allow"}}}).to_string(),
    )
    .unwrap();
    let script = turn(&[("bash", json!({"command":"touch ran"}))]);
    let mut p = spawn(&w, &script, &[]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let f = p.recv_until(|f| f["type"] == "extension_ui_request");
    let d = f.last().unwrap().clone();
    assert_eq!(d["message"], "Run this command:\ntouch ran");
    answer(&mut p, &d, json!({"confirmed": false}));
    settle(&mut p);
    assert!(!w.cwd().join("ran").exists());
    let stderr = p.stderr_lines().join("\n");
    assert!(
        stderr.contains("Warning: the project's permission rule allow \"*\" is ignored: a project can only add deny and ask rules"),
        "{stderr}"
    );
    drop(p);

    // `--confirm-tools` on the command line: the project cannot lower it either, and its own
    // list is added.
    w.write_agent_file("settings.json", "{}");
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        json!({"pith":{"confirmTools":["write"],"permissions":{"default":"allow"}}}).to_string(),
    )
    .unwrap();
    let script = turn(&[
        ("bash", json!({"command":"touch a"})),
        ("write", json!({"path":"w.txt","content":"x"})),
    ]);
    let (_, out, _) = oneshot(&w, &script, &["--mode", "json", "--confirm-tools", "bash"]);
    let frames = json_lines(&out);
    let r = results(&frames);
    assert!(r[0].0 && r[1].0, "{r:?}");
    assert!(!w.cwd().join("a").exists() && !w.cwd().join("w.txt").exists());

    // A project's default cannot loosen the user's; a stricter one counts.
    w.write_agent_file(
        "settings.json",
        &json!({"pith":{"permissions":{"allow":["ls"]}}}).to_string(),
    );
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        json!({"pith":{"permissions":{"default":"allow"}}}).to_string(),
    )
    .unwrap();
    let script = turn(&[("bash", json!({"command":"touch b"}))]);
    let (_, out, err) = oneshot(&w, &script, &["--mode", "json"]);
    assert_eq!(
        results(&json_lines(&out))[0],
        (true, denied_by_default("bash", Some("touch b")))
    );
    assert!(
        err.contains("Warning: the project's pith.permissions.default \"allow\" is ignored: a project cannot loosen the default \"deny\""),
        "{err}"
    );
    // A project may add deny rules and a stricter default (tightening is fine).
    w.write_agent_file("settings.json", "{}");
    std::fs::write(
        w.cwd().join(".pi/settings.json"),
        json!({"pith":{"permissions":{"deny":["bash(touch *)"],"default":"deny"}}}).to_string(),
    )
    .unwrap();
    let mut p = spawn(&w, &script, &["--allow", "bash"]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    assert_eq!(
        results(&frames)[0],
        (true, denied_by("bash(touch *)", "bash", Some("touch b")))
    );
    assert!(!w.cwd().join("b").exists());
}

#[test]
fn unreadable_rules_stop_the_start() {
    let w = World::new();
    let out = w
        .command(&["--mode", "rpc", "--allow", "bash("])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "--allow: permission rule \"bash(\": a pattern is written TOOL(PATTERN), closed by ')'"
    ));
    w.write_agent_file(
        "settings.json",
        &json!({"pith":{"permissions":{"deny":"bash"}}}).to_string(),
    );
    let mut p = w.spawn(&["--mode", "rpc"]);
    let status = p.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    assert!(
        p.stderr_lines()
            .join("\n")
            .contains("Error: settings pith.permissions.deny: not an array of rules"),
        "{:?}",
        p.stderr_lines()
    );
}

/// Tool-name globs cover MCP tools (the fake MCP server of `tests/mcp.rs`).
#[test]
fn tool_globs_cover_mcp_tools() {
    if !std::process::Command::new("python3")
        .args(["-c", "pass"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("SKIPPED: python3 not found (the fake MCP server needs it)");
        return;
    }
    let w = World::new();
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/mcp/fake_server.py")
        .to_string_lossy()
        .into_owned();
    w.write_agent_file(
        "settings.json",
        &json!({
            "mcpServers": {"fake": {"command": "python3", "args": [server]}},
            "pith": {"permissions": {"allow": ["mcp__fake__*"], "deny": ["mcp__*__e?ho"]}},
        })
        .to_string(),
    );
    let script = turn(&[
        ("mcp__fake__echo", json!({"text":"hi"})),
        ("mcp__fake__add", json!({"a":2,"b":3})),
    ]);
    let mut p = spawn(&w, &script, &[]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let r = results(&frames);
    assert_eq!(
        r[0],
        (true, denied_by("mcp__*__e?ho", "mcp__fake__echo", None))
    );
    assert!(!r[1].0, "{r:?}");
    assert_eq!(
        decided(&frames),
        vec![
            json!({"type":"permission_decision","toolName":"mcp__fake__echo","decision":"deny","by":"rule","rule":"mcp__*__e?ho"}),
            json!({"type":"permission_decision","toolName":"mcp__fake__add","decision":"allow","by":"rule","rule":"mcp__fake__*"}),
        ]
    );
}
