//! The cloud providers and stored logins end to end, through the real binary: OAuth refresh
//! against a local token endpoint (under pi's auth.json lock, two processes at once, failures),
//! Vertex with Application Default Credentials, Bedrock signing with a profile, and which models
//! `get_available_models` lists for which credentials. Every endpoint is a local fake.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_llm::{FakeLlm, Recorded, Reply};
use support::frames::{last_assistant as assistant_end, run};
use support::{Pith, World, fixture};

fn token_reply(body: Value) -> Reply {
    Reply {
        headers: vec![("content-type".into(), "application/json".into())],
        ..Reply::sse(body.to_string())
    }
}

fn anthropic_text() -> Reply {
    Reply::sse(std::fs::read_to_string(fixture("anthropic/text.sse")).expect("fixture"))
}

fn spawn(world: &World, args: &[&str], env: &[(&str, String)]) -> Pith {
    support::spawn_env(world, args, env)
}

fn auth_path(world: &World) -> std::path::PathBuf {
    world.agent_dir().join("auth.json")
}

fn read_auth(world: &World) -> Value {
    serde_json::from_str(&std::fs::read_to_string(auth_path(world)).expect("auth.json"))
        .expect("auth.json is JSON")
}

fn write_auth(world: &World, v: &Value, mode: u32) {
    let p = auth_path(world);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The models.json override pointing `provider` at `base`.
fn point(world: &World, providers: Value) {
    world.write_agent_file(
        "models.json",
        &json!({ "providers": providers }).to_string(),
    );
}

fn header<'a>(r: &'a Recorded, name: &str) -> Option<&'a str> {
    r.header(name)
}

/// Stop `p` and check no secret appears in anything it printed (stdout frames, stderr).
fn finish_without_secrets(p: Pith, frames: &[Value], secrets: &[&str]) {
    let err = p.stderr.clone();
    let (_, rest) = p.finish(Duration::from_secs(5));
    let mut all: Vec<String> = frames.iter().map(Value::to_string).collect();
    all.extend(rest);
    all.extend(err.lock().unwrap().iter().cloned());
    let all = all.join("\n");
    for s in secrets {
        assert!(!all.contains(s), "{s} was printed");
    }
}

const EXPIRED: u64 = 1000;

fn anthropic_login(access: &str, refresh: &str, expires: u64) -> Value {
    json!({"type":"oauth","refresh":refresh,"access":access,"expires":expires})
}

// ------------------------------------------------------------------------------------------------
// OAuth

#[test]
fn expired_anthropic_login_is_refreshed_and_written_back() {
    let llm = FakeLlm::start(vec![anthropic_text()]);
    let tokens = FakeLlm::start(vec![token_reply(
        json!({"access_token":"sk-ant-oat01-NEWTOKEN","refresh_token":"rt-NEW","expires_in":3600}),
    )]);
    let world = World::new();
    point(&world, json!({"anthropic": {"baseUrl": llm.base_url()}}));
    write_auth(
        &world,
        &json!({
            "openai": {"type":"api_key","key":"sk-keep-me"},
            "anthropic": anthropic_login("sk-ant-oat01-OLDTOKEN", "rt-OLD", EXPIRED),
            "zz": {"type":"api_key","key":"last"}
        }),
        0o640,
    );
    let env = [(
        "PITH_ANTHROPIC_TOKEN_URL",
        format!("{}/v1/oauth/token", tokens.base_url()),
    )];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
            "--no-session",
        ],
        &env,
    );
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    assert_eq!(msg["stopReason"], "stop", "{msg}");

    // The token endpoint got pi's refresh request.
    let t = tokens.requests();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].path, "/v1/oauth/token");
    assert_eq!(
        t[0].body,
        r#"{"grant_type":"refresh_token","client_id":"9d1c250a-e61b-44d9-88ed-5944d1962f5e","refresh_token":"rt-OLD"}"#
    );
    // The model request used the new token the OAuth way.
    let r = &llm.requests()[0];
    assert_eq!(
        header(r, "authorization"),
        Some("Bearer sk-ant-oat01-NEWTOKEN")
    );
    assert!(
        header(r, "anthropic-beta")
            .unwrap_or("")
            .contains("oauth-2025-04-20")
    );
    assert_eq!(header(r, "x-api-key"), None);

    // auth.json: the login replaced in place, the other entries kept, mode 0600 (as pi writes
    // it; it was 0640), no lock left.
    let auth = read_auth(&world);
    let keys: Vec<&str> = auth
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["openai", "anthropic", "zz"]);
    assert_eq!(auth["openai"], json!({"type":"api_key","key":"sk-keep-me"}));
    assert_eq!(auth["anthropic"]["access"], "sk-ant-oat01-NEWTOKEN");
    assert_eq!(auth["anthropic"]["refresh"], "rt-NEW");
    let expires = auth["anthropic"]["expires"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // One hour minus pi's five-minute margin.
    assert!(expires > now + 50 * 60 * 1000 && expires <= now + 55 * 60 * 1000);
    let mode = std::fs::metadata(auth_path(&world))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!world.agent_dir().join("auth.json.lock").exists());
    let text = std::fs::read_to_string(auth_path(&world)).unwrap();
    assert!(
        text.starts_with("{\n  \"openai\": {\n    \"type\": \"api_key\","),
        "{text}"
    );

    // No token in anything pith printed.
    finish_without_secrets(
        p,
        &frames,
        &[
            "sk-ant-oat01-NEWTOKEN",
            "sk-ant-oat01-OLDTOKEN",
            "rt-NEW",
            "rt-OLD",
        ],
    );
}

/// Two pith processes with the same expired login prompt at the same moment: one refreshes
/// (under the lock), the other waits, then reads the new token from auth.json. The token
/// endpoint sees a single request; both model requests carry the new token.
#[test]
fn two_processes_refresh_once() {
    let llm = FakeLlm::start(vec![anthropic_text(), anthropic_text()]);
    // A slow token endpoint keeps the first refresh inside the lock for a while.
    let tokens = FakeLlm::start(vec![
        token_reply(
            json!({"access_token":"sk-ant-oat01-SHARED","refresh_token":"rt-2","expires_in":3600}),
        )
        .chunked(8, Duration::from_millis(40)),
        token_reply(
            json!({"access_token":"sk-ant-oat01-SECOND","refresh_token":"rt-3","expires_in":3600}),
        ),
    ]);
    let world = World::new();
    point(&world, json!({"anthropic": {"baseUrl": llm.base_url()}}));
    write_auth(
        &world,
        &json!({"anthropic": anthropic_login("sk-ant-oat01-OLD", "rt-1", EXPIRED)}),
        0o600,
    );
    let env = [("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url())];
    let args = [
        "--mode",
        "rpc",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--no-session",
    ];
    let mut a = spawn(&world, &args, &env);
    let mut b = spawn(&world, &args, &env);
    // Both ready (their state answers), then both prompt at once.
    a.call(json!({"type":"get_state"}), "s");
    b.call(json!({"type":"get_state"}), "s");
    a.send(json!({"id":"1","type":"prompt","message":"hi"}));
    b.send(json!({"id":"1","type":"prompt","message":"hi"}));
    let fa = a.recv_until(|v| v["type"] == "agent_settled");
    let fb = b.recv_until(|v| v["type"] == "agent_settled");
    assert_eq!(assistant_end(&fa)["stopReason"], "stop");
    assert_eq!(assistant_end(&fb)["stopReason"], "stop");
    assert_eq!(tokens.requests().len(), 1, "the login was refreshed twice");
    let auths: Vec<Option<String>> = llm
        .requests()
        .iter()
        .map(|r| header(r, "authorization").map(str::to_string))
        .collect();
    assert_eq!(
        auths,
        [
            Some("Bearer sk-ant-oat01-SHARED".to_string()),
            Some("Bearer sk-ant-oat01-SHARED".to_string())
        ]
    );
    assert_eq!(read_auth(&world)["anthropic"]["refresh"], "rt-2");
    assert!(!world.agent_dir().join("auth.json.lock").exists());
}

/// pi holds its lock (the `auth.json.lock` directory): pith waits for it instead of refreshing.
#[test]
fn a_lock_held_by_pi_is_respected() {
    let llm = FakeLlm::start(vec![anthropic_text()]);
    let tokens = FakeLlm::start(vec![token_reply(
        json!({"access_token":"sk-ant-oat01-AFTER","refresh_token":"rt-2","expires_in":3600}),
    )]);
    let world = World::new();
    point(&world, json!({"anthropic": {"baseUrl": llm.base_url()}}));
    write_auth(
        &world,
        &json!({"anthropic": anthropic_login("sk-ant-oat01-OLD", "rt-1", EXPIRED)}),
        0o600,
    );
    let lock = world.agent_dir().join("auth.json.lock");
    std::fs::create_dir(&lock).unwrap();
    let env = [("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url())];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
            "--no-session",
        ],
        &env,
    );
    p.send(json!({"id":"1","type":"prompt","message":"hi"}));
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        tokens.requests().len(),
        0,
        "refreshed while pi held the lock"
    );
    // pi "refreshes" meanwhile and releases its lock.
    write_auth(
        &world,
        &json!({"anthropic": anthropic_login("sk-ant-oat01-BYPI", "rt-pi", 4_102_444_800_000)}),
        0o600,
    );
    std::fs::remove_dir(&lock).unwrap();
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    assert_eq!(assistant_end(&frames)["stopReason"], "stop");
    assert_eq!(tokens.requests().len(), 0);
    assert_eq!(
        header(&llm.requests()[0], "authorization"),
        Some("Bearer sk-ant-oat01-BYPI")
    );
}

#[test]
fn refresh_failures_are_clear_and_transient_ones_are_retried() {
    // A refused refresh token: a clear error, auth.json untouched, nothing sent to the model.
    let llm = FakeLlm::start(vec![anthropic_text()]);
    let tokens = FakeLlm::start(vec![Reply::error(
        400,
        r#"{"error":"invalid_grant","error_description":"Refresh token revoked"}"#,
    )]);
    let world = World::new();
    point(&world, json!({"anthropic": {"baseUrl": llm.base_url()}}));
    let stored = json!({"anthropic": anthropic_login("sk-ant-oat01-OLD", "rt-1", EXPIRED)});
    write_auth(&world, &stored, 0o600);
    let env = [("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url())];
    let args = [
        "--mode",
        "rpc",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--no-session",
    ];
    let mut p = spawn(&world, &args, &env);
    p.call(json!({"type":"set_auto_retry","enabled":false}), "r");
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    assert_eq!(msg["stopReason"], "error");
    assert_eq!(
        msg["errorMessage"],
        "Failed to refresh OAuth token for anthropic: token endpoint answered 400: invalid_grant: Refresh token revoked"
    );
    assert_eq!(
        tokens.requests().len(),
        1,
        "a permanent failure is not retried"
    );
    assert!(llm.requests().is_empty());
    assert_eq!(read_auth(&world), stored);
    finish_without_secrets(p, &frames, &["sk-ant-oat01-OLD", "rt-1\""]);

    // A 503 then an answer: retried inside the refresh, the request goes through.
    let llm = FakeLlm::start(vec![anthropic_text()]);
    let tokens = FakeLlm::start(vec![
        Reply::error(503, "upstream unavailable"),
        token_reply(
            json!({"access_token":"sk-ant-oat01-NEW","refresh_token":"rt-2","expires_in":3600}),
        ),
    ]);
    let world = World::new();
    point(&world, json!({"anthropic": {"baseUrl": llm.base_url()}}));
    write_auth(&world, &stored, 0o600);
    let env = [("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url())];
    let mut p = spawn(&world, &args, &env);
    let frames = run(&mut p, "1", "hi");
    assert_eq!(assistant_end(&frames)["stopReason"], "stop");
    assert_eq!(tokens.requests().len(), 2);
    assert_eq!(
        header(&llm.requests()[0], "authorization"),
        Some("Bearer sk-ant-oat01-NEW")
    );

    // The endpoint down for good: the error names the network failure (auto-retry matches it).
    let world = World::new();
    point(
        &world,
        json!({"anthropic": {"baseUrl": "http://127.0.0.1:9"}}),
    );
    write_auth(&world, &stored, 0o600);
    let port = support::free_port();
    let env = [(
        "PITH_ANTHROPIC_TOKEN_URL",
        format!("http://127.0.0.1:{port}"),
    )];
    let mut p = spawn(&world, &args, &env);
    p.call(json!({"type":"set_auto_retry","enabled":false}), "r");
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    let text = msg["errorMessage"].as_str().unwrap();
    assert!(
        text.starts_with("Failed to refresh OAuth token for anthropic: connection error"),
        "{text}"
    );
}

#[test]
fn codex_and_copilot_logins_refresh_their_own_way() {
    use base64::Engine;
    let b64 = |v: Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
    };
    let jwt = |acc: &str| {
        format!(
            "eyJhbGciOiJub25lIn0.{}.sig",
            b64(json!({"https://api.openai.com/auth": {"chatgpt_account_id": acc}}))
        )
    };
    let responses = |id: &str| {
        let events = [
            json!({"type":"response.created","response":{"id":id,"status":"in_progress"}}),
            json!({"type":"response.output_item.added","item":{"type":"message","id":"m1","content":[]}}),
            json!({"type":"response.content_part.added","part":{"type":"output_text","text":""}}),
            json!({"type":"response.output_text.delta","delta":"ok"}),
            json!({"type":"response.output_item.done","item":{"type":"message","id":"m1","content":[{"type":"output_text","text":"ok"}]}}),
            json!({"type":"response.completed","response":{"id":id,"status":"completed","usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}}),
        ];
        Reply::sse(
            events
                .iter()
                .map(|e| format!("data: {e}\n\n"))
                .collect::<String>(),
        )
    };

    // Codex: form-encoded refresh; the new token's account id goes in the header and the file.
    let llm = FakeLlm::start(vec![responses("r1")]);
    let new = jwt("acc-new");
    let tokens = FakeLlm::start(vec![token_reply(
        json!({"access_token": new, "refresh_token": "rt-codex-2", "expires_in": 864000}),
    )]);
    let world = World::new();
    point(
        &world,
        json!({"openai-codex": {"baseUrl": format!("{}/backend-api", llm.base_url())}}),
    );
    write_auth(
        &world,
        &json!({"openai-codex": {"type":"oauth","access": jwt("acc-old"),"refresh":"rt-codex-1","expires":EXPIRED,"accountId":"acc-old"}}),
        0o600,
    );
    let env = [("PITH_OPENAI_CODEX_TOKEN_URL", tokens.base_url())];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "openai-codex",
            "--model",
            "gpt-5.2",
            "--no-session",
        ],
        &env,
    );
    let frames = run(&mut p, "1", "hi");
    assert_eq!(assistant_end(&frames)["stopReason"], "stop", "{frames:?}");
    let t = &tokens.requests()[0];
    assert_eq!(
        t.body,
        "grant_type=refresh_token&refresh_token=rt-codex-1&client_id=app_EMoamEEZ73f0CkXaXp7hrann"
    );
    let r = &llm.requests()[0];
    assert_eq!(r.path, "/backend-api/codex/responses");
    assert_eq!(header(r, "chatgpt-account-id"), Some("acc-new"));
    assert_eq!(
        header(r, "authorization"),
        Some(format!("Bearer {new}").as_str())
    );
    let auth = read_auth(&world);
    assert_eq!(auth["openai-codex"]["accountId"], "acc-new");
    assert_eq!(auth["openai-codex"]["refresh"], "rt-codex-2");

    // Copilot: the GitHub token is exchanged (GET, editor headers) for a Copilot token.
    let llm = FakeLlm::start(vec![responses("r2")]);
    let tokens = FakeLlm::start(vec![token_reply(
        json!({"token":"tid=9;exp=99;proxy-ep=proxy.individual.githubcopilot.com","expires_at":4102444800u64}),
    )]);
    let world = World::new();
    point(
        &world,
        json!({"github-copilot": {"baseUrl": llm.base_url()}}),
    );
    write_auth(
        &world,
        &json!({"github-copilot": {"type":"oauth","refresh":"ghu_github","access":"tid=1;exp=1","expires":EXPIRED}}),
        0o600,
    );
    let env = [("PITH_GITHUB_COPILOT_TOKEN_URL", tokens.base_url())];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "github-copilot",
            "--model",
            "gpt-5.2",
            "--no-session",
        ],
        &env,
    );
    let frames = run(&mut p, "1", "hi");
    assert_eq!(assistant_end(&frames)["stopReason"], "stop", "{frames:?}");
    let t = &tokens.requests()[0];
    assert_eq!(header(t, "authorization"), Some("Bearer ghu_github"));
    assert_eq!(header(t, "editor-version"), Some("vscode/1.107.0"));
    let r = &llm.requests()[0];
    assert_eq!(
        header(r, "authorization"),
        Some("Bearer tid=9;exp=99;proxy-ep=proxy.individual.githubcopilot.com")
    );
    assert_eq!(header(r, "x-initiator"), Some("user"));
    let auth = read_auth(&world);
    assert_eq!(auth["github-copilot"]["refresh"], "ghu_github");
    assert_eq!(
        auth["github-copilot"]["expires"],
        json!(4_102_444_800_000u64 - 300_000)
    );
}

// ------------------------------------------------------------------------------------------------
// Vertex with Application Default Credentials

fn gemini_text() -> Reply {
    Reply::sse(
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"ok\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":1,\"totalTokenCount\":4}}\r\n\r\n",
    )
}

#[test]
fn vertex_service_account_token_is_fetched_once_and_sent_as_bearer() {
    use base64::Engine;
    let llm = FakeLlm::start(vec![gemini_text(), gemini_text()]);
    let tokens = FakeLlm::start(vec![token_reply(
        json!({"access_token":"ya29.sa-token","expires_in":3599,"token_type":"Bearer"}),
    )]);
    let world = World::new();
    let key = std::fs::read_to_string(fixture("google/test-service-account.pem")).unwrap();
    let sa = json!({"type":"service_account","project_id":"proj-1","private_key_id":"kid-1",
        "private_key": key, "client_email":"ci@proj-1.iam.gserviceaccount.com",
        "token_uri": format!("{}/token", tokens.base_url())});
    let sa_path = world.dir.path().join("sa.json");
    std::fs::write(&sa_path, sa.to_string()).unwrap();
    point(
        &world,
        json!({"google-vertex": {"baseUrl": llm.base_url()}}),
    );
    let env = [
        (
            "GOOGLE_APPLICATION_CREDENTIALS",
            sa_path.display().to_string(),
        ),
        ("GOOGLE_CLOUD_PROJECT", "proj-1".to_string()),
        ("GOOGLE_CLOUD_LOCATION", "europe-west4".to_string()),
    ];
    let mut p = spawn(&world, &["--mode", "rpc", "--no-session"], &env);
    let models = p.call(json!({"type":"get_available_models"}), "m");
    let ids: Vec<&str> = models["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "google-vertex")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"gemini-2.5-flash"), "{ids:?}");
    p.call(
        json!({"type":"set_model","provider":"google-vertex","modelId":"gemini-2.5-flash"}),
        "s",
    );
    for id in ["1", "2"] {
        let frames = run(&mut p, id, "hi");
        assert_eq!(assistant_end(&frames)["stopReason"], "stop");
    }
    // One token for both requests.
    let t = tokens.requests();
    assert_eq!(t.len(), 1);
    let form: Vec<(&str, &str)> = t[0]
        .body
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    assert_eq!(
        form[0],
        (
            "grant_type",
            "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
        )
    );
    // The assertion verifies with the service account's public key.
    let jwt = form[1].1;
    let parts: Vec<&str> = jwt.split('.').collect();
    let dec = |s: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .unwrap()
    };
    let claims: Value = serde_json::from_slice(&dec(parts[1])).unwrap();
    assert_eq!(claims["iss"], "ci@proj-1.iam.gserviceaccount.com");
    assert_eq!(claims["aud"], format!("{}/token", tokens.base_url()));
    let der = pith::llm::google_auth::pem_der(&key, "PRIVATE KEY").unwrap();
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
    use ring::signature::KeyPair;
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        pair.public_key().as_ref(),
    )
    .verify(
        format!("{}.{}", parts[0], parts[1]).as_bytes(),
        &dec(parts[2]),
    )
    .expect("the assertion verifies");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(header(r, "authorization"), Some("Bearer ya29.sa-token"));
        assert_eq!(
            r.path,
            "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
    }
}

/// A service account of another universe (`universe_domain` not `googleapis.com`: sovereign and
/// private clouds) calls no token endpoint: as google-auth-library's `JWT` client there, it signs
/// a JWT itself (`iss` = `sub` = the account, `scope` = cloud-platform, `iat`, `exp` one hour
/// later; no `aud`) and sends it as the bearer token, the same one for both requests.
#[test]
fn vertex_service_account_of_another_universe_sends_a_self_signed_jwt() {
    use base64::Engine;
    let llm = FakeLlm::start(vec![gemini_text(), gemini_text()]);
    // The key's token endpoint: must not be asked.
    let tokens = FakeLlm::start(vec![]);
    let world = World::new();
    let key = std::fs::read_to_string(fixture("google/test-service-account.pem")).unwrap();
    let sa = json!({"type":"service_account","project_id":"proj-u","private_key_id":"kid-u",
        "private_key": key, "client_email":"ci@proj-u.iam.gserviceaccount.example",
        "token_uri": format!("{}/token", tokens.base_url()),
        "universe_domain": "sovereign.example"});
    let sa_path = world.dir.path().join("sa.json");
    std::fs::write(&sa_path, sa.to_string()).unwrap();
    point(
        &world,
        json!({"google-vertex": {"baseUrl": llm.base_url()}}),
    );
    let env = [
        (
            "GOOGLE_APPLICATION_CREDENTIALS",
            sa_path.display().to_string(),
        ),
        ("GOOGLE_CLOUD_PROJECT", "proj-u".to_string()),
        ("GOOGLE_CLOUD_LOCATION", "europe-west4".to_string()),
        // Were an exchange attempted for the user credentials, it would come here.
        (
            "PITH_GOOGLE_TOKEN_URL",
            format!("{}/token", tokens.base_url()),
        ),
    ];
    let mut p = spawn(&world, &["--mode", "rpc", "--no-session"], &env);
    p.call(
        json!({"type":"set_model","provider":"google-vertex","modelId":"gemini-2.5-flash"}),
        "s",
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut seen = Vec::new();
    for id in ["1", "2"] {
        let frames = run(&mut p, id, "hi");
        assert_eq!(assistant_end(&frames)["stopReason"], "stop");
        seen.extend(frames);
    }
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(tokens.requests().is_empty(), "no token endpoint call");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let bearer = header(&reqs[0], "authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("a bearer token")
        .to_string();
    assert_eq!(
        header(&reqs[1], "authorization"),
        Some(format!("Bearer {bearer}").as_str())
    );
    for r in &reqs {
        assert_eq!(
            r.path,
            "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
    }
    let parts: Vec<&str> = bearer.split('.').collect();
    assert_eq!(parts.len(), 3, "{bearer}");
    let dec = |s: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .unwrap()
    };
    assert_eq!(
        String::from_utf8(dec(parts[0])).unwrap(),
        r#"{"alg":"RS256","typ":"JWT","kid":"kid-u"}"#
    );
    let claims: Value = serde_json::from_slice(&dec(parts[1])).unwrap();
    let iat = claims["iat"].as_u64().expect("iat");
    assert!((before..=after).contains(&iat), "{claims}");
    assert_eq!(
        String::from_utf8(dec(parts[1])).unwrap(),
        json!({"iss":"ci@proj-u.iam.gserviceaccount.example",
            "sub":"ci@proj-u.iam.gserviceaccount.example",
            "scope":"https://www.googleapis.com/auth/cloud-platform",
            "exp":iat + 3600,"iat":iat})
        .to_string()
    );
    // Signed with the account's key: verifies with its public part, and not once altered.
    let der = pith::llm::google_auth::pem_der(&key, "PRIVATE KEY").unwrap();
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
    use ring::signature::KeyPair;
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        pair.public_key().as_ref(),
    );
    let signed = format!("{}.{}", parts[0], parts[1]);
    public
        .verify(signed.as_bytes(), &dec(parts[2]))
        .expect("the token verifies");
    let mut altered = signed.into_bytes();
    let last = altered.len() - 1;
    altered[last] ^= 1;
    assert!(public.verify(&altered, &dec(parts[2])).is_err());
    // Neither the token nor the key is printed (stdout, stderr).
    finish_without_secrets(p, &seen, &[&bearer, "PRIVATE KEY"]);
}

// ------------------------------------------------------------------------------------------------
// Bedrock with a profile

#[test]
fn bedrock_signs_with_the_profile_credentials() {
    let llm = FakeLlm::start(vec![support::bedrock::text_reply()]);
    let world = World::new();
    let home = world.dir.path().join("home");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = nope\n\n[ci]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\naws_session_token = profile-session\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".aws/config"),
        "[profile ci]\nregion = eu-north-1\n",
    )
    .unwrap();
    point(
        &world,
        json!({"amazon-bedrock": {"baseUrl": llm.base_url()}}),
    );
    // Environment keys are ignored when a profile is named, as in the AWS SDK.
    let env = [
        ("AWS_PROFILE", "ci".to_string()),
        ("AWS_ACCESS_KEY_ID", "AKIDENV".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "env-secret".to_string()),
    ];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "amazon-bedrock",
            "--model",
            "amazon.nova-pro-v1:0",
            "--no-session",
        ],
        &env,
    );
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    assert_eq!(msg["stopReason"], "stop", "{msg}");
    assert_eq!(msg["content"][0]["text"], "Hello from Bedrock");
    let r = &llm.requests()[0];
    assert_eq!(r.path, "/model/amazon.nova-pro-v1%3A0/converse-stream");
    assert_eq!(header(r, "x-amz-security-token"), Some("profile-session"));
    let auth = header(r, "authorization").unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDPROFILE/"),
        "{auth}"
    );
    assert!(auth.contains("/eu-north-1/bedrock/aws4_request"), "{auth}");
    // The signature covers what went over the wire.
    let signed: Vec<&str> = auth
        .split("SignedHeaders=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .split(';')
        .collect();
    let headers: Vec<(String, String)> = signed
        .iter()
        .map(|h| (h.to_string(), header(r, h).unwrap_or("").to_string()))
        .collect();
    let creds = pith::llm::aws::credentials::Credentials {
        access_key_id: "AKIDPROFILE".into(),
        secret_access_key: "profile-secret".into(),
        session_token: Some("profile-session".into()),
    };
    let date = header(r, "x-amz-date").unwrap();
    let scope = pith::llm::aws::sigv4::Scope {
        region: "eu-north-1",
        service: "bedrock",
        amz_date: date,
    };
    let payload = pith::llm::aws::sigv4::sha256_hex(r.body.as_bytes());
    assert_eq!(header(r, "x-amz-content-sha256"), Some(payload.as_str()));
    let (_, sig) =
        pith::llm::aws::sigv4::signature(&creds, &scope, "POST", &r.path, "", &headers, &payload);
    assert!(auth.ends_with(&format!("Signature={sig}")), "{auth}");
    finish_without_secrets(
        p,
        &frames,
        &["profile-secret", "profile-session", "env-secret"],
    );
}

// ------------------------------------------------------------------------------------------------
// Which models are listed

#[test]
fn available_models_follow_each_providers_credentials() {
    let world = World::new();
    let cases = [
        ("MISTRAL_API_KEY", "mistral", 28),
        ("AZURE_OPENAI_API_KEY", "azure-openai-responses", 42),
        ("AWS_PROFILE", "amazon-bedrock", 93),
        ("AWS_BEARER_TOKEN_BEDROCK", "amazon-bedrock", 93),
        ("GOOGLE_CLOUD_API_KEY", "google-vertex", 13),
        ("COPILOT_GITHUB_TOKEN", "github-copilot", 26),
    ];
    for (var, provider, count) in cases {
        let env = [(var, "k".to_string())];
        let mut p = spawn(&world, &["--mode", "rpc", "--no-session"], &env);
        let models = p.call(json!({"type":"get_available_models"}), "m");
        let providers: Vec<&str> = models["data"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["provider"].as_str().unwrap())
            .collect();
        assert_eq!(
            providers.iter().filter(|p| **p == provider).count(),
            count,
            "{provider}"
        );
        assert!(providers.iter().all(|p| *p == provider), "{providers:?}");
    }
    // A stored OAuth login lists its provider (here Codex).
    write_auth(
        &world,
        &json!({"openai-codex": {"type":"oauth","access":"a","refresh":"r","expires":EXPIRED}}),
        0o600,
    );
    let mut p = spawn(&world, &["--mode", "rpc", "--no-session"], &[]);
    let models = p.call(json!({"type":"get_available_models"}), "m");
    let n = models["data"]["models"].as_array().unwrap().len();
    assert_eq!(n, 10);
}

#[test]
fn mistral_end_to_end() {
    let body = "data: {\"id\":\"c1\",\"model\":\"devstral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Bonjour\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\ndata: [DONE]\n\n";
    let llm = FakeLlm::start(vec![Reply::sse(body)]);
    let world = World::new();
    point(&world, json!({"mistral": {"baseUrl": llm.base_url()}}));
    let env = [("MISTRAL_API_KEY", "sk-mistral".to_string())];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "mistral",
            "--model",
            "devstral-medium-latest",
            "--no-session",
        ],
        &env,
    );
    let frames = run(&mut p, "1", "hi");
    let msg = assistant_end(&frames);
    assert_eq!(msg["content"][0]["text"], "Bonjour");
    let r = &llm.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(header(r, "authorization"), Some("Bearer sk-mistral"));
    assert!(header(r, "x-affinity").is_some());
}

/// `abort` while a refresh waits on a silent token endpoint is answered at once; nothing of the
/// login reaches the session file.
#[test]
fn abort_during_a_refresh_is_immediate_and_sessions_hold_no_tokens() {
    let llm = FakeLlm::start(vec![anthropic_text()]);
    let tokens = FakeLlm::start(vec![
        token_reply(
            json!({"access_token":"sk-ant-oat01-LATE","refresh_token":"rt-2","expires_in":3600}),
        )
        .stall_after(0, Duration::from_secs(3)),
        token_reply(
            json!({"access_token":"sk-ant-oat01-NEW","refresh_token":"rt-3","expires_in":3600}),
        ),
    ]);
    let world = World::new();
    point(&world, json!({"anthropic": {"baseUrl": llm.base_url()}}));
    write_auth(
        &world,
        &json!({"anthropic": anthropic_login("sk-ant-oat01-OLD", "rt-1", EXPIRED)}),
        0o600,
    );
    let sessions = world.dir.path().join("sessions");
    let env = [("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url())];
    let mut p = spawn(
        &world,
        &[
            "--mode",
            "rpc",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
            "--session-dir",
            sessions.to_str().unwrap(),
        ],
        &env,
    );
    p.send(json!({"id":"1","type":"prompt","message":"hi"}));
    p.recv_until(|v| v["type"] == "response" && v["id"] == "1");
    std::thread::sleep(Duration::from_millis(300));
    let t = std::time::Instant::now();
    p.send(json!({"id":"a","type":"abort"}));
    let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "a");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "abort took {:?}",
        t.elapsed()
    );
    let msg = assistant_end(&frames);
    assert_eq!(msg["stopReason"], "aborted");
    assert!(llm.requests().is_empty());
    p.recv_until(|v| v["type"] == "agent_settled");
    // Once the stalled refresh gives up (and retries), the next prompt goes through.
    p.send(json!({"id":"2","type":"prompt","message":"again"}));
    let mut frames = Vec::new();
    while !frames.iter().any(|v: &Value| v["type"] == "agent_settled") {
        match p.next_line(Duration::from_secs(30)) {
            Some(l) => frames.push(serde_json::from_str::<Value>(&l).unwrap()),
            None => break,
        }
    }
    assert_eq!(assistant_end(&frames)["stopReason"], "stop");
    let err = p.stderr.clone();
    let (_, rest) = p.finish(Duration::from_secs(5));
    let mut printed: Vec<String> = frames.iter().map(Value::to_string).collect();
    printed.extend(rest);
    printed.extend(err.lock().unwrap().iter().cloned());
    for entry in walk(&sessions) {
        printed.push(std::fs::read_to_string(entry).unwrap_or_default());
    }
    let all = printed.join("\n");
    for secret in ["sk-ant-oat01-", "rt-1", "rt-2", "rt-3"] {
        assert!(!all.contains(secret), "{secret} leaked");
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
