//! Structured output (issue 27) through the real binary: `--output-schema FILE` in print and
//! json modes and a prompt's `outputSchema` over RPC (every protocol version), on the offline
//! `faux` provider: an answer valid at once, one corrected, one never valid (exit 6, subtype
//! `output_schema`, the result file), a reply without the final-answer call (a reminder, then
//! exit 6), schemas refused at start (exit 2), and the tool as a provider's request declares it.

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::FAUX;
use support::World;
use support::anthropic::{Sse, text, tool_call};
use support::frames::of_type;
use support::output::{stderr, stdout};

fn schema() -> Value {
    json!({"type":"object","required":["verdict"],"additionalProperties":false,
        "properties":{"verdict":{"enum":["pass","fail"]},
            "findings":{"type":"array","items":{"$ref":"#/$defs/finding"}}},
        "$defs":{"finding":{"type":"object","required":["line"],
            "properties":{"line":{"type":"integer","minimum":1}}}}})
}

fn write(w: &World, name: &str, text: &str) -> String {
    let path = w.tmp().join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

fn script(w: &World, turns: &[Value]) -> String {
    let text: String = turns.iter().map(|l| format!("{l}\n")).collect();
    write(w, "faux.jsonl", &text)
}

fn answer(args: Value) -> Value {
    json!({"text":"Answering.","toolCalls":[{"name":"pith_final_answer","arguments":args}]})
}

/// pith in print (`-p`) or json mode with the schema and the script, plus `--result-file`.
fn oneshot(w: &World, mode: &str, turns: &[Value]) -> (Output, Value) {
    let s = script(w, turns);
    let schema = write(w, "schema.json", &schema().to_string());
    let result = w.tmp().join("result.json");
    let result_s = result.to_string_lossy().into_owned();
    let mut args = FAUX.to_vec();
    let mode_args: &[&str] = if mode == "print" {
        &["-p"]
    } else {
        &["--mode", "json"]
    };
    args.extend_from_slice(mode_args);
    args.extend_from_slice(&[
        "--no-session",
        "--faux-script",
        &s,
        "--output-schema",
        &schema,
        "--result-file",
        &result_s,
        "review it",
    ]);
    let o = w.output_within_10s(&args);
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(&result).expect("result file"))
            .expect("result JSON");
    (o, record)
}

fn frames(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The frame right before `agent_end`.
fn before_end(frames: &[Value]) -> &Value {
    let at = frames
        .iter()
        .position(|f| f["type"] == "agent_end")
        .expect("agent_end");
    &frames[at - 1]
}

fn tool_texts(frames: &[Value]) -> Vec<(String, bool)> {
    of_type(frames, "tool_execution_end")
        .iter()
        .map(|f| {
            (
                f["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                f["isError"] == true,
            )
        })
        .collect()
}

#[test]
fn valid_at_once_with_other_tools_in_print_and_json_modes() {
    let turns = [
        json!({"text":"Looking.","toolCalls":[{"name":"bash","arguments":{"command":"echo checked"}}]}),
        answer(json!({"verdict":"pass","findings":[{"line":3}]})),
    ];
    let w = World::new();
    let (o, record) = oneshot(&w, "print", &turns);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Print mode prints the structured output as one line of JSON, nothing else.
    assert_eq!(
        stdout(&o),
        "{\"verdict\":\"pass\",\"findings\":[{\"line\":3}]}\n"
    );
    assert_eq!(record["subtype"], "success");
    assert_eq!(
        record["structuredOutput"],
        json!({"verdict":"pass","findings":[{"line":3}]})
    );
    // The final answer is not one of the run's tool calls.
    assert_eq!(record["toolCalls"], 1);
    assert_eq!(record["turns"], 2);
    assert!(record.get("error").is_none());

    let w = World::new();
    let (o, record) = oneshot(&w, "json", &turns);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let f = frames(&o);
    assert_eq!(
        before_end(&f).to_string(),
        r#"{"type":"structured_output","valid":true,"value":{"verdict":"pass","findings":[{"line":3}]}}"#
    );
    assert_eq!(
        tool_texts(&f),
        [
            ("checked\n".to_string(), false),
            ("Final answer recorded.".to_string(), false)
        ]
    );
    // The run ends with the answer: no request after it.
    assert_eq!(
        of_type(&f, "message_end")
            .iter()
            .filter(|m| m["message"]["role"] == "assistant")
            .count(),
        2
    );
    let last = f.last().expect("frames");
    assert_eq!(last, &record, "json mode's last line is the record");
    assert_eq!(last["structuredOutput"]["verdict"], "pass");
}

#[test]
fn an_invalid_answer_is_corrected_once() {
    let w = World::new();
    let (o, record) = oneshot(
        &w,
        "json",
        &[
            answer(json!({"verdict":"maybe","findings":[{"line":0}],"note":"x"})),
            answer(json!({"verdict":"fail"})),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let f = frames(&o);
    assert_eq!(
        tool_texts(&f),
        [
            (
                "The final answer does not match the output schema:\n  - verdict: expected one of [\"pass\",\"fail\"]\n  - findings.0.line: expected >= 1\n  - note: unknown field\n\nCall pith_final_answer again with a corrected answer (1 correction left).".to_string(),
                true
            ),
            ("Final answer recorded.".to_string(), false)
        ]
    );
    assert_eq!(record["subtype"], "success");
    assert_eq!(record["structuredOutput"], json!({"verdict":"fail"}));
    assert_eq!(
        before_end(&f)["value"],
        json!({"verdict":"fail"}),
        "{:?}",
        before_end(&f)
    );
}

#[test]
fn never_valid_ends_with_exit_6() {
    let bad = answer(json!({"verdict":1}));
    for mode in ["print", "json"] {
        let w = World::new();
        let (o, record) = oneshot(
            &w,
            mode,
            &[bad.clone(), bad.clone(), bad.clone(), bad.clone()],
        );
        assert_eq!(o.status.code(), Some(6), "{mode}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("pith: the final answer did not match the output schema after 2 corrections: verdict: expected one of [\"pass\",\"fail\"]"),
            "{}",
            stderr(&o)
        );
        assert_eq!(record["subtype"], "output_schema");
        assert_eq!(record["structuredOutput"], Value::Null);
        assert_eq!(
            record["error"],
            "the final answer did not match the output schema after 2 corrections: verdict: expected one of [\"pass\",\"fail\"]"
        );
        // Three answers: the first and two corrections; no fourth request.
        assert_eq!(record["turns"], 3);
        if mode == "print" {
            assert_eq!(stdout(&o), "", "no answer printed");
            continue;
        }
        let f = frames(&o);
        let texts = tool_texts(&f);
        assert_eq!(texts.len(), 3);
        assert!(texts[1].0.ends_with("(0 corrections left)."), "{texts:?}");
        assert!(
            texts[2]
                .0
                .ends_with("No correction is left: the run ends without an answer."),
            "{texts:?}"
        );
        assert_eq!(
            before_end(&f).to_string(),
            r#"{"type":"structured_output","valid":false,"corrections":2,"errors":["verdict: expected one of [\"pass\",\"fail\"]"]}"#
        );
    }
}

#[test]
fn a_reply_without_the_call_gets_a_reminder() {
    const REMINDER: &str = "Your work must end with a call of the pith_final_answer tool, with the final answer as its arguments (matching its schema). Call it now.";
    // Plain text, reminded, then the answer.
    let w = World::new();
    let (o, record) = oneshot(
        &w,
        "json",
        &[
            json!({"text":"It passes."}),
            answer(json!({"verdict":"pass"})),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let f = frames(&o);
    let users: Vec<String> = of_type(&f, "message_end")
        .iter()
        .filter(|m| m["message"]["role"] == "user")
        .map(|m| {
            m["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(users, ["review it", REMINDER]);
    assert_eq!(record["structuredOutput"], json!({"verdict":"pass"}));

    // Plain text every time: two reminders (the two corrections), then exit 6.
    let w = World::new();
    let t = json!({"text":"It passes."});
    let (o, record) = oneshot(&w, "json", &[t.clone(), t.clone(), t.clone(), t]);
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let f = frames(&o);
    assert_eq!(record["subtype"], "output_schema");
    assert_eq!(record["turns"], 3);
    assert_eq!(record["text"], "It passes.");
    assert_eq!(
        before_end(&f).to_string(),
        r#"{"type":"structured_output","valid":false,"corrections":2,"errors":["root: the reply did not call pith_final_answer"]}"#
    );
}

#[test]
fn schemas_refused_at_start_with_exit_2() {
    for (schema, says) in [
        (
            json!({"type":"object","properties":{"a":{"type":"string","if":{"minLength":1}}}}),
            "keyword \"if\" is not supported by pith's validator",
        ),
        (
            json!({"type":"array"}),
            "the output schema must describe an object",
        ),
        (
            json!({"type":"object","properties":{"a":{"$ref":"#/$defs/b"}}}),
            "\"#/$defs/b\" does not resolve in the schema",
        ),
    ] {
        let w = World::new();
        let file = write(&w, "schema.json", &schema.to_string());
        let mut args = FAUX.to_vec();
        args.extend_from_slice(&["-p", "--no-session", "--output-schema", &file, "hi"]);
        let o = w.output_within_10s(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
        assert!(stderr(&o).contains("--output-schema: "), "{}", stderr(&o));
        assert_eq!(stdout(&o), "");
    }
    let w = World::new();
    let mut args = FAUX.to_vec();
    args.extend_from_slice(&["-p", "--output-schema", "/nonexistent/schema.json", "hi"]);
    let o = w.output_within_10s(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn rpc_output_schema_in_every_version() {
    for compat in ["0.73", "0.87", "1.6"] {
        let w = World::new();
        let turns = [
            answer(json!({"verdict":"pass"})),
            // The next prompt has no schema: the tool is not there.
            answer(json!({"verdict":"pass"})),
            json!({"text":"ok"}),
        ];
        let text: String = turns.iter().map(|l| format!("{l}\n")).collect();
        let mut p = w.spawn_faux(&text, &["--compat", compat, "--no-session"]);
        let r = p.call(
            json!({"type":"prompt","message":"go","outputSchema":schema()}),
            "1",
        );
        assert_eq!(r["success"], true, "{compat}: {r}");
        let f = p.recv_until(|f| f["type"] == "agent_settled");
        assert_eq!(
            before_end(&f).to_string(),
            r#"{"type":"structured_output","valid":true,"value":{"verdict":"pass"}}"#,
            "{compat}"
        );
        let r = p.call(json!({"type":"prompt","message":"again"}), "2");
        assert_eq!(r["success"], true);
        let f = p.recv_until(|f| f["type"] == "agent_settled");
        assert!(of_type(&f, "structured_output").is_empty(), "{compat}");
        assert_eq!(
            tool_texts(&f)[0],
            ("Tool pith_final_answer not found".to_string(), true),
            "{compat}"
        );
        // A bad schema is refused with the field named; a steer cannot carry one.
        let r = p.call(
            json!({"type":"prompt","message":"x","outputSchema":{"type":"object","properties":{"a":{"contains":{}}}}}),
            "3",
        );
        assert_eq!(r["success"], false);
        assert!(
            r["error"]
                .as_str()
                .unwrap_or("")
                .starts_with("prompt: field \"outputSchema\": #/properties/a/contains: keyword \"contains\" is not supported"),
            "{r}"
        );
        let r = p.call(
            json!({"type":"steer","message":"x","outputSchema":schema()}),
            "4",
        );
        assert_eq!(r["success"], false);
        assert_eq!(
            r["error"],
            "outputSchema applies to a prompt that starts a run, not to a message queued for the running one"
        );
        p.assert_quiet(Duration::from_millis(100));
        let (status, _) = p.finish(Duration::from_secs(5));
        assert_eq!(status.code(), Some(0));
    }
}

/// What a provider's request declares: the final-answer tool with the schema as its parameters,
/// beside the built-in tools; without a schema, no such tool.
#[test]
fn the_request_declares_the_final_answer_tool() {
    let sse = |blocks| {
        Sse {
            id: "msg_fake".into(),
            input_tokens: 10,
            output_tokens: 5,
            ping: false,
        }
        .reply(blocks)
    };
    let (w, llm) = support::fake_world(vec![
        sse(&[tool_call(
            "t1",
            "pith_final_answer",
            &[r#"{"verdict":"#, r#""pass"}"#],
        )]),
        sse(&[text(&["plain"])]),
    ]);
    let mut p = w.spawn(&support::fake_rpc(&["--no-session"]));
    let r = p.call(
        json!({"type":"prompt","message":"go","outputSchema":schema()}),
        "1",
    );
    assert_eq!(r["success"], true);
    let f = p.recv_until(|f| f["type"] == "agent_settled");
    assert_eq!(before_end(&f)["value"], json!({"verdict":"pass"}));
    p.call(json!({"type":"prompt","message":"again"}), "2");
    p.recv_until(|f| f["type"] == "agent_settled");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let tools = |i: usize| -> Vec<Value> {
        let body: Value = serde_json::from_str(&reqs[i].body).expect("request JSON");
        body["tools"].as_array().cloned().unwrap_or_default()
    };
    let first = tools(0);
    let last = first.last().expect("tools");
    assert_eq!(last["name"], "pith_final_answer");
    // Anthropic's tool shape (pi's): the root's type, properties, required and `$defs`; pith
    // validates the whole schema (its root `additionalProperties` too).
    let s = schema();
    assert_eq!(
        last["input_schema"],
        json!({"type":"object","properties":s["properties"],"required":s["required"],
            "$defs":s["$defs"]})
    );
    assert!(first.iter().any(|t| t["name"] == "bash"));
    assert!(
        tools(1).iter().all(|t| t["name"] != "pith_final_answer"),
        "a prompt without a schema has no final-answer tool"
    );
    let (status, _) = p.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

/// `--output-schema` in rpc mode is every prompt's schema; a prompt's own `outputSchema` wins.
#[test]
fn rpc_flag_schema_for_every_prompt_and_the_prompts_own_wins() {
    let w = World::new();
    let file = write(&w, "schema.json", &schema().to_string());
    let turns = [
        answer(json!({"verdict":"pass"})),
        answer(json!({"verdict":"pass"})),
        answer(json!({"n":2})),
    ];
    let text: String = turns.iter().map(|l| format!("{l}\n")).collect();
    let mut p = w.spawn_faux(&text, &["--no-session", "--output-schema", &file]);
    for (id, cmd) in [
        ("1", json!({"type":"prompt","message":"one"})),
        // Its own schema: `{"verdict":"pass"}` is wrong there (no `n`, an unknown field).
        (
            "2",
            json!({"type":"prompt","message":"two","outputSchema":{"type":"object",
                "required":["n"],"additionalProperties":false,"properties":{"n":{"type":"integer"}}}}),
        ),
    ] {
        assert_eq!(p.call(cmd, id)["success"], true);
        let f = p.recv_until(|f| f["type"] == "agent_settled");
        let last = before_end(&f);
        assert_eq!(last["type"], "structured_output", "{id}: {last}");
        assert_eq!(last["valid"], true);
        if id == "1" {
            assert_eq!(last["value"], json!({"verdict":"pass"}));
        } else {
            assert_eq!(last["value"], json!({"n":2}));
            assert!(
                tool_texts(&f)[0]
                    .0
                    .contains("  - n: missing\n  - verdict: unknown field\n"),
                "{:?}",
                tool_texts(&f)
            );
        }
    }
    let (status, _) = p.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}
