//! API keys: where a provider's credential comes from, and how config strings become values.
//!
//! Sources, in the reference's order (`AuthStorage.getApiKey` + `ModelRegistry`): the runtime
//! override (`--api-key`), `<agent_dir>/auth.json`, the provider's environment variable, the
//! `apiKey` of the provider in `models.json`. Config strings (auth.json keys, models.json `apiKey`
//! and header values) are resolved by [`resolve_config_value`]: `!cmd` runs `sh -c cmd`, else an
//! environment variable of that exact name, else the literal.
//!
//! A `!command` can take a while (a password manager, a cloud CLI): the state machine never runs
//! one. It hands a [`ConfigValue::Command`] to the request, whose prepare worker runs it
//! ([`ConfigValue::resolve`]), with a time limit, and stops it when the request is cancelled.
//!
//! Keys are secrets: [`Auth`] has a hand-written `Debug` that prints provider names only.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use std::cell::RefCell;

use crate::cancel::CancelToken;
use crate::protocol::{EnvKeyNames, SdkGeneration};

/// Environment lookup. Injected so tests never touch the process environment.
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment as an [`Env`].
pub fn process_env() -> Env {
    Arc::new(|name: &str| std::env::var(name).ok())
}

/// How long a `!command` may run (pi's limit).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on what a `!command` may print (a key is short; this only stops a runaway command).
const COMMAND_OUTPUT_LIMIT: u64 = 1 << 20;

/// The process-wide result of one cached `!command` (auth.json keys, as pi caches them): set once
/// by whichever request's worker runs it first. A `OnceLock` rather than a message back to the
/// state machine because the value is produced on a worker and read by later workers, and a
/// request must not wait for the machine to have handled an earlier one.
pub type CommandCell = Arc<OnceLock<Option<String>>>;

/// Credentials for all providers. Owned by the state machine (one thread), so the map of cached
/// `!command` cells is a plain `RefCell`; the cells themselves are shared with request workers.
#[derive(Clone)]
pub struct Auth {
    runtime: HashMap<String, String>,
    /// `auth.json` entries by provider, as stored.
    stored: serde_json::Map<String, Value>,
    /// `models.json` provider `apiKey`s, unresolved.
    fallback: HashMap<String, String>,
    env: Env,
    cache: RefCell<HashMap<String, CommandCell>>,
    /// Where `stored` came from (OAuth refreshes write it back).
    path: Option<std::path::PathBuf>,
    /// The SDK generation whose environment variables (providers' keys) are read.
    sdk: SdkGeneration,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runtime: Vec<&String> = self.runtime.keys().collect();
        crate::sort::sort_by(&mut runtime, Ord::cmp);
        let mut fallback: Vec<&String> = self.fallback.keys().collect();
        crate::sort::sort_by(&mut fallback, Ord::cmp);
        f.debug_struct("Auth")
            .field("runtime", &runtime)
            .field("stored", &self.stored.keys().collect::<Vec<_>>())
            .field("models_json", &fallback)
            .field("keys", &"<redacted>")
            .finish()
    }
}

impl Auth {
    /// Reads `<agent_dir>/auth.json` (a missing file is no error; a malformed one is a warning and
    /// then counts as empty). `models_json_keys` are the registry's provider `apiKey`s
    /// ([`super::Registry::provider_api_keys`]).
    pub fn load(
        agent_dir: &Path,
        models_json_keys: HashMap<String, String>,
        env: Env,
    ) -> (Auth, Vec<String>) {
        let path = agent_dir.join("auth.json");
        let mut warnings = Vec::new();
        let stored = match std::fs::read_to_string(&path) {
            Ok(text) if text.trim().is_empty() => serde_json::Map::new(),
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    warnings.push(format!(
                        "Failed to load auth.json: not a JSON object\n\nFile: {}",
                        path.display()
                    ));
                    serde_json::Map::new()
                }
                Err(e) => {
                    warnings.push(format!(
                        "Failed to parse auth.json: {e}\n\nFile: {}",
                        path.display()
                    ));
                    serde_json::Map::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Map::new(),
            Err(e) => {
                warnings.push(format!(
                    "Failed to load auth.json: {e}\n\nFile: {}",
                    path.display()
                ));
                serde_json::Map::new()
            }
        };
        let auth = Auth {
            runtime: HashMap::new(),
            stored,
            fallback: models_json_keys,
            env,
            cache: RefCell::new(HashMap::new()),
            path: Some(path),
            sdk: SdkGeneration::default(),
        };
        (auth, warnings)
    }

    /// An `Auth` with no stored credentials (tests, `--no-...` setups).
    pub fn empty(env: Env) -> Auth {
        Auth {
            runtime: HashMap::new(),
            stored: serde_json::Map::new(),
            fallback: HashMap::new(),
            env,
            cache: RefCell::new(HashMap::new()),
            path: None,
            sdk: SdkGeneration::default(),
        }
    }

    /// Keys from the environment as the given SDK generation (the profile's `llm.sdk`) reads
    /// them (pi 0.87.1's knows more providers).
    pub fn set_sdk(&mut self, sdk: SdkGeneration) {
        self.sdk = sdk;
    }

    /// `--api-key`: a key for one provider for this process only (never persisted).
    pub fn set_runtime_key(&mut self, provider: &str, key: &str) {
        self.runtime.insert(provider.to_string(), key.to_string());
    }

    /// Whether any source has a credential for `provider`. Runs no `!command` (as the reference:
    /// an unresolved models.json `apiKey` or any auth.json entry already counts).
    /// The registry's provider keys changed (an extension's `registerProvider`): the models.json
    /// fallback keys again ([`super::Registry::provider_api_keys`]).
    pub fn set_fallback_keys(&mut self, keys: HashMap<String, String>) {
        self.fallback = keys;
    }

    pub fn has_auth(&self, provider: &str) -> bool {
        self.runtime.contains_key(provider)
            || self.stored.get(provider).is_some_and(js_truthy)
            || env_api_key_for(provider, &self.env, self.sdk).is_some()
            || self.fallback.get(provider).is_some_and(|k| !k.is_empty())
    }

    /// The key to send for `provider`, from the first source that yields one. Runs `!command`s
    /// here and now (tests and tools; requests resolve them on their worker).
    pub fn api_key(&self, provider: &str) -> Option<String> {
        if let Some(key) = self.stored_or_env_key(provider) {
            return key.resolve(&CancelToken::never()).ok().flatten();
        }
        let fallback = self.fallback.get(provider)?;
        resolve_config_value_uncached(fallback, &self.env)
    }

    /// Whether a request to `provider` would have a key, without running any `!command` (one
    /// counts as a key; if it yields none, the request fails with that error).
    pub fn key_configured(&self, provider: &str) -> bool {
        match self.stored_or_env_key(provider) {
            Some(ConfigValue::Ready(key)) => key.is_some(),
            Some(ConfigValue::Command { .. }) => true,
            None => match self.fallback.get(provider) {
                Some(raw) if raw.starts_with('!') => true,
                Some(raw) => resolve_config_value_uncached(raw, &self.env).is_some(),
                None => false,
            },
        }
    }

    /// Sources 1–3 only, `!command`s unresolved. `Some(Ready(None))` = a source claimed the
    /// provider but gave no key (an OAuth entry we cannot use), which stops the search like the
    /// reference does.
    pub(super) fn stored_or_env_key(&self, provider: &str) -> Option<ConfigValue> {
        if let Some(key) = self.runtime.get(provider).filter(|k| !k.is_empty()) {
            return Some(ConfigValue::Ready(Some(key.clone())));
        }
        if let Some(Value::Object(cred)) = self.stored.get(provider) {
            match cred.get("type").and_then(Value::as_str) {
                Some("api_key") => {
                    let key = cred.get("key").and_then(Value::as_str).unwrap_or("");
                    return Some(self.cached_value(key));
                }
                Some("oauth") if crate::llm::oauth::is_refreshable(provider) => {
                    // Used even when expired: the stream thread refreshes it (`oauth_login`).
                    let access = cred.get("access").and_then(Value::as_str).unwrap_or("");
                    return Some(ConfigValue::Ready(Some(access.to_string())));
                }
                Some("oauth") => return Some(ConfigValue::Ready(oauth_access_token(cred))),
                _ => {}
            }
        }
        env_api_key_for(provider, &self.env, self.sdk).map(|k| ConfigValue::Ready(Some(k)))
    }

    /// `config` as a value whose `!command` result is cached for the process (pi's
    /// `resolveConfigValue`); anything else is resolved now.
    fn cached_value(&self, config: &str) -> ConfigValue {
        match config.strip_prefix('!') {
            Some(cmd) => {
                let cell = self
                    .cache
                    .borrow_mut()
                    .entry(config.to_string())
                    .or_default()
                    .clone();
                match cell.get() {
                    Some(hit) => ConfigValue::Ready(hit.clone()),
                    None => ConfigValue::Command {
                        command: cmd.to_string(),
                        cache: Some(cell),
                    },
                }
            }
            None => ConfigValue::Ready(resolve_config_value_uncached(config, &self.env)),
        }
    }

    /// [`resolve_config_value`] with this `Auth`'s environment and command cache, run now.
    pub fn resolve_cached(&self, config: &str) -> Option<String> {
        self.cached_value(config)
            .resolve(&CancelToken::never())
            .ok()
            .flatten()
    }

    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The stored OAuth login a request to `provider` uses, when that is where its key comes
    /// from (no `--api-key` override) and pith can refresh it.
    pub fn oauth_login(&self, provider: &str) -> Option<crate::llm::oauth::OAuthLogin> {
        if self.runtime.get(provider).is_some_and(|k| !k.is_empty()) {
            return None;
        }
        let Some(Value::Object(cred)) = self.stored.get(provider) else {
            return None;
        };
        if cred.get("type").and_then(Value::as_str) != Some("oauth")
            || !crate::llm::oauth::is_refreshable(provider)
        {
            return None;
        }
        let token_url = crate::llm::oauth::token_url_env(provider)
            .and_then(|name| (self.env)(name))
            .filter(|u| !u.is_empty());
        Some(crate::llm::oauth::OAuthLogin {
            provider: provider.to_string(),
            auth_path: self.path.clone()?,
            entry: cred.clone(),
            token_url,
        })
    }
}

/// An OAuth entry's access token while it is unexpired, for logins pith cannot refresh (an
/// expired token yields no key).
fn oauth_access_token(cred: &serde_json::Map<String, Value>) -> Option<String> {
    let access = cred.get("access").and_then(Value::as_str)?;
    let expires = cred.get("expires").and_then(Value::as_f64).unwrap_or(0.0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0);
    (now_ms < expires && !access.is_empty()).then(|| access.to_string())
}

/// JavaScript truthiness of a JSON value (`if (data[provider])`).
fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A config value on its way to a request: already known, or a `!command` still to run on the
/// request's worker.
#[derive(Clone)]
pub enum ConfigValue {
    Ready(Option<String>),
    Command {
        /// What `sh -c` runs (without the `!`).
        command: String,
        /// Where the result is kept for the process (auth.json keys); `None`: run every time.
        cache: Option<CommandCell>,
    },
}

impl fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::Ready(v) => write!(
                f,
                "Ready({})",
                if v.is_some() { "<redacted>" } else { "None" }
            ),
            ConfigValue::Command { command, cache } => f
                .debug_struct("Command")
                .field("command", command)
                .field("cached", &cache.is_some())
                .finish(),
        }
    }
}

/// Why a `!command` gave no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandFailure {
    /// It could not start, exited non-zero, or printed nothing.
    Failed,
    /// It ran past [`COMMAND_TIMEOUT`] and was killed.
    TimedOut,
    /// The request was cancelled meanwhile; the command was killed.
    Cancelled,
}

impl ConfigValue {
    /// A value that is not cached: `!cmd` stays a command, anything else is resolved now.
    pub fn uncached(config: &str, env: &Env) -> ConfigValue {
        match config.strip_prefix('!') {
            Some(cmd) => ConfigValue::Command {
                command: cmd.to_string(),
                cache: None,
            },
            None => ConfigValue::Ready(resolve_config_value_uncached(config, env)),
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self, ConfigValue::Ready(_))
    }

    /// The value, running the command if there is one (stopped when `cancel` fires). A failed
    /// command's `None` is cached like a value, as pi caches it; a cancelled or timed-out one
    /// is not.
    pub fn resolve(&self, cancel: &CancelToken) -> Result<Option<String>, CommandFailure> {
        match self {
            ConfigValue::Ready(v) => Ok(v.clone()),
            ConfigValue::Command { command, cache } => {
                if let Some(hit) = cache.as_ref().and_then(|c| c.get()) {
                    return Ok(hit.clone());
                }
                let value = match run_command(command, COMMAND_TIMEOUT, cancel) {
                    Ok(v) => Some(v),
                    Err(CommandFailure::Failed) => None,
                    Err(e) => return Err(e),
                };
                if let Some(c) = cache {
                    let _ = c.set(value.clone());
                }
                Ok(value)
            }
        }
    }

    /// [`ConfigValue::resolve`] where no value is an error: pi's text, and why when it is not
    /// simply a failure.
    pub fn resolve_or_err(
        &self,
        cancel: &CancelToken,
        description: &str,
    ) -> Result<String, String> {
        let command = match self {
            ConfigValue::Command { command, .. } => command.as_str(),
            ConfigValue::Ready(_) => "",
        };
        match self.resolve(cancel) {
            Ok(Some(v)) => Ok(v),
            Ok(None) if self.is_ready() => Err(format!("Failed to resolve {description}")),
            Ok(None) => Err(format!(
                "Failed to resolve {description} from shell command: {command}"
            )),
            // Said so (pi's text ends at the command), in words the retry rules do not match:
            // a command that hangs is not retried.
            Err(CommandFailure::TimedOut) => Err(format!(
                "Failed to resolve {description} from shell command: {command} (still running after {} s: stopped)",
                COMMAND_TIMEOUT.as_secs()
            )),
            Err(_) => Err(crate::llm::api::ABORTED_BEFORE_RESPONSE.to_string()),
        }
    }
}

/// Resolves a config value without caching, here and now: `!cmd` → trimmed stdout of
/// `sh -c cmd` (`None` on failure, timeout or empty output); else the env var of that exact name
/// if non-empty; else the literal.
pub fn resolve_config_value_uncached(config: &str, env: &Env) -> Option<String> {
    if let Some(cmd) = config.strip_prefix('!') {
        return run_command(cmd, COMMAND_TIMEOUT, &CancelToken::never()).ok();
    }
    match env(config) {
        Some(v) if !v.is_empty() => Some(v),
        _ => Some(config.to_string()),
    }
}

/// Runs `sh -c cmd` in its own process group with stdin and stderr closed, a time limit and
/// bounded output; the whole group is killed on timeout or when `cancel` fires. The trimmed
/// output, if the command succeeded and printed something.
fn run_command(
    cmd: &str,
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<String, CommandFailure> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|_| CommandFailure::Failed)?;
    let Some(stdout) = child.stdout.take() else {
        return Err(CommandFailure::Failed);
    };
    // Read on a helper thread so a chatty command cannot block on a full pipe while we poll.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.take(COMMAND_OUTPUT_LIMIT).read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        let stop = if cancel.is_cancelled() {
            Some(CommandFailure::Cancelled)
        } else if Instant::now() >= deadline {
            Some(CommandFailure::TimedOut)
        } else {
            None
        };
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if stop.is_none() => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                crate::tools::process::kill_group(&child);
                let _ = child.kill();
                let _ = child.wait();
                return Err(stop.unwrap_or(CommandFailure::Failed));
            }
        }
    };
    // A background grandchild may keep the pipe open: never wait past the deadline for EOF.
    let out = rx
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .map_err(|_| CommandFailure::TimedOut)?;
    if !status.success() {
        return Err(CommandFailure::Failed);
    }
    let text = String::from_utf8_lossy(&out).trim().to_string();
    if text.is_empty() {
        return Err(CommandFailure::Failed);
    }
    Ok(text)
}

/// Environment variables holding a provider's key (`getApiKeyEnvVars`), first wins.
pub fn env_var_names(provider: &str) -> &'static [&'static str] {
    match provider {
        "github-copilot" => &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
        "anthropic" => &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
        "openai" => &["OPENAI_API_KEY"],
        "azure-openai-responses" => &["AZURE_OPENAI_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "google" => &["GEMINI_API_KEY"],
        "google-vertex" => &["GOOGLE_CLOUD_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "vercel-ai-gateway" => &["AI_GATEWAY_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "minimax" => &["MINIMAX_API_KEY"],
        "minimax-cn" => &["MINIMAX_CN_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "opencode" | "opencode-go" => &["OPENCODE_API_KEY"],
        "kimi-coding" => &["KIMI_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => &["CLOUDFLARE_API_KEY"],
        "xiaomi" => &["XIAOMI_API_KEY"],
        "xiaomi-token-plan-cn" => &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "xiaomi-token-plan-ams" => &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "xiaomi-token-plan-sgp" => &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        _ => &[],
    }
}

/// pi 0.87.1's variables: those of the providers it added, else 0.73.1's.
pub fn env_var_names_extended(provider: &str) -> &'static [&'static str] {
    match provider {
        "ant-ling" => &["ANT_LING_API_KEY"],
        "qwen-token-plan" | "qwen-token-plan-individual" => &["QWEN_TOKEN_PLAN_API_KEY"],
        "qwen-token-plan-cn" => &["QWEN_TOKEN_PLAN_CN_API_KEY"],
        "nvidia" => &["NVIDIA_API_KEY"],
        "zai-coding-cn" => &["ZAI_CODING_CN_API_KEY"],
        "together" => &["TOGETHER_API_KEY"],
        "meta" => &["META_API_KEY"],
        other => env_var_names(other),
    }
}

/// pi 1.6.0's variables: `azure` (was `azure-openai-responses`), `typesafe`, and the Qwen token
/// plans' per-plan variable before the one of their region; else 0.87.1's.
pub fn env_var_names_per_plan(provider: &str) -> &'static [&'static str] {
    match provider {
        "azure" => &["AZURE_OPENAI_API_KEY"],
        "azure-openai-responses" => &[],
        "typesafe" => &["TYPESAFE_API_KEY"],
        "qwen-token-plan" => &["QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"],
        "qwen-token-plan-cn" => &[
            "QWEN_TOKEN_PLAN_TEAM_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        "qwen-token-plan-individual" => &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY",
            "QWEN_TOKEN_PLAN_API_KEY",
        ],
        "qwen-token-plan-individual-cn" => &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        other => env_var_names_extended(other),
    }
}

/// The key a provider gets from the environment (`getEnvApiKey`), including the
/// `"<authenticated>"` sentinel for ambient Vertex / Bedrock credentials.
pub fn env_api_key(provider: &str, env: &Env) -> Option<String> {
    env_api_key_for(provider, env, SdkGeneration::default())
}

/// [`env_api_key`] as the given SDK generation reads it.
pub fn env_api_key_for(provider: &str, env: &Env, sdk: SdkGeneration) -> Option<String> {
    let get = |name: &str| env(name).filter(|v| !v.is_empty());
    let names = match sdk.env_key_names() {
        EnvKeyNames::Base => env_var_names(provider),
        EnvKeyNames::Extended => env_var_names_extended(provider),
        EnvKeyNames::PerPlan => env_var_names_per_plan(provider),
    };
    if let Some(v) = names.iter().find_map(|name| get(name)) {
        return Some(v);
    }
    match provider {
        "google-vertex" => {
            // pith also takes an access token from the environment (docs/rpc.md).
            let has_token = get("GOOGLE_OAUTH_ACCESS_TOKEN").is_some();
            let has_credentials = has_token
                || match get("GOOGLE_APPLICATION_CREDENTIALS") {
                    Some(path) => Path::new(&path).exists(),
                    None => get("HOME").is_some_and(|home| {
                        Path::new(&home)
                            .join(".config/gcloud/application_default_credentials.json")
                            .exists()
                    }),
                };
            let has_project =
                get("GOOGLE_CLOUD_PROJECT").is_some() || get("GCLOUD_PROJECT").is_some();
            let has_location = get("GOOGLE_CLOUD_LOCATION").is_some();
            (has_credentials && has_project && has_location).then(|| "<authenticated>".to_string())
        }
        "amazon-bedrock" => {
            let ambient = get("AWS_PROFILE").is_some()
                || (get("AWS_ACCESS_KEY_ID").is_some() && get("AWS_SECRET_ACCESS_KEY").is_some())
                || get("AWS_BEARER_TOKEN_BEDROCK").is_some()
                || get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
                || get("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some()
                || get("AWS_WEB_IDENTITY_TOKEN_FILE").is_some();
            ambient.then(|| "<authenticated>".to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod command_tests {
    use super::*;
    use crate::cancel::cancel_pair;

    #[test]
    fn a_command_past_its_limit_is_stopped() {
        let r = run_command(
            "sleep 30",
            Duration::from_millis(100),
            &CancelToken::never(),
        );
        assert_eq!(r, Err(CommandFailure::TimedOut));
    }

    #[test]
    fn a_cancelled_command_is_stopped() {
        let (mut src, tok) = cancel_pair();
        src.cancel();
        let r = run_command("sleep 30", Duration::from_secs(30), &tok);
        assert_eq!(r, Err(CommandFailure::Cancelled));
    }

    #[test]
    fn output_is_trimmed_and_failure_is_failure() {
        let never = CancelToken::never();
        let r = run_command("printf ' k \\n'", COMMAND_TIMEOUT, &never);
        assert_eq!(r.as_deref(), Ok("k"));
        let r = run_command("printf k; exit 1", COMMAND_TIMEOUT, &never);
        assert_eq!(r, Err(CommandFailure::Failed));
    }

    #[test]
    fn a_failed_command_is_pis_error() {
        let failed = ConfigValue::Command {
            command: "exit 2".into(),
            cache: None,
        };
        let e = failed
            .resolve_or_err(&CancelToken::never(), "API key for provider \"p\"")
            .unwrap_err();
        assert_eq!(
            e,
            "Failed to resolve API key for provider \"p\" from shell command: exit 2"
        );
    }
}
