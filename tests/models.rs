//! Model and thinking-level commands over pipes, with the oracle's custom providers
//! (`fake`: fake-model (reasoning) and fake-model-2; `fake-openai`: fake-oai-model).

mod support;

use serde_json::{Value, json};
use support::frames::model_ids;
use support::{Pith, World};

fn pith(w: &World) -> Pith {
    w.fake_models(9); // no request is made in these tests
    w.spawn(&[
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "fake",
        "--model",
        "fake-model",
    ])
}

#[test]
fn available_models_are_the_ones_with_a_key_in_registry_order() {
    let w = World::new();
    let mut p = pith(&w);
    let r = p.call(json!({"type":"get_available_models"}), "m");
    assert_eq!(
        model_ids(&r["data"]["models"]),
        [
            "fake/fake-model",
            "fake/fake-model-2",
            "fake-openai/fake-oai-model"
        ]
    );
    assert_eq!(
        r["data"]["models"][0],
        json!({"id":"fake-model","name":"Fake Model","api":"anthropic-messages","provider":"fake",
               "baseUrl":"http://127.0.0.1:9","reasoning":true,"input":["text","image"],
               "cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75},
               "contextWindow":200000,"maxTokens":16384})
    );
    let s = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(s["data"]["model"]["id"], "fake-model");
    assert_eq!(s["data"]["thinkingLevel"], "medium");
}

#[test]
fn thinking_levels_are_clamped_and_cycled_like_the_reference() {
    let w = World::new();
    let mut p = pith(&w);
    let ev = |p: &mut Pith, cmd: Value, id: &str| -> Vec<Value> {
        let mut c = cmd;
        c["id"] = json!(id);
        p.send(c);
        p.recv_until(|v| v["id"] == id)
    };
    // medium -> high -> off -> minimal, each announced before the response.
    for (id, level) in [("c1", "high"), ("c2", "off"), ("c3", "minimal")] {
        let f = ev(&mut p, json!({"type":"cycle_thinking_level"}), id);
        assert_eq!(f[0], json!({"type":"thinking_level_changed","level":level}));
        assert_eq!(
            f[1],
            json!({"id":id,"type":"response","command":"cycle_thinking_level","success":true,"data":{"level":level}})
        );
    }
    // xhigh is not available on this model: clamped to high.
    let f = ev(
        &mut p,
        json!({"type":"set_thinking_level","level":"xhigh"}),
        "t1",
    );
    assert_eq!(
        f[0],
        json!({"type":"thinking_level_changed","level":"high"})
    );
    // Setting the same level again changes nothing and says nothing.
    let f = ev(
        &mut p,
        json!({"type":"set_thinking_level","level":"high"}),
        "t2",
    );
    assert_eq!(
        f,
        [json!({"id":"t2","type":"response","command":"set_thinking_level","success":true})]
    );
}

#[test]
fn set_model_and_cycle_model() {
    let w = World::new();
    let mut p = pith(&w);
    let r = p.call(
        json!({"type":"set_model","provider":"nope","modelId":"nothing"}),
        "bad",
    );
    assert_eq!(
        r,
        json!({"id":"bad","type":"response","command":"set_model","success":false,"error":"Model not found: nope/nothing"})
    );
    // To a non-reasoning model: thinking drops to off (announced), the model comes back as data.
    p.send(json!({"id":"sm","type":"set_model","provider":"fake","modelId":"fake-model-2"}));
    assert_eq!(
        p.recv(),
        json!({"type":"thinking_level_changed","level":"off"})
    );
    let r = p.recv();
    assert_eq!(r["data"]["id"], "fake-model-2");
    assert_eq!(
        p.call(json!({"type":"cycle_thinking_level"}), "ct"),
        json!({"id":"ct","type":"response","command":"cycle_thinking_level","success":true,"data":null})
    );
    let r = p.call(json!({"type":"cycle_model"}), "cm");
    assert_eq!(r["data"]["model"]["id"], "fake-oai-model");
    assert_eq!(r["data"]["thinkingLevel"], "off");
    assert_eq!(r["data"]["isScoped"], false);
    // Back to the reasoning model: the settings default (medium) applies again.
    p.send(json!({"id":"cm2","type":"cycle_model"}));
    assert_eq!(
        p.recv(),
        json!({"type":"thinking_level_changed","level":"medium"})
    );
    assert_eq!(p.recv()["data"]["model"]["id"], "fake-model");
    assert!(
        !w.agent_dir().join("settings.json").exists(),
        "RPC setters must not write settings.json"
    );
}

#[test]
fn scoped_models_limit_cycling() {
    let w = World::new();
    w.fake_models(9);
    let mut p = w.spawn(&[
        "--mode",
        "rpc",
        "--no-session",
        "--models",
        "fake-model-2,fake-oai-model",
    ]);
    let s = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(s["data"]["model"]["id"], "fake-model-2");
    let r = p.call(json!({"type":"cycle_model"}), "c");
    assert_eq!(r["data"]["model"]["id"], "fake-oai-model");
    assert_eq!(r["data"]["isScoped"], true);
}

#[test]
fn a_prompt_without_a_key_is_a_clear_error_and_start_up_does_not_need_one() {
    let w = World::new();
    // A built-in model; the test environment has no ANTHROPIC_API_KEY.
    let mut p = w.spawn(&[
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
    ]);
    assert_eq!(
        p.call(json!({"type":"get_state"}), "s")["data"]["model"]["provider"],
        "anthropic"
    );
    let r = p.call(json!({"type":"prompt","message":"hi"}), "p");
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("No API key found for anthropic."),
        "{r}"
    );
}

#[test]
fn unknown_model_on_the_command_line_exits_1() {
    let w = World::new();
    w.fake_models(9);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pith"))
        .args(["--mode", "rpc", "--model", "no-such-model-anywhere"])
        .current_dir(w.cwd())
        .env("PI_CODING_AGENT_DIR", w.agent_dir())
        .env("HOME", w.dir.path().join("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-model-anywhere"));
}

#[test]
fn models_json_headers_and_key_commands_reach_the_request() {
    use support::anthropic::text_sse;
    use support::fake_llm::{FakeLlm, Reply};
    let llm = FakeLlm::start(vec![Reply::sse(text_sse(1, &["ok"]))]);
    let w = World::new();
    w.write_agent_file(
        "models.json",
        &format!(
            r#"{{"providers":{{"hdr":{{"baseUrl":"http://127.0.0.1:{}","api":"anthropic-messages",
                "apiKey":"!printf sk-from-command","headers":{{"x-team":"!printf blue","x-lit":"plain"}},
                "models":[{{"id":"m1","contextWindow":100000,"maxTokens":1000}}]}}}}}}"#,
            llm.port
        ),
    );
    let mut p = w.spawn(&[
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "hdr",
        "--model",
        "m1",
    ]);
    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    p.recv_until(|v| v["type"] == "agent_settled");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("x-api-key"), Some("sk-from-command"));
    assert_eq!(reqs[0].header("x-team"), Some("blue"));
    assert_eq!(reqs[0].header("x-lit"), Some("plain"));
    // The key never shows in events or state.
    assert!(
        !p.seen
            .iter()
            .any(|v| v.to_string().contains("sk-from-command"))
    );
}

/// pi 0.87.1 and 1.6.0 load a models.json provider that defines models without `apiKey`: its
/// model can be chosen, has no key (not available, a prompt fails naming the provider); pi
/// 0.73.1 refuses the file at start-up.
#[test]
fn custom_models_without_an_api_key_load_from_087_on() {
    let models = r#"{"providers": {"alpha": {"baseUrl": "http://127.0.0.1:9", "api": "anthropic-messages",
        "models": [{"id": "keyless-model", "name": "Keyless", "reasoning": false, "input": ["text"],
        "contextWindow": 100000, "maxTokens": 8192}]}}}"#;
    for compat in ["0.87", "1.6"] {
        let w = World::new();
        w.write_agent_file("models.json", models);
        let mut p = w.spawn(&compat_args(compat, &["--model", "keyless-model"]));
        let model = &p.call(json!({"type":"get_state"}), "s")["data"]["model"];
        assert_eq!(
            (model["provider"].clone(), model["id"].clone()),
            (json!("alpha"), json!("keyless-model")),
            "{compat}"
        );
        assert_eq!(
            p.call(json!({"type":"get_available_models"}), "m")["data"],
            json!({"models": []}),
            "{compat}"
        );
        let r = p.call(json!({"type":"prompt","message":"hi"}), "p");
        assert_eq!(r["success"], false, "{compat}");
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .starts_with("No API key found for alpha.\n\n"),
            "{compat}: {r}"
        );
    }
    let w = World::new();
    w.write_agent_file("models.json", models);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pith"))
        .args(["--mode", "rpc", "--no-session", "--model", "keyless-model"])
        .current_dir(w.cwd())
        .env("PI_CODING_AGENT_DIR", w.agent_dir())
        .env("HOME", w.dir.path().join("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Provider alpha: \"apiKey\" is required when defining custom models."),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--mode rpc --compat <compat> --no-session` and `extra`.
fn compat_args<'a>(compat: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--mode", "rpc", "--compat", compat, "--no-session"];
    args.extend_from_slice(extra);
    args
}

/// models.json with `dup-model` on two providers; `alpha` keyed when `alpha_key`, `beta` always.
fn two_providers_json(alpha_key: bool) -> String {
    let model = r#"[{"id": "dup-model", "name": "Dup", "reasoning": false, "input": ["text"],
        "contextWindow": 100000, "maxTokens": 8192}]"#;
    let alpha_key = if alpha_key {
        r#", "apiKey": "sk-a""#
    } else {
        ""
    };
    format!(
        r#"{{"providers": {{
        "alpha": {{"baseUrl": "http://127.0.0.1:9", "api": "anthropic-messages", "models": {model}{alpha_key}}},
        "beta": {{"baseUrl": "http://127.0.0.1:9", "api": "anthropic-messages", "models": {model}, "apiKey": "sk-b"}}}}}}"#
    )
}

/// `--model <id>` offered by two providers: pi 0.73.1 takes the first; pi 0.87.1 and 1.6.0 the
/// one with a credential, and stop (exit 1) when both have one.
#[test]
fn an_id_on_two_providers_takes_the_keyed_one_or_is_ambiguous_from_087_on() {
    let provider_of = |compat: &str, alpha_key: bool| {
        let w = World::new();
        w.write_agent_file("models.json", &two_providers_json(alpha_key));
        let mut p = w.spawn(&compat_args(compat, &["--model", "dup-model"]));
        let r = p.call(json!({"type":"get_state"}), "s");
        r["data"]["model"]["provider"].clone()
    };
    assert_eq!(provider_of("0.73", true), json!("alpha"));
    for compat in ["0.87", "1.6"] {
        assert_eq!(provider_of(compat, false), json!("beta"), "{compat}");
        let w = World::new();
        w.write_agent_file("models.json", &two_providers_json(true));
        let out = w.output_within_10s(&compat_args(compat, &["--model", "dup-model"]));
        assert_eq!(out.status.code(), Some(1), "{compat}");
        assert_eq!(out.stdout, b"", "{compat}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "Error: Model \"dup-model\" is ambiguous across providers: alpha/dup-model, beta/dup-model. \
             More than one matching provider is authenticated. Use --provider or provider/model.\n",
            "{compat}"
        );
    }
}

/// pi's placeholder model (pi-agent-core's `DEFAULT_MODEL`) when no model is usable.
fn placeholder() -> Value {
    json!({"id":"unknown","name":"unknown","api":"unknown","provider":"unknown","baseUrl":"",
        "reasoning":false,"input":[],"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0},
        "contextWindow":0,"maxTokens":0})
}

/// No key anywhere and no `--model`: `get_state` shows pi's placeholder model, a prompt fails
/// for "the selected model", a manual `compact` is a failed compaction (0.73.1: no key;
/// 0.87.1/1.6.0: nothing to compact first). Under 0.87/1.6 the settings' default model needs a
/// credential too.
#[test]
fn without_a_usable_model_get_state_shows_pis_placeholder() {
    for (compat, default_in_settings) in [
        ("0.73", false),
        ("0.87", false),
        ("0.87", true),
        ("1.6", true),
    ] {
        let w = World::new();
        w.write_agent_file("models.json", r#"{"providers": {}}"#);
        if default_in_settings {
            w.write_agent_file(
                "settings.json",
                r#"{"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5"}"#,
            );
        }
        let mut p = w.spawn(&compat_args(compat, &[]));
        let s = p.call(json!({"type":"get_state"}), "s");
        assert_eq!(s["data"]["model"], placeholder(), "{compat}");
        let r = p.call(json!({"type":"prompt","message":"hi"}), "p");
        let err = r["error"].as_str().unwrap_or_default();
        assert!(
            err.starts_with("No API key found for the selected model.\n\n"),
            "{compat}: {r}"
        );
        p.send(json!({"type":"compact","id":"c"}));
        let frames = p.recv_until(|v| v["id"] == "c");
        let why = if compat == "0.73" {
            err.to_string()
        } else {
            "Nothing to compact (session too small)".to_string()
        };
        assert_eq!(
            frames,
            [
                json!({"type":"compaction_start","reason":"manual"}),
                json!({"type":"compaction_end","reason":"manual","aborted":false,"willRetry":false,
                    "errorMessage": format!("Compaction failed: {why}")}),
                json!({"id":"c","type":"response","command":"compact","success":false,"error":why}),
            ],
            "{compat}"
        );
    }
    // 0.73.1 takes the settings' default model without a key, and its compaction stops at the key.
    let w = World::new();
    w.write_agent_file("models.json", r#"{"providers": {}}"#);
    w.write_agent_file(
        "settings.json",
        r#"{"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5"}"#,
    );
    let mut p = w.spawn(&["--mode", "rpc", "--no-session"]);
    let s = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(s["data"]["model"]["id"], "claude-sonnet-4-5");
    p.send(json!({"type":"compact","id":"c"}));
    let frames = p.recv_until(|v| v["id"] == "c");
    let why = frames.last().unwrap()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.starts_with("No API key found for anthropic.\n\n"),
        "{frames:?}"
    );
    assert_eq!(frames.len(), 3, "{frames:?}");
    assert_eq!(
        frames[1]["errorMessage"],
        format!("Compaction failed: {why}")
    );
}

/// `--models` with an id two providers offer: pi 1.6.0 scopes both (a warning on stderr), pi
/// 0.87.1 one.
#[test]
fn a_scope_pattern_on_two_providers_scopes_both_under_16() {
    let cycle = |compat: &str| {
        let w = World::new();
        w.write_agent_file("models.json", &two_providers_json(true));
        let mut p = w.spawn(&compat_args(compat, &["--models", "dup-model"]));
        let mut seen = Vec::new();
        let s = p.call(json!({"type":"get_state"}), "s");
        seen.push(s["data"]["model"]["provider"].clone());
        for i in 0..2 {
            let r = p.call(json!({"type":"cycle_model"}), &format!("c{i}"));
            seen.push(r["data"]["model"]["provider"].clone());
        }
        let stderr = p.stderr_lines();
        (seen, stderr)
    };
    let (seen, stderr) = cycle("1.6");
    assert_eq!(seen, [json!("alpha"), json!("beta"), json!("alpha")]);
    assert!(
        stderr.iter().any(|l| l
            == "Warning: Pattern \"dup-model\" matches several providers: alpha, beta. Use provider/id to choose one."),
        "{stderr:?}"
    );
    let (seen, stderr) = cycle("0.87");
    assert_eq!(
        seen,
        [json!("alpha"), Value::Null, Value::Null],
        "{stderr:?}"
    );
}
