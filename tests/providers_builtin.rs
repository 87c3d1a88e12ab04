//! pi 0.73.1's other built-in providers (DeepSeek, z.ai, Moonshot, Hugging Face, Cloudflare
//! Workers AI and AI Gateway, OpenCode, OpenRouter, Vercel AI Gateway, Fireworks, Kimi, MiniMax,
//! Xiaomi) against conversations recorded from pi (`fixtures/builtin/`, made by
//! `tests/record/gen_builtin_providers.py`): each provider's real base URL kept as the fake's path,
//! so flags pi detects from the URL apply. The same request bytes and headers for the same
//! context, and the same stream events and final message from the same response bytes, whole and
//! re-chunked down to one byte.

mod support;

use support::recorded::{assert_bodies, assert_headers, assert_replays, load};

const CHUNKS: &[usize] = &[0, 1, 7];

/// Headers whose values pith must send exactly as pi did (absent when pi sent none).
const HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
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
    ]);
}

#[test]
fn completions_stream_details() {
    check(&[
        "stream_interleaved",
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
