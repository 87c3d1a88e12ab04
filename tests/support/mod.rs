//! Test support: spawn the real `pith` binary over pipes, send lines, read frames. The
//! submodules hold what several test files share: the fake LLM server (`fake_llm`, also included
//! by path from `src/bin/pith-bench.rs`), scripted Anthropic SSE bodies (`anthropic`) and Bedrock
//! streams (`bedrock`), frame and request helpers (`frames`), the fake MCP server (`mcp`) and a raw HTTP server for
//! its streamable-HTTP variants (`http_raw`), the
//! node for TypeScript extensions (`node`), a finished run's output (`output`), session files
//! (`sessions`) and process markers (`procs`).
#![allow(dead_code)]

pub mod anthropic;
pub mod bedrock;
pub mod fake_llm;
pub mod frames;
pub mod http_raw;
pub mod mcp;
pub mod node;
pub mod output;
pub mod procs;
pub mod recorded;
pub mod scenario;
pub mod sessions;
pub mod streams;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::Value;

use fake_llm::{FakeLlm, Reply};

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The fake Anthropic provider's `fake-model`, no session (the one-shot modes add theirs).
pub const FAKE_NO_SESSION: [&str; 5] = [
    "--provider",
    "fake",
    "--model",
    "fake-model",
    "--no-session",
];

/// The offline faux provider (the one-shot modes add theirs).
pub const FAUX: [&str; 4] = ["--provider", "faux", "--model", "faux"];

/// `--mode rpc` on the fake Anthropic provider's `fake-model`, then `extra`.
pub fn fake_rpc<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    fake_rpc_on("fake-model", extra)
}

/// `--mode rpc` on the fake Anthropic provider's `model`, then `extra`.
pub fn fake_rpc_on<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--mode", "rpc", "--provider", "fake", "--model", model];
    args.extend_from_slice(extra);
    args
}

/// `--mode rpc` on the offline faux provider (no script), then `extra`.
pub fn faux<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    faux_mode("rpc", extra)
}

/// `--mode <mode>` on the offline faux provider (no script), then `extra`.
pub fn faux_mode<'a>(mode: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--mode", mode, "--provider", "faux", "--model", "faux"];
    args.extend_from_slice(extra);
    args
}

/// A faux script of two turns: the tool `calls` (a JSON array) at once, then the text "done".
pub fn calls_then_done(calls: Value) -> String {
    format!(
        "{}\n{}\n",
        serde_json::json!({ "toolCalls": calls }),
        serde_json::json!({"text": "done"})
    )
}

/// `--mode rpc` on the offline faux provider with the script file at `script`, then `extra`.
pub fn faux_rpc<'a>(script: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = faux(&["--faux-script", script]);
    args.extend_from_slice(extra);
    args
}

/// Writes `text` to `path` (panics on failure); returns the path as a string.
pub fn write_text(path: &Path, text: &str) -> String {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path.to_string_lossy().into_owned()
}

/// A port on 127.0.0.1 that nothing listens on (bound, then let go): connecting is refused.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The world's working directory, canonical (as pith reports it).
pub fn cwd_of(w: &World) -> String {
    std::fs::canonicalize(w.cwd())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// `--mode rpc` on the fake Anthropic provider in `world` without a session, under
/// `--compat compat`, then `extra`.
pub fn spawn_compat(world: &World, compat: &str, extra: &[&str]) -> Pith {
    let mut args = fake_rpc(&["--no-session", "--compat", compat]);
    args.extend_from_slice(extra);
    world.spawn(&args)
}

/// [`World::spawn`] with `env` added to the environment.
pub fn spawn_env<V: AsRef<std::ffi::OsStr>>(
    world: &World,
    args: &[&str],
    env: &[(&str, V)],
) -> Pith {
    let mut cmd = world.command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Pith::spawn_cmd(cmd)
}

/// A started fake LLM serving `replies` and a world whose models.json points at it.
pub fn fake_world(replies: Vec<Reply>) -> (World, FakeLlm) {
    let llm = FakeLlm::start(replies);
    let world = World::new();
    world.fake_models(llm.port);
    (world, llm)
}

/// A scratch world for one pith process: config dir, home, cwd and tmp.
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["agent", "home", "cwd", "tmp"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        World { dir }
    }
    pub fn agent_dir(&self) -> PathBuf {
        self.dir.path().join("agent")
    }
    pub fn cwd(&self) -> PathBuf {
        self.dir.path().join("cwd")
    }
    pub fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }
    pub fn write_agent_file(&self, name: &str, text: &str) {
        std::fs::write(self.agent_dir().join(name), text).expect("write agent file");
    }
    /// The oracle's provider config: `fake` (anthropic-messages) and `fake-openai`, at `port`.
    pub fn fake_models(&self, port: u16) {
        let t =
            std::fs::read_to_string(fixture("config/models.json.tmpl")).expect("models template");
        self.write_agent_file("models.json", &t.replace("{PORT}", &port.to_string()));
    }
    pub fn spawn(&self, args: &[&str]) -> Pith {
        Pith::spawn_in(self, args)
    }
    /// `--mode rpc` on the offline faux provider with `script` (one JSON line per assistant
    /// turn, written to the world's tmp dir), then `extra`.
    pub fn spawn_faux(&self, script: &str, extra: &[&str]) -> Pith {
        self.spawn_faux_in(&self.tmp(), script, extra)
    }
    /// [`World::spawn_faux`] with the script written to `dir/faux.jsonl`.
    pub fn spawn_faux_in(&self, dir: &Path, script: &str, extra: &[&str]) -> Pith {
        Pith::spawn_cmd(self.faux_command(dir, script, extra))
    }
    /// The command of [`World::spawn_faux_in`] (stdio left to the caller).
    pub fn faux_command(&self, dir: &Path, script: &str, extra: &[&str]) -> Command {
        let path = write_text(&dir.join("faux.jsonl"), script);
        self.command(&faux_rpc(&path, extra))
    }
    /// Runs pith with `args` in this world, stdin closed, and waits for it; panics (after
    /// killing it) if it takes more than 10 s.
    pub fn output_within_10s(&self, args: &[&str]) -> std::process::Output {
        let child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pith");
        let pid = child.id();
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(out) => out.expect("wait for pith"),
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                panic!("pith {args:?} did not exit within 10 s");
            }
        }
    }
    /// The `pith` binary with `args`, run in this world: its cwd, and only PATH, HOME, TMPDIR
    /// and PI_CODING_AGENT_DIR in the environment. Stdio is left to the caller.
    pub fn command(&self, args: &[&str]) -> Command {
        self.wrapped_command(&[], args)
    }
    /// [`World::command`] run by another program: `wrapper` (e.g. `["unshare", "-m", …]`), then
    /// the `pith` binary and `args`.
    pub fn wrapped_command(&self, wrapper: &[&str], args: &[&str]) -> Command {
        let pith = env!("CARGO_BIN_EXE_pith");
        let mut c = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(pith);
                c
            }
            None => Command::new(pith),
        };
        c.args(args)
            .current_dir(self.cwd())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("TMPDIR", self.tmp())
            .env("PI_CODING_AGENT_DIR", self.agent_dir());
        c
    }
}

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

pub struct Pith {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every frame read so far, in order.
    pub seen: Vec<Value>,
    /// Every stderr line so far (also echoed to the test's stderr).
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Pith {
    pub fn spawn_in(world: &World, args: &[&str]) -> Pith {
        Pith::spawn_cmd(world.command(args))
    }

    /// Start a prepared command (see [`World::command`], [`World::wrapped_command`]).
    pub fn start(command: Command) -> Pith {
        Pith::spawn_cmd(command)
    }

    /// Spawn a prepared command (e.g. [`World::command`] with extra environment).
    pub fn spawn_cmd(mut cmd: Command) -> Pith {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pith");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let err_lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = err_lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[pith stderr] {line}");
                if let Ok(mut v) = sink.lock() {
                    v.push(line);
                }
            }
        });
        let stdin = child.stdin.take();
        Pith {
            child,
            stdin,
            lines: rx,
            seen: Vec::new(),
            stderr: err_lines,
        }
    }

    /// The stderr lines read so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().expect("stderr lines").clone()
    }

    pub fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("serialise");
        line.push(b'\n');
        self.send_raw(&line);
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write stdin");
        stdin.flush().expect("flush stdin");
    }

    /// Take stdin to write from another thread (dropping it closes pith's input).
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin open")
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The next raw stdout line.
    pub fn next_line(&mut self, timeout: Duration) -> Option<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Some(l),
            Err(RecvTimeoutError::Timeout) => panic!(
                "timed out waiting for a frame; seen so far: {:#?}",
                self.seen
            ),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next frame (panics on timeout, on EOF, if the line is not JSON, or if no version's
    /// `pith schema` describes it).
    pub fn recv(&mut self) -> Value {
        let line = self.next_line(TIMEOUT).expect("stdout closed");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        check_frame(&v);
        self.seen.push(v.clone());
        v
    }

    /// Frames until (and including) the first that satisfies `pred`.
    pub fn recv_until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let v = self.recv();
            let done = pred(&v);
            out.push(v);
            if done {
                return out;
            }
        }
    }

    /// Frames until the response with this id; returns (frames before it, the response).
    pub fn response(&mut self, id: &str) -> Value {
        let frames = self.recv_until(|v| v["type"] == "response" && v["id"] == id);
        frames.last().cloned().expect("response")
    }

    /// Send a command with an id and return its response (events before it are kept in `seen`).
    pub fn call(&mut self, mut cmd: Value, id: &str) -> Value {
        cmd["id"] = Value::String(id.to_string());
        self.send(cmd);
        self.response(id)
    }

    /// The next frame within `d`, if one comes (`None` on timeout or EOF).
    pub fn try_recv(&mut self, d: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(d).ok()?;
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        check_frame(&v);
        self.seen.push(v.clone());
        Some(v)
    }

    /// No more frames for `d` (EOF also counts as "no more").
    pub fn assert_quiet(&mut self, d: Duration) {
        if let Ok(l) = self.lines.recv_timeout(d) {
            panic!("unexpected frame: {l}");
        }
    }

    /// Close stdin and wait for the exit status (panics after `timeout`).
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, Vec<String>) {
        self.close_stdin();
        let status = wait_timeout(&mut self.child, timeout);
        let rest: Vec<String> = self.lines.iter().collect();
        (status, rest)
    }

    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        wait_timeout(&mut self.child, timeout)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Every frame a test reads from an RPC pith must be one `pith schema` describes (issue 27): the
/// schema of at least one protocol version (the test's `--compat` may come from settings), so a
/// frame that changes shape or gains a field fails the test that sees it. The frames of the test
/// suite are the schema's test, with `tests/protocol_schema.rs` (per version, and pi's
/// transcripts).
pub fn check_frame(v: &Value) {
    static DOCS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    let docs = DOCS.get_or_init(|| {
        pith::protocol::Version::ALL
            .iter()
            .map(|v| pith::schema::document(*v))
            .collect()
    });
    let mut errors = Vec::new();
    for d in docs {
        let e = pith::schema::check(d, v, false);
        if e.is_empty() {
            return;
        }
        errors = e;
    }
    let shown: String = v.to_string().chars().take(600).collect();
    panic!("a frame `pith schema` does not describe: {errors:?}\n    {shown}");
}

pub fn wait_timeout(child: &mut Child, timeout: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("pith did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for Pith {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
