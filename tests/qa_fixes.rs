//! Findings of a QA pass, each driven through the real binary: pith's lock on auth.json is
//! released however pith ends, ... (one section per finding).

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_llm::{FakeLlm, Reply};
use support::{Pith, World};

/// Polls `cond` until it holds (a hang guard, not a timing assertion).
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + support::TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// C: the OAuth refresh lock is always released

/// The token endpoint answers with headers and then nothing: pith's refresh holds pi's lock on
/// auth.json (the `auth.json.lock` directory) while it waits. The host aborts and goes away
/// (stdin closes): pith ends and removes the lock on its way out, so pi and other pith
/// processes do not wait for an abandoned lock to turn stale.
#[test]
fn the_auth_lock_is_released_when_pith_exits_during_a_refresh() {
    let tokens = FakeLlm::start(vec![
        Reply {
            headers: vec![("content-type".into(), "application/json".into())],
            ..Reply::sse(r#"{"access_token":"sk-ant-oat01-LATE","expires_in":3600}"#)
        }
        .stall_after(0, Duration::from_secs(60)),
    ]);
    let llm = FakeLlm::start(vec![]);
    let w = World::new();
    w.write_agent_file(
        "models.json",
        &json!({"providers":{"anthropic":{"baseUrl":llm.base_url()}}}).to_string(),
    );
    w.write_agent_file(
        "auth.json",
        &json!({"anthropic":{"type":"oauth","refresh":"rt-1","access":"sk-ant-oat01-OLD","expires":1000}})
            .to_string(),
    );
    let lock = w.agent_dir().join("auth.json.lock");
    let mut cmd = w.command(&[
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
    ]);
    cmd.env("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url());
    let mut p = Pith::spawn_cmd(cmd);
    let r = p.call(json!({"type":"prompt","message":"hi"}), "p");
    assert_eq!(r["success"], true, "{r}");
    eventually("the refresh takes the lock", || lock.is_dir());
    let a = p.call(json!({"type":"abort"}), "a");
    assert_eq!(
        a,
        json!({"id":"a","type":"response","command":"abort","success":true})
    );
    p.recv_until(|v| v["type"] == "agent_settled");
    // The refresh's worker still waits for the token endpoint (15 s per read), lock in hand.
    p.close_stdin();
    let status = p.wait(support::TIMEOUT);
    assert!(status.success(), "{status:?}");
    assert!(!lock.exists(), "the lock was left behind");
    assert_eq!(tokens.requests().len(), 1);
    assert!(llm.requests().is_empty());
}
