//! pi's `registerProvider` (data form), `unregisterProvider`, `getSettings`, `ctx.modelRegistry`
//! reads, `ctx.waitForIdle()` and `ctx.shutdown()` for TypeScript extensions, through the real
//! binary with `fixtures/ts-ext/provider.ts` and a fake Anthropic / OpenAI server. They need
//! node >= 22.18 (`PITH_TEST_NODE`, the interop suite's, or PATH); skipped with a message
//! otherwise.
//!
//! Compared by hand with pi 1.6.0 running the same extension over RPC (docs/extensions.md notes
//! the differences).

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text};
use support::fake_llm::{FakeLlm, Reply};
use support::node::ts_fixture as fixture;
use support::{Pith, World};

const SECRET: &str = "sk-proxy-secret-4711";

/// pith with provider.ts, `args` first, the proxy at `port` with its key in `PROXY_KEY`.
fn spawn(w: &World, node: &Path, port: u16, args: &[&str]) -> Pith {
    let ext = fixture("provider.ts");
    let mut all: Vec<&str> = args.to_vec();
    if !args.contains(&"--session-dir") {
        all.push("--no-session");
    }
    all.extend_from_slice(&["-e", &ext]);
    let mut cmd = w.command(&all);
    cmd.env("PITH_NODE", node)
        .env("PROXY_PORT", port.to_string())
        .env("PROXY_KEY", SECRET);
    Pith::spawn_cmd(cmd)
}

fn model_refs(r: &Value) -> Vec<String> {
    support::frames::model_ids(&r["data"]["models"])
        .into_iter()
        .filter(|m| m.starts_with("proxy") || m.starts_with("sso"))
        .collect()
}

/// The key never leaves the request: no frame and no stderr line carries it.
fn assert_no_secret(p: &Pith) {
    for f in &p.seen {
        assert!(!f.to_string().contains(SECRET), "key in a frame: {f}");
    }
    for l in p.stderr_lines() {
        assert!(!l.contains(SECRET), "key on stderr: {l}");
    }
}

/// `--provider proxy --model m1` where only the extension's factory registers `proxy`: the
/// start-up model is the extension's; a prompt reaches the proxy with the extension's key
/// (`$PROXY_KEY`) and headers; `get_available_models` lists it; the `oauth` form is reported
/// by name and nothing of it is registered, the rest of the extension loads; a provider
/// registered from a command (`authHeader`, openai-completions) is there at once and
/// `set_model` reaches it; `unregisterProvider` removes the proxy's models.
///
/// pi 1.6.0: the same models and requests; it registers the `oauth` provider (pith reports it).
#[test]
fn extension_provider_serves_start_up_model_and_commands() {
    let node = need_node!();
    let oai = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m2\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"two\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m2\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"total_tokens\":6}}\n\ndata: [DONE]\n\n";
    let llm = FakeLlm::start(vec![
        Sse::numbered(1).reply(&[text(&["one"])]),
        Reply::sse(oai),
    ]);
    let w = World::new();
    let mut p = spawn(
        &w,
        &node,
        llm.port,
        &["--mode", "rpc", "--provider", "proxy", "--model", "m1"],
    );
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["model"]["provider"], "proxy", "{st}");
    assert_eq!(st["data"]["model"]["id"], "m1");
    assert_eq!(st["data"]["model"]["name"], "Proxy One");
    assert_eq!(st["data"]["model"]["contextWindow"], 100000);
    assert_eq!(st["data"]["thinkingLevel"], "off");
    assert_eq!(
        st["data"]["model"]["baseUrl"],
        format!("http://127.0.0.1:{}", llm.port)
    );
    let err = p
        .seen
        .iter()
        .find(|f| f["type"] == "extension_error")
        .cloned()
        .expect("the oauth form is reported");
    assert_eq!(err["event"], "registerProvider");
    assert_eq!(
        err["error"],
        "pith does not support pi.registerProvider(\"sso\", {oauth}) (docs/extensions.md)"
    );
    let r = p.call(json!({"type":"get_available_models"}), "m");
    assert_eq!(model_refs(&r), vec!["proxy/m1"]);

    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    let frames = p.recv_until(|f| f["type"] == "agent_end");
    let end = frames.last().unwrap();
    assert_eq!(end["messages"][1]["content"][0]["text"], "one", "{end}");
    assert_eq!(end["messages"][1]["provider"], "proxy");
    let req = &llm.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some(SECRET));
    assert_eq!(req.header("x-proxy-team"), Some("blue"));
    assert!(req.body.contains("\"model\":\"m1\""), "{}", req.body);

    // From a command: at once, no reload.
    p.send(json!({"id":"c","type":"prompt","message":"/second"}));
    p.recv_until(|f| f["id"] == "c");
    let r = p.call(json!({"type":"get_available_models"}), "m2");
    assert_eq!(model_refs(&r), vec!["proxy/m1", "proxy2/m2"]);
    let r = p.call(
        json!({"type":"set_model","provider":"proxy2","modelId":"m2"}),
        "sm",
    );
    assert_eq!(r["success"], true, "{r}");
    p.send(json!({"id":"p2","type":"prompt","message":"again"}));
    p.recv_until(|f| f["type"] == "agent_end");
    let req = &llm.requests()[1];
    assert_eq!(req.path, "/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer literal-key"));

    p.send(json!({"id":"d","type":"prompt","message":"/drop"}));
    p.recv_until(|f| f["id"] == "d");
    let r = p.call(json!({"type":"get_available_models"}), "m3");
    assert_eq!(model_refs(&r), vec!["proxy2/m2"]);
    assert_no_secret(&p);
    p.close_stdin();
    let status = p.wait(Duration::from_secs(10));
    assert!(status.success());
}

/// Under `--compat 1.6`: the extension's model in pi 1.6.0's shape (the definition's keys, then
/// `api`, `provider`, `baseUrl`); `getSettings()` is the effective settings as the files say
/// them; `ctx.modelRegistry` reads pith's registry (the extension's provider included;
/// `refresh()` needs pi's model runtime and names itself); `waitForIdle()` resolves when idle;
/// `shutdown()` while idle ends pith at once, as the end of input does (exit 0). pi 1.6.0 gives
/// the same frames but for the `refresh()` error (it refreshes).
#[test]
fn settings_model_registry_idle_and_shutdown() {
    let node = need_node!();
    let llm = FakeLlm::start(vec![]);
    let w = World::new();
    w.write_agent_file(
        "settings.json",
        r#"{"hideThinkingBlock":true,"compaction":{"enabled":false}}"#,
    );
    let mut p = spawn(
        &w,
        &node,
        llm.port,
        &[
            "--mode",
            "rpc",
            "--compat",
            "1.6",
            "--provider",
            "proxy",
            "--model",
            "m1",
        ],
    );
    let st = p.call(json!({"type":"get_state"}), "s");
    let keys: Vec<&str> = st["data"]["model"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "reasoning",
            "input",
            "cost",
            "contextWindow",
            "maxTokens",
            "api",
            "provider",
            "baseUrl"
        ]
    );
    p.send(json!({"id":"i","type":"prompt","message":"/info"}));
    let frames = p.recv_until(|f| f["id"] == "i");
    let notes: Vec<&Value> = frames.iter().filter(|f| f["method"] == "notify").collect();
    assert_eq!(notes.len(), 2, "{frames:?}");
    let info: Value = serde_json::from_str(notes[0]["message"].as_str().unwrap()).unwrap();
    assert_eq!(
        info,
        json!({
            "settings": {"hideThinkingBlock": true, "compaction": {"enabled": false}},
            "all": ["proxy/m1"],
            "available": 1,
            "found": "Proxy One",
            "model": "m1",
        })
    );
    assert_eq!(
        notes[1]["message"],
        "pith does not support ctx.modelRegistry.refresh() (docs/extensions.md)"
    );
    p.send(json!({"id":"w","type":"prompt","message":"/idle"}));
    let frames = p.recv_until(|f| f["id"] == "w");
    assert!(
        frames
            .iter()
            .any(|f| f["method"] == "notify" && f["message"] == "idle true"),
        "{frames:?}"
    );
    p.send(json!({"id":"b","type":"prompt","message":"/bye"}));
    p.recv_until(|f| f["id"] == "b");
    // stdin stays open: the extension ended pith.
    let status = p.wait(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert_no_secret(&p);
}

/// A start-up `--model` that no extension registers is the error start-up gives, once the
/// extensions have loaded: exit 1 in RPC mode, 2 in print mode, and no prompt runs.
#[test]
fn unknown_start_up_model_after_extensions_load() {
    let node = need_node!();
    let llm = FakeLlm::start(vec![]);
    let w = World::new();
    let mut p = spawn(
        &w,
        &node,
        llm.port,
        &["--mode", "rpc", "--provider", "nowhere", "--model", "x"],
    );
    let status = p.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    assert!(
        p.stderr_lines().iter().any(|l| l
            == "Error: Unknown provider \"nowhere\". Use --list-models to see available providers/models."),
        "{:?}",
        p.stderr_lines()
    );

    let mut p = spawn(
        &w,
        &node,
        llm.port,
        &["-p", "--model", "qqq-nowhere-zzz", "hi"],
    );
    p.close_stdin();
    let status = p.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(2), "{:?}", p.stderr_lines());
    assert!(
        p.stderr_lines().iter().any(|l| l
            == "Error: Model \"qqq-nowhere-zzz\" not found. Use --list-models to see available models."),
        "{:?}",
        p.stderr_lines()
    );
    assert!(llm.requests().is_empty());
}

/// Print mode: `-p` with the extension's provider answers from the proxy; the session records
/// the model and level first, as a start-up model (and never the key). Resumed (`--continue`)
/// without `--model`, the session's model is the extension's again.
#[test]
fn print_mode_uses_extension_provider() {
    let node = need_node!();
    let llm = FakeLlm::start(vec![Sse::numbered(1).reply(&[text(&["printed"])])]);
    let w = World::new();
    let sessions = w.tmp().join("sessions");
    let dir = sessions.to_string_lossy().to_string();
    let mut p = spawn(
        &w,
        &node,
        llm.port,
        &[
            "-p",
            "--session-dir",
            &dir,
            "--provider",
            "proxy",
            "--model",
            "m1",
            "hi",
        ],
    );
    p.close_stdin();
    let status = p.wait(Duration::from_secs(10));
    assert!(status.success(), "{:?}", p.stderr_lines());
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(llm.requests()[0].header("x-api-key"), Some(SECRET));
    let file = support::sessions::first_file(&sessions);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(SECRET));
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = entries
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types[..4],
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message"
        ]
    );
    assert_eq!(entries[1]["provider"], "proxy");
    assert_eq!(entries[1]["modelId"], "m1");
    assert_eq!(entries[2]["thinkingLevel"], "off");

    // Resumed without --model: the session's model, once the extension has registered it.
    let mut p = spawn(
        &w,
        &node,
        llm.port,
        &["--mode", "rpc", "--session-dir", &dir, "--continue"],
    );
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["model"]["provider"], "proxy", "{st}");
    assert_eq!(st["data"]["model"]["id"], "m1");
    assert_eq!(st["data"]["thinkingLevel"], "off");
    p.close_stdin();
    assert!(p.wait(Duration::from_secs(10)).success());
    let after = std::fs::read_to_string(&file).unwrap();
    assert_eq!(after, text, "resuming records nothing");
}

/// `--list-models` with a pi extension: pi 0.73.1, 0.87.1 and 1.6.0 list once their extensions
/// have loaded, the providers their factories register included; so does pith (the `sso` form it
/// cannot run is reported on stderr and not listed). Without the extension, no model has a key.
#[test]
fn list_models_includes_extension_providers() {
    let node = need_node!();
    let w = World::new();
    let ext = fixture("provider.ts");
    for compat in ["0.73", "1.6"] {
        let out = w
            .command(&["--compat", compat, "--list-models", "proxy", "-e", &ext])
            .env("PITH_NODE", &node)
            .env("PROXY_PORT", "9")
            .env("PROXY_KEY", SECRET)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{compat}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "provider  model  context  max-out  thinking  images\n\
             proxy     m1     100K     1K       no        no    \n",
            "{compat}"
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains(SECRET));
    }
    let out = w
        .command(&["--list-models", "proxy"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("No models available."),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
