//! pi 1.6.0's MCP client under `--compat 1.6` (issue 25), against the fake MCP server in
//! `fixtures/mcp/fake_server.py`: servers from `<agentDir>/mcp.json` (and the trusted project's
//! `.pi/mcp.json`), exposures (`direct` declared, `codemode` listed in the `mcp_servers` section,
//! `deferred` loaded by `tool_search`, `hidden`), pi's result shape, the 20 KB middle cut, `/mcp`
//! status lines, start-up problems as one notify. Older versions keep pith's own client
//! (`tests/mcp.rs`) and do not read `mcp.json`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{reply, text, tool_call};
use support::frames::{request_body, request_tool_names as tool_names, run_settled as run};
use support::mcp::server;
use support::spawn_compat as start;
use support::{Pith, fake_rpc, fake_world};

fn tool_end(frames: &[Value], id: &str) -> Value {
    let mut v = support::frames::tool_end(frames, id).clone();
    if let Some(d) = v.as_object_mut().unwrap().remove("durationMs") {
        assert!(d.is_u64(), "{d}");
    }
    v
}

fn system_messages(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "message_end" && f["message"]["role"] == "system")
        .map(|f| f["message"].clone())
        .collect()
}

/// Send `/mcp` until every server has settled (not `starting`); the notify's message.
fn mcp_status(p: &mut Pith) -> String {
    support::mcp::status(p, true)
}

#[test]
fn direct_tools_are_declared_called_and_reported_as_pi() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[tool_call("e", "mcp__fake__echo", &[r#"{"text":"hi"}"#])],
        ),
        reply(
            2,
            &[tool_call("a", "mcp__fake__add", &[r#"{"a":"2","b":3}"#])],
        ),
        reply(3, &[tool_call("f", "mcp__fake__fail", &["{}"])]),
        reply(4, &[text(&["done"])]),
    ]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "direct", "description": "Fake tools"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &[]);
    let frames = run(&mut p, "p1", "use it");

    // The first prompt waited for the direct server: its tools are declared at once, as pi
    // declares them (no `constrainedSampling`), after the built-ins.
    let sys = system_messages(&frames);
    assert_eq!(sys.len(), 1, "{sys:#?}");
    let added = sys[0]["toolsAdded"].as_array().unwrap();
    let names: Vec<&str> = added.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        &names[..6],
        [
            "read",
            "bash",
            "edit",
            "write",
            "mcp__fake__echo",
            "mcp__fake__add"
        ]
    );
    assert_eq!(
        added[4],
        json!({"name": "mcp__fake__echo", "description": "Echo a text.",
               "parameters": {"type": "object", "properties": {"text": {"type": "string", "description": "What to echo"}},
                              "required": ["text"], "additionalProperties": false}})
    );
    // `fail` declares no properties: pi adds an empty `properties`.
    let fail = added
        .iter()
        .find(|t| t["name"] == "mcp__fake__fail")
        .unwrap();
    assert_eq!(
        fail["parameters"],
        json!({"type": "object", "properties": {}})
    );
    assert!(sys[0]["sections"].get("mcp_servers").is_none());
    assert!(tool_names(&llm, 0).contains(&"mcp__fake__echo".to_string()));

    assert_eq!(
        tool_end(&frames, "e"),
        json!({"type": "tool_execution_end", "toolCallId": "e", "toolName": "mcp__fake__echo",
               "result": {"content": [{"type": "text", "text": "hi"}],
                          "details": {"server": "fake", "tool": "echo"},
                          "structuredContent": {"content": [{"type": "text", "text": "hi"}]}},
               "isError": false})
    );
    // "2" is coerced to the number the schema asks for (pi-schema), and the structured result
    // is the whole CallToolResult.
    assert_eq!(
        tool_end(&frames, "a")["result"],
        json!({"content": [{"type": "text", "text": "5"}],
               "details": {"server": "fake", "tool": "add"},
               "structuredContent": {"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}}})
    );
    assert_eq!(
        tool_end(&frames, "f"),
        json!({"type": "tool_execution_end", "toolCallId": "f", "toolName": "mcp__fake__fail",
               "result": {"content": [{"type": "text", "text": "it failed"}],
                          "details": {"server": "fake", "tool": "fail"},
                          "structuredContent": {"content": [{"type": "text", "text": "it failed"}], "isError": true},
                          "isError": true},
               "isError": true})
    );
    let result_msg = frames
        .iter()
        .find(|f| {
            f["type"] == "message_end"
                && f["message"]["role"] == "toolResult"
                && f["message"]["toolCallId"] == "f"
        })
        .unwrap();
    assert_eq!(
        result_msg["message"]["details"],
        json!({"server": "fake", "tool": "fail"})
    );
    assert!(result_msg["message"].get("structuredContent").is_none());

    assert_eq!(mcp_status(&mut p), "fake: connected, 9 tools (direct)");
    let cmds = p.call(json!({"type": "get_commands"}), "c");
    let names: Vec<&str> = cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["llama", "mcp"]);
}

#[test]
fn codemode_servers_are_listed_not_declared_and_hidden_tools_unreachable() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[tool_call("e", "mcp__fake__echo", &[r#"{"text":"x"}"#])],
        ),
        reply(
            2,
            &[tool_call("h", "mcp__other__echo", &[r#"{"text":"x"}"#])],
        ),
        reply(3, &[text(&["ok"])]),
    ]);
    let cfg = json!({"mcpServers": {
        "fake": server(&["--instructions", "Tools to test with.\nSecond line."], json!({})),
        "other": server(&[], json!({"exposure": "direct", "toolExposure": {"e*": "hidden", "add": "deferred"}})),
    }});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &[]);
    // Both connected: `fake`'s summary is the first line of its instructions.
    assert_eq!(
        mcp_status(&mut p),
        "fake: connected, 9 tools (codemode)\nother: connected, 9 tools (direct)"
    );
    let frames = run(&mut p, "p1", "go");
    let sys = system_messages(&frames);
    assert_eq!(
        sys[0]["sections"]["mcp_servers"],
        "<mcp_servers>\nMCP servers whose tools are not declared to you. Call the tools of `codemode` servers from codemode scripts. Load the tools of `tool_search` servers with `tool_search`.\n- mcp__fake (codemode): Tools to test with.\n- mcp__other (tool_search)\n</mcp_servers>"
    );
    let declared = tool_names(&llm, 0);
    assert!(
        !declared.iter().any(|n| n.starts_with("mcp__fake__")),
        "{declared:?}"
    );
    assert!(declared.contains(&"mcp__other__image".to_string()));
    assert!(!declared.contains(&"mcp__other__echo".to_string()));
    assert!(!declared.contains(&"mcp__other__add".to_string()));
    let system = request_body(&llm, 0)["system"].to_string();
    assert!(
        system.contains("- mcp__fake (codemode): Tools to test with."),
        "{system}"
    );
    for id in ["e", "h"] {
        let end = tool_end(&frames, id);
        assert_eq!(end["isError"], true);
        assert!(
            end["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("not found"),
            "{end}"
        );
    }
}

#[test]
fn tool_search_loads_deferred_tools_for_the_next_call_and_keeps_them_on_the_branch() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[tool_call(
                "s",
                "tool_search",
                &[r#"{"query":"echo text","limit":1}"#],
            )],
        ),
        reply(
            2,
            &[tool_call("e", "mcp__fake__echo", &[r#"{"text":"found"}"#])],
        ),
        reply(3, &[text(&["done"])]),
        reply(4, &[text(&["again"])]),
    ]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "deferred", "description": "Fake tools"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &["--tools", "+tool_search"]);
    mcp_status(&mut p);
    let frames = run(&mut p, "p1", "find it");
    assert_eq!(
        tool_end(&frames, "s"),
        json!({"type": "tool_execution_end", "toolCallId": "s", "toolName": "tool_search",
               "result": {"content": [{"type": "text", "text": "Loaded 1 tool. They are available from your next call:\n- mcp__fake__echo: Echo a text."}],
                          "details": {"loaded": ["mcp__fake__echo"]}},
               "isError": false})
    );
    let sys = system_messages(&frames);
    assert_eq!(sys.len(), 2, "{sys:#?}");
    assert_eq!(
        sys[0]["sections"]["mcp_servers"],
        "<mcp_servers>\nMCP servers whose tools are not declared to you. Load the tools of `tool_search` servers with `tool_search`.\n- mcp__fake (tool_search): Fake tools\n</mcp_servers>"
    );
    assert!(
        sys[0]["sections"]["tools"].as_str().unwrap().contains(
            "- tool_search: Search for tools that are not loaded yet and load the matches"
        )
    );
    // The next turn declares what was loaded, and only that.
    assert!(sys[1].get("sections").is_none(), "{:#?}", sys[1]);
    let added: Vec<&str> = sys[1]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["mcp__fake__echo"]);
    assert_eq!(
        tool_names(&llm, 0),
        ["read", "bash", "edit", "write", "tool_search"]
    );
    assert_eq!(
        tool_names(&llm, 1),
        [
            "read",
            "bash",
            "edit",
            "write",
            "tool_search",
            "mcp__fake__echo"
        ]
    );
    assert_eq!(tool_end(&frames, "e")["isError"], false);
    // A later prompt on the branch keeps it declared, without declaring it again.
    let frames = run(&mut p, "p2", "more");
    assert!(system_messages(&frames).is_empty(), "{frames:#?}");
    assert!(tool_names(&llm, 3).contains(&"mcp__fake__echo".to_string()));
}

#[test]
fn tool_search_survives_a_resume() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(1, &[tool_call("s", "tool_search", &[r#"{"query":"add"}"#])]),
        reply(2, &[text(&["loaded"])]),
        reply(3, &[text(&["resumed"])]),
    ]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "deferred"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut args = fake_rpc(&["--compat", "1.6", "--tools", "+tool_search"]);
    let mut p = w.spawn(&args);
    mcp_status(&mut p);
    let frames = run(&mut p, "p1", "load add");
    let loaded = tool_end(&frames, "s")["result"]["details"]["loaded"].clone();
    assert_eq!(loaded[0], "mcp__fake__add", "{loaded}");
    p.finish(Duration::from_secs(10));
    args.push("--continue");
    let mut p = w.spawn(&args);
    mcp_status(&mut p);
    run(&mut p, "p2", "again");
    assert!(tool_names(&llm, 2).contains(&"mcp__fake__add".to_string()));
}

#[test]
fn configuration_problems_are_one_notify_and_mcp_lists_every_server() {
    need_python!();
    let (w, _llm) = fake_world(vec![]);
    let cfg = json!({"mcpServers": {
        "ok": server(&[], json!({"exposure": "direct"})),
        "off": server(&[], json!({"enabled": false})),
        "gone": {"command": "/nonexistent/pith-test-server", "exposure": "direct"},
        "old": {"type": "sse", "url": "https://example.com/sse"},
        "bad": {"command": "x", "exposure": "sometimes"},
    }});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let agent = w.agent_dir().join("mcp.json").display().to_string();
    let mut p = start(&w, "1.6", &[]);
    let first = p.recv();
    assert_eq!(first["type"], "extension_ui_request", "{first}");
    assert_eq!(first["method"], "notify");
    assert_eq!(first["notifyType"], "warning");
    let msg = first["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!(
            "MCP servers need attention:\n  config: {agent}: server \"old\": legacy SSE transport is not supported; use the streamable HTTP URL\n  config: {agent}: server \"bad\": exposure must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\"\n  gone: failed: cannot start /nonexistent/pith-test-server"
        )),
        "{msg}"
    );
    assert!(msg.ends_with("\nRun /mcp to fix."), "{msg}");
    let status = mcp_status(&mut p);
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(lines[0], "ok: connected, 9 tools (direct)");
    assert_eq!(lines[1], "off: disabled (codemode)");
    assert_eq!(lines[2], "gone: failed (direct)");
    assert!(lines[3].starts_with("    cannot start /nonexistent/pith-test-server"));
    assert!(lines[4].starts_with("config error: "), "{status}");
}

#[test]
fn a_project_overrides_only_when_trusted_and_only_what_it_may() {
    need_python!();
    let (w, llm) = fake_world(vec![reply(1, &[text(&["a"])]), reply(2, &[text(&["b"])])]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    std::fs::create_dir_all(w.cwd().join(".pi")).unwrap();
    std::fs::write(
        w.cwd().join(".pi/mcp.json"),
        json!({"mcpServers": {
            "fake": {"enabled": false},
            "mine": {"command": "sh", "args": ["-c", "touch pwned"]},
        }})
        .to_string(),
    )
    .unwrap();
    // Not trusted: the project's file is not read.
    let mut p = start(&w, "1.6", &[]);
    assert_eq!(mcp_status(&mut p), "fake: connected, 9 tools (direct)");
    run(&mut p, "p1", "x");
    assert!(tool_names(&llm, 0).contains(&"mcp__fake__echo".to_string()));
    p.finish(Duration::from_secs(10));
    assert!(!w.cwd().join("pwned").exists());
    // Trusted: the override turns the user's server off in this project.
    let mut p = start(&w, "1.6", &["--approve"]);
    let status = mcp_status(&mut p);
    assert!(
        status.starts_with("fake: disabled (direct)\nmine: "),
        "{status}"
    );
    run(&mut p, "p2", "y");
    assert!(!tool_names(&llm, 1).iter().any(|n| n.starts_with("mcp__")));
}

#[test]
fn long_text_results_are_cut_in_the_middle_with_the_full_text_saved() {
    need_python!();
    let (w, _llm) = fake_world(vec![
        reply(
            1,
            &[tool_call("b", "mcp__fake__big", &[r#"{"lines":5000}"#])],
        ),
        reply(2, &[text(&["ok"])]),
    ]);
    let cfg =
        json!({"mcpServers": {"fake": server(&["--hostile"], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &[]);
    let frames = run(&mut p, "p1", "big");
    let end = tool_end(&frames, "b");
    let full: String = (1..=5000)
        .map(|n| format!("line {n}"))
        .collect::<Vec<_>>()
        .join("\n");
    let path = end["result"]["details"]["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    let tokens = full.len().div_ceil(4);
    assert!(
        text.starts_with(&format!(
            "Warning: truncated output (original token count: {tokens})\nTotal output lines: 5000\n\nline 1\nline 2\n"
        )),
        "{}",
        &text[..200]
    );
    assert!(text.contains(" chars truncated…"));
    assert!(text.ends_with(&format!(
        "line 5000\n\n[Full output: {path} (read it with offset/limit)]"
    )));
    // The script-facing result is whole.
    assert_eq!(
        end["result"]["structuredContent"]["content"][0]["text"],
        full.as_str()
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn older_versions_do_not_read_mcp_json() {
    need_python!();
    let (w, llm) = fake_world(vec![reply(1, &[text(&["a"])])]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "0.87", &[]);
    run(&mut p, "p1", "x");
    assert!(!tool_names(&llm, 0).iter().any(|n| n.starts_with("mcp__")));
}

#[test]
fn resource_tools_list_every_page_and_read() {
    need_python!();
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[
                tool_call("l", "list_mcp_resources", &["{}"]),
                tool_call("l1", "list_mcp_resources", &[r#"{"server":"fake"}"#]),
                tool_call("t", "list_mcp_resource_templates", &["{}"]),
                tool_call(
                    "r",
                    "read_mcp_resource",
                    &[r#"{"server":"fake","uri":"file:///a.txt"}"#],
                ),
                tool_call(
                    "x",
                    "read_mcp_resource",
                    &[r#"{"server":"fake","uri":"file:///none"}"#],
                ),
                tool_call(
                    "n",
                    "read_mcp_resource",
                    &[r#"{"server":"nope","uri":"u"}"#],
                ),
            ],
        ),
        reply(2, &[text(&["ok"])]),
    ]);
    let cfg =
        json!({"mcpServers": {"fake": server(&["--resources"], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &[]);
    let frames = run(&mut p, "p1", "resources");
    let names = tool_names(&llm, 0);
    for n in [
        "list_mcp_resources",
        "list_mcp_resource_templates",
        "read_mcp_resource",
    ] {
        assert!(names.contains(&n.to_string()), "{names:?}");
    }
    // Every page, MCP App UIs left out, `_meta` and icons dropped.
    let all = json!({"resources": [
        {"server": "fake", "uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"},
        {"server": "fake", "uri": "file:///b.bin", "name": "b"}]});
    assert_eq!(
        tool_end(&frames, "l")["result"],
        json!({"content": [{"type": "text", "text": all.to_string()}],
               "details": {"server": "", "tool": "list_mcp_resources"},
               "structuredContent": all})
    );
    // A named server: one page and its cursor.
    let one = json!({"server": "fake", "resources": [
        {"server": "fake", "uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"}], "nextCursor": "p2"});
    assert_eq!(tool_end(&frames, "l1")["result"]["structuredContent"], one);
    assert_eq!(
        tool_end(&frames, "t")["result"]["structuredContent"],
        json!({"resourceTemplates": [{"server": "fake", "uriTemplate": "file:///{path}", "name": "files"}]})
    );
    assert_eq!(
        tool_end(&frames, "r"),
        json!({"type": "tool_execution_end", "toolCallId": "r", "toolName": "read_mcp_resource",
               "result": {"content": [{"type": "text", "text": "AAA"}],
                          "details": {"server": "fake", "tool": "read_mcp_resource"},
                          "structuredContent": {"server": "fake", "uri": "file:///a.txt",
                                                "contents": [{"uri": "file:///a.txt", "mimeType": "text/plain", "text": "AAA"}]}},
               "isError": false})
    );
    let x = tool_end(&frames, "x");
    assert_eq!(x["isError"], true);
    assert_eq!(x["result"]["content"][0]["text"], "Resource not found");
    assert_eq!(
        tool_end(&frames, "n")["result"]["content"][0]["text"],
        "MCP server \"nope\" has no resources. Servers with resources: fake"
    );
}

#[test]
fn builtin_mcp_can_be_turned_off_and_back_on() {
    need_python!();
    let (w, llm) = fake_world(vec![reply(1, &[text(&["a"])]), reply(2, &[text(&["b"])])]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    w.write_agent_file("settings.json", r#"{"extensions": ["-builtin:mcp"]}"#);
    let mut p = start(&w, "1.6", &[]);
    let cmds = p.call(json!({"type": "get_commands"}), "c");
    assert_eq!(
        cmds["data"]["commands"].as_array().unwrap().len(),
        1,
        "{cmds}"
    );
    run(&mut p, "p1", "x");
    assert!(!tool_names(&llm, 0).iter().any(|n| n.starts_with("mcp__")));
    p.finish(Duration::from_secs(10));
    // `--no-extensions -e builtin:mcp` keeps only the MCP client.
    w.write_agent_file("settings.json", "{}");
    let mut p = start(&w, "1.6", &["--no-extensions", "-e", "builtin:mcp"]);
    let cmds = p.call(json!({"type": "get_commands"}), "c");
    let names: Vec<&str> = cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mcp"]);
    run(&mut p, "p2", "y");
    assert!(tool_names(&llm, 1).contains(&"mcp__fake__echo".to_string()));
}

#[test]
fn the_first_prompt_waits_ten_seconds_at_most_for_direct_servers() {
    need_python!();
    let (w, llm) = fake_world(vec![reply(1, &[text(&["a"])])]);
    let cfg =
        json!({"mcpServers": {"slow": server(&["--no-init"], json!({"exposure": "direct"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &[]);
    let started = std::time::Instant::now();
    p.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    let first = p
        .try_recv(Duration::from_secs(20))
        .expect("the prompt goes on after 10 s");
    let waited = started.elapsed();
    let mut frames = vec![first];
    frames.extend(p.recv_until(|v| v["type"] == "agent_settled"));
    assert!(waited >= Duration::from_secs(9), "{waited:?}");
    assert_eq!(
        frames[0],
        json!({"type": "extension_ui_request", "id": frames[0]["id"], "method": "notify",
               "message": "MCP servers are still connecting; their tools become available once connected.",
               "notifyType": "info"})
    );
    assert_eq!(frames[1]["id"], "p1");
    assert!(!tool_names(&llm, 0).iter().any(|n| n.starts_with("mcp__")));
}

#[test]
fn unreachable_tools_are_warned_about_once() {
    need_python!();
    let (w, _llm) = fake_world(vec![]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"exposure": "deferred"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    w.write_agent_file(
        "settings.json",
        r#"{"extensions": ["-builtin:tool-search"]}"#,
    );
    let mut p = start(&w, "1.6", &[]);
    let first = p.recv();
    assert_eq!(
        first["message"],
        "MCP tools are only reachable from the codemode or tool_search tool, but neither is active; they cannot be called."
    );
    assert_eq!(first["notifyType"], "warning");
    let state = p.call(json!({"type": "get_state"}), "s");
    assert_eq!(state["success"], true);
}

#[test]
fn a_codemode_script_calls_a_codemode_exposed_tool() {
    need_python!();
    let code = "const r = await tools.mcp__fake__echo({text: 'from a script'});\\ntext(r.content[0].text);";
    let (w, llm) = fake_world(vec![
        reply(
            1,
            &[tool_call(
                "c",
                "codemode",
                &[&format!(r#"{{"code":"{code}"}}"#)],
            )],
        ),
        reply(2, &[text(&["ok"])]),
    ]);
    let cfg = json!({"mcpServers": {"fake": server(&[], json!({"description": "Fake tools"}))}});
    w.write_agent_file("mcp.json", &cfg.to_string());
    let mut p = start(&w, "1.6", &[]);
    mcp_status(&mut p);
    let frames = run(&mut p, "p1", "script it");
    // codemode was activated from the configuration; the server's tools are not declared.
    let declared = tool_names(&llm, 0);
    assert!(declared.contains(&"codemode".to_string()), "{declared:?}");
    assert!(
        !declared.iter().any(|n| n.starts_with("mcp__")),
        "{declared:?}"
    );
    let nested = tool_end(&frames, "c/1");
    assert_eq!(nested["toolName"], "mcp__fake__echo");
    assert_eq!(nested["parentToolCallId"], "c");
    assert_eq!(
        nested["result"]["details"],
        json!({"server": "fake", "tool": "echo"})
    );
    let end = tool_end(&frames, "c");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["content"][1],
        json!({"type": "text", "text": "from a script"})
    );
    assert_eq!(end["result"]["details"]["calls"][0]["status"], "ok");
}
