//! The provider APIs under `--compat 0.87` against conversations recorded from pi 0.87.1
//! (`fixtures/087/<api>/`, recorded with `tests/record/` and `PI` pointing at pi 0.87.1; see
//! `tests/support/recorded.rs`): the same request bytes and headers for the same context, and
//! the same stream events and final assistant message from the same response bytes, whole and
//! re-chunked down to one byte. The replays use pi 0.87.1's model table.

mod support;

use support::recorded::{assert_bodies, assert_headers, assert_replays};

const CHUNKS: &[usize] = &[0, 1, 7];

// ------------------------------------------------------------------------------------------------
// mistral-conversations (pi 0.87.1's own client: no SDK)

const MISTRAL: &[&str] = &[
    "087/mistral/tool_magistral.json",
    "087/mistral/tool_small.json",
    "087/mistral/tool_devstral.json",
    "087/mistral/image_textonly.json",
    "087/mistral/image_vision.json",
    "087/mistral/error_400.json",
    "087/mistral/error_429.json",
    "087/mistral/error_503.json",
];

#[test]
fn mistral_bodies_match_pi_087() {
    for f in MISTRAL {
        assert_bodies(f, "http://127.0.0.1:9", "sk-mistral-test", &|_| {});
    }
}

#[test]
fn mistral_headers_match_pi_087() {
    for f in MISTRAL {
        assert_headers(
            f,
            "http://127.0.0.1:9",
            "sk-mistral-test",
            &["authorization", "content-type", "accept", "x-affinity"],
        );
    }
}

#[test]
fn mistral_messages_match_pi_087() {
    for f in MISTRAL {
        assert_replays(f, "sk-mistral-test", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// azure-openai-responses and openai-responses

const AZURE: &[&str] = &[
    "087/responses/azure_tool.json",
    "087/responses/azure_nonreasoning.json",
    "087/responses/azure_off.json",
    "087/responses/azure_incomplete.json",
    "087/responses/azure_failed.json",
    "087/responses/azure_error_400.json",
    "087/responses/azure_error_429.json",
    "087/responses/azure_error_503.json",
];

const OPENAI_RESPONSES: &[&str] = &[
    "087/responses/openai_tool.json",
    "087/responses/openai_off.json",
];

/// The headers both Responses APIs send (the User-Agent names the recording machine's kernel,
/// so it is checked apart).
const RESPONSES_HEADERS: &[&str] = &[
    "authorization",
    "api-key",
    "content-type",
    "accept",
    "x-stainless-lang",
    "x-stainless-timeout",
    "x-stainless-package-version",
    "x-stainless-os",
    "x-stainless-arch",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "session_id",
    "x-client-request-id",
];

#[test]
fn azure_requests_match_pi_087() {
    for f in AZURE {
        assert_bodies(f, "http://127.0.0.1:9", "azure-key-test", &|_| {});
        assert_headers(f, "http://127.0.0.1:9", "azure-key-test", RESPONSES_HEADERS);
    }
}

#[test]
fn azure_messages_match_pi_087() {
    for f in AZURE {
        assert_replays(f, "azure-key-test", CHUNKS);
    }
}

#[test]
fn openai_responses_requests_match_pi_087() {
    for f in OPENAI_RESPONSES {
        assert_bodies(f, "http://127.0.0.1:9/v1", "sk-openai-test", &|_| {});
        assert_headers(
            f,
            "http://127.0.0.1:9/v1",
            "sk-openai-test",
            RESPONSES_HEADERS,
        );
    }
}

#[test]
fn openai_responses_messages_match_pi_087() {
    for f in OPENAI_RESPONSES {
        assert_replays(f, "sk-openai-test", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// google-vertex and google-generative-ai

const VERTEX: &[&str] = &[
    "087/vertex/key_tool.json",
    "087/vertex/key_flash3.json",
    "087/vertex/key_tool3.json",
    "087/vertex/key_off.json",
    "087/vertex/key_max.json",
    "087/vertex/key_safety.json",
    "087/vertex/key_error_400.json",
    "087/vertex/key_error_429.json",
    "087/vertex/key_error_503.json",
];

#[test]
fn vertex_bodies_match_pi_087() {
    for f in VERTEX {
        assert_bodies(f, "http://127.0.0.1:9", "vertex-api-key", &|_| {});
    }
}

#[test]
fn vertex_messages_match_pi_087() {
    for f in VERTEX {
        assert_replays(f, "vertex-api-key", CHUNKS);
    }
}

#[test]
fn gemini_bodies_and_messages_match_pi_087() {
    let f = "087/google/google_tool.json";
    assert_bodies(f, "http://127.0.0.1:9/v1beta", "gemini-key", &|_| {});
    assert_replays(f, "gemini-key", CHUNKS);
}

// ------------------------------------------------------------------------------------------------
// bedrock-converse-stream

const BEDROCK: &[&str] = &[
    "087/bedrock/tool_sonnet45.json",
    "087/bedrock/tool_opus46.json",
    "087/bedrock/thinking_nosig.json",
    "087/bedrock/image_nova.json",
    "087/bedrock/image_textonly.json",
    "087/bedrock/error_400.json",
    "087/bedrock/error_429.json",
    "087/bedrock/error_503.json",
    "087/bedrock/error_403.json",
    "087/bedrock/error_500_plain.json",
    "087/bedrock/error_500_json_notype.json",
    "087/bedrock/error_400_empty.json",
    "087/bedrock/error_400_type_in_body.json",
    "087/bedrock/stream_throttling.json",
    "087/bedrock/stream_model_error.json",
    "087/bedrock/stream_max_tokens.json",
    "087/bedrock/stream_guardrail.json",
];

#[test]
fn bedrock_bodies_match_pi_087() {
    for f in BEDROCK {
        assert_bodies(f, "http://127.0.0.1:9", "<authenticated>", &|_| {});
    }
}

#[test]
fn bedrock_messages_match_pi_087() {
    for f in BEDROCK {
        assert_replays(f, "<authenticated>", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// openai-codex-responses (recorded with CODEX_MODEL=gpt-5.5: pi 0.87.1 ships no gpt-5.1/5.2)

/// The access token of the recorded login (a JWT naming ChatGPT account `acc-42`).
const CODEX_TOKEN: &str = "eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOiB7ImNoYXRncHRfYWNjb3VudF9pZCI6ICJhY2MtNDIifSwgImV4cCI6IDQxMDI0NDQ4MDB9.sig";

const CODEX: &[&str] = &[
    "087/codex/codex_tool.json",
    "087/codex/codex_off.json",
    "087/codex/codex_incomplete.json",
    "087/codex/codex_failed.json",
    "087/codex/codex_error_event.json",
    "087/codex/codex_error_400.json",
    "087/codex/codex_error_429.json",
    "087/codex/codex_error_503.json",
];

#[test]
fn codex_requests_match_pi_087() {
    for f in CODEX {
        assert_bodies(f, "http://127.0.0.1:9/backend-api", CODEX_TOKEN, &|_| {});
        assert_headers(
            f,
            "http://127.0.0.1:9/backend-api",
            CODEX_TOKEN,
            &[
                "authorization",
                "chatgpt-account-id",
                "originator",
                "openai-beta",
                "accept",
                "content-type",
                "session-id",
                "session_id",
                "x-client-request-id",
            ],
        );
    }
}

#[test]
fn codex_messages_match_pi_087() {
    for f in CODEX {
        assert_replays(f, CODEX_TOKEN, CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// github-copilot (three APIs with Copilot's auth and headers; recorded with
// COPILOT_MODELS=claude-haiku-4.5,gemini-3.5-flash,gpt-5-mini)

const COPILOT: &[&str] = &[
    "087/copilot/copilot_anthropic.json",
    "087/copilot/copilot_completions.json",
    "087/copilot/copilot_responses.json",
];

#[test]
fn copilot_requests_match_pi_087() {
    for f in COPILOT {
        assert_bodies(f, "http://127.0.0.1:9", "ghu_copilot_token", &|_| {});
        assert_headers(
            f,
            "http://127.0.0.1:9",
            "ghu_copilot_token",
            &[
                "authorization",
                "x-api-key",
                "anthropic-beta",
                "editor-version",
                "editor-plugin-version",
                "copilot-integration-id",
                "x-initiator",
                "openai-intent",
                "copilot-vision-request",
                "session_id",
            ],
        );
        assert_replays(f, "ghu_copilot_token", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// anthropic-messages with pi 0.87.1's built-in models (`tests/record/gen_anthropic.py`)

fn anthropic_fixtures() -> Vec<String> {
    let mut out = Vec::new();
    for m in [
        "claude_sonnet_4_6",
        "claude_opus_4_7",
        "claude_haiku_4_5",
        "claude_opus_5",
        "claude_fable_5",
    ] {
        out.push(format!("087/anthropic/tool_{m}.json"));
        for level in ["off", "high", "xhigh", "max"] {
            out.push(format!("087/anthropic/think_{level}_{m}.json"));
        }
    }
    out
}

#[test]
fn anthropic_requests_match_pi_087() {
    for f in anthropic_fixtures() {
        assert_bodies(&f, "http://127.0.0.1:9", "sk-ant-test", &|_| {});
        assert_headers(
            &f,
            "http://127.0.0.1:9",
            "sk-ant-test",
            &[
                "x-api-key",
                "anthropic-beta",
                "anthropic-version",
                "x-stainless-timeout",
                "x-stainless-package-version",
            ],
        );
    }
}

#[test]
fn anthropic_messages_match_pi_087() {
    for f in anthropic_fixtures() {
        assert_replays(&f, "sk-ant-test", CHUNKS);
    }
}

/// Stream endings and stop reasons pi 0.87.1 reads its own way: error stops with their texts, the
/// `error` event, streams that end early, input transformations, server-side fallbacks, JSON
/// repaired, events without a known name skipped.
const ANTHROPIC_ERRS: &[&str] = &[
    "err_refusal_explained",
    "err_refusal",
    "err_sensitive",
    "err_unknown_stop",
    "err_error_event",
    "err_no_message_stop",
    "err_no_stop_reason",
    "err_transformations",
    "err_fallback_first",
    "err_fallback_mid",
    "err_control_chars",
    "err_unnamed_events",
];

#[test]
fn anthropic_stream_endings_match_pi_087() {
    for f in ANTHROPIC_ERRS {
        assert_replays(&format!("087/anthropic/{f}.json"), "sk-ant-test", CHUNKS);
    }
}

/// Data that is not JSON even repaired: the same message around the parser's own words (pith
/// words a JSON syntax error as V8 does only for an unexpected first character; docs/rpc.md).
#[test]
fn anthropic_bad_event_json_as_pi_087() {
    use support::fake_llm::{FakeLlm, Reply};
    use support::recorded::{final_json, load, model, request};
    let fx = load("087/anthropic/err_bad_json.json");
    let t = &fx.turns[0];
    let (_, _, body) = t.response.clone().unwrap();
    let want: serde_json::Value = serde_json::from_str(&t.message_json).unwrap();
    let want_stop = want["stopReason"].clone();
    let want = want["errorMessage"].as_str().unwrap().to_string();
    let srv = FakeLlm::start(vec![Reply::sse(body)]);
    let events =
        support::streams::collect(request(&fx, 0, model(&fx, &srv.base_url()), "sk-ant-test"));
    let got: serde_json::Value = serde_json::from_str(&final_json(&events)).unwrap();
    assert_eq!(got["stopReason"], want_stop);
    let got = got["errorMessage"].as_str().unwrap();
    let head = "Could not parse Anthropic SSE event message_delta: ";
    let tail = "; data={not json; raw=event: message_delta\\ndata: {not json";
    assert!(want.starts_with(head) && want.ends_with(tail), "{want}");
    assert!(got.starts_with(head) && got.ends_with(tail), "{got}");
}

// ------------------------------------------------------------------------------------------------
// Tools that change during a run, with models that take system messages mid-conversation
// (`tests/record/gen_midconvo.py`): an extension registers a tool, or drops one; the later
// system messages travel in place (Anthropic's tool additions and removals, the completions
// API's system tools, the Responses API's additional tools).

/// Fixture, key, the base URL pi had (the fake's address and this path).
const MIDCONVO: &[(&str, &str, &str)] = &[
    ("anthropic_claude_opus_5", "sk-ant-test", ""),
    ("anthropic_claude_opus_4_8", "sk-ant-test", ""),
    ("openai_gpt_5_5", "sk-openai-test", "/v1"),
    ("moonshotai_kimi_k3", "sk-moon-test", "/v1"),
    ("deepseek_deepseek_v4_pro", "sk-ds-test", ""),
];

#[test]
fn midconvo_requests_match_pi_087() {
    for (m, key, path) in MIDCONVO {
        for flow in ["add", "drop"] {
            let f = format!("087/midconvo/{flow}_{m}.json");
            assert_bodies(&f, &format!("http://127.0.0.1:9{path}"), key, &|_| {});
        }
    }
}

#[test]
fn midconvo_messages_match_pi_087() {
    for (m, key, _) in MIDCONVO {
        for flow in ["add", "drop"] {
            assert_replays(&format!("087/midconvo/{flow}_{m}.json"), key, CHUNKS);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// pi 0.73.1's other built-in providers with pi 0.87.1's models
// (`tests/record/gen_builtin_providers_087.py`): each provider's real base URL kept as the fake's
// path, so what pi detects from the URL applies.

/// Headers whose values pith must send exactly as pi 0.87.1 did (absent when pi sent none; the
/// User-Agent names the recording machine's kernel and is checked elsewhere).
const BUILTIN_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "cf-aig-authorization",
    "anthropic-beta",
    "anthropic-version",
    "session_id",
    "x-session-id",
    "x-client-request-id",
    "x-session-affinity",
    "x-stainless-timeout",
    "x-goog-api-key",
];

fn check_builtin(names: &[&str]) {
    let mut failed = Vec::new();
    for name in names {
        let f = format!("087/builtin/{name}.json");
        let key = format!("key-{}", support::recorded::load(&f).provider);
        let r = std::panic::catch_unwind(|| {
            assert_bodies(&f, "http://127.0.0.1:9", &key, &|_| {});
            assert_headers(&f, "http://127.0.0.1:9", &key, BUILTIN_HEADERS);
            assert_replays(&f, &key, CHUNKS);
        });
        if r.is_err() {
            failed.push(*name);
        }
    }
    assert!(failed.is_empty(), "differ from pi 0.87.1: {failed:?}");
}

#[test]
fn builtin_completions_providers_match_pi_087() {
    check_builtin(&[
        "deepseek_tool",
        "deepseek_off",
        "deepseek_max",
        "zai_tool",
        "zai_off",
        "moonshot_tool",
        "moonshotcn_text",
        "hf_tool",
        "hf_plain",
        "cf_workers_tool",
        "cf_gateway_compat",
        "opencode_cc",
        "opencodego_deepseek",
        "opencodego_qwen",
        "openrouter_deepseek",
        "openrouter_off",
        "xiaomi_tool",
        "xiaomi_cn_off",
        "groq_tool",
        "groq_plain",
        "cerebras_tool",
    ]);
}

#[test]
fn builtin_anthropic_responses_and_google_providers_match_pi_087() {
    check_builtin(&[
        "cf_gateway_anthropic",
        "opencode_anthropic",
        "openrouter_claude",
        "fireworks_tool",
        "kimi_tool",
        "minimax_tool",
        "minimaxcn_tool",
        "vercel_qwen",
        "xai_tool",
        "opencode_responses",
        "cf_gateway_responses",
        "opencode_google",
    ]);
}

#[test]
fn completions_stream_details_match_pi_087() {
    check_builtin(&[
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
fn models_json_compat_flags_match_pi_087() {
    check_builtin(&[
        "custom_toolname",
        "custom_thinking_text",
        "custom_cache",
        "custom_vercel",
        "custom_openrouter",
        "custom_openai_off",
        "custom_together",
        "custom_nofinish",
        "custom_anthropic",
        "custom_responses",
    ]);
}

/// The providers pi 0.87.1 added (NVIDIA, Ant Ling, Qwen's token plans, Together, z.ai's coding
/// plan in China, Meta), with its keys from the environment.
#[test]
fn providers_new_in_087_match_pi_087() {
    check_builtin(&[
        "nvidia_tool",
        "nvidia_plain",
        "antling_tool",
        "antling_off",
        "qwentp_tool",
        "qwentpcn_off",
        "qwentpi_plain",
        "together_tool",
        "together_off",
        "zaicn_tool",
        "meta_tool",
    ]);
}
