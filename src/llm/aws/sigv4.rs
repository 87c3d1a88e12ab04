//! AWS Signature Version 4 (HMAC-SHA256 from `ring`), as the AWS SDK for JavaScript signs
//! requests for services other than S3: the canonical path is URI-encoded once more on top of the
//! (already encoded) request path, query parameters are sorted, and the signed headers are every
//! header except the ones AWS never signs (`authorization`, `user-agent`, ...). Pure: the time is
//! an argument, nothing is read from the environment.

use ring::{digest, hmac};

use super::credentials::Credentials;

/// Headers the SDK never signs.
const UNSIGNABLE: &[&str] = &[
    "authorization",
    "cache-control",
    "connection",
    "expect",
    "from",
    "keep-alive",
    "max-forwards",
    "pragma",
    "referer",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "x-amzn-trace-id",
];

/// What is signed besides the request itself.
#[derive(Clone, Debug)]
pub struct Scope<'a> {
    pub region: &'a str,
    pub service: &'a str,
    /// `YYYYMMDDTHHMMSSZ` ([`amz_date`]).
    pub amz_date: &'a str,
}

/// Lower-case hex of SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(H[(b >> 4) as usize] as char);
        s.push(H[(b & 15) as usize] as char);
    }
    s
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&k, data).as_ref().to_vec()
}

/// The SDK's `escapeUri`: `encodeURIComponent` plus `!'()*` (so only `A-Za-z0-9-_.~` stay).
pub fn escape_uri(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The canonical path: `.`/`..`/empty segments removed, then every segment escaped (again).
pub fn canonical_path(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = String::new();
    if path.starts_with('/') {
        out.push('/');
    }
    let escaped: Vec<String> = segments.iter().map(|s| escape_uri(s)).collect();
    out.push_str(&escaped.join("/"));
    if !segments.is_empty() && path.ends_with('/') {
        out.push('/');
    }
    out
}

/// The canonical query: `key=value` pairs (decoded from `query`, then escaped) sorted by key.
pub fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                escape_uri(&percent_decode(k)),
                escape_uri(&percent_decode(v)),
            )
        })
        .collect();
    crate::sort::sort_by(&mut pairs, Ord::cmp);
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hexval = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hexval {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The signature of one request. `headers` must include `host` and `x-amz-date` (and the
/// security token when there is one); returns `(signed header list, hex signature)`.
pub fn signature(
    creds: &Credentials,
    scope: &Scope,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    payload_hash: &str,
) -> (String, String) {
    let mut canon: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), canonical_value(v)))
        .filter(|(k, _)| {
            !UNSIGNABLE.contains(&k.as_str()) && !k.starts_with("proxy-") && !k.starts_with("sec-")
        })
        .collect();
    crate::sort::sort_by(&mut canon, |a, b| a.0.cmp(&b.0));
    canon.dedup_by(|a, b| a.0 == b.0);
    let signed: Vec<&str> = canon.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical_headers: String = canon.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let request = format!(
        "{method}\n{}\n{}\n{canonical_headers}\n{signed}\n{payload_hash}",
        canonical_path(path),
        canonical_query(query)
    );
    let date = &scope.amz_date[..scope.amz_date.len().min(8)];
    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{credential_scope}\n{}",
        scope.amz_date,
        sha256_hex(request.as_bytes())
    );
    let mut key = hmac_sha256(
        format!("AWS4{}", creds.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    for part in [scope.region, scope.service, "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    (signed, hex(&hmac_sha256(&key, to_sign.as_bytes())))
}

fn canonical_value(v: &str) -> String {
    let v = v.replace(['\r', '\n'], " ");
    let mut out = String::with_capacity(v.len());
    let mut last_space = false;
    for c in v.chars() {
        let space = c == ' ' || c == '\t';
        if space && last_space {
            continue;
        }
        out.push(if space { ' ' } else { c });
        last_space = space;
    }
    out.trim_matches(' ').to_string()
}

/// Sign a request the way the SDK does: adds `x-amz-date`, `x-amz-security-token` (session
/// credentials), `x-amz-content-sha256` and `authorization` to `headers` (which must hold
/// `host`).
#[allow(clippy::too_many_arguments)]
pub fn sign(
    creds: &Credentials,
    region: &str,
    service: &str,
    amz_date: &str,
    method: &str,
    path_and_query: &str,
    headers: &mut Vec<(String, String)>,
    body: &[u8],
) {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    headers.push(("x-amz-date".into(), amz_date.to_string()));
    if let Some(t) = &creds.session_token {
        headers.push(("x-amz-security-token".into(), t.clone()));
    }
    let payload_hash = sha256_hex(body);
    headers.push(("x-amz-content-sha256".into(), payload_hash.clone()));
    let scope = Scope {
        region,
        service,
        amz_date,
    };
    let (signed, sig) = signature(creds, &scope, method, path, query, headers, &payload_hash);
    headers.push((
        "authorization".into(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{}/{region}/{service}/aws4_request, SignedHeaders={signed}, Signature={sig}",
            creds.access_key_id,
            &amz_date[..amz_date.len().min(8)],
        ),
    ));
}

/// `YYYYMMDDTHHMMSSZ` for a time in seconds since the epoch (UTC).
pub fn amz_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite_creds() -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        }
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    /// AWS's Signature Version 4 test suite (region us-east-1, service `service`).
    #[test]
    fn aws_test_suite_vectors() {
        let scope = Scope {
            region: "us-east-1",
            service: "service",
            amz_date: "20150830T123600Z",
        };
        let base = h(&[
            ("Host", "example.amazonaws.com"),
            ("X-Amz-Date", "20150830T123600Z"),
        ]);
        let c = suite_creds();
        let cases = [
            // get-vanilla
            (
                "GET",
                "/",
                "",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
            // get-vanilla-query-order-key-case
            (
                "GET",
                "/",
                "Param2=value2&Param1=value1",
                "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
            // post-vanilla
            (
                "POST",
                "/",
                "",
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
            // post-vanilla-query
            (
                "POST",
                "/",
                "Param1=value1",
                "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
            ),
        ];
        for (method, path, query, want) in cases {
            let (signed, sig) = signature(&c, &scope, method, path, query, &base, EMPTY);
            assert_eq!(signed, "host;x-amz-date");
            assert_eq!(sig, want, "{method} {path}?{query}");
        }
    }

    /// A Bedrock request signed by the AWS SDK for JavaScript (pi 0.73.1's client, captured):
    /// session token, a model id with `:` (sent as `%3A`, signed as `%253A`), unsignable
    /// `user-agent`.
    #[test]
    fn matches_the_js_sdk_on_a_bedrock_request() {
        let creds = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("session-token-example".into()),
        };
        let body = br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#;
        let mut headers = h(&[
            ("content-type", "application/json"),
            ("content-length", &body.len().to_string()),
            ("x-amz-user-agent", "aws-sdk-js/3.1162.0"),
            ("user-agent", "aws-sdk-js/3.1162.0 ua/2.1"),
            ("host", "127.0.0.1:35181"),
            (
                "amz-sdk-invocation-id",
                "7fa5150f-ca06-404c-b14f-8e5643970672",
            ),
            ("amz-sdk-request", "attempt=1; max=3"),
        ]);
        sign(
            &creds,
            "us-west-2",
            "bedrock",
            "20261125T075254Z",
            "POST",
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream",
            &mut headers,
            body,
        );
        let auth = &headers.last().unwrap().1;
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261125/us-west-2/bedrock/aws4_request, SignedHeaders=amz-sdk-invocation-id;amz-sdk-request;content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token;x-amz-user-agent, Signature=023c96e54bc566e176f2cf4661e9867996b48c40b76ae7f18da0e827f35edc1e"
        );
    }

    #[test]
    fn paths_and_queries_are_canonical() {
        assert_eq!(
            canonical_path("/model/a.b-v1%3A0/converse-stream"),
            "/model/a.b-v1%253A0/converse-stream"
        );
        assert_eq!(canonical_path("/a/./b/../c/"), "/a/c/");
        assert_eq!(canonical_path("/"), "/");
        assert_eq!(canonical_query("b=2&a=1&A=0"), "A=0&a=1&b=2");
        assert_eq!(canonical_query("x=a%20b"), "x=a%20b");
        assert_eq!(escape_uri("a b!*'()~"), "a%20b%21%2A%27%28%29~");
    }

    #[test]
    fn dates() {
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_440_938_160), "20150830T123600Z");
        assert_eq!(amz_date(951_782_400), "20000229T000000Z");
    }
}
