//! Google Cloud access tokens for Vertex AI: from the environment, or from an Application
//! Default Credentials file (`GOOGLE_APPLICATION_CREDENTIALS`, else
//! `~/.config/gcloud/application_default_credentials.json`), as google-auth-library gets them:
//!
//! - `service_account`: a JWT (`iss` = the account, `scope` = cloud-platform, one hour) signed
//!   RS256 with the account's key (`ring`), exchanged at the token endpoint
//!   (`urn:ietf:params:oauth:grant-type:jwt-bearer`). A key whose `universe_domain` is not
//!   `googleapis.com` (sovereign and private clouds) exchanges nothing: the self-signed JWT
//!   (`iss` = `sub` = the account, `scope` = cloud-platform, one hour) is itself the bearer token,
//!   as google-auth-library's `JWT` client does there (`JWTAccess` with scopes);
//! - `authorized_user` (`gcloud auth application-default login`): the refresh token exchanged
//!   for an access token.
//!
//! Tokens are kept for the life of the process and fetched again five minutes before they expire
//! (google-auth-library's eager refresh). The token endpoint is the file's `token_uri`, else
//! `PITH_GOOGLE_TOKEN_URL`, else Google's. `GOOGLE_OAUTH_ACCESS_TOKEN` (e.g. from `gcloud auth
//! print-access-token`) is used as is, before any file.
//!
//! The JWT and request building are pure and unit-tested; [`access_token`] is the glue.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::llm::{Timeouts, http};

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const DEFAULT_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";
/// google-auth-library's `DEFAULT_UNIVERSE`.
const DEFAULT_UNIVERSE: &str = "googleapis.com";
/// Refresh this long before expiry.
const EAGER_REFRESH_MS: f64 = 5.0 * 60.0 * 1000.0;

/// An Application Default Credentials file.
#[derive(Clone, PartialEq)]
pub enum AdcFile {
    ServiceAccount {
        client_email: String,
        private_key_pem: String,
        private_key_id: Option<String>,
        token_uri: Option<String>,
        /// `universe_domain` when the file names one (absent or empty: `googleapis.com`).
        universe_domain: Option<String>,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
    },
}

impl std::fmt::Debug for AdcFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdcFile::ServiceAccount { client_email, .. } => f
                .debug_struct("ServiceAccount")
                .field("client_email", client_email)
                .finish_non_exhaustive(),
            AdcFile::AuthorizedUser { client_id, .. } => f
                .debug_struct("AuthorizedUser")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
        }
    }
}

/// Parse a credentials file.
pub fn parse_adc(text: &str) -> Result<AdcFile, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("the credentials file is not JSON: {e}"))?;
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let missing = |k: &str| format!("the credentials file has no {k}");
    match v.get("type").and_then(Value::as_str) {
        Some("service_account") => Ok(AdcFile::ServiceAccount {
            client_email: s("client_email").ok_or_else(|| missing("client_email"))?,
            private_key_pem: s("private_key").ok_or_else(|| missing("private_key"))?,
            private_key_id: s("private_key_id"),
            token_uri: s("token_uri"),
            universe_domain: s("universe_domain"),
        }),
        Some("authorized_user") => Ok(AdcFile::AuthorizedUser {
            client_id: s("client_id").ok_or_else(|| missing("client_id"))?,
            client_secret: s("client_secret").ok_or_else(|| missing("client_secret"))?,
            refresh_token: s("refresh_token").ok_or_else(|| missing("refresh_token"))?,
        }),
        Some(other) => Err(format!(
            "credentials of type \"{other}\" are not supported by pith (use a service account key, `gcloud auth application-default login`, or GOOGLE_OAUTH_ACCESS_TOKEN)"
        )),
        None => Err("the credentials file has no type".into()),
    }
}

/// The DER of the first PEM block of `label` (`PRIVATE KEY`).
pub fn pem_der(pem: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem
        .find(&begin)
        .ok_or_else(|| format!("no {label} in the key"))?
        + begin.len();
    let stop = start
        + pem[start..]
            .find(&end)
            .ok_or_else(|| format!("unterminated {label}"))?;
    let b64: String = pem[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("the key is not base64: {e}"))
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The signed assertion a service account exchanges for a token: header `{alg,typ,kid}`,
/// claims `{iss,scope,aud,exp,iat}`, RS256 with the PKCS#8 key.
pub fn service_account_jwt(
    client_email: &str,
    private_key_pem: &str,
    key_id: Option<&str>,
    audience: &str,
    now_secs: u64,
) -> Result<String, String> {
    let claims = json!({"iss": client_email, "scope": SCOPE, "aud": audience,
                        "exp": now_secs + 3600, "iat": now_secs});
    sign_jwt(private_key_pem, key_id, &claims)
}

/// The self-signed JWT a service account of another universe sends as its bearer token
/// (google-auth-library's `JWTAccess.getRequestHeaders` with scopes): header `{alg,typ,kid}`,
/// claims `{iss,sub,scope,exp,iat}` (no audience: the scope takes its place), RS256.
pub fn self_signed_jwt(
    client_email: &str,
    private_key_pem: &str,
    key_id: Option<&str>,
    now_secs: u64,
) -> Result<String, String> {
    let claims = json!({"iss": client_email, "sub": client_email, "scope": SCOPE,
                        "exp": now_secs + 3600, "iat": now_secs});
    sign_jwt(private_key_pem, key_id, &claims)
}

/// `claims` signed RS256 with the PKCS#8 key, header `{alg,typ,kid}` (`kid` when known).
fn sign_jwt(private_key_pem: &str, key_id: Option<&str>, claims: &Value) -> Result<String, String> {
    use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
    let der = pem_der(private_key_pem, "PRIVATE KEY")?;
    let key = RsaKeyPair::from_pkcs8(&der)
        .map_err(|e| format!("the service account key is not a usable RSA key: {e}"))?;
    let mut header = serde_json::Map::new();
    header.insert("alg".into(), json!("RS256"));
    header.insert("typ".into(), json!("JWT"));
    if let Some(k) = key_id {
        header.insert("kid".into(), json!(k));
    }
    let signing_input = format!(
        "{}.{}",
        b64url(Value::Object(header).to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let mut sig = vec![0u8; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut sig,
    )
    .map_err(|_| "signing the service account assertion failed".to_string())?;
    Ok(format!("{signing_input}.{}", b64url(&sig)))
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", crate::llm::aws::sigv4::escape_uri(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// For a service account of a universe other than `googleapis.com`: its self-signed JWT and
/// when it expires (ms), the bearer token to send as is; `None` for every other credential,
/// which is exchanged at a token endpoint ([`token_request`]).
pub fn self_signed_token(adc: &AdcFile, now_secs: u64) -> Option<Result<(String, f64), String>> {
    let AdcFile::ServiceAccount {
        client_email,
        private_key_pem,
        private_key_id,
        universe_domain: Some(universe),
        ..
    } = adc
    else {
        return None;
    };
    if universe == DEFAULT_UNIVERSE {
        return None;
    }
    let expiry_ms = (now_secs + 3600) as f64 * 1000.0;
    Some(
        self_signed_jwt(
            client_email,
            private_key_pem,
            private_key_id.as_deref(),
            now_secs,
        )
        .map(|jwt| (jwt, expiry_ms)),
    )
}

/// The token request for a credentials file: URL and form body.
pub fn token_request(
    adc: &AdcFile,
    token_url_override: Option<&str>,
    now_secs: u64,
) -> Result<(String, String), String> {
    match adc {
        AdcFile::ServiceAccount {
            client_email,
            private_key_pem,
            private_key_id,
            token_uri,
            ..
        } => {
            let url = token_uri
                .as_deref()
                .or(token_url_override)
                .unwrap_or(DEFAULT_TOKEN_URL)
                .to_string();
            let jwt = service_account_jwt(
                client_email,
                private_key_pem,
                private_key_id.as_deref(),
                &url,
                now_secs,
            )?;
            let body = form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                ("assertion", &jwt),
            ]);
            Ok((url, body))
        }
        AdcFile::AuthorizedUser {
            client_id,
            client_secret,
            refresh_token,
        } => {
            let url = token_url_override.unwrap_or(DEFAULT_TOKEN_URL).to_string();
            let body = form(&[
                ("client_id", client_id),
                ("client_secret", client_secret),
                ("refresh_token", refresh_token),
                ("grant_type", "refresh_token"),
            ]);
            Ok((url, body))
        }
    }
}

/// `(access token, expiry in ms)` from a token endpoint's answer.
pub fn parse_token_response(status: u16, body: &str, now_ms: f64) -> Result<(String, f64), String> {
    if !(200..300).contains(&status) {
        let detail: String = body.trim().chars().take(300).collect();
        return Err(format!("token endpoint answered {status}: {detail}"));
    }
    let v: Value = serde_json::from_str(body)
        .map_err(|_| "token endpoint answered with invalid JSON".to_string())?;
    let token = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| "token endpoint answer has no access_token".to_string())?;
    let expires_in = v
        .get("expires_in")
        .and_then(Value::as_f64)
        .unwrap_or(3600.0);
    Ok((token.to_string(), now_ms + expires_in * 1000.0))
}

// ------------------------------------------------------------------------------------------------
// Glue

/// Tokens fetched in this process, by credentials file. A lock, not a channel: any stream
/// thread may need one, and it is consulted once per request.
static CACHE: Mutex<Vec<(PathBuf, String, f64)>> = Mutex::new(Vec::new());

fn now() -> (u64, f64) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.as_millis() as f64)
}

/// The credentials file in use: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's default.
pub fn adc_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env("GOOGLE_APPLICATION_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let home = env("HOME").filter(|h| !h.is_empty())?;
    Some(Path::new(&home).join(".config/gcloud/application_default_credentials.json"))
}

/// An access token for Vertex AI (blocking: may read the credentials file and call the token
/// endpoint).
pub fn access_token(env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    if let Some(t) = env("GOOGLE_OAUTH_ACCESS_TOKEN").filter(|t| !t.trim().is_empty()) {
        return Ok(t.trim().to_string());
    }
    let path =
        adc_path(env).ok_or_else(|| "no Application Default Credentials found".to_string())?;
    let (secs, ms) = now();
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, token, expiry)) = cache.iter().find(|(p, _, _)| *p == path) {
            if ms < expiry - EAGER_REFRESH_MS {
                return Ok(token.clone());
            }
        }
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let adc = parse_adc(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(signed) = self_signed_token(&adc, secs) {
        let (token, expiry) = signed.map_err(|e| format!("{}: {e}", path.display()))?;
        remember(path, &token, expiry);
        return Ok(token);
    }
    let override_url = env("PITH_GOOGLE_TOKEN_URL").filter(|u| !u.is_empty());
    let (url, body) = token_request(&adc, override_url.as_deref(), secs)?;
    let agent = http::agent(&Timeouts {
        connect: Duration::from_secs(10),
        stall: Duration::from_secs(20),
    });
    let headers = vec![(
        "content-type".to_string(),
        "application/x-www-form-urlencoded".to_string(),
    )];
    let (status, answer) = http::send(&agent, "POST", &url, &headers, Some(body.as_bytes()))
        .and_then(|r| http::read_small(r, 256 * 1024))
        .map_err(|e| format!("Google token request to {url} failed: {e}"))?;
    let (token, expiry) = parse_token_response(status, &answer, now().1)
        .map_err(|e| format!("Google token request to {url}: {e}"))?;
    remember(path, &token, expiry);
    Ok(token)
}

/// Keep `token` for the credentials file at `path` until shortly before `expiry` (ms).
fn remember(path: PathBuf, token: &str, expiry: f64) {
    if let Ok(mut cache) = CACHE.lock() {
        cache.retain(|(p, _, _)| *p != path);
        cache.push((path, token.to_string(), expiry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_key() -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/google/test-service-account.pem"),
        )
        .unwrap()
    }

    #[test]
    fn service_account_assertions_verify_with_the_public_key() {
        use ring::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, RsaKeyPair, UnparsedPublicKey};
        let pem = test_key();
        let jwt = service_account_jwt(
            "pith@proj.iam.gserviceaccount.com",
            &pem,
            Some("kid-1"),
            "http://127.0.0.1:9/token",
            1_700_000_000,
        )
        .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let dec = |s: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(s)
                .unwrap()
        };
        assert_eq!(
            String::from_utf8(dec(parts[0])).unwrap(),
            r#"{"alg":"RS256","typ":"JWT","kid":"kid-1"}"#
        );
        assert_eq!(
            String::from_utf8(dec(parts[1])).unwrap(),
            r#"{"iss":"pith@proj.iam.gserviceaccount.com","scope":"https://www.googleapis.com/auth/cloud-platform","aud":"http://127.0.0.1:9/token","exp":1700003600,"iat":1700000000}"#
        );
        let key = RsaKeyPair::from_pkcs8(&pem_der(&pem, "PRIVATE KEY").unwrap()).unwrap();
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key().as_ref());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &dec(parts[2])).unwrap();
        // Tampered claims do not verify.
        assert!(public.verify(b"x.y", &dec(parts[2])).is_err());
    }

    #[test]
    fn another_universe_signs_its_own_bearer_token() {
        use ring::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, RsaKeyPair, UnparsedPublicKey};
        let pem = test_key();
        let dec = |s: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(s)
                .unwrap()
        };
        let file = |universe: Option<&str>| {
            let mut v = json!({"type":"service_account","client_email":"sa@p.iam.example",
                "private_key":pem,"private_key_id":"kid-9","token_uri":"http://127.0.0.1:1/token"});
            if let Some(u) = universe {
                v["universe_domain"] = json!(u);
            }
            parse_adc(&v.to_string()).unwrap()
        };
        // The default universe (named, empty or absent) exchanges its assertion for a token.
        for u in [None, Some(""), Some("googleapis.com")] {
            assert!(self_signed_token(&file(u), 1).is_none(), "{u:?}");
        }
        let (jwt, expiry) = self_signed_token(&file(Some("s3nsapis.fr")), 1_700_000_000)
            .unwrap()
            .unwrap();
        assert_eq!(expiry, 1_700_003_600_000.0);
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(
            String::from_utf8(dec(parts[0])).unwrap(),
            r#"{"alg":"RS256","typ":"JWT","kid":"kid-9"}"#
        );
        assert_eq!(
            String::from_utf8(dec(parts[1])).unwrap(),
            r#"{"iss":"sa@p.iam.example","sub":"sa@p.iam.example","scope":"https://www.googleapis.com/auth/cloud-platform","exp":1700003600,"iat":1700000000}"#
        );
        let key = RsaKeyPair::from_pkcs8(&pem_der(&pem, "PRIVATE KEY").unwrap()).unwrap();
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key().as_ref());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &dec(parts[2])).unwrap();
        // A key that is not RSA fails with the reason, not a token.
        let bad = AdcFile::ServiceAccount {
            client_email: "a@b".into(),
            private_key_pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----".into(),
            private_key_id: None,
            token_uri: None,
            universe_domain: Some("example.com".into()),
        };
        let err = self_signed_token(&bad, 1).unwrap().unwrap_err();
        assert!(err.contains("not a usable RSA key"), "{err}");
    }

    #[test]
    fn credential_files_and_token_requests() {
        let sa = json!({"type":"service_account","client_email":"a@b","private_key":test_key(),
                        "private_key_id":"k","token_uri":"http://127.0.0.1:1/token"})
        .to_string();
        let adc = parse_adc(&sa).unwrap();
        let (url, body) = token_request(&adc, None, 1).unwrap();
        assert_eq!(url, "http://127.0.0.1:1/token");
        assert!(body.starts_with(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=ey"
        ));
        let user = r#"{"type":"authorized_user","client_id":"cid","client_secret":"cs","refresh_token":"1//rt"}"#;
        let adc = parse_adc(user).unwrap();
        assert_eq!(
            token_request(&adc, None, 1).unwrap(),
            (
                "https://oauth2.googleapis.com/token".to_string(),
                "client_id=cid&client_secret=cs&refresh_token=1%2F%2Frt&grant_type=refresh_token"
                    .to_string()
            )
        );
        assert!(format!("{adc:?}").find("1//rt").is_none());
        let err = parse_adc(r#"{"type":"external_account"}"#).unwrap_err();
        assert!(
            err.contains("\"external_account\" are not supported"),
            "{err}"
        );
        assert!(parse_adc("nope").is_err());
    }

    #[test]
    fn token_answers() {
        assert_eq!(
            parse_token_response(
                200,
                r#"{"access_token":"ya29.x","expires_in":3599}"#,
                1000.0
            )
            .unwrap(),
            ("ya29.x".to_string(), 3_600_000.0)
        );
        assert_eq!(
            parse_token_response(400, r#"{"error":"invalid_grant"}"#, 0.0).unwrap_err(),
            r#"token endpoint answered 400: {"error":"invalid_grant"}"#
        );
        assert!(parse_token_response(200, "{}", 0.0).is_err());
    }
}
