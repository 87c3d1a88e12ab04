//! OAuth logins that pi's interactive `/login` stores in `auth.json` (Anthropic Claude Pro/Max,
//! OpenAI Codex, GitHub Copilot): using their access token and refreshing it headless.
//!
//! The state machine puts the stored entry on the request ([`OAuthLogin`]); the stream thread's
//! worker calls [`resolve`] before building the request, so a refresh never blocks the machine.
//! A fresh token is used as is. An expired one is refreshed the way pi's `AuthStorage` does:
//! under the `auth.json` lock ([`crate::llm::lockfile`], the one pi takes), re-read the file —
//! another process may have refreshed already — and only if the token there is still expired,
//! call the provider's token endpoint, then write the file back (atomically, other entries
//! kept, mode 0600). The newest entry is remembered for the life of the process so later
//! requests do not take the lock again.
//!
//! Tokens are secrets: [`OAuthLogin`]'s `Debug` redacts the entry, and no error text here ever
//! contains a token: a failure status is reported with the OAuth `error` / `error_description`
//! of a JSON body only, bounded, with every known secret replaced by `[redacted]`
//! ([`failure_message`]) — never the body itself, which an endpoint may make echo the request.
//! auth.json is written 0600 (as pi writes it), whatever its mode was.
//!
//! The pure core (what to send, how to read the answer, how the file changes) is separate from
//! the glue ([`resolve`]) and unit-tested.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::cancel::CancelToken;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::llm::{LlmRequest, Timeouts, http, lockfile};

/// Anthropic's OAuth client id (pi's, base64 in its source).
const ANTHROPIC_CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
const ANTHROPIC_TOKEN_URL: &str = "https://platform.claude.com/v1/oauth/token";
const CODEX_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
const CODEX_TOKEN_URL: &str = "https://auth.openai.com/oauth/token";
/// The claim of a Codex access token that carries the ChatGPT account id.
const CODEX_JWT_CLAIM: &str = "https://api.openai.com/auth";
/// The headers pi's Copilot login sends (and every Copilot model carries).
pub const COPILOT_HEADERS: [(&str, &str); 4] = [
    ("User-Agent", "GitHubCopilotChat/0.35.0"),
    ("Editor-Version", "vscode/1.107.0"),
    ("Editor-Plugin-Version", "copilot-chat/0.35.0"),
    ("Copilot-Integration-Id", "vscode-chat"),
];
/// The built-in Copilot models' base URL; a token names the one to use instead.
pub const COPILOT_DEFAULT_BASE_URL: &str = "https://api.individual.githubcopilot.com";

/// Five minutes: how much earlier than the server's expiry pi records a token as expired.
const EXPIRY_MARGIN_MS: f64 = 5.0 * 60.0 * 1000.0;
/// Attempts of one refresh when the failure is transient.
const REFRESH_ATTEMPTS: u32 = 3;
/// How long to wait for another process holding the auth.json lock.
const LOCK_PATIENCE: Duration = Duration::from_secs(30);
/// Largest token endpoint answer read.
const MAX_TOKEN_RESPONSE: u64 = 256 * 1024;

/// Providers whose stored login pith can use and refresh.
pub fn is_refreshable(provider: &str) -> bool {
    matches!(provider, "anthropic" | "openai-codex" | "github-copilot")
}

/// The environment variable that overrides a provider's token endpoint (proxies, tests).
pub fn token_url_env(provider: &str) -> Option<&'static str> {
    match provider {
        "anthropic" => Some("PITH_ANTHROPIC_TOKEN_URL"),
        "openai-codex" => Some("PITH_OPENAI_CODEX_TOKEN_URL"),
        "github-copilot" => Some("PITH_GITHUB_COPILOT_TOKEN_URL"),
        _ => None,
    }
}

/// A stored login, as the request carries it to the stream thread.
#[derive(Clone, PartialEq)]
pub struct OAuthLogin {
    pub provider: String,
    /// The `auth.json` it came from.
    pub auth_path: PathBuf,
    /// The entry as the state machine last read it (`{"type":"oauth","access":…}`).
    pub entry: Map<String, Value>,
    /// The token endpoint to use instead of the provider's.
    pub token_url: Option<String>,
}

impl std::fmt::Debug for OAuthLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthLogin")
            .field("provider", &self.provider)
            .field("auth_path", &self.auth_path)
            .field("entry", &"<redacted>")
            .finish()
    }
}

/// Whether the request needs [`resolve`] before it is built.
pub fn needs_refresh_check(req: &LlmRequest) -> bool {
    req.extra.oauth.is_some()
}

// ------------------------------------------------------------------------------------------------
// Pure core

/// The entry's `expires` (ms since the epoch); 0 when missing.
pub fn expires_ms(entry: &Map<String, Value>) -> f64 {
    entry.get("expires").and_then(Value::as_f64).unwrap_or(0.0)
}

/// pi's test: a token is used while `now < expires`.
pub fn is_fresh(entry: &Map<String, Value>, now_ms: f64) -> bool {
    now_ms < expires_ms(entry) && access(entry).is_some()
}

/// The entry's access token.
pub fn access(entry: &Map<String, Value>) -> Option<&str> {
    entry
        .get("access")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// One token endpoint request.
#[derive(Clone, Debug, PartialEq)]
pub struct RefreshCall {
    pub method: &'static str,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// A refresh that did not work. `transient` failures (network, 408/429/5xx) are retried.
#[derive(Clone, Debug, PartialEq)]
pub struct RefreshError {
    pub message: String,
    pub transient: bool,
}

impl RefreshError {
    fn permanent(message: impl Into<String>) -> RefreshError {
        RefreshError {
            message: message.into(),
            transient: false,
        }
    }
}

/// What to send to refresh `entry` of `provider` (pi's `refreshToken` of each login provider).
pub fn refresh_call(
    provider: &str,
    entry: &Map<String, Value>,
    token_url: Option<&str>,
) -> Result<RefreshCall, RefreshError> {
    let refresh = entry
        .get("refresh")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RefreshError::permanent("the stored login has no refresh token"))?;
    let h = |k: &str, v: &str| (k.to_string(), v.to_string());
    match provider {
        "anthropic" => Ok(RefreshCall {
            method: "POST",
            url: token_url.unwrap_or(ANTHROPIC_TOKEN_URL).to_string(),
            headers: vec![
                h("Content-Type", "application/json"),
                h("Accept", "application/json"),
            ],
            body: Some(
                json!({"grant_type": "refresh_token", "client_id": ANTHROPIC_CLIENT_ID,
                       "refresh_token": refresh})
                .to_string()
                .into_bytes(),
            ),
        }),
        "openai-codex" => Ok(RefreshCall {
            method: "POST",
            url: token_url.unwrap_or(CODEX_TOKEN_URL).to_string(),
            headers: vec![h("Content-Type", "application/x-www-form-urlencoded")],
            body: Some(
                format!(
                    "grant_type=refresh_token&refresh_token={}&client_id={}",
                    form_encode(refresh),
                    form_encode(CODEX_CLIENT_ID)
                )
                .into_bytes(),
            ),
        }),
        "github-copilot" => {
            let domain = entry
                .get("enterpriseUrl")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .and_then(normalize_domain)
                .unwrap_or_else(|| "github.com".to_string());
            let url = match token_url {
                Some(u) => u.to_string(),
                None => format!("https://api.{domain}/copilot_internal/v2/token"),
            };
            let mut headers = vec![
                h("Accept", "application/json"),
                h("Authorization", &format!("Bearer {refresh}")),
            ];
            headers.extend(COPILOT_HEADERS.iter().map(|(k, v)| h(k, v)));
            Ok(RefreshCall {
                method: "GET",
                url,
                headers,
                body: None,
            })
        }
        other => Err(RefreshError::permanent(format!(
            "pith cannot refresh {other} logins"
        ))),
    }
}

/// The new entry from the token endpoint's answer (`status`, `body`), keeping what pi keeps.
pub fn refreshed_entry(
    provider: &str,
    old: &Map<String, Value>,
    status: u16,
    body: &str,
    now_ms: f64,
) -> Result<Map<String, Value>, RefreshError> {
    if !(200..300).contains(&status) {
        return Err(RefreshError {
            message: failure_message(status, body, old),
            transient: matches!(status, 408 | 429) || status >= 500,
        });
    }
    let v: Value = serde_json::from_str(body)
        .map_err(|_| RefreshError::permanent("token endpoint answered with invalid JSON"))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let n = |k: &str| v.get(k).and_then(Value::as_f64);
    let missing =
        |what: &str| RefreshError::permanent(format!("token endpoint answer has no {what}"));
    let mut e = Map::new();
    e.insert("type".into(), json!("oauth"));
    match provider {
        "anthropic" | "openai-codex" => {
            let access = s("access_token").ok_or_else(|| missing("access_token"))?;
            let refresh = s("refresh_token").ok_or_else(|| missing("refresh_token"))?;
            let expires_in = n("expires_in").ok_or_else(|| missing("expires_in"))?;
            let margin = if provider == "anthropic" {
                EXPIRY_MARGIN_MS
            } else {
                0.0
            };
            let expires = now_ms + expires_in * 1000.0 - margin;
            if provider == "anthropic" {
                e.insert("refresh".into(), json!(refresh));
                e.insert("access".into(), json!(access));
                e.insert("expires".into(), js_number(expires));
            } else {
                let account = codex_account_id(access).ok_or_else(|| {
                    RefreshError::permanent("Failed to extract accountId from token")
                })?;
                e.insert("access".into(), json!(access));
                e.insert("refresh".into(), json!(refresh));
                e.insert("expires".into(), js_number(expires));
                e.insert("accountId".into(), json!(account));
            }
        }
        "github-copilot" => {
            let token = s("token").ok_or_else(|| missing("token"))?;
            let at = n("expires_at").ok_or_else(|| missing("expires_at"))?;
            let refresh = old.get("refresh").cloned().unwrap_or(Value::Null);
            e.insert("refresh".into(), refresh);
            e.insert("access".into(), json!(token));
            e.insert("expires".into(), js_number(at * 1000.0 - EXPIRY_MARGIN_MS));
            if let Some(u) = old.get("enterpriseUrl").filter(|u| !u.is_null()) {
                e.insert("enterpriseUrl".into(), u.clone());
            }
        }
        other => {
            return Err(RefreshError::permanent(format!(
                "pith cannot refresh {other} logins"
            )));
        }
    }
    Ok(e)
}

/// auth.json with `provider`'s entry replaced, formatted as pi writes it
/// (`JSON.stringify(data, null, 2)`; the entry keeps its place among the others).
pub fn merged_file(
    text: &str,
    provider: &str,
    entry: &Map<String, Value>,
) -> Result<String, String> {
    let mut data = parse_file(text)?;
    data.insert(provider.to_string(), Value::Object(entry.clone()));
    serde_json::to_string_pretty(&Value::Object(data)).map_err(|e| e.to_string())
}

/// The entries of auth.json (an empty file counts as `{}`).
pub fn parse_file(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("auth.json is not a JSON object".into()),
        Err(e) => Err(format!("auth.json does not parse: {e}")),
    }
}

/// The base URL a Copilot token names (`proxy-ep=proxy.X` → `https://api.X`), else the
/// enterprise one, else the default (pi's `getGitHubCopilotBaseUrl`).
pub fn copilot_base_url(token: &str, enterprise: Option<&str>) -> String {
    let proxy = token
        .split(';')
        .find_map(|part| part.trim().strip_prefix("proxy-ep="))
        .filter(|p| !p.is_empty());
    if let Some(host) = proxy {
        let host = host
            .strip_prefix("proxy.")
            .map_or_else(|| host.to_string(), |rest| format!("api.{rest}"));
        return format!("https://{host}");
    }
    match enterprise.and_then(normalize_domain) {
        Some(d) => format!("https://copilot-api.{d}"),
        None => COPILOT_DEFAULT_BASE_URL.to_string(),
    }
}

/// The host of a domain or URL (`https://ghe.example.com/x` → `ghe.example.com`).
pub fn normalize_domain(input: &str) -> Option<String> {
    let t = input.trim();
    let rest = t.split_once("://").map_or(t, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// The ChatGPT account id inside a Codex access token (a JWT).
pub fn codex_account_id(token: &str) -> Option<String> {
    use base64::Engine;
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let trimmed = payload.trim_end_matches('=');
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(trimmed)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(trimmed))
        .ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    v.get(CODEX_JWT_CLAIM)?
        .get("chatgpt_account_id")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn js_number(ms: f64) -> Value {
    if ms.fract() == 0.0 && ms.abs() < 9.0e15 {
        json!(ms as i64)
    } else {
        json!(ms)
    }
}

fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Most characters of one field of a token endpoint's error quoted in a message.
const MAX_ERROR_FIELD: usize = 200;

/// What a failed token request says: `token endpoint answered <status>`, then the OAuth
/// `error` and `error_description` of a JSON body (or `error.type` / `error.message` of an API
/// error body), each bounded and with every secret of `old` (refresh and access token, in the
/// forms a request carries them) replaced by `[redacted]`. Nothing else of the body: an endpoint
/// that echoes its request would put the refresh token on stdout and into the session file.
pub fn failure_message(status: u16, body: &str, old: &Map<String, Value>) -> String {
    let v: Value = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
    let field = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let (error, description) = match v.get("error") {
        Some(Value::Object(_)) => {
            let e = &v["error"];
            (field(e, "type"), field(e, "message"))
        }
        _ => (field(&v, "error"), field(&v, "error_description")),
    };
    let parts: Vec<String> = [error, description]
        .into_iter()
        .flatten()
        .map(|s| redact(&s, old))
        .map(|s| {
            let clean: String = s.chars().filter(|c| !c.is_control()).collect();
            match clean.char_indices().nth(MAX_ERROR_FIELD) {
                Some((i, _)) => format!("{}…", &clean[..i]),
                None => clean,
            }
        })
        .collect();
    if parts.is_empty() {
        format!("token endpoint answered {status}")
    } else {
        format!("token endpoint answered {status}: {}", parts.join(": "))
    }
}

/// `text` with each secret of the login `entry` replaced by `[redacted]` (as is, and
/// form-encoded as a refresh request carries it).
fn redact(text: &str, entry: &Map<String, Value>) -> String {
    let mut out = text.to_string();
    for k in ["refresh", "access"] {
        let Some(secret) = entry.get(k).and_then(Value::as_str) else {
            continue;
        };
        // A very short "secret" would blank ordinary words; real tokens are long.
        if secret.len() < 4 {
            continue;
        }
        for form in [secret.to_string(), form_encode(secret)] {
            out = out.replace(&form, "[redacted]");
        }
    }
    out
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

// ------------------------------------------------------------------------------------------------
// Glue: the stream thread's worker

/// The newest entry seen per (auth.json, provider) in this process. A lock rather than a
/// channel: several stream threads may read it at once, and it is touched once per request.
static LATEST: Mutex<Vec<Remembered>> = Mutex::new(Vec::new());

/// (auth.json, provider, entry).
type Remembered = (PathBuf, String, Map<String, Value>);

fn remembered(path: &Path, provider: &str) -> Option<Map<String, Value>> {
    let latest = LATEST.lock().ok()?;
    latest
        .iter()
        .find(|(p, n, _)| p == path && n == provider)
        .map(|(_, _, e)| e.clone())
}

fn remember(path: &Path, provider: &str, entry: &Map<String, Value>) {
    if let Ok(mut latest) = LATEST.lock() {
        match latest
            .iter_mut()
            .find(|(p, n, _)| p == path && n == provider)
        {
            Some(slot) if expires_ms(&slot.2) >= expires_ms(entry) => {}
            Some(slot) => slot.2 = entry.clone(),
            None => latest.push((path.to_path_buf(), provider.to_string(), entry.clone())),
        }
    }
}

/// Put a usable access token on `req` (refreshing the login if it expired). For Copilot the
/// token also names the base URL, which replaces the built-in one.
pub fn resolve(req: &mut LlmRequest, cancel: &CancelToken) -> Result<(), String> {
    let Some(login) = req.extra.oauth.clone() else {
        return Ok(());
    };
    let entry = current_entry(&login, cancel)
        .map_err(|e| format!("Failed to refresh OAuth token for {}: {e}", login.provider))?;
    let Some(token) = access(&entry) else {
        return Err(format!("No API key found for {}", login.provider));
    };
    req.api_key = Some(token.to_string());
    if login.provider == "github-copilot" && req.model.base_url == COPILOT_DEFAULT_BASE_URL {
        let enterprise = entry.get("enterpriseUrl").and_then(Value::as_str);
        req.model.base_url = copilot_base_url(token, enterprise);
    }
    Ok(())
}

/// A fresh entry for `login`: the one it carries, the newest this process saw, the one in
/// auth.json (another process refreshed), or a new one from the token endpoint.
fn current_entry(login: &OAuthLogin, cancel: &CancelToken) -> Result<Map<String, Value>, String> {
    let now = now_ms();
    if is_fresh(&login.entry, now) {
        return Ok(login.entry.clone());
    }
    if let Some(e) = remembered(&login.auth_path, &login.provider).filter(|e| is_fresh(e, now)) {
        return Ok(e);
    }
    let _lock = lockfile::acquire(&login.auth_path, LOCK_PATIENCE)
        .map_err(|e| format!("cannot lock {}: {e}", login.auth_path.display()))?;
    let text = std::fs::read_to_string(&login.auth_path)
        .map_err(|e| format!("cannot read {}: {e}", login.auth_path.display()))?;
    let data = parse_file(&text)?;
    let stored = match data.get(&login.provider) {
        Some(Value::Object(m)) if m.get("type").and_then(Value::as_str) == Some("oauth") => {
            m.clone()
        }
        _ => return Err("the login is no longer in auth.json".into()),
    };
    if is_fresh(&stored, now_ms()) {
        remember(&login.auth_path, &login.provider, &stored);
        return Ok(stored);
    }
    let fresh = refresh_with_retries(login, &stored, cancel)?;
    let text = merged_file(&text, &login.provider, &fresh)?;
    lockfile::write_atomic(&login.auth_path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", login.auth_path.display()))?;
    remember(&login.auth_path, &login.provider, &fresh);
    Ok(fresh)
}

/// The refresh, with retries of transient failures; none once the request was cancelled (the
/// lock is not held for a request nobody waits for).
fn refresh_with_retries(
    login: &OAuthLogin,
    stored: &Map<String, Value>,
    cancel: &CancelToken,
) -> Result<Map<String, Value>, String> {
    let call =
        refresh_call(&login.provider, stored, login.token_url.as_deref()).map_err(|e| e.message)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match refresh_once(&login.provider, stored, &call) {
            Ok(e) => return Ok(e),
            Err(e) if e.transient && attempt < REFRESH_ATTEMPTS => {
                let pause = Duration::from_millis(500 * (1 << attempt));
                if cancel.receiver().recv_timeout(pause).is_err() && cancel.is_cancelled() {
                    return Err(e.message);
                }
            }
            Err(e) => return Err(e.message),
        }
    }
}

fn refresh_once(
    provider: &str,
    stored: &Map<String, Value>,
    call: &RefreshCall,
) -> Result<Map<String, Value>, RefreshError> {
    let agent = http::agent(&Timeouts {
        connect: Duration::from_secs(10),
        stall: Duration::from_secs(15),
    });
    let resp = http::send(
        &agent,
        call.method,
        &call.url,
        &call.headers,
        call.body.as_deref(),
    )
    .and_then(|r| http::read_small(r, MAX_TOKEN_RESPONSE));
    match resp {
        Ok((status, body)) => refreshed_entry(provider, stored, status, &body, now_ms()),
        Err(e) => Err(RefreshError {
            message: match e {
                http::HttpError::Connect(..) => format!("connection error: {e}"),
                http::HttpError::Timeout(_) => format!("token request timed out: {e}"),
                http::HttpError::Other(_) => format!("token request failed: {e}"),
            },
            transient: true,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn freshness_follows_expires() {
        let e = entry(json!({"type":"oauth","access":"a","refresh":"r","expires": 1000}));
        assert!(is_fresh(&e, 999.0));
        assert!(!is_fresh(&e, 1000.0));
        let no_access = entry(json!({"type":"oauth","refresh":"r","expires": 5000}));
        assert!(!is_fresh(&no_access, 1.0));
    }

    #[test]
    fn anthropic_refresh_request_and_answer() {
        let old = entry(json!({"type":"oauth","refresh":"rt-1","access":"old","expires":1}));
        let call = refresh_call("anthropic", &old, None).unwrap();
        assert_eq!(call.method, "POST");
        assert_eq!(call.url, "https://platform.claude.com/v1/oauth/token");
        assert_eq!(
            String::from_utf8(call.body.unwrap()).unwrap(),
            r#"{"grant_type":"refresh_token","client_id":"9d1c250a-e61b-44d9-88ed-5944d1962f5e","refresh_token":"rt-1"}"#
        );
        let body = r#"{"access_token":"sk-ant-oat-new","refresh_token":"rt-2","expires_in":3600}"#;
        let e = refreshed_entry("anthropic", &old, 200, body, 1_000_000.0).unwrap();
        assert_eq!(
            Value::Object(e).to_string(),
            r#"{"type":"oauth","refresh":"rt-2","access":"sk-ant-oat-new","expires":4300000}"#
        );
    }

    #[test]
    fn refresh_failures_are_classified() {
        let old = entry(json!({"type":"oauth","refresh":"rt","access":"a","expires":1}));
        let e = refreshed_entry("anthropic", &old, 400, r#"{"error":"invalid_grant"}"#, 0.0)
            .unwrap_err();
        assert_eq!(e.message, "token endpoint answered 400: invalid_grant");
        assert!(!e.transient);
        for status in [429, 500, 503] {
            assert!(
                refreshed_entry("anthropic", &old, status, "", 0.0)
                    .unwrap_err()
                    .transient
            );
        }
        let bad = refreshed_entry("anthropic", &old, 200, "not json", 0.0).unwrap_err();
        assert_eq!(bad.message, "token endpoint answered with invalid JSON");
        let missing = refreshed_entry("anthropic", &old, 200, "{}", 0.0).unwrap_err();
        assert_eq!(missing.message, "token endpoint answer has no access_token");
        let no_refresh = entry(json!({"type":"oauth","access":"a","expires":1}));
        assert!(refresh_call("anthropic", &no_refresh, None).is_err());
    }

    #[test]
    fn failure_messages_never_quote_secrets() {
        let old =
            entry(json!({"type":"oauth","refresh":"rt-SECRET+1","access":"sk-ACCESS","expires":1}));
        let m = |body: &str| failure_message(400, body, &old);
        assert_eq!(
            m(
                r#"{"error":"invalid_grant","error_description":"rt-SECRET+1 is revoked (sk-ACCESS)"}"#
            ),
            "token endpoint answered 400: invalid_grant: [redacted] is revoked ([redacted])"
        );
        // Not JSON, or JSON without the OAuth fields: the status only.
        assert_eq!(
            m("grant_type=refresh_token&refresh_token=rt-SECRET%2B1"),
            "token endpoint answered 400"
        );
        assert_eq!(
            m(r#"{"echo":{"refresh_token":"rt-SECRET+1"}}"#),
            "token endpoint answered 400"
        );
        // The form-encoded token too; an API error body; bounded fields.
        assert_eq!(
            m(r#"{"error":"bad","error_description":"got rt-SECRET%2B1"}"#),
            "token endpoint answered 400: bad: got [redacted]"
        );
        assert_eq!(
            m(r#"{"type":"error","error":{"type":"invalid_request_error","message":"nope"}}"#),
            "token endpoint answered 400: invalid_request_error: nope"
        );
        let long = format!(r#"{{"error":"{}"}}"#, "x".repeat(1000));
        assert_eq!(
            m(&long),
            format!(
                "token endpoint answered 400: {}…",
                "x".repeat(MAX_ERROR_FIELD)
            )
        );
    }

    #[test]
    fn codex_refresh_is_form_encoded_and_reads_the_account() {
        let old = entry(
            json!({"type":"oauth","access":"x","refresh":"r/1 +","expires":1,"accountId":"old"}),
        );
        let call = refresh_call("openai-codex", &old, Some("http://127.0.0.1:9/t")).unwrap();
        assert_eq!(call.url, "http://127.0.0.1:9/t");
        assert_eq!(
            String::from_utf8(call.body.unwrap()).unwrap(),
            "grant_type=refresh_token&refresh_token=r%2F1+%2B&client_id=app_EMoamEEZ73f0CkXaXp7hrann"
        );
        // {"https://api.openai.com/auth":{"chatgpt_account_id":"acc-42"}}
        let jwt = "eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9hY2NvdW50X2lkIjoiYWNjLTQyIn19.sig";
        assert_eq!(codex_account_id(jwt).as_deref(), Some("acc-42"));
        let body = format!(r#"{{"access_token":"{jwt}","refresh_token":"r2","expires_in":10}}"#);
        let e = refreshed_entry("openai-codex", &old, 200, &body, 5.0).unwrap();
        assert_eq!(
            Value::Object(e).to_string(),
            format!(
                r#"{{"type":"oauth","access":"{jwt}","refresh":"r2","expires":10005,"accountId":"acc-42"}}"#
            )
        );
        assert_eq!(codex_account_id("not.a.jwt"), None);
        assert_eq!(codex_account_id("a.b"), None);
    }

    #[test]
    fn copilot_refresh_uses_the_github_token_and_the_enterprise_domain() {
        let old = entry(
            json!({"type":"oauth","refresh":"ghu_1","access":"x","expires":1,
                               "enterpriseUrl":"https://ghe.example.com/"}),
        );
        let call = refresh_call("github-copilot", &old, None).unwrap();
        assert_eq!(call.method, "GET");
        assert_eq!(
            call.url,
            "https://api.ghe.example.com/copilot_internal/v2/token"
        );
        assert!(
            call.headers
                .contains(&("Authorization".into(), "Bearer ghu_1".into()))
        );
        assert!(
            call.headers
                .contains(&("Editor-Version".into(), "vscode/1.107.0".into()))
        );
        let e = refreshed_entry(
            "github-copilot",
            &old,
            200,
            r#"{"token":"tid=1;exp=2;proxy-ep=proxy.enterprise.githubcopilot.com;x","expires_at":2000}"#,
            0.0,
        )
        .unwrap();
        assert_eq!(
            Value::Object(e.clone()).to_string(),
            r#"{"type":"oauth","refresh":"ghu_1","access":"tid=1;exp=2;proxy-ep=proxy.enterprise.githubcopilot.com;x","expires":1700000,"enterpriseUrl":"https://ghe.example.com/"}"#
        );
        assert_eq!(
            copilot_base_url(access(&e).unwrap(), None),
            "https://api.enterprise.githubcopilot.com"
        );
        assert_eq!(
            copilot_base_url("tid=1", Some("ghe.example.com")),
            "https://copilot-api.ghe.example.com"
        );
        assert_eq!(copilot_base_url("tid=1", None), COPILOT_DEFAULT_BASE_URL);
    }

    #[test]
    fn merged_file_keeps_other_entries_and_their_order() {
        let text = "{\n  \"openai\": {\n    \"type\": \"api_key\",\n    \"key\": \"sk\"\n  },\n  \"anthropic\": {\"type\":\"oauth\",\"access\":\"a\"},\n  \"zzz\": 1\n}";
        let e = entry(json!({"type":"oauth","refresh":"r","access":"b","expires":5}));
        assert_eq!(
            merged_file(text, "anthropic", &e).unwrap(),
            "{\n  \"openai\": {\n    \"type\": \"api_key\",\n    \"key\": \"sk\"\n  },\n  \"anthropic\": {\n    \"type\": \"oauth\",\n    \"refresh\": \"r\",\n    \"access\": \"b\",\n    \"expires\": 5\n  },\n  \"zzz\": 1\n}"
        );
        assert!(merged_file("[1]", "anthropic", &e).is_err());
        assert_eq!(merged_file("", "x", &e).unwrap().lines().next(), Some("{"));
    }

    #[test]
    fn debug_never_shows_tokens() {
        let login = OAuthLogin {
            provider: "anthropic".into(),
            auth_path: PathBuf::from("/x/auth.json"),
            entry: entry(json!({"access":"sk-ant-oat-secret","refresh":"rt-secret"})),
            token_url: None,
        };
        let shown = format!("{login:?}");
        assert!(!shown.contains("secret"), "{shown}");
    }
}
