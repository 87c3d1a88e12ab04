//! The blocking HTTP client used by the streaming threads: one ureq 3 agent over rustls.
//!
//! Non-2xx responses are returned like any other (their bodies carry the provider's error text,
//! which ends up verbatim in `errorMessage`). Proxies come from `HTTPS_PROXY`/`HTTP_PROXY`/
//! `ALL_PROXY` with `NO_PROXY` (ureq reads them). `SSL_CERT_FILE` / `SSL_CERT_DIR` replace the
//! bundled Mozilla roots with the PEM certificates found there (corporate MITM proxies).
//! Every transport read is bounded (`timeout_per_read`), so a thread blocked on a dead
//! connection always wakes up eventually; the streaming layer applies the exact stall timeout.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use crate::llm::Timeouts;

/// Stack of the thread that runs the HTTP exchange: more than pith's other threads
/// ([`crate::THREAD_STACK`]) for the TLS handshake and certificate checks.
pub const IO_THREAD_STACK: usize = 512 * 1024;

/// A response whose body has not been read yet.
pub struct HttpResponse {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Box<dyn Read + Send>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why no response was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// DNS, TCP connect, TLS or proxy failure: the reference reports `Connection error.`. The
    /// second field is Node's words for the cause when pith knows them (`connect ECONNREFUSED
    /// 127.0.0.1:8080`, `getaddrinfo ENOTFOUND host`), which pi 1.6.0 appends.
    Connect(String, Option<String>),
    /// No response within the allowed time.
    Timeout(String),
    /// Anything else (bad URL, invalid header, protocol error).
    Other(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Connect(m, _) | HttpError::Timeout(m) | HttpError::Other(m) => {
                f.write_str(m)
            }
        }
    }
}

/// Build an agent for one request's timeouts. Building is cheap next to a TLS handshake, and a
/// fresh agent per request keeps streams independent (no shared pool to poison).
pub fn agent(timeouts: &Timeouts) -> ureq::Agent {
    agent_sized(timeouts, 32 * 1024)
}

/// How much of a streamed request body (`llm/body.rs`, over 4 MiB) is handed to the socket at
/// a time: a 12 MB body in 32 KiB writes was 560 `sendto` calls, each waking the reader.
pub const UPLOAD_BUFFER: usize = 256 * 1024;

/// [`agent`] with an output buffer of `output` bytes ([`UPLOAD_BUFFER`] for a streamed body).
pub fn agent_sized(timeouts: &Timeouts, output: usize) -> ureq::Agent {
    let mut builder = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(timeouts.connect))
        // Bounds each socket read of headers and body. The stream layer enforces the stall
        // timeout itself; this only guarantees the reading thread cannot block forever.
        .timeout_per_read(Some(timeouts.stall + Duration::from_secs(1)))
        .max_redirects(0)
        // 128 KiB each by default; half is plenty for SSE and headers (which are capped at 64 KiB),
        // and it is resident memory for every streaming agent on a host running hundreds.
        .input_buffer_size(64 * 1024)
        .output_buffer_size(output)
        .user_agent(ureq::config::AutoHeaderValue::None);
    if let Some(roots) = custom_roots() {
        builder = builder.tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(roots.clone())
                .build(),
        );
    }
    ureq::Agent::new_with_config(builder.build())
}

/// POST `body` (already serialised JSON) with `headers`.
pub fn post_json(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<HttpResponse, HttpError> {
    send(agent, "POST", url, headers, Some(body))
}

/// One request: `GET` (no body) or `POST`.
pub fn send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Result<HttpResponse, HttpError> {
    let resp = match (method, body) {
        ("GET", _) => {
            let mut req = agent.get(url);
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.call()
        }
        (_, body) => {
            let mut req = agent.post(url);
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.send(body.unwrap_or_default())
        }
    };
    response(resp, url)
}

fn response(
    sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    url: &str,
) -> Result<HttpResponse, HttpError> {
    let resp = sent.map_err(|e| classify(e, url))?;
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = resp.into_body().into_reader();
    Ok(HttpResponse {
        status,
        headers,
        body: Box::new(body),
    })
}

/// POST a body of `len` bytes read from `body` while it is sent (a long session's history,
/// written by its own thread: `body.rs`), with `headers` after `Content-Length`.
pub fn post_streamed(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    len: u64,
    body: impl Read + Send + 'static,
) -> Result<HttpResponse, HttpError> {
    let mut req = agent.post(url).header("content-length", len.to_string());
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    response(req.send(ureq::SendBody::from_owned_reader(body)), url)
}

/// The whole body of a small response (token endpoints), at most `limit` bytes.
pub fn read_small(resp: HttpResponse, limit: u64) -> Result<(u16, String), HttpError> {
    let mut buf = Vec::new();
    resp.body
        .take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| HttpError::Other(e.to_string()))?;
    Ok((resp.status, String::from_utf8_lossy(&buf).into_owned()))
}

fn classify(e: ureq::Error, url: &str) -> HttpError {
    match &e {
        ureq::Error::Timeout(_) => HttpError::Timeout(e.to_string()),
        ureq::Error::HostNotFound
        | ureq::Error::ConnectionFailed
        | ureq::Error::Io(_)
        | ureq::Error::Tls(_) => HttpError::Connect(e.to_string(), node_connect_cause(&e, url)),
        _ => HttpError::Other(e.to_string()),
    }
}

/// Node's message for a connection that could not be made, where pith can tell it: a refused
/// connection names the address tried (the host's first address, as getaddrinfo orders them),
/// an unknown host the lookup.
fn node_connect_cause(e: &ureq::Error, url: &str) -> Option<String> {
    let parsed: ureq::http::Uri = url.parse().ok()?;
    let host = parsed.host()?.trim_start_matches('[').trim_end_matches(']');
    match e {
        ureq::Error::HostNotFound => Some(format!("getaddrinfo ENOTFOUND {host}")),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            let port = parsed.port_u16().unwrap_or(match parsed.scheme_str() {
                Some("https") => 443,
                _ => 80,
            });
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
                .ok()?
                .next()?;
            Some(format!(
                "connect ECONNREFUSED {}:{}",
                addr.ip(),
                addr.port()
            ))
        }
        _ => None,
    }
}

/// `model.headers` override defaults with the same name.
pub fn merge_model_headers(h: &mut Vec<(String, String)>, model: &crate::llm::Model) {
    if let Some(extra) = &model.headers {
        for (k, v) in extra {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            h.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            h.push((k.to_ascii_lowercase(), v));
        }
    }
}

/// Root certificates from `SSL_CERT_FILE` / `SSL_CERT_DIR`, read once per process (the files do
/// not change under a running agent; a `OnceLock` holds the immutable result, nothing mutates it).
fn custom_roots() -> Option<&'static ureq::tls::RootCerts> {
    static ROOTS: std::sync::OnceLock<Option<ureq::tls::RootCerts>> = std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let file = std::env::var_os("SSL_CERT_FILE");
            let dir = std::env::var_os("SSL_CERT_DIR");
            roots_from(file.as_deref().map(Path::new), dir.as_deref())
        })
        .as_ref()
}

/// The certificates of a PEM bundle file and of every file in the directories of `dir` (a
/// `PATH`-style list); `None` when there are none.
fn roots_from(file: Option<&Path>, dir: Option<&std::ffi::OsStr>) -> Option<ureq::tls::RootCerts> {
    let mut certs = Vec::new();
    if let Some(file) = file {
        load_pem_file(file, &mut certs);
    }
    if let Some(dir) = dir {
        for d in std::env::split_paths(&dir) {
            if let Ok(entries) = std::fs::read_dir(&d) {
                for entry in entries.flatten() {
                    load_pem_file(&entry.path(), &mut certs);
                }
            }
        }
    }
    if certs.is_empty() {
        None
    } else {
        Some(ureq::tls::RootCerts::new_with_certs(&certs))
    }
}

fn load_pem_file(path: &Path, out: &mut Vec<ureq::tls::Certificate<'static>>) {
    // Certificate bundles are small; refuse anything absurd.
    const MAX: u64 = 16 * 1024 * 1024;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if !meta.is_file() || meta.len() > MAX {
        return;
    }
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    for item in ureq::tls::parse_pem(&bytes).flatten() {
        if let ureq::tls::PemItem::Certificate(c) = item {
            out.push(c);
        }
    }
}

/// The Node.js version of pi 0.87.1's reference install (`x-stainless-runtime-version`).
const REFERENCE_NODE: &str = "v22.23.3";

/// The platform headers the Stainless SDKs inside pi 0.87.1 send with every request: package
/// version, operating system and architecture in the SDKs' words, and the runtime (pi runs on
/// Node.js; pith sends the Node.js version of the reference install).
pub fn stainless_platform(package_version: &str) -> Vec<(String, String)> {
    let os = match std::env::consts::OS {
        "linux" => "Linux".to_string(),
        "macos" => "MacOS".to_string(),
        "windows" => "Windows".to_string(),
        "freebsd" => "FreeBSD".to_string(),
        "openbsd" => "OpenBSD".to_string(),
        "android" => "Android".to_string(),
        "ios" => "iOS".to_string(),
        other => format!("Other:{other}"),
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64".to_string(),
        "x86" => "x32".to_string(),
        "aarch64" => "arm64".to_string(),
        "arm" => "arm".to_string(),
        other => format!("other:{other}"),
    };
    vec![
        (
            "x-stainless-package-version".into(),
            package_version.to_string(),
        ),
        ("x-stainless-os".into(), os),
        ("x-stainless-arch".into(), arch),
        ("x-stainless-runtime".into(), "node".into()),
        ("x-stainless-runtime-version".into(), REFERENCE_NODE.into()),
    ]
}

/// pi's own `User-Agent` in Node's words (`linux`, `darwin`; `x64`, `arm64`): pi 0.87.1's
/// `pi (<platform> <kernel release>; <arch>)`; pi 1.6.0's identity
/// `pi/1.6.0 (<platform>; node/<version>; <arch>)` (pi-ai's `formatUserAgent`).
pub fn pi_user_agent(sdk: crate::protocol::SdkGeneration) -> String {
    let (platform, arch) = (node_platform(), node_arch());
    if sdk.versioned_user_agent() {
        return format!("pi/{PI_16_VERSION} ({platform}; node/{REFERENCE_NODE}; {arch})");
    }
    format!("pi ({platform} {}; {arch})", kernel_release())
}

/// Node's `process.platform` (`os.platform()`) on this system.
fn node_platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// Node's `process.arch` on this system.
fn node_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "x86" => "ia32",
        other => other,
    }
}

/// Node's `os.release()`: the kernel release, read once per process, not once per request.
fn kernel_release() -> &'static str {
    static RELEASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RELEASE.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}

/// `@google/genai`'s own label in pi 1.6.0 (2.32.0), sent as `x-goog-api-client` with the
/// Node.js version (the SDK's `User-Agent` gives way to pi's identity one).
pub fn google_api_client() -> String {
    format!("google-genai-sdk/2.32.0 gl-node/{REFERENCE_NODE}")
}

/// The AWS SDK's user agent headers in pi 1.6.0 (`@aws-sdk/client-bedrock-runtime` 3.1126.0,
/// with pi-ai's `customUserAgent` `pi/1.6.0` appended to both): `x-amz-user-agent` (signed) and
/// `user-agent`, whose `m/` lists the SDK's feature ids (`features`, comma-separated).
pub fn aws_user_agents(features: &str) -> [(String, String); 2] {
    const SDK: &str = "3.1126.0";
    let app = format!("pi/{PI_16_VERSION}");
    let node = REFERENCE_NODE.trim_start_matches('v');
    [
        ("x-amz-user-agent".into(), format!("aws-sdk-js/{SDK} {app}")),
        (
            "user-agent".into(),
            format!(
                "aws-sdk-js/{SDK} ua/2.1 os/{}#{} lang/js md/nodejs#{node} api/bedrock-runtime#{SDK} m/{features} {app}",
                node_platform(),
                // The SDK's escape of a user agent value.
                kernel_release().replace(
                    |c: char| !(c.is_ascii_alphanumeric() || "!$%&'*+-.^_`|~#".contains(c)),
                    "-"
                )
            ),
        ),
    ]
}

/// pi-ai's version in pi 1.6.0's identity `User-Agent` (`PI_AI_VERSION`).
const PI_16_VERSION: &str = "1.6.0";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_roots_from_a_file_and_a_directory() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls/test-ca.pem");
        assert!(roots_from(Some(&fixture), None).is_some());
        let dir = fixture.parent().unwrap().as_os_str().to_owned();
        assert!(roots_from(None, Some(&dir)).is_some());
        assert!(roots_from(Some(Path::new("/nonexistent/ca.pem")), None).is_none());
        let not_pem = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        assert!(roots_from(Some(&not_pem), None).is_none());
        let _ = agent(&Timeouts::default()); // builds with or without custom roots
    }
}
