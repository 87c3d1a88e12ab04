//! Differences from pi 1.6.0's MCP client, `tool_search` and codemode that differential runs
//! against pi found (scenarios `n01`..`n25` of the d16mcp pass), each fixed under `--compat 1.6`:
//! a JSON-RPC error answer reported by its message, every tool whose sanitized name collides
//! hashed, a server that dies at start reported with pi's text and its stderr tail, pi's
//! configuration texts, calls that need the servers waiting for those still starting, what a
//! script's call of an MCP tool resolves to, `ALL_TOOLS` / `describeNamespace()` as pi shapes
//! them, loaded tools in load order, and the `mcp_servers` section only renewed at a prompt.

mod support;

use serde_json::{Value, json};
use support::anthropic::{reply, text, tool_call};
use support::fake_llm::FakeLlm;
use support::frames::{request_body, run_settled as run};
use support::mcp::server;
use support::{Pith, World, fake_world};

fn start(w: &World, extra: &[&str]) -> Pith {
    support::spawn_compat(w, "1.6", extra)
}

fn tool_end(frames: &[Value], id: &str) -> Value {
    support::frames::tool_end(frames, id).clone()
}

fn result_text(frames: &[Value], id: &str) -> String {
    let end = tool_end(frames, id);
    let content = end["result"]["content"].as_array().unwrap();
    content
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

fn request_tools(llm: &FakeLlm, i: usize) -> Vec<Value> {
    request_body(llm, i)["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `/mcp`'s notify, once no server is still starting.
fn mcp_status(p: &mut Pith) -> String {
    support::mcp::status(p, false)
}

fn codemode(id: &str, code: &str) -> support::anthropic::Block {
    tool_call(id, "codemode", &[&json!({ "code": code }).to_string()])
}

#[test]
fn failures_are_reported_in_pis_words() {
    need_python!();
    let (w, _llm) = fake_world(vec![
        reply(1, &[tool_call("e", "mcp__fake__err", &["{}"])]),
        reply(2, &[text(&["ok"])]),
    ]);
    let cfg = json!({"mcpServers": {
        "fake": server(&["--extra"], json!({"exposure": "direct"})),
        "dead": server(&["--stderr", "no way to start", "--exit-at-start"], json!({"exposure": "direct"})),
        "empty": {},
    }});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, &[]);
    let frames = run(&mut p, "p1", "go");
    // A JSON-RPC error answer: its message alone (not `MCP error -32000: …`).
    let end = tool_end(&frames, "e");
    assert_eq!(end["isError"], true);
    assert_eq!(
        end["result"],
        json!({"content": [{"type": "text", "text": "server exploded"}], "details": {}})
    );
    // `a-b` and `a.b` both sanitize to `a_b`: both get the hash suffix, as pi names them.
    let sys = frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .unwrap();
    let names: Vec<&str> = sys["message"]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("mcp__fake__a_b"))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.iter().all(|n| n.len() == "mcp__fake__a_b_".len() + 8),
        "{names:?}"
    );
    // The server that exits at start: pi's words and the tail of its stderr; the entry without
    // a transport: pi's text.
    let status = mcp_status(&mut p);
    let dir = w.agent_dir().join("mcp.json");
    assert_eq!(
        status,
        format!(
            "fake: connected, 12 tools (direct)\ndead: failed (direct)\n    MCP connection closed\n    no way to start\nconfig error: {}: server \"empty\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)",
            dir.display()
        )
    );
}

#[test]
fn calls_that_need_every_server_wait_for_those_starting() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[tool_call("s", "tool_search", &[r#"{"query":"echo"}"#])],
        ),
        reply(
            2,
            &[codemode(
                "c",
                "text(ALL_TOOLS.map(t => t.name).join(','));\ntext(await describeNamespace('slow-srv'));",
            )],
        ),
        reply(3, &[text(&["ok"])]),
    ]);
    let cfg = json!({"mcpServers": {"slow-srv": server(
        &["--start-delay", "1", "--instructions", "Slow tools.\nMore."],
        json!({"exposure": "deferred", "toolExposure": {"add": "direct"}, "description": "Slow ones"}),
    )}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, &["--tools", "+codemode"]);
    let frames = run(&mut p, "p1", "go");
    // tool_search waited for the server that was still starting.
    let end = tool_end(&frames, "s");
    assert_eq!(
        end["result"]["details"],
        json!({"loaded": ["mcp__slow_srv__echo"]})
    );
    // ALL_TOOLS: no `tool_search` (the model's only), the server's tools in its order whatever
    // their exposure; describeNamespace() by the server's name: pi's namespace with the
    // configured description and the server's instructions.
    let out = result_text(&frames, "c");
    let tools = "read,bash,edit,write,mcp__slow_srv__echo,mcp__slow_srv__add,mcp__slow_srv__image,mcp__slow_srv__fail,mcp__slow_srv__slow,mcp__slow_srv__crash,mcp__slow_srv__grow,mcp__slow_srv__ask,mcp__slow_srv__when";
    let ns = json!({"name": "mcp__slow_srv", "description": "Slow ones", "instructions": "Slow tools.\nMore.",
        "tools": ["mcp__slow_srv__echo", "mcp__slow_srv__add", "mcp__slow_srv__image", "mcp__slow_srv__fail",
                  "mcp__slow_srv__slow", "mcp__slow_srv__crash", "mcp__slow_srv__grow", "mcp__slow_srv__ask",
                  "mcp__slow_srv__when"]});
    assert!(
        out.contains(&format!(
            "==> text 1/2 <==\n{tools}\n==> text 2/2 <==\n{}",
            serde_json::to_string(&ns).unwrap()
        )),
        "{out}"
    );
    // The section was written when the prompt started (the server had not connected: no
    // summary from its instructions, the configured description); the server connecting
    // during the run does not renew it.
    let sections: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .filter_map(|f| f["message"].get("sections"))
        .collect();
    assert_eq!(sections.len(), 1, "{sections:#?}");
    let last = request_body(&llm, 2)["system"].to_string();
    assert!(
        last.contains("- mcp__slow_srv (tool_search): Slow ones"),
        "{last}"
    );
}

#[test]
fn codemode_on_says_what_mcp_calls_resolve_to_and_loads_keep_their_order() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[tool_call("s1", "tool_search", &[r#"{"query":"image"}"#])],
        ),
        reply(
            2,
            &[tool_call("s2", "tool_search", &[r#"{"query":"echo"}"#])],
        ),
        reply(3, &[text(&["ok"])]),
    ]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "deferred", "toolExposure": {"add": "direct"}}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, &["--tools", "+codemode"]);
    mcp_status(&mut p);
    run(&mut p, "p1", "go");
    let tools = request_tools(&llm, 2);
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    // Loaded tools follow in the order they were loaded (image, then echo).
    assert_eq!(
        names,
        [
            "read",
            "bash",
            "edit",
            "write",
            "codemode",
            "tool_search",
            "mcp__fake__add",
            "mcp__fake__image",
            "mcp__fake__echo"
        ]
    );
    let desc = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .and_then(|t| t["description"].as_str())
            .unwrap()
            .to_string()
    };
    assert_eq!(
        desc("mcp__fake__add"),
        "Add two numbers.\n\nCodemode: `tools.mcp__fake__add(args)` resolves to `{ content, structuredContent?, isError? }`."
    );
    assert_eq!(
        desc("mcp__fake__echo"),
        "Echo a text.\n\nCodemode: `tools.mcp__fake__echo(args)` resolves to `{ content, structuredContent?, isError? }`."
    );
    // tool_search is the model's only: no line about scripts.
    assert!(
        !desc("tool_search").contains("Codemode:"),
        "{}",
        desc("tool_search")
    );
}

#[test]
fn the_unreachable_warning_names_auto_enable_codemode() {
    need_python!();
    let (w, _llm) = fake_world(vec![]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({}))}, "autoEnableCodemode": false});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, &[]);
    let first = p.recv();
    assert_eq!(
        first["message"],
        "MCP tools are only reachable from the codemode or tool_search tool, but neither is active (autoEnableCodemode is false); they cannot be called."
    );
}

#[test]
fn describe_tool_renders_pis_declarations() {
    need_python!();
    let (w, _llm) = fake_world(vec![
        reply(
            1,
            &[codemode(
                "c",
                "text(await describeTool('mcp__fake__add'));\ntext((await searchTools('read file', {limit: 1}))[0].description);",
            )],
        ),
        reply(2, &[text(&["ok"])]),
    ]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, &["--tools", "+codemode"]);
    let frames = run(&mut p, "p1", "go");
    let out = result_text(&frames, "c");
    let add = "Add two numbers.\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { mcp__fake__add(args: { a: number; b: number; }): Promise<{ content: Array<{ data?: string; mimeType?: string; text?: string; type: \"text\" | \"image\" | \"audio\" | \"resource_link\" | \"resource\"; [key: string]: unknown; }>; isError?: boolean; structuredContent?: unknown; [key: string]: unknown; }>; };\n```";
    assert!(out.contains(add), "{out}");
    // A built-in's declaration carries its guidelines and its output type.
    assert!(
        out.contains("- Use read to examine files instead of cat or sed.\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { read(args: {\n  // Maximum number of lines to read\n  limit?: number;"),
        "{out}"
    );
}

#[test]
fn mode_only_lists_mcp_tools_by_namespace_and_declares_them_to_no_one() {
    need_python!();
    let (w, llm) = fake_world(vec![reply(1, &[text(&["ok"])])]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "direct", "description": "Fake tools"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    w.write_agent_file("settings.json", r#"{"codemode": {"mode": "only"}}"#);
    let mut p = start(&w, &["--tools", "+codemode"]);
    let frames = run(&mut p, "p1", "go");
    // The request declares codemode alone; its description lists the MCP server's tools
    // under the namespace's heading.
    let tools = request_tools(&llm, 0);
    assert_eq!(tools.len(), 1, "{tools:#?}");
    let d = tools[0]["description"].as_str().unwrap();
    assert!(
        d.contains("\n\n## mcp__fake\nFake tools\n\n### `mcp__fake__echo`\nEcho a text.\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { mcp__fake__echo(args: {\n  // What to echo\n  text: string;\n}): Promise<"),
        "{d}"
    );
    // The system message still names every active tool (pi's active set), with codemode's
    // listing; its prompt sections list only codemode.
    let sys = frames
        .iter()
        .find(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .unwrap();
    let added: Vec<&str> = sys["message"]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        &added[..6],
        [
            "read",
            "bash",
            "edit",
            "write",
            "codemode",
            "mcp__fake__echo"
        ]
    );
    assert_eq!(
        sys["message"]["sections"]["tools"],
        "<tools>\n- codemode: Run JavaScript that calls other tools\n\nAdditional tools may be available.\n</tools>"
    );
}

#[test]
fn requests_keep_a_tools_additional_properties() {
    need_python!();
    let (w, llm) = fake_world(vec![reply(1, &[text(&["ok"])])]);
    let cfg =
        json!({"mcpServers": {"fake": server(&["--resources"], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, &[]);
    run(&mut p, "p1", "go");
    let tools = request_tools(&llm, 0);
    let schema = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .map(|t| t["input_schema"].clone())
            .unwrap_or_else(|| panic!("no {n}: {tools:#?}"))
    };
    // pi 1.6.0's Anthropic request: type, properties, required, then additionalProperties.
    assert_eq!(
        serde_json::to_string(&schema("mcp__fake__echo")).unwrap(),
        r#"{"type":"object","properties":{"text":{"type":"string","description":"What to echo"}},"required":["text"],"additionalProperties":false}"#
    );
    assert_eq!(schema("read_mcp_resource")["additionalProperties"], false);
    assert!(
        schema("mcp__fake__add")
            .get("additionalProperties")
            .is_none()
    );
}
