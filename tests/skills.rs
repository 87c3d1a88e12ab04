//! Skills, prompt templates and `get_commands`, checked against pi.
//!
//! The replay tests run each scenario of `tests/scenarios/skills/` against pith and compare what
//! pith writes and sends to the model with pi's recorded answers: pi 0.73.1's
//! (`fixtures/skills/pi-0.73.1/`) for pith's default protocol, pi 0.87.1's
//! (`fixtures/skills/pi-0.87.1/`) for `--compat 0.87`. Recorded with
//! `tests/scenarios/skills/check.sh` and `record.py`; see `tests/scenarios/skills/README.md`.

mod support;

/// One test per scenario and version: pith (`--compat 0.73`, the default) against pi 0.73.1's
/// recording, and pith `--compat 0.87` against pi 0.87.1's.
macro_rules! against_pi {
    ($($name:ident: $what:literal,)*) => {
        mod pi_073 {
            use super::support::scenario::check;
            $(
                #[doc = $what]
                #[test]
                fn $name() {
                    check("skills", stringify!($name), "skills/pi-0.73.1", &[]);
                }
            )*
        }
        mod pi_087 {
            use super::support::scenario::check;
            $(
                #[doc = $what]
                #[test]
                fn $name() {
                    check("skills", stringify!($name), "skills/pi-0.87.1", &["--compat", "0.87"]);
                }
            )*
        }
    };
}

against_pi! {
    sk_locations: "every location and discovery rule, the prompt listing (0.87: the project untrusted)",
    sk_locations_trusted: "the same with the project trusted",
    sk_settings: "settings entries, global and project, with patterns",
    sk_settings_legacy: "the old settings form",
    sk_enable_skill_commands: "enableSkillCommands: false changes nothing in RPC mode",
    sk_cli: "--skill and --prompt-template paths",
    sk_cli_no_flags: "--no-skills / --no-prompt-templates keep explicit paths",
    sk_cli_short_flags: "-ns and -np",
    sk_template_args: "template argument forms and quoting",
    sk_087_changes: "what 0.87.1 changed: defaults, whitespace, BOM, .agents .md files",
    sk_skill_expand: "skill command expansion, a skill deleted after start",
    sk_steer_follow_up: "expansion in steer, follow_up, queue_update",
    sk_idle_queue: "expansion of messages queued while idle",
    sk_prompt_no_read: "no listing without read (or bash, 0.87)",
    sk_prompt_bash_only: "bash only: no listing in 0.73, bash wording in 0.87",
    sk_prompt_read_only: "listing with only the read tool",
    sk_prompt_custom: "listing after a custom system prompt",
    sk_prompt_hidden_only: "no listing when every skill is hidden",
    sk_prompt_none: "nothing to list",
    sk_bad_files: "broken frontmatter skipped, valid YAML forms loaded",
    sk_ignore_files: "ignore files in skill and prompt directories",
}

// ------------------------------------------------------------------------------------------------
// pith's own: what pi has no answer for (abort_and_prompt) and the robustness the issue asks
// for (bad files warn on stderr and are skipped; pith keeps running).

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text};
use support::{World, fake_rpc, fake_world, wait_timeout};

fn write(p: &Path, content: impl AsRef<[u8]>) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn skill(name: &str, desc: &str) -> String {
    format!("---\nname: {name}\ndescription: {desc}\n---\nBody of {name}.\n")
}

/// Run pith on `input` lines and return (stdout frames, stderr text).
fn run_lines(world: &World, args: &[&str], input: &[Value]) -> (Vec<Value>, String) {
    let mut child = world
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for v in input {
        writeln!(stdin, "{v}").unwrap();
    }
    drop(stdin);
    // Reader threads: a full pipe must not stall pith before it exits.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    wait_timeout(&mut child, Duration::from_secs(20));
    let stdout = o.join().unwrap();
    let frames = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (frames, e.join().unwrap())
}

fn commands(world: &World, extra: &[&str]) -> (Vec<String>, String) {
    let mut args = vec!["--mode", "rpc", "--no-session"];
    args.extend_from_slice(extra);
    let (frames, stderr) = run_lines(world, &args, &[json!({"id":"c","type":"get_commands"})]);
    let names = frames[0]["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    (names, stderr)
}

#[test]
fn abort_and_prompt_expands_like_prompt() {
    let slow = Sse::numbered(1)
        .reply(&[text(&["a ", "b ", "c ", "d "])])
        .chunked(64, Duration::ZERO)
        .stall_after(900, Duration::from_secs(30));
    let (world, llm) = fake_world(vec![slow, Sse::numbered(2).reply(&[text(&["ok"])])]);
    write(
        &world.cwd().join(".pi/prompts/fix.md"),
        "---\ndescription: Fix\n---\nFix $1 ($@)\n",
    );
    let mut p = world.spawn(&fake_rpc(&["--no-session"]));
    p.send(json!({"id":"p1","type":"prompt","message":"first"}));
    p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    p.send(json!({"id":"ap","type":"abort_and_prompt","message":"/fix a.rs \"b c\""}));
    let f = p.recv_until(|v| v["type"] == "agent_settled");
    let users: Vec<&Value> = f
        .iter()
        .filter(|v| v["type"] == "message_start" && v["message"]["role"] == "user")
        .collect();
    assert_eq!(users.len(), 1, "{f:#?}");
    assert_eq!(
        users[0]["message"]["content"][0]["text"],
        "Fix a.rs (a.rs b c)"
    );
    let last = llm.requests().pop().unwrap();
    assert!(last.body.contains("Fix a.rs (a.rs b c)"), "{}", last.body);
}

#[test]
fn binary_huge_and_odd_files_are_skipped_with_a_warning() {
    let world = World::new();
    let skills = world.cwd().join(".pi/skills");
    let prompts = world.cwd().join(".pi/prompts");
    write(&skills.join("good/SKILL.md"), skill("good", "Fine."));
    write(
        &skills.join("binary/SKILL.md"),
        b"---\nname: binary\ndescription: has a NUL\n---\n\x00\x01\x02",
    );
    let huge = format!(
        "---\nname: huge\ndescription: too big\n---\n{}",
        "x".repeat(2 << 20)
    );
    write(&skills.join("huge/SKILL.md"), &huge);
    write(&prompts.join("huge.md"), &huge);
    write(&prompts.join("bin.md"), b"a\x00b");
    // Invalid UTF-8 is read as Node reads it: replaced, not skipped.
    write(&prompts.join("latin1.md"), b"caf\xe9\n");
    write(&prompts.join("ok.md"), "Fine\n");
    // A FIFO where a skill should be must not block the start.
    let fifo = skills.join("fifo/SKILL.md");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    let st = std::process::Command::new("mkfifo").arg(&fifo).status();
    let (names, stderr) = commands(&world, &[]);
    assert_eq!(names, ["latin1", "ok", "skill:good"]);
    assert!(
        stderr.contains("binary/SKILL.md: file is binary"),
        "{stderr}"
    );
    assert!(
        stderr.contains("huge/SKILL.md: file is too large"),
        "{stderr}"
    );
    assert!(stderr.contains("huge.md: file is too large"), "{stderr}");
    assert!(stderr.contains("bin.md: file is binary"), "{stderr}");
    if st.is_ok_and(|s| s.success()) {
        // A FIFO is not a regular file: pi skips it too (not a file), silently.
        assert!(!stderr.contains("fifo"), "{stderr}");
    }
}

#[test]
fn symlinks_followed_loops_cut_broken_links_skipped() {
    let world = World::new();
    let skills = world.cwd().join(".pi/skills");
    write(
        &skills.join("real/SKILL.md"),
        skill("real", "The real one."),
    );
    let elsewhere = world.dir.path().join("elsewhere");
    write(
        &elsewhere.join("linked/SKILL.md"),
        skill("linked", "Through a link."),
    );
    std::os::unix::fs::symlink(elsewhere.join("linked"), skills.join("linked")).unwrap();
    std::os::unix::fs::symlink(&skills, skills.join("zloop")).unwrap();
    std::os::unix::fs::symlink(skills.join("nowhere"), skills.join("broken")).unwrap();
    // A self-referencing link (ELOOP on stat) is skipped like a broken one.
    std::os::unix::fs::symlink(skills.join("self"), skills.join("self")).unwrap();
    let (names, stderr) = commands(&world, &[]);
    assert_eq!(names, ["skill:linked", "skill:real"]);
    assert!(stderr.contains("symlink loop"), "{stderr}");
}

#[test]
fn deep_trees_are_cut() {
    let world = World::new();
    let mut d = world.cwd().join(".pi/skills");
    for i in 0..40 {
        d = d.join(format!("d{i}"));
    }
    write(&d.join("deep/SKILL.md"), skill("deep", "Too deep."));
    write(
        &world.cwd().join(".pi/skills/d0/near/SKILL.md"),
        skill("near", "Found."),
    );
    let (names, stderr) = commands(&world, &[]);
    assert_eq!(names, ["skill:near"]);
    assert!(stderr.contains("directory levels"), "{stderr}");
}

#[test]
fn bad_settings_entries_warn_and_are_ignored() {
    let world = World::new();
    world.write_agent_file(
        "settings.json",
        r#"{"skills": "not-an-array", "prompts": ["ok", 5, null]}"#,
    );
    write(&world.agent_dir().join("ok/t.md"), "T\n");
    let (names, stderr) = commands(&world, &[]);
    assert_eq!(names, ["t"]);
    assert!(stderr.contains("skills must be an array"), "{stderr}");
    assert!(
        stderr.contains("prompts entry 5 is not a string"),
        "{stderr}"
    );
}

#[test]
fn collisions_and_problems_are_reported_on_stderr_only() {
    let world = World::new();
    write(
        &world.agent_dir().join("skills/a/SKILL.md"),
        skill("a", "Global."),
    );
    write(
        &world.cwd().join(".pi/skills/a/SKILL.md"),
        skill("a", "Project."),
    );
    write(
        &world.cwd().join(".pi/skills/broken/SKILL.md"),
        "---\ndescription: Use when: x\n---\n",
    );
    write(&world.cwd().join(".pi/prompts/t.md"), "project t\n");
    write(&world.agent_dir().join("prompts/t.md"), "global t\n");
    let (frames, stderr) = run_lines(
        &world,
        &["--mode", "rpc", "--no-session", "--skill", "nope/SKILL.md"],
        &[json!({"id":"c","type":"get_commands"})],
    );
    assert_eq!(frames.len(), 1);
    let cmds = &frames[0]["data"]["commands"];
    assert_eq!(cmds[0]["description"], "project t");
    assert_eq!(cmds[1]["description"], "Project.");
    assert!(stderr.contains("skill \"a\" collision"), "{stderr}");
    assert!(
        stderr.contains("prompt template \"/t\" collision"),
        "{stderr}"
    );
    assert!(
        stderr.contains("broken/SKILL.md: Nested mappings are not allowed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("nope/SKILL.md: skill path does not exist"),
        "{stderr}"
    );
}

#[test]
fn a_skill_file_that_became_unreadable_is_an_extension_error_and_the_text_stays() {
    let (world, llm) = fake_world(vec![Sse::numbered(1).reply(&[text(&["ok"])])]);
    let f = world.cwd().join(".pi/skills/s/SKILL.md");
    write(&f, skill("s", "S."));
    let mut p = world.spawn(&fake_rpc(&["--no-session"]));
    // Listed (read on first use), then replaced by a directory: not readable as a file.
    let r = p.call(json!({"type":"get_commands"}), "gc");
    assert_eq!(r["data"]["commands"][0]["name"], "skill:s");
    std::fs::remove_file(&f).unwrap();
    std::fs::create_dir(&f).unwrap();
    p.send(json!({"id":"p","type":"prompt","message":"/skill:s go"}));
    let first = p.recv();
    assert_eq!(first["type"], "extension_error");
    assert_eq!(first["event"], "skill_expansion");
    assert_eq!(
        first["error"],
        "EISDIR: illegal operation on a directory, read"
    );
    p.recv_until(|v| v["type"] == "agent_settled");
    assert!(llm.requests()[0].body.contains("\"/skill:s go\""));
}

#[test]
fn extension_commands_come_first_and_win_over_a_template_of_the_same_name() {
    let world = World::new();
    let protect = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples/protect.sh")
        .to_string_lossy()
        .into_owned();
    write(
        &world.cwd().join(".pi/prompts/protect.md"),
        "---\ndescription: A template shadowed by the extension command\n---\nTemplate text\n",
    );
    write(&world.cwd().join(".pi/skills/s/SKILL.md"), skill("s", "S."));
    let mut p = world.spawn_faux_in(&world.cwd(), "{\"text\":\"ok\"}\n", &["-e", &protect]);
    let r = p.call(json!({"type":"get_commands"}), "c");
    let names: Vec<(&str, &str)> = r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("protect", "extension"),
            ("protect", "prompt"),
            ("skill:s", "skill")
        ]
    );
    // The extension command runs; the template is not expanded.
    let frames = {
        p.send(json!({"id":"x","type":"prompt","message":"/protect"}));
        p.recv_until(|f| f["id"] == "x")
    };
    assert!(
        frames.iter().any(|f| f["method"] == "notify"),
        "{frames:#?}"
    );
    assert!(!frames.iter().any(|f| f["type"] == "agent_start"));
}
