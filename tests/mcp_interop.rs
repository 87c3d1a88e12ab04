//! pith against real MCP servers from the registries: `@modelcontextprotocol/server-everything`
//! (npm; exercises every MCP feature) and `mcp-server-time` (PyPI). `make interop` installs
//! them into `target/interop-mcp` (ignored); without them these tests skip and say so (and
//! `make test` prints a line about it).

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{Pith, World};

fn interop_dir() -> PathBuf {
    match std::env::var_os("MCP_INTEROP") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop-mcp"),
    }
}

fn everything() -> Option<PathBuf> {
    let p = interop_dir().join("npm/node_modules/.bin/mcp-server-everything");
    p.exists().then_some(p)
}

fn time_server() -> Option<PathBuf> {
    let p = interop_dir().join("venv/bin/mcp-server-time");
    p.exists().then_some(p)
}

fn spawn(w: &World, script: &str, servers: Value) -> Pith {
    w.write_agent_file(
        "settings.json",
        &json!({"mcpServers": servers, "pith": {"mcpStartupTimeoutSeconds": 60}}).to_string(),
    );
    w.spawn_faux_in(&w.cwd(), script, &[])
}

fn run(p: &mut Pith) -> Vec<Value> {
    support::frames::run_settled(p, "p", "go")
}

fn end<'a>(frames: &'a [Value], id: &str) -> &'a Value {
    frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end" && f["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no end for {id}: {frames:#?}"))
}

fn text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn server_everything_tools_images_structured_content_and_progress() {
    let Some(bin) = everything() else {
        eprintln!(
            "SKIPPED: @modelcontextprotocol/server-everything not installed (run `make interop`)"
        );
        return;
    };
    let script = r#"{"toolCalls":[{"name":"mcp__everything__echo","arguments":{"message":"hi there"}},{"name":"mcp__everything__get-sum","arguments":{"a":2,"b":3}},{"name":"mcp__everything__get-tiny-image","arguments":{}},{"name":"mcp__everything__get-structured-content","arguments":{"location":"Chicago"}},{"name":"mcp__everything__trigger-long-running-operation","arguments":{"duration":1,"steps":3}}]}
{"text":"done"}
"#;
    let w = World::new();
    let mut p = spawn(
        &w,
        script,
        json!({"everything": {"command": bin.to_string_lossy()}}),
    );
    let frames = run(&mut p);
    assert!(
        !frames.iter().any(|f| f["type"] == "extension_error"),
        "{frames:#?}"
    );
    assert!(text(end(&frames, "faux_1_0")).contains("hi there"));
    assert_eq!(text(end(&frames, "faux_1_1")), "The sum of 2 and 3 is 5.");
    let image = end(&frames, "faux_1_2");
    assert_eq!(image["result"]["content"][1]["type"], "image");
    assert_eq!(image["result"]["content"][1]["mimeType"], "image/png");
    let structured = end(&frames, "faux_1_3");
    assert_eq!(structured["isError"], false);
    assert!(
        structured["result"]["details"]["structuredContent"]["temperature"].is_number(),
        "{structured}"
    );
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_update" && f["toolCallId"] == "faux_1_4")
        .collect();
    assert_eq!(updates.len(), 3, "{updates:#?}");
    assert_eq!(
        updates[2]["partialResult"]["content"][0]["text"],
        "progress 3/3"
    );
    assert!(text(end(&frames, "faux_1_4")).starts_with("Long running operation completed"));
}

#[test]
fn mcp_server_time_answers() {
    let Some(bin) = time_server() else {
        eprintln!("SKIPPED: mcp-server-time not installed (run `make interop`)");
        return;
    };
    let script = r#"{"toolCalls":[{"name":"mcp__time__get_current_time","arguments":{"timezone":"Etc/UTC"}},{"name":"mcp__time__convert_time","arguments":{"source_timezone":"Etc/UTC","time":"12:00","target_timezone":"Asia/Tokyo"}}]}
{"text":"done"}
"#;
    let w = World::new();
    let mut p = spawn(
        &w,
        script,
        json!({"time": {"command": bin.to_string_lossy(), "args": ["--local-timezone", "Etc/UTC"]}}),
    );
    let frames = run(&mut p);
    let now = end(&frames, "faux_1_0");
    assert_eq!(now["isError"], false, "{now}");
    let v: Value = serde_json::from_str(&text(now)).unwrap();
    assert_eq!(v["timezone"], "Etc/UTC");
    let conv = end(&frames, "faux_1_1");
    let v: Value = serde_json::from_str(&text(conv)).unwrap();
    assert_eq!(v["target"]["timezone"], "Asia/Tokyo");
    assert_eq!(v["time_difference"], "+9.0h");
}

/// The server-everything child of a test, killed when the test ends.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn server_everything_over_streamable_http() {
    let Some(bin) = everything() else {
        eprintln!(
            "SKIPPED: @modelcontextprotocol/server-everything not installed (run `make interop`)"
        );
        return;
    };
    let port = support::free_port();
    let _server = Served(
        std::process::Command::new(&bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "server-everything did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let script = r#"{"toolCalls":[{"name":"mcp__everything__echo","arguments":{"message":"over http"}},{"name":"mcp__everything__get-sum","arguments":{"a":2,"b":3}},{"name":"mcp__everything__get-tiny-image","arguments":{}},{"name":"mcp__everything__trigger-long-running-operation","arguments":{"duration":1,"steps":3}}]}
{"text":"done"}
"#;
    let w = World::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut p = spawn(&w, script, json!({"everything": {"url": url}}));
    let frames = run(&mut p);
    assert!(
        !frames.iter().any(|f| f["type"] == "extension_error"),
        "{frames:#?}"
    );
    assert!(text(end(&frames, "faux_1_0")).contains("over http"));
    assert_eq!(text(end(&frames, "faux_1_1")), "The sum of 2 and 3 is 5.");
    let image = end(&frames, "faux_1_2");
    assert_eq!(image["result"]["content"][1]["type"], "image");
    // Progress arrives on the call's SSE stream.
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_update" && f["toolCallId"] == "faux_1_3")
        .collect();
    assert_eq!(updates.len(), 3, "{updates:#?}");
    assert!(text(end(&frames, "faux_1_3")).starts_with("Long running operation completed"));
}
