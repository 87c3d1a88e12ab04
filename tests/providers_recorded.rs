//! The cloud provider APIs against conversations recorded from pi 0.73.1 (`fixtures/<api>/`,
//! see `tests/support/recorded.rs`): the same request bytes for the same context, and the same
//! final assistant message from the same response bytes (text, thinking, tool calls with
//! streamed arguments, usage and cost, HTTP errors), whole and re-chunked down to one byte.

mod support;

use support::recorded::{assert_bodies, assert_headers, assert_replays};

const CHUNKS: &[usize] = &[0, 1, 7];

// ------------------------------------------------------------------------------------------------
// mistral-conversations

const MISTRAL: &[&str] = &[
    "mistral/tool_magistral.json",
    "mistral/tool_small.json",
    "mistral/tool_devstral.json",
    "mistral/image_textonly.json",
    "mistral/image_vision.json",
    "mistral/error_400.json",
    "mistral/error_429.json",
    "mistral/error_503.json",
];

#[test]
fn mistral_bodies_match_pi() {
    for f in MISTRAL {
        assert_bodies(f, "http://127.0.0.1:9", "sk-mistral-test", &|_| {});
    }
}

#[test]
fn mistral_messages_match_pi() {
    for f in MISTRAL {
        assert_replays(f, "sk-mistral-test", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// bedrock-converse-stream

const BEDROCK: &[&str] = &[
    "bedrock/tool_sonnet45.json",
    "bedrock/tool_opus46.json",
    "bedrock/tool_deepseek.json",
    "bedrock/thinking_nosig.json",
    "bedrock/image_nova.json",
    "bedrock/image_textonly.json",
    "bedrock/error_400.json",
    "bedrock/error_429.json",
    "bedrock/error_503.json",
    "bedrock/error_403.json",
    "bedrock/error_500_plain.json",
    "bedrock/error_500_json_notype.json",
    "bedrock/error_400_empty.json",
    "bedrock/error_400_type_in_body.json",
    "bedrock/stream_throttling.json",
    "bedrock/stream_model_error.json",
    "bedrock/stream_max_tokens.json",
    "bedrock/stream_guardrail.json",
];

#[test]
fn bedrock_bodies_match_pi() {
    for f in BEDROCK {
        assert_bodies(f, "http://127.0.0.1:9", "<authenticated>", &|_| {});
    }
}

#[test]
fn bedrock_messages_match_pi() {
    for f in BEDROCK {
        assert_replays(f, "<authenticated>", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// azure-openai-responses and openai-responses

const AZURE: &[&str] = &[
    "responses/azure_tool.json",
    "responses/azure_nonreasoning.json",
    "responses/azure_off.json",
    "responses/azure_incomplete.json",
    "responses/azure_failed.json",
    "responses/azure_error_400.json",
    "responses/azure_error_429.json",
    "responses/azure_error_503.json",
];

const OPENAI_RESPONSES: &[&str] = &["responses/openai_tool.json", "responses/openai_off.json"];

#[test]
fn azure_bodies_match_pi() {
    for f in AZURE {
        assert_bodies(f, "http://127.0.0.1:9", "azure-key-test", &|_| {});
    }
}

#[test]
fn azure_messages_match_pi() {
    for f in AZURE {
        assert_replays(f, "azure-key-test", CHUNKS);
    }
}

#[test]
fn openai_responses_bodies_match_pi() {
    for f in OPENAI_RESPONSES {
        assert_bodies(f, "http://127.0.0.1:9/v1", "sk-openai-test", &|_| {});
    }
}

#[test]
fn openai_responses_messages_match_pi() {
    for f in OPENAI_RESPONSES {
        assert_replays(f, "sk-openai-test", CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// openai-codex-responses

/// The access token of the recorded login (a JWT naming ChatGPT account `acc-42`).
const CODEX_TOKEN: &str = "eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOiB7ImNoYXRncHRfYWNjb3VudF9pZCI6ICJhY2MtNDIifSwgImV4cCI6IDQxMDI0NDQ4MDB9.sig";

const CODEX: &[&str] = &[
    "codex/codex_tool.json",
    "codex/codex_off.json",
    "codex/codex_incomplete.json",
    "codex/codex_failed.json",
    "codex/codex_error_event.json",
    "codex/codex_error_400.json",
    "codex/codex_error_429.json",
    "codex/codex_error_503.json",
];

#[test]
fn codex_bodies_match_pi() {
    for f in CODEX {
        assert_bodies(f, "http://127.0.0.1:9/backend-api", CODEX_TOKEN, &|_| {});
    }
}

#[test]
fn codex_messages_match_pi() {
    for f in CODEX {
        assert_replays(f, CODEX_TOKEN, CHUNKS);
    }
}

// ------------------------------------------------------------------------------------------------
// google-vertex and google-generative-ai

const VERTEX: &[&str] = &[
    "vertex/key_tool.json",
    "vertex/key_flash3.json",
    "vertex/key_off.json",
    "vertex/key_max.json",
    "vertex/key_safety.json",
    "vertex/key_error_400.json",
    "vertex/key_error_429.json",
    "vertex/key_error_503.json",
];

#[test]
fn vertex_bodies_match_pi() {
    for f in VERTEX {
        assert_bodies(f, "http://127.0.0.1:9", "vertex-api-key", &|_| {});
    }
}

#[test]
fn vertex_messages_match_pi() {
    for f in VERTEX {
        assert_replays(f, "vertex-api-key", CHUNKS);
    }
}

#[test]
fn gemini_bodies_and_messages_match_pi() {
    let f = "google/recorded_tool.json";
    assert_bodies(f, "http://127.0.0.1:9/v1beta", "gemini-key", &|_| {});
    assert_replays(f, "gemini-key", CHUNKS);
}

// ------------------------------------------------------------------------------------------------
// github-copilot (three APIs with Copilot's auth and headers)

const COPILOT: &[&str] = &[
    "copilot/copilot_anthropic.json",
    "copilot/copilot_completions.json",
    "copilot/copilot_responses.json",
];

#[test]
fn copilot_requests_match_pi() {
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
                "user-agent",
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
