//! pi 0.73.1's other built-in providers (DeepSeek, z.ai, Moonshot, Hugging Face, Cloudflare
//! Workers AI and AI Gateway, OpenCode, OpenRouter, Vercel AI Gateway, Fireworks, Kimi, MiniMax,
//! Xiaomi) against conversations recorded from pi (`fixtures/builtin/`, made by
//! `tests/record/gen_builtin_providers.py`): each provider's real base URL kept as the fake's path,
//! so flags pi detects from the URL apply. The same request bytes and headers for the same
//! context, and the same stream events and final message from the same response bytes, whole and
//! re-chunked down to one byte.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::World;
use support::fake_llm::{FakeLlm, Reply};
use support::frames::{last_assistant as assistant_end, run};
use support::recorded::{assert_bodies, assert_headers, assert_replays, load};
use support::spawn_env as spawn;

const CHUNKS: &[usize] = &[0, 1, 7];

/// Headers whose values pith must send exactly as pi did (absent when pi sent none).
const HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "cf-aig-authorization",
    "user-agent",
    "anthropic-beta",
    "anthropic-version",
    "session_id",
    "x-client-request-id",
    "x-session-affinity",
];

fn check(names: &[&str]) {
    for name in names {
        let f = format!("builtin/{name}.json");
        let key = format!("key-{}", load(&f).provider);
        assert_bodies(&f, "http://127.0.0.1:9", &key, &|_| {});
        // The Google SDK's user agent names the Node.js version pi runs on; pith sends none.
        let headers: Vec<&str> = HEADERS
            .iter()
            .copied()
            .filter(|h| !(name.ends_with("google") && *h == "user-agent"))
            .collect();
        assert_headers(&f, "http://127.0.0.1:9", &key, &headers);
        assert_replays(&f, &key, CHUNKS);
    }
}

#[test]
fn deepseek() {
    check(&["deepseek_tool", "deepseek_off", "deepseek_xhigh"]);
}

#[test]
fn zai() {
    check(&["zai_tool", "zai_off"]);
}

#[test]
fn moonshot() {
    check(&["moonshot_tool", "moonshotcn_text"]);
}

#[test]
fn huggingface() {
    check(&["hf_tool", "hf_plain"]);
}

#[test]
fn cloudflare() {
    check(&[
        "cf_workers_tool",
        "cf_gateway_compat",
        "cf_gateway_responses",
        "cf_gateway_anthropic",
    ]);
}

#[test]
fn opencode() {
    check(&[
        "opencode_cc",
        "opencode_anthropic",
        "opencode_responses",
        "opencode_google",
        "opencodego_deepseek",
        "opencodego_qwen",
        "opencodego_qwen_off",
    ]);
}

#[test]
fn openrouter() {
    check(&[
        "openrouter_tool",
        "openrouter_off",
        "openrouter_claude",
        "openrouter_claude_long",
        "openrouter_deepseek",
    ]);
}

#[test]
fn anthropic_compatible() {
    check(&[
        "fireworks_tool",
        "kimi_tool",
        "minimax_tool",
        "minimaxcn_tool",
        "xiaomi_tool",
        "xiaomi_cn_tool",
        "xiaomi_ams_tool",
        "xiaomi_sgp_tool",
        "vercel_opus47",
        "vercel_opus46",
        "vercel_gpt",
        "anthropic_opus47",
        "anthropic_off",
        "anthropic_no_stop",
        "anthropic_no_start",
    ]);
}

#[test]
fn completions_stream_details() {
    check(&[
        "stream_interleaved",
        "stream_reasoning_fields",
        "stream_content_filter",
        "stream_unknown_finish",
        "stream_error_chunk",
        "stream_no_finish",
        "stream_cache_write",
        "error_400",
        "error_429",
        "error_503",
    ]);
}

#[test]
fn models_json_compat_flags() {
    check(&[
        "custom_toolname",
        "custom_thinking_text",
        "custom_cache",
        "custom_vercel",
        "custom_openrouter",
        "custom_openai_off",
        "custom_anthropic",
        "custom_responses",
    ]);
}

// ------------------------------------------------------------------------------------------------
// Through the binary: keys from pi's variables, URLs from the environment.

#[test]
fn each_variable_lists_its_providers_models() {
    let world = World::new();
    let cases: &[(&str, &[(&str, usize)])] = &[
        ("DEEPSEEK_API_KEY", &[("deepseek", 2)]),
        ("ZAI_API_KEY", &[("zai", 5)]),
        (
            "MOONSHOT_API_KEY",
            &[("moonshotai", 7), ("moonshotai-cn", 7)],
        ),
        ("HF_TOKEN", &[("huggingface", 22)]),
        ("FIREWORKS_API_KEY", &[("fireworks", 19)]),
        ("KIMI_API_KEY", &[("kimi-coding", 2)]),
        ("MINIMAX_API_KEY", &[("minimax", 2)]),
        ("MINIMAX_CN_API_KEY", &[("minimax-cn", 2)]),
        ("OPENCODE_API_KEY", &[("opencode", 38), ("opencode-go", 12)]),
        ("AI_GATEWAY_API_KEY", &[("vercel-ai-gateway", 162)]),
        ("XIAOMI_API_KEY", &[("xiaomi", 5)]),
        (
            "XIAOMI_TOKEN_PLAN_CN_API_KEY",
            &[("xiaomi-token-plan-cn", 5)],
        ),
        (
            "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
            &[("xiaomi-token-plan-ams", 5)],
        ),
        (
            "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
            &[("xiaomi-token-plan-sgp", 5)],
        ),
        (
            "CLOUDFLARE_API_KEY",
            &[("cloudflare-ai-gateway", 35), ("cloudflare-workers-ai", 8)],
        ),
    ];
    for (var, want) in cases {
        let mut p = spawn(&world, &["--mode", "rpc", "--no-session"], &[(var, "k")]);
        let models = p.call(json!({"type":"get_available_models"}), "m");
        let mut got: Vec<(String, usize)> = Vec::new();
        for m in models["data"]["models"].as_array().expect("models") {
            let provider = m["provider"].as_str().expect("provider").to_string();
            match got.last_mut() {
                Some((p, n)) if *p == provider => *n += 1,
                _ => got.push((provider, 1)),
            }
        }
        let want: Vec<(String, usize)> = want.iter().map(|(p, n)| (p.to_string(), *n)).collect();
        assert_eq!(got, want, "{var}");
        p.finish(Duration::from_secs(5));
    }
}

#[test]
fn deepseek_end_to_end_with_its_variable() {
    let fx = load("builtin/deepseek_tool.json");
    let reply = fx.turns[1].response.clone().expect("a response");
    let llm = FakeLlm::start(vec![Reply::sse(reply.2)]);
    let world = World::new();
    let base = format!("{}/api.deepseek.com", llm.base_url());
    world.write_agent_file(
        "models.json",
        &json!({"providers": {"deepseek": {"baseUrl": base}}}).to_string(),
    );
    let args = [
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "deepseek",
        "--model",
        "deepseek-v4-flash",
        "--thinking",
        "xhigh",
    ];
    let mut p = spawn(&world, &args, &[("DEEPSEEK_API_KEY", "sk-ds-1")]);
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    assert_eq!(msg["content"][1]["text"], "The output was hi. 😀 中文");
    assert_eq!(msg["content"][0]["thinkingSignature"], "reasoning_content");
    let r = &llm.requests()[0];
    assert_eq!(r.path, "/api.deepseek.com/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-ds-1"));
    let body: Value = serde_json::from_str(&r.body).expect("json");
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    assert_eq!(body["reasoning_effort"], "max");
    assert_eq!(body["messages"][0]["role"], "system");
    p.finish(Duration::from_secs(5));
}

#[test]
fn cloudflare_urls_come_from_the_environment() {
    let fx = load("builtin/cf_workers_tool.json");
    let reply = fx.turns[1].response.clone().expect("a response");
    let llm = FakeLlm::start(vec![Reply::sse(reply.2)]);
    let world = World::new();
    let base = format!(
        "{}/client/v4/accounts/{{CLOUDFLARE_ACCOUNT_ID}}/ai/v1",
        llm.base_url()
    );
    world.write_agent_file(
        "models.json",
        &json!({"providers": {"cloudflare-workers-ai": {"baseUrl": base}}}).to_string(),
    );
    let args = [
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "cloudflare-workers-ai",
        "--model",
        "@cf/openai/gpt-oss-120b",
    ];
    // Without the account id: pi's error, nothing sent.
    let mut p = spawn(&world, &args, &[("CLOUDFLARE_API_KEY", "cf-key")]);
    let msg = assistant_end(&run(&mut p, "1", "hi"));
    assert_eq!(msg["stopReason"], "error");
    assert_eq!(
        msg["errorMessage"],
        "CLOUDFLARE_ACCOUNT_ID is required for provider cloudflare-workers-ai but is not set."
    );
    p.finish(Duration::from_secs(5));
    assert!(llm.requests().is_empty());
    let env = [
        ("CLOUDFLARE_API_KEY", "cf-key"),
        ("CLOUDFLARE_ACCOUNT_ID", "acct-9"),
    ];
    let mut p = spawn(&world, &args, &env);
    let msg = assistant_end(&run(&mut p, "1", "hi"));
    assert_eq!(msg["stopReason"], "stop");
    let r = &llm.requests()[0];
    assert_eq!(r.path, "/client/v4/accounts/acct-9/ai/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer cf-key"));
    assert!(r.header("x-session-affinity").is_some());
    p.finish(Duration::from_secs(5));
}
