//! The OAuth credentials pi's `/mcp login` (or `pi mcp login <name>`) stored for remote MCP
//! servers, used and refreshed headless. pith never signs in itself (that needs a browser); it
//! reads what pi stored and, when the access token expired or the server answered 401, trades
//! the stored refresh token for a new one at the stored token endpoint, as pi does.
//!
//! The file is `<agentDir>/mcp-auth.json`: one object whose keys are `mcp__<server>|<URL>`
//! (`-` in the server name becomes `_`; the URL as a WHATWG `URL` serialises it), or the URL
//! alone (older pi versions), and whose values are pi-mcp's per-server state: `serverUrl`,
//! `tokens` (`access_token`, `token_type`, `expires_in`, `scope`, `refresh_token`, ...),
//! `tokensExpireAt` (ms since the epoch), `clientInformation` (`client_id`, `client_secret`,
//! `token_endpoint_auth_method`), `discovery` (`authorizationServerUrl`,
//! `authorizationServerMetadata` with `token_endpoint`, `resourceMetadata` with `resource`), and
//! sign-in leftovers pith keeps untouched. State whose `serverUrl` is another URL is ignored.
//!
//! Locks, as pi's (both proper-lockfile directories, see [`crate::llm::lockfile`]): every read
//! and write of the file holds `<realpath(mcp-auth.json)>.lock`; a refresh holds
//! `<agentDir>/mcp-auth-refresh-<first 16 hex of sha256(key)>.lock` (stale after 20 s, waited
//! for up to 25 s) from reading the tokens to saving new ones, so pi and pith never spend the same
//! rotating refresh token twice. pith rewrites the file atomically (temporary file, rename), mode
//! 0600. Tokens never appear in errors, logs or events.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::config::OAuthClient;
use serde_json::{Map, Value, json};

/// Access tokens this close to expiry are refreshed before they are sent (pi's skew).
const REFRESH_SKEW_MS: i64 = 30_000;
const REFRESH_LOCK_STALE: Duration = Duration::from_secs(20);
const REFRESH_LOCK_WAIT: Duration = Duration::from_secs(25);
const REFRESH_LOCK_STEP: Duration = Duration::from_millis(100);
/// Each request to the token endpoint (pi's `OAUTH_REQUEST_TIMEOUT_MS`).
const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest mcp-auth.json read, and largest token response.
const MAX_FILE: u64 = 4 * 1024 * 1024;
/// pi's Client ID Metadata Documents.
const PI_CLIENT_DOCUMENTS: &str = "https://pi.dev/oauth";

/// Why a request cannot be authorised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No usable credential: the user has to sign in with pi.
    NeedsSignIn,
    /// The refresh failed for another reason (network, token endpoint error, file).
    Failed(String),
}

/// `String(new URL(url))` for the URLs MCP servers have: scheme and host lower-cased, the
/// default port dropped, an empty path made `/`. `None` when it is not an http(s) URL.
pub fn normalize_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() {
        return None;
    }
    let mut host = host.to_ascii_lowercase();
    let default = if scheme == "http" { ":80" } else { ":443" };
    if host.ends_with(default) && !host.ends_with(']') {
        host.truncate(host.len() - default.len());
    }
    let mut out = format!("{scheme}://");
    if let Some(u) = user {
        out.push_str(u);
        out.push('@');
    }
    out.push_str(&host);
    if !tail.starts_with('/') {
        out.push('/');
    }
    out.push_str(tail);
    Some(out)
}

/// The origin (`scheme://host[:port]`) of a normalised URL.
fn origin(url: &str) -> &str {
    let after = url.find("://").map(|i| i + 3).unwrap_or(0);
    let end = url[after..]
        .find(['/', '?', '#'])
        .map(|i| after + i)
        .unwrap_or(url.len());
    &url[..end]
}

fn path_of(url: &str) -> &str {
    let o = origin(url).len();
    let p = &url[o..];
    let end = p.find(['?', '#']).unwrap_or(p.len());
    &p[..end]
}

/// The keys of a server's state: `mcp__<name>|<url>` and the legacy `<url>`.
pub fn store_keys(name: &str, url: &str) -> (String, String) {
    (
        format!("mcp__{}|{url}", name.replace('-', "_")),
        url.to_string(),
    )
}

/// The server's state in the parsed file (its key or the legacy one), if it is this URL's.
pub fn find_state<'a>(states: &'a Value, name: &str, url: &str) -> Option<(&'a Value, String)> {
    let (key, legacy) = store_keys(name, url);
    let (state, at) = match states.get(&key) {
        Some(s) => (s, key),
        None => (states.get(&legacy)?, legacy),
    };
    (state.get("serverUrl").and_then(Value::as_str) == Some(url)).then_some((state, at))
}

pub fn access_token(state: &Value) -> Option<&str> {
    state
        .pointer("/tokens/access_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn refresh_token(state: &Value) -> Option<&str> {
    state
        .pointer("/tokens/refresh_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The access token expires within the skew (`tokensExpireAt` absent: it does not expire).
pub fn expiring(state: &Value, now_ms: i64) -> bool {
    state
        .get("tokensExpireAt")
        .and_then(Value::as_f64)
        .is_some_and(|t| t as i64 - REFRESH_SKEW_MS <= now_ms)
}

/// The token request of a refresh.
#[derive(Debug, PartialEq)]
pub struct RefreshRequest {
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

fn loopback(url: &str) -> bool {
    let o = origin(url);
    let host = o.split_once("://").map(|(_, h)| h).unwrap_or(o);
    let host = host.rsplit_once('@').map(|(_, h)| h).unwrap_or(host);
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| &h[1..]).unwrap_or(host)
    } else {
        host.split(':').next().unwrap_or(host)
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

fn form(pairs: &[(&str, &str)]) -> String {
    fn enc(s: &str, out: &mut String) {
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    out.push(b as char)
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
    }
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        enc(k, &mut out);
        out.push('=');
        enc(v, &mut out);
    }
    out
}

/// 12 characters naming a server URL in pi's per-server Client ID Metadata Document path.
fn callback_id(server_url: &str) -> String {
    use base64::Engine;
    let url = server_url.split('#').next().unwrap_or(server_url);
    let digest = ring::digest::digest(&ring::digest::SHA256, url.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest.as_ref()[..9])
}

/// The refresh request for `state` of server `server_url` (pi-mcp's refresh: the stored
/// client, or pi's Client ID Metadata Document when none was registered and the authorization
/// server accepts documents; the token endpoint from the stored discovery; `resource` from the
/// stored protected-resource metadata). `NeedsSignIn` when the state cannot be refreshed.
pub fn refresh_request(
    state: &Value,
    server_url: &str,
    configured: Option<&OAuthClient>,
) -> Result<RefreshRequest, AuthError> {
    let refresh = refresh_token(state).ok_or(AuthError::NeedsSignIn)?;
    let discovery = state.get("discovery").ok_or(AuthError::NeedsSignIn)?;
    let metadata = discovery
        .get("authorizationServerMetadata")
        .filter(|m| m.is_object());
    let endpoint = match metadata
        .and_then(|m| m.get("token_endpoint"))
        .and_then(Value::as_str)
    {
        Some(e) => normalize_url(e),
        None => discovery
            .get("authorizationServerUrl")
            .and_then(Value::as_str)
            .and_then(normalize_url)
            .map(|a| format!("{}/token", origin(&a))),
    }
    .ok_or(AuthError::NeedsSignIn)?;
    if !endpoint.starts_with("https://") && !loopback(&endpoint) {
        return Err(AuthError::Failed(format!(
            "the token endpoint {} is neither https nor on this machine",
            origin(&endpoint)
        )));
    }
    let strs = |m: Option<&Value>, k: &str| -> Vec<String> {
        m.and_then(|m| m.get(k))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let supported = strs(metadata, "token_endpoint_auth_methods_supported");
    // A client registered in the settings is used instead of a stored one (pi stores none then).
    let configured = configured.map(|c| {
        let mut o = json!({ "client_id": c.client_id });
        if let Some(s) = &c.client_secret {
            o["client_secret"] = json!(s);
        }
        o
    });
    let client = configured
        .as_ref()
        .or_else(|| state.get("clientInformation").filter(|c| c.is_object()));
    let (client_id, secret, hinted) = match client {
        Some(c) => (
            c.get("client_id")
                .and_then(Value::as_str)
                .ok_or(AuthError::NeedsSignIn)?
                .to_string(),
            c.get("client_secret")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            c.get("token_endpoint_auth_method")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        None => {
            let m = metadata.ok_or(AuthError::NeedsSignIn)?;
            let documents = m
                .get("client_id_metadata_document_supported")
                .and_then(Value::as_bool)
                == Some(true)
                && supported.iter().any(|s| s == "none");
            if !documents {
                return Err(AuthError::NeedsSignIn);
            }
            let iss = m
                .get("authorization_response_iss_parameter_supported")
                .and_then(Value::as_bool)
                == Some(true);
            let url = if iss {
                format!("{PI_CLIENT_DOCUMENTS}/client.json")
            } else {
                format!(
                    "{PI_CLIENT_DOCUMENTS}/{}/client.json",
                    callback_id(server_url)
                )
            };
            (url, None, None)
        }
    };
    // pi-mcp's choice of client authentication.
    let method = match hinted.as_deref() {
        Some(h @ ("client_secret_basic" | "client_secret_post" | "none"))
            if supported.is_empty() || supported.iter().any(|s| s == h) =>
        {
            h.to_string()
        }
        _ if supported.is_empty() => if secret.is_some() {
            "client_secret_basic"
        } else {
            "none"
        }
        .to_string(),
        _ => {
            let has = |m: &str| supported.iter().any(|s| s == m);
            if secret.is_some() && has("client_secret_basic") {
                "client_secret_basic"
            } else if secret.is_some() && has("client_secret_post") {
                "client_secret_post"
            } else if has("none") {
                "none"
            } else if secret.is_some() {
                "client_secret_post"
            } else {
                "none"
            }
            .to_string()
        }
    };
    let resource = match discovery
        .get("resourceMetadata")
        .and_then(|r| r.get("resource"))
        .and_then(Value::as_str)
    {
        None => None,
        Some(r) => {
            let configured = normalize_url(r).ok_or(AuthError::NeedsSignIn)?;
            let dir = |p: &str| {
                if p.ends_with('/') {
                    p.to_string()
                } else {
                    format!("{p}/")
                }
            };
            if origin(&configured) != origin(server_url)
                || !dir(path_of(server_url)).starts_with(&dir(path_of(&configured)))
            {
                return Err(AuthError::Failed(format!(
                    "the stored protected resource does not match {}",
                    origin(server_url)
                )));
            }
            Some(r.to_string())
        }
    };
    let mut pairs: Vec<(&str, &str)> =
        vec![("grant_type", "refresh_token"), ("refresh_token", refresh)];
    if let Some(r) = &resource {
        pairs.push(("resource", r));
    }
    let mut headers = vec![
        ("Accept".to_string(), "application/json".to_string()),
        (
            "Content-Type".to_string(),
            "application/x-www-form-urlencoded".to_string(),
        ),
    ];
    if method == "client_secret_basic" {
        use base64::Engine;
        let Some(s) = &secret else {
            return Err(AuthError::Failed(
                "client_secret_basic needs a client secret".into(),
            ));
        };
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{client_id}:{s}"));
        headers.push(("Authorization".to_string(), format!("Basic {basic}")));
    } else {
        pairs.push(("client_id", &client_id));
        if method == "client_secret_post" {
            if let Some(s) = &secret {
                pairs.push(("client_secret", s));
            }
        }
    }
    Ok(RefreshRequest {
        endpoint,
        headers,
        body: form(&pairs),
    })
}

/// How a token endpoint answered a refresh.
#[derive(Debug, PartialEq)]
pub enum RefreshOutcome {
    /// New tokens, stored into the state.
    Refreshed,
    /// The grant is gone (`invalid_grant`): tokens dropped, sign in again.
    GrantRevoked,
    /// The client is gone (`invalid_client`, `unauthorized_client`): client, tokens and discovery
    /// dropped, sign in again.
    ClientRejected,
    /// Anything else (the state is unchanged).
    Failed(String),
}

/// Apply a token endpoint's answer to `state` (pi-mcp's rules: an OAuth error in the body wins
/// over the status; the old refresh token is kept when none comes back, the old scope too).
pub fn apply_refresh(state: &mut Value, status: u16, body: &str, now_ms: i64) -> RefreshOutcome {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    if let Some(code) = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(Value::as_str)
    {
        let Some(obj) = state.as_object_mut() else {
            return RefreshOutcome::Failed("stored state is not an object".into());
        };
        return match code {
            "invalid_grant" => {
                obj.remove("tokens");
                obj.remove("tokensExpireAt");
                RefreshOutcome::GrantRevoked
            }
            "invalid_client" | "unauthorized_client" => {
                for k in ["clientInformation", "tokens", "tokensExpireAt", "discovery"] {
                    obj.remove(k);
                }
                RefreshOutcome::ClientRejected
            }
            other => RefreshOutcome::Failed(format!("the token endpoint answered {other}")),
        };
    }
    if !(200..300).contains(&status) {
        return RefreshOutcome::Failed(format!("the token endpoint answered HTTP {status}"));
    }
    let Some(Value::Object(input)) = parsed else {
        return RefreshOutcome::Failed("the token endpoint's answer is not a JSON object".into());
    };
    let string = |k: &str| {
        input
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let (Some(access), Some(kind)) = (string("access_token"), string("token_type")) else {
        return RefreshOutcome::Failed("the token endpoint's answer has no access_token".into());
    };
    let expires = match input.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(n) => Some(n),
            Err(_) => return RefreshOutcome::Failed("invalid expires_in".into()),
        },
        Some(_) => return RefreshOutcome::Failed("invalid expires_in".into()),
    };
    let old_refresh = refresh_token(state).map(str::to_string);
    let old_scope = state
        .pointer("/tokens/scope")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut tokens = Map::new();
    if let Some(r) = string("refresh_token").map(str::to_string).or(old_refresh) {
        tokens.insert("refresh_token".into(), json!(r));
    }
    tokens.insert("access_token".into(), json!(access));
    tokens.insert("token_type".into(), json!(kind));
    if let Some(e) = expires {
        tokens.insert("expires_in".into(), js_number(e));
    }
    for k in ["scope", "id_token"] {
        if let Some(v) = string(k) {
            tokens.insert(k.into(), json!(v));
        }
    }
    if !tokens.contains_key("scope") {
        if let Some(s) = old_scope {
            tokens.insert("scope".into(), json!(s));
        }
    }
    let Some(obj) = state.as_object_mut() else {
        return RefreshOutcome::Failed("stored state is not an object".into());
    };
    obj.insert("tokens".into(), Value::Object(tokens));
    match expires {
        Some(e) => {
            obj.insert("tokensExpireAt".into(), json!(now_ms + (e * 1000.0) as i64));
        }
        None => {
            obj.remove("tokensExpireAt");
        }
    }
    RefreshOutcome::Refreshed
}

/// A mutex whose poisoning (a panicking holder) is ignored: the data stays usable.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(v: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(v))
    }
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A number as JavaScript writes it (`3600`, not `3600.0`).
fn js_number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One server's credentials in `mcp-auth.json`.
#[derive(Debug)]
pub struct AuthStore {
    file: PathBuf,
    refresh_lock: PathBuf,
    name: String,
    /// The server URL, normalised as pi keys it.
    url: String,
    /// The client registered in the settings (`oauth.clientId`), if any.
    client: Option<OAuthClient>,
    /// The last state read and the file's identity then (re-read only when the file changes).
    cache: Mutex<Option<(FileId, Option<Value>)>>,
}

type FileId = (SystemTime, u64, u64);

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

impl AuthStore {
    /// The store of server `name` at `url` in `file` (`<agentDir>/mcp-auth.json`); `None` when
    /// the URL is not http(s).
    pub fn new(
        file: PathBuf,
        name: &str,
        url: &str,
        client: Option<OAuthClient>,
    ) -> Option<AuthStore> {
        let url = normalize_url(url)?;
        let (key, _) = store_keys(name, &url);
        let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
        let hex: String = digest.as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        Some(AuthStore {
            refresh_lock: dir.join(format!("mcp-auth-refresh-{hex}.lock")),
            file,
            name: name.to_string(),
            url,
            client,
            cache: Mutex::new(None),
        })
    }

    /// Read the whole file under its lock (`None`: no file).
    fn read_states(&self) -> Result<Option<Value>, String> {
        if !self.file.exists() {
            return Ok(None);
        }
        let _lock = crate::llm::lockfile::acquire(&self.file, Duration::from_secs(5))
            .map_err(|e| format!("cannot lock {}: {e}", self.file.display()))?;
        read_json(&self.file)
    }

    /// This server's state, re-read only when the file changed.
    fn state(&self) -> Option<Value> {
        let id = file_id(&self.file)?;
        let mut cache = self.cache.lock();
        if let Some((seen, state)) = cache.as_ref() {
            if *seen == id {
                return state.clone();
            }
        }
        let states = match self.read_states() {
            Ok(s) => s?,
            Err(e) => {
                eprintln!("pith: MCP server {}: {e}", self.name);
                return None;
            }
        };
        let state = find_state(&states, &self.name, &self.url).map(|(s, _)| s.clone());
        *cache = Some((id, state.clone()));
        state
    }

    /// The access token to send (refreshed first when it is about to expire; a failed refresh
    /// sends the old one and lets the server's 401 decide).
    pub fn token(&self) -> Option<String> {
        let state = self.state()?;
        let token = access_token(&state).map(str::to_string);
        if !expiring(&state, now_ms()) || refresh_token(&state).is_none() {
            return token;
        }
        // Whatever happened, the token now stored is the one to send (a failed refresh leaves
        // the old one, and the server's 401 decides).
        let _ = self.refresh(token.as_deref());
        self.state()
            .and_then(|s| access_token(&s).map(str::to_string))
    }

    /// Replace `stale`, the access token that expired or was rejected. Tokens that changed
    /// meanwhile (another process refreshed, or the user signed in again) are kept as they are.
    pub fn refresh(&self, stale: Option<&str>) -> Result<(), AuthError> {
        let _lock = crate::llm::lockfile::acquire_dir(
            &self.refresh_lock,
            REFRESH_LOCK_STALE,
            REFRESH_LOCK_STEP,
            REFRESH_LOCK_WAIT,
        )
        .map_err(|e| AuthError::Failed(format!("cannot take the refresh lock: {e}")))?;
        let states = self
            .read_states()
            .map_err(AuthError::Failed)?
            .ok_or(AuthError::NeedsSignIn)?;
        let (state, _) =
            find_state(&states, &self.name, &self.url).ok_or(AuthError::NeedsSignIn)?;
        if access_token(state) != stale {
            return Ok(());
        }
        let req = refresh_request(state, &self.url, self.client.as_ref())?;
        let (status, body) = post_form(&req)?;
        // Saved under the file lock, over what is in the file now.
        let _file_lock = crate::llm::lockfile::acquire(&self.file, Duration::from_secs(5))
            .map_err(|e| AuthError::Failed(format!("cannot lock mcp-auth.json: {e}")))?;
        let mut states = read_json(&self.file)
            .map_err(AuthError::Failed)?
            .unwrap_or_else(|| json!({}));
        let (mut state, at) = match find_state(&states, &self.name, &self.url) {
            Some((s, at)) => (s.clone(), at),
            None => return Err(AuthError::NeedsSignIn),
        };
        let outcome = apply_refresh(&mut state, status, &body, now_ms());
        if let RefreshOutcome::Failed(e) = &outcome {
            return Err(AuthError::Failed(e.clone()));
        }
        let (key, _) = store_keys(&self.name, &self.url);
        if let Some(obj) = states.as_object_mut() {
            if at != key {
                obj.remove(&at);
            }
            obj.insert(key, state);
        }
        let mut text = serde_json::to_string_pretty(&states).unwrap_or_default();
        text.push('\n');
        crate::llm::lockfile::write_atomic(&self.file, text.as_bytes())
            .map_err(|e| AuthError::Failed(format!("cannot write mcp-auth.json: {e}")))?;
        *self.cache.lock() = None;
        match outcome {
            RefreshOutcome::Refreshed => Ok(()),
            _ => Err(AuthError::NeedsSignIn),
        }
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, String> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut text = String::new();
    f.take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.trim().is_empty() {
        return Ok(Some(json!({})));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.is_object() => Ok(Some(v)),
        Ok(_) => Ok(Some(json!({}))),
        Err(e) => Err(format!("cannot parse {}: {e}", path.display())),
    }
}

fn post_form(req: &RefreshRequest) -> Result<(u16, String), AuthError> {
    let timeouts = crate::llm::Timeouts {
        connect: TOKEN_REQUEST_TIMEOUT,
        stall: TOKEN_REQUEST_TIMEOUT,
    };
    let agent = crate::llm::http::agent(&timeouts);
    let resp =
        crate::llm::http::post_json(&agent, &req.endpoint, &req.headers, req.body.as_bytes())
            .map_err(|e| {
                AuthError::Failed(format!(
                    "cannot reach the token endpoint {}: {e}",
                    origin(&req.endpoint)
                ))
            })?;
    crate::llm::http::read_small(resp, MAX_FILE).map_err(|e| {
        AuthError::Failed(format!(
            "cannot read the token endpoint's answer {}: {e}",
            origin(&req.endpoint)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalise_like_whatwg() {
        assert_eq!(
            normalize_url("HTTP://Example.COM:80").as_deref(),
            Some("http://example.com/")
        );
        assert_eq!(
            normalize_url("https://h:443/mcp?x=1").as_deref(),
            Some("https://h/mcp?x=1")
        );
        assert_eq!(
            normalize_url("http://127.0.0.1:8080/mcp").as_deref(),
            Some("http://127.0.0.1:8080/mcp")
        );
        assert_eq!(normalize_url("ftp://x/"), None);
        assert_eq!(normalize_url("http:///x"), None);
        assert_eq!(store_keys("my-srv", "http://h/").0, "mcp__my_srv|http://h/");
    }

    fn state() -> Value {
        json!({
            "serverUrl": "http://127.0.0.1:9/mcp",
            "tokens": {"access_token": "A1", "token_type": "Bearer", "refresh_token": "R1", "scope": "s"},
            "tokensExpireAt": 1000,
            "clientInformation": {"client_id": "cid", "redirect_uris": []},
            "discovery": {
                "authorizationServerUrl": "http://127.0.0.1:9/",
                "authorizationServerMetadata": {"issuer": "http://127.0.0.1:9/",
                    "token_endpoint": "http://127.0.0.1:9/oauth/token",
                    "response_types_supported": ["code"]},
                "resourceMetadata": {"resource": "http://127.0.0.1:9/mcp"}
            },
            "codeVerifier": "keep"
        })
    }

    #[test]
    fn state_lookup_by_key_legacy_and_url() {
        let url = "http://127.0.0.1:9/mcp";
        let file = json!({"mcp__x|http://127.0.0.1:9/mcp": state()});
        assert!(find_state(&file, "x", url).is_some());
        assert!(find_state(&file, "y", url).is_none());
        let legacy = json!({"http://127.0.0.1:9/mcp": state()});
        assert_eq!(find_state(&legacy, "x", url).unwrap().1, url);
        // State of another URL under this key is not this server's.
        let mut other = state();
        other["serverUrl"] = json!("http://evil/");
        assert!(find_state(&json!({"mcp__x|http://127.0.0.1:9/mcp": other}), "x", url).is_none());
        assert!(expiring(&state(), 0));
        assert!(!expiring(&state(), -40_000));
        assert!(!expiring(&json!({"tokens": {}}), i64::MAX));
    }

    #[test]
    fn refresh_request_as_pi_mcp_builds_it() {
        let url = "http://127.0.0.1:9/mcp";
        let r = refresh_request(&state(), url, None).unwrap();
        assert_eq!(r.endpoint, "http://127.0.0.1:9/oauth/token");
        assert_eq!(
            r.body,
            "grant_type=refresh_token&refresh_token=R1&resource=http%3A%2F%2F127.0.0.1%3A9%2Fmcp&client_id=cid"
        );
        // A secret and no advertised methods: HTTP basic.
        let mut s = state();
        s["clientInformation"]["client_secret"] = json!("sec");
        let r = refresh_request(&s, url, None).unwrap();
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "Authorization" && v == "Basic Y2lkOnNlYw==")
        );
        assert!(!r.body.contains("client_id"));
        // client_secret_post when that is what the server supports.
        s["discovery"]["authorizationServerMetadata"]["token_endpoint_auth_methods_supported"] =
            json!(["client_secret_post"]);
        let r = refresh_request(&s, url, None).unwrap();
        assert!(
            r.body.ends_with("&client_id=cid&client_secret=sec"),
            "{}",
            r.body
        );
        // No refresh token, no discovery: sign in.
        let mut s = state();
        s["tokens"].as_object_mut().unwrap().remove("refresh_token");
        assert_eq!(refresh_request(&s, url, None), Err(AuthError::NeedsSignIn));
        let mut s = state();
        s.as_object_mut().unwrap().remove("discovery");
        assert_eq!(refresh_request(&s, url, None), Err(AuthError::NeedsSignIn));
        // No stored client: pi's document when the server accepts documents.
        let mut s = state();
        s.as_object_mut().unwrap().remove("clientInformation");
        assert_eq!(refresh_request(&s, url, None), Err(AuthError::NeedsSignIn));
        let m = &mut s["discovery"]["authorizationServerMetadata"];
        m["client_id_metadata_document_supported"] = json!(true);
        m["token_endpoint_auth_methods_supported"] = json!(["none"]);
        m["authorization_response_iss_parameter_supported"] = json!(true);
        let r = refresh_request(&s, url, None).unwrap();
        assert!(
            r.body
                .ends_with("client_id=https%3A%2F%2Fpi.dev%2Foauth%2Fclient.json")
        );
        // A plain-http token endpoint elsewhere is refused.
        let mut s = state();
        s["discovery"]["authorizationServerMetadata"]["token_endpoint"] =
            json!("http://auth.example/token");
        assert!(matches!(
            refresh_request(&s, url, None),
            Err(AuthError::Failed(_))
        ));
        // A resource of another origin is refused.
        let mut s = state();
        s["discovery"]["resourceMetadata"]["resource"] = json!("http://other:9/mcp");
        assert!(matches!(
            refresh_request(&s, url, None),
            Err(AuthError::Failed(_))
        ));
    }

    #[test]
    fn a_client_registered_in_the_settings_refreshes_in_place_of_a_stored_one() {
        let url = "http://127.0.0.1:9/mcp";
        let mut s = state();
        s.as_object_mut().unwrap().remove("clientInformation");
        let client = OAuthClient {
            client_id: "mine".into(),
            client_secret: Some("s3".into()),
        };
        // Its secret, sent as the server allows (basic when it names no method).
        let r = refresh_request(&s, url, Some(&client)).unwrap();
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "Authorization" && v == "Basic bWluZTpzMw==")
        );
        // It wins over a stored client too (pi stores none for it, but a stale one may be there).
        let r = refresh_request(
            &state(),
            url,
            Some(&OAuthClient {
                client_id: "mine".into(),
                client_secret: None,
            }),
        )
        .unwrap();
        assert!(r.body.ends_with("&client_id=mine"), "{}", r.body);
        assert!(!format!("{client:?}").contains("s3"));
    }

    #[test]
    fn token_answers_update_the_state() {
        let mut s = state();
        let out = apply_refresh(
            &mut s,
            200,
            r#"{"access_token":"A2","token_type":"Bearer","expires_in":60}"#,
            5_000,
        );
        assert_eq!(out, RefreshOutcome::Refreshed);
        assert_eq!(
            s["tokens"],
            json!({"refresh_token":"R1","access_token":"A2","token_type":"Bearer","expires_in":60,"scope":"s"})
        );
        assert_eq!(s["tokensExpireAt"], json!(65_000));
        assert_eq!(s["codeVerifier"], json!("keep"));
        let out = apply_refresh(
            &mut s,
            200,
            r#"{"access_token":"A3","token_type":"Bearer","refresh_token":"R2"}"#,
            0,
        );
        assert_eq!(out, RefreshOutcome::Refreshed);
        assert_eq!(s["tokens"]["refresh_token"], json!("R2"));
        assert!(s.get("tokensExpireAt").is_none());
        let mut s = state();
        assert_eq!(
            apply_refresh(&mut s, 400, r#"{"error":"invalid_grant"}"#, 0),
            RefreshOutcome::GrantRevoked
        );
        assert!(s.get("tokens").is_none() && s.get("clientInformation").is_some());
        let mut s = state();
        assert_eq!(
            apply_refresh(&mut s, 401, r#"{"error":"invalid_client"}"#, 0),
            RefreshOutcome::ClientRejected
        );
        assert!(s.get("clientInformation").is_none() && s.get("discovery").is_none());
        let mut s = state();
        assert!(matches!(
            apply_refresh(&mut s, 500, "oops", 0),
            RefreshOutcome::Failed(_)
        ));
        assert_eq!(s, state());
    }
}
