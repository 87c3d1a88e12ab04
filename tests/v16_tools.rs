//! pi 1.6.0's tools and CLI under `--compat 1.6` (issue 24, helper tools16): `structuredContent`
//! in `tool_execution_end.result`, a failed bash as an `isError` result without `details:{}`,
//! `argumentsError` for malformed tool-call JSON, `--tools +name/-name` and `*` patterns,
//! `--provider` without `--model`. Each checks that `--compat 0.87` is unchanged.

mod support;

use serde_json::{Value, json};

use support::anthropic::{reply, text, tool_call};
use support::fake_llm::{FakeLlm, Reply};
use support::frames::{request_body, tool_end};
use support::{Pith, World, fake_rpc, fake_world};

fn start(compat: &str, replies: Vec<Reply>, extra: &[&str]) -> (World, FakeLlm, Pith) {
    let (world, llm) = fake_world(replies);
    let p = support::spawn_compat(&world, compat, extra);
    (world, llm, p)
}

fn run(p: &mut Pith, message: &str) -> Vec<Value> {
    support::frames::run(p, "p1", message)
}

fn tool_result_message<'a>(frames: &'a [Value], id: &str) -> &'a Value {
    &frames
        .iter()
        .find(|v| {
            v["type"] == "message_end"
                && v["message"]["role"] == "toolResult"
                && v["message"]["toolCallId"] == id
        })
        .unwrap_or_else(|| panic!("no toolResult {id}"))["message"]
}

/// The end frame without the run-dependent numbers (wall time, durations).
fn without_timing(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("durationMs");
    }
    if let Some(sc) = v
        .get_mut("result")
        .and_then(|r| r.get_mut("structuredContent"))
        .and_then(Value::as_object_mut)
    {
        if let Some(w) = sc.get("wall_time_seconds") {
            assert!(w.is_number(), "wall_time_seconds {w}");
        }
        sc.insert("wall_time_seconds".into(), json!("<wall>"));
    }
    v
}

fn tool_replies() -> Vec<Reply> {
    vec![
        reply(
            1,
            &[
                tool_call("ok", "bash", &[r#"{"command":"echo hi"}"#]),
                tool_call("bad", "bash", &[r#"{"command":"echo out; exit 3"}"#]),
                tool_call("rd", "read", &[r#"{"path":"a.txt"}"#]),
                tool_call("wr", "write", &[r#"{"path":"b.txt","content":"x"}"#]),
                tool_call("v", "read", &[r#"{"limit":"x"}"#]),
                tool_call("c", "read", &[r#"{"path":"a.txt","limit":"1"}"#]),
            ],
        ),
        reply(2, &[text(&["done"])]),
    ]
}

#[test]
fn tool_results_carry_structured_content_under_16() {
    let (world, _llm, mut p) = start("1.6", tool_replies(), &[]);
    std::fs::write(world.cwd().join("a.txt"), "alpha\nbeta\n").expect("write");
    let f = run(&mut p, "tools");
    assert_eq!(
        without_timing(tool_end(&f, "ok").clone()),
        json!({"type":"tool_execution_end","toolCallId":"ok","toolName":"bash",
            "result":{"content":[{"type":"text","text":"hi\n"}],
                "structuredContent":{"output":"hi\n","truncated":false,"exit_code":0,
                    "wall_time_seconds":"<wall>"}},
            "isError":false})
    );
    assert_eq!(
        without_timing(tool_end(&f, "bad").clone()),
        json!({"type":"tool_execution_end","toolCallId":"bad","toolName":"bash",
            "result":{"content":[{"type":"text","text":"out\n\n\nCommand exited with code 3"}],
                "structuredContent":{"output":"out\n","truncated":false,"exit_code":3,
                    "wall_time_seconds":"<wall>"},
                "isError":true},
            "isError":true})
    );
    // The toolResult message: no structuredContent, no details:{} for the failed bash.
    let m = tool_result_message(&f, "bad");
    assert_eq!(m.get("details"), None);
    assert_eq!(m.get("structuredContent"), None);
    assert_eq!(m["isError"], true);
    assert_eq!(
        without_timing(tool_end(&f, "rd").clone()),
        json!({"type":"tool_execution_end","toolCallId":"rd","toolName":"read",
            "result":{"content":[{"type":"text","text":"alpha\nbeta\n"}],
                "structuredContent":"alpha\nbeta\n"},
            "isError":false})
    );
    assert_eq!(tool_result_message(&f, "rd").get("structuredContent"), None);
    assert_eq!(
        without_timing(tool_end(&f, "wr").clone())["result"],
        json!({"content":[{"type":"text","text":"Successfully wrote to b.txt"}]})
    );
    // A validation failure keeps details:{} and has no structuredContent.
    let v = tool_end(&f, "v");
    assert_eq!(v["result"]["details"], json!({}));
    assert_eq!(v["result"].get("structuredContent"), None);
    assert_eq!(v["result"].get("isError"), None);
    // pi-schema's words.
    assert_eq!(
        v["result"]["content"][0]["text"],
        "Validation failed for tool \"read\":\n  - path: missing\n  - limit: expected number, got string\n\nReceived arguments:\n{\n  \"limit\": \"x\"\n}"
    );
    // A numeric string is coerced.
    assert_eq!(tool_end(&f, "c")["isError"], false);
}

#[test]
fn tool_results_are_unchanged_under_087() {
    let (world, _llm, mut p) = start("0.87", tool_replies(), &[]);
    std::fs::write(world.cwd().join("a.txt"), "alpha\nbeta\n").expect("write");
    let f = run(&mut p, "tools");
    assert_eq!(
        tool_end(&f, "ok").clone(),
        json!({"type":"tool_execution_end","toolCallId":"ok","toolName":"bash",
            "result":{"content":[{"type":"text","text":"hi\n"}]},"isError":false})
    );
    assert_eq!(
        tool_end(&f, "bad").clone(),
        json!({"type":"tool_execution_end","toolCallId":"bad","toolName":"bash",
            "result":{"content":[{"type":"text","text":"out\n\n\nCommand exited with code 3"}],
                "details":{}},
            "isError":true})
    );
    assert_eq!(tool_result_message(&f, "bad")["details"], json!({}));
    assert_eq!(
        tool_end(&f, "rd")["result"],
        json!({"content":[{"type":"text","text":"alpha\nbeta\n"}]})
    );
    // TypeBox's words (pi 0.87.1).
    assert_eq!(
        tool_end(&f, "v")["result"]["content"][0]["text"],
        "Validation failed for tool \"read\":\n  - path: must have required properties path\n  - limit: must be number\n\nReceived arguments:\n{\n  \"limit\": \"x\"\n}"
    );
}

const MALFORMED: &str = r#"{"command": "echo hi", "timeout": }"#;

fn malformed_replies() -> Vec<Reply> {
    vec![
        reply(
            1,
            &[tool_call(
                "toolu_d7",
                "bash",
                &[r#"{"command": "echo hi", "#, r#""timeout": }"#],
            )],
        ),
        reply(2, &[text(&["done"])]),
    ]
}

#[test]
fn malformed_tool_arguments_are_an_arguments_error_under_16() {
    let (_world, llm, mut p) = start("1.6", malformed_replies(), &[]);
    let f = run(&mut p, "bad json");
    let error = format!(
        "Unexpected token '}}', ...\"timeout\": }}\" is not valid JSON\n\nReceived arguments:\n{MALFORMED}"
    );
    let call = json!({"type":"toolCall","id":"toolu_d7","name":"bash","arguments":{},
        "argumentsError": error});
    let end = f
        .iter()
        .find(|v| {
            v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "toolcall_end"
        })
        .expect("toolcall_end");
    assert_eq!(end["assistantMessageEvent"]["toolCall"], call);
    let assistant = f
        .iter()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .expect("assistant");
    assert_eq!(assistant["message"]["content"], json!([call]));
    let start = f
        .iter()
        .find(|v| v["type"] == "tool_execution_start")
        .expect("start");
    assert_eq!(start["args"], json!({}));
    let text = format!("Invalid arguments for tool \"bash\": {error}");
    assert_eq!(
        tool_end(&f, "toolu_d7").clone(),
        json!({"type":"tool_execution_end","toolCallId":"toolu_d7","toolName":"bash",
            "result":{"content":[{"type":"text","text":text}],"details":{}},"isError":true})
    );
    // The model reads that text (the tool did not run).
    let body = request_body(&llm, 1);
    let last = body["messages"]
        .as_array()
        .expect("messages")
        .last()
        .cloned();
    assert_eq!(last.expect("last")["content"][0]["content"], json!(text));
}

/// 0.87 keeps pith's partial parse (what parses of the text: `{}` here, so validation fails;
/// pi 0.87.1 ran `echo hi`, a known difference documented in docs/rpc.md) and no
/// `argumentsError`.
#[test]
fn malformed_tool_arguments_keep_the_partial_parse_under_087() {
    let (_world, _llm, mut p) = start("0.87", malformed_replies(), &[]);
    let f = run(&mut p, "bad json");
    let start = f
        .iter()
        .find(|v| v["type"] == "tool_execution_start")
        .expect("start");
    assert_eq!(start["args"], json!({}));
    let end = tool_end(&f, "toolu_d7");
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Validation failed for tool \"bash\"")),
        "{end}"
    );
    let assistant = f
        .iter()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .expect("assistant");
    assert_eq!(
        assistant["message"]["content"][0].get("argumentsError"),
        None
    );
}

/// The tool names the first request declares.
fn declared_tools(compat: &str, extra: &[&str]) -> Vec<String> {
    let (_world, llm, mut p) = start(compat, vec![reply(1, &[text(&["ok"])])], extra);
    run(&mut p, "which tools?");
    request_body(&llm, 0)["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn tools_modifiers_and_patterns_under_16() {
    assert_eq!(
        declared_tools("1.6", &["--tools", "-write", "--exclude-tools", "ed*"]),
        ["read", "bash"]
    );
    assert_eq!(
        declared_tools("1.6", &["--tools", "+grep,-read"]),
        ["bash", "edit", "write", "grep"]
    );
    assert_eq!(
        declared_tools("1.6", &["--no-tools", "--tools", "+ls"]),
        ["ls"]
    );
    assert_eq!(declared_tools("1.6", &["--exclude-tools", "*e*"]), ["bash"]);
    // 0.87.1: exact names only (`ed*` excludes nothing, `-write` is an unknown tool).
    assert_eq!(
        declared_tools("0.87", &["--exclude-tools", "ed*"]),
        ["read", "bash", "edit", "write"]
    );
    assert_eq!(
        declared_tools("0.87", &["--tools", "-write,read"]),
        ["read"]
    );
}

/// The tool names the first request declares, with this global `settings.json`.
fn declared_tools_with_settings(compat: &str, settings: Value, extra: &[&str]) -> Vec<String> {
    let (world, llm) = fake_world(vec![reply(1, &[text(&["ok"])])]);
    let mut s = serde_json::from_str::<Value>(
        &std::fs::read_to_string(world.agent_dir().join("settings.json")).unwrap_or("{}".into()),
    )
    .unwrap_or(json!({}));
    if let (Some(m), Value::Object(add)) = (s.as_object_mut(), settings) {
        m.extend(add);
    }
    world.write_agent_file("settings.json", &s.to_string());
    let mut args = fake_rpc(&["--no-session", "--compat", compat]);
    args.extend_from_slice(extra);
    let mut p = world.spawn(&args);
    run(&mut p, "which tools?");
    request_body(&llm, 0)["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn default_tools_setting_takes_modifiers_under_16() {
    let s = json!({"defaultTools": ["-write", "+ls"]});
    assert_eq!(
        declared_tools_with_settings("1.6", s.clone(), &[]),
        ["read", "bash", "edit", "ls"]
    );
    // `--tools` modifiers apply to the configured default set.
    assert_eq!(
        declared_tools_with_settings("1.6", s.clone(), &["--tools", "-read"]),
        ["bash", "edit", "ls"]
    );
    assert_eq!(
        declared_tools_with_settings("1.6", json!({"defaultTools": ["grep", "+find"]}), &[]),
        ["grep", "find"]
    );
    // 0.87.1: plain names (`-write`, `+ls` name no tool).
    assert_eq!(
        declared_tools_with_settings("0.87", s, &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        declared_tools_with_settings("0.87", json!({"defaultTools": ["grep", "read"]}), &[]),
        ["grep", "read"]
    );
}

#[test]
fn mixing_tool_names_and_modifiers_is_an_error_under_16() {
    let (world, _llm) = fake_world(vec![]);
    let out = world.output_within_10s(&fake_rpc(&[
        "--compat",
        "1.6",
        "--no-session",
        "--tools",
        "read,-write",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: --tools: tool names cannot be mixed with +name or -name entries\n"
    );
    let out = world.output_within_10s(&fake_rpc(&[
        "--compat",
        "1.6",
        "--no-session",
        "--tools",
        "+mcp__*",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: --tools: +name and -name entries take exact tool names, not patterns: +mcp__*\n"
    );
}

#[test]
fn provider_without_model_is_an_error_under_16_only() {
    let (world, _llm) = fake_world(vec![]);
    let out = world.output_within_10s(&[
        "--mode",
        "rpc",
        "--compat",
        "1.6",
        "--provider",
        "fake",
        "--no-session",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: --provider requires --model (for example: --provider fake --model <pattern>)\n"
    );
    // 0.87.1 starts with the provider's first model.
    let mut p = world.spawn(&[
        "--mode",
        "rpc",
        "--compat",
        "0.87",
        "--provider",
        "fake",
        "--no-session",
    ]);
    let state = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(state["success"], true);
    assert_eq!(state["data"]["model"]["provider"], "fake");
}

/// pi 1.6.0 coerces arguments with pi-schema's rules before checking them: `"TRUE"` for a
/// number is 1 (TypeBox's conversion; checked against pi-schema 1.6.0's `coerce()`), as pi
/// 0.87.1's TypeBox `Value.Convert` takes it.
#[test]
fn arguments_are_coerced_as_pi_schema_coerces_them_under_16() {
    let replies = || {
        vec![
            reply(
                1,
                &[
                    tool_call(
                        "e",
                        "edit",
                        &[r#"{"path":"a.txt","edits":{"oldText":"beta","newText":"gamma"}}"#],
                    ),
                    tool_call("r", "read", &[r#"{"path":"a.txt","limit":"TRUE"}"#]),
                ],
            ),
            reply(2, &[text(&["done"])]),
        ]
    };
    let (world, _llm, mut p) = start("1.6", replies(), &[]);
    std::fs::write(world.cwd().join("a.txt"), "alpha\nbeta\n").expect("write");
    let f = run(&mut p, "coerce");
    assert_eq!(tool_end(&f, "e")["isError"], false, "{}", tool_end(&f, "e"));
    assert_eq!(
        std::fs::read_to_string(world.cwd().join("a.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    let r = tool_end(&f, "r");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"],
        "alpha\n\n[2 more lines in file. Use offset=2 to continue.]"
    );

    let (world, _llm, mut p) = start("0.87", replies(), &[]);
    std::fs::write(world.cwd().join("a.txt"), "alpha\nbeta\n").expect("write");
    let f = run(&mut p, "coerce");
    // (edit's own prepareArguments wraps a single edit in every version.)
    assert_eq!(tool_end(&f, "e")["isError"], false);
    // TypeBox's `Value.Convert` takes "TRUE" as 1 too (pi 0.87.1, checked against it).
    let r = tool_end(&f, "r");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"],
        "alpha\n\n[2 more lines in file. Use offset=2 to continue.]"
    );
}

/// pi 1.6.0's `find` anchors a relative path pattern at the search path (`src/*.ts` no longer
/// finds `pkg/src/b.ts`; 1.5.1's change, pi-1.6-delta "find/grep globs relative to the search
/// path"), drops a leading `./`, and an all-lowercase path pattern ignores case; 0.87.1 added a
/// leading `**/` and found both.
#[test]
fn find_anchors_path_patterns_under_16_only() {
    for (compat, pattern, want) in [
        ("1.6", r#"{"pattern":"./src/*.ts"}"#, "SRC/c.ts\nsrc/a.ts"),
        (
            "0.87",
            r#"{"pattern":"src/*.ts"}"#,
            "SRC/c.ts\npkg/src/b.ts\nsrc/a.ts",
        ),
    ] {
        let replies = vec![
            reply(1, &[tool_call("toolu_f", "find", &[pattern])]),
            reply(2, &[text(&["Done."])]),
        ];
        let (w, _llm, mut p) = start(compat, replies, &["--tools", "find"]);
        for f in ["src/a.ts", "pkg/src/b.ts", "SRC/c.ts"] {
            let path = w.cwd().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x").unwrap();
        }
        let frames = run(&mut p, "find");
        let end = tool_end(&frames, "toolu_f");
        let mut lines: Vec<&str> = end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .lines()
            .collect();
        lines.sort();
        assert_eq!(lines.join("\n"), want, "{compat}: {end}");
    }
}

/// pi 1.6.0's `grep` roots its `glob` at the searched directory (rg runs there) and drops a
/// leading `./`; 0.87.1's rg ran in pi's cwd, so `src/*.ts` under `path: "pkg"` matched nothing.
/// The tool schemas carry 1.6.0's texts for `find`'s pattern and `grep`'s glob.
#[test]
fn grep_globs_are_rooted_at_the_search_path_under_16_only() {
    for (compat, glob, found) in [("1.6", "./src/*.ts", true), ("0.87", "src/*.ts", false)] {
        let args = format!(r#"{{"pattern":"needle","path":"pkg","glob":"{glob}"}}"#);
        let replies = vec![
            reply(1, &[tool_call("toolu_g", "grep", &[&args])]),
            reply(2, &[text(&["Done."])]),
        ];
        let (w, llm, mut p) = start(compat, replies, &["--tools", "grep,find"]);
        for f in ["src/a.ts", "pkg/src/b.ts"] {
            let path = w.cwd().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "needle\n").unwrap();
        }
        let frames = run(&mut p, "grep");
        let text = tool_end(&frames, "toolu_g")["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(text.contains("b.ts:1: needle"), found, "{compat}: {text}");
        assert!(!text.contains("a.ts"), "{compat}: {text}");
        let body = request_body(&llm, 0);
        let tools = body["tools"].as_array().unwrap();
        let desc = |name: &str, param: &str| {
            tools.iter().find(|t| t["name"] == name).unwrap()["input_schema"]["properties"][param]
                ["description"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let relative = desc("grep", "glob").contains("relative to path")
            && desc("find", "pattern").starts_with("Glob pattern relative to the search directory");
        assert_eq!(relative, compat == "1.6", "{compat}");
    }
}
