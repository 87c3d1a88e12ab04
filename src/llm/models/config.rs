//! `<agent_dir>/models.json`: reading, schema checks and the reference's extra validation.
//!
//! The file may carry `//` line comments and trailing commas (the reference strips both). Any
//! problem rejects the whole file with one message shaped like the reference's `getError()`;
//! the caller then keeps only built-in models.

use std::path::Path;

use serde_json::{Map, Value};

use super::ThinkingLevelMap;
use crate::message::ThinkingLevel;

pub(super) type Headers = Vec<(String, String)>;

/// A validated `models.json`.
#[derive(Clone, Debug, Default)]
pub(super) struct ModelsConfig {
    /// Providers in file order.
    pub providers: Vec<(String, ProviderConfig)>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct ProviderConfig {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub api: Option<String>,
    pub headers: Option<Headers>,
    pub compat: Option<Map<String, Value>>,
    pub auth_header: bool,
    pub models: Vec<ModelDef>,
    pub model_overrides: Vec<(String, ModelOverride)>,
    /// Registered by an extension with `models`: they replace the built-in provider's (pi's
    /// `registerProvider`).
    pub replace_builtin: bool,
    /// Registered by an extension under pi 1.6.0: its models' JSON keeps the definition's
    /// documented key order, then `api`, `provider`, `baseUrl` (pi 1.6.0 spreads the definition).
    pub definition_order: bool,
}

/// The fields of one `cost.tiers` entry.
const TIER_KEYS: [&str; 5] = [
    "inputTokensAbove",
    "input",
    "output",
    "cacheRead",
    "cacheWrite",
];
/// Tiers taken per model (a models.json is written by the user; this only bounds a broken one).
const MAX_TIERS: usize = 64;

#[derive(Clone, Debug, Default)]
pub(super) struct ModelDef {
    pub id: String,
    pub name: Option<String>,
    pub api: Option<String>,
    pub base_url: Option<String>,
    pub reasoning: Option<bool>,
    pub thinking: Option<ThinkingLevelMap>,
    pub input: Option<Vec<String>>,
    /// input, output, cacheRead, cacheWrite (all four required by the schema).
    pub cost: Option<[f64; 4]>,
    /// `cost.tiers` (pi 0.87.1).
    pub tiers: Option<&'static [crate::llm::CostTier]>,
    pub context_window: Option<f64>,
    pub max_tokens: Option<f64>,
    pub headers: Option<Headers>,
    pub compat: Option<Map<String, Value>>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct ModelOverride {
    pub name: Option<String>,
    pub reasoning: Option<bool>,
    pub thinking: Option<ThinkingLevelMap>,
    pub input: Option<Vec<String>>,
    /// Partial cost: input, output, cacheRead, cacheWrite.
    pub cost: Option<[Option<f64>; 4]>,
    /// `cost.tiers` (pi 0.87.1): replaces the model's.
    pub tiers: Option<&'static [crate::llm::CostTier]>,
    pub context_window: Option<f64>,
    pub max_tokens: Option<f64>,
    pub headers: Option<Headers>,
    pub compat: Option<Map<String, Value>>,
}

/// Reads and validates `path`. `Ok(None)` when the file does not exist. `is_builtin` tells which
/// provider names have built-in models (they need no `baseUrl`/`apiKey`/`api` for custom models).
pub(super) fn load(
    path: &Path,
    is_builtin: &dyn Fn(&str) -> bool,
    need_api_key: bool,
) -> Result<Option<ModelsConfig>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "Failed to load models.json: {e}\n\nFile: {}",
                path.display()
            ));
        }
    };
    parse(&text, is_builtin, need_api_key)
        .map(Some)
        .map_err(|e| format!("{e}\n\nFile: {}", path.display()))
}

/// Parses the text of a `models.json`; errors lack the trailing `File:` line. `need_api_key`:
/// the version's rule for custom models without `apiKey` (`Table::custom_models_need_api_key`).
pub(super) fn parse(
    text: &str,
    is_builtin: &dyn Fn(&str) -> bool,
    need_api_key: bool,
) -> Result<ModelsConfig, String> {
    // Valid JSON has no comments and no trailing commas outside strings, so cleaning leaves it
    // as it is: it is parsed as it stands first (the cleaning costs more than the parse).
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => {
            let cleaned = strip_trailing_commas(&strip_line_comments(text));
            serde_json::from_str(&cleaned)
                .map_err(|e| format!("Failed to parse models.json: {e}"))?
        }
    };
    let mut v = Validator::default();
    let config = v.root(&value);
    if !v.errors.is_empty() {
        let list: Vec<String> = v
            .errors
            .iter()
            .map(|(p, m)| format!("  - {p}: {m}"))
            .collect();
        return Err(format!("Invalid models.json schema:\n{}", list.join("\n")));
    }
    validate(&config, is_builtin, need_api_key)
        .map_err(|e| format!("Failed to load models.json: {e}"))?;
    Ok(config)
}

/// What pi's `registerProvider` checks of a provider that defines models (`Table::
/// extension_provider_checks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtensionProviderChecks {
    /// pi 0.73.1's `validateProviderConfig`, for any provider: `baseUrl` (`… is required when
    /// defining models.`), then `apiKey` (`"apiKey" or "oauth" is required …`), then each
    /// model's `api` (`no "api" specified.`).
    V073,
    /// pi 0.87.1's provider composer: each model's `api` (`… Set at provider or model level.`),
    /// then `baseUrl` (`… is required when defining custom models.`); a built-in provider's own
    /// models supply both.
    Composer,
    /// pi 1.6.0's: as 0.87.1's, the `api` text `… Set it at model level or provider level.`
    Composer16,
}

/// The data form of pi's `registerProvider(name, config)`: models.json's provider shape (`apiKey`
/// optional), checked as pi composes it. `interpolate` turns pi's `$ENV` / `${ENV}` forms of
/// `apiKey` into the value.
pub(super) fn extension_provider(
    name: &str,
    value: &Value,
    is_builtin: &dyn Fn(&str) -> bool,
    interpolate: &dyn Fn(&str) -> String,
    checks: ExtensionProviderChecks,
) -> Result<ProviderConfig, String> {
    let mut v = Validator::default();
    let mut p = v.provider(value, &format!("providers.{name}"));
    if let Some((path, msg)) = v.errors.first() {
        return Err(format!("Invalid provider config: {path}: {msg}"));
    }
    if p.models.is_empty() {
        if p.base_url.is_none()
            && p.headers.is_none()
            && p.compat.is_none()
            && p.api_key.is_none()
            && !p.auth_header
        {
            return Err(format!(
                "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
            ));
        }
    } else if checks == ExtensionProviderChecks::V073 {
        // JavaScript's truthiness: an empty string is missing too.
        if p.base_url.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "Provider {name}: \"baseUrl\" is required when defining models."
            ));
        }
        if p.api_key.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "Provider {name}: \"apiKey\" or \"oauth\" is required when defining models."
            ));
        }
        for m in &p.models {
            if p.api.is_none() && m.api.is_none() {
                return Err(format!(
                    "Provider {name}, model {}: no \"api\" specified.",
                    m.id
                ));
            }
            check_limits(name, m)?;
        }
        p.replace_builtin = is_builtin(name);
    } else {
        let builtin = is_builtin(name);
        let where_api = match checks {
            ExtensionProviderChecks::Composer16 => "Set it at model level or provider level.",
            _ => "Set at provider or model level.",
        };
        for m in &p.models {
            if p.api.is_none() && m.api.is_none() && !builtin {
                return Err(format!(
                    "Provider {name}, model {}: no \"api\" specified. {where_api}",
                    m.id
                ));
            }
            if p.base_url.is_none() && m.base_url.is_none() && !builtin {
                return Err(format!(
                    "Provider {name}: \"baseUrl\" is required when defining custom models."
                ));
            }
            check_limits(name, m)?;
        }
        p.replace_builtin = builtin;
    }
    if let Some(k) = p.api_key.take() {
        p.api_key = Some(if k.starts_with('!') {
            k
        } else {
            interpolate(&k)
        });
    }
    Ok(p)
}

/// pi's interpolation of a config value: `$NAME` and `${NAME}` are the variable's value (empty
/// when unset), `$$` is `$`, `$!` is `!`; the rest is literal.
pub(super) fn interpolate_env(s: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix('!') {
            out.push('!');
            rest = r;
        } else if let Some(r) = after.strip_prefix('{') {
            match r.find('}') {
                Some(end) => {
                    out.push_str(&env(&r[..end]).unwrap_or_default());
                    rest = &r[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if end == 0 {
                out.push('$');
            } else {
                out.push_str(&env(&after[..end]).unwrap_or_default());
            }
            rest = &after[end..];
        }
    }
    out.push_str(rest);
    out
}

/// A model's `contextWindow` and `maxTokens`, when given, are positive (models.json and
/// `registerProvider` alike).
fn check_limits(name: &str, m: &ModelDef) -> Result<(), String> {
    if m.context_window.is_some_and(|c| c <= 0.0) {
        return Err(format!(
            "Provider {name}, model {}: invalid contextWindow",
            m.id
        ));
    }
    if m.max_tokens.is_some_and(|c| c <= 0.0) {
        return Err(format!(
            "Provider {name}, model {}: invalid maxTokens",
            m.id
        ));
    }
    Ok(())
}

/// The reference's `validateConfig`: rules the schema cannot express.
fn validate(
    config: &ModelsConfig,
    is_builtin: &dyn Fn(&str) -> bool,
    need_api_key: bool,
) -> Result<(), String> {
    for (name, p) in &config.providers {
        let builtin = is_builtin(name);
        if p.models.is_empty() {
            if p.base_url.is_none()
                && p.headers.is_none()
                && p.compat.is_none()
                && p.model_overrides.is_empty()
            {
                return Err(format!(
                    "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
                ));
            }
        } else if !builtin {
            if p.base_url.is_none() {
                return Err(format!(
                    "Provider {name}: \"baseUrl\" is required when defining custom models."
                ));
            }
            if need_api_key && p.api_key.is_none() {
                return Err(format!(
                    "Provider {name}: \"apiKey\" is required when defining custom models."
                ));
            }
        }
        for m in &p.models {
            if p.api.is_none() && m.api.is_none() && !builtin {
                return Err(format!(
                    "Provider {name}, model {}: no \"api\" specified. Set at provider or model level.",
                    m.id
                ));
            }
            check_limits(name, m)?;
        }
    }
    Ok(())
}

/// Schema checks, collecting `(path, message)` pairs while building the typed config.
#[derive(Default)]
struct Validator {
    errors: Vec<(String, String)>,
}

impl Validator {
    fn err(&mut self, path: &str, msg: &str) {
        // One bad file can hold many errors; a screenful is enough.
        if self.errors.len() < 20 {
            self.errors.push((
                if path.is_empty() {
                    "root".to_string()
                } else {
                    path.to_string()
                },
                msg.to_string(),
            ));
        }
    }

    fn root(&mut self, value: &Value) -> ModelsConfig {
        let mut config = ModelsConfig::default();
        let Some(obj) = value.as_object() else {
            self.err("", "Expected object");
            return config;
        };
        match obj.get("providers") {
            None => self.err("providers", "Expected required property"),
            Some(Value::Object(providers)) => {
                for (name, p) in providers {
                    let path = format!("providers.{name}");
                    config
                        .providers
                        .push((name.clone(), self.provider(p, &path)));
                }
            }
            Some(_) => self.err("providers", "Expected object"),
        }
        config
    }

    fn provider(&mut self, value: &Value, path: &str) -> ProviderConfig {
        let mut p = ProviderConfig::default();
        let Some(obj) = self.object(value, path) else {
            return p;
        };
        self.string(obj, "name", path);
        p.base_url = self.string(obj, "baseUrl", path);
        p.api_key = self.string(obj, "apiKey", path);
        p.api = self.string(obj, "api", path);
        p.headers = self.headers(obj, path);
        p.compat = self.compat(obj, path);
        p.auth_header = self.boolean(obj, "authHeader", path).unwrap_or(false);
        if let Some(models) = obj.get("models") {
            let mpath = format!("{path}.models");
            match models.as_array() {
                Some(list) => {
                    for (i, m) in list.iter().enumerate() {
                        p.models.push(self.model_def(m, &format!("{mpath}.{i}")));
                    }
                }
                None => self.err(&mpath, "Expected array"),
            }
        }
        if let Some(overrides) = obj.get("modelOverrides") {
            let opath = format!("{path}.modelOverrides");
            match overrides.as_object() {
                Some(map) => {
                    for (id, o) in map {
                        let ov = self.model_override(o, &format!("{opath}.{id}"));
                        p.model_overrides.push((id.clone(), ov));
                    }
                }
                None => self.err(&opath, "Expected object"),
            }
        }
        p
    }

    fn model_def(&mut self, value: &Value, path: &str) -> ModelDef {
        let mut m = ModelDef::default();
        let Some(obj) = self.object(value, path) else {
            return m;
        };
        match obj.get("id") {
            None => self.err(&format!("{path}.id"), "Expected required property"),
            Some(_) => m.id = self.string(obj, "id", path).unwrap_or_default(),
        }
        m.name = self.string(obj, "name", path);
        m.api = self.string(obj, "api", path);
        m.base_url = self.string(obj, "baseUrl", path);
        m.reasoning = self.boolean(obj, "reasoning", path);
        m.thinking = self.thinking(obj, path);
        m.input = self.input(obj, path);
        if let Some(cost) = obj.get("cost") {
            let cpath = format!("{path}.cost");
            if let Some(c) = self.object(cost, &cpath) {
                let mut out = [0.0; 4];
                for (slot, key) in out.iter_mut().zip(COST_KEYS) {
                    match c.get(key) {
                        None => self.err(&format!("{cpath}.{key}"), "Expected required property"),
                        Some(_) => *slot = self.number(c, key, &cpath).unwrap_or(0.0),
                    }
                }
                m.cost = Some(out);
                m.tiers = self.tiers(c, &cpath);
            }
        }
        m.context_window = self.number(obj, "contextWindow", path);
        m.max_tokens = self.number(obj, "maxTokens", path);
        m.headers = self.headers(obj, path);
        m.compat = self.compat(obj, path);
        m
    }

    /// pi 0.87.1's `cost.tiers`: `[{inputTokensAbove, input, output, cacheRead, cacheWrite}]`,
    /// every field a number. Kept for the life of the process (the registry is built once), so
    /// the prices stay `Copy`; at most [`MAX_TIERS`] are taken.
    fn tiers(
        &mut self,
        cost: &Map<String, Value>,
        cpath: &str,
    ) -> Option<&'static [crate::llm::CostTier]> {
        let list = cost.get("tiers")?;
        let path = format!("{cpath}.tiers");
        let Some(items) = list.as_array() else {
            self.err(&path, "Expected array");
            return None;
        };
        let mut tiers = Vec::new();
        for (i, item) in items.iter().take(MAX_TIERS).enumerate() {
            let tpath = format!("{path}.{i}");
            let Some(t) = self.object(item, &tpath) else {
                continue;
            };
            let mut v = [0.0; 5];
            for (slot, key) in v.iter_mut().zip(TIER_KEYS) {
                match t.get(key) {
                    None => self.err(&format!("{tpath}.{key}"), "Expected required property"),
                    Some(_) => *slot = self.number(t, key, &tpath).unwrap_or(0.0),
                }
            }
            tiers.push(crate::llm::CostTier {
                input_tokens_above: v[0],
                input: v[1],
                output: v[2],
                cache_read: v[3],
                cache_write: v[4],
            });
        }
        Some(Box::leak(tiers.into_boxed_slice()))
    }

    fn model_override(&mut self, value: &Value, path: &str) -> ModelOverride {
        let mut o = ModelOverride::default();
        let Some(obj) = self.object(value, path) else {
            return o;
        };
        o.name = self.string(obj, "name", path);
        o.reasoning = self.boolean(obj, "reasoning", path);
        o.thinking = self.thinking(obj, path);
        o.input = self.input(obj, path);
        if let Some(cost) = obj.get("cost") {
            let cpath = format!("{path}.cost");
            if let Some(c) = self.object(cost, &cpath) {
                let mut out = [None; 4];
                for (slot, key) in out.iter_mut().zip(COST_KEYS) {
                    *slot = self.number(c, key, &cpath);
                }
                o.cost = Some(out);
                o.tiers = self.tiers(c, &cpath);
            }
        }
        o.context_window = self.number(obj, "contextWindow", path);
        o.max_tokens = self.number(obj, "maxTokens", path);
        o.headers = self.headers(obj, path);
        o.compat = self.compat(obj, path);
        o
    }

    fn object<'a>(&mut self, value: &'a Value, path: &str) -> Option<&'a Map<String, Value>> {
        let obj = value.as_object();
        if obj.is_none() {
            self.err(path, "Expected object");
        }
        obj
    }

    /// An optional non-empty string property.
    fn string(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Option<String> {
        match obj.get(key)? {
            Value::String(s) if s.is_empty() => {
                self.err(
                    &format!("{path}.{key}"),
                    "Expected string length greater or equal to 1",
                );
                None
            }
            Value::String(s) => Some(s.clone()),
            _ => {
                self.err(&format!("{path}.{key}"), "Expected string");
                None
            }
        }
    }

    fn boolean(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Option<bool> {
        let v = obj.get(key)?;
        let b = v.as_bool();
        if b.is_none() {
            self.err(&format!("{path}.{key}"), "Expected boolean");
        }
        b
    }

    fn number(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Option<f64> {
        let v = obj.get(key)?;
        let n = v.as_f64();
        if n.is_none() {
            self.err(&format!("{path}.{key}"), "Expected number");
        }
        n
    }

    fn headers(&mut self, obj: &Map<String, Value>, path: &str) -> Option<Headers> {
        let v = obj.get("headers")?;
        let hpath = format!("{path}.headers");
        let map = self.object(v, &hpath)?;
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            match v.as_str() {
                Some(s) => out.push((k.clone(), s.to_string())),
                None => self.err(&format!("{hpath}.{k}"), "Expected string"),
            }
        }
        Some(out)
    }

    fn compat(&mut self, obj: &Map<String, Value>, path: &str) -> Option<Map<String, Value>> {
        let v = obj.get("compat")?;
        let cpath = format!("{path}.compat");
        let map = self.object(v, &cpath)?;
        // Fields shared by every compat variant must have the right type; the rest of the union
        // accepts any object.
        self.boolean(map, "supportsLongCacheRetention", &cpath);
        Some(map.clone())
    }

    fn input(&mut self, obj: &Map<String, Value>, path: &str) -> Option<Vec<String>> {
        let v = obj.get("input")?;
        let ipath = format!("{path}.input");
        let Some(list) = v.as_array() else {
            self.err(&ipath, "Expected array");
            return None;
        };
        let mut out = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            match item.as_str() {
                Some(s @ ("text" | "image")) => out.push(s.to_string()),
                _ => self.err(&format!("{ipath}.{i}"), "Expected union value"),
            }
        }
        Some(out)
    }

    fn thinking(&mut self, obj: &Map<String, Value>, path: &str) -> Option<ThinkingLevelMap> {
        let v = obj.get("thinkingLevelMap")?;
        let tpath = format!("{path}.thinkingLevelMap");
        let map = self.object(v, &tpath)?;
        let mut out = ThinkingLevelMap::default();
        for (k, v) in map {
            // Unknown keys are allowed by the schema and ignored.
            let Some(level) = ThinkingLevel::parse(k) else {
                continue;
            };
            match v {
                Value::Null => out.set(level, None),
                Value::String(s) => out.set(level, Some(s.clone())),
                _ => self.err(&format!("{tpath}.{k}"), "Expected union value"),
            }
        }
        Some(out)
    }
}

const COST_KEYS: [&str; 4] = ["input", "output", "cacheRead", "cacheWrite"];

/// Removes `//` comments outside string literals (the newline stays).
fn strip_line_comments(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut chars = input.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '/' && chars.peek() == Some(&'/') {
            while chars.peek().is_some_and(|&n| n != '\n') {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Removes a `,` that is followed (after whitespace) by `}` or `]`, outside string literals.
fn strip_trailing_commas(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if c == ',' {
            let next = bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}') | Some(b']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}
