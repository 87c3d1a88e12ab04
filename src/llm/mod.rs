//! Talking to LLM providers.
//!
//! The contract with the rest of pith is small: the state machine builds an [`LlmRequest`] and
//! calls [`stream::spawn`]; a dedicated OS thread performs the blocking HTTP request, decodes the
//! provider's SSE stream with the API-specific decoder, and hands every [`StreamEvent`] to a sink
//! (the machine's channel). The thread never touches session state. Cancelling is dropping or
//! calling [`stream::StreamHandle::cancel`]; events that arrive after that are ignored by the
//! machine (generation counter).

pub mod anthropic;
pub mod api;
pub mod aws;
pub mod azure_openai;
pub mod bedrock;
pub mod body;
pub mod cloudflare;
pub mod cost;
pub mod error_body;
pub mod estimate;
pub mod faux;
pub mod google;
pub mod google_auth;
pub mod google_vertex;
pub mod http;
pub mod lockfile;
pub mod messages;
pub mod mistral;
pub mod model_json;
pub mod models;
pub mod oauth;
pub mod openai_codex;
pub mod openai_completions;
pub mod openai_responses;
pub mod sse;
pub mod stream;
pub mod strict;
pub mod tool_args;
pub mod transcript;
pub mod transform;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{AssistantMessage, ThinkingLevel, ToolCall, Usage};
pub use messages::LlmMessages;

/// Prices in USD per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCost {
    #[serde(serialize_with = "crate::message::js_f64")]
    pub input: f64,
    #[serde(serialize_with = "crate::message::js_f64")]
    pub output: f64,
    #[serde(rename = "cacheRead", serialize_with = "crate::message::js_f64")]
    pub cache_read: f64,
    #[serde(rename = "cacheWrite", serialize_with = "crate::message::js_f64")]
    pub cache_write: f64,
    /// pi 0.87.1's tiered prices: above `inputTokensAbove` input tokens (input + cache reads +
    /// cache writes) a request is priced at the tier's rates. Static: the built-in table's, or
    /// a models.json's (parsed once per process).
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub tiers: Option<&'static [CostTier]>,
}

/// One price tier (pi 0.87.1's `cost.tiers[]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CostTier {
    #[serde(rename = "inputTokensAbove", serialize_with = "crate::message::js_f64")]
    pub input_tokens_above: f64,
    #[serde(serialize_with = "crate::message::js_f64")]
    pub input: f64,
    #[serde(serialize_with = "crate::message::js_f64")]
    pub output: f64,
    #[serde(rename = "cacheRead", serialize_with = "crate::message::js_f64")]
    pub cache_read: f64,
    #[serde(rename = "cacheWrite", serialize_with = "crate::message::js_f64")]
    pub cache_write: f64,
}

impl ModelCost {
    /// The rates for a request with `input_tokens` (input + cache reads + cache writes): the
    /// highest tier whose threshold it exceeds (pi 0.87.1's `calculateCost`), else the base.
    pub fn rates_for(&self, input_tokens: u64) -> (f64, f64, f64, f64) {
        let mut rates = (self.input, self.output, self.cache_read, self.cache_write);
        let mut matched = -1.0;
        for t in self.tiers.unwrap_or(&[]) {
            if input_tokens as f64 > t.input_tokens_above && t.input_tokens_above > matched {
                rates = (t.input, t.output, t.cache_read, t.cache_write);
                matched = t.input_tokens_above;
            }
        }
        rates
    }
}

/// A model as the reference serialises it (`get_state.model`, `get_available_models`, ...; the
/// JSON is written by `model_json.rs`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Model {
    pub id: String,
    pub name: String,
    pub api: String,
    pub provider: String,
    #[serde(rename = "baseUrl")]
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCost,
    #[serde(rename = "contextWindow")]
    pub context_window: u64,
    #[serde(rename = "maxTokens")]
    pub max_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<serde_json::Map<String, Value>>,
    /// pi 0.87.1's `promptCache` (cache lifetimes in seconds), shown as given.
    #[serde(skip)]
    pub prompt_cache: Option<&'static str>,
    /// pi 0.87.1's `inputLimits` (request size and image limits), shown as given.
    #[serde(skip)]
    pub input_limits: Option<&'static str>,
    /// Its `thinkingLevelMap` and the place of its optional keys in its JSON.
    #[serde(skip)]
    pub shape: model_json::ModelShape,
}

/// `level` if `available` has it, else the first available level above it, else below it.
pub fn clamp_thinking(available: &[ThinkingLevel], level: ThinkingLevel) -> ThinkingLevel {
    if available.contains(&level) {
        return level;
    }
    let all = ThinkingLevel::ALL;
    let pos = all.iter().position(|l| *l == level).unwrap_or(0);
    all[pos..]
        .iter()
        .chain(all[..pos].iter().rev())
        .copied()
        .find(|l| available.contains(l))
        .unwrap_or(ThinkingLevel::Off)
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// pi 0.87.1's `constrainedSampling` request (`--compat 0.87` only; see [`strict`]).
    #[serde(skip)]
    pub constrained_sampling: Option<Value>,
}

/// Everything one LLM call needs. Built by the state machine, consumed by the streaming thread.
#[derive(Clone, Debug)]
pub struct LlmRequest {
    pub model: Model,
    /// Resolved API key (never logged, never serialised into events).
    pub api_key: Option<String>,
    pub system_prompt: String,
    /// The history, shared with the agent's context (`messages.rs`).
    pub messages: LlmMessages,
    pub tools: Vec<ToolSchema>,
    /// `Off` = no reasoning parameters.
    pub thinking: ThinkingLevel,
    pub session_id: Option<String>,
    /// Overrides `model.max_tokens` (e.g. the compaction summary request).
    pub max_tokens: Option<u64>,
    pub timeouts: Timeouts,
    /// Script for the offline `faux` api (see `docs/faux.md`); `None` = canned answer.
    pub faux_script: Option<std::path::PathBuf>,
    /// The generation of pi's provider SDKs whose request and answer pith imitates (headers,
    /// body fields, error wording, usage formulas): the profile's `llm.sdk`. Each API turns it
    /// into its own dialect once per request.
    pub sdk: crate::protocol::SdkGeneration,
    /// Write no prompt-cache breakpoints (pi 0.87.1's summary requests).
    pub no_cache: bool,
    /// A finished tool call whose arguments text is not a JSON object gets `argumentsError`
    /// and `arguments: {}` (the profile's `llm.tool_arguments_error`), instead of what parses.
    pub tool_arguments_error: bool,
    /// What some APIs need beyond the model and the key.
    pub extra: RequestExtra,
}

/// Per-request facts from the registry and the credential store that only some APIs use.
#[derive(Clone, Default)]
pub struct RequestExtra {
    /// A stored OAuth login to use (and refresh) instead of `api_key` ([`oauth`]).
    pub oauth: Option<oauth::OAuthLogin>,
    /// The model's `thinkingLevelMap` (provider-specific values per level).
    pub thinking_map: Option<models::ThinkingLevelMap>,
    /// The environment cloud APIs read their settings and ambient credentials from (AWS_*,
    /// AZURE_OPENAI_*, GOOGLE_*); `None` = the process environment.
    pub env: Option<models::Env>,
    /// Key and headers still to resolve because a `!command` gives them: the request's prepare
    /// worker runs it ([`models::AuthPlan::resolve`]), never the state machine.
    pub auth: Option<models::AuthPlan>,
    /// Settings `thinkingBudgets` (`minimal`, `low`, `medium`, `high`): token budgets that
    /// replace pi's defaults for the agent's turns (not for summaries, as pi).
    pub thinking_budgets: ThinkingBudgets,
}

/// Custom thinking budgets by level (`minimal`, `low`, `medium`, `high`); `None` = pi's default.
pub type ThinkingBudgets = [Option<u64>; 4];

/// pi's thinking budget of `level` (`xhigh` and `max` count as `high`): the settings' value if
/// it names one, else 1024 / 2048 / 8192 / 16384.
pub fn thinking_budget(level: ThinkingLevel, custom: &ThinkingBudgets) -> u64 {
    let (i, default) = match level {
        ThinkingLevel::Minimal => (0, 1024),
        ThinkingLevel::Low => (1, 2048),
        ThinkingLevel::Medium => (2, 8192),
        _ => (3, 16384),
    };
    custom[i].unwrap_or(default)
}

impl RequestExtra {
    /// A variable of [`RequestExtra::env`] (the process environment when unset).
    pub fn var(&self, name: &str) -> Option<String> {
        match &self.env {
            Some(env) => env(name),
            None => std::env::var(name).ok(),
        }
    }
}

impl std::fmt::Debug for RequestExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestExtra")
            .field("oauth", &self.oauth)
            .field("thinking_map", &self.thinking_map)
            .field("env", &self.env.as_ref().map(|_| "<env>"))
            .field("auth", &self.auth)
            .field("thinking_budgets", &self.thinking_budgets)
            .finish()
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub connect: std::time::Duration,
    /// No byte for this long ends the stream with an error.
    pub stall: std::time::Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: std::time::Duration::from_secs(30),
            stall: std::time::Duration::from_secs(120),
        }
    }
}

/// The reference's `AssistantMessageEvent`, as produced by a provider decoder. Every `message_update`
/// the agent emits corresponds to one of the block events; `Start`, `Done` and `Error` map to
/// `message_start` / `message_end`.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The stream started; `partial` is the empty message (model info, timestamp).
    Start {
        partial: AssistantMessage,
    },
    TextStart {
        index: usize,
    },
    TextDelta {
        index: usize,
        delta: String,
    },
    TextEnd {
        index: usize,
        content: String,
        signature: Option<String>,
    },
    ThinkingStart {
        index: usize,
        /// The signature the block opens with: pi's decoders set one at the block's start
        /// (Anthropic: the block's `signature`, else `""`; OpenAI-compatible: the reasoning
        /// field's name), so a block cut off before its end keeps it.
        signature: Option<String>,
    },
    ThinkingDelta {
        index: usize,
        delta: String,
    },
    ThinkingEnd {
        index: usize,
        content: String,
        signature: Option<String>,
    },
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A raw fragment of the arguments JSON.
    ToolCallDelta {
        index: usize,
        delta: String,
    },
    ToolCallEnd {
        index: usize,
        tool_call: ToolCall,
    },
    /// Usage / response id known so far (no `message_update` is emitted for this).
    Meta {
        usage: Usage,
        response_id: Option<String>,
    },
    /// Final message, `stopReason` stop | length | toolUse.
    Done {
        message: AssistantMessage,
    },
    /// Final message, `stopReason` error | aborted, with `errorMessage`. `retry_after_ms` carries a
    /// provider's `retry-after` hint when the failure was an HTTP error that gave one.
    Error {
        message: AssistantMessage,
        retry_after_ms: Option<u64>,
    },
}
