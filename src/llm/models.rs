//! Model registry: built-in models, `models.json` custom providers and overrides, API keys.
//!
//! [`Registry::load`] builds the list the RPC commands show (`get_available_models`,
//! `cycle_model`, `set_model`): built-in providers in the reference's order (`catalog_073.rs`), with
//! `models.json` provider overrides (`baseUrl`, `compat`) and per-model overrides applied, then
//! custom models upserted by provider+id. [`Auth`] answers "does this provider have a key" and
//! "which key". [`resolve`] holds the CLI-facing lookups (`--model`, `--models`, start-up model).
//!
//! Behaviour follows the reference build the oracle runs (pi 0.73.1): request headers from
//! models.json are resolved per request ([`Registry::request_auth`]) and never stored on the
//! serialised model; thinking support comes from each model's `thinkingLevelMap`.

mod auth;
#[rustfmt::skip]
mod catalog_073;
#[rustfmt::skip]
mod catalog_087;
#[rustfmt::skip]
mod catalog_16;
mod config;
pub mod resolve;
mod table;

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};

pub use auth::{
    Auth, CommandFailure, ConfigValue, Env, env_api_key, env_var_names, process_env,
    resolve_config_value_uncached,
};
pub use resolve::{initial_model, parse_scoped_models, resolve_cli_model};

use crate::llm::Model;
use crate::llm::model_json::{Key, ModelShape};
use crate::message::ThinkingLevel;
use crate::protocol::Catalog;
use config::{Headers, ModelsConfig};

/// A model's `thinkingLevelMap`: per level, `None` = unsupported, `Some(v)` = the provider-specific
/// value to send. Levels absent from the map use the defaults (see [`supported_thinking_levels`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThinkingLevelMap(pub Vec<(ThinkingLevel, Option<String>)>);

impl ThinkingLevelMap {
    /// `None` = level not in the map; `Some(None)` = mapped to null (unsupported).
    pub fn get(&self, level: ThinkingLevel) -> Option<Option<&str>> {
        self.0
            .iter()
            .find(|(l, _)| *l == level)
            .map(|(_, v)| v.as_deref())
    }

    /// Insert or replace, keeping the first position (JS object semantics).
    pub fn set(&mut self, level: ThinkingLevel, value: Option<String>) {
        match self.0.iter_mut().find(|(l, _)| *l == level) {
            Some(slot) => slot.1 = value,
            None => self.0.push((level, value)),
        }
    }

    /// The reference's JSON form (`{"xhigh":"max","off":null}`).
    pub fn to_json(&self) -> Value {
        let map: Map<String, Value> = self
            .0
            .iter()
            .map(|(l, v)| {
                (
                    l.as_str().to_string(),
                    v.clone().map_or(Value::Null, Value::String),
                )
            })
            .collect();
        Value::Object(map)
    }

    fn from_static(entries: &[(ThinkingLevel, Option<&'static str>)]) -> ThinkingLevelMap {
        ThinkingLevelMap(
            entries
                .iter()
                .map(|(l, v)| (*l, v.map(str::to_string)))
                .collect(),
        )
    }
}

/// Thinking levels a model accepts (the reference's `getSupportedThinkingLevels`): `off` only
/// without reasoning; otherwise every level its map does not null out, `xhigh` only when mapped.
pub fn supported_thinking_levels(
    model: &Model,
    map: Option<&ThinkingLevelMap>,
) -> Vec<ThinkingLevel> {
    if !model.reasoning {
        return vec![ThinkingLevel::Off];
    }
    ThinkingLevel::ALL
        .into_iter()
        .filter(|&level| match map.and_then(|m| m.get(level)) {
            Some(None) => false,
            Some(Some(_)) => true,
            None => !matches!(level, ThinkingLevel::Xhigh | ThinkingLevel::Max),
        })
        .collect()
}

/// Request-time credentials from `models.json` for one provider.
#[derive(Clone, Default)]
struct ProviderRequestConfig {
    api_key: Option<String>,
    headers: Option<Headers>,
    auth_header: bool,
}

/// Key and extra headers for one request ([`Registry::request_auth`]). Debug redacts both.
#[derive(Clone, Default, PartialEq)]
pub struct RequestAuth {
    pub api_key: Option<String>,
    /// Resolved header values (model headers, then provider headers, then per-model headers from
    /// models.json; `Authorization: Bearer` when `authHeader` is set).
    pub headers: Option<Vec<(String, String)>>,
}

impl std::fmt::Debug for RequestAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Option<Vec<&str>> = self
            .headers
            .as_ref()
            .map(|h| h.iter().map(|(k, _)| k.as_str()).collect());
        f.debug_struct("RequestAuth")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &names)
            .finish()
    }
}

/// All known models, in registry order.
///
/// The list is built when first needed ([`Registry::all`]): start-up resolves `--provider` /
/// `--model` and a session's model from the models of one provider ([`Registry::models_of`]),
/// and a streaming agent never needs the other hundreds, so most processes never build them
/// (about 400 KiB resident and a good part of start-up otherwise, per agent).
#[derive(Default)]
pub struct Registry {
    /// models.json as read (providers, overrides, custom models).
    cfg: std::sync::Arc<ModelsConfig>,
    /// The built-in models of the pi version (`None`: pi 0.73.1's).
    version: Option<&'static table::Table>,
    built: std::sync::OnceLock<Built>,
    /// The first provider whose models were built alone (while `built` is not): start-up asks
    /// for the model's provider two or three times, and every request once more.
    alone: std::sync::OnceLock<(String, Built)>,
    provider_configs: HashMap<String, ProviderRequestConfig>,
    /// `provider:id` → headers declared for that model in models.json.
    model_headers: HashMap<String, Headers>,
    load_error: Option<String>,
    /// Providers registered by extensions (pi's `registerProvider`), in order, and models.json
    /// as read (what `cfg` is composed from while there are any).
    ext_providers: Vec<(String, config::ProviderConfig)>,
    file_cfg: Option<std::sync::Arc<ModelsConfig>>,
}

/// The models of a registry (or of one provider of it), in registry order.
#[derive(Clone, Default)]
struct Built {
    models: Vec<Model>,
    /// Parallel to `models`.
    thinking: Vec<Option<ThinkingLevelMap>>,
}

impl Clone for Registry {
    fn clone(&self) -> Registry {
        Registry {
            cfg: std::sync::Arc::clone(&self.cfg),
            version: self.version,
            built: self.built.clone(),
            alone: self.alone.clone(),
            provider_configs: self.provider_configs.clone(),
            model_headers: self.model_headers.clone(),
            load_error: self.load_error.clone(),
            ext_providers: self.ext_providers.clone(),
            file_cfg: self.file_cfg.clone(),
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("built", &self.built.get().map(|b| b.models.len()))
            .field("load_error", &self.load_error)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// Built-in models plus `<agent_dir>/models.json`. A broken models.json is reported in the
    /// returned warnings (the reference's `getError()` text) and ignored as a whole. `env` is
    /// accepted for symmetry with [`Auth`]; config values are resolved per request, not here.
    pub fn load(agent_dir: &Path, env: &dyn Fn(&str) -> Option<String>) -> (Registry, Vec<String>) {
        Registry::load_for(Catalog::V073, agent_dir, env)
    }

    /// [`Registry::load`] with the built-in models of the given catalog (the profile's
    /// `llm.catalog`): pi 0.73.1's, or pi 0.87.1's (other models, prices with tiers,
    /// `promptCache`, `inputLimits`).
    pub fn load_for(
        catalog: Catalog,
        agent_dir: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> (Registry, Vec<String>) {
        let _ = env;
        let table = table_for(catalog);
        let path = agent_dir.join("models.json");
        let is_builtin = |name: &str| table.providers.iter().any(|p| p.name == name);
        match config::load(&path, &is_builtin, table.custom_models_need_api_key) {
            Ok(cfg) => (Registry::build(cfg.unwrap_or_default(), table), Vec::new()),
            Err(e) => {
                let mut reg = Registry::build(ModelsConfig::default(), table);
                reg.load_error = Some(e.clone());
                (reg, vec![e])
            }
        }
    }

    /// Only the built-in models (pi 0.73.1's).
    pub fn builtin() -> Registry {
        Registry::builtin_for(Catalog::V073)
    }

    /// Each provider's default model in this registry's pi version (`defaultModelPerProvider`).
    pub fn default_models(&self) -> &'static [(&'static str, &'static str)] {
        self.version().defaults
    }

    /// How `--model` chooses among models in this registry's pi version.
    pub fn cli_resolution(&self) -> resolve::CliResolution {
        self.version().cli_resolution
    }

    /// Whether the settings' default model needs a credential to be the start-up model.
    pub fn settings_default_needs_auth(&self) -> bool {
        self.version().settings_default_needs_auth
    }

    /// Only the built-in models of the given catalog.
    pub fn builtin_for(catalog: Catalog) -> Registry {
        Registry::build(ModelsConfig::default(), table_for(catalog))
    }

    /// Registry from the text of a models.json (tests, tools); `Err` is the reference's message
    /// without the `File:` line.
    pub fn from_models_json(text: &str) -> Result<Registry, String> {
        Registry::from_models_json_for(text, Catalog::V073)
    }

    /// [`Registry::from_models_json`] over the built-in models of the given catalog.
    pub fn from_models_json_for(text: &str, catalog: Catalog) -> Result<Registry, String> {
        let table = table_for(catalog);
        let is_builtin = |name: &str| table.providers.iter().any(|p| p.name == name);
        config::parse(text, &is_builtin, table.custom_models_need_api_key)
            .map(|c| Registry::build(c, table))
    }

    /// pi's `registerProvider(name, config)` in its data form (an extension's): a new provider
    /// with its models, or (without `models`) `baseUrl` / `headers` / `apiKey` for an existing
    /// one, keeping its models. models.json still applies over it. Registering a name again
    /// replaces the earlier registration. `env` resolves `$ENV` / `${ENV}` in `apiKey`.
    /// The models' JSON shape is the version's (`Table::extension_models_in_definition_order`).
    pub fn register_provider(
        &mut self,
        name: &str,
        config: &Value,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), String> {
        let version = self.version();
        let is_builtin = |n: &str| version.providers.iter().any(|p| p.name == n);
        let interpolate = |s: &str| config::interpolate_env(s, env);
        let mut p = config::extension_provider(
            name,
            config,
            &is_builtin,
            &interpolate,
            version.extension_provider_checks,
        )?;
        p.definition_order = version.extension_models_in_definition_order;
        let mut ext = std::mem::take(&mut self.ext_providers);
        ext.retain(|(n, _)| n != name);
        ext.push((name.to_string(), p));
        self.recompose(ext);
        Ok(())
    }

    /// pi's `unregisterProvider(name)`: the provider an extension registered is gone (built-in
    /// models it replaced come back). `false` when no extension registered it.
    pub fn unregister_provider(&mut self, name: &str) -> bool {
        if !self.ext_providers.iter().any(|(n, _)| n == name) {
            return false;
        }
        let mut ext = std::mem::take(&mut self.ext_providers);
        ext.retain(|(n, _)| n != name);
        self.recompose(ext);
        true
    }

    /// Whether an extension registered `name`.
    pub fn is_extension_provider(&self, name: &str) -> bool {
        self.ext_providers.iter().any(|(n, _)| n == name)
    }

    /// The registry again from models.json as read with `ext` under it.
    fn recompose(&mut self, ext: Vec<(String, config::ProviderConfig)>) {
        let file = self
            .file_cfg
            .take()
            .unwrap_or_else(|| std::sync::Arc::clone(&self.cfg));
        let mut cfg = ModelsConfig::default();
        for (name, p) in &ext {
            let mut p = p.clone();
            if let Some((_, f)) = file.providers.iter().find(|(n, _)| n == name) {
                // models.json over the extension's registration (pi's composition order).
                p.base_url = f.base_url.clone().or(p.base_url);
                p.api_key = f.api_key.clone().or(p.api_key);
                p.api = f.api.clone().or(p.api);
                if let Some(h) = &f.headers {
                    let mut merged = p.headers.take().unwrap_or_default();
                    for (k, v) in h {
                        merged.retain(|(mk, _)| !mk.eq_ignore_ascii_case(k));
                        merged.push((k.clone(), v.clone()));
                    }
                    p.headers = Some(merged);
                }
                p.compat = merge_compat(p.compat, f.compat.as_ref());
                p.auth_header |= f.auth_header;
                p.models.extend(f.models.iter().cloned());
                p.model_overrides.extend(f.model_overrides.iter().cloned());
            }
            cfg.providers.push((name.clone(), p));
        }
        for (name, f) in &file.providers {
            if !ext.iter().any(|(n, _)| n == name) {
                cfg.providers.push((name.clone(), f.clone()));
            }
        }
        let mut reg = Registry::build(cfg, self.version());
        reg.load_error = self.load_error.take();
        if ext.is_empty() {
            reg.cfg = file;
        } else {
            reg.file_cfg = Some(file);
        }
        reg.ext_providers = ext;
        *self = reg;
    }

    fn build(cfg: ModelsConfig, version: &'static table::Table) -> Registry {
        let table = version.providers;
        let mut reg = Registry {
            version: Some(version),
            ..Registry::default()
        };
        for (name, p) in &cfg.providers {
            if p.api_key.is_some() || p.headers.is_some() || p.auth_header {
                let request = ProviderRequestConfig {
                    api_key: p.api_key.clone(),
                    headers: p.headers.clone(),
                    auth_header: p.auth_header,
                };
                reg.provider_configs.insert(name.clone(), request);
            }
            for (id, o) in &p.model_overrides {
                reg.store_model_headers(name, id, o.headers.as_ref());
            }
            // Headers of the custom models that get registered (as in `models`).
            let defaults = table.iter().find(|b| b.name == name);
            for def in &p.models {
                let api = def.api.is_some() || p.api.is_some() || defaults.is_some();
                let url = def.base_url.is_some() || p.base_url.is_some() || defaults.is_some();
                if api && url {
                    reg.store_model_headers(name, &def.id, def.headers.as_ref());
                }
            }
        }
        reg.cfg = std::sync::Arc::new(cfg);
        reg
    }

    /// Every model, or (with `only`) the models of the provider named exactly so: the same list
    /// filtered, built without the others.
    fn models(cfg: &ModelsConfig, version: &'static table::Table, only: Option<&str>) -> Built {
        let table = version.providers;
        let mut reg = Built::default();
        let wanted = |name: &str| only.is_none_or(|o| o == name);
        let total: usize = table
            .iter()
            .filter(|p| wanted(p.name))
            .map(|p| p.models.len())
            .sum::<usize>()
            + cfg
                .providers
                .iter()
                .map(|(_, p)| p.models.len())
                .sum::<usize>();
        reg.models.reserve_exact(total);
        reg.thinking.reserve_exact(total);

        for provider in table.iter().filter(|p| wanted(p.name)) {
            let pcfg = cfg
                .providers
                .iter()
                .find(|(n, _)| n == provider.name)
                .map(|(_, p)| p);
            if pcfg.is_some_and(|p| p.replace_builtin) {
                continue;
            }
            for row in provider.models.rows(&version.tables) {
                let mut model = row.to_model(provider);
                let mut thinking = row.thinking.map(ThinkingLevelMap::from_static);
                if let Some(p) = pcfg {
                    if p.base_url.is_some() || p.compat.is_some() {
                        if let Some(url) = &p.base_url {
                            model.base_url = url.clone();
                        }
                        model.compat = merge_compat(model.compat.take(), p.compat.as_ref());
                        model.shape.assigned(Key::Compat);
                    }
                    if let Some((_, o)) = p.model_overrides.iter().find(|(id, _)| id == row.id) {
                        apply_override(&mut model, &mut thinking, o);
                    }
                }
                model.shape.thinking_level_map = thinking.clone();
                reg.models.push(model);
                reg.thinking.push(thinking);
            }
        }

        for (name, p) in cfg.providers.iter().filter(|(n, _)| wanted(n)) {
            let defaults = table.iter().find(|b| b.name == name);
            for def in &p.models {
                let api = def
                    .api
                    .as_ref()
                    .or(p.api.as_ref())
                    .cloned()
                    .or(defaults.map(|d| d.api.to_string()));
                let base_url = def
                    .base_url
                    .as_ref()
                    .or(p.base_url.as_ref())
                    .cloned()
                    .or(defaults.map(|d| d.base_url.to_string()));
                let (Some(api), Some(base_url)) = (api, base_url) else {
                    continue;
                };
                let cost = def.cost.unwrap_or([0.0; 4]);
                let model = Model {
                    id: def.id.clone(),
                    name: def.name.clone().unwrap_or_else(|| def.id.clone()),
                    api,
                    provider: name.clone(),
                    base_url,
                    reasoning: def.reasoning.unwrap_or(false),
                    input: def
                        .input
                        .clone()
                        .unwrap_or_else(|| vec!["text".to_string()]),
                    cost: crate::llm::ModelCost {
                        input: cost[0],
                        output: cost[1],
                        cache_read: cost[2],
                        cache_write: cost[3],
                        tiers: def.tiers,
                    },
                    context_window: def.context_window.map_or(128_000, js_count),
                    max_tokens: def.max_tokens.map_or(16_384, js_count),
                    headers: None,
                    compat: merge_compat(p.compat.clone(), def.compat.as_ref()),
                    shape: if p.definition_order {
                        ModelShape::ordered("inrtI$wmcapu", def.thinking.clone())
                    } else {
                        ModelShape::custom(def.thinking.clone())
                    },
                    ..Default::default()
                };
                reg.upsert(model, def.thinking.clone());
            }
        }
        reg.models.shrink_to_fit();
        reg.thinking.shrink_to_fit();
        reg
    }

    fn version(&self) -> &'static table::Table {
        self.version.unwrap_or(&table::V073)
    }

    fn built(&self) -> &Built {
        self.built
            .get_or_init(|| Registry::models(&self.cfg, self.version(), None))
    }

    /// The models of `provider` (exact name), in registry order, without building the others
    /// when they are not built yet.
    pub fn models_of(&self, provider: &str) -> Vec<Model> {
        match self.built.get() {
            Some(b) => b
                .models
                .iter()
                .filter(|m| m.provider == provider)
                .cloned()
                .collect(),
            None => self.alone(provider).models.clone(),
        }
    }

    /// The models of `provider` (exact name), built alone, or kept from the first time.
    fn alone(&self, provider: &str) -> std::borrow::Cow<'_, Built> {
        let build = || Registry::models(&self.cfg, self.version(), Some(provider));
        let (name, kept) = self.alone.get_or_init(|| (provider.to_string(), build()));
        if name == provider {
            std::borrow::Cow::Borrowed(kept)
        } else {
            std::borrow::Cow::Owned(build())
        }
    }

    /// The spelling of a provider name as models carry it, matched case-insensitively (the last
    /// one in registry order), if any model has it.
    pub fn canonical_provider(&self, name: &str) -> Option<String> {
        let lower = name.to_lowercase();
        if let Some(b) = self.built.get() {
            return b
                .models
                .iter()
                .rev()
                .find(|m| m.provider.to_lowercase() == lower)
                .map(|m| m.provider.clone());
        }
        // Models are in provider order (built-in providers, then models.json's), so the last
        // model with a matching provider belongs to the last matching name that has models.
        let names = self
            .version()
            .providers
            .iter()
            .map(|p| p.name)
            .chain(self.cfg.providers.iter().map(|(n, _)| n.as_str()));
        let candidates: Vec<&str> = names.filter(|n| n.to_lowercase() == lower).collect();
        candidates
            .into_iter()
            .rev()
            .find(|n| !self.models_of(n).is_empty())
            .map(str::to_string)
    }

    fn store_model_headers(&mut self, provider: &str, id: &str, headers: Option<&Headers>) {
        let key = format!("{provider}:{id}");
        match headers {
            Some(h) if !h.is_empty() => {
                self.model_headers.insert(key, h.clone());
            }
            _ => {
                self.model_headers.remove(&key);
            }
        }
    }
}

impl Built {
    fn upsert(&mut self, model: Model, thinking: Option<ThinkingLevelMap>) {
        match self
            .models
            .iter()
            .position(|m| m.provider == model.provider && m.id == model.id)
        {
            Some(i) => {
                self.models[i] = model;
                self.thinking[i] = thinking;
            }
            None => {
                self.models.push(model);
                self.thinking.push(thinking);
            }
        }
    }
}

impl Registry {
    /// Every model, in registry order.
    pub fn all(&self) -> &[Model] {
        &self.built().models
    }

    /// Exact, case-sensitive lookup.
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.all()
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    /// [`Registry::find`] as a copy, without building every model.
    pub fn lookup(&self, provider: &str, id: &str) -> Option<Model> {
        match self.built.get() {
            Some(_) => self.find(provider, id).cloned(),
            None => self
                .alone(provider)
                .models
                .iter()
                .find(|m| m.id == id)
                .cloned(),
        }
    }

    /// Models whose provider has a credential, in registry order (`get_available_models`).
    pub fn available(&self, auth: &Auth) -> Vec<&Model> {
        let mut cache: HashMap<&str, bool> = HashMap::new();
        self.all()
            .iter()
            .filter(|m| {
                *cache
                    .entry(m.provider.as_str())
                    .or_insert_with(|| self.has_configured_auth(&m.provider, auth))
            })
            .collect()
    }

    /// The reference's `hasConfiguredAuth`: any auth source, or a models.json `apiKey`.
    pub fn has_configured_auth(&self, provider: &str, auth: &Auth) -> bool {
        auth.has_auth(provider)
            || self
                .provider_configs
                .get(provider)
                .is_some_and(|c| c.api_key.is_some())
    }

    /// models.json provider `apiKey`s (unresolved), for [`Auth::load`].
    pub fn provider_api_keys(&self) -> HashMap<String, String> {
        self.provider_configs
            .iter()
            .filter_map(|(p, c)| c.api_key.clone().map(|k| (p.clone(), k)))
            .collect()
    }

    /// The models.json load error, if any (the reference's `getError()`).
    pub fn load_error(&self) -> Option<&str> {
        self.load_error.as_deref()
    }

    /// The `thinkingLevelMap` of a registered model (built-in table or models.json).
    pub fn thinking_level_map(&self, provider: &str, id: &str) -> Option<&ThinkingLevelMap> {
        let b = self.built();
        let i = b
            .models
            .iter()
            .position(|m| m.provider == provider && m.id == id)?;
        b.thinking[i].as_ref()
    }

    /// [`Registry::thinking_level_map`] as a copy, without building every model (what a request
    /// carries).
    pub fn thinking_level_map_of(&self, provider: &str, id: &str) -> Option<ThinkingLevelMap> {
        if self.built.get().is_some() {
            return self.thinking_level_map(provider, id).cloned();
        }
        let b = self.alone(provider);
        let i = b.models.iter().position(|m| m.id == id)?;
        b.thinking[i].clone()
    }

    /// [`supported_thinking_levels`] for a model, looking its map up here.
    pub fn thinking_levels(&self, model: &Model) -> Vec<ThinkingLevel> {
        if self.built.get().is_none() {
            let b = self.alone(&model.provider);
            let map = b
                .models
                .iter()
                .position(|m| m.id == model.id)
                .and_then(|i| b.thinking[i].as_ref());
            return supported_thinking_levels(model, map);
        }
        supported_thinking_levels(model, self.thinking_level_map(&model.provider, &model.id))
    }

    /// Key and headers for a request (`getApiKeyAndHeaders`), resolved here and now (may run
    /// `!commands`); `Err` carries the reference's message (e.g. `Failed to resolve API key for
    /// provider "x" from shell command: ...`, `No API key found for "x"`).
    pub fn request_auth(&self, model: &Model, auth: &Auth) -> Result<RequestAuth, String> {
        self.auth_plan(model, auth)
            .resolve(&crate::cancel::CancelToken::never())
    }

    /// What [`Registry::request_auth`] would resolve, with every `!command` left to run: the
    /// state machine builds this (cheap, no process), the request's worker resolves it.
    pub fn auth_plan(&self, model: &Model, auth: &Auth) -> AuthPlan {
        let provider = model.provider.as_str();
        let pcfg = self.provider_configs.get(provider);
        let env = auth.env();
        let api_key = match auth.stored_or_env_key(provider) {
            Some(key) => (key, None),
            None => match pcfg.and_then(|c| c.api_key.as_deref()) {
                Some(raw) => (
                    ConfigValue::uncached(raw, env),
                    Some(format!("API key for provider \"{provider}\"")),
                ),
                None => (ConfigValue::Ready(None), None),
            },
        };
        let mut headers = Vec::new();
        if let Some(h) = &model.headers {
            for (k, v) in h {
                if let Some(s) = v.as_str() {
                    headers.push((k.clone(), ConfigValue::Ready(Some(s.to_string())), None));
                }
            }
        }
        if let Some(h) = pcfg.and_then(|c| c.headers.as_ref()) {
            for (k, raw) in h {
                let desc = format!("provider \"{provider}\" header \"{k}\"");
                headers.push((k.clone(), ConfigValue::uncached(raw, env), Some(desc)));
            }
        }
        if let Some(h) = self.model_headers.get(&format!("{provider}:{}", model.id)) {
            for (k, raw) in h {
                let desc = format!("model \"{provider}/{}\" header \"{k}\"", model.id);
                headers.push((k.clone(), ConfigValue::uncached(raw, env), Some(desc)));
            }
        }
        AuthPlan {
            provider: provider.to_string(),
            api_key,
            headers,
            auth_header: pcfg.is_some_and(|c| c.auth_header),
        }
    }
}

/// A request's key and headers before their `!command`s ran ([`Registry::auth_plan`]).
#[derive(Clone, Debug)]
pub struct AuthPlan {
    provider: String,
    /// The key, and what to call it in an error when it resolves to nothing (`None`: no key is
    /// no error here).
    api_key: (ConfigValue, Option<String>),
    /// In the reference's order (model, provider, per-model headers; a later one replaces an
    /// earlier one of the same name), each with its error description.
    headers: Vec<(String, ConfigValue, Option<String>)>,
    auth_header: bool,
}

impl AuthPlan {
    /// Whether resolving runs a process (then it belongs on the request's worker).
    pub fn runs_commands(&self) -> bool {
        !self.api_key.0.is_ready() || self.headers.iter().any(|(_, v, _)| !v.is_ready())
    }

    /// The key and headers; `!command`s run now and stop when `cancel` fires.
    pub fn resolve(&self, cancel: &crate::cancel::CancelToken) -> Result<RequestAuth, String> {
        let provider = self.provider.as_str();
        let api_key = match &self.api_key {
            (value, Some(desc)) => Some(value.resolve_or_err(cancel, desc)?),
            (value, None) => match value.resolve(cancel) {
                Ok(key) => key,
                Err(auth::CommandFailure::Cancelled) => {
                    return Err(crate::llm::api::ABORTED_BEFORE_RESPONSE.to_string());
                }
                Err(_) => None,
            },
        };
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, v: String| match headers.iter_mut().find(|(hk, _)| hk == k) {
            Some(slot) => slot.1 = v,
            None => headers.push((k.to_string(), v)),
        };
        for (k, value, desc) in &self.headers {
            let v = match desc {
                Some(desc) => value.resolve_or_err(cancel, desc)?,
                None => match value.resolve(cancel) {
                    Ok(Some(v)) => v,
                    _ => continue,
                },
            };
            put(k, v);
        }
        if self.auth_header {
            let Some(key) = &api_key else {
                return Err(format!("No API key found for \"{provider}\""));
            };
            put("Authorization", format!("Bearer {key}"));
        }
        Ok(RequestAuth {
            api_key,
            headers: (!headers.is_empty()).then_some(headers),
        })
    }
}

/// The generated table of a built-in catalog.
fn table_for(catalog: Catalog) -> &'static table::Table {
    match catalog {
        Catalog::V073 => &table::V073,
        Catalog::V087 => &table::V087,
        Catalog::V16 => &table::V16,
    }
}

/// A JSON number used as a token count. Non-integral or out-of-range values are truncated and
/// clamped (the reference would keep them verbatim; no real config has them).
fn js_count(n: f64) -> u64 {
    if n.is_finite() && n > 0.0 {
        n as u64
    } else {
        0
    }
}

/// The reference's `mergeCompat`: override keys win; the two routing objects merge one level deeper.
fn merge_compat(
    base: Option<Map<String, Value>>,
    over: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    let Some(over) = over else { return base };
    let mut merged = base.clone().unwrap_or_default();
    for (k, v) in over {
        merged.insert(k.clone(), v.clone());
    }
    for key in ["openRouterRouting", "vercelGatewayRouting"] {
        let b = base.as_ref().and_then(|b| b.get(key));
        let o = over.get(key);
        if b.is_some() || o.is_some() {
            let mut inner = Map::new();
            for side in [b, o].into_iter().flatten() {
                if let Value::Object(m) = side {
                    for (k, v) in m {
                        inner.insert(k.clone(), v.clone());
                    }
                }
            }
            merged.insert(key.to_string(), Value::Object(inner));
        }
    }
    Some(merged)
}

/// The reference's `applyModelOverride`.
fn apply_override(
    model: &mut Model,
    thinking: &mut Option<ThinkingLevelMap>,
    o: &config::ModelOverride,
) {
    if let Some(name) = &o.name {
        model.name = name.clone();
    }
    if let Some(r) = o.reasoning {
        model.reasoning = r;
    }
    if let Some(map) = &o.thinking {
        let merged = thinking.get_or_insert_with(ThinkingLevelMap::default);
        for (level, value) in &map.0 {
            merged.set(*level, value.clone());
        }
        model.shape.assigned(Key::ThinkingLevelMap);
    }
    if let Some(input) = &o.input {
        model.input = input.clone();
    }
    if let Some(c) = o.context_window {
        model.context_window = js_count(c);
    }
    if let Some(c) = o.max_tokens {
        model.max_tokens = js_count(c);
    }
    if let Some([input, output, cache_read, cache_write]) = o.cost {
        let cost = &mut model.cost;
        cost.input = input.unwrap_or(cost.input);
        cost.output = output.unwrap_or(cost.output);
        cost.cache_read = cache_read.unwrap_or(cost.cache_read);
        cost.cache_write = cache_write.unwrap_or(cost.cache_write);
    }
    if let Some(t) = o.tiers {
        model.cost.tiers = Some(t);
    }
    model.compat = merge_compat(model.compat.take(), o.compat.as_ref());
    model.shape.assigned(Key::Compat);
}

#[cfg(test)]
mod tests;
