//! Replay an oracle scenario (the format of the oracle's `drive.py`) against pith and compare
//! what pith writes and sends with a recording of pi's answers (made by
//! `tests/scenarios/skills/record.py`), normalised the way the oracle's `compare.py` does it.
//! No oracle needed: the scenario and the recording are files of this repository.
//!
//! Supported: the scratch layout (`home/` = config dir, `userhome/` = `$HOME`, `cwd/`, `tmp/`),
//! `cwd_files` (also `../home/...`), `settings`, `agent_args` with `{SCRATCH}` / `{CWD}` / ...,
//! text turns of the fake LLM script (`turns`, `fallback`, `delay_ms`) on the Anthropic API,
//! and the steps `send`, `wait_for`, `wait_for_type`, `wait_for_response`, `quiet_ms`,
//! `sleep_ms`, `shell`. Documented deviations are dropped from pith's side as the oracle's
//! `deviations.py` drops them (`agent_settled`, get_state's additive fields).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::anthropic::{Block, Sse};
use super::fake_llm::{FakeLlm, Reply};
use super::{Pith, fixture};

/// Pacing of `delay_ms` turns is stretched by this factor: only the order of events matters,
/// and a loaded machine must still see every command answered between two deltas.
const DELAY_FACTOR: u32 = 3;
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Outcome {
    pub stdout: Vec<Value>,
    pub requests: Vec<Value>,
}

/// Run `tests/scenarios/<dir>/<name>.json` against pith with `extra_args` after the scenario's
/// own, and compare with `fixtures/<recording>/<name>.json`; panics with a diff when they differ.
pub fn check(dir: &str, name: &str, recording: &str, extra_args: &[&str]) {
    let scenario_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scenarios")
        .join(dir)
        .join(format!("{name}.json"));
    let got = run(&scenario_path, extra_args);
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture(&format!("{recording}/{name}.json"))).expect("recording"),
    )
    .expect("recording json");
    let want_stdout = want["stdout"].as_array().expect("stdout").clone();
    let want_requests = want["requests"].as_array().expect("requests").clone();
    assert_same(name, "stdout", &want_stdout, &got.stdout);
    assert_same(name, "requests", &want_requests, &got.requests);
}

fn assert_same(name: &str, what: &str, want: &[Value], got: &[Value]) {
    if want == got {
        return;
    }
    let mut report = format!(
        "{name}: {what} differs from pi's ({} vs {} lines)\n",
        want.len(),
        got.len()
    );
    for i in 0..want.len().max(got.len()) {
        let (w, g) = (want.get(i), got.get(i));
        if w != g {
            let show = |v: Option<&Value>| {
                let s = v.map_or("<none>".to_string(), |v| v.to_string());
                if s.chars().count() > 1500 {
                    format!("{}...", s.chars().take(1500).collect::<String>())
                } else {
                    s
                }
            };
            report += &format!(
                "first difference at line {i}:\n  pi:   {}\n  pith: {}\n",
                show(w),
                show(g)
            );
            break;
        }
    }
    panic!("{report}");
}

/// Replay a scenario; returns the normalised stdout messages and request bodies.
pub fn run(scenario_path: &Path, extra_args: &[&str]) -> Outcome {
    let sc: Value =
        serde_json::from_str(&std::fs::read_to_string(scenario_path).expect("scenario"))
            .expect("scenario json");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    for d in ["home", "userhome", "cwd", "sessions", "tmp"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    let ctx: HashMap<&str, PathBuf> = [
        ("SCRATCH", root.clone()),
        ("HOME", root.join("home")),
        ("USERHOME", root.join("userhome")),
        ("CWD", root.join("cwd")),
        ("SESSIONS", root.join("sessions")),
    ]
    .into_iter()
    .collect();
    let subst = |s: &str| -> String {
        let mut s = s.to_string();
        for (k, v) in &ctx {
            s = s.replace(&format!("{{{k}}}"), &v.to_string_lossy());
        }
        s
    };
    if let Some(files) = sc["cwd_files"].as_object() {
        for (rel, content) in files {
            let p = root.join("cwd").join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, content.as_str().expect("file content")).expect("write");
        }
    }
    let llm = FakeLlm::start(replies(&sc["llm"]));
    let tmpl = std::fs::read_to_string(fixture("config/models.json.tmpl")).expect("models");
    std::fs::write(
        root.join("home/models.json"),
        tmpl.replace("{PORT}", &llm.port.to_string()),
    )
    .expect("models.json");
    if let Some(settings) = sc.get("settings").filter(|s| s.is_object()) {
        std::fs::write(root.join("home/settings.json"), settings.to_string()).expect("settings");
    }
    let mut args: Vec<String> = vec!["--mode".into(), "rpc".into()];
    for a in sc["agent_args"].as_array().into_iter().flatten() {
        args.push(subst(a.as_str().expect("arg")));
    }
    args.extend(extra_args.iter().map(|s| s.to_string()));
    let keep_settled = args
        .windows(2)
        .any(|w| w[0] == "--compat" && w[1].starts_with("0.87"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pith"));
    cmd.args(&args)
        .current_dir(root.join("cwd"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join("userhome"))
        .env("TMPDIR", root.join("tmp"))
        .env("PI_CODING_AGENT_DIR", root.join("home"));
    let mut p = Pith::spawn_cmd(cmd);
    let mut cursor = 0usize;
    for step in sc["steps"].as_array().expect("steps") {
        if let Some(msg) = step.get("send") {
            let text = subst(&msg.to_string());
            p.send(serde_json::from_str(&text).expect("send json"));
        } else if let Some(pred) = step
            .get("wait_for")
            .or_else(|| step.get("wait_for_type"))
            .cloned()
            .or_else(|| {
                step.get("wait_for_response")
                    .map(|k| json!({"type": "response", "command": k}))
            })
        {
            let count = step.get("count").and_then(Value::as_u64).unwrap_or(1);
            wait_for(&mut p, &mut cursor, &pred, count);
        } else if let Some(ms) = step.get("quiet_ms").and_then(Value::as_u64) {
            let q = Duration::from_millis(ms);
            while p.try_recv(q).is_some() {}
        } else if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
            std::thread::sleep(Duration::from_millis(ms));
        } else if let Some(sh) = step.get("shell").and_then(Value::as_str) {
            let st = Command::new("sh")
                .arg("-c")
                .arg(subst(sh))
                .current_dir(&root)
                .status()
                .expect("shell");
            assert!(st.success(), "shell step failed: {sh}");
        } else {
            panic!("unsupported step {step}");
        }
    }
    let mut frames = std::mem::take(&mut p.seen);
    let (_status, rest) = p.finish(STEP_TIMEOUT);
    for line in rest {
        frames.push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
    }
    let root_str = root.to_string_lossy().into_owned();
    let mut n = Normalizer::new(&root_str);
    let stdout: Vec<Value> = frames
        .into_iter()
        .filter_map(|m| deviation(m, keep_settled))
        .map(|m| n.message(m))
        .collect();
    let mut n = Normalizer::new(&root_str);
    let mut requests: Vec<Value> = llm
        .requests()
        .into_iter()
        .map(|r| {
            let body: Value = serde_json::from_str(&r.body).unwrap_or(Value::String(r.body));
            // The oracle's fake LLM logs the path without its query (`?beta=true`).
            let path = r.path.split('?').next().unwrap_or_default();
            json!({"path": path, "body": n.value(body, None)})
        })
        .collect();
    // As record.py writes them: the system prompt and tools of later requests, when the same
    // as the first's, as a reference.
    if let Some(first) = requests.first().cloned() {
        for r in requests.iter_mut().skip(1) {
            for key in ["system", "tools"] {
                if let Some(v) = r["body"].get_mut(key) {
                    if Some(&*v) == first["body"].get(key) {
                        *v = json!("<as in the first request>");
                    }
                }
            }
        }
    }
    Outcome { stdout, requests }
}

/// Replies for the fake LLM script: the turns, then the fallback (or a default text) for the
/// requests after them.
fn replies(script: &Value) -> Vec<Reply> {
    let turns: Vec<Value> = script["turns"].as_array().cloned().unwrap_or_default();
    let fallback = script
        .get("fallback")
        .cloned()
        .unwrap_or(json!({"text": ["fake script exhausted"]}));
    let mut out = Vec::new();
    for i in 0..turns.len() + 64 {
        let turn = turns.get(i).unwrap_or(&fallback);
        let chunks: Vec<String> = match &turn["text"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect(),
            _ => panic!("only text turns are supported: {turn}"),
        };
        let sse = Sse {
            id: format!("msg_fake_{}", i + 1),
            input_tokens: 100,
            output_tokens: chunks.len().max(1) as u64,
            ping: true,
        };
        let reply = sse.reply(&[Block::Text(chunks)]);
        out.push(match turn.get("delay_ms").and_then(Value::as_u64) {
            Some(ms) => reply.paced(Duration::from_millis(ms) * DELAY_FACTOR),
            None => reply,
        });
    }
    out
}

/// drive.py's `matches`: a type name, or dotted paths that must equal the given values.
fn matches(msg: &Value, pred: &Value) -> bool {
    match pred {
        Value::String(t) => msg["type"] == *t,
        Value::Object(m) => m.iter().all(|(k, v)| {
            let mut cur = msg;
            for part in k.split('.') {
                cur = match cur {
                    Value::Object(o) => match o.get(part) {
                        Some(x) => x,
                        None => return false,
                    },
                    Value::Array(a) => match part.parse::<usize>().ok().and_then(|i| a.get(i)) {
                        Some(x) => x,
                        None => return false,
                    },
                    _ => return false,
                };
            }
            cur == v
        }),
        _ => false,
    }
}

/// Wait for the `count`-th frame after the cursor that matches `pred`; the cursor moves past it.
fn wait_for(p: &mut Pith, cursor: &mut usize, pred: &Value, count: u64) {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut found = 0;
    let mut idx = *cursor;
    loop {
        while idx < p.seen.len() {
            if matches(&p.seen[idx], pred) {
                found += 1;
                if found >= count {
                    *cursor = idx + 1;
                    return;
                }
            }
            idx += 1;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || p.try_recv(left).is_none() {
            panic!("timed out waiting for {pred}; seen: {:#?}", p.seen);
        }
    }
}

/// The oracle's `deviations.py`, pith's side: frames pith adds by design are dropped
/// (`agent_settled` only under 0.73: pi 0.87.1 emits it too).
fn deviation(mut m: Value, keep_settled: bool) -> Option<Value> {
    if m["type"] == "agent_settled" && !keep_settled {
        return None;
    }
    if m["type"] == "response" && m["command"] == "get_state" {
        if let Some(d) = m.get_mut("data").and_then(Value::as_object_mut) {
            d.remove("interruptMode");
            d.remove("queuedMessageCount");
        }
    }
    Some(m)
}

/// `compare.py`'s `Normalizer`: volatile values become placeholders, numbered by first
/// appearance.
struct Normalizer {
    root: String,
    map: HashMap<(String, String), String>,
    counts: HashMap<String, usize>,
}

const ID_KEYS: [&str; 11] = [
    "id",
    "entryId",
    "parentId",
    "firstKeptEntryId",
    "toolCallId",
    "sessionId",
    "responseId",
    "parentSession",
    "leafId",
    "targetId",
    "fromId",
];
const TS_KEYS: [&str; 3] = ["timestamp", "ts", "created"];

fn is_hex8(s: &str) -> bool {
    s.len() == 8
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
}

impl Normalizer {
    fn new(root: &str) -> Normalizer {
        Normalizer {
            root: root.to_string(),
            map: HashMap::new(),
            counts: HashMap::new(),
        }
    }

    fn ph(&mut self, kind: &str, v: &str) -> String {
        let key = (kind.to_string(), v.to_string());
        if let Some(p) = self.map.get(&key) {
            return p.clone();
        }
        let n = self.counts.entry(kind.to_string()).or_insert(0);
        *n += 1;
        let p = format!("<{kind}{n}>");
        self.map.insert(key, p.clone());
        p
    }

    fn string(&mut self, s: &str) -> String {
        let mut s = s.replace(&self.root, "<SCRATCH>");
        // 127.0.0.1:<port>
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find("127.0.0.1:") {
            out.push_str(&rest[..i + 10]);
            let after = &rest[i + 10..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            out.push_str(if digits > 0 { "<PORT>" } else { "" });
            rest = &after[digits..];
        }
        out.push_str(rest);
        s = out;
        if let Some(i) = s.find("Current date: ") {
            let d = &s[i + 14..];
            if d.len() >= 10 && d.as_bytes()[4] == b'-' && d.as_bytes()[7] == b'-' {
                s = format!("{}Current date: <DATE>{}", &s[..i], &d[10..]);
            }
        }
        // UUIDs anywhere.
        let mut out = String::new();
        let mut i = 0;
        let b = s.as_bytes();
        while i < b.len() {
            if i + 36 <= b.len()
                && s.is_char_boundary(i)
                && s.is_char_boundary(i + 36)
                && is_uuid(&s[i..i + 36])
            {
                let u = s[i..i + 36].to_string();
                out.push_str(&self.ph("uuid", &u));
                i += 36;
            } else {
                let c = s[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
        out
    }

    fn value(&mut self, v: Value, _key: Option<&str>) -> Value {
        match v {
            Value::Object(o) => {
                let mut out = Map::new();
                for (k, x) in o {
                    let nv = if TS_KEYS.contains(&k.as_str()) && x.is_number() {
                        json!("<ts>")
                    } else if ID_KEYS.contains(&k.as_str())
                        && x.as_str().is_some_and(|s| is_hex8(s) || is_uuid(s))
                    {
                        let s = x.as_str().unwrap_or_default().to_string();
                        Value::String(self.ph("id", &s))
                    } else {
                        self.value(x, Some(&k))
                    };
                    out.insert(k, nv);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|x| self.value(x, None)).collect()),
            Value::String(s) => Value::String(self.string(&s)),
            other => other,
        }
    }

    /// `compare.py`'s `message`: streaming snapshots and lazily serialised fields dropped.
    fn message(&mut self, mut m: Value) -> Value {
        if m["type"] == "message_update" {
            if let Some(o) = m.as_object_mut() {
                o.remove("message");
                o.remove("usage");
            }
            if let Some(ev) = m
                .get_mut("assistantMessageEvent")
                .and_then(Value::as_object_mut)
            {
                ev.remove("partial");
            }
        }
        if m["type"] == "message_start" && m["message"]["role"] == "assistant" {
            if let Some(msg) = m.get_mut("message").and_then(Value::as_object_mut) {
                msg.remove("usage");
                msg.remove("responseId");
                if msg.get("stopReason").and_then(Value::as_str) == Some("pending") {
                    msg.remove("content");
                }
            }
        }
        self.value(m, None)
    }
}
