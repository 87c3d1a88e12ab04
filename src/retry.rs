//! Auto-retry: which failures are transient (the reference's pattern list, 0.73.1) and the
//! back-off schedule. The delay itself runs on a [`crate::io::timer`] thread.

use crate::protocol::TransientErrors;

/// `abort` / `abort_retry` during the delay.
pub const RETRY_CANCELLED: &str = "Retry cancelled";

/// The reference's transient-error pattern (0.73.1, `agent-session.js`), one alternative per
/// entry; see [`js_regex`] for how JavaScript's meaning is kept.
const TRANSIENT: &[&str] = &[
    "overloaded",
    "provider{DOT}?returned{DOT}?error",
    "rate{DOT}?limit",
    "too many requests",
    "429",
    "500",
    "502",
    "503",
    "504",
    "service{DOT}?unavailable",
    "server{DOT}?error",
    "internal{DOT}?error",
    "network{DOT}?error",
    "connection{DOT}?error",
    "connection{DOT}?refused",
    "connection{DOT}?lost",
    "websocket{DOT}?closed",
    "websocket{DOT}?error",
    "other side closed",
    "fetch failed",
    "upstream{DOT}?connect",
    "reset before headers",
    "socket hang up",
    "ended without",
    "http2 request did not get a response",
    "timed? out",
    "timeout",
    "terminated",
    "retry delay",
    // pith's own stall timeout wording ("... stalled: no data for N s").
    "stalled",
];

/// One regex for JavaScript patterns written in lowercase ASCII, to be matched against an
/// ASCII-lowercased message (JavaScript's `/i` never folds a non-ASCII character to ASCII, so
/// that is exactly `/i`). `{DOT}` is JavaScript's `.` (any character but a line terminator),
/// `{SPACE}` its `\s`. Only built when an error is classified, so it is not kept around.
pub(crate) fn js_regex(alternatives: &[&str]) -> regex::Regex {
    const DOT: &str = r"[^\n\r\x{2028}\x{2029}]";
    const SPACE: &str = r"[\t\n\x0B\x0C\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]";
    const NOTSPACE: &str = r"[^\t\n\x0B\x0C\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]";
    let pattern = alternatives
        .join("|")
        .replace("{DOT}", DOT)
        .replace("{SPACE}", SPACE)
        .replace("{NOTSPACE}", NOTSPACE);
    // The patterns are constants: a failure here is a bug caught by the unit tests.
    regex::Regex::new(&pattern)
        .unwrap_or_else(|_| regex::Regex::new("[^\\s\\S]").expect("empty class"))
}

/// Does the JavaScript pattern (lowercase, `/i`) occur anywhere in `text`?
pub fn matches(pattern: &str, text: &str) -> bool {
    js_regex(&[pattern]).is_match(&text.to_ascii_lowercase())
}

/// A transient failure worth retrying (context overflow is excluded by the caller).
pub fn is_transient(error_message: &str) -> bool {
    js_regex(TRANSIENT).is_match(&error_message.to_ascii_lowercase())
}

/// pi 0.87.1's additions to the transient patterns.
const TRANSIENT_NETWORK: &[&str] = &[
    "currently experiencing high demand",
    "520",
    "524",
    "exceeded request buffer limit while retrying upstream",
    "getaddrinfo",
    "enotfound",
    "eai_again",
    "socket connection was closed",
    "stream ended before message_stop",
    "stream ended before a terminal response event",
    "you can retry your request",
    "try your request again",
    "please retry your request",
    "resourceexhausted",
];

/// pi 0.87.1: quota and billing exhaustion is never retried, whatever else the text says.
const NOT_TRANSIENT_QUOTA: &[&str] = &[
    "gousagelimiterror",
    "freeusagelimiterror",
    "monthly usage limit reached",
    "available balance",
    "insufficient_quota",
    "out of budget",
    "quota exceeded",
    "billing",
];

/// pi 0.87.1's `isRetryableAssistantError` text test.
fn is_transient_network_not_quota(error_message: &str) -> bool {
    let h = error_message.to_ascii_lowercase();
    !js_regex(NOT_TRANSIENT_QUOTA).is_match(&h)
        && (js_regex(TRANSIENT).is_match(&h) || js_regex(TRANSIENT_NETWORK).is_match(&h))
}

/// pi 1.6.0's retryable patterns (`RETRYABLE_PROVIDER_ERROR_PATTERN`). JavaScript's
/// look-behind/look-ahead around the status codes and socket codes are written as a consumed
/// neighbour (`{NB}`/`{NA}`, or start/end of text): the same yes/no for `is_match`.
const TRANSIENT_WIDER: &[&str] = &[
    "overloaded",
    "server_busy",
    "servers are currently busy",
    "currently experiencing high demand",
    "model is at capacity",
    "rate{DOT}?limit",
    "too many requests",
    "(?:^|[^a-z0-9])(?:429|500|502|503|504|520|524)(?:[^a-z0-9]|$)",
    "service{DOT}?(?:is{DOT}?)?(?:temporarily{DOT}?)?unavailable",
    "server{DOT}?error",
    "internal{DOT}?error",
    "provider{DOT}?returned{DOT}?(?:an{DOT}?)?error",
    "exceeded request buffer limit while retrying upstream",
    "unable to forward upstream",
    "upstream{DOT}?request{DOT}?failed",
    "upstream_stream_read_error",
    "stream was interrupted",
    "http/?2 stream failed",
    "network{DOT}?error",
    "connection{DOT}?error",
    "connection{DOT}?refused",
    "connection{DOT}?lost",
    "connection{DOT}?closed",
    "other side closed",
    "fetch failed",
    "request to {NOTSPACE}+ failed, reason:",
    "getaddrinfo",
    "(?:^|[^a-z0-9_])(?:econnreset|econnaborted|econnrefused|etimedout|epipe)(?:[^a-z0-9_]|$)",
    "connection reset by peer",
    "enotfound",
    "eai_again",
    "upstream{DOT}?connect",
    "reset before headers",
    "socket hang up",
    "socket connection was closed",
    "timed? out",
    "timeout",
    "terminated",
    "websocket{DOT}?closed",
    "websocket{DOT}?error",
    "websocket{DOT}?connection{DOT}?limit{DOT}?reached",
    "ended without",
    "stream ended before message_stop",
    "stream ended before a terminal response event",
    "http2 request did not get a response",
    "stream disconnected before completion",
    "cut short after the reply had begun",
    "pending stream has been canceled",
    "retry delay",
    "you can retry your request",
    "try your request again",
    "please retry your request",
    "resourceexhausted",
    "subscription_sharing_usage_unavailable",
    "subscription_sharing_user_unavailable",
    // pith's own stall timeout wording ("... stalled: no data for N s").
    "stalled",
];

/// pi 1.6.0's usage limits that are never retried (`NON_RETRYABLE_PROVIDER_LIMIT_ERROR_PATTERN`).
const NOT_TRANSIENT_LIMITS: &[&str] = &[
    "gousagelimiterror",
    "freeusagelimiterror",
    "monthly usage limit reached",
    "available balance",
    "insufficient_quota",
    "out of budget",
    "quota exceeded",
    "billing",
    "subscription_sharing_usage_limit_exceeded",
    "subscription_sharing_workplace_individual_usage_limit_exceeded",
    "\"code\"{SPACE}*:{SPACE}*\"?1308(?:[^0-9]|$)",
];

/// pi 1.6.0's `isRetryableAssistantError` text test.
fn is_transient_wider(error_message: &str) -> bool {
    let h = error_message.to_ascii_lowercase();
    !js_regex(NOT_TRANSIENT_LIMITS).is_match(&h) && js_regex(TRANSIENT_WIDER).is_match(&h)
}

/// Whether `error_message` is transient under the version's [`TransientErrors`].
pub fn is_transient_with(errors: TransientErrors, error_message: &str) -> bool {
    match errors {
        TransientErrors::Base => is_transient(error_message),
        TransientErrors::WithNetworkLessQuota => is_transient_network_not_quota(error_message),
        TransientErrors::Wider => is_transient_wider(error_message),
    }
}

/// pi 0.87.1's `retryDelayMs`: `baseDelayMs * 2^(attempt-1)` capped at `maxAgentDelayMs`; a
/// provider's `retry-after` is not consulted at this level.
pub fn backoff_ms(base_ms: u64, attempt: u32, max_ms: u64) -> u64 {
    base_ms
        .saturating_mul(1u64 << (attempt.saturating_sub(1)).min(30))
        .min(max_ms)
}

/// `baseDelayMs * 2^(attempt-1)`, capped at `max_ms`; a provider's `retry-after` wins when given
/// (also capped).
pub fn delay_ms(base_ms: u64, attempt: u32, retry_after_ms: Option<u64>, max_ms: u64) -> u64 {
    match retry_after_ms {
        Some(ms) => ms.min(max_ms),
        None => base_ms.saturating_mul(1u64 << (attempt.saturating_sub(1)).min(30)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors() {
        for e in [
            "529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
            "429 Rate limited",
            "500 upstream exploded",
            "terminated",
            "Connection error.",
            "Request timed out.",
            "request timeout",
            "Service Unavailable",
        ] {
            assert!(is_transient(e), "{e}");
        }
        for e in [
            "400 bad request",
            "401 invalid x-api-key",
            "prompt is too long",
        ] {
            assert!(!is_transient(e), "{e}");
        }
    }

    #[test]
    fn transient_errors_with_network_less_quota() {
        assert!(is_transient_with(
            TransientErrors::WithNetworkLessQuota,
            "529 overloaded"
        ));
        assert!(is_transient_with(
            TransientErrors::WithNetworkLessQuota,
            "getaddrinfo ENOTFOUND api.example.com"
        ));
        assert!(!is_transient("getaddrinfo ENOTFOUND api.example.com"));
        assert!(!is_transient_with(
            TransientErrors::WithNetworkLessQuota,
            "429 insufficient_quota: rate limit"
        ));
        assert!(is_transient("429 insufficient_quota: rate limit"));
        assert_eq!(backoff_ms(2000, 1, 60000), 2000);
        assert_eq!(backoff_ms(2000, 7, 60000), 60000);
    }

    #[test]
    fn transient_errors_per_profile() {
        let e = "getaddrinfo ENOTFOUND api.example.com";
        assert!(!is_transient_with(TransientErrors::Base, e));
        assert!(is_transient_with(TransientErrors::WithNetworkLessQuota, e));
    }

    #[test]
    fn transient_errors_wider() {
        let yes = |e: &str| is_transient_with(TransientErrors::Wider, e);
        for e in [
            "Connection closed.",
            "read ECONNRESET",
            "write EPIPE",
            "connect ETIMEDOUT 1.2.3.4:443",
            "Claude Code's stream from Anthropic was cut short after the reply had begun",
            "server_busy",
            "The upstream provider returned an error",
            "Selected model is at capacity",
            "Unable to forward upstream stream",
            "The service is temporarily unavailable",
            "529 overloaded",
            "429 too many",
            "HTTP 503",
            "request to https://oauth2.googleapis.com/token failed, reason: ",
        ] {
            assert!(yes(e), "{e}");
        }
        for e in [
            "400 bad request",
            "request id req_4290001",
            "wrote 15024 bytes",
            "ECONNRESETX",
            "429 insufficient_quota",
            "{\"code\": \"1308\", \"message\": \"limit\"} 429",
            "subscription_sharing_usage_limit_exceeded: 503",
            "prompt is too long",
        ] {
            assert!(!yes(e), "{e}");
        }
        // A longer code after 1308 is not the usage limit.
        assert!(yes("{\"code\": 13080} 503"));
        // 0.87.1 did not know these, and took a status code anywhere in the text.
        assert!(!is_transient_with(
            TransientErrors::WithNetworkLessQuota,
            "read ECONNRESET"
        ));
        assert!(is_transient_with(
            TransientErrors::WithNetworkLessQuota,
            "request id req_4290001"
        ));
    }

    #[test]
    fn javascript_meaning() {
        assert!(matches("rate{DOT}?limit", "RATE_LIMIT"));
        assert!(matches("rate{DOT}?limit", "ratelimit"));
        assert!(!matches("rate{DOT}?limit", "rate\nlimit"));
        assert!(!matches("rate{DOT}?limit", "rate\u{2028}limit"));
        assert!(matches("timed? out", "time out"));
        assert!(!matches("timed? out", "timedout"));
        // JavaScript's /i does not fold the Kelvin sign or the long s to ASCII.
        assert!(!is_transient("\u{17f}ervice unavailable"));
        assert!(is_transient("SERVICE UNAVAILABLE"));
    }

    #[test]
    fn delays() {
        assert_eq!(delay_ms(2000, 1, None, 60000), 2000);
        assert_eq!(delay_ms(2000, 3, None, 60000), 8000);
        assert_eq!(delay_ms(2000, 1, Some(5000), 60000), 5000);
        assert_eq!(delay_ms(2000, 1, Some(500_000), 60000), 60000);
    }
}
