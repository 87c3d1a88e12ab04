use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::resolve::{glob_match, locale_compare};
use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/config")
        .join(name)
}

fn env_of(pairs: &[(&str, &str)]) -> Env {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Arc::new(move |name: &str| map.get(name).cloned())
}

fn no_env() -> Env {
    env_of(&[])
}

/// Agent dir holding the oracle's models.json (port 40747, as in the a_idle_queries transcript).
fn oracle_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("models.json"), dir.path().join("models.json")).unwrap();
    dir
}

fn load_dir(dir: &Path, env: Env) -> (Registry, Auth) {
    let (reg, warnings) = Registry::load(dir, &*env);
    assert_eq!(warnings, Vec::<String>::new());
    let (auth, warnings) = Auth::load(dir, reg.provider_api_keys(), env);
    assert_eq!(warnings, Vec::<String>::new());
    (reg, auth)
}

fn write_models(json: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("models.json"), json).unwrap();
    dir
}

fn ids(models: &[&Model]) -> Vec<String> {
    models
        .iter()
        .map(|m| format!("{}/{}", m.provider, m.id))
        .collect()
}

#[test]
fn oracle_models_json_gives_the_transcripts_available_models() {
    let dir = oracle_dir();
    let (reg, auth) = load_dir(dir.path(), no_env());
    let available = reg.available(&auth);
    let got: Vec<Value> = available
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    let text = std::fs::read_to_string(fixture("available_models.a_idle_queries.json")).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(Value::Array(got), expected["models"]);
    // Key order too: compare the serialised text of the first model.
    let first = serde_json::to_string(available[0]).unwrap();
    assert_eq!(
        first,
        r#"{"id":"fake-model","name":"Fake Model","api":"anthropic-messages","provider":"fake","baseUrl":"http://127.0.0.1:40747","reasoning":true,"input":["text","image"],"cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75},"contextWindow":200000,"maxTokens":16384}"#
    );
    // Custom providers come after all built-ins.
    assert_eq!(reg.all().len(), 969 + 3);
    assert_eq!(reg.all()[969].id, "fake-model");
}

#[test]
fn builtin_table_order_and_serialisation() {
    let reg = Registry::builtin();
    let providers: Vec<&str> = reg.all().iter().fold(Vec::new(), |mut acc, m| {
        if acc.last() != Some(&m.provider.as_str()) {
            acc.push(m.provider.as_str());
        }
        acc
    });
    assert_eq!(
        providers,
        [
            "amazon-bedrock",
            "anthropic",
            "azure-openai-responses",
            "cerebras",
            "cloudflare-ai-gateway",
            "cloudflare-workers-ai",
            "deepseek",
            "fireworks",
            "github-copilot",
            "google",
            "google-vertex",
            "groq",
            "huggingface",
            "kimi-coding",
            "minimax",
            "minimax-cn",
            "mistral",
            "moonshotai",
            "moonshotai-cn",
            "openai",
            "openai-codex",
            "opencode",
            "opencode-go",
            "openrouter",
            "vercel-ai-gateway",
            "xai",
            "xiaomi",
            "xiaomi-token-plan-ams",
            "xiaomi-token-plan-cn",
            "xiaomi-token-plan-sgp",
            "zai",
        ]
    );
    assert_eq!(reg.all()[0].id, "amazon.nova-2-lite-v1:0");
    // Per-model API, base URL and headers (GitHub Copilot, Bedrock's EU models).
    let copilot = reg.find("github-copilot", "gpt-5.4").unwrap();
    assert_eq!(copilot.api, "openai-responses");
    assert_eq!(
        serde_json::to_string(&copilot.headers).unwrap(),
        r#"{"User-Agent":"GitHubCopilotChat/0.35.0","Editor-Version":"vscode/1.107.0","Editor-Plugin-Version":"copilot-chat/0.35.0","Copilot-Integration-Id":"vscode-chat"}"#
    );
    let eu = reg
        .find("amazon-bedrock", "eu.anthropic.claude-sonnet-4-6")
        .unwrap();
    assert_eq!(
        eu.base_url,
        "https://bedrock-runtime.eu-central-1.amazonaws.com"
    );
    let sonnet = reg.find("anthropic", "claude-sonnet-4-5").unwrap();
    assert_eq!(
        serde_json::to_string(sonnet).unwrap(),
        r#"{"id":"claude-sonnet-4-5","name":"Claude Sonnet 4.5 (latest)","api":"anthropic-messages","provider":"anthropic","baseUrl":"https://api.anthropic.com","reasoning":true,"input":["text","image"],"cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75},"contextWindow":200000,"maxTokens":64000}"#
    );
    let ds = reg.find("openrouter", "deepseek/deepseek-v4-pro").unwrap();
    assert_eq!(
        ds.compat.as_ref().map(|c| Value::Object(c.clone())),
        Some(
            json!({"requiresReasoningContentOnAssistantMessages": true, "thinkingFormat": "deepseek"})
        )
    );
    assert_eq!(ds.cost.cache_read, 0.003625);
}

#[test]
fn builtin_registry_has_every_model() {
    // How long building it takes is measured by `make bench` (cold start), never asserted here.
    assert_eq!(Registry::builtin().all().len(), 969);
}

#[test]
fn thinking_levels_follow_the_thinking_level_map() {
    use crate::message::ThinkingLevel::*;
    let reg = Registry::builtin();
    let levels = |p: &str, id: &str| reg.thinking_levels(reg.find(p, id).unwrap());
    assert_eq!(levels("openai", "gpt-5"), [Minimal, Low, Medium, High]);
    assert_eq!(
        levels("openai", "gpt-5.4"),
        [Minimal, Low, Medium, High, Xhigh]
    );
    assert_eq!(levels("google", "gemini-3-pro-preview"), [Low, High]);
    assert_eq!(
        levels("anthropic", "claude-opus-4-6"),
        [Off, Minimal, Low, Medium, High, Xhigh]
    );
    assert_eq!(
        levels("anthropic", "claude-sonnet-4-5"),
        [Off, Minimal, Low, Medium, High]
    );
    assert_eq!(levels("anthropic", "claude-3-5-haiku-latest"), [Off]);
    let map = reg
        .thinking_level_map("anthropic", "claude-opus-4-6")
        .unwrap();
    assert_eq!(map.to_json(), json!({"xhigh": "max"}));
}

#[test]
fn provider_and_model_overrides_apply_to_builtins() {
    let dir = write_models(
        r#"{"providers": {
            "anthropic": {
                "baseUrl": "http://127.0.0.1:9/anthropic",
                "compat": {"supportsStore": false},
                "modelOverrides": {
                    "claude-sonnet-4-5": {"name": "Sonnet Override", "cost": {"input": 1}, "maxTokens": 1000,
                                          "compat": {"openRouterRouting": {"only": ["x"]}},
                                          "thinkingLevelMap": {"xhigh": "max"}}
                }
            },
            "openai": {"models": [{"id": "gpt-5.4", "name": "Mine"}, {"id": "gpt-local"}]}
        }}"#,
    );
    let (reg, _) = load_dir(dir.path(), no_env());
    let sonnet = reg.find("anthropic", "claude-sonnet-4-5").unwrap();
    assert_eq!(sonnet.name, "Sonnet Override");
    assert_eq!(sonnet.base_url, "http://127.0.0.1:9/anthropic");
    assert_eq!(
        (sonnet.cost.input, sonnet.cost.output, sonnet.max_tokens),
        (1.0, 15.0, 1000)
    );
    assert_eq!(
        sonnet.compat.as_ref().map(|c| Value::Object(c.clone())),
        Some(json!({"supportsStore": false, "openRouterRouting": {"only": ["x"]}}))
    );
    assert_eq!(reg.thinking_levels(sonnet).len(), 6);
    let haiku = reg.find("anthropic", "claude-haiku-4-5").unwrap();
    assert_eq!(haiku.base_url, "http://127.0.0.1:9/anthropic");
    assert_eq!(haiku.name, "Claude Haiku 4.5 (latest)");

    // Custom models of a built-in provider: upsert in place, else appended; defaults from the
    // provider's first built-in model.
    let openai: Vec<&Model> = reg
        .all()
        .iter()
        .filter(|m| m.provider == "openai")
        .collect();
    let pos = openai.iter().position(|m| m.id == "gpt-5.4").unwrap();
    assert_eq!(openai[pos].name, "Mine");
    assert_eq!(openai[pos].api, "openai-responses");
    assert_eq!(openai[pos].context_window, 128_000);
    assert!(!openai[pos].reasoning);
    assert_eq!(reg.all().last().unwrap().id, "gpt-local");
    assert_eq!(
        reg.all().last().unwrap().base_url,
        "https://api.openai.com/v1"
    );
    assert_eq!(reg.all().len(), 970);
}

#[test]
fn custom_model_defaults_and_compat_merge() {
    let reg = Registry::from_models_json(
        r#"{"providers": {"local": {
            "baseUrl": "http://127.0.0.1:1/v1", "api": "openai-completions", "apiKey": "none",
            "compat": {"supportsDeveloperRole": false, "openRouterRouting": {"order": ["a"]}},
            "models": [{"id": "m1", "compat": {"maxTokensField": "max_tokens", "openRouterRouting": {"only": ["b"]}}}]
        }}}"#,
    )
    .unwrap();
    let m = reg.find("local", "m1").unwrap();
    assert_eq!(
        serde_json::to_value(m).unwrap(),
        json!({"id": "m1", "name": "m1", "api": "openai-completions", "provider": "local",
               "baseUrl": "http://127.0.0.1:1/v1", "reasoning": false, "input": ["text"],
               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
               "contextWindow": 128000, "maxTokens": 16384,
               "compat": {"supportsDeveloperRole": false, "openRouterRouting": {"order": ["a"], "only": ["b"]},
                          "maxTokensField": "max_tokens"}})
    );
}

#[test]
fn comments_and_trailing_commas_are_accepted() {
    let reg = Registry::from_models_json(
        "{\n // a comment\n \"providers\": {\"p\": {\"baseUrl\": \"http://h//x\", \"api\": \"anthropic-messages\", \
         \"apiKey\": \"k\", \"models\": [{\"id\": \"a\",},],},},\n}",
    )
    .unwrap();
    assert_eq!(reg.find("p", "a").unwrap().base_url, "http://h//x");
}

#[test]
fn malformed_models_json_is_a_warning_and_keeps_builtins() {
    let dir = write_models("{ not json");
    let (reg, warnings) = Registry::load(dir.path(), &|_: &str| None);
    assert_eq!(reg.all().len(), 969);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("Failed to parse models.json: "),
        "{}",
        warnings[0]
    );
    let file_line = format!("\n\nFile: {}", dir.path().join("models.json").display());
    assert!(warnings[0].ends_with(&file_line), "{}", warnings[0]);
    assert_eq!(reg.load_error(), Some(warnings[0].as_str()));

    let err = |text: &str| Registry::from_models_json(text).unwrap_err();
    assert_eq!(
        err(
            r#"{"providers": {"x": {"api": "openai-completions", "apiKey": "k", "models": [{"id": "m"}]}}}"#
        ),
        "Failed to load models.json: Provider x: \"baseUrl\" is required when defining custom models."
    );
    assert_eq!(
        err(r#"{"providers": {"x": {"baseUrl": "u", "models": [{"id": "m", "api": "a"}]}}}"#),
        "Failed to load models.json: Provider x: \"apiKey\" is required when defining custom models."
    );
    // pi 0.87.1 and 1.6.0 accept custom models without a key (they have none until one is set).
    for catalog in [
        crate::protocol::Catalog::V087,
        crate::protocol::Catalog::V16,
    ] {
        let reg = Registry::from_models_json_for(
            r#"{"providers": {"x": {"baseUrl": "u", "models": [{"id": "m", "api": "a"}]}}}"#,
            catalog,
        )
        .unwrap();
        assert_eq!(reg.models_of("x").len(), 1);
        assert_eq!(reg.models_of("x")[0].id, "m");
    }
    assert_eq!(
        err(r#"{"providers": {"x": {"baseUrl": "u", "apiKey": "k", "models": [{"id": "m"}]}}}"#),
        "Failed to load models.json: Provider x, model m: no \"api\" specified. Set at provider or model level."
    );
    assert_eq!(
        err(r#"{"providers": {"x": {"apiKey": "k"}}}"#),
        "Failed to load models.json: Provider x: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
    );
    assert_eq!(
        err(
            r#"{"providers": {"x": {"baseUrl": "u", "apiKey": "k", "api": "a", "models": [{"id": "m", "maxTokens": 0}]}}}"#
        ),
        "Failed to load models.json: Provider x, model m: invalid maxTokens"
    );
    assert_eq!(
        err(
            r#"{"providers": {"x": {"baseUrl": "u", "models": [{"id": "m", "reasoning": "yes"}]}}}"#
        ),
        "Invalid models.json schema:\n  - providers.x.models.0.reasoning: Expected boolean"
    );
    assert_eq!(
        err(r#"{"nope": 1}"#),
        "Invalid models.json schema:\n  - providers: Expected required property"
    );
    assert_eq!(
        err("[1]"),
        "Invalid models.json schema:\n  - root: Expected object"
    );
}

#[test]
fn config_value_resolution() {
    let env = env_of(&[("MY_KEY", "from-env"), ("EMPTY", "")]);
    assert_eq!(
        resolve_config_value_uncached("MY_KEY", &env).as_deref(),
        Some("from-env")
    );
    assert_eq!(
        resolve_config_value_uncached("EMPTY", &env).as_deref(),
        Some("EMPTY")
    );
    assert_eq!(
        resolve_config_value_uncached("sk-literal", &env).as_deref(),
        Some("sk-literal")
    );
    assert_eq!(
        resolve_config_value_uncached("!printf '  cmd-key \\n'", &env).as_deref(),
        Some("cmd-key")
    );
    assert_eq!(resolve_config_value_uncached("!exit 3", &env), None);
    assert_eq!(resolve_config_value_uncached("!true", &env), None);

    // Cached: the second call does not run the command again.
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n");
    let cmd = format!("!echo x >> {0}; wc -l < {0}", counter.display());
    let auth = Auth::empty(env);
    assert_eq!(auth.resolve_cached(&cmd).as_deref(), Some("1"));
    assert_eq!(auth.resolve_cached(&cmd).as_deref(), Some("1"));
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "x\n");
}

#[test]
fn key_sources_in_reference_order() {
    let dir = oracle_dir();
    std::fs::write(
        dir.path().join("auth.json"),
        r#"{"openai": {"type": "api_key", "key": "OPENAI_FROM_FILE"}, "fake": {"type": "api_key", "key": "!echo file-cmd"}}"#,
    )
    .unwrap();
    let env = env_of(&[
        ("OPENAI_FROM_FILE", "resolved-file-key"),
        ("OPENAI_API_KEY", "env-key"),
        ("GROQ_API_KEY", "groq-env"),
    ]);
    let (reg, mut auth) = load_dir(dir.path(), env);
    assert_eq!(auth.api_key("openai").as_deref(), Some("resolved-file-key"));
    assert_eq!(auth.api_key("groq").as_deref(), Some("groq-env"));
    assert_eq!(auth.api_key("fake").as_deref(), Some("file-cmd"));
    assert_eq!(
        auth.api_key("fake-openai").as_deref(),
        Some("sk-fake-openai-key")
    );
    assert_eq!(auth.api_key("anthropic"), None);
    assert!(!auth.has_auth("anthropic"));
    auth.set_runtime_key("openai", "runtime-key");
    assert_eq!(auth.api_key("openai").as_deref(), Some("runtime-key"));
    assert!(auth.has_auth("openai"));

    let available = reg.available(&auth);
    let providers: Vec<&str> = available.iter().map(|m| m.provider.as_str()).collect();
    assert_eq!(providers.iter().filter(|p| **p == "groq").count(), 18);
    assert_eq!(providers.iter().filter(|p| **p == "openai").count(), 42);
    assert_eq!(
        &ids(&available)[available.len() - 3..],
        [
            "fake/fake-model",
            "fake/fake-model-2",
            "fake-openai/fake-oai-model"
        ]
    );
}

#[test]
fn malformed_auth_json_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("auth.json"), "{oops").unwrap();
    let (auth, warnings) = Auth::load(dir.path(), HashMap::new(), no_env());
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].starts_with("Failed to parse auth.json: "));
    assert!(!auth.has_auth("openai"));
}

#[test]
fn debug_output_redacts_keys() {
    let mut auth = Auth::empty(no_env());
    auth.set_runtime_key("openai", "sk-very-secret");
    let dbg = format!("{auth:?}");
    assert!(dbg.contains("openai"), "{dbg}");
    assert!(!dbg.contains("sk-very-secret"), "{dbg}");

    let ra = RequestAuth {
        api_key: Some("sk-very-secret".into()),
        headers: Some(vec![("X-Key".into(), "hdr-secret".into())]),
    };
    let dbg = format!("{ra:?}");
    assert!(
        dbg.contains("X-Key") && !dbg.contains("sk-very-secret") && !dbg.contains("hdr-secret"),
        "{dbg}"
    );
}

#[test]
fn request_auth_resolves_headers_and_auth_header() {
    let reg = Registry::from_models_json(
        r#"{"providers": {"p": {
            "baseUrl": "http://127.0.0.1:1", "api": "openai-completions", "apiKey": "P_KEY", "authHeader": true,
            "headers": {"X-Team": "TEAM_VAR", "X-Lit": "literal"},
            "models": [{"id": "m", "headers": {"X-Model": "!echo from-cmd"}}]
        }, "q": {"baseUrl": "http://x", "api": "a", "apiKey": "!exit 1", "models": [{"id": "m"}]}}}"#,
    )
    .unwrap();
    let env = env_of(&[("P_KEY", "p-secret"), ("TEAM_VAR", "team-7")]);
    let auth = Auth::load(
        Path::new("/nonexistent-pith-test"),
        reg.provider_api_keys(),
        env,
    )
    .0;
    let got = reg
        .request_auth(reg.find("p", "m").unwrap(), &auth)
        .unwrap();
    assert_eq!(got.api_key.as_deref(), Some("p-secret"));
    let headers: Vec<(&str, &str)> = got
        .headers
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        headers,
        [
            ("X-Team", "team-7"),
            ("X-Lit", "literal"),
            ("X-Model", "from-cmd"),
            ("Authorization", "Bearer p-secret")
        ]
    );
    assert!(reg.find("p", "m").unwrap().headers.is_none());
    assert_eq!(
        reg.request_auth(reg.find("q", "m").unwrap(), &auth)
            .unwrap_err(),
        "Failed to resolve API key for provider \"q\" from shell command: exit 1"
    );
    // has_auth does not run the command.
    assert!(auth.has_auth("q"));
}

/// `--model` resolution with every provider usable, no `--api-key`, no `--thinking`.
fn cli(
    reg: &Registry,
    provider: Option<&str>,
    pattern: &str,
) -> Result<super::resolve::CliModel, String> {
    let usable = |_: &str| true;
    let cx = super::resolve::CliContext {
        usable: &usable,
        inline_key: false,
        thinking: None,
    };
    resolve_cli_model(reg, provider, pattern, &cx)
}

#[test]
fn resolve_cli_model_cases() {
    let dir = oracle_dir();
    let (reg, _) = load_dir(dir.path(), no_env());
    let ok = |provider: Option<&str>, pattern: &str| cli(&reg, provider, pattern).unwrap();
    let id_of =
        |r: &(Model, Option<ThinkingLevel>, Option<String>)| format!("{}/{}", r.0.provider, r.0.id);

    let r = ok(Some("fake"), "fake-model");
    assert_eq!(
        (id_of(&r), r.1, r.2),
        ("fake/fake-model".to_string(), None, None)
    );
    let r = ok(None, "fake/fake-model-2");
    assert_eq!(id_of(&r), "fake/fake-model-2");
    let r = ok(Some("FAKE"), "fake/fake-model-2");
    assert_eq!(id_of(&r), "fake/fake-model-2");
    let r = ok(Some("fake"), "fake-model:high");
    assert_eq!(
        (id_of(&r), r.1),
        ("fake/fake-model".to_string(), Some(ThinkingLevel::High))
    );
    let r = ok(None, "fake-oai-model");
    assert_eq!(id_of(&r), "fake-openai/fake-oai-model");

    // Fuzzy: aliases beat dated ids, highest alias wins.
    let r = ok(Some("anthropic"), "sonnet");
    assert_eq!(id_of(&r), "anthropic/claude-sonnet-4-6");
    let r = ok(Some("anthropic"), "haiku:low");
    assert_eq!(
        (id_of(&r), r.1),
        (
            "anthropic/claude-haiku-4-5".to_string(),
            Some(ThinkingLevel::Low)
        )
    );
    let r = ok(None, "openai/codex");
    assert_eq!(id_of(&r), "openai/gpt-5.3-codex-spark");

    // Unknown id within a known provider: the reference's custom-id fallback.
    let r = ok(Some("fake"), "fake-model:bogus");
    assert_eq!(
        (r.0.id.as_str(), r.0.name.as_str(), r.0.api.as_str()),
        ("fake-model:bogus", "fake-model:bogus", "anthropic-messages")
    );
    assert_eq!(
        r.2.as_deref(),
        Some("Model \"fake-model:bogus\" not found for provider \"fake\". Using custom model id.")
    );
    let r = ok(Some("anthropic"), "claude-next");
    assert_eq!(
        (r.0.id.as_str(), r.0.max_tokens),
        (
            "claude-next",
            reg.find("anthropic", "claude-opus-4-7").unwrap().max_tokens
        )
    );

    assert_eq!(
        cli(&reg, Some("nope"), "x").unwrap_err(),
        "Unknown provider \"nope\". Use --list-models to see available providers/models."
    );
    assert_eq!(
        cli(&reg, None, "zzz-no-such-model").unwrap_err(),
        "Model \"zzz-no-such-model\" not found. Use --list-models to see available models."
    );
}

#[test]
fn dated_ids_pick_the_latest_when_no_alias_matches() {
    let reg = Registry::from_models_json(
        r#"{"providers": {"d": {"baseUrl": "u", "api": "a", "apiKey": "k", "models": [
            {"id": "mod-20240101"}, {"id": "mod-20250101"}, {"id": "mod-20241231"}]}}}"#,
    )
    .unwrap();
    let r = cli(&reg, Some("d"), "mod").unwrap();
    assert_eq!(r.0.id, "mod-20250101");
}

#[test]
fn scoped_models_globs_fuzzy_and_levels() {
    let dir = oracle_dir();
    let (reg, auth) = load_dir(dir.path(), no_env());
    let pats = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (scoped, warnings) = parse_scoped_models(
        &reg,
        &auth,
        &pats(&["fake/*:low", "*oai*", "fake-model-2", "nothing*", "sonnet"]),
    );
    let got: Vec<(String, Option<ThinkingLevel>)> = scoped
        .iter()
        .map(|(m, l)| (format!("{}/{}", m.provider, m.id), *l))
        .collect();
    assert_eq!(
        got,
        [
            ("fake/fake-model".to_string(), Some(ThinkingLevel::Low)),
            ("fake/fake-model-2".to_string(), Some(ThinkingLevel::Low)),
            ("fake-openai/fake-oai-model".to_string(), None),
        ]
    );
    // "sonnet" exists but anthropic has no key here.
    assert_eq!(
        warnings,
        [
            "Warning: No models match pattern \"nothing*\"",
            "Warning: No models match pattern \"sonnet\""
        ]
    );

    let (scoped, warnings) =
        parse_scoped_models(&reg, &auth, &pats(&["fake-oai-model:ultra, FAKE-MODEL"]));
    let got: Vec<&str> = scoped.iter().map(|(m, _)| m.id.as_str()).collect();
    assert_eq!(got, ["fake-oai-model", "fake-model"]);
    assert_eq!(
        warnings,
        [
            "Warning: Invalid thinking level \"ultra\" in pattern \"fake-oai-model:ultra\". Using default instead."
        ]
    );
}

#[test]
fn glob_semantics() {
    assert!(glob_match("*sonnet*", "claude-sonnet-4"));
    assert!(!glob_match("*sonnet*", "anthropic/claude-sonnet-4"));
    assert!(glob_match("anthropic/*", "anthropic/claude-sonnet-4"));
    assert!(glob_match(
        "**/*sonnet*",
        "openrouter/anthropic/claude-sonnet-4"
    ));
    assert!(glob_match("gpt-5.?", "GPT-5.4"));
    assert!(glob_match("gpt-5.[0-3]", "gpt-5.2"));
    assert!(!glob_match("gpt-5.[!0-3]", "gpt-5.2"));
    assert!(!glob_match("*", ".hidden"));
}

#[test]
fn locale_compare_matches_javascript_for_all_builtin_ids() {
    let expected = std::fs::read_to_string(fixture("builtin_ids_locale_sorted.txt")).unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    let mut got: Vec<String> = Registry::builtin()
        .all()
        .iter()
        .map(|m| m.id.clone())
        .collect();
    got.sort_by(|a, b| locale_compare(a, b));
    assert_eq!(got, expected);

    let mut sample = [
        "gpt-5.1",
        "gpt-5/x",
        "GPT-5",
        "gpt-5-mini",
        "gpt-5",
        "a.b",
        "ab",
        "Ab",
        "aB",
        "gpt-5_1",
        "a-b",
        "gpt-5:free",
        "gpt-51",
    ];
    sample.sort_by(|a, b| locale_compare(a, b));
    assert_eq!(
        sample,
        [
            "a-b",
            "a.b",
            "ab",
            "aB",
            "Ab",
            "gpt-5",
            "GPT-5",
            "gpt-5_1",
            "gpt-5-mini",
            "gpt-5:free",
            "gpt-5.1",
            "gpt-5/x",
            "gpt-51"
        ]
    );
}

#[test]
fn initial_model_selection() {
    let dir = oracle_dir();
    let (reg, auth) = load_dir(dir.path(), no_env());
    // Settings default wins without a key check.
    let m = initial_model(&reg, &auth, Some(("anthropic", "claude-sonnet-4-5"))).unwrap();
    assert_eq!(m.id, "claude-sonnet-4-5");
    // Unknown default → first authenticated model.
    let m = initial_model(&reg, &auth, Some(("anthropic", "nope"))).unwrap();
    assert_eq!((m.provider.as_str(), m.id.as_str()), ("fake", "fake-model"));
    // A provider default outranks registry order.
    let (reg, auth) = load_dir(
        dir.path(),
        env_of(&[("OPENAI_API_KEY", "k"), ("GROQ_API_KEY", "k")]),
    );
    let m = initial_model(&reg, &auth, None).unwrap();
    assert_eq!((m.provider.as_str(), m.id.as_str()), ("openai", "gpt-5.4"));
    let empty = Registry::default();
    assert_eq!(initial_model(&empty, &Auth::empty(no_env()), None), None);
    // pi 1.6.0's defaults with its catalog.
    let env = env_of(&[("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", "k")]);
    let (reg, _) = Registry::load_for(crate::protocol::Catalog::V16, dir.path(), &*env);
    let (auth, _) = Auth::load(dir.path(), reg.provider_api_keys(), env);
    let m = initial_model(&reg, &auth, None).unwrap();
    assert_eq!(
        (m.provider.as_str(), m.id.as_str()),
        ("anthropic", "claude-opus-5-5")
    );
}

#[test]
fn env_keys_and_sentinels() {
    let env = env_of(&[
        ("ANTHROPIC_OAUTH_TOKEN", "oauth"),
        ("ANTHROPIC_API_KEY", "api"),
        ("AWS_PROFILE", "p"),
        ("XAI_API_KEY", ""),
    ]);
    assert_eq!(env_api_key("anthropic", &env).as_deref(), Some("oauth"));
    assert_eq!(
        env_api_key("amazon-bedrock", &env).as_deref(),
        Some("<authenticated>")
    );
    assert_eq!(env_api_key("xai", &env), None);
    assert_eq!(env_api_key("unknown", &env), None);
}

#[test]
fn non_ascii_provider_prefix_does_not_panic() {
    let reg = Registry::from_models_json(
        r#"{"providers": {"ünï": {"baseUrl": "u", "api": "a", "apiKey": "k", "models": [{"id": "m"}]}}}"#,
    )
    .unwrap();
    let r = cli(&reg, Some("ÜNÏ"), "ünï/m").unwrap();
    assert_eq!((r.0.provider.as_str(), r.0.id.as_str()), ("ünï", "m"));
    let r = cli(&reg, Some("ünï"), "ü").unwrap();
    assert_eq!(r.0.id, "ü");
}

/// pi's `get_available_models` for built-in models of every key layout (headers, compat and
/// thinking maps where the generated table has them), provider and model overrides that add
/// keys, and models.json models: the same JSON text, key order included.
#[test]
fn model_json_matches_the_reference_key_for_key() {
    let fx: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("available_models_shapes.json")).unwrap(),
    )
    .unwrap();
    let dir = write_models(&fx["modelsJson"].to_string());
    let pairs: Vec<(String, String)> = fx["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (reg, auth) = load_dir(dir.path(), env_of(&refs));
    let js = |v: &dyn erased::Ser| v.js();
    let got: Vec<String> = reg.available(&auth).iter().map(|m| js(*m)).collect();
    let want: Vec<String> = fx["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| js(m))
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

/// JSON text as pi prints it.
mod erased {
    pub trait Ser {
        fn js(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn js(&self) -> String {
            let mut buf = Vec::new();
            let mut ser =
                serde_json::Serializer::with_formatter(&mut buf, crate::json::JsFormatter);
            self.serialize(&mut ser).unwrap();
            String::from_utf8(buf).unwrap()
        }
    }
}

#[test]
fn extension_providers_register_override_and_unregister() {
    let dir = oracle_dir();
    // pi 0.87.1's rules (0.73.1 wants an `apiKey` with models: below).
    let (mut reg, warnings) = Registry::load_for(Catalog::V087, dir.path(), &*no_env());
    assert_eq!(warnings, Vec::<String>::new());
    let env = |k: &str| (k == "PROXY_KEY").then(|| "sk-1".to_string());
    reg.register_provider(
        "proxy",
        &json!({"baseUrl": "http://p", "apiKey": "${PROXY_KEY}", "api": "anthropic-messages",
                "headers": {"x-team": "blue"},
                "models": [{"id": "m1", "name": "One", "contextWindow": 1000,
                            "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}]}),
        &env,
    )
    .unwrap();
    let m = reg.lookup("proxy", "m1").unwrap();
    assert_eq!(
        (m.name.as_str(), m.context_window, m.max_tokens),
        ("One", 1000, 16384)
    );
    assert_eq!((m.cost.input, m.cost.output), (1.0, 2.0));
    assert_eq!(
        reg.provider_api_keys().get("proxy").map(String::as_str),
        Some("sk-1")
    );
    let (auth, _) = Auth::load(dir.path(), reg.provider_api_keys(), no_env());
    let ra = reg.request_auth(&m, &auth).unwrap();
    assert_eq!(ra.api_key.as_deref(), Some("sk-1"));
    assert_eq!(
        ra.headers,
        Some(vec![("x-team".to_string(), "blue".to_string())])
    );
    // The override form keeps a provider's models and changes where they go.
    let before = reg.models_of("anthropic").len();
    reg.register_provider("anthropic", &json!({"baseUrl": "http://proxy"}), &env)
        .unwrap();
    let after = reg.models_of("anthropic");
    assert_eq!(after.len(), before);
    assert!(after.iter().all(|m| m.base_url == "http://proxy"));
    // With models, a built-in provider's own are replaced; unregistering brings them back.
    reg.register_provider(
        "anthropic",
        &json!({"baseUrl": "http://proxy", "models": [{"id": "only"}]}),
        &env,
    )
    .unwrap();
    assert_eq!(
        ids(&reg.models_of("anthropic").iter().collect::<Vec<_>>()),
        ["anthropic/only"]
    );
    assert!(reg.unregister_provider("anthropic"));
    assert_eq!(reg.models_of("anthropic").len(), before);
    assert!(reg.unregister_provider("proxy"));
    assert!(reg.lookup("proxy", "m1").is_none());
    assert!(!reg.unregister_provider("proxy"));
    // models.json's own providers stay throughout.
    assert!(reg.lookup("fake", "fake-model").is_some());
}

#[test]
fn extension_provider_errors_name_the_problem() {
    let mut reg = Registry::builtin_for(Catalog::V087);
    let env = |_: &str| None;
    let err = |reg: &mut Registry, v: Value| reg.register_provider("x", &v, &env).unwrap_err();
    assert_eq!(
        err(
            &mut reg,
            json!({"models": [{"id": "a"}], "api": "openai-completions"})
        ),
        "Provider x: \"baseUrl\" is required when defining custom models."
    );
    assert_eq!(
        err(
            &mut reg,
            json!({"models": [{"id": "a"}], "baseUrl": "http://x"})
        ),
        "Provider x, model a: no \"api\" specified. Set at provider or model level."
    );
    assert_eq!(
        err(&mut reg, json!({})),
        "Provider x: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
    );
    assert_eq!(
        err(&mut reg, json!({"baseUrl": 3})),
        "Invalid provider config: providers.x.baseUrl: Expected string"
    );
    assert!(reg.lookup("x", "a").is_none());
    // pi 1.6.0 words the missing `api` its own way.
    let mut reg = Registry::builtin_for(Catalog::V16);
    assert_eq!(
        err(
            &mut reg,
            json!({"models": [{"id": "a"}], "baseUrl": "http://x"})
        ),
        "Provider x, model a: no \"api\" specified. Set it at model level or provider level."
    );
    // pi 0.73.1 checks `baseUrl`, then `apiKey`, then each model's `api`, for any provider.
    let mut reg = Registry::builtin_for(Catalog::V073);
    assert_eq!(
        err(&mut reg, json!({"models": [{"id": "a"}]})),
        "Provider x: \"baseUrl\" is required when defining models."
    );
    assert_eq!(
        err(
            &mut reg,
            json!({"models": [{"id": "a"}], "baseUrl": "http://x", "api": "openai-completions"})
        ),
        "Provider x: \"apiKey\" or \"oauth\" is required when defining models."
    );
    assert_eq!(
        err(
            &mut reg,
            json!({"models": [{"id": "a"}], "baseUrl": "http://x", "apiKey": "k"})
        ),
        "Provider x, model a: no \"api\" specified."
    );
    assert_eq!(
        reg.register_provider(
            "anthropic",
            &json!({"baseUrl": "http://p", "models": [{"id": "o"}]}),
            &env
        )
        .unwrap_err(),
        "Provider anthropic: \"apiKey\" or \"oauth\" is required when defining models."
    );
    reg.register_provider(
        "x",
        &json!({"models": [{"id": "a"}], "baseUrl": "http://x", "apiKey": "k", "api": "openai-completions"}),
        &env,
    )
    .unwrap();
    assert!(reg.lookup("x", "a").is_some());
}

#[test]
fn config_interpolation_as_pi() {
    let env = |k: &str| match k {
        "A" => Some("1".to_string()),
        "B_C" => Some("2".to_string()),
        _ => None,
    };
    let i = |s: &str| config::interpolate_env(s, &env);
    assert_eq!(i("$A"), "1");
    assert_eq!(i("${B_C}x"), "2x");
    assert_eq!(i("k-$B_C-$NOPE."), "k-2-.");
    assert_eq!(i("$$A $!b"), "$A !b");
    assert_eq!(i("plain"), "plain");
    assert_eq!(i("a$"), "a$");
    assert_eq!(i("${open"), "${open");
}

/// Two custom providers offering `dup` (and `solo` on `b`), `a` holding `x/dup` too.
fn two_providers(catalog: Catalog) -> Registry {
    Registry::from_models_json_for(
        r#"{"providers": {
            "a": {"baseUrl": "u", "api": "anthropic-messages", "apiKey": "k",
                  "models": [{"id": "dup"}, {"id": "dup-mini"}, {"id": "b/solo"}]},
            "b": {"baseUrl": "u", "api": "anthropic-messages", "apiKey": "k",
                  "models": [{"id": "dup"}, {"id": "solo"}, {"id": "dup-mini"}]}}}"#,
        catalog,
    )
    .unwrap()
}

/// `--model` under `catalog` with these providers usable.
fn cli_with(
    reg: &Registry,
    provider: Option<&str>,
    pattern: &str,
    usable: &[&str],
    inline_key: bool,
    thinking: Option<ThinkingLevel>,
) -> Result<String, String> {
    let ok = |p: &str| usable.contains(&p);
    let cx = super::resolve::CliContext {
        usable: &ok,
        inline_key,
        thinking,
    };
    resolve_cli_model(reg, provider, pattern, &cx).map(|(m, level, warning)| {
        format!(
            "{}/{} {:?} {} {warning:?}",
            m.provider, m.id, level, m.reasoning
        )
    })
}

#[test]
fn an_id_on_several_providers_follows_each_versions_rules() {
    let amb = |hint: &str| {
        format!(
            "Model \"dup\" is ambiguous across providers: a/dup, b/dup. {hint} Use --provider or provider/model."
        )
    };
    // pi 0.73.1: the first in registry order, credentials or not.
    let r = two_providers(Catalog::V073);
    assert_eq!(
        cli_with(&r, None, "dup", &[], false, None).unwrap(),
        "a/dup None false None"
    );
    // pi 0.87.1: the one with a credential, else ambiguous.
    let r = two_providers(Catalog::V087);
    assert_eq!(
        cli_with(&r, None, "dup", &["b"], false, None).unwrap(),
        "b/dup None false None"
    );
    assert_eq!(
        cli_with(&r, None, "dup", &["a", "b"], false, None).unwrap_err(),
        amb("More than one matching provider is authenticated.")
    );
    assert_eq!(
        cli_with(&r, None, "dup", &[], false, None).unwrap_err(),
        amb("No matching provider is authenticated.")
    );
    // A fuzzy match is still the first (0.87.1 decides by credentials for exact ids only).
    assert_eq!(
        cli_with(&r, None, "dup-mi", &["b"], false, None).unwrap(),
        "a/dup-mini None false None"
    );
    // pi 1.6.0: the same for exact ids, fuzzy ties too, and `--api-key` lets no credential choose.
    let r = two_providers(Catalog::V16);
    assert_eq!(
        cli_with(&r, None, "dup", &["b"], false, None).unwrap(),
        "b/dup None false None"
    );
    assert_eq!(
        cli_with(&r, None, "dup", &["a", "b"], false, None).unwrap_err(),
        amb("More than one matching provider is authenticated.")
    );
    assert_eq!(
        cli_with(&r, None, "dup", &["b"], true, None).unwrap_err(),
        amb("--api-key does not choose a provider.")
    );
    assert_eq!(
        cli_with(&r, None, "dup-mi", &["b"], false, None).unwrap(),
        "b/dup-mini None false None"
    );
    assert_eq!(
        cli_with(&r, None, "dup-mi", &[], false, None).unwrap_err(),
        "Model \"dup-mi\" is ambiguous across providers: a/dup-mini, b/dup-mini. No matching provider is authenticated. Use --provider or provider/model."
    );
    // A `:level` suffix after an exact id; `--provider` narrows the pool.
    assert_eq!(
        cli_with(&r, None, "dup:high", &["a"], false, None).unwrap(),
        "a/dup Some(High) false None"
    );
    assert_eq!(
        cli_with(&r, Some("B"), "dup", &[], false, None).unwrap(),
        "b/dup None false None"
    );
}

#[test]
fn a_provider_prefix_is_a_hint_the_credentials_confirm() {
    // `b/solo` names provider b's `solo`, and is also a's literal id `b/solo`.
    for catalog in [Catalog::V087, Catalog::V16] {
        let r = two_providers(catalog);
        assert_eq!(
            cli_with(&r, None, "b/solo", &["b"], false, None).unwrap(),
            "b/solo None false None"
        );
        assert_eq!(
            cli_with(&r, None, "b/solo", &["a"], false, None).unwrap(),
            "a/b/solo None false None"
        );
    }
    // 0.73.1 takes the provider's model regardless.
    let r = two_providers(Catalog::V073);
    assert_eq!(
        cli_with(&r, None, "b/solo", &["a"], false, None).unwrap(),
        "b/solo None false None"
    );
}

#[test]
fn a_custom_id_keeps_or_splits_its_level_by_version() {
    let warn = |id: &str| {
        format!(
            "Some(\"Model \\\"{id}\\\" not found for provider \\\"b\\\". Using custom model id.\")"
        )
    };
    // 0.73.1: the suffix stays in the id.
    let r = two_providers(Catalog::V073);
    assert_eq!(
        cli_with(&r, Some("b"), "new-one:high", &[], false, None).unwrap(),
        format!("b/new-one:high None false {}", warn("new-one:high"))
    );
    for catalog in [Catalog::V087, Catalog::V16] {
        let r = two_providers(catalog);
        // Split off, and the model reasons at it; with `--thinking` it stays in the id.
        assert_eq!(
            cli_with(&r, Some("b"), "new-one:high", &[], false, None).unwrap(),
            format!("b/new-one Some(High) true {}", warn("new-one"))
        );
        assert_eq!(
            cli_with(
                &r,
                Some("b"),
                "new-one:high",
                &[],
                false,
                Some(ThinkingLevel::Off)
            )
            .unwrap(),
            format!("b/new-one:high None false {}", warn("new-one:high"))
        );
    }
    // 1.6.0: `provider/` on an unknown id names the provider; a bare unknown id is not found.
    let r = two_providers(Catalog::V16);
    assert_eq!(
        cli_with(&r, None, "b/new-one", &[], false, None).unwrap(),
        format!("b/new-one None false {}", warn("new-one"))
    );
    assert_eq!(
        cli_with(&r, None, "zzz", &[], false, None).unwrap_err(),
        "Model \"zzz\" not found. Use --list-models to see available models."
    );
}

#[test]
fn scopes_add_every_provider_of_an_ambiguous_pattern_from_16_on() {
    let scope = |catalog: Catalog, patterns: &[&str]| {
        let r = two_providers(catalog);
        let auth = Auth::empty(no_env());
        let patterns: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
        let (scoped, warnings) = parse_scoped_models(&r, &auth, &patterns);
        let got: Vec<String> = scoped
            .iter()
            .map(|(m, l)| format!("{}/{} {l:?}", m.provider, m.id))
            .collect();
        (got, warnings)
    };
    // pi 0.87.1: one model (the bare id is ambiguous, so the fuzzy match decides: the highest id).
    assert_eq!(
        scope(Catalog::V087, &["dup:high"]),
        (vec!["a/dup-mini Some(High)".to_string()], vec![])
    );
    // pi 1.6.0: both, with a warning; `provider/id` and globs as before.
    assert_eq!(
        scope(Catalog::V16, &["dup:high", "b/solo", "*mini:x"]),
        (
            vec![
                "a/dup Some(High)".to_string(),
                "b/dup Some(High)".to_string(),
                "b/solo None".to_string(),
            ],
            vec![
                "Warning: Pattern \"dup:high\" matches several providers: a, b. Use provider/id to choose one."
                    .to_string(),
                "Warning: No models match pattern \"*mini:x\"".to_string(),
            ]
        )
    );
    assert_eq!(
        scope(Catalog::V16, &["*-mini"]),
        (
            vec!["a/dup-mini None".to_string(), "b/dup-mini None".to_string()],
            vec![]
        )
    );
}
