//! Picking models from user input: `--model` ([`resolve_cli_model`]), `--models` /
//! `enabledModels` ([`parse_scoped_models`]) and the start-up default ([`initial_model`]).
//!
//! Matching rules are the reference's `model-resolver.ts`: exact `provider/id` or `id`
//! (case-insensitive, must be unambiguous), else substring of id or name preferring aliases
//! (ids ending in `-latest` or without a `-YYYYMMDD` suffix) that sort highest; a trailing
//! `:<thinking level>` is split off only when the whole pattern does not match.

use std::cmp::Ordering;

use super::{Auth, Registry};
use crate::llm::Model;
use crate::message::ThinkingLevel;

/// Default model id per provider (`defaultModelPerProvider`); the order is the priority order of
/// [`initial_model`].
pub const DEFAULT_MODEL_PER_PROVIDER: &[(&str, &str)] = &[
    ("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1"),
    ("anthropic", "claude-opus-4-7"),
    ("openai", "gpt-5.4"),
    ("azure-openai-responses", "gpt-5.4"),
    ("openai-codex", "gpt-5.5"),
    ("deepseek", "deepseek-v4-pro"),
    ("google", "gemini-3.1-pro-preview"),
    ("google-vertex", "gemini-3.1-pro-preview"),
    ("github-copilot", "gpt-5.4"),
    ("openrouter", "moonshotai/kimi-k2.6"),
    ("vercel-ai-gateway", "zai/glm-5.1"),
    ("xai", "grok-4.20-0309-reasoning"),
    ("groq", "openai/gpt-oss-120b"),
    ("cerebras", "zai-glm-4.7"),
    ("zai", "glm-5.1"),
    ("mistral", "devstral-medium-latest"),
    ("minimax", "MiniMax-M2.7"),
    ("minimax-cn", "MiniMax-M2.7"),
    ("moonshotai", "kimi-k2.6"),
    ("moonshotai-cn", "kimi-k2.6"),
    ("huggingface", "moonshotai/Kimi-K2.6"),
    ("fireworks", "accounts/fireworks/models/kimi-k2p6"),
    ("opencode", "kimi-k2.6"),
    ("opencode-go", "kimi-k2.6"),
    ("kimi-coding", "kimi-for-coding"),
    ("cloudflare-workers-ai", "@cf/moonshotai/kimi-k2.6"),
    (
        "cloudflare-ai-gateway",
        "workers-ai/@cf/moonshotai/kimi-k2.6",
    ),
    ("xiaomi", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-cn", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-ams", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-sgp", "mimo-v2.5-pro"),
];

/// pi 1.6.0's `defaultModelPerProvider` (`--compat 1.6`), in its order; `radius` and `baseten`
/// are left out with their catalog entries (`catalog_16.rs`), `azure` is its name for Azure
/// OpenAI.
pub const DEFAULT_MODEL_PER_PROVIDER_16: &[(&str, &str)] = &[
    ("amazon-bedrock", "us.anthropic.claude-opus-5-5"),
    ("ant-ling", "Ring-2.6-1T"),
    ("anthropic", "claude-opus-5-5"),
    ("openai", "gpt-6.2-sol"),
    ("azure", "gpt-6.2-sol"),
    ("openai-codex", "gpt-6.2-sol"),
    ("nvidia", "nvidia/nemotron-3.5-super-vl-120b-a12b"),
    ("deepseek", "deepseek-v4-pro"),
    ("google", "gemini-4-argon"),
    ("google-vertex", "gemini-4-argon"),
    ("github-copilot", "gpt-6.1-sol"),
    ("openrouter", "moonshotai/kimi-k2.7-code"),
    ("vercel-ai-gateway", "zai/glm-5.3"),
    ("xai", "grok-4.7"),
    ("groq", "openai/gpt-oss-120b"),
    ("cerebras", "gpt-oss-120b"),
    ("zai", "glm-5.3"),
    ("zai-coding-cn", "glm-5.3"),
    ("mistral", "devstral-medium-latest"),
    ("minimax", "MiniMax-M3"),
    ("minimax-cn", "MiniMax-M3"),
    ("moonshotai", "kimi-k2.7-code"),
    ("moonshotai-cn", "kimi-k2.7-code"),
    ("huggingface", "moonshotai/Kimi-K2.7-Code"),
    ("fireworks", "accounts/fireworks/models/kimi-k3"),
    ("together", "moonshotai/Kimi-K3"),
    ("opencode", "kimi-k2.7-code"),
    ("opencode-go", "kimi-k3.1-pro"),
    ("kimi-coding", "kimi-for-coding"),
    ("meta", "muse-spark-1.3"),
    ("cloudflare-workers-ai", "@cf/moonshotai/kimi-k2.7-code"),
    (
        "cloudflare-ai-gateway",
        "workers-ai/@cf/moonshotai/kimi-k2.7-code",
    ),
    ("qwen-token-plan", "qwen3.8-max"),
    ("qwen-token-plan-cn", "qwen3.8-max"),
    ("qwen-token-plan-individual", "qwen3.8-max"),
    ("qwen-token-plan-individual-cn", "qwen3.8-max"),
    ("xiaomi", "mimo-v2.6-pro"),
    ("xiaomi-token-plan-cn", "mimo-v2.6-pro"),
    ("xiaomi-token-plan-ams", "mimo-v2.6-pro"),
    ("xiaomi-token-plan-sgp", "mimo-v2.6-pro"),
];

fn default_model_id(registry: &Registry, provider: &str) -> Option<&'static str> {
    registry
        .default_models()
        .iter()
        .find(|(p, _)| *p == provider)
        .map(|(_, id)| *id)
}

/// The `--model` rules of a pi version (`resolveCliModel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CliResolution {
    /// pi 0.73.1: the first exact match in registry order, else the best fuzzy match.
    FirstMatch,
    /// pi 0.87.1: an exact id offered by several providers takes the one with a credential,
    /// else fails as ambiguous; `provider/id` naming a provider without one yields to a sole
    /// raw id match that has one; a custom id keeps its `:level` suffix apart.
    ExactByAuth,
    /// pi 1.6.0 (`resolveModelReference`): exact and fuzzy matches alike, credentials only
    /// break ties between providers, and a tie left is ambiguous.
    Reference,
}

/// What `--model` resolution consults besides the models.
pub struct CliContext<'a> {
    /// Whether a provider has a credential (`hasConfiguredAuth`).
    pub usable: &'a dyn Fn(&str) -> bool,
    /// `--api-key` was given: pi 1.6.0 then lets no stored credential choose a provider.
    pub inline_key: bool,
    /// `--thinking`, if given (a custom id then keeps a `:level` suffix).
    pub thinking: Option<ThinkingLevel>,
}

/// A `--model` found: the model, a `:level` suffix if one was used, a warning for stderr.
pub type CliModel = (Model, Option<ThinkingLevel>, Option<String>);

/// `--provider` / `--model` resolution (`resolveCliModel`) over **all** models, by the rules of
/// the registry's pi version. `Err` is the reference's error text. Not inlined: start-up and the
/// extension-deferred path share one copy.
#[inline(never)]
pub fn resolve_cli_model(
    registry: &Registry,
    provider: Option<&str>,
    pattern: &str,
    cx: &CliContext<'_>,
) -> Result<CliModel, String> {
    // With a provider, only its models are looked at: the others are not even built (most
    // processes never need them; `Registry`).
    if provider.is_none() && registry.all().is_empty() {
        return Err(
            "No models available. Check your installation or add models to models.json."
                .to_string(),
        );
    }
    let resolved_provider = match provider {
        Some(p) => match registry.canonical_provider(p) {
            Some(c) => Some(c),
            None => {
                return Err(format!(
                    "Unknown provider \"{p}\". Use --list-models to see available providers/models."
                ));
            }
        },
        None => None,
    };
    match registry.cli_resolution() {
        CliResolution::Reference => resolve_reference(registry, resolved_provider, pattern, cx),
        rules => resolve_legacy(registry, provider, resolved_provider, pattern, cx, rules),
    }
}

/// pi 0.73.1's and 0.87.1's `resolveCliModel`.
fn resolve_legacy(
    registry: &Registry,
    provider: Option<&str>,
    mut resolved_provider: Option<String>,
    pattern: &str,
    cx: &CliContext<'_>,
    rules: CliResolution,
) -> Result<CliModel, String> {
    let by_auth = rules == CliResolution::ExactByAuth;
    let all_models = || -> Vec<&Model> { registry.all().iter().collect() };
    let mut pat = pattern.to_string();
    let mut inferred = false;
    if resolved_provider.is_none() {
        if let Some((maybe, rest)) = pattern.split_once('/') {
            if let Some(c) = registry.canonical_provider(maybe) {
                resolved_provider = Some(c);
                pat = rest.to_string();
                inferred = true;
            }
        }
    }
    if resolved_provider.is_none() {
        let all = all_models();
        let exact: Vec<&Model> = exact_ids_or_refs(&all, pattern);
        match exact.as_slice() {
            [] => {}
            [one, ..] if !by_auth || exact.len() == 1 => return Ok(((*one).clone(), None, None)),
            _ => {
                let keyed: Vec<&Model> = exact
                    .iter()
                    .copied()
                    .filter(|m| (cx.usable)(&m.provider))
                    .collect();
                if let [one] = keyed.as_slice() {
                    return Ok(((*one).clone(), None, None));
                }
                let hint = if keyed.is_empty() {
                    "No matching provider is authenticated."
                } else {
                    "More than one matching provider is authenticated."
                };
                return Err(ambiguous(pattern, &exact, hint));
            }
        }
    }
    if let (Some(_), Some(p)) = (provider, &resolved_provider) {
        // `get` keeps this safe when the prefix length is not a char boundary of the pattern.
        let prefix = format!("{p}/");
        if let (Some(head), Some(rest)) = (pattern.get(..prefix.len()), pattern.get(prefix.len()..))
        {
            if head.to_lowercase() == prefix.to_lowercase() {
                pat = rest.to_string();
            }
        }
    }

    let provider_models: Vec<Model> = match &resolved_provider {
        Some(p) => registry.models_of(p),
        None => Vec::new(),
    };
    let candidates: Vec<&Model> = match &resolved_provider {
        Some(_) => provider_models.iter().collect(),
        None => all_models(),
    };
    let parsed = parse_model_pattern(&pat, &candidates, false);
    if let Some(m) = parsed.model {
        // `provider/id` naming a provider without a credential yields to the one raw id match
        // (the whole text, such as a gateway's `xiaomi/mimo-v2.5-pro`) that has one.
        if by_auth && inferred && !(cx.usable)(&m.provider) {
            let lower = pattern.to_lowercase();
            let all = all_models();
            let raw: Vec<&Model> = all
                .iter()
                .copied()
                .filter(|x| {
                    x.id.to_lowercase() == lower && !(x.provider == m.provider && x.id == m.id)
                })
                .collect();
            let keyed: Vec<&Model> = raw
                .into_iter()
                .filter(|x| (cx.usable)(&x.provider))
                .collect();
            if let [one] = keyed.as_slice() {
                return Ok(((*one).clone(), None, None));
            }
        }
        return Ok((m.clone(), parsed.thinking, parsed.warning));
    }

    if inferred {
        let all = all_models();
        if let Some(m) = exact_ids_or_refs(&all, pattern).first().copied() {
            return Ok((m.clone(), None, None));
        }
        let fallback = parse_model_pattern(pattern, &all, false);
        if let Some(m) = fallback.model {
            return Ok((m.clone(), fallback.thinking, fallback.warning));
        }
    }

    if let Some(p) = &resolved_provider {
        if !provider_models.is_empty() {
            // pi 0.87.1 splits a `:level` suffix off a custom id unless `--thinking` was given.
            let (id, level) = match split_thinking_suffix(&pat) {
                Some((base, level)) if by_auth && cx.thinking.is_none() => (base, Some(level)),
                _ => (pat.as_str(), None),
            };
            let mut model = fallback_model(registry, &provider_models, id);
            if by_auth
                && cx
                    .thinking
                    .or(level)
                    .is_some_and(|l| l != ThinkingLevel::Off)
            {
                model.reasoning = true;
            }
            let note =
                format!("Model \"{id}\" not found for provider \"{p}\". Using custom model id.");
            let warning = match parsed.warning {
                Some(w) => format!("{w} {note}"),
                None => note,
            };
            return Ok((model, level, Some(warning)));
        }
    }
    let display = match &resolved_provider {
        Some(p) => format!("{p}/{pat}"),
        None => pattern.to_string(),
    };
    Err(format!(
        "Model \"{display}\" not found. Use --list-models to see available models."
    ))
}

/// `Model "x" is ambiguous across providers: a/x, b/x. <hint> Use --provider or provider/model.`
fn ambiguous(pattern: &str, candidates: &[&Model], hint: &str) -> String {
    let mut refs: Vec<String> = candidates
        .iter()
        .map(|m| format!("{}/{}", m.provider, m.id))
        .collect();
    refs.sort_by(|a, b| locale_compare(a, b));
    format!(
        "Model \"{pattern}\" is ambiguous across providers: {}. {hint} Use --provider or provider/model.",
        refs.join(", ")
    )
}

/// pi 1.6.0's scope warning for a pattern several providers match.
fn several_providers(pattern: &str, candidates: &[&Model]) -> String {
    let mut providers: Vec<&str> = candidates.iter().map(|m| m.provider.as_str()).collect();
    providers.sort_by(|a, b| locale_compare(a, b));
    providers.dedup();
    format!(
        "Warning: Pattern \"{pattern}\" matches several providers: {}. Use provider/id to choose one.",
        providers.join(", ")
    )
}

/// `buildFallbackModel`: the provider's default model (else its first) under another id.
fn fallback_model(registry: &Registry, provider_models: &[Model], id: &str) -> Model {
    let first = &provider_models[0];
    let base = default_model_id(registry, &first.provider)
        .and_then(|d| provider_models.iter().find(|m| m.id == d))
        .unwrap_or(first);
    let mut model = base.clone();
    model.id = id.to_string();
    model.name = id.to_string();
    model
}

/// `text` = `base:level` with a valid thinking level after the last `:`.
fn split_thinking_suffix(text: &str) -> Option<(&str, ThinkingLevel)> {
    let (base, suffix) = text.rsplit_once(':')?;
    ThinkingLevel::parse(suffix).map(|l| (base, l))
}

/// What pi 1.6.0's `resolveModelReference` found.
enum Lookup<'a> {
    Found(&'a Model, Option<ThinkingLevel>),
    /// Several providers offer it; how many of the others have a credential; a `:level`.
    Ambiguous(Vec<&'a Model>, usize, Option<ThinkingLevel>),
    NotFound,
}

/// pi 1.6.0's `resolveCliModel` over `resolveModelReference`.
fn resolve_reference(
    registry: &Registry,
    provider: Option<String>,
    pattern: &str,
    cx: &CliContext<'_>,
) -> Result<CliModel, String> {
    let owned: Vec<Model>;
    let pool: Vec<&Model> = match &provider {
        Some(p) => {
            owned = registry.models_of(p);
            owned.iter().collect()
        }
        None => registry.all().iter().collect(),
    };
    let never = |_: &str| false;
    // An inline key goes to whichever provider is chosen: stored credentials must not choose.
    let usable: &dyn Fn(&str) -> bool = if cx.inline_key { &never } else { cx.usable };
    let text = pattern.trim();
    let lookup = if text.is_empty() {
        Lookup::NotFound
    } else {
        lookup_text(text, &pool, usable)
    };
    match lookup {
        Lookup::Found(m, level) => return Ok((m.clone(), level, None)),
        Lookup::Ambiguous(candidates, usable_count, _) => {
            let hint = if cx.inline_key {
                "--api-key does not choose a provider."
            } else if usable_count == 0 {
                "No matching provider is authenticated."
            } else {
                "More than one matching provider is authenticated."
            };
            return Err(ambiguous(pattern, &candidates, hint));
        }
        Lookup::NotFound => {}
    }
    let not_found =
        || format!("Model \"{pattern}\" not found. Use --list-models to see available models.");
    if text.is_empty() {
        return Err(not_found());
    }
    // Not found: a custom id on the named (or `provider/`-prefixed) provider.
    let split = split_provider_prefix(text, &pool);
    let anchor = match (&provider, &split) {
        (Some(_), _) => pool.first().copied(),
        (None, Some((p, _))) => pool.iter().copied().find(|m| &m.provider == p),
        (None, None) => None,
    };
    let Some(anchor) = anchor else {
        return Err(not_found());
    };
    let provider_models: Vec<Model> = pool
        .iter()
        .filter(|m| m.provider == anchor.provider)
        .map(|m| (*m).clone())
        .collect();
    let model_text = split.as_ref().map_or(text, |(_, t)| t.as_str());
    let suffix = split_thinking_suffix(model_text);
    let (id, level) = match (cx.thinking, suffix) {
        (None, Some((base, level))) => (base, Some(level)),
        _ => (model_text, None),
    };
    let mut model = fallback_model(registry, &provider_models, id);
    if cx
        .thinking
        .or(level)
        .is_some_and(|l| l != ThinkingLevel::Off)
    {
        model.reasoning = true;
    }
    let warning = format!(
        "Model \"{id}\" not found for provider \"{}\". Using custom model id.",
        anchor.provider
    );
    Ok((model, level, Some(warning)))
}

/// `resolveText` with a strict `:level` suffix and fuzzy matching on (`--model`).
fn lookup_text<'a>(text: &str, pool: &[&'a Model], usable: &dyn Fn(&str) -> bool) -> Lookup<'a> {
    lookup_with(text, pool, usable, true, false).0
}

/// `resolveText`: exact (and, if `fuzzy`, substring) matches, then a valid `:level` suffix split
/// off; `lenient` (scopes) also drops an invalid suffix, with pi's warning.
fn lookup_with<'a>(
    text: &str,
    pool: &[&'a Model],
    usable: &dyn Fn(&str) -> bool,
    fuzzy: bool,
    lenient: bool,
) -> (Lookup<'a>, Option<String>) {
    if let Some(found) = select_reference(text, pool, usable, fuzzy) {
        return (found, None);
    }
    if fuzzy {
        if let Some(found) = select_fuzzy(&fuzzy_matches(text, pool), usable) {
            return (found, None);
        }
    }
    if let Some((base, level)) = split_thinking_suffix(text) {
        return match lookup_with(base, pool, usable, fuzzy, lenient) {
            (Lookup::Found(m, _), None) => (Lookup::Found(m, Some(level)), None),
            (Lookup::Ambiguous(c, n, _), None) => (Lookup::Ambiguous(c, n, Some(level)), None),
            other => other,
        };
    }
    let Some((base, suffix)) = text.rsplit_once(':').filter(|_| lenient) else {
        return (Lookup::NotFound, None);
    };
    let warning = || {
        Some(format!(
            "Invalid thinking level \"{suffix}\" in pattern \"{text}\". Using default instead."
        ))
    };
    match lookup_with(base, pool, usable, fuzzy, lenient) {
        (Lookup::NotFound, w) => (Lookup::NotFound, w),
        (Lookup::Found(m, _), _) => (Lookup::Found(m, None), warning()),
        (other, _) => (other, warning()),
    }
}

/// `provider/rest` with the longest known provider name (case-insensitive; names may contain
/// `/` themselves): that provider and the rest, trimmed and not empty.
fn split_provider_prefix(text: &str, pool: &[&Model]) -> Option<(String, String)> {
    let mut best: Option<(String, String)> = None;
    for m in pool {
        let prefix = m.provider.trim().to_lowercase();
        if prefix.is_empty()
            || best
                .as_ref()
                .is_some_and(|(p, _)| p.len() >= m.provider.len())
        {
            continue;
        }
        // The first `/` at or after the prefix's length (in chars).
        let skip = prefix.chars().count();
        let Some(slash) = text
            .char_indices()
            .skip(skip)
            .find(|(_, c)| *c == '/')
            .map(|(i, _)| i)
        else {
            continue;
        };
        if text[..slash].trim().to_lowercase() != prefix {
            continue;
        }
        let rest = text[slash + 1..].trim();
        if !rest.is_empty() {
            best = Some((m.provider.clone(), rest.to_string()));
        }
    }
    best
}

/// `selectReference`: exact ids, and `provider/id` as a hint the credentials confirm.
fn select_reference<'a>(
    text: &str,
    pool: &[&'a Model],
    usable: &dyn Fn(&str) -> bool,
    fuzzy: bool,
) -> Option<Lookup<'a>> {
    let lower = text.to_lowercase();
    let raw: Vec<&Model> = pool
        .iter()
        .copied()
        .filter(|m| m.id.to_lowercase() == lower)
        .collect();
    let named = split_provider_prefix(text, pool).and_then(|(p, model_text)| {
        let mine: Vec<&Model> = pool.iter().copied().filter(|m| m.provider == p).collect();
        let want = model_text.to_lowercase();
        // The provider's own literal id beats its fuzzy matches.
        mine.iter()
            .copied()
            .find(|m| m.id.to_lowercase() == want)
            .or_else(|| raw.iter().copied().find(|m| m.provider == p))
            .or_else(|| {
                fuzzy
                    .then(|| best_fuzzy(fuzzy_matches(&model_text, &mine)))
                    .flatten()
            })
    });
    let others: Vec<&Model> = raw
        .iter()
        .copied()
        .filter(|m| !named.is_some_and(|n| std::ptr::eq(*m, n)))
        .collect();
    let candidates: Vec<&Model> = named.into_iter().chain(others.iter().copied()).collect();
    let first = *candidates.first()?;
    if candidates.iter().all(|m| m.provider == first.provider) {
        return Some(Lookup::Found(first, None));
    }
    if let Some(n) = named.filter(|n| usable(&n.provider)) {
        return Some(Lookup::Found(n, None));
    }
    let keyed: Vec<&Model> = others
        .iter()
        .copied()
        .filter(|m| usable(&m.provider))
        .collect();
    match (keyed.as_slice(), named) {
        ([one], _) => Some(Lookup::Found(one, None)),
        ([], Some(n)) => Some(Lookup::Found(n, None)),
        _ => Some(Lookup::Ambiguous(candidates, keyed.len(), None)),
    }
}

/// Models whose id or name contains `text` (case-insensitive).
fn fuzzy_matches<'a>(text: &str, models: &[&'a Model]) -> Vec<&'a Model> {
    let needle = text.to_lowercase();
    models
        .iter()
        .copied()
        .filter(|m| {
            m.id.to_lowercase().contains(&needle) || m.name.to_lowercase().contains(&needle)
        })
        .collect()
}

/// `selectFuzzy`: the best match, among those with a credential when several providers match;
/// the same id left on several providers is ambiguous.
fn select_fuzzy<'a>(matches: &[&'a Model], usable: &dyn Fn(&str) -> bool) -> Option<Lookup<'a>> {
    let first = *matches.first()?;
    let several = matches.iter().any(|m| m.provider != first.provider);
    let keyed: Vec<&Model> = if several {
        matches
            .iter()
            .copied()
            .filter(|m| usable(&m.provider))
            .collect()
    } else {
        Vec::new()
    };
    let pool: &[&Model] = if keyed.is_empty() { matches } else { &keyed };
    let best = best_fuzzy(pool.to_vec())?;
    let tied: Vec<&Model> = pool.iter().copied().filter(|m| m.id == best.id).collect();
    if tied.iter().all(|m| m.provider == best.provider) {
        return Some(Lookup::Found(best, None));
    }
    let usable_count = if keyed.is_empty() { 0 } else { tied.len() };
    Some(Lookup::Ambiguous(tied, usable_count, None))
}

/// `bestFuzzyMatch`: aliases first, then the id that sorts highest (the first of equals).
fn best_fuzzy(matches: Vec<&Model>) -> Option<&Model> {
    let aliases: Vec<&Model> = matches
        .iter()
        .copied()
        .filter(|m| is_alias(&m.id))
        .collect();
    let pool = if aliases.is_empty() { matches } else { aliases };
    pool.into_iter().reduce(|best, m| {
        if locale_compare(&m.id, &best.id) == Ordering::Greater {
            m
        } else {
            best
        }
    })
}

/// Every model whose id or `provider/id` equals `s` (case-insensitive), in registry order.
fn exact_ids_or_refs<'a>(models: &[&'a Model], s: &str) -> Vec<&'a Model> {
    let lower = s.to_lowercase();
    models
        .iter()
        .copied()
        .filter(|m| {
            m.id.to_lowercase() == lower
                || format!("{}/{}", m.provider, m.id).to_lowercase() == lower
        })
        .collect()
}

/// Scoped models for `cycle_model` (`resolveModelScope`) over the models that have auth. Each
/// entry of `patterns` may itself be a comma list. Returns the models with their explicit
/// `:level` and warnings for stderr (`Warning: No models match pattern "x"`, ...).
pub fn parse_scoped_models(
    registry: &Registry,
    auth: &Auth,
    patterns: &[String],
) -> (Vec<(Model, Option<ThinkingLevel>)>, Vec<String>) {
    let available = registry.available(auth);
    let rules = registry.cli_resolution();
    let mut out: Vec<(Model, Option<ThinkingLevel>)> = Vec::new();
    let mut warnings = Vec::new();
    let push = |out: &mut Vec<(Model, Option<ThinkingLevel>)>, m: &Model, level| {
        if !out
            .iter()
            .any(|(x, _)| x.provider == m.provider && x.id == m.id)
        {
            out.push((m.clone(), level));
        }
    };
    for pattern in patterns.iter().flat_map(|p| p.split(',')).map(str::trim) {
        if pattern.contains(['*', '?', '[']) {
            let (glob, level) = match pattern.rsplit_once(':') {
                Some((g, suffix)) => match ThinkingLevel::parse(suffix) {
                    Some(l) => (g, Some(l)),
                    None => (pattern, None),
                },
                None => (pattern, None),
            };
            // pi 0.87.1: an exact id first (ids such as `bracketed-model[1m]` are not globs);
            // 1.6.0: the same through its resolver, several providers' all with a warning.
            let exact: Vec<&Model> = match rules {
                CliResolution::FirstMatch => Vec::new(),
                CliResolution::ExactByAuth => {
                    find_exact_reference(glob, &available).into_iter().collect()
                }
                CliResolution::Reference => {
                    match select_reference(glob, &available, &|_| true, false) {
                        Some(Lookup::Found(m, _)) => vec![m],
                        Some(Lookup::Ambiguous(candidates, ..)) => {
                            warnings.push(several_providers(pattern, &candidates));
                            candidates
                        }
                        _ => Vec::new(),
                    }
                }
            };
            let matching: Vec<&Model> = if exact.is_empty() {
                available
                    .iter()
                    .copied()
                    .filter(|m| {
                        glob_match(glob, &format!("{}/{}", m.provider, m.id))
                            || glob_match(glob, &m.id)
                    })
                    .collect()
            } else {
                exact
            };
            if matching.is_empty() {
                warnings.push(format!("Warning: No models match pattern \"{pattern}\""));
            }
            for m in matching {
                push(&mut out, m, level);
            }
            continue;
        }
        if rules == CliResolution::Reference {
            let (lookup, warning) = lookup_with(pattern, &available, &|_| true, true, true);
            if let Some(w) = warning {
                warnings.push(format!("Warning: {w}"));
            }
            match lookup {
                Lookup::Found(m, level) => push(&mut out, m, level),
                Lookup::Ambiguous(candidates, _, level) => {
                    warnings.push(several_providers(pattern, &candidates));
                    for m in candidates {
                        push(&mut out, m, level);
                    }
                }
                Lookup::NotFound => {
                    warnings.push(format!("Warning: No models match pattern \"{pattern}\""))
                }
            }
            continue;
        }
        let parsed = parse_model_pattern(pattern, &available, true);
        if let Some(w) = &parsed.warning {
            warnings.push(format!("Warning: {w}"));
        }
        match parsed.model {
            Some(m) => push(&mut out, m, parsed.thinking),
            None => warnings.push(format!("Warning: No models match pattern \"{pattern}\"")),
        }
    }
    (out, warnings)
}

/// Start-up model without `--model` (`findInitialModel` steps 3–4): the settings default if it
/// exists (pi 0.87.1 and 1.6.0: and its provider has a credential), else the first provider default (in priority order) that has auth, else
/// the first model that has auth.
pub fn initial_model(
    registry: &Registry,
    auth: &Auth,
    settings_default: Option<(&str, &str)>,
) -> Option<Model> {
    if let Some((provider, id)) = settings_default {
        if let Some(m) = registry.lookup(provider, id) {
            if !registry.settings_default_needs_auth()
                || registry.has_configured_auth(&m.provider, auth)
            {
                return Some(m);
            }
        }
    }
    // Each provider's default looked up alone: with a key for one of them, the models of the
    // others are not built (the whole registry is most of a cold start's instructions).
    for (provider, id) in registry.default_models() {
        if registry.has_configured_auth(provider, auth) {
            if let Some(m) = registry.lookup(provider, id) {
                return Some(m);
            }
        }
    }
    registry.available(auth).first().map(|m| (*m).clone())
}

struct Parsed<'a> {
    model: Option<&'a Model>,
    thinking: Option<ThinkingLevel>,
    warning: Option<String>,
}

/// `parseModelPattern`. `lenient` = scope mode: an invalid `:suffix` is dropped with a warning
/// instead of failing the match.
fn parse_model_pattern<'a>(pattern: &str, models: &[&'a Model], lenient: bool) -> Parsed<'a> {
    if let Some(m) = try_match_model(pattern, models) {
        return Parsed {
            model: Some(m),
            thinking: None,
            warning: None,
        };
    }
    let none = Parsed {
        model: None,
        thinking: None,
        warning: None,
    };
    let Some((prefix, suffix)) = pattern.rsplit_once(':') else {
        return none;
    };
    if let Some(level) = ThinkingLevel::parse(suffix) {
        let inner = parse_model_pattern(prefix, models, lenient);
        if inner.model.is_some() {
            let thinking = if inner.warning.is_some() {
                None
            } else {
                Some(level)
            };
            return Parsed { thinking, ..inner };
        }
        return inner;
    }
    if !lenient {
        return none;
    }
    let inner = parse_model_pattern(prefix, models, lenient);
    if inner.model.is_some() {
        let warning = format!(
            "Invalid thinking level \"{suffix}\" in pattern \"{pattern}\". Using default instead."
        );
        return Parsed {
            model: inner.model,
            thinking: None,
            warning: Some(warning),
        };
    }
    inner
}

/// `tryMatchModel`: exact reference, else the best substring match.
fn try_match_model<'a>(pattern: &str, models: &[&'a Model]) -> Option<&'a Model> {
    if let Some(m) = find_exact_reference(pattern, models) {
        return Some(m);
    }
    best_fuzzy(fuzzy_matches(pattern, models))
}

/// `findExactModelReferenceMatch`: a unique `provider/id`, else a unique provider-qualified id
/// split at the first `/`, else a unique bare id; all case-insensitive.
fn find_exact_reference<'a>(reference: &str, models: &[&'a Model]) -> Option<&'a Model> {
    let trimmed = reference.trim();
    if trimmed.is_empty() {
        return None;
    }
    let lower = trimmed.to_lowercase();
    let canonical: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|m| format!("{}/{}", m.provider, m.id).to_lowercase() == lower)
        .collect();
    match canonical.len() {
        1 => return Some(canonical[0]),
        0 => {}
        _ => return None,
    }
    if let Some((provider, id)) = trimmed.split_once('/') {
        let (provider, id) = (provider.trim().to_lowercase(), id.trim().to_lowercase());
        if !provider.is_empty() && !id.is_empty() {
            let hits: Vec<&Model> = models
                .iter()
                .copied()
                .filter(|m| m.provider.to_lowercase() == provider && m.id.to_lowercase() == id)
                .collect();
            match hits.len() {
                1 => return Some(hits[0]),
                0 => {}
                _ => return None,
            }
        }
    }
    let hits: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|m| m.id.to_lowercase() == lower)
        .collect();
    (hits.len() == 1).then(|| hits[0])
}

/// Aliases end in `-latest` or lack a `-YYYYMMDD` date suffix.
fn is_alias(id: &str) -> bool {
    if id.ends_with("-latest") {
        return true;
    }
    let b = id.as_bytes();
    let dated =
        b.len() >= 9 && b[b.len() - 9] == b'-' && b[b.len() - 8..].iter().all(u8::is_ascii_digit);
    !dated
}

/// JavaScript's `a.localeCompare(b)` (ICU root collation), as pi compares model ids.
pub(crate) fn locale_compare(a: &str, b: &str) -> Ordering {
    crate::tools::collate::locale_compare_cased(a, b)
}

/// minimatch-style glob (case-insensitive): `*` and `?` stay within one `/`-separated segment,
/// `**` as a whole segment spans segments, `[...]` / `[!...]` classes. Segments starting with `.`
/// are not matched by wildcards at their start.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let txt: Vec<&str> = text.split('/').collect();
    match_segments(&pat, &txt)
}

fn match_segments(pat: &[&str], txt: &[&str]) -> bool {
    // Iterative over `**` positions; segment counts are tiny (ids have at most a few `/`).
    match pat.split_first() {
        None => txt.is_empty(),
        Some((&"**", rest)) => (0..=txt.len()).any(|skip| match_segments(rest, &txt[skip..])),
        Some((first, rest)) => match txt.split_first() {
            Some((t, trest)) => segment_match(first, t) && match_segments(rest, trest),
            None => false,
        },
    }
}

fn segment_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    if t.first() == Some(&'.') && p.first().is_none_or(|&c| c != '.') {
        return false;
    }
    // Classic wildcard matching with single-star backtracking: O(len(p) * len(t)) worst case.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = class_match(&p, pi, t[ti]) {
                        if matched {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                c if c == t[ti] => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the class starting at `p[start] == '['`. `None` if the class is unclosed
/// (then `[` is literal); else whether it matched and the index after `]`.
fn class_match(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}
