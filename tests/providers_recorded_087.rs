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
