//! Row types of the built-in model tables (`catalog_073.rs`: pi 0.73.1's, `catalog_087.rs`: pi
//! 0.87.1's).
//!
//! The table is text, one line per model, so the binary carries no struct (and no relocated
//! pointer) per row; building the registry parses the lines it needs. No JSON is parsed for
//! built-ins except the few distinct `compat` snippets.

use crate::llm::{CostTier, Model, ModelCost};
use crate::message::ThinkingLevel;

/// One built-in model (a parsed row). Provider-wide facts (`api`, `baseUrl`) live in [`BuiltinProvider`].
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
    /// pi 0.87.1's tiered prices.
    pub tiers: Option<&'static [CostTier]>,
    /// pi 0.87.1's `promptCache` as JSON text.
    pub prompt_cache: Option<&'static str>,
    /// pi 0.87.1's `inputLimits` as JSON text.
    pub input_limits: Option<&'static str>,
    /// pi 0.87.1: the model's keys in their JSON order (`model_json.rs`'s letters).
    pub order: Option<&'static str>,
}

/// The shared values a table's rows point at by index.
pub(super) struct Tables {
    pub thinking: &'static [&'static [(ThinkingLevel, Option<&'static str>)]],
    pub compat: &'static [&'static str],
    pub headers: &'static [&'static [(&'static str, &'static str)]],
    pub tiers: &'static [&'static [CostTier]],
    pub json: &'static [&'static str],
    pub orders: &'static [&'static str],
}

/// One pi version's built-in table: its providers and the values their rows share.
pub(super) struct Table {
    pub providers: &'static [BuiltinProvider],
    pub tables: Tables,
    /// Each provider's default model (`defaultModelPerProvider`), in priority order.
    pub defaults: &'static [(&'static str, &'static str)],
    /// models.json: a provider that defines custom models must give `apiKey` (pi 0.73.1's
    /// `validateConfig`); pi 0.87.1 and 1.6.0 accept it without one (its models then have no
    /// key until one is configured: not in `get_available_models`, a prompt fails `No API key
    /// found for <provider>.`).
    pub custom_models_need_api_key: bool,
    /// An extension's `registerProvider` models keep the definition's keys first, then `api`,
    /// `provider`, `baseUrl` (pi 1.6.0 spreads the definition); before, models.json's shape.
    pub extension_models_in_definition_order: bool,
    /// What `registerProvider` checks of a provider that defines models, and its error texts.
    pub extension_provider_checks: super::config::ExtensionProviderChecks,
    /// How `--model` chooses among models (pi's `resolveCliModel` of that version).
    pub cli_resolution: super::resolve::CliResolution,
    /// The settings' `defaultProvider`/`defaultModel` is the start-up model only when its
    /// provider has a credential (pi 0.87.1, 1.6.0); pi 0.73.1 takes it regardless.
    pub settings_default_needs_auth: bool,
}

/// pi 0.73.1's table.
pub(super) const V073: Table = Table {
    providers: super::catalog_073::PROVIDERS,
    tables: Tables {
        thinking: super::catalog_073::THINKING,
        compat: super::catalog_073::COMPAT,
        headers: super::catalog_073::HEADERS,
        tiers: &[],
        json: &[],
        orders: &[],
    },
    defaults: super::resolve::DEFAULT_MODEL_PER_PROVIDER,
    custom_models_need_api_key: true,
    extension_models_in_definition_order: false,
    extension_provider_checks: super::config::ExtensionProviderChecks::V073,
    cli_resolution: super::resolve::CliResolution::FirstMatch,
    settings_default_needs_auth: false,
};

/// pi 0.87.1's table (`--compat 0.87`).
pub(super) const V087: Table = Table {
    providers: super::catalog_087::PROVIDERS,
    tables: Tables {
        thinking: super::catalog_087::THINKING,
        compat: super::catalog_087::COMPAT,
        headers: super::catalog_087::HEADERS,
        tiers: super::catalog_087::TIERS,
        json: super::catalog_087::JSON,
        orders: super::catalog_087::ORDERS,
    },
    defaults: super::resolve::DEFAULT_MODEL_PER_PROVIDER,
    custom_models_need_api_key: false,
    extension_models_in_definition_order: false,
    extension_provider_checks: super::config::ExtensionProviderChecks::Composer,
    cli_resolution: super::resolve::CliResolution::ExactByAuth,
    settings_default_needs_auth: true,
};

/// pi 1.6.0's table (`--compat 1.6`).
pub(super) const V16: Table = Table {
    providers: super::catalog_16::PROVIDERS,
    tables: Tables {
        thinking: super::catalog_16::THINKING,
        compat: super::catalog_16::COMPAT,
        headers: super::catalog_16::HEADERS,
        tiers: super::catalog_16::TIERS,
        json: super::catalog_16::JSON,
        orders: super::catalog_16::ORDERS,
    },
    defaults: super::resolve::DEFAULT_MODEL_PER_PROVIDER_16,
    custom_models_need_api_key: false,
    extension_models_in_definition_order: true,
    extension_provider_checks: super::config::ExtensionProviderChecks::Composer16,
    cli_resolution: super::resolve::CliResolution::Reference,
    settings_default_needs_auth: true,
};

/// The rows of one provider (`catalog_073.rs`): one model per line, parsed on iteration.
#[derive(Clone, Copy)]
pub(super) struct Rows(pub &'static str);

impl Rows {
    /// Number of rows (an upper bound of the models: a row that does not parse is skipped).
    pub(super) fn len(self) -> usize {
        self.0.lines().filter(|l| !l.is_empty()).count()
    }

    /// The models, their shared values looked up in `tables`.
    pub(super) fn rows(self, tables: &'static Tables) -> impl Iterator<Item = BuiltinModel> {
        self.0
            .lines()
            .filter_map(move |l| BuiltinModel::parse(l, tables))
    }
}

impl BuiltinModel {
    /// One row: `id|name|flags|costs|contextWindow|maxTokens[|t<n>|c<n>|h<n>|a<api>|u<url>]`,
    /// for pi 0.87.1 also `T<n>` tiers, `P<n>` promptCache, `L<n>` inputLimits, `o<n>` key order.
    /// The table is generated and checked by a test; a row that does not parse (or an empty
    /// line) is skipped rather than trusted.
    fn parse(line: &'static str, t: &'static Tables) -> Option<BuiltinModel> {
        let mut f = line.split('|');
        let id = f.next().filter(|s| !s.is_empty())?;
        let name = f.next()?;
        let flags = f.next()?.as_bytes();
        let mut cost = [0.0; 4];
        let mut prices = f.next()?.split(' ');
        for c in &mut cost {
            *c = prices.next()?.parse().ok()?;
        }
        let mut row = BuiltinModel {
            id,
            name,
            reasoning: flags.first() == Some(&b'r'),
            image: flags.get(1) == Some(&b'i'),
            cost,
            context_window: f.next()?.parse().ok()?,
            max_tokens: f.next()?.parse().ok()?,
            thinking: None,
            compat: None,
            api: None,
            base_url: None,
            headers: None,
            tiers: None,
            prompt_cache: None,
            input_limits: None,
            order: None,
        };
        for extra in f {
            let (key, value) = extra.split_at_checked(1)?;
            let index = || value.parse::<usize>().ok();
            match key {
                "t" => row.thinking = Some(*t.thinking.get(index()?)?),
                "c" => row.compat = Some(*t.compat.get(index()?)?),
                "h" => row.headers = Some(*t.headers.get(index()?)?),
                "T" => row.tiers = Some(*t.tiers.get(index()?)?),
                "P" => row.prompt_cache = Some(*t.json.get(index()?)?),
                "L" => row.input_limits = Some(*t.json.get(index()?)?),
                "o" => row.order = Some(*t.orders.get(index()?)?),
                "a" => row.api = Some(value),
                "u" => row.base_url = Some(value),
                _ => return None,
            }
        }
        Some(row)
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
            shape: match self.order {
                Some(order) => crate::llm::model_json::ModelShape::ordered(
                    order,
                    self.thinking.map(super::ThinkingLevelMap::from_static),
                ),
                None => crate::llm::model_json::ModelShape::builtin(
                    self.headers.is_some(),
                    compat.is_some(),
                    self.thinking.map(super::ThinkingLevelMap::from_static),
                ),
            },
            compat,
            prompt_cache: self.prompt_cache,
            input_limits: self.input_limits,
        }
    }
}

/// A built-in provider and its models in the reference's file order.
pub(super) struct BuiltinProvider {
    pub name: &'static str,
    pub api: &'static str,
    pub base_url: &'static str,
    pub models: Rows,
}

#[cfg(test)]
mod tests {
    use super::{V16, V073, V087};

    #[test]
    fn every_row_parses() {
        for table in [&V073, &V087, &V16] {
            for p in table.providers {
                let parsed = p.models.rows(&table.tables).count();
                assert_eq!(parsed, p.models.len(), "{}: a row does not parse", p.name);
                assert!(parsed > 0, "{}", p.name);
            }
        }
    }
}
