//! Cloudflare's two providers (pi's `cloudflare.ts`): their built-in base URLs carry `{VAR}`
//! placeholders (account and gateway ids) filled from the environment per request, and the AI
//! Gateway authenticates with `cf-aig-authorization` instead of the upstream API's own header.

use crate::llm::LlmRequest;

/// `cloudflare-workers-ai` or `cloudflare-ai-gateway` (pi's `isCloudflareProvider`).
pub fn is_cloudflare(provider: &str) -> bool {
    provider == "cloudflare-workers-ai" || provider == "cloudflare-ai-gateway"
}

/// The AI Gateway, whose key goes in `cf-aig-authorization`.
pub fn is_gateway(provider: &str) -> bool {
    provider == "cloudflare-ai-gateway"
}

/// The model's base URL with every `{NAME}` (`[A-Z_][A-Z0-9_]*`) replaced by that environment
/// variable; a variable unset or empty is the reference's error.
pub fn resolve_base_url(req: &LlmRequest) -> Result<String, String> {
    let url = req.model.base_url.as_str();
    if !url.contains('{') {
        return Ok(url.to_string());
    }
    let mut out = String::with_capacity(url.len() + 32);
    let mut rest = url;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name_len = after
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
            .count();
        let name = &after[..name_len];
        let placeholder = !name.is_empty()
            && !name.as_bytes()[0].is_ascii_digit()
            && after[name_len..].starts_with('}');
        if !placeholder {
            out.push('{');
            rest = after;
            continue;
        }
        match req.extra.var(name).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => {
                return Err(format!(
                    "{name} is required for provider {} but is not set.",
                    req.model.provider
                ));
            }
        }
        rest = &after[name_len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The base URL a request goes to: placeholders resolved for Cloudflare's providers, the
/// model's URL as it is for every other.
pub fn base_url(req: &LlmRequest) -> Result<String, String> {
    if is_cloudflare(&req.model.provider) {
        resolve_base_url(req)
    } else {
        Ok(req.model.base_url.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn req(provider: &str, url: &str, env: &'static [(&'static str, &'static str)]) -> LlmRequest {
        let mut m = crate::llm::faux::model();
        m.provider = provider.into();
        m.base_url = url.into();
        let mut r = LlmRequest {
            model: m,
            api_key: None,
            system_prompt: String::new(),
            messages: Default::default(),
            tools: Vec::new(),
            thinking: crate::message::ThinkingLevel::Off,
            session_id: None,
            max_tokens: None,
            timeouts: Default::default(),
            faux_script: None,
            sdk: Default::default(),
            no_cache: false,
            tool_arguments_error: false,
            extra: Default::default(),
        };
        r.extra.env = Some(Arc::new(move |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }));
        r
    }

    #[test]
    fn placeholders_come_from_the_environment() {
        let url = "https://gateway.ai.cloudflare.com/v1/{CLOUDFLARE_ACCOUNT_ID}/{CLOUDFLARE_GATEWAY_ID}/compat";
        let r = req(
            "cloudflare-ai-gateway",
            url,
            &[
                ("CLOUDFLARE_ACCOUNT_ID", "acc"),
                ("CLOUDFLARE_GATEWAY_ID", "gw"),
            ],
        );
        assert_eq!(
            base_url(&r).unwrap(),
            "https://gateway.ai.cloudflare.com/v1/acc/gw/compat"
        );
        let r = req(
            "cloudflare-workers-ai",
            url,
            &[
                ("CLOUDFLARE_ACCOUNT_ID", "acc"),
                ("CLOUDFLARE_GATEWAY_ID", ""),
            ],
        );
        assert_eq!(
            base_url(&r).unwrap_err(),
            "CLOUDFLARE_GATEWAY_ID is required for provider cloudflare-workers-ai but is not set."
        );
        // Not a placeholder (lower case, digit first, unclosed), and other providers untouched.
        let r = req("cloudflare-workers-ai", "http://h/{a}/{1X}/{X", &[]);
        assert_eq!(base_url(&r).unwrap(), "http://h/{a}/{1X}/{X");
        let r = req("other", "http://h/{CLOUDFLARE_ACCOUNT_ID}", &[]);
        assert_eq!(base_url(&r).unwrap(), "http://h/{CLOUDFLARE_ACCOUNT_ID}");
    }
}
