//! A storm of random, often malformed commands (deterministic pseudo-random, faux provider):
//! pith must stay up, write only JSON lines, and answer every command exactly once.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use support::World;

/// A tiny deterministic generator (xorshift), so the storm is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// Every command pith knows, plus a name it does not. (`extension_ui_response` is left out: it
/// answers a UI request and gets no response of its own.)
fn commands() -> Vec<&'static str> {
    let mut c: Vec<&'static str> = pith::rpc::command::COMMAND_NAMES
        .iter()
        .copied()
        .filter(|c| *c != "extension_ui_response")
        .collect();
    c.push("no_such_command");
    c
}
const FIELDS: &[&str] = &[
    "message",
    "images",
    "streamingBehavior",
    "provider",
    "modelId",
    "level",
    "mode",
    "enabled",
    "outputPath",
    "sessionPath",
    "entryId",
    "name",
    "customInstructions",
    "parentSession",
];

fn storm(seed: u64, n: usize) -> (Vec<u8>, Vec<Value>) {
    let mut rng = Rng(seed);
    let values = [
        json!(null),
        json!(true),
        json!(1),
        json!(-1),
        json!(1.5),
        json!(""),
        json!("x"),
        json!("all"),
        json!("off"),
        json!("steer"),
        json!([]),
        json!({}),
        json!([1]),
        json!({"a":1}),
        json!("\u{2028}"),
        json!("a".repeat(300)),
    ];
    let names = commands();
    let mut bytes = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        if rng.next().is_multiple_of(10) {
            // Garbage that is not a command object at all.
            let junk = [
                "{",
                "[1,2]",
                "null",
                "\"s\"",
                "{\"type\":5}",
                "\u{1}\u{7f}",
                "",
            ];
            bytes.extend_from_slice(rng.pick(&junk).as_bytes());
            bytes.push(b'\n');
            continue;
        }
        let id = json!(format!("c{i}"));
        let mut cmd = json!({"type": rng.pick(&names), "id": id});
        for _ in 0..(rng.next() % 4) {
            cmd[*rng.pick(FIELDS)] = rng.pick(&values).clone();
        }
        if cmd["type"] == "bash" {
            cmd["command"] = json!(rng.pick(&["echo hi", "true", "exit 2"]));
        }
        bytes.extend_from_slice(cmd.to_string().as_bytes());
        bytes.push(b'\n');
        ids.push(id);
    }
    (bytes, ids)
}

#[test]
fn every_command_of_a_random_storm_gets_exactly_one_response() {
    for seed in [7u64, 0x9e37_79b9_7f4a_7c15] {
        let w = World::new();
        let mut p = w.spawn(&["--mode", "rpc", "--provider", "faux", "--model", "faux"]);
        let (bytes, ids) = storm(seed, 1500);
        let writer = {
            let mut stdin = p.take_stdin();
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(&bytes);
            })
        };
        let mut answered: HashMap<String, usize> = HashMap::new();
        while let Some(line) = p.next_line(Duration::from_secs(60)) {
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if v["type"] == "response" {
                if let Some(id) = v.get("id") {
                    *answered.entry(id.to_string()).or_default() += 1;
                }
            }
        }
        writer.join().unwrap();
        assert_eq!(p.wait(Duration::from_secs(30)).code(), Some(0));
        for id in &ids {
            assert_eq!(
                answered.get(&id.to_string()),
                Some(&1),
                "command {id} answered {:?} times",
                answered.get(&id.to_string())
            );
        }
    }
}
