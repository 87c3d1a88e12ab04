//! Google Vertex AI (`google-vertex`): the Gemini body (Vertex key order) sent to
//! `streamGenerateContent?alt=sse`, as pi 0.73.1 does through `@google/genai` in Vertex mode.
//!
//! With an API key (`GOOGLE_CLOUD_API_KEY`, or the provider's key) the request goes to the
//! global `publishers/google/models/<id>` path with `x-goog-api-key`. Otherwise the project
//! (`GOOGLE_CLOUD_PROJECT` / `GCLOUD_PROJECT`) and location (`GOOGLE_CLOUD_LOCATION`) name the
//! regional endpoint, and an access token ([`google_auth`]) is sent as a bearer token. A
//! `baseUrl` override (models.json) replaces the endpoint and, as in the SDK, the
//! `projects/…/locations/…` prefix.
//!
//! Preparing may read the credentials file and call the token endpoint: it runs on the stream's
//! worker thread ([`WireApi::prepare_blocks`]).

use crate::llm::api::{self, Prepared, WireApi};
use crate::llm::google::{Decoder, Flavor, body_for};
use crate::llm::{LlmRequest, google_auth, http};

/// The `google-vertex` wire API.
pub struct GoogleVertex;

pub const API: GoogleVertex = GoogleVertex;

/// pi's marker for "use ambient credentials" instead of a key.
const CREDENTIALS_MARKER: &str = "gcp-vertex-credentials";

impl WireApi for GoogleVertex {
    fn name(&self) -> &'static str {
        "google-vertex"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let env = |k: &str| req.extra.var(k);
        let (url, auth) = endpoint(req, &env)?;
        let mut headers = crate::llm::google::sdk_headers(req);
        match auth {
            Auth::Key(k) => headers.push(("x-goog-api-key".into(), k)),
            Auth::Token(t) => headers.push(("authorization".into(), format!("Bearer {t}"))),
        }
        http::merge_model_headers(&mut headers, &req.model);
        Ok(Prepared {
            url,
            headers,
            body: api::json_body(&body_for(req, Flavor::Vertex)),
        })
    }

    fn prepare_blocks(&self) -> bool {
        true
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::new(req))
    }

    fn http_error_message(
        &self,
        _req: &LlmRequest,
        status: u16,
        _headers: &[(String, String)],
        body: &str,
    ) -> String {
        api::google_error_message(status, body)
    }

    fn connection_error(&self, _req: &LlmRequest) -> &'static str {
        api::FETCH_FAILED
    }
}

enum Auth {
    Key(String),
    Token(String),
}

/// The key to send, if any (pi's `resolveApiKey`: placeholders like `<authenticated>` and the
/// credentials marker mean "no key").
fn api_key(req: &LlmRequest, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let key = req
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .or_else(|| env("GOOGLE_CLOUD_API_KEY").map(|k| k.trim().to_string()))
        .filter(|k| !k.is_empty())?;
    let placeholder =
        key.starts_with('<') && key.ends_with('>') && !key[1..key.len() - 1].contains('>');
    (key != CREDENTIALS_MARKER && !placeholder).then_some(key)
}

/// A base URL naming its API version (`…/v1/…`, `…/v1beta1`).
fn has_version(base: &str) -> bool {
    base.split('/').any(|part| {
        part.strip_prefix('v').is_some_and(|rest| {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0 && {
                let tail = &rest[digits..];
                tail.is_empty()
                    || tail
                        .strip_prefix("beta")
                        .is_some_and(|b| b.bytes().all(|c| c.is_ascii_digit()))
            }
        })
    })
}

/// The host the SDK (@google/genai, in pi 0.73.1 and 0.87.1) calls for a project's location:
/// `global` has no regional host, the multi-regions `us` and `eu` have their own regional
/// endpoint (`aiplatform.us.rep.googleapis.com`), any other location `<location>-aiplatform…`.
fn regional_host(location: &str) -> String {
    match location {
        "global" => "aiplatform.googleapis.com".to_string(),
        "us" | "eu" => format!("aiplatform.{location}.rep.googleapis.com"),
        _ => format!("{location}-aiplatform.googleapis.com"),
    }
}

/// The SDK's resource name of a model.
fn model_path(id: &str) -> String {
    if id.starts_with("projects/") || id.starts_with("publishers/") {
        id.to_string()
    } else if let Some(rest) = id.strip_prefix("models/") {
        format!("publishers/google/models/{rest}")
    } else {
        format!("publishers/google/models/{id}")
    }
}

fn endpoint(
    req: &LlmRequest,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Auth), String> {
    let custom = Some(req.model.base_url.trim())
        .filter(|b| !b.is_empty() && !b.contains("{location}"))
        .map(|b| b.trim_end_matches('/').to_string());
    let method = format!(
        "{}:streamGenerateContent?alt=sse",
        model_path(&req.model.id)
    );
    let versioned = |base: &str| {
        if has_version(base) {
            base.to_string()
        } else {
            format!("{base}/v1")
        }
    };
    if let Some(key) = api_key(req, env) {
        let base = match &custom {
            Some(c) => versioned(c),
            None => "https://aiplatform.googleapis.com/v1".to_string(),
        };
        return Ok((format!("{base}/{method}"), Auth::Key(key)));
    }
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    let project = get("GOOGLE_CLOUD_PROJECT").or_else(|| get("GCLOUD_PROJECT")).ok_or_else(|| {
        "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options.".to_string()
    })?;
    let location = get("GOOGLE_CLOUD_LOCATION").ok_or_else(|| {
        "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."
            .to_string()
    })?;
    let token = google_auth::access_token(env)?;
    let url = match &custom {
        Some(c) => format!("{}/{method}", versioned(c)),
        None => {
            let host = regional_host(&location);
            format!("https://{host}/v1/projects/{project}/locations/{location}/{method}")
        }
    };
    Ok((url, Auth::Token(token)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regional_hosts_as_the_sdk() {
        assert_eq!(regional_host("global"), "aiplatform.googleapis.com");
        assert_eq!(regional_host("us"), "aiplatform.us.rep.googleapis.com");
        assert_eq!(regional_host("eu"), "aiplatform.eu.rep.googleapis.com");
        assert_eq!(
            regional_host("us-central1"),
            "us-central1-aiplatform.googleapis.com"
        );
        assert_eq!(
            regional_host("europe-west4"),
            "europe-west4-aiplatform.googleapis.com"
        );
    }

    #[test]
    fn versions_and_model_paths() {
        assert!(has_version("https://x/v1"));
        assert!(has_version("https://x/v1beta1/projects"));
        assert!(!has_version("https://x/api"));
        assert!(!has_version("https://x/version"));
        assert_eq!(
            model_path("gemini-2.5-pro"),
            "publishers/google/models/gemini-2.5-pro"
        );
        assert_eq!(model_path("models/x"), "publishers/google/models/x");
        assert_eq!(
            model_path("projects/p/locations/l/endpoints/e"),
            "projects/p/locations/l/endpoints/e"
        );
    }
}
