//! The built-in tools through the library API: exact success and error texts, details,
//! truncation, gitignore handling and process control.

use std::path::Path;
use std::time::{Duration, Instant};

use pith::cancel::{CancelToken, cancel_pair};
use pith::message::Content;
use pith::tools::{
    ALL_TOOLS, DEFAULT_TOOLS, ToolContext, ToolOutput, ToolResult, builtin_tool, builtin_tools,
    prepare_and_validate,
};
use serde_json::{Value, json};

fn ctx(dir: &Path) -> ToolContext {
    ctx_as(dir, &pith::protocol::v073::PROFILE)
}

/// A context following `profile`'s tool behaviour.
fn ctx_as(dir: &Path, profile: &'static pith::protocol::Profile) -> ToolContext {
    ToolContext {
        cwd: dir.to_path_buf(),
        cancel: CancelToken::never(),
        shell_path: None,
        shell_command_prefix: None,
        env: Vec::new(),
        profile: &profile.tools,
        approved_target: None,
    }
}

fn run(name: &str, args: Value, ctx: &ToolContext) -> ToolResult {
    let tool = builtin_tool(name).expect("tool exists");
    let args = prepare_and_validate(tool.as_ref(), &args)?;
    tool.execute(&args, ctx, &mut |_| {})
}

fn text(out: &ToolOutput) -> String {
    match &out.content[0] {
        Content::Text(t) => t.text.clone(),
        other => panic!("not text: {other:?}"),
    }
}

fn ok_text(r: ToolResult) -> String {
    text(&r.expect("tool succeeded"))
}

#[test]
fn schemas_and_descriptions_match_the_reference() {
    let fixture: Value =
        serde_json::from_str(include_str!("../fixtures/tools_reference_0.73.1.json")).unwrap();
    let tools = builtin_tools(&DEFAULT_TOOLS);
    assert_eq!(tools.len(), 4);
    for (tool, expected) in tools.iter().zip(fixture.as_array().unwrap()) {
        assert_eq!(tool.name(), expected["name"]);
        assert_eq!(
            tool.description(),
            expected["description"].as_str().unwrap()
        );
        // Key order matters on the wire: compare serialised text.
        assert_eq!(
            serde_json::to_string(&tool.parameters()).unwrap(),
            serde_json::to_string(&expected["parameters"]).unwrap(),
            "{}",
            tool.name()
        );
    }
    let names: Vec<&str> = builtin_tools(&ALL_TOOLS).iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        ["read", "bash", "edit", "write", "grep", "find", "ls"]
    );
    assert_eq!(
        builtin_tool("grep").unwrap().snippet(),
        "Search file contents for patterns (respects .gitignore)"
    );
}

#[test]
fn write_then_read() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let r = run(
        "write",
        json!({"path": "sub/dir/notes.txt", "content": "alpha\nbeta\ngamma\n"}),
        &c,
    );
    assert_eq!(
        ok_text(r),
        "Successfully wrote 17 bytes to sub/dir/notes.txt"
    );
    // JS string length: UTF-16 units.
    let r = run("write", json!({"path": "u.txt", "content": "é😀"}), &c);
    assert_eq!(ok_text(r), "Successfully wrote 3 bytes to u.txt");
    let out = run("read", json!({"path": "sub/dir/notes.txt"}), &c).unwrap();
    assert_eq!(text(&out), "alpha\nbeta\ngamma\n");
    assert_eq!(out.details, None);
    // pi 0.87.1 names no byte count.
    let c087 = ctx_as(dir.path(), &pith::protocol::v087::PROFILE);
    let r = run("write", json!({"path": "u.txt", "content": "é😀"}), &c087);
    assert_eq!(ok_text(r), "Successfully wrote to u.txt");
}

#[test]
fn read_errors_and_notices() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let missing = dir.path().join("missing-file.txt");
    assert_eq!(
        run("read", json!({"path": "missing-file.txt"}), &c).unwrap_err(),
        format!(
            "ENOENT: no such file or directory, access '{}'",
            missing.display()
        )
    );
    std::fs::write(dir.path().join("f.txt"), "1\n2\n3\n4\n5").unwrap();
    assert_eq!(
        run("read", json!({"path": "f.txt", "offset": 9}), &c).unwrap_err(),
        "Offset 9 is beyond end of file (5 lines total)"
    );
    let r = run(
        "read",
        json!({"path": "f.txt", "offset": "2", "limit": 2}),
        &c,
    );
    assert_eq!(
        ok_text(r),
        "2\n3\n\n[2 more lines in file. Use offset=4 to continue.]"
    );
    let big: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), big).unwrap();
    let out = run("read", json!({"path": "big.txt"}), &c).unwrap();
    assert!(
        text(&out)
            .ends_with("line 2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]")
    );
    let t = &out.details.as_ref().unwrap()["truncation"];
    assert_eq!(
        (t["truncatedBy"].as_str(), t["totalLines"].as_u64()),
        (Some("lines"), Some(2501))
    );
    let wide: String = (1..=100)
        .map(|_| format!("{}\n", "x".repeat(1000)))
        .collect();
    std::fs::write(dir.path().join("wide.txt"), wide).unwrap();
    let r = run("read", json!({"path": "wide.txt"}), &c);
    assert!(
        ok_text(r).ends_with(
            "\n\n[Showing lines 1-51 of 101 (50.0KB limit). Use offset=52 to continue.]"
        )
    );
    std::fs::write(dir.path().join("long.txt"), "y".repeat(60000)).unwrap();
    let r = run("read", json!({"path": "long.txt"}), &c);
    assert_eq!(
        ok_text(r),
        "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' long.txt | head -c 51200]"
    );
}

#[test]
fn read_image() {
    let dir = tempfile::tempdir().unwrap();
    let png = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0];
    std::fs::write(dir.path().join("x.bin"), png).unwrap();
    let out = run("read", json!({"path": "x.bin"}), &ctx(dir.path())).unwrap();
    assert_eq!(text(&out), "Read image file [image/png]");
    match &out.content[1] {
        Content::Image(img) => {
            assert_eq!(img.mime_type, "image/png");
            assert_eq!(img.data, "iVBORw0KGgoAAA==");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn edit_success_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let out = run(
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}),
        &c,
    )
    .unwrap();
    assert_eq!(text(&out), "Successfully replaced 1 block(s) in notes.txt.");
    assert_eq!(
        out.details,
        Some(json!({
            "diff": " 1 alpha\n-2 beta\n+2 BETA\n 3 gamma",
            "firstChangedLine": 2
        }))
    );
    // pi 0.87.1 adds a unified patch.
    std::fs::write(dir.path().join("p.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let out = run(
        "edit",
        json!({"path": "p.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}),
        &ctx_as(dir.path(), &pith::protocol::v087::PROFILE),
    )
    .unwrap();
    assert_eq!(
        out.details,
        Some(json!({
            "diff": " 1 alpha\n-2 beta\n+2 BETA\n 3 gamma",
            "patch": "--- p.txt\n+++ p.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n",
            "firstChangedLine": 2
        }))
    );
    assert_eq!(
        run(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "does-not-exist", "newText": "x"}]}),
            &c
        )
        .unwrap_err(),
        "Could not find the exact text in notes.txt. The old text must match exactly including all whitespace and newlines."
    );
    assert_eq!(
        run(
            "edit",
            json!({"path": "nope.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
            &c
        )
        .unwrap_err(),
        "Could not edit file: nope.txt. Error code: ENOENT."
    );
    // Legacy form goes through prepare_and_validate.
    let r = run(
        "edit",
        json!({"path": "notes.txt", "oldText": "gamma", "newText": "G"}),
        &c,
    );
    assert_eq!(ok_text(r), "Successfully replaced 1 block(s) in notes.txt.");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "alpha\nBETA\nG\n"
    );
    let err = run("edit", json!({"path": "notes.txt"}), &c).unwrap_err();
    assert_eq!(
        err,
        "Validation failed for tool \"edit\":\n  - edits: must have required property 'edits'\n\nReceived arguments:\n{\n  \"path\": \"notes.txt\"\n}"
    );
}

#[test]
fn edit_fuzzy_match_normalises_with_nfkc() {
    // Recorded from pi 0.73.1's edit tool on the same file and arguments.
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    std::fs::write(
        dir.path().join("a.txt"),
        "const \u{fb01}le = \u{201c}\u{ff58}\u{201d};   \nnext\u{a0}line\n",
    )
    .unwrap();
    let out = run(
        "edit",
        json!({"path": "a.txt", "edits": [{"oldText": "const file = \"x\";", "newText": "const file = 'y';"}]}),
        &c,
    )
    .unwrap();
    assert_eq!(text(&out), "Successfully replaced 1 block(s) in a.txt.");
    let details = out.details.unwrap();
    assert_eq!(
        details["diff"],
        "-1 const file = \"x\";\n+1 const file = 'y';\n 2 next line"
    );
    assert_eq!(details["firstChangedLine"], 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "const file = 'y';\nnext line\n"
    );
}

#[test]
fn edit_keeps_crlf_and_bom() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.txt");
    std::fs::write(&path, "\u{feff}one\r\ntwo\r\nthree\r\n").unwrap();
    let r = run(
        "edit",
        json!({"path": "w.txt", "edits": [{"oldText": "two\nthree", "newText": "2\n3"}]}),
        &ctx(dir.path()),
    );
    assert_eq!(ok_text(r), "Successfully replaced 1 block(s) in w.txt.");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "\u{feff}one\r\n2\r\n3\r\n"
    );
}

#[test]
fn ls_lists_sorted_with_limit() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    for f in ["b.txt", "A.txt", ".hidden", "c"] {
        std::fs::write(dir.path().join(f), "").unwrap();
    }
    std::fs::create_dir(dir.path().join("Dir")).unwrap();
    assert_eq!(
        ok_text(run("ls", json!({}), &c)),
        ".hidden\nA.txt\nb.txt\nc\nDir/"
    );
    let out = run("ls", json!({"limit": 2}), &c).unwrap();
    assert_eq!(
        text(&out),
        ".hidden\nA.txt\n\n[2 entries limit reached. Use limit=4 for more]"
    );
    assert_eq!(out.details, Some(json!({"entryLimitReached": 2})));
    let missing = dir.path().join("zz");
    assert_eq!(
        run("ls", json!({"path": "zz"}), &c).unwrap_err(),
        format!("Path not found: {}", missing.display())
    );
    assert_eq!(
        run("ls", json!({"path": "c"}), &c).unwrap_err(),
        format!("Not a directory: {}", dir.path().join("c").display())
    );
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    assert_eq!(
        ok_text(run("ls", json!({"path": "empty"}), &c)),
        "(empty directory)"
    );
}

fn gitignore_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let files = [
        (
            ".gitignore",
            "*.log\n!keep.log\nbuild/\n/top.txt\n**/gen/*.rs\n",
        ),
        ("a.rs", "fn main() {}\n"),
        ("debug.log", "fn log\n"),
        ("keep.log", "fn kept\n"),
        ("top.txt", "fn top\n"),
        ("build/out.rs", "fn built\n"),
        ("src/top.txt", "fn nested top\n"),
        ("src/lib.rs", "pub fn lib() {}\n// fn comment\n"),
        ("src/gen/x.rs", "fn generated\n"),
        ("src/inner/.gitignore", "*.tmp\n!b.tmp\n"),
        ("src/inner/a.tmp", "fn a\n"),
        ("src/inner/b.tmp", "fn b\n"),
        (".git/config", "fn git\n"),
    ];
    for (f, content) in files {
        let path = p.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

#[test]
fn find_respects_gitignore() {
    let dir = gitignore_tree();
    let c = ctx(dir.path());
    let out = ok_text(run("find", json!({"pattern": "*"}), &c));
    assert_eq!(
        out,
        ".gitignore\na.rs\nkeep.log\nsrc/\nsrc/gen/\nsrc/inner/\nsrc/inner/.gitignore\nsrc/inner/b.tmp\nsrc/lib.rs\nsrc/top.txt"
    );
    assert_eq!(
        ok_text(run("find", json!({"pattern": "*.rs"}), &c)),
        "a.rs\nsrc/lib.rs"
    );
    assert_eq!(
        ok_text(run("find", json!({"pattern": "src/*.rs"}), &c)),
        "src/lib.rs"
    );
    assert_eq!(
        ok_text(run("find", json!({"pattern": "*.zig"}), &c)),
        "No files found matching pattern"
    );
    let out = run("find", json!({"pattern": "*", "limit": 2}), &c).unwrap();
    assert_eq!(
        text(&out),
        ".gitignore\na.rs\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
    );
    assert_eq!(out.details, Some(json!({"resultLimitReached": 2})));
}

#[test]
fn grep_formats_matches() {
    let dir = gitignore_tree();
    let c = ctx(dir.path());
    let out = ok_text(run("grep", json!({"pattern": "^fn \\w+"}), &c));
    assert_eq!(
        out,
        "a.rs:1: fn main() {}\nkeep.log:1: fn kept\nsrc/inner/b.tmp:1: fn b\nsrc/top.txt:1: fn nested top"
    );
    let out = ok_text(run(
        "grep",
        json!({"pattern": "LIB", "ignoreCase": true, "context": 1, "path": "src"}),
        &c,
    ));
    assert_eq!(out, "lib.rs:1: pub fn lib() {}\nlib.rs-2- // fn comment");
    let out = ok_text(run(
        "grep",
        json!({"pattern": "fn (", "literal": true, "path": "src/lib.rs"}),
        &c,
    ));
    assert_eq!(out, "No matches found");
    // rg's --glob overrides ignore rules for the files it matches (src/gen/x.rs is
    // gitignored), not for directories it does not match (build/).
    let out = ok_text(run("grep", json!({"pattern": "fn", "glob": "*.rs"}), &c));
    assert_eq!(
        out,
        "a.rs:1: fn main() {}\nsrc/gen/x.rs:1: fn generated\nsrc/lib.rs:1: pub fn lib() {}\nsrc/lib.rs:2: // fn comment"
    );
    let out = ok_text(run("grep", json!({"pattern": "fn", "glob": "!src"}), &c));
    assert_eq!(out, "a.rs:1: fn main() {}\nkeep.log:1: fn kept");
    let out = run("grep", json!({"pattern": "fn", "limit": 1}), &c).unwrap();
    assert_eq!(
        text(&out),
        "a.rs:1: fn main() {}\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
    );
    assert_eq!(out.details, Some(json!({"matchLimitReached": 1})));
    std::fs::write(
        dir.path().join("wide.txt"),
        format!("fn {}\n", "z".repeat(600)),
    )
    .unwrap();
    let out = run("grep", json!({"pattern": "zzz", "path": "wide.txt"}), &c).unwrap();
    assert_eq!(
        text(&out),
        format!(
            "wide.txt:1: fn {}... [truncated]\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]",
            "z".repeat(497)
        )
    );
    assert_eq!(out.details, Some(json!({"linesTruncated": true})));
}

// ---- bash ----

fn bash(command: &str, c: &ToolContext) -> (ToolResult, Vec<ToolOutput>) {
    let tool = builtin_tool("bash").unwrap();
    let mut updates = Vec::new();
    let r = tool.execute(&json!({"command": command}), c, &mut |u| updates.push(u));
    (r, updates)
}

#[test]
fn bash_success_exit_codes_and_updates() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let (r, updates) = bash("echo hi", &c);
    assert_eq!(ok_text(r), "hi\n");
    // The empty first update is announced by the tool and emitted by the state machine when it
    // starts the call (so parallel calls keep their order); execute() itself only reports output.
    assert_eq!(
        builtin_tool("bash").unwrap().initial_update(),
        Some(ToolOutput {
            content: vec![],
            details: None,
            ..Default::default()
        })
    );
    assert!(updates.iter().all(|u| !u.content.is_empty()), "{updates:?}");
    assert_eq!(updates.last().unwrap().details, Some(json!({})));
    assert_eq!(text(updates.last().unwrap()), "hi\n");
    assert_eq!(
        bash("exit 3", &c).0.unwrap_err(),
        "(no output)\n\nCommand exited with code 3"
    );
    assert_eq!(
        bash("echo oops; exit 2", &c).0.unwrap_err(),
        "oops\n\n\nCommand exited with code 2"
    );
    assert_eq!(ok_text(bash("true", &c).0), "(no output)");
    assert_eq!(
        ok_text(bash("pwd", &c).0),
        format!("{}\n", dir.path().display())
    );
}

#[test]
fn bash_interleaves_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = bash("echo 1; echo 2 >&2; echo 3; echo 4 >&2", &ctx(dir.path()));
    assert_eq!(ok_text(r), "1\n2\n3\n4\n");
}

#[test]
fn bash_missing_cwd() {
    let c = ctx(Path::new("/nonexistent/pith-test"));
    assert_eq!(
        bash("echo", &c).0.unwrap_err(),
        "Working directory does not exist: /nonexistent/pith-test\nCannot execute bash commands."
    );
}

#[test]
fn bash_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let tool = builtin_tool("bash").unwrap();
    let started = Instant::now();
    let args = prepare_and_validate(
        tool.as_ref(),
        &json!({"command": "echo start; sleep 5", "timeout": "0.3"}),
    )
    .unwrap();
    let err = tool
        .execute(&args, &ctx(dir.path()), &mut |_| {})
        .unwrap_err();
    assert_eq!(err, "start\n\n\nCommand timed out after 0.3 seconds");
    assert!(started.elapsed() < Duration::from_secs(3));
}

fn alive(pid: i32) -> bool {
    unsafe extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: signal 0 only checks for existence.
    unsafe { kill(pid, 0) == 0 }
}

fn wait_dead(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        // A killed orphan stays a zombie until init reaps it; `kill -0` still sees zombies.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if !alive(pid) || state.split_whitespace().nth(2) == Some("Z") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn bash_cancel_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let (mut src, token) = cancel_pair();
    let mut c = ctx(dir.path());
    c.cancel = token;
    let command = format!(
        "sleep 30 & echo $! > {}; echo start; wait",
        pid_file.display()
    );
    let handle = std::thread::spawn(move || bash(&command, &c).0);
    let until = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(&pid_file)
        .map(|s| s.trim().is_empty())
        .unwrap_or(true)
    {
        assert!(Instant::now() < until, "command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    let started = Instant::now();
    src.cancel();
    let err = handle.join().unwrap().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(err, "start\n\n\nCommand aborted");
    assert!(wait_dead(pid), "background child {pid} survived");
}

#[test]
fn bash_background_child_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let started = Instant::now();
    let (r, _) = bash(
        &format!("sleep 30 & echo $! > {}; echo hi", pid_file.display()),
        &ctx(dir.path()),
    );
    assert_eq!(ok_text(r), "hi\n");
    assert!(started.elapsed() < Duration::from_secs(3));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_dead(pid), "background child {pid} survived");
}

#[test]
fn bash_truncation_writes_full_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash("seq 1 30000", &ctx(dir.path())).0.unwrap();
    let details = out.details.clone().unwrap();
    let path = details["fullOutputPath"].as_str().unwrap().to_string();
    assert!(
        Path::new(&path)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("pi-bash-")
    );
    let full = std::fs::read_to_string(&path).unwrap();
    let expected: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
    let tr = &details["truncation"];
    assert_eq!(tr["truncatedBy"], "lines");
    assert_eq!(tr["outputLines"], 2000);
    let total = tr["totalLines"].as_u64().unwrap();
    let t = text(&out);
    assert!(
        t.ends_with(&format!(
            "30000\n\n\n[Showing lines {}-{total} of {total}. Full output: {path}]",
            total - 1999
        )),
        "{}",
        &t[t.len() - 200..]
    );
    let _ = std::fs::remove_file(path);
    // Line-count truncation under 50 KB still points at a file with the whole output.
    let out = bash("seq 1 3000", &ctx(dir.path())).0.unwrap();
    let details = out.details.clone().unwrap();
    let path = details["fullOutputPath"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().lines().count(),
        3000
    );
    assert!(text(&out).ends_with(&format!(
        "3000\n\n\n[Showing lines 1002-3001 of 3001. Full output: {path}]"
    )));
    let _ = std::fs::remove_file(path);
}

#[test]
fn rpc_runner_sanitises_and_reports_totals() {
    use pith::tools::process::{CommandSpec, run_command};
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancelToken::never();
    let spec = CommandSpec {
        command: "printf '\\033[31mred\\033[0m\\r\\n'; echo err >&2; exit 4",
        cwd: dir.path(),
        shell_path: None,
        prefix: Some("X=1"),
        cancel: &cancel,
        timeout: None,
        sanitize: true,
        path_prepend: None,
        env: &[],
        on_text: None,
        line_counting: Default::default(),
    };
    let o = run_command(&spec, Duration::from_millis(100), &mut |_| {}).unwrap();
    assert_eq!(o.output, "red\nerr\n");
    assert_eq!(
        (o.exit_code, o.cancelled, o.timed_out, o.truncated),
        (Some(4), false, false, false)
    );
    assert_eq!(
        (o.total_lines, o.total_bytes, o.output_lines, o.output_bytes),
        (3, 8, 3, 8)
    );
    assert_eq!(o.full_output_path, None);
}

#[test]
fn rpc_runner_cancel_result() {
    use pith::tools::process::{CommandSpec, run_command};
    let dir = tempfile::tempdir().unwrap();
    let (mut src, token) = cancel_pair();
    let cwd = dir.path().to_path_buf();
    let handle = std::thread::spawn(move || {
        let spec = CommandSpec {
            command: "sleep 20",
            cwd: &cwd,
            shell_path: None,
            prefix: None,
            cancel: &token,
            timeout: None,
            sanitize: true,
            path_prepend: None,
            env: &[],
            on_text: None,
            line_counting: Default::default(),
        };
        run_command(&spec, Duration::from_millis(100), &mut |_| {}).unwrap()
    });
    std::thread::sleep(Duration::from_millis(200));
    src.cancel();
    let o = handle.join().unwrap();
    assert_eq!(
        o.rpc_result(),
        json!({"output": "", "cancelled": true, "truncated": false})
    );
    let cancel = CancelToken::never();
    let spec = CommandSpec {
        command: "echo from-rpc-bash; echo to-stderr >&2",
        cwd: dir.path(),
        shell_path: None,
        prefix: None,
        cancel: &cancel,
        timeout: None,
        sanitize: true,
        path_prepend: None,
        env: &[],
        on_text: None,
        line_counting: Default::default(),
    };
    let o = run_command(&spec, Duration::from_millis(100), &mut |_| {}).unwrap();
    assert_eq!(
        serde_json::to_string(&o.rpc_result()).unwrap(),
        r#"{"output":"from-rpc-bash\nto-stderr\n","exitCode":0,"cancelled":false,"truncated":false}"#
    );
}

#[test]
fn read_directory_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    assert_eq!(
        run("read", json!({"path": "d"}), &ctx(dir.path())).unwrap_err(),
        "EISDIR: illegal operation on a directory, read"
    );
}

#[test]
fn rpc_runner_prepends_path() {
    use pith::tools::process::{CommandSpec, run_command};
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancelToken::never();
    let bin = Path::new("/opt/pith-test-bin");
    let spec = CommandSpec {
        command: "echo \"$PATH\"",
        cwd: dir.path(),
        shell_path: None,
        prefix: None,
        cancel: &cancel,
        timeout: None,
        sanitize: true,
        path_prepend: Some(bin),
        env: &[],
        on_text: None,
        line_counting: Default::default(),
    };
    let o = run_command(&spec, Duration::from_millis(100), &mut |_| {}).unwrap();
    assert!(o.output.starts_with("/opt/pith-test-bin:"), "{}", o.output);
}
