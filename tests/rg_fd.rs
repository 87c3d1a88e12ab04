//! grep, find and ls over RPC compared with what pi 0.73.1 answers when it runs ripgrep 15.1 and
//! fd 10.5: `fixtures/rg_fd/expected.json`, recorded once by `fixtures/rg_fd/record.sh` on the
//! repository-shaped tree of `fixtures/rg_fd/tree.json` (a git monorepo working copy with nested
//! `.gitignore`s, `.git/info/exclude`, `.ignore`, `.rgignore`, `.fdignore`, build output,
//! `node_modules`, binary files, CRLF / lone CR / invalid UTF-8 / UTF-16 text, unicode names,
//! symlinks and a FIFO, next to a directory outside any repository). Neither rg nor fd is needed
//! here: the tree is built in a temp dir, every case of `cases.json` is one tool call of a single
//! faux turn, and each `tool_execution_end` must equal the recording.

mod support;

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};
use support::{World, calls_then_done};

fn fixture_json(name: &str) -> Value {
    let text = std::fs::read_to_string(support::fixture(&format!("rg_fd/{name}")))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    serde_json::from_str(&text).expect("fixture is JSON")
}

unsafe extern "C" {
    fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

fn make_fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path and a mode.
    assert_eq!(unsafe { mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {path:?}");
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `tree.json` under `root` (the same format `fixtures/rg_fd/build_tree.mjs` reads).
pub fn build_tree(root: &Path, spec: &Value) {
    for e in spec["files"].as_array().unwrap() {
        let p = root.join(e["path"].as_str().unwrap());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        if e["dir"] == true {
            std::fs::create_dir_all(&p).unwrap();
        } else if let Some(target) = e["symlink"].as_str() {
            std::os::unix::fs::symlink(target, &p).unwrap();
        } else if e["fifo"] == true {
            make_fifo(&p);
        } else if let Some(text) = e["text"].as_str() {
            std::fs::write(&p, text).unwrap();
        } else {
            let mut bytes = Vec::new();
            for part in e["parts"].as_array().unwrap() {
                if let Some(t) = part["text"].as_str() {
                    bytes.extend_from_slice(t.as_bytes());
                } else if let Some(h) = part["hex"].as_str() {
                    bytes.extend(hex(h));
                } else {
                    let unit = part["repeat"].as_str().unwrap();
                    let count = part["count"].as_u64().unwrap() as usize;
                    bytes.extend_from_slice(unit.repeat(count).as_bytes());
                }
            }
            std::fs::write(&p, bytes).unwrap();
        }
    }
}

/// Where pith answers differently from the recording on purpose (docs/rpc.md, "Differences"):
/// case name → pith's answer.
fn deviations() -> HashMap<&'static str, Value> {
    HashMap::from([(
        // pi hands the pattern to `spawn`, which rejects the NUL before rg runs ("The argument
        // 'args[5]' must be a string without null bytes…"); pith answers as rg does for a
        // pattern with a literal NUL (`rg -f` with such a line: no match; `\x00` written as an
        // escape is rg's "impossible to match" error, case grep-error-nul-escape).
        "grep-error-nul",
        json!({"content": [{"type": "text", "text": "No matches found"}]}),
    )])
}

#[test]
fn grep_find_ls_answer_like_rg_and_fd_under_pis_flags() {
    let tree = fixture_json("tree.json");
    let cases = fixture_json("cases.json");
    let expected = fixture_json("expected.json");
    let cases = cases.as_array().unwrap();
    assert_eq!(cases.len(), expected.as_array().unwrap().len());

    let world = World::new();
    let root = std::fs::canonicalize(world.cwd()).unwrap();
    build_tree(&root, &tree);
    let calls: Vec<Value> = cases
        .iter()
        .map(|c| json!({"name": c["tool"], "arguments": c["args"]}))
        .collect();
    let mut p = world.spawn_faux(
        &calls_then_done(json!(calls)),
        &["--tools", "grep,find,ls", "--no-session"],
    );
    p.send(json!({"type": "prompt", "message": "search", "id": "p"}));
    let frames = p.recv_until(|v| v["type"] == "agent_end");
    let mut order: Vec<String> = Vec::new();
    let mut ends: HashMap<String, Value> = HashMap::new();
    for f in &frames {
        match f["type"].as_str() {
            Some("tool_execution_start") => {
                order.push(f["toolCallId"].as_str().unwrap().to_string())
            }
            Some("tool_execution_end") => {
                ends.insert(f["toolCallId"].as_str().unwrap().to_string(), f.clone());
            }
            _ => {}
        }
    }
    assert_eq!(order.len(), cases.len());

    let root_text = root.to_str().unwrap();
    let deviations = deviations();
    let mut failures = Vec::new();
    for ((case, want), id) in cases.iter().zip(expected.as_array().unwrap()).zip(&order) {
        let name = case["name"].as_str().unwrap();
        let want = deviations.get(name).unwrap_or(want);
        let want: Value =
            serde_json::from_str(&want.to_string().replace("$ROOT", root_text)).unwrap();
        let end = &ends[id];
        let got = if end["isError"] == true {
            json!({"error": end["result"]["content"][0]["text"]})
        } else {
            let mut g = json!({"content": end["result"]["content"]});
            if let Some(d) = end["result"].get("details") {
                g["details"] = d.clone();
            }
            g
        };
        let mut want = want.clone();
        if let Some(m) = want.as_object_mut() {
            m.remove("name");
        }
        if got != want {
            failures.push(format!(
                "--- {name} {}\nwant: {}\n got: {}",
                case["args"],
                serde_json::to_string_pretty(&want).unwrap(),
                serde_json::to_string_pretty(&got).unwrap()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
