//! `pith schema` (issue 27): the JSON Schema of every command, response and event of a protocol
//! version. Checked against what pith writes (a run through most of the protocol in each of the
//! three versions, on the offline faux provider: tools, thinking, steering, limits, structured
//! output, heartbeats, the RPC bash command, errors) and against every line of pi's recorded
//! transcripts of that version (`fixtures/transcripts/<version>/`, copied from the oracle), so a
//! frame that changes shape, or a new field, fails here.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::World;

const VERSIONS: [&str; 3] = ["0.73", "0.87", "1.6"];

fn schema_of(version: &str) -> Value {
    let w = World::new();
    let o = w.output_within_10s(&["schema", "--compat", version]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 1, "one line");
    serde_json::from_str(&text).expect("JSON")
}

/// The errors of `frame` against `doc`, by the same rules as `pith::schema::check`.
fn check(doc: &Value, frame: &Value, inbound: bool) -> Vec<String> {
    pith::schema::check(doc, frame, inbound)
}

#[test]
fn pith_schema_for_each_version() {
    let mut docs = Vec::new();
    for v in VERSIONS {
        let doc = schema_of(v);
        assert_eq!(
            doc["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(doc["title"], format!("pith RPC protocol, pi {v}"));
        // The binary prints what the library builds.
        let version = pith::protocol::Version::parse(v).expect("version");
        assert_eq!(doc, pith::schema::document(version));
        let defs = doc["$defs"].as_object().expect("$defs");
        for name in [
            "command.prompt",
            "response.ping",
            "response.error",
            "event.agent_end",
        ] {
            assert!(defs.contains_key(name), "{v}: {name}");
        }
        assert_eq!(
            doc["anyOf"].as_array().expect("anyOf").len(),
            defs.keys().filter(|k| k.contains('.')).count()
        );
        docs.push(doc);
    }
    // What differs between the versions is in their schemas.
    let will_retry = |d: &Value| {
        d["$defs"]["event.agent_end"]["properties"]
            .get("willRetry")
            .is_some()
    };
    assert_eq!(
        docs.iter().map(will_retry).collect::<Vec<_>>(),
        [false, true, true]
    );
    let auto = |d: &Value| d["$defs"].get("event.auto_compaction_start").is_some();
    assert_eq!(
        docs.iter().map(auto).collect::<Vec<_>>(),
        [true, false, false]
    );
    let duration = |d: &Value| {
        d["$defs"]["event.tool_execution_end"]["properties"]
            .get("durationMs")
            .is_some()
    };
    assert_eq!(
        docs.iter().map(duration).collect::<Vec<_>>(),
        [false, false, true]
    );
    // The default is 0.73; `latest` is 1.6; a bad version is a usage error.
    let w = World::new();
    let o = w.output_within_10s(&["schema"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).expect("JSON"),
        docs[0]
    );
    let o = w.output_within_10s(&["schema", "--compat", "latest"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).expect("JSON"),
        docs[2]
    );
    let o = w.output_within_10s(&["schema", "--compat", "0.5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--compat: unknown version '0.5'"));
    let o = w.output_within_10s(&["schema", "--bogus"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Every line of pi's transcripts: every frame pi wrote, and every command it accepted (the
/// scenarios also send commands meant to fail: those are not commands of the protocol). The
/// transcripts are the oracle's (0.73.1: `pi/`; 0.87.1: `pi-latest/`, `pi-latest-new/` as
/// `new_*`; 1.6.0: `pi-1.6/`, `pi-1.6-new/` as `new_*`), each line reduced to `{dir, msg}`.
#[test]
fn pi_transcripts_validate() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/transcripts");
    for v in VERSIONS {
        let doc = schema_of(v);
        let mut files: Vec<_> = std::fs::read_dir(root.join(v))
            .expect("transcripts")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        assert!(files.len() >= 20, "{v}: {} transcripts", files.len());
        let mut failures = Vec::new();
        let mut checked = 0;
        for f in &files {
            let lines: Vec<Value> = std::fs::read_to_string(f)
                .expect("read")
                .lines()
                .map(|l| serde_json::from_str(l).expect("JSON"))
                .collect();
            let accepted = |id: &Value| {
                lines.iter().any(|l| {
                    l["dir"] == "out"
                        && l["msg"]["type"] == "response"
                        && &l["msg"]["id"] == id
                        && l["msg"]["success"] == true
                })
            };
            for l in &lines {
                let msg = &l["msg"];
                if !msg.is_object() {
                    continue; // a raw line that is not JSON (the protocol-error scenarios)
                }
                let inbound = l["dir"] == "in";
                if inbound && (msg.get("id").is_none() || !accepted(&msg["id"])) {
                    continue;
                }
                // The protocol-error scenario's bad values pi 0.73.1 let through (a thinking level
                // `bogus`, a streamingBehavior `sideways`): pith refuses them (docs/rpc.md), and
                // its schema describes the commands it accepts.
                let bad_on_purpose = f.ends_with("l_protocol_errors.jsonl")
                    && (msg["level"] == "bogus" || msg["streamingBehavior"] == "sideways");
                if inbound && bad_on_purpose {
                    continue;
                }
                checked += 1;
                for e in check(&doc, msg, inbound) {
                    let name = f.file_name().unwrap_or_default().to_string_lossy();
                    failures.push(format!("{v} {name}: {e}"));
                }
            }
        }
        assert!(checked > 500, "{v}: only {checked} lines");
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures[..failures.len().min(30)].join("\n")
        );
    }
}

/// A run through most of the protocol, each version: every frame pith writes and every command
/// sent validates.
#[test]
fn pith_frames_validate_in_every_version() {
    let script = [
        json!({"thinking":"Look first.","text":"Let me look.","toolCalls":[
            {"name":"bash","arguments":{"command":"echo hi"}},
            {"name":"read","arguments":{"path":"f.txt"}}]}),
        json!({"text":"Done."}),
        json!({"toolCalls":[{"name":"pith_final_answer","arguments":{"ok":true}}]}),
        json!({"toolCalls":[{"name":"bash","arguments":{"command":"echo again"}}]}),
        json!({"text":"A slow answer that streams for a while, long enough to be steered.","delayMs":15}),
        json!({"text":"Steered."}),
    ];
    for v in VERSIONS {
        let doc = schema_of(v);
        let w = World::new();
        std::fs::write(w.cwd().join("f.txt"), "content\n").expect("write");
        let text: String = script.iter().map(|l| format!("{l}\n")).collect();
        let mut p = w.spawn_faux(&text, &["--compat", v, "--heartbeat", "0.05"]);
        let mut sent: Vec<Value> = Vec::new();
        let mut call = |p: &mut support::Pith, cmd: Value, id: &str| {
            let mut c = cmd.clone();
            c["id"] = json!(id);
            sent.push(c);
            p.call(cmd, id)
        };
        for (i, cmd) in [
            json!({"type":"get_state"}),
            json!({"type":"ping"}),
            json!({"type":"get_available_models"}),
            json!({"type":"set_session_name","name":"schema run"}),
            json!({"type":"get_commands"}),
            json!({"type":"set_steering_mode","mode":"all"}),
            json!({"type":"set_auto_retry","enabled":true}),
        ]
        .into_iter()
        .enumerate()
        {
            call(&mut p, cmd, &format!("q{i}"));
        }
        assert_eq!(
            call(&mut p, json!({"type":"prompt","message":"go"}), "p1")["success"],
            true
        );
        p.recv_until(|f| f["type"] == "agent_settled");
        let schema =
            json!({"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"}}});
        call(
            &mut p,
            json!({"type":"prompt","message":"answer","outputSchema":schema}),
            "p2",
        );
        p.recv_until(|f| f["type"] == "agent_settled");
        call(
            &mut p,
            json!({"type":"prompt","message":"once","limits":{"maxTurns":1}}),
            "p3",
        );
        p.recv_until(|f| f["type"] == "agent_settled");
        call(&mut p, json!({"type":"prompt","message":"slow"}), "p4");
        p.recv_until(|f| f["type"] == "message_update");
        call(&mut p, json!({"type":"steer","message":"shorter"}), "s1");
        call(&mut p, json!({"type":"ping"}), "s2");
        p.recv_until(|f| f["type"] == "agent_settled");
        for (i, cmd) in [
            json!({"type":"bash","command":"echo from-host"}),
            json!({"type":"get_messages"}),
            json!({"type":"get_last_assistant_text"}),
            json!({"type":"get_session_stats"}),
            json!({"type":"get_fork_messages"}),
            json!({"type":"set_thinking_level","level":"off"}),
            json!({"type":"set_model","provider":"nope","modelId":"nope"}),
            json!({"type":"no_such_command"}),
        ]
        .into_iter()
        .enumerate()
        {
            call(&mut p, cmd, &format!("r{i}"));
        }
        p.send_raw(b"not json\n");
        p.recv_until(|f| f["type"] == "response" && f["command"] == "parse");
        let mut frames = p.seen.clone();
        let (status, rest) = p.finish(Duration::from_secs(5));
        assert_eq!(status.code(), Some(0));
        frames.extend(
            rest.iter()
                .map(|l| serde_json::from_str::<Value>(l).expect("JSON")),
        );
        let types: std::collections::BTreeSet<String> = frames
            .iter()
            .map(|f| f["type"].as_str().unwrap_or("?").to_string())
            .collect();
        for t in [
            "tool_execution_end",
            "message_update",
            "heartbeat",
            "run_limit_reached",
            "structured_output",
            "queue_update",
            "session_info_changed",
            "agent_settled",
        ] {
            assert!(types.contains(t), "{v}: no {t} in {types:?}");
        }
        let mut failures = Vec::new();
        for f in &frames {
            for e in check(&doc, f, false) {
                failures.push(format!(
                    "{v}: {e}\n    in {}",
                    &f.to_string()[..f.to_string().len().min(300)]
                ));
            }
        }
        // The commands the host sent (the unknown one is not a command of the protocol).
        for c in sent.iter().filter(|c| c["type"] != "no_such_command") {
            for e in check(&doc, c, true) {
                failures.push(format!("{v}: {e}\n    in {c}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
