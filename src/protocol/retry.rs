//! Automatic retry of failed LLM requests.

/// Automatic retry of failed LLM requests.
#[derive(Debug)]
pub struct Retry {
    /// Which errors are transient.
    pub transient: TransientErrors,
    /// How long to wait before an attempt.
    pub delay: RetryDelay,
}

/// Which errors are transient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransientErrors {
    /// 0.73.1's pattern list.
    Base,
    /// 0.87.1: 0.73.1's list plus network errors, less quota and billing errors.
    WithNetworkLessQuota,
    /// 1.6.0: pi-ai's wider list (bare socket error codes, `connection closed`, gateway and
    /// upstream wordings, status codes only as whole numbers), less a wider set of usage limits.
    Wider,
}

/// How long to wait before an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDelay {
    /// 0.73.1: a provider's `retry-after` when given, else `baseDelayMs * 2^(attempt-1)`;
    /// capped at `maxDelayMs`.
    RetryAfterOrBackoff,
    /// 0.87.1: `baseDelayMs * 2^(attempt-1)` capped at `maxAgentDelayMs`; `retry-after` is not
    /// consulted at this level.
    Backoff,
}
