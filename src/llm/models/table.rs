//! Row types of the built-in model table (`builtin.rs`).
//!
//! The table is text, one line per model, so the binary carries no struct (and no relocated
//! pointer) per row; building the registry parses the lines it needs. No JSON is parsed for
//! built-ins except the few distinct `compat` snippets.

use crate::llm::{Model, ModelCost};
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
}

/// The rows of one provider (`builtin.rs`): one model per line, parsed on iteration.
#[derive(Clone, Copy)]
pub(super) struct Rows(pub &'static str);

impl Rows {
    /// Number of models.
    pub(super) fn len(self) -> usize {
        self.into_iter().count()
    }
}

impl IntoIterator for Rows {
    type Item = BuiltinModel;
    type IntoIter =
        std::iter::FilterMap<std::str::Lines<'static>, fn(&'static str) -> Option<BuiltinModel>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.lines().filter_map(BuiltinModel::parse)
    }
}

impl BuiltinModel {
    /// One row: `id|name|flags|costs|contextWindow|maxTokens[|t<n>|c<n>|h<n>|a<api>|u<url>]`. The
    /// table is generated and checked by a test; a row that does not parse (or an empty line) is
    /// skipped rather than trusted.
    fn parse(line: &'static str) -> Option<BuiltinModel> {
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
        };
        for extra in f {
            let (key, value) = extra.split_at_checked(1)?;
            let index = || value.parse::<usize>().ok();
            match key {
                "t" => row.thinking = Some(*super::builtin::THINKING.get(index()?)?),
                "c" => row.compat = Some(*super::builtin::COMPAT.get(index()?)?),
                "h" => row.headers = Some(*super::builtin::HEADERS.get(index()?)?),
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
            },
            context_window: self.context_window,
            max_tokens: self.max_tokens,
            headers: self.headers.map(|h| {
                h.iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                    .collect()
            }),
            shape: crate::llm::model_json::ModelShape::builtin(
                self.headers.is_some(),
                compat.is_some(),
                self.thinking.map(super::ThinkingLevelMap::from_static),
            ),
            compat,
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
    use super::super::builtin::PROVIDERS;

    #[test]
    fn every_row_parses() {
        for p in PROVIDERS {
            let lines = p.models.0.lines().filter(|l| !l.is_empty()).count();
            assert_eq!(p.models.len(), lines, "{}: a row does not parse", p.name);
            assert!(lines > 0, "{}", p.name);
        }
    }
}
