//! `make bench`: start-up latency, memory and streaming throughput of the real `pith` binary,
//! measured over pipes against a local fake provider (no network). A benchmark, not a test: it
//! prints figures and asserts nothing. Built only with `--features bench`.
//!
//! Figures:
//! - cold start: spawn → first response to `get_state` (median of 30 runs); the same with 200
//!   skills and 200 prompt templates to load (to `get_state` and to `get_commands`);
//! - short conversation: peak RSS of a faux run with three tool calls;
//! - long stream: a 20,000-chunk Anthropic reply, with full partial snapshots, with
//!   `--rpc-partials none` and with `--compat 0.87` (delta-only + live usage): wall time, output
//!   bytes, peak RSS;
//! - session load: a 10,000-entry session file opened with `--session`, time to `get_state`;
//! - many turns: 1,000 prompts in one process (the session on disk), each adding about 2 KB to
//!   the context: pith's CPU and the wall time per turn, per hundred turns, with the request
//!   size (a turn costs a fixed part plus what its request holds, nothing that grows with the
//!   number of turns as such);
//! - HTML export: `--export` of a 10,000-entry session with tools, thinking, markdown and
//!   branches (kept as `target/bench/export-10k.jsonl` for `tests/bench/compare.py`): wall and CPU
//!   time, page size; with Chromium installed, the page's load in a headless browser (parse to
//!   viewer ready, and with a search over every entry).
//! - sandbox (`PITH_BENCH_ONLY=sandbox`, in-process, Linux with Landlock): what `--sandbox` adds
//!   to a tool call (a tool thread confining itself: ruleset copy + restrict + seccomp) and to a
//!   bash call (`true` through the bash tool's runner), without / Landlock only / Landlock and
//!   seccomp; and the one-time set-up at start.
//! - permission rules: a 1,000-rule set (bash patterns, path patterns, tool-name globs),
//!   compiled once; the time to decide a five-part bash line, a file path and an MCP call
//!   (in-process, median of 2,000 decisions).

#[path = "../../tests/support/fake_llm.rs"]
mod fake_llm;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_llm::{FakeLlm, Reply};

fn pith_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.with_file_name("pith")
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("pith-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("agent")).expect("mkdir");
        std::fs::create_dir_all(dir.join("cwd")).expect("mkdir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spawn(s: &Scratch, args: &[&str]) -> Child {
    Command::new(pith_bin())
        .args(args)
        .current_dir(s.0.join("cwd"))
        .env("PI_CODING_AGENT_DIR", s.0.join("agent"))
        .env("HOME", &s.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pith")
}

/// Peak resident set size (VmHWM) of a live process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) a live process has used so far, in seconds (clock ticks of 10 ms).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn cold_start() {
    let s = Scratch::new("cold");
    let (median, min) = time_first_response(&s, b"{\"id\":1,\"type\":\"get_state\"}\n");
    println!("cold start to first response: median {median:.2} ms, min {min:.2} ms (30 runs)");
}

/// Skills and prompt templates a user might have: 100 of each in the config dir and 100 of each
/// in the project, each file with frontmatter and a body of some lines.
fn write_resources(s: &Scratch, n: usize) {
    let body = "Step one: read the relevant files.\nStep two: run the script in scripts/run.sh.\n"
        .repeat(20);
    for (root, scope) in [
        (s.0.join("agent"), "user"),
        (s.0.join("cwd/.pi"), "project"),
    ] {
        for i in 0..n / 2 {
            let dir = root.join(format!("skills/{scope}-skill-{i}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            let text = format!(
                "---\nname: {scope}-skill-{i}\ndescription: Does task {i} for the {scope}; use it when the user asks about task {i}.\nmetadata:\n  version: \"1.0\"\n---\n# Skill {i}\n\n{body}"
            );
            std::fs::write(dir.join("SKILL.md"), text).expect("write");
            let prompts = root.join("prompts");
            std::fs::create_dir_all(&prompts).expect("mkdir");
            let text = format!(
                "---\ndescription: Template {i} of the {scope}\nargument-hint: \"<file>\"\n---\nReview $1 for task {i}.\n\n{body}"
            );
            std::fs::write(prompts.join(format!("{scope}-t{i}.md")), text).expect("write");
        }
    }
}

/// Cold start with 200 skills and 200 templates (loaded at start-up): to the first `get_state`
/// response, and to the first `get_commands` response (which lists all 400).
fn cold_start_resources() {
    let s = Scratch::new("cold-resources");
    write_resources(&s, 200);
    let (median, min) = time_first_response(&s, b"{\"id\":1,\"type\":\"get_state\"}\n");
    println!(
        "cold start with 200 skills + 200 templates, to get_state: median {median:.2} ms, min {min:.2} ms (30 runs)"
    );
    let (median, min) = time_first_response(&s, b"{\"id\":1,\"type\":\"get_commands\"}\n");
    println!(
        "cold start with 200 skills + 200 templates, to get_commands: median {median:.2} ms, min {min:.2} ms (30 runs)"
    );
}

/// Spawn → first response line, 30 times: (median, min) in ms.
fn time_first_response(s: &Scratch, command: &[u8]) -> (f64, f64) {
    let mut times = Vec::new();
    for _ in 0..30 {
        let start = Instant::now();
        let mut child = spawn(
            s,
            &[
                "--mode",
                "rpc",
                "--no-session",
                "--provider",
                "faux",
                "--model",
                "faux",
            ],
        );
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(command).expect("write");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        times.push(start.elapsed());
        drop(stdin);
        let _ = child.wait();
    }
    let min = times.iter().min().copied().unwrap_or_default();
    (ms(median(times)), ms(min))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Send `lines`, read stdout until a line contains `until`; returns (elapsed, bytes read, peak
/// RSS, pith's CPU seconds).
fn drive(child: &mut Child, lines: &[&str], until: &str) -> (Duration, u64, u64, f64) {
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let start = Instant::now();
    for l in lines {
        stdin.write_all(l.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
    }
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let mut bytes = 0u64;
    let mut line = Vec::new();
    let mut peak = 0;
    let mut n = 0u64;
    loop {
        line.clear();
        let got = out.read_until(b'\n', &mut line).expect("read");
        if got == 0 {
            break;
        }
        bytes += got as u64;
        n += 1;
        if n % 512 == 0 {
            peak = peak.max(peak_rss_kib(pid));
        }
        if line.windows(until.len()).any(|w| w == until.as_bytes()) {
            break;
        }
    }
    let elapsed = start.elapsed();
    peak = peak.max(peak_rss_kib(pid));
    let cpu = cpu_secs(pid);
    drop(stdin);
    let mut rest = Vec::new();
    let _ = out.read_to_end(&mut rest);
    let _ = child.wait();
    (elapsed, bytes, peak, cpu)
}

fn short_conversation() {
    let s = Scratch::new("short");
    let script = s.0.join("faux.jsonl");
    std::fs::write(
        &script,
        concat!(
            "{\"text\":\"Writing.\",\"toolCalls\":[{\"name\":\"write\",\"arguments\":{\"path\":\"a.txt\",\"content\":\"hi\\n\"}}]}\n",
            "{\"text\":\"Checking.\",\"toolCalls\":[{\"name\":\"bash\",\"arguments\":{\"command\":\"cat a.txt\"}},{\"name\":\"read\",\"arguments\":{\"path\":\"a.txt\"}}]}\n",
            "{\"text\":\"Done.\"}\n"
        ),
    )
    .expect("script");
    let script = script.to_string_lossy().to_string();
    let mut child = spawn(
        &s,
        &[
            "--mode",
            "rpc",
            "--provider",
            "faux",
            "--model",
            "faux",
            "--faux-script",
            &script,
        ],
    );
    let (t, bytes, rss, _) = drive(
        &mut child,
        &["{\"id\":1,\"type\":\"prompt\",\"message\":\"go\"}"],
        "agent_settled",
    );
    println!(
        "short conversation (3 turns, 3 tool calls, session on disk): {:.1} ms, {} bytes out, peak RSS {:.1} MiB",
        ms(t),
        bytes,
        rss as f64 / 1024.0
    );
}

fn long_stream_body(chunks: usize) -> Vec<u8> {
    let mut b = String::with_capacity(chunks * 120);
    b.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"fake-model\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
    b.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    for _ in 0..chunks {
        b.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcd\"}}\n\n");
    }
    b.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    b.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":20000}}\n\n");
    b.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    b.into_bytes()
}

fn models_json(agent: &Path, base_url: &str) {
    let text = format!(
        "{{\"providers\":{{\"fake\":{{\"baseUrl\":\"{base_url}\",\"api\":\"anthropic-messages\",\"apiKey\":\"sk-bench\",\"models\":[{{\"id\":\"fake-model\",\"name\":\"Fake\",\"reasoning\":false,\"input\":[\"text\"],\"contextWindow\":200000,\"maxTokens\":16384,\"cost\":{{\"input\":3,\"output\":15,\"cacheRead\":0.3,\"cacheWrite\":3.75}}}}]}}}}}}"
    );
    std::fs::write(agent.join("models.json"), text).expect("models.json");
}

/// `partials`: `full` / `none` (0.73's `message_update` with or without snapshots) or `0.87`
/// (`--compat 0.87`: delta-only with the live usage).
fn long_stream(partials: &str) {
    let chunks = 20_000;
    let srv = FakeLlm::start(vec![
        Reply::sse(long_stream_body(chunks)).chunked(4096, Duration::ZERO),
    ]);
    let s = Scratch::new(&format!("stream-{partials}"));
    models_json(&s.0.join("agent"), &srv.base_url());
    let mut args = vec![
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "fake",
        "--model",
        "fake-model",
    ];
    if partials == "0.87" {
        args.extend(["--compat", "0.87"]);
    } else {
        args.extend(["--rpc-partials", partials]);
    }
    let mut child = spawn(&s, &args);
    let (t, bytes, rss, cpu) = drive(
        &mut child,
        &["{\"id\":1,\"type\":\"prompt\",\"message\":\"go\"}"],
        "agent_settled",
    );
    println!(
        "{chunks}-chunk stream, {}: {:.0} ms, pith CPU {:.2} s, {:.1} MiB out, peak RSS {:.1} MiB",
        if partials == "0.87" {
            "--compat 0.87".to_string()
        } else {
            format!("--rpc-partials {partials}")
        },
        ms(t),
        cpu,
        bytes as f64 / (1024.0 * 1024.0),
        rss as f64 / 1024.0
    );
}

fn session_load() {
    let s = Scratch::new("session");
    let path = s.0.join("big.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    writeln!(f, "{{\"type\":\"session\",\"version\":3,\"id\":\"01a20036-0000-7000-8000-000000000000\",\"timestamp\":\"2026-11-21T00:00:00.000Z\",\"cwd\":\"/tmp\"}}").expect("write");
    let mut parent = "null".to_string();
    for i in 0..10_000u32 {
        let id = format!("{i:08x}");
        let (role, body) = if i % 2 == 0 {
            (
                "user",
                format!(
                    "{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"question {i} with some words in it\"}}],\"timestamp\":1795299884867}}"
                ),
            )
        } else {
            (
                "assistant",
                format!(
                    "{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"answer {i} with a few more words in it\"}}],\"api\":\"faux\",\"provider\":\"faux\",\"model\":\"faux\",\"usage\":{{\"input\":100,\"output\":2,\"cacheRead\":0,\"cacheWrite\":0,\"totalTokens\":102,\"cost\":{{\"input\":0,\"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\"total\":0}}}},\"stopReason\":\"stop\",\"timestamp\":1795299884931}}"
                ),
            )
        };
        let _ = role;
        writeln!(f, "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-11-21T00:00:00.000Z\",\"message\":{body}}}").expect("write");
        parent = format!("\"{id}\"");
    }
    drop(f);
    let p = path.to_string_lossy().to_string();
    let mut times = Vec::new();
    let mut rss = 0;
    for _ in 0..5 {
        let mut child = spawn(
            &s,
            &[
                "--mode",
                "rpc",
                "--session",
                &p,
                "--provider",
                "faux",
                "--model",
                "faux",
            ],
        );
        let (t, _, r, _) = drive(
            &mut child,
            &["{\"id\":1,\"type\":\"get_state\"}"],
            "\"get_state\"",
        );
        times.push(t);
        rss = rss.max(r);
    }
    println!(
        "10,000-entry session: open to get_state {:.1} ms (median of 5), peak RSS {:.1} MiB",
        ms(median(times)),
        rss as f64 / 1024.0
    );
}

fn main() {
    if !pith_bin().exists() {
        eprintln!("build pith first (cargo build --release)");
        std::process::exit(1);
    }
    println!("pith bench ({})", pith_bin().display());
    // PITH_BENCH_ONLY=export (or cold, short, stream, session): one group only.
    let only = std::env::var("PITH_BENCH_ONLY").unwrap_or_default();
    let on = |name: &str| only.is_empty() || only.split(',').any(|o| o == name);
    if on("cold") {
        cold_start();
        cold_start_resources();
    }
    if on("short") {
        short_conversation();
    }
    if on("stream") {
        long_stream("none");
        long_stream("full");
        long_stream("0.87");
    }
    if on("session") {
        session_load();
    }
    if on("export") {
        export_html();
    }
    if on("turns") {
        many_turns(1000);
    }
    if on("sandbox") {
        sandbox_cost();
    }
    if on("rules") {
        permission_rules();
    }
}

/// Matching on a 1,000-rule set (in-process: the cost the gate adds to one tool call).
fn permission_rules() {
    use pith::perms::rules::{Anchors, Level, Rule, RuleSet, Subject};
    let anchors = Anchors {
        cwd: PathBuf::from("/work/project"),
        home: Some(PathBuf::from("/home/user")),
    };
    let started = Instant::now();
    let mut rules = Vec::new();
    for i in 0..1000 {
        let (text, level) = match i % 5 {
            0 => (format!("bash(tool{i} --flag *)"), Level::Allow),
            1 => (format!("bash(rm -rf /data{i}/*)"), Level::Deny),
            2 => (format!("read(src/module{i}/**/*.rs)"), Level::Allow),
            3 => (format!("write(/etc/conf{i}/**)"), Level::Deny),
            _ => (format!("mcp__server{i}__*"), Level::Ask),
        };
        rules.push(Rule::compile(&text, level, &anchors).expect("rule"));
    }
    let set = RuleSet::new(rules, None).expect("rule set");
    let compile = started.elapsed();
    let line = "git status && cargo build --release 2>&1 | tee log; echo $(date) > out.txt";
    let time = |f: &dyn Fn() -> Level| {
        let mut samples: Vec<Duration> = (0..2000)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect();
        samples.sort();
        samples[samples.len() / 2]
    };
    let bash = time(&|| {
        let split = pith::perms::shell::split(line);
        set.decide("bash", Subject::Command(&split, line), Level::Ask)
            .level
    });
    let path = Path::new("/work/project/src/module7/deep/file.rs");
    let read = time(&|| set.decide("read", Subject::Path(path), Level::Ask).level);
    let mcp = time(&|| {
        set.decide("mcp__github__create_issue", Subject::Call, Level::Ask)
            .level
    });
    println!(
        "permission rules, 1,000 rules: compile {:.1} ms; decide a 5-part bash line {:.1} µs, a read path {:.1} µs, an MCP call {:.1} µs (median of 2,000)",
        compile.as_secs_f64() * 1e3,
        bash.as_secs_f64() * 1e6,
        read.as_secs_f64() * 1e6,
        mcp.as_secs_f64() * 1e6
    );
}

/// The median of `runs` timings of `f`, in microseconds.
fn median_us(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}

/// `--sandbox`'s cost per tool call and per bash call (see the module comment).
fn sandbox_cost() {
    use pith::sandbox::{Fallback, Mode, Policy, Sandbox};
    use std::sync::Arc;
    let dir = Scratch::new("sandbox");
    let cwd = dir.0.join("cwd");
    let tmp = std::env::temp_dir();
    let policy = |network: bool| Policy {
        mode: Mode::WorkspaceWrite,
        network,
        writable_roots: Vec::new(),
        env_inherit: false,
        fallback: Fallback::Fail,
    };
    let setup = Instant::now();
    let full = match Sandbox::start(policy(false), &cwd, &tmp) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            println!("sandbox: skipped ({})", e.0);
            return;
        }
    };
    let setup_us = setup.elapsed().as_secs_f64() * 1e6;
    let landlock_only = Arc::new(Sandbox::start(policy(true), &cwd, &tmp).expect("sandbox"));
    let variants: [(&str, Option<Arc<Sandbox>>); 3] = [
        ("no sandbox", None),
        ("landlock", Some(landlock_only)),
        ("landlock+seccomp", Some(full)),
    ];
    println!("sandbox: start-up set-up (probe, ruleset, seccomp compile): {setup_us:.0} us");
    for (name, sb) in &variants {
        let thread = median_us(2000, || {
            let sb = sb.clone();
            std::thread::spawn(move || {
                if let Some(sb) = sb {
                    sb.enter().expect("enter");
                }
            })
            .join()
            .expect("join");
        });
        let bash = median_us(300, || {
            let sb = sb.clone();
            let cwd = cwd.clone();
            std::thread::spawn(move || {
                if let Some(sb) = sb {
                    sb.enter().expect("enter");
                }
                let (_source, token) = pith::cancel::cancel_pair();
                let spec = pith::tools::process::CommandSpec {
                    command: "true",
                    cwd: &cwd,
                    shell_path: None,
                    prefix: None,
                    cancel: &token,
                    timeout: None,
                    sanitize: false,
                    path_prepend: None,
                    env: &[],
                    on_text: None,
                    line_counting: pith::tools::truncate::LineCounting::Split,
                };
                pith::tools::process::run_command(&spec, Duration::from_secs(1), &mut |_| {})
                    .expect("run");
            })
            .join()
            .expect("join");
        });
        // A child's start and end alone (fork/exec/wait of /bin/true) on one confined thread.
        let sb2 = sb.clone();
        let child = std::thread::spawn(move || {
            if let Some(sb) = sb2 {
                sb.enter().expect("enter");
            }
            median_us(500, || {
                std::process::Command::new("/bin/true")
                    .status()
                    .expect("true");
            })
        })
        .join()
        .expect("join");
        println!(
            "sandbox: {name:<17} tool thread (spawn+enter+join) {thread:>6.1} us   child /bin/true {child:>6.0} us   bash tool `true` {bash:>6.0} us"
        );
    }
}

/// A minimal Anthropic endpoint for [`many_turns`]: reads each request whole (keeping only its
/// size, in `sizes`) and answers with a short text stream.
fn turn_server(sizes: std::sync::Arc<std::sync::Mutex<Vec<usize>>>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(stream) = conn else { continue };
            let sizes = sizes.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(stream.try_clone().expect("clone"));
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 {
                        return;
                    }
                    let h = h.trim_end().to_ascii_lowercase();
                    if h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; len];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                sizes.lock().expect("lock").push(len);
                let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_t\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"fake-model\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Noted; the logs look fine.\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":8}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
                let mut s = stream;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sse}",
                    sse.len()
                );
            });
        }
    });
    port
}

/// `turns` prompts in one process: per hundred turns, the median wall time of a turn (prompt
/// sent to `agent_settled` read), pith's CPU per turn, the request size at the end and the peak
/// RSS. Each prompt carries about 2 KB, so the context grows as in a real session.
fn many_turns(turns: usize) {
    let sizes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let port = turn_server(sizes.clone());
    let s = Scratch::new("turns");
    models_json(&s.0.join("agent"), &format!("http://127.0.0.1:{port}"));
    let sessions = s.0.join("sessions").to_string_lossy().to_string();
    let mut child = spawn(
        &s,
        &[
            "--mode",
            "rpc",
            "--provider",
            "fake",
            "--model",
            "fake-model",
            "--session-dir",
            &sessions,
        ],
    );
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let filler = "line of tool output ".repeat(100);
    println!("{turns} turns in one process (about 2 KB more context per turn, session on disk):");
    println!(
        "| turns | request (KB) | wall per turn, median (ms) | pith CPU per turn (ms) | peak RSS (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut walls = Vec::new();
    // (request MB, CPU ms per turn) of each group, for the fit printed at the end.
    let mut groups: Vec<(f64, f64)> = Vec::new();
    let mut cpu0 = cpu_secs(pid);
    let mut line = Vec::new();
    for t in 1..=turns {
        let start = Instant::now();
        writeln!(
            stdin,
            "{{\"type\":\"prompt\",\"message\":\"step {t}: look at the logs. {filler}\"}}"
        )
        .expect("write");
        loop {
            line.clear();
            if out.read_until(b'\n', &mut line).expect("read") == 0 {
                println!("pith stopped at turn {t}");
                let _ = child.wait();
                return;
            }
            if line.starts_with(b"{\"type\":\"agent_settled\"") {
                break;
            }
        }
        walls.push(start.elapsed());
        if t % (turns / 10).max(1) == 0 {
            let cpu = cpu_secs(pid);
            let n = walls.len();
            let last = sizes.lock().expect("lock").last().copied().unwrap_or(0);
            let group_sizes: Vec<usize> = {
                let all = sizes.lock().expect("lock");
                all[all.len().saturating_sub(n)..].to_vec()
            };
            let mean_mb = group_sizes.iter().sum::<usize>() as f64
                / group_sizes.len().max(1) as f64
                / 1_048_576.0;
            groups.push((mean_mb, (cpu - cpu0) * 1000.0 / n as f64));
            println!(
                "| {}-{t} | {:.0} | {:.2} | {:.2} | {:.1} |",
                t + 1 - n,
                last as f64 / 1024.0,
                ms(median(std::mem::take(&mut walls))),
                (cpu - cpu0) * 1000.0 / n as f64,
                peak_rss_kib(pid) as f64 / 1024.0
            );
            cpu0 = cpu;
        }
    }
    // Least squares over the groups: CPU per turn = fixed + per_mb × request size. A fixed
    // part that stays put and groups that sit on the line mean nothing grows with the number of
    // turns as such (only with what each request holds).
    let n = groups.len() as f64;
    let (sx, sy) = groups
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = groups.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = groups.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let per_mb = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let fixed = my - per_mb * mx;
    let fixed_parts: Vec<String> = groups
        .iter()
        .map(|(x, y)| format!("{:.2}", y - per_mb * x))
        .collect();
    println!(
        "pith CPU per turn = {fixed:.2} ms + {per_mb:.2} ms per MB of request; per group, CPU minus the request part (ms): {}",
        fixed_parts.join(", ")
    );
    // For tests/bench/compare.py's table.
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let groups_json: Vec<String> = groups
        .iter()
        .map(|(mb, cpu)| format!("[{mb:.4},{cpu:.4}]"))
        .collect();
    let json = format!(
        "{{\"turns\":{turns},\"fixed_ms\":{fixed:.4},\"per_mb_ms\":{per_mb:.4},\"groups\":[{}]}}\n",
        groups_json.join(",")
    );
    if std::fs::create_dir_all(&out_dir).is_ok() {
        let _ = std::fs::write(out_dir.join("turns.json"), json);
    }
    drop(stdin);
    let _ = child.wait();
}

/// A 10,000-entry session like a long working session: turns of a user message, an assistant
/// thinking and reading a file, the file, a test run and its output, an answer in markdown with
/// code; every 40 turns a new branch from an earlier user message.
fn write_export_session(path: &Path, n: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    writeln!(f, "{{\"type\":\"session\",\"version\":3,\"id\":\"01a20036-0000-7000-8000-0000000000e1\",\"timestamp\":\"2026-11-21T00:00:00.000Z\",\"cwd\":\"/home/dev/project\"}}").expect("write");
    let code = "fn main() {\\n    let xs: Vec<u32> = (0..10).collect();\\n    for x in &xs {\\n        println!(\\\"{}\\\", x * 2); // double it\\n    }\\n}\\n";
    let file: String = code.repeat(8);
    let answer = format!(
        "Here is the plan:\\n\\n1. Read `src/main.rs`\\n2. Change the **loop**\\n3. Run the tests\\n\\n| step | status |\\n|---|---|\\n| read | done |\\n| test | ok |\\n\\n```rust\\n{code}```\\n\\nThat should do it."
    );
    let tests: String = "test tests::case ... ok\\n".repeat(15);
    let usage = "{\"input\":1200,\"output\":300,\"cacheRead\":5000,\"cacheWrite\":0,\"totalTokens\":6500,\"cost\":{\"input\":0.0036,\"output\":0.0045,\"cacheRead\":0.0015,\"cacheWrite\":0,\"total\":0.0096}}";
    let asst = |content: &str, stop: &str| {
        format!(
            "{{\"role\":\"assistant\",\"content\":[{content}],\"api\":\"anthropic-messages\",\"provider\":\"anthropic\",\"model\":\"claude-sonnet-4-5\",\"usage\":{usage},\"stopReason\":\"{stop}\",\"timestamp\":1795299884931}}"
        )
    };
    let mut parent: Option<usize> = None;
    let mut users: Vec<Option<usize>> = Vec::new();
    let mut i = 0usize;
    let mut turn = 0usize;
    while i < n {
        if turn > 0 && turn % 40 == 0 {
            // A new branch: the next user message replaces an earlier one.
            parent = users[(turn * 7919) % users.len()];
        }
        let bodies = [
            format!(
                "{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"Please change step {turn} of the loop and explain why it works.\"}}],\"timestamp\":1795299884867}}"
            ),
            asst(
                &format!(
                    "{{\"type\":\"thinking\",\"thinking\":\"The user wants a change at step {turn}. Read the file first, then edit it carefully.\",\"thinkingSignature\":\"x\"}},{{\"type\":\"text\",\"text\":\"Let me read it.\"}},{{\"type\":\"toolCall\",\"id\":\"call_{turn}_r\",\"name\":\"read\",\"arguments\":{{\"path\":\"src/main.rs\"}}}}"
                ),
                "toolUse",
            ),
            format!(
                "{{\"role\":\"toolResult\",\"toolCallId\":\"call_{turn}_r\",\"toolName\":\"read\",\"content\":[{{\"type\":\"text\",\"text\":\"{file}\"}}],\"isError\":false,\"timestamp\":1795299884900}}"
            ),
            asst(
                &format!(
                    "{{\"type\":\"toolCall\",\"id\":\"call_{turn}_b\",\"name\":\"bash\",\"arguments\":{{\"command\":\"cargo test --quiet 2>&1 | tail -20\"}}}}"
                ),
                "toolUse",
            ),
            format!(
                "{{\"role\":\"toolResult\",\"toolCallId\":\"call_{turn}_b\",\"toolName\":\"bash\",\"content\":[{{\"type\":\"text\",\"text\":\"running 15 tests\\n{tests}\\ntest result: ok. 15 passed\"}}],\"isError\":false,\"timestamp\":1795299884920}}"
            ),
            asst(
                &format!("{{\"type\":\"text\",\"text\":\"{answer}\"}}"),
                "stop",
            ),
        ];
        for (k, body) in bodies.iter().enumerate() {
            if i >= n {
                break;
            }
            if k == 0 {
                users.push(parent);
            }
            let p = parent.map_or("null".to_string(), |p| format!("\"{p:08x}\""));
            writeln!(f, "{{\"type\":\"message\",\"id\":\"{i:08x}\",\"parentId\":{p},\"timestamp\":\"2026-11-21T00:00:00.000Z\",\"message\":{body}}}").expect("write");
            parent = Some(i);
            i += 1;
        }
        turn += 1;
    }
}

/// CPU seconds (user + system) of this process's waited-for children so far.
fn children_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(13) + tick(14)) / 100.0
}

fn export_html() {
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&out_dir).expect("mkdir target/bench");
    let session = out_dir.join("export-10k.jsonl");
    write_export_session(&session, 10_000);
    let page = out_dir.join("export-10k.html");
    let mut times = Vec::new();
    let runs = 7;
    let cpu_before = children_cpu_secs();
    for _ in 0..runs {
        let start = Instant::now();
        let st = Command::new(pith_bin())
            .args([
                "--export",
                &session.to_string_lossy(),
                &page.to_string_lossy(),
            ])
            .stdout(Stdio::null())
            .status()
            .expect("pith --export");
        times.push(start.elapsed());
        assert!(st.success(), "pith --export failed");
    }
    let cpu = (children_cpu_secs() - cpu_before) / runs as f64;
    let session_mib = std::fs::metadata(&session).map_or(0, |m| m.len()) as f64 / 1048576.0;
    let page_mib = std::fs::metadata(&page).map_or(0, |m| m.len()) as f64 / 1048576.0;
    println!(
        "HTML export of a 10,000-entry session ({session_mib:.1} MiB): {:.0} ms wall (median of {runs}), {:.0} ms CPU; page {page_mib:.1} MiB",
        ms(median(times)),
        cpu * 1000.0
    );
    match chromium() {
        Some(browser) => {
            // Times the page reports itself (ms after navigation): first content painted (a long
            // page paints before it is parsed to the end) and the viewer script ready. One run
            // each: dumping a DOM this size takes the browser several seconds.
            let load = |suffix: &str| -> Option<(u64, u64)> {
                let profile = std::env::temp_dir()
                    .join(format!("pith-bench-chromium-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&profile);
                let out = Command::new(&browser)
                    .args([
                        "--headless",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-background-networking",
                        "--disable-component-update",
                        "--disable-sync",
                        "--no-first-run",
                        "--dump-dom",
                    ])
                    .arg(format!("--user-data-dir={}", profile.display()))
                    .arg(format!("file://{}{suffix}", page.display()))
                    .stderr(Stdio::null())
                    .output()
                    .ok()?;
                let _ = std::fs::remove_dir_all(&profile);
                let dom = String::from_utf8_lossy(&out.stdout);
                let head = &dom[..dom.len().min(4096)];
                let attr = |name: &str| -> Option<u64> {
                    head.split(&format!("{name}=\""))
                        .nth(1)?
                        .split('"')
                        .next()?
                        .parse()
                        .ok()
                };
                Some((attr("data-fcp").unwrap_or(0), attr("data-ready")?))
            };
            match (load(""), load("?q=step%2099")) {
                (Some((fcp, ready)), Some((_, search))) => println!(
                    "  in headless Chromium (ms after navigation): first content painted {fcp}, viewer ready {ready}; with a search over every entry at start, ready {search}"
                ),
                _ => println!("  in Chromium: the page did not load"),
            }
        }
        None => println!("  in Chromium: skipped (no chromium installed)"),
    }
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PITH_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser", "google-chrome"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}
