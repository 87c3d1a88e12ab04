//! AWS credentials and region, found the way the AWS SDK for JavaScript's default chain finds
//! them (the order pi's Bedrock client uses):
//!
//! 1. the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), unless
//!    `AWS_PROFILE` names a profile explicitly;
//! 2. the profile (`AWS_PROFILE`, else `default`) of `~/.aws/credentials` and `~/.aws/config`
//!    (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`; the credentials file wins): static keys
//!    with an optional session token, or a `credential_process`;
//! 3. web identity (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, e.g. EKS), exchanged with
//!    STS `AssumeRoleWithWebIdentity`;
//! 4. the container endpoint (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` / `_FULL_URI`, ECS).
//!
//! Profiles that assume a role with long-lived keys (`role_arn` + `source_profile`) or use SSO
//! are reported as not supported, by name. The region is `AWS_REGION`, else
//! `AWS_DEFAULT_REGION`, else the profile's `region`.
//!
//! The parsing and the choice are pure ([`from_sources`], [`parse_ini`]); the glue
//! ([`load`]) reads files, runs the credential process and calls the endpoints.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::llm::{Timeouts, http};

/// A key pair (and session token). `Debug` shows the key id only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// The JS SDK's message when no source has credentials.
pub const NO_CREDENTIALS: &str = "Could not load credentials from any providers";

/// Sections of an INI file (`[name]` → `key = value` pairs; `#`/`;` comments).
pub fn parse_ini(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            out.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        let (Some(section), Some((k, v))) = (&current, line.split_once('=')) else {
            continue;
        };
        if let Some(s) = out.get_mut(section) {
            s.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    out
}

/// The settings of `profile`: its `[profile NAME]` (or `[default]`) section of the config file,
/// overridden by its `[NAME]` section of the credentials file.
pub fn profile_settings(config: &str, credentials: &str, profile: &str) -> HashMap<String, String> {
    let cfg = parse_ini(config);
    let mut out = HashMap::new();
    let named = format!("profile {profile}");
    let section = cfg
        .get(&named)
        .or_else(|| (profile == "default").then(|| cfg.get("default")).flatten());
    if let Some(s) = section {
        out.extend(s.clone());
    }
    if let Some(s) = parse_ini(credentials).get(profile) {
        out.extend(s.clone());
    }
    out
}

/// Where the next credentials come from, decided from the environment and the profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Static(Credentials),
    /// `credential_process` of the profile.
    Process(String),
    WebIdentity {
        token_file: PathBuf,
        role_arn: String,
        session_name: String,
    },
    /// URL and optional `Authorization` value.
    Container {
        url: String,
        authorization: Option<String>,
    },
}

/// The source the SDK's chain would pick. `env` gives variables; `profile` the settings of the
/// selected profile ([`profile_settings`]).
pub fn from_sources(
    env: &dyn Fn(&str) -> Option<String>,
    profile: &HashMap<String, String>,
) -> Result<Source, String> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    if get("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1") {
        return Ok(Source::Static(Credentials {
            access_key_id: "dummy-access-key".into(),
            secret_access_key: "dummy-secret-key".into(),
            session_token: None,
        }));
    }
    let explicit_profile = get("AWS_PROFILE");
    if explicit_profile.is_none() {
        if let (Some(id), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            return Ok(Source::Static(Credentials {
                access_key_id: id,
                secret_access_key: secret,
                session_token: get("AWS_SESSION_TOKEN"),
            }));
        }
    }
    let name = explicit_profile.unwrap_or_else(|| "default".into());
    let p = |k: &str| profile.get(k).filter(|v| !v.is_empty()).cloned();
    if let (Some(id), Some(secret)) = (p("aws_access_key_id"), p("aws_secret_access_key")) {
        return Ok(Source::Static(Credentials {
            access_key_id: id,
            secret_access_key: secret,
            session_token: p("aws_session_token"),
        }));
    }
    if let Some(cmd) = p("credential_process") {
        return Ok(Source::Process(cmd));
    }
    if p("sso_session").is_some() || p("sso_start_url").is_some() {
        return Err(format!(
            "AWS profile \"{name}\" uses SSO, which pith does not support; export the credentials (aws configure export-credentials) or use a credential_process"
        ));
    }
    if let (Some(token_file), Some(role_arn)) = (p("web_identity_token_file"), p("role_arn")) {
        return Ok(Source::WebIdentity {
            token_file: PathBuf::from(token_file),
            role_arn,
            session_name: p("role_session_name").unwrap_or_else(|| "pith".into()),
        });
    }
    if p("role_arn").is_some() {
        return Err(format!(
            "AWS profile \"{name}\" assumes a role (role_arn), which pith does not support; use a credential_process or exported credentials"
        ));
    }
    if let (Some(token_file), Some(role_arn)) =
        (get("AWS_WEB_IDENTITY_TOKEN_FILE"), get("AWS_ROLE_ARN"))
    {
        return Ok(Source::WebIdentity {
            token_file: PathBuf::from(token_file),
            role_arn,
            session_name: get("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| "pith".into()),
        });
    }
    let authorization = get("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    if let Some(rel) = get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        return Ok(Source::Container {
            url: format!("http://169.254.170.2{rel}"),
            authorization,
        });
    }
    if let Some(url) = get("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        return Ok(Source::Container { url, authorization });
    }
    Err(NO_CREDENTIALS.into())
}

/// Credentials from the JSON a `credential_process` prints or the container endpoint answers
/// (`AccessKeyId`, `SecretAccessKey`, `SessionToken` or `Token`).
pub fn from_json(text: &str) -> Result<Credentials, String> {
    let v: Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("credentials are not JSON: {e}"))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    match (s("AccessKeyId"), s("SecretAccessKey")) {
        (Some(id), Some(secret)) => Ok(Credentials {
            access_key_id: id.to_string(),
            secret_access_key: secret.to_string(),
            session_token: s("SessionToken").or(s("Token")).map(str::to_string),
        }),
        _ => Err("credentials JSON lacks AccessKeyId or SecretAccessKey".into()),
    }
}

/// Credentials from STS's `AssumeRoleWithWebIdentity` XML answer.
pub fn from_sts_xml(xml: &str) -> Result<Credentials, String> {
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = xml.find(&open)? + open.len();
        let end = start + xml[start..].find(&close)?;
        Some(xml_unescape(xml[start..end].trim()))
    };
    match (tag("AccessKeyId"), tag("SecretAccessKey")) {
        (Some(id), Some(secret)) => Ok(Credentials {
            access_key_id: id,
            secret_access_key: secret,
            session_token: tag("SessionToken"),
        }),
        _ => Err("STS answer has no credentials".into()),
    }
}

fn xml_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The configured region: `AWS_REGION`, `AWS_DEFAULT_REGION`, else the profile's (only looked
/// up when `AWS_PROFILE` is set, as pi leaves region resolution to the SDK then).
pub fn configured_region(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION"))
}

// ------------------------------------------------------------------------------------------------
// Glue

/// The shared config and credentials files.
fn files(env: &dyn Fn(&str) -> Option<String>) -> (PathBuf, PathBuf) {
    let home = env("HOME").unwrap_or_default();
    let aws = Path::new(&home).join(".aws");
    let config = env("AWS_CONFIG_FILE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| aws.join("config"), PathBuf::from);
    let creds = env("AWS_SHARED_CREDENTIALS_FILE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| aws.join("credentials"), PathBuf::from);
    (config, creds)
}

fn read_small(path: &Path) -> String {
    // Config files are small; refuse anything absurd rather than read it.
    match std::fs::metadata(path) {
        Ok(m) if m.len() <= 4 * 1024 * 1024 => std::fs::read_to_string(path).unwrap_or_default(),
        _ => String::new(),
    }
}

/// The selected profile's settings, read from disk.
pub fn selected_profile(env: &dyn Fn(&str) -> Option<String>) -> HashMap<String, String> {
    let (config, creds) = files(env);
    let name = env("AWS_PROFILE")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "default".into());
    profile_settings(&read_small(&config), &read_small(&creds), &name)
}

/// The region a request is signed for: the configured one, else the profile's, else `None`.
pub fn region(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    configured_region(env).or_else(|| {
        env("AWS_PROFILE")
            .filter(|v| !v.is_empty())
            .and_then(|_| selected_profile(env).remove("region"))
            .filter(|r| !r.is_empty())
    })
}

/// The AWS SDK's credential feature ids for `source` (the `m/` list of its `User-Agent`, after
/// the client's own), as pi 1.6.0's client reports them: keys pi passes in code (environment
/// keys, `AWS_BEDROCK_SKIP_AUTH`'s dummy keys) `e`; a profile's keys `n`; a profile's
/// `credential_process` `w,v`; a web identity token `k` then `h` (environment) or `q` (profile);
/// the container endpoint `z`. The first three were recorded from pi 1.6.0; the last two are
/// read from the SDK's providers (they need STS or a container endpoint to record).
pub fn sdk_features(env: &dyn Fn(&str) -> Option<String>, source: &Source) -> &'static str {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    match source {
        Source::Static(c) => {
            let from_env = get("AWS_PROFILE").is_none()
                && get("AWS_ACCESS_KEY_ID").as_deref() == Some(c.access_key_id.as_str());
            let skip = get("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1");
            if from_env || skip { "e" } else { "n" }
        }
        Source::Process(_) => "w,v",
        Source::WebIdentity { token_file, .. } => {
            if get("AWS_WEB_IDENTITY_TOKEN_FILE").as_deref() == token_file.to_str() {
                "k,h"
            } else {
                "k,q"
            }
        }
        Source::Container { .. } => "z",
    }
}

/// Credentials from the chain (may run a command or call an endpoint: a worker thread's job),
/// with the SDK's feature ids of their source ([`sdk_features`]).
pub fn load(
    env: &dyn Fn(&str) -> Option<String>,
    region: &str,
) -> Result<(Credentials, &'static str), String> {
    let profile = selected_profile(env);
    let source = from_sources(env, &profile)?;
    let features = sdk_features(env, &source);
    load_from(env, region, source).map(|c| (c, features))
}

fn load_from(
    env: &dyn Fn(&str) -> Option<String>,
    region: &str,
    source: Source,
) -> Result<Credentials, String> {
    match source {
        Source::Static(c) => Ok(c),
        Source::Process(cmd) => {
            let out = run_process(&cmd)?;
            from_json(&out).map_err(|e| format!("credential_process: {e}"))
        }
        Source::Container { url, authorization } => {
            let mut headers = vec![("accept".to_string(), "application/json".to_string())];
            let token = authorization.or_else(|| {
                env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
                    .map(|p| read_small(Path::new(&p)).trim().to_string())
                    .filter(|t| !t.is_empty())
            });
            if let Some(t) = token {
                headers.push(("authorization".into(), t));
            }
            let (status, body) = fetch("GET", &url, &headers, None)?;
            if status != 200 {
                return Err(format!("container credentials endpoint answered {status}"));
            }
            from_json(&body)
        }
        Source::WebIdentity {
            token_file,
            role_arn,
            session_name,
        } => {
            let token = read_small(&token_file).trim().to_string();
            if token.is_empty() {
                return Err(format!(
                    "web identity token file {} is empty or unreadable",
                    token_file.display()
                ));
            }
            let url = env("AWS_ENDPOINT_URL_STS")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com/"));
            let body = format!(
                "Action=AssumeRoleWithWebIdentity&RoleArn={}&RoleSessionName={}&Version=2011-06-15&WebIdentityToken={}",
                super::sigv4::escape_uri(&role_arn),
                super::sigv4::escape_uri(&session_name),
                super::sigv4::escape_uri(&token)
            );
            let headers = vec![(
                "content-type".to_string(),
                "application/x-www-form-urlencoded".to_string(),
            )];
            let (status, answer) = fetch("POST", &url, &headers, Some(body.as_bytes()))?;
            if status != 200 {
                return Err(format!(
                    "STS AssumeRoleWithWebIdentity answered {status}: {}",
                    answer.chars().take(300).collect::<String>()
                ));
            }
            from_sts_xml(&answer)
        }
    }
}

fn fetch(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Result<(u16, String), String> {
    let agent = http::agent(&Timeouts {
        connect: Duration::from_secs(5),
        stall: Duration::from_secs(10),
    });
    http::send(&agent, method, url, headers, body)
        .and_then(|r| http::read_small(r, 256 * 1024))
        .map_err(|e| format!("{url}: {e}"))
}

/// Run a `credential_process` (10 s limit, output bounded).
fn run_process(cmd: &str) -> Result<String, String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("credential_process: {e}"))?;
    let Some(stdout) = child.stdout.take() else {
        return Err("credential_process: no output".into());
    };
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.take(1 << 20).read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    let out = rx.recv_timeout(Duration::from_secs(10));
    let status = child.try_wait().ok().flatten();
    let status = match status {
        Some(s) => s,
        None => {
            std::thread::sleep(Duration::from_millis(50));
            match child.try_wait().ok().flatten() {
                Some(s) => s,
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("credential_process timed out".into());
                }
            }
        }
    };
    let out = out.map_err(|_| "credential_process timed out".to_string())?;
    if !status.success() {
        return Err(format!("credential_process failed ({status})"));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    const CONFIG: &str = "# comment\n[default]\nregion = eu-west-1\n\n[profile work]\nregion=us-west-2\naws_access_key_id = FROMCONFIG\naws_secret_access_key = s1\n[profile proc]\ncredential_process = /bin/creds --x\n[profile sso]\nsso_session = corp\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n";
    const CREDS: &str = "[default]\naws_access_key_id=AKIDDEFAULT\naws_secret_access_key=secretdefault\n[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = secretwork\naws_session_token = tokwork\n";

    #[test]
    fn ini_profiles_merge_config_and_credentials() {
        let work = profile_settings(CONFIG, CREDS, "work");
        assert_eq!(work["aws_access_key_id"], "AKIDWORK");
        assert_eq!(work["region"], "us-west-2");
        assert_eq!(
            profile_settings(CONFIG, CREDS, "default")["region"],
            "eu-west-1"
        );
        assert!(profile_settings(CONFIG, CREDS, "nope").is_empty());
    }

    #[test]
    fn the_chain_picks_like_the_sdk() {
        let none = HashMap::new();
        // Environment keys, with a session token.
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t"),
        ]);
        assert_eq!(
            from_sources(&env, &none).unwrap(),
            Source::Static(Credentials {
                access_key_id: "AKIDENV".into(),
                secret_access_key: "s".into(),
                session_token: Some("t".into())
            })
        );
        // An explicit profile beats the environment keys.
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_PROFILE", "work"),
        ]);
        let work = profile_settings(CONFIG, CREDS, "work");
        assert_eq!(
            from_sources(&env, &work).unwrap(),
            Source::Static(Credentials {
                access_key_id: "AKIDWORK".into(),
                secret_access_key: "secretwork".into(),
                session_token: Some("tokwork".into())
            })
        );
        let env = env_of(&[("AWS_PROFILE", "proc")]);
        assert_eq!(
            from_sources(&env, &profile_settings(CONFIG, CREDS, "proc")).unwrap(),
            Source::Process("/bin/creds --x".into())
        );
        let env = env_of(&[("AWS_PROFILE", "sso")]);
        let err = from_sources(&env, &profile_settings(CONFIG, CREDS, "sso")).unwrap_err();
        assert!(err.contains("\"sso\" uses SSO"), "{err}");
        let env = env_of(&[("AWS_PROFILE", "role")]);
        let err = from_sources(&env, &profile_settings(CONFIG, "", "role")).unwrap_err();
        assert!(err.contains("assumes a role"), "{err}");
        let env = env_of(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/ci"),
        ]);
        assert!(matches!(
            from_sources(&env, &none).unwrap(),
            Source::WebIdentity { .. }
        ));
        let env = env_of(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds/x")]);
        assert_eq!(
            from_sources(&env, &none).unwrap(),
            Source::Container {
                url: "http://169.254.170.2/v2/creds/x".into(),
                authorization: None
            }
        );
        assert_eq!(
            from_sources(&env_of(&[]), &none).unwrap_err(),
            NO_CREDENTIALS
        );
        let skip = from_sources(&env_of(&[("AWS_BEDROCK_SKIP_AUTH", "1")]), &none).unwrap();
        assert!(matches!(skip, Source::Static(ref c) if c.access_key_id == "dummy-access-key"));
        assert_eq!(
            sdk_features(&env_of(&[("AWS_BEDROCK_SKIP_AUTH", "1")]), &skip),
            "e"
        );
    }

    #[test]
    fn sdk_features_name_the_source() {
        let none = HashMap::new();
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ]);
        assert_eq!(sdk_features(&env, &from_sources(&env, &none).unwrap()), "e");
        // The default profile's keys, and a named profile's beating environment keys.
        let default = profile_settings(CONFIG, CREDS, "default");
        let env = env_of(&[]);
        assert_eq!(
            sdk_features(&env, &from_sources(&env, &default).unwrap()),
            "n"
        );
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_PROFILE", "work"),
        ]);
        let work = profile_settings(CONFIG, CREDS, "work");
        assert_eq!(sdk_features(&env, &from_sources(&env, &work).unwrap()), "n");
        let env = env_of(&[("AWS_PROFILE", "proc")]);
        let proc = profile_settings(CONFIG, CREDS, "proc");
        assert_eq!(
            sdk_features(&env, &from_sources(&env, &proc).unwrap()),
            "w,v"
        );
        let env = env_of(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/ci"),
        ]);
        assert_eq!(
            sdk_features(&env, &from_sources(&env, &none).unwrap()),
            "k,h"
        );
        let env = env_of(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds/x")]);
        assert_eq!(sdk_features(&env, &from_sources(&env, &none).unwrap()), "z");
    }

    #[test]
    fn json_and_sts_answers() {
        let c = from_json(r#"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","SessionToken":"T","Expiration":"2030-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(c.session_token.as_deref(), Some("T"));
        let c = from_json(r#"{"AccessKeyId":"A","SecretAccessKey":"S","Token":"T2"}"#).unwrap();
        assert_eq!(c.session_token.as_deref(), Some("T2"));
        assert!(from_json("{}").is_err());
        assert!(from_json("nope").is_err());
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>sec&amp;ret</SecretAccessKey><SessionToken>tok</SessionToken></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        let c = from_sts_xml(xml).unwrap();
        assert_eq!(c.secret_access_key, "sec&ret");
        assert!(from_sts_xml("<x/>").is_err());
    }

    #[test]
    fn debug_hides_secrets() {
        let c = Credentials {
            access_key_id: "AKID".into(),
            secret_access_key: "supersecret".into(),
            session_token: Some("tokensecret".into()),
        };
        let s = format!("{c:?}");
        assert!(
            !s.contains("secret\"") && !s.contains("supersecret") && !s.contains("tokensecret")
        );
    }
}
