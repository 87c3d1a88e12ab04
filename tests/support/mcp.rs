//! The fake MCP server (`fixtures/mcp/fake_server.py`) and what the tests that run it share:
//! whether python3 is there (`need_python!`), the server's path, an `mcp.json` entry for it, and
//! `/mcp`'s status once the servers have settled.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::Pith;

/// Whether `python3` runs on this machine (the fake MCP servers and the toolkit example need it).
pub fn have_python() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "pass"])
        .status()
        .is_ok_and(|s| s.success())
}

/// Returns from the test, saying it was skipped and why, when python3 is missing:
/// `need_python!()` for the fake MCP server, `need_python!("… needs it")` for another reason.
#[macro_export]
macro_rules! need_python {
    () => {
        $crate::need_python!("the fake MCP server needs it")
    };
    ($why:expr) => {
        if !$crate::support::mcp::have_python() {
            eprintln!("SKIPPED: python3 not found ({})", $why);
            return;
        }
    };
}

/// The fake MCP server's path.
pub fn server_path() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/mcp/fake_server.py")
        .to_string_lossy()
        .to_string()
}

/// An `mcp.json` entry running the fake server with `args`, plus `extra` fields.
pub fn server(args: &[&str], extra: Value) -> Value {
    let mut a = vec![json!(server_path())];
    a.extend(args.iter().map(|s| json!(s)));
    let mut v = json!({"command": "python3", "args": a});
    if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
        m.extend(e);
    }
    v
}

/// Sends `/mcp` until no server is still `starting`; the notify's message. `strict`: every `/mcp`
/// must be answered by a notify and the `handled` disposition (else a missing notify reads as "").
pub fn status(p: &mut Pith, strict: bool) -> String {
    for n in 0..100 {
        let id = format!("mcp{n}");
        p.send(json!({"id": id, "type": "prompt", "message": "/mcp"}));
        let frames = p.recv_until(|v| v["id"] == id.as_str());
        let notify = frames
            .iter()
            .rfind(|f| f["type"] == "extension_ui_request" && f["method"] == "notify");
        let msg = if strict {
            let notify = notify.unwrap_or_else(|| panic!("no notify: {frames:#?}"));
            assert_eq!(
                frames.last().unwrap()["data"],
                json!({"disposition": "handled"})
            );
            notify["message"].as_str().unwrap().to_string()
        } else {
            notify
                .and_then(|n| n["message"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        if !msg.contains(": starting") {
            return msg;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("servers never settled");
}
