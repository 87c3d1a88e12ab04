//! Row types of the built-in model table (`builtin.rs`).
//!
//! The table is plain `const` data so start-up costs one pass that turns rows into [`Model`]s; no
//! JSON is parsed for built-ins (only the two or three `compat` snippets, on demand).

use crate::llm::{Model, ModelCost};
use crate::message::ThinkingLevel;

/// One built-in model. Provider-wide facts (`api`, `baseUrl`) live in [`BuiltinProvider`].
pub(super) struct BuiltinModel {
    pub id: &'static str,
    pub name: &'static str,
    pub reasoning: bool,
    /// `true` = `["text","image"]`, `false` = `["text"]`.
    pub image: bool,
    /// input, output, cacheRead, cacheWrite (USD per million tokens).
    pub cost: [f64; 4],
    pub context_window: u64,
    pub max_tokens: u64,
    pub thinking: Option<&'static [(ThinkingLevel, Option<&'static str>)]>,
    /// The reference's `compat` object as JSON text.
    pub compat: Option<&'static str>,
    /// When it differs from the provider's.
    pub api: Option<&'static str>,
    /// When it differs from the provider's.
    pub base_url: Option<&'static str>,
    /// Request headers the model always sends (GitHub Copilot's editor identification).
    pub headers: Option<&'static [(&'static str, &'static str)]>,
    /// pi 0.87.1's table: the thinking level map is shown in the model's JSON.
    pub show_thinking_map: bool,
    /// pi 0.87.1's tiered prices.
    pub tiers: Option<&'static [crate::llm::CostTier]>,
    /// pi 0.87.1's `promptCache` as JSON text.
    pub prompt_cache: Option<&'static str>,
    /// pi 0.87.1's `inputLimits` as JSON text.
    pub input_limits: Option<&'static str>,
}

/// Row constructor, kept short so the table stays one line per model.
pub(super) const fn m(
    id: &'static str,
    name: &'static str,
    reasoning: bool,
    image: bool,
    cost: [f64; 4],
    context_window: u64,
    max_tokens: u64,
) -> BuiltinModel {
    BuiltinModel {
        id,
        name,
        reasoning,
        image,
        cost,
        context_window,
        max_tokens,
        thinking: None,
        compat: None,
        api: None,
        base_url: None,
        headers: None,
        show_thinking_map: false,
        tiers: None,
        prompt_cache: None,
        input_limits: None,
    }
}

impl BuiltinModel {
    pub(super) const fn thinking(
        self,
        map: &'static [(ThinkingLevel, Option<&'static str>)],
    ) -> Self {
        BuiltinModel {
            thinking: Some(map),
            ..self
        }
    }

    pub(super) const fn api(self, api: &'static str) -> Self {
        BuiltinModel {
            api: Some(api),
            ..self
        }
    }

    pub(super) const fn base_url(self, url: &'static str) -> Self {
        BuiltinModel {
            base_url: Some(url),
            ..self
        }
    }

    pub(super) const fn headers(self, headers: &'static [(&'static str, &'static str)]) -> Self {
        BuiltinModel {
            headers: Some(headers),
            ..self
        }
    }

    pub(super) const fn compat(self, json: &'static str) -> Self {
        BuiltinModel {
            compat: Some(json),
            ..self
        }
    }

    pub(super) const fn show_thinking_map(self) -> Self {
        BuiltinModel {
            show_thinking_map: true,
            ..self
        }
    }

    pub(super) const fn tiers(self, tiers: &'static [crate::llm::CostTier]) -> Self {
        BuiltinModel {
            tiers: Some(tiers),
            ..self
        }
    }

    pub(super) const fn prompt_cache(self, json: &'static str) -> Self {
        BuiltinModel {
            prompt_cache: Some(json),
            ..self
        }
    }

    pub(super) const fn input_limits(self, json: &'static str) -> Self {
        BuiltinModel {
            input_limits: Some(json),
            ..self
        }
    }

    pub(super) fn to_model(&self, provider: &BuiltinProvider) -> Model {
        let input = if self.image {
            vec!["text".to_string(), "image".to_string()]
        } else {
            vec!["text".to_string()]
        };
        let compat = self.compat.and_then(|c| {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(c).ok()
        });
        Model {
            id: self.id.to_string(),
            name: self.name.to_string(),
            api: self.api.unwrap_or(provider.api).to_string(),
            provider: provider.name.to_string(),
            base_url: self.base_url.unwrap_or(provider.base_url).to_string(),
            reasoning: self.reasoning,
            input,
            cost: ModelCost {
                input: self.cost[0],
                output: self.cost[1],
                cache_read: self.cost[2],
                cache_write: self.cost[3],
                tiers: self.tiers,
            },
            context_window: self.context_window,
            max_tokens: self.max_tokens,
            headers: self.headers.map(|h| {
                h.iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                    .collect()
            }),
            compat,
            thinking_level_map_json: self.thinking.filter(|_| self.show_thinking_map).map(|map| {
                serde_json::Value::Object(
                    map.iter()
                        .map(|(l, v)| {
                            (
                                l.as_str().to_string(),
                                v.map_or(serde_json::Value::Null, |v| v.into()),
                            )
                        })
                        .collect(),
                )
            }),
            prompt_cache: self.prompt_cache.and_then(|j| serde_json::from_str(j).ok()),
            input_limits: self.input_limits.and_then(|j| serde_json::from_str(j).ok()),
        }
    }
}

/// A built-in provider and its models in the reference's file order.
pub(super) struct BuiltinProvider {
    pub name: &'static str,
    pub api: &'static str,
    pub base_url: &'static str,
    pub models: &'static [BuiltinModel],
}
