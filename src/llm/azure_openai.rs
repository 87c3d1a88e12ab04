//! Azure OpenAI Responses (`azure-openai-responses`): the OpenAI Responses body with the model
//! replaced by its deployment, sent to `<base>/responses?api-version=<v>` with an `api-key`
//! header, as pi 0.73.1 does through the SDK's `AzureOpenAI` client.
//!
//! Settings, as pi reads them: `AZURE_OPENAI_BASE_URL`, else `AZURE_OPENAI_RESOURCE_NAME`
//! (`https://<name>.openai.azure.com/openai/v1`), else the model's `baseUrl` (models.json);
//! `AZURE_OPENAI_API_VERSION` (default `v1`); `AZURE_OPENAI_DEPLOYMENT_NAME_MAP`
//! (`model=deployment,…`); the key from `AZURE_OPENAI_API_KEY` (or auth.json / models.json).
//! A bearer token (Microsoft Entra ID) is used instead of the key when the request carries an
//! `Authorization` header, e.g. from models.json `"authHeader": true` with an `apiKey` command
//! printing the token.

use serde_json::{Map, Value, json};

use crate::llm::api::{self, ErrorWording, Prepared, WireApi};
use crate::llm::openai_responses::{
    self, Decoder, Dialect, Flavor, convert_messages, convert_tools,
};
use crate::llm::{LlmRequest, http};

const DEFAULT_API_VERSION: &str = "v1";

/// The `azure-openai-responses` wire API.
pub struct AzureOpenAi;

pub const API: AzureOpenAi = AzureOpenAi;

impl WireApi for AzureOpenAi {
    fn name(&self) -> &'static str {
        "azure-openai-responses"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let var = |k: &str| req.extra.var(k).filter(|v| !v.trim().is_empty());
        let api_version =
            var("AZURE_OPENAI_API_VERSION").unwrap_or_else(|| DEFAULT_API_VERSION.to_string());
        let base = var("AZURE_OPENAI_BASE_URL")
            .map(|b| b.trim().to_string())
            .or_else(|| {
                var("AZURE_OPENAI_RESOURCE_NAME")
                    .map(|n| format!("https://{n}.openai.azure.com/openai/v1"))
            })
            .or_else(|| Some(req.model.base_url.clone()).filter(|b| !b.is_empty()))
            .ok_or_else(|| {
                "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, or pass azureBaseUrl, azureResourceName, or model.baseUrl.".to_string()
            })?;
        let base = normalize_base_url(&base)?;
        let mut headers: Vec<(String, String)> = vec![
            ("accept".into(), "application/json".into()),
            ("content-type".into(), "application/json".into()),
        ];
        if let Some(package) = Dialect::of(req.sdk).stainless_package {
            // pi 0.87.1: its own User-Agent, the SDK's 300 s timeout and platform headers.
            headers.push(("user-agent".into(), http::pi_user_agent(req.sdk)));
            headers.push(("x-stainless-timeout".into(), "300".into()));
            headers.extend(http::stainless_platform(package));
        } else {
            headers.push(("user-agent".into(), "AzureOpenAI/JS 6.26.0".into()));
        }
        headers.push(("x-stainless-lang".into(), "js".into()));
        http::merge_model_headers(&mut headers, &req.model);
        if api::header_of(&headers, "authorization").is_none() {
            let key = req
                .api_key
                .clone()
                .filter(|k| !k.is_empty())
                .or_else(|| var("AZURE_OPENAI_API_KEY"))
                .ok_or_else(|| "Azure OpenAI API key is required. Set AZURE_OPENAI_API_KEY environment variable or pass it as an argument.".to_string())?;
            headers.push(("api-key".into(), key));
        }
        let deployment = deployment_name(&req.model.id, var("AZURE_OPENAI_DEPLOYMENT_NAME_MAP"));
        Ok(Prepared {
            url: format!(
                "{base}/responses?api-version={}",
                crate::llm::aws::sigv4::escape_uri(&api_version)
            ),
            headers,
            body: api::json_body(&build_body(req, &deployment)),
        })
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::with_flavor(req, Flavor::Azure))
    }

    fn http_error_message(
        &self,
        req: &LlmRequest,
        status: u16,
        _headers: &[(String, String)],
        body: &str,
    ) -> String {
        match Dialect::of(req.sdk).errors {
            ErrorWording::Sdk => api::stainless_message(status, body, true),
            ErrorWording::ErrorObject => {
                api::openai_error_object_message(status, body, Some("Azure OpenAI API error"))
            }
        }
    }

    fn stainless(&self) -> bool {
        true
    }
}

/// The deployment for `model_id` from `AZURE_OPENAI_DEPLOYMENT_NAME_MAP`
/// (`id=deployment,id2=deployment2`), else the id itself.
pub fn deployment_name(model_id: &str, map: Option<String>) -> String {
    map.as_deref()
        .unwrap_or("")
        .split(',')
        .filter_map(|entry| {
            let (id, dep) = entry.trim().split_once('=')?;
            let (id, dep) = (id.trim(), dep.split('=').next().unwrap_or("").trim());
            (!id.is_empty() && !dep.is_empty()).then_some((id, dep))
        })
        .rfind(|(id, _)| *id == model_id)
        .map_or_else(|| model_id.to_string(), |(_, d)| d.to_string())
}

/// pi's `normalizeAzureBaseUrl`: trailing slashes removed; an Azure host with no path (or
/// `/openai`) gets `/openai/v1`.
pub fn normalize_base_url(base: &str) -> Result<String, String> {
    let trimmed = base.trim().trim_end_matches('/');
    let invalid = || format!("Invalid Azure OpenAI base URL: {base}");
    let (scheme, rest) = trimmed.split_once("://").ok_or_else(invalid)?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+')
    {
        return Err(invalid());
    }
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(split);
    if authority.is_empty() {
        return Err(invalid());
    }
    let host = authority
        .rsplit('@')
        .next()
        .unwrap_or(authority)
        .split(':')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    let path = tail[..path_end].trim_end_matches('/');
    let azure =
        host.ends_with(".openai.azure.com") || host.ends_with(".cognitiveservices.azure.com");
    let scheme = scheme.to_ascii_lowercase();
    let authority = authority.to_ascii_lowercase();
    if azure && (path.is_empty() || path == "/openai") {
        return Ok(format!("{scheme}://{authority}/openai/v1"));
    }
    Ok(format!("{scheme}://{authority}{tail}")
        .trim_end_matches('/')
        .to_string())
}

/// The body: the Responses input, `model` = the deployment, no `store`.
pub fn build_body(req: &LlmRequest, deployment: &str) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(deployment));
    body.insert(
        "input".into(),
        Value::Array(convert_messages(
            req,
            Dialect::of(req.sdk).azure_tool_call_providers,
            true,
        )),
    );
    body.insert("stream".into(), json!(true));
    if let Some(s) = &req.session_id {
        body.insert(
            "prompt_cache_key".into(),
            json!(openai_responses::cache_key(req, s)),
        );
    }
    let d = Dialect::of(req.sdk);
    if d.azure_store {
        // pi 0.87.1 asks for no storage on Azure too, and at least 16 output tokens.
        body.insert("store".into(), json!(false));
    }
    let max = api::default_max_tokens(req);
    if max > 0 {
        let max = max.max(d.min_output_tokens);
        body.insert("max_output_tokens".into(), json!(max));
    }
    if !openai_responses::request_tools(req).0.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(
                req,
                json!(false),
                crate::llm::strict::compat_flag(&req.model, "supportsStrictMode", true),
            )),
        );
    }
    openai_responses::reasoning_fields(req, &mut body, false);
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployments_and_base_urls() {
        let map = Some("gpt-4.1=my-gpt41, gpt-5 = prod-5 ,bad,=x,y=".to_string());
        assert_eq!(deployment_name("gpt-4.1", map.clone()), "my-gpt41");
        assert_eq!(deployment_name("gpt-5", map.clone()), "prod-5");
        assert_eq!(deployment_name("o3", map), "o3");
        assert_eq!(deployment_name("o3", None), "o3");
        assert_eq!(
            normalize_base_url("https://res.openai.azure.com").unwrap(),
            "https://res.openai.azure.com/openai/v1"
        );
        assert_eq!(
            normalize_base_url("https://res.cognitiveservices.azure.com/openai/").unwrap(),
            "https://res.cognitiveservices.azure.com/openai/v1"
        );
        assert_eq!(
            normalize_base_url(" https://res.openai.azure.com/openai/v1/ ").unwrap(),
            "https://res.openai.azure.com/openai/v1"
        );
        assert_eq!(
            normalize_base_url("http://127.0.0.1:8080/proxy/").unwrap(),
            "http://127.0.0.1:8080/proxy"
        );
        assert!(normalize_base_url("not a url").is_err());
    }
}
