//! pi 1.6.0's client identity on the Google and Bedrock wires (`--compat 1.6` only), through the
//! real binary against a local fake provider: the Gemini API and Vertex get pi-ai's identity
//! `User-Agent` over `@google/genai`'s, and the SDK's `x-goog-api-client`; Bedrock gets the AWS
//! SDK's `x-amz-user-agent` (signed) and `user-agent` with pi-ai's `customUserAgent` `pi/1.6.0`
//! appended, its `m/` naming the explicit endpoint, the retry mode and the credentials' source.
//! The expected values are the ones recorded from pi 1.6.0 against a fake server
//! (`tests/record/`: `os/linux#<kernel release>` is the recording machine's `os.release()`).
//! 0.87 and 0.73 keep sending none of them.

mod support;

use serde_json::json;
use support::bedrock::text_reply as bedrock_text;
use support::fake_llm::{FakeLlm, Recorded, Reply};
use support::frames::{last_assistant as assistant_end, run};
use support::node::platform_arch as node_platform_arch;
use support::spawn_env as spawn;
use support::{World, fixture};

/// Node's `os.release()`.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn point(world: &World, provider: &str, base: &str) {
    world.write_agent_file(
        "models.json",
        &json!({ "providers": { provider: { "baseUrl": base } } }).to_string(),
    );
}

/// One prompt with `--compat compat` on `provider`/`model`; the request pith sent.
fn one_request(
    compat: &str,
    provider: &str,
    model: &str,
    reply: Reply,
    env: &[(&str, &str)],
    setup: &dyn Fn(&World),
) -> Recorded {
    let llm = FakeLlm::start(vec![reply]);
    let world = World::new();
    point(&world, provider, &llm.base_url());
    setup(&world);
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--compat",
            compat,
            "--provider",
            provider,
            "--model",
            model,
            "--no-session",
        ],
        env,
    );
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    assert_eq!(msg["stopReason"], "stop", "{compat} {provider}: {msg}");
    let mut reqs = llm.requests();
    assert_eq!(reqs.len(), 1, "{compat} {provider}");
    reqs.remove(0)
}

fn google_text() -> Reply {
    Reply::sse(std::fs::read_to_string(fixture("google/text.sse")).expect("fixture"))
}

#[test]
fn gemini_and_vertex_send_pi_1_6_identity() {
    let (platform, arch) = node_platform_arch();
    let ua = format!("pi/1.6.0 ({platform}; node/v22.23.3; {arch})");
    let client = "google-genai-sdk/2.32.0 gl-node/v22.23.3";
    let cases: [(&str, &[(&str, &str)]); 2] = [
        ("google", &[("GEMINI_API_KEY", "gemini-key")]),
        (
            "google-vertex",
            &[("GOOGLE_CLOUD_API_KEY", "vertex-api-key")],
        ),
    ];
    for (provider, env) in cases {
        let r = one_request(
            "1.6",
            provider,
            "gemini-2.5-flash",
            google_text(),
            env,
            &|_| {},
        );
        assert_eq!(r.header("user-agent"), Some(ua.as_str()), "{provider}");
        assert_eq!(r.header("x-goog-api-client"), Some(client), "{provider}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("x-goog-api-key"), Some(env[0].1));
        // Older protocols: no SDK header imitated, as before.
        for compat in ["0.87", "0.73"] {
            let r = one_request(
                compat,
                provider,
                "gemini-2.5-flash",
                google_text(),
                env,
                &|_| {},
            );
            assert_eq!(r.header("user-agent"), None, "{compat} {provider}");
            assert_eq!(r.header("x-goog-api-client"), None, "{compat} {provider}");
        }
    }
}

#[test]
fn a_model_header_overrides_the_identity_user_agent() {
    let llm = FakeLlm::start(vec![google_text()]);
    let world = World::new();
    world.write_agent_file(
        "models.json",
        &json!({ "providers": { "google": {
            "baseUrl": llm.base_url(), "headers": { "User-Agent": "mine/1" } } } })
        .to_string(),
    );
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--compat",
            "1.6",
            "--provider",
            "google",
            "--model",
            "gemini-2.5-flash",
            "--no-session",
        ],
        &[("GEMINI_API_KEY", "k")],
    );
    let frames = run(&mut p, "1", "hi");
    assert_eq!(assistant_end(&frames)["stopReason"], "stop");
    let r = &llm.requests()[0];
    assert_eq!(r.header("user-agent"), Some("mine/1"));
    assert_eq!(
        r.header("x-goog-api-client"),
        Some("google-genai-sdk/2.32.0 gl-node/v22.23.3")
    );
}

fn bedrock(compat: &str, env: &[(&str, &str)], setup: &dyn Fn(&World)) -> Recorded {
    one_request(
        compat,
        "amazon-bedrock",
        "amazon.nova-pro-v1:0",
        bedrock_text(),
        env,
        setup,
    )
}

fn aws_user_agent(features: &str) -> String {
    let (platform, _) = node_platform_arch();
    format!(
        "aws-sdk-js/3.1126.0 ua/2.1 os/{platform}#{} lang/js md/nodejs#22.23.3 api/bedrock-runtime#3.1126.0 m/{features} pi/1.6.0",
        kernel_release()
    )
}

/// The headers a SigV4 `authorization` names as signed.
fn signed_headers(r: &Recorded) -> Vec<String> {
    let auth = r.header("authorization").expect("authorization");
    auth.split("SignedHeaders=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("")
        .split(';')
        .map(str::to_string)
        .collect()
}

#[test]
fn bedrock_sends_the_aws_sdk_user_agents_of_pi_1_6() {
    // Environment keys (pi passes them to the client in code): `e`; the models.json endpoint:
    // `N`; the standard retry mode: `E`.
    let keys = [
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "secret-example"),
        ("AWS_REGION", "us-west-2"),
    ];
    let r = bedrock("1.6", &keys, &|_| {});
    assert_eq!(
        r.header("x-amz-user-agent"),
        Some("aws-sdk-js/3.1126.0 pi/1.6.0")
    );
    assert_eq!(
        r.header("user-agent"),
        Some(aws_user_agent("N,E,e").as_str())
    );
    // `x-amz-user-agent` is signed, `user-agent` is not (as the SDK's signer), and the
    // signature covers what went over the wire.
    let signed = signed_headers(&r);
    assert!(signed.iter().any(|h| h == "x-amz-user-agent"), "{signed:?}");
    assert!(!signed.iter().any(|h| h == "user-agent"), "{signed:?}");
    let headers: Vec<(String, String)> = signed
        .iter()
        .map(|h| (h.clone(), r.header(h).unwrap_or("").to_string()))
        .collect();
    let creds = pith::llm::aws::credentials::Credentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: "secret-example".into(),
        session_token: None,
    };
    let date = r.header("x-amz-date").unwrap();
    let scope = pith::llm::aws::sigv4::Scope {
        region: "us-west-2",
        service: "bedrock",
        amz_date: date,
    };
    let payload = pith::llm::aws::sigv4::sha256_hex(r.body.as_bytes());
    let (_, sig) =
        pith::llm::aws::sigv4::signature(&creds, &scope, "POST", &r.path, "", &headers, &payload);
    let auth = r.header("authorization").unwrap();
    assert!(auth.ends_with(&format!("Signature={sig}")), "{auth}");

    // A Bedrock API key: no credentials source.
    let r = bedrock(
        "1.6",
        &[
            ("AWS_BEARER_TOKEN_BEDROCK", "tok-123"),
            ("AWS_REGION", "us-west-2"),
        ],
        &|_| {},
    );
    assert_eq!(r.header("authorization"), Some("Bearer tok-123"));
    assert_eq!(r.header("user-agent"), Some(aws_user_agent("N,E").as_str()));
    assert_eq!(
        r.header("x-amz-user-agent"),
        Some("aws-sdk-js/3.1126.0 pi/1.6.0")
    );

    // A profile's keys: `n`; its credential_process: `w,v`.
    let profile = |world: &World| {
        let aws = world.dir.path().join("home/.aws");
        std::fs::create_dir_all(&aws).unwrap();
        std::fs::write(
            aws.join("credentials"),
            "[work]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s1\n",
        )
        .unwrap();
        std::fs::write(
            aws.join("config"),
            "[profile work]\nregion = us-west-2\n[profile proc]\nregion = us-west-2\ncredential_process = echo '{\"Version\":1,\"AccessKeyId\":\"AKIDPROC\",\"SecretAccessKey\":\"s2\"}'\n",
        )
        .unwrap();
    };
    let r = bedrock(
        "1.6",
        &[("AWS_PROFILE", "work"), ("AWS_REGION", "us-west-2")],
        &profile,
    );
    assert!(r.header("authorization").unwrap().contains("AKIDPROFILE/"));
    assert_eq!(
        r.header("user-agent"),
        Some(aws_user_agent("N,E,n").as_str())
    );
    let r = bedrock(
        "1.6",
        &[("AWS_PROFILE", "proc"), ("AWS_REGION", "us-west-2")],
        &profile,
    );
    assert!(r.header("authorization").unwrap().contains("AKIDPROC/"));
    assert_eq!(
        r.header("user-agent"),
        Some(aws_user_agent("N,E,w,v").as_str())
    );

    // Older protocols: neither header, and nothing more signed.
    for compat in ["0.87", "0.73"] {
        let r = bedrock(compat, &keys, &|_| {});
        assert_eq!(r.header("user-agent"), None, "{compat}");
        assert_eq!(r.header("x-amz-user-agent"), None, "{compat}");
        assert!(
            !signed_headers(&r).iter().any(|h| h == "x-amz-user-agent"),
            "{compat}"
        );
    }
}
