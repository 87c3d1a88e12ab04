//! Regressions of the security probe's findings (issue 22), through the real binary:
//! 1. an untrusted checkout starts none of its own programs (project extensions, `.mcp.json`
//!    servers) — with `--no-approve` in every mode, and under `--compat 0.87` in an undecided
//!    project — and a trusted one still does;
//! 4. an extension tool's result is bounded like an MCP tool's;
//! 5. an OAuth refresh keeps auth.json 0600 and no token endpoint echoes a secret onto stdout or
//!    into the session file;
//! 6. the HTML export keeps no `javascript:` link.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::frames::{settle, tool_end};
use support::mcp::have_python;
use support::{Pith, World};

/// An executable `/bin/sh` script at `path`.
fn script_at(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `--mode rpc` on the faux provider with `script`, then `extra`.
fn spawn_faux(world: &World, script: &str, extra: &[&str]) -> Pith {
    world.spawn_faux(script, extra)
}

// ---- 1. no project code before trust -------------------------------------------------------

/// A hostile checkout in `w.cwd()`: `.pi/settings.json` names `.pi/ext.sh` (an extension that
/// registers `/projcmd`) unless `mcp_only`, and `.mcp.json` names `.pi/mcp.sh` (the fake MCP
/// server). Each program writes its marker file in tmp when it runs; returns the two markers.
fn hostile_checkout(w: &World, mcp_only: bool) -> (PathBuf, PathBuf) {
    let ext_marker = w.tmp().join("ext-ran");
    let mcp_marker = w.tmp().join("mcp-ran");
    let pi = w.cwd().join(".pi");
    std::fs::create_dir_all(&pi).unwrap();
    if !mcp_only {
        script_at(
            &pi.join("ext.sh"),
            &format!(
                "echo ran > '{}'\nread hello\necho '{{\"type\":\"register\",\"protocol\":1,\"commands\":[{{\"name\":\"projcmd\"}}]}}'\nwhile read l; do :; done\n",
                ext_marker.display()
            ),
        );
        std::fs::write(pi.join("settings.json"), r#"{"extensions":["ext.sh"]}"#).unwrap();
    }
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/fake_server.py");
    let mcp = w.tmp().join("mcp.sh");
    script_at(
        &mcp,
        &format!(
            "echo ran > '{}'\nexec python3 '{}'\n",
            mcp_marker.display(),
            server.display()
        ),
    );
    std::fs::write(
        w.cwd().join(".mcp.json"),
        json!({"mcpServers":{"proj":{"command":mcp}}}).to_string(),
    )
    .unwrap();
    (ext_marker, mcp_marker)
}

const CALL_PROJECT_MCP: &str = "{\"toolCalls\":[{\"name\":\"mcp__proj__echo\",\"arguments\":{\"text\":\"from .mcp.json\"}}]}\n{\"text\":\"done\"}\n";

/// Runs pith with `extra` in a hostile checkout and returns (command names the host sees, the
/// text of the model's call of the project's MCP tool, ext marker written, mcp marker written).
fn probe(w: &World, mcp_only: bool, extra: &[&str]) -> (Vec<String>, String, bool, bool) {
    let (ext_marker, mcp_marker) = hostile_checkout(w, mcp_only);
    let _ = std::fs::remove_file(&ext_marker);
    let _ = std::fs::remove_file(&mcp_marker);
    let mut p = spawn_faux(w, CALL_PROJECT_MCP, extra);
    // Answered once every extension has registered.
    let r = p.call(json!({"type":"get_commands"}), "c");
    let names = r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    // A prompt waits for the MCP servers' start.
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    let frames = settle(&mut p);
    let end = frames
        .iter()
        .find(|f| f["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {frames:#?}"));
    let text = end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
    (
        text_names(names),
        text,
        ext_marker.exists(),
        mcp_marker.exists(),
    )
}

fn text_names(mut names: Vec<String>) -> Vec<String> {
    // pi 0.87.1's built-in inline extension command is always there under 0.87.
    names.retain(|n| n != "llama");
    names
}

const NOT_FOUND: &str = "Tool mcp__proj__echo not found";

#[test]
fn no_approve_starts_no_project_program_in_any_mode() {
    if !have_python() {
        eprintln!("SKIPPED: python3 not found (the fake MCP server needs it)");
        return;
    }
    for mode in [&[][..], &["--compat", "0.87"][..]] {
        let w = World::new();
        let mut args = mode.to_vec();
        args.push("--no-approve");
        let (names, text, ext_ran, mcp_ran) = probe(&w, false, &args);
        assert_eq!(names, Vec::<String>::new(), "{mode:?}");
        assert_eq!(text, NOT_FOUND, "{mode:?}");
        assert!(!ext_ran, "project extension ran with --no-approve {mode:?}");
        assert!(
            !mcp_ran,
            "project MCP server ran with --no-approve {mode:?}"
        );
    }
}

#[test]
fn an_undecided_project_under_087_starts_nothing() {
    if !have_python() {
        eprintln!("SKIPPED: python3 not found (the fake MCP server needs it)");
        return;
    }
    // Project settings naming an extension, and a `.mcp.json`.
    let w = World::new();
    let (names, text, ext_ran, mcp_ran) = probe(&w, false, &["--compat", "0.87"]);
    assert_eq!(names, Vec::<String>::new());
    assert_eq!(text, NOT_FOUND);
    assert!(!ext_ran && !mcp_ran);
    // A checkout with only `.mcp.json`.
    let w = World::new();
    let (names, text, ext_ran, mcp_ran) = probe(&w, true, &["--compat", "0.87"]);
    assert_eq!(names, Vec::<String>::new());
    assert_eq!(text, NOT_FOUND);
    assert!(!ext_ran && !mcp_ran);
}

#[test]
fn a_trusted_project_still_starts_its_programs() {
    if !have_python() {
        eprintln!("SKIPPED: python3 not found (the fake MCP server needs it)");
        return;
    }
    let trusted = vec!["projcmd".to_string()];
    // --approve, in both modes.
    for mode in [&[][..], &["--compat", "0.87"][..]] {
        let w = World::new();
        let mut args = mode.to_vec();
        args.push("--approve");
        let (names, text, ext_ran, mcp_ran) = probe(&w, false, &args);
        assert_eq!(names, trusted, "{mode:?}");
        assert_eq!(text, "from .mcp.json", "{mode:?}");
        assert!(ext_ran && mcp_ran, "{mode:?}");
    }
    // pi 0.73.1 had no project trust: without a flag everything loads.
    let w = World::new();
    let (names, text, ext_ran, mcp_ran) = probe(&w, false, &[]);
    assert_eq!(names, trusted);
    assert_eq!(text, "from .mcp.json");
    assert!(ext_ran && mcp_ran);
    // Under 0.87 a `true` in trust.json decides, for a checkout with only `.mcp.json` too.
    for mcp_only in [false, true] {
        let w = World::new();
        let key = std::fs::canonicalize(w.cwd()).unwrap();
        w.write_agent_file(
            "trust.json",
            &json!({key.to_string_lossy(): true}).to_string(),
        );
        let (names, text, ext_ran, mcp_ran) = probe(&w, mcp_only, &["--compat", "0.87"]);
        let expected: Vec<String> = if mcp_only { vec![] } else { trusted.clone() };
        assert_eq!(names, expected);
        assert_eq!(text, "from .mcp.json");
        assert_eq!((ext_ran, mcp_ran), (!mcp_only, true));
    }
}

// ---- 4. extension tool results are bounded -------------------------------------------------

/// Lines `line 1` … `line N` of the big result.
const BIG_LINES: usize = 1_200_000;

#[test]
fn a_12_mb_extension_tool_result_is_cut_like_an_mcp_result() {
    use support::anthropic::{Sse, text, tool_call};
    if !have_python() {
        eprintln!("SKIPPED: python3 not found (the fake extension needs it)");
        return;
    }
    let ext_dir = tempfile::tempdir().unwrap();
    let ext = ext_dir.path().join("big.py");
    std::fs::write(
        &ext,
        format!(
            r#"#!/usr/bin/env python3
import json, sys
sys.stdin.readline()
print(json.dumps({{"type":"register","protocol":1,"tools":[{{"name":"big","description":"A big result.","parameters":{{"type":"object","properties":{{}}}}}}]}}), flush=True)
for line in sys.stdin:
    m = json.loads(line)
    if m.get("type") == "execute_tool":
        big = "\n".join("line %d" % n for n in range(1, {BIG_LINES} + 1))
        print(json.dumps({{"type":"result","id":m["id"],"result":{{"content":[{{"type":"text","text":big}}],"details":{{"pad":"x" * 300000}}}}}}), flush=True)
    elif "id" in m:
        print(json.dumps({{"type":"result","id":m["id"],"result":{{}}}}), flush=True)
"#
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ext = ext.to_string_lossy().to_string();
    let total_bytes: usize = (1..=BIG_LINES)
        .map(|n| format!("line {n}").len() + 1)
        .sum::<usize>()
        - 1;
    assert!(total_bytes > 12 * 1024 * 1024);
    for mode in [&[][..], &["--compat", "0.87"][..]] {
        let calls = Sse::numbered(1).reply(&[tool_call("t1", "big", &["{}"])]);
        let done = Sse::numbered(2).reply(&[text(&["done"])]);
        let (w, llm) = support::fake_world(vec![calls, done]);
        let mut args = support::fake_rpc(&["-e", &ext]);
        args.extend_from_slice(mode);
        let mut p = w.spawn(&args);
        p.send(json!({"id":"p","type":"prompt","message":"go"}));
        let frames = settle(&mut p);
        let lines: Vec<String> = (1..=2000).map(|n| format!("line {n}")).collect();
        let cut = format!(
            "{}\n\n[Showing lines 1-2000 of {BIG_LINES} of the extension tool's output (2000 lines limit); the rest was cut]",
            lines.join("\n")
        );
        let end = tool_end(&frames, "t1");
        assert_eq!(end["isError"], false);
        assert_eq!(
            end["result"]["content"],
            json!([{"type":"text","text":cut}])
        );
        assert_eq!(
            end["result"]["details"],
            json!({"detailsOmitted":{"bytes":300_010,"maxBytes":256 * 1024},
                "truncation":{"content":lines.join("\n"),"truncated":true,"truncatedBy":"lines",
                    "totalLines":BIG_LINES,"totalBytes":total_bytes,"outputLines":2000,
                    "outputBytes":lines.join("\n").len(),"lastLinePartial":false,
                    "firstLineExceedsLimit":false,"maxLines":2000,"maxBytes":51200}})
        );
        // The next request carries the cut text only.
        let reqs = llm.requests();
        let second = &reqs[reqs.len() - 1].body;
        assert!(second.len() < 200 * 1024, "{} bytes", second.len());
        assert!(second.contains(
            "line 2000\\n\\n[Showing lines 1-2000 of 1200000 of the extension tool's output"
        ));
        assert!(!second.contains("line 2001"));
        let (status, _) = p.finish(support::TIMEOUT);
        assert!(status.success());
    }
}

// ---- 5. OAuth refresh: auth.json 0600, no secret in messages ------------------------------

/// A world whose auth.json (mode `auth_mode`) holds an expired Anthropic login.
fn anthropic_oauth_world(auth_mode: u32) -> World {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let auth = json!({"anthropic":{"type":"oauth","refresh":"rt-ECHOED-SECRET-123",
        "access":"sk-ant-oat01-OLD-SECRET","expires":1000}});
    let p = w.agent_dir().join("auth.json");
    std::fs::write(&p, serde_json::to_string_pretty(&auth).unwrap()).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(auth_mode)).unwrap();
    w
}

/// pith on Anthropic at `llm_url`, its token endpoint `tokens`, sessions in tmp/sessions.
fn oauth_pith(
    w: &World,
    tokens: &support::fake_llm::FakeLlm,
    llm_url: &str,
    mode: &[&str],
) -> Pith {
    w.write_agent_file(
        "models.json",
        &json!({"providers":{"anthropic":{"baseUrl":llm_url}}}).to_string(),
    );
    let sessions = w.tmp().join("sessions");
    let sessions = sessions.to_string_lossy().to_string();
    let mut args = vec![
        "--mode",
        "rpc",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--session-dir",
        &sessions,
    ];
    args.extend_from_slice(mode);
    let mut cmd = w.command(&args);
    cmd.env("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url());
    Pith::spawn_cmd(cmd)
}

fn all_session_text(w: &World) -> String {
    let mut out = String::new();
    if let Ok(rd) = std::fs::read_dir(w.tmp().join("sessions")) {
        for e in rd.flatten() {
            out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    out
}

#[test]
fn a_token_endpoint_echoing_the_refresh_token_leaks_it_nowhere() {
    use support::fake_llm::{FakeLlm, Reply};
    let secret = "rt-ECHOED-SECRET-123";
    let bodies = [
        (
            format!(
                r#"{{"error":"invalid_grant","error_description":"refresh token {secret} is not valid","echo":{{"refresh_token":"{secret}"}}}}"#
            ),
            "Failed to refresh OAuth token for anthropic: token endpoint answered 400: invalid_grant: refresh token [redacted] is not valid",
        ),
        (
            format!("grant_type=refresh_token&refresh_token={secret}"),
            "Failed to refresh OAuth token for anthropic: token endpoint answered 400",
        ),
    ];
    for mode in [&[][..], &["--compat", "0.87"][..]] {
        for (body, expected) in &bodies {
            let tokens = FakeLlm::start(vec![Reply::error(400, body)]);
            let w = anthropic_oauth_world(0o600);
            let mut p = oauth_pith(&w, &tokens, "http://127.0.0.1:9", mode);
            p.call(json!({"type":"set_auto_retry","enabled":false}), "r");
            p.send(json!({"id":"p","type":"prompt","message":"hi"}));
            let frames = settle(&mut p);
            let end = frames
                .iter()
                .rev()
                .find(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
                .expect("assistant message_end");
            assert_eq!(end["message"]["stopReason"], "error");
            assert_eq!(end["message"]["errorMessage"], *expected, "{mode:?}");
            assert_eq!(tokens.requests().len(), 1);
            let err = p.stderr.clone();
            let (_, rest) = p.finish(support::TIMEOUT);
            let mut printed: Vec<String> = p_seen_text(&frames);
            printed.extend(rest);
            printed.extend(err.lock().unwrap().iter().cloned());
            let printed = printed.join("\n");
            let session = all_session_text(&w);
            assert!(session.contains("token endpoint answered 400"), "{session}");
            for s in [secret, "sk-ant-oat01-OLD-SECRET"] {
                assert!(!printed.contains(s), "{s} printed ({mode:?})");
                assert!(!session.contains(s), "{s} in the session file ({mode:?})");
            }
        }
    }
}

fn p_seen_text(frames: &[Value]) -> Vec<String> {
    frames.iter().map(Value::to_string).collect()
}

#[test]
fn a_refresh_writes_auth_json_0600_even_over_0644() {
    use std::os::unix::fs::PermissionsExt;
    use support::fake_llm::{FakeLlm, Reply};
    let text_sse = std::fs::read_to_string(support::fixture("anthropic/text.sse")).unwrap();
    for mode in [&[][..], &["--compat", "0.87"][..]] {
        let llm = FakeLlm::start(vec![Reply::sse(text_sse.clone())]);
        let tokens = FakeLlm::start(vec![Reply {
            headers: vec![("content-type".into(), "application/json".into())],
            ..Reply::sse(
                json!({"access_token":"sk-ant-oat01-NEW","refresh_token":"rt-NEW","expires_in":3600})
                    .to_string(),
            )
        }]);
        let w = anthropic_oauth_world(0o644);
        let mut p = oauth_pith(&w, &tokens, &llm.base_url(), mode);
        p.send(json!({"id":"p","type":"prompt","message":"hi"}));
        let frames = settle(&mut p);
        assert!(
            frames
                .iter()
                .any(|f| f["type"] == "message_end" && f["message"]["stopReason"] == "stop"),
            "{frames:#?}"
        );
        p.finish(support::TIMEOUT);
        let path = w.agent_dir().join("auth.json");
        let auth: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(auth["anthropic"]["refresh"], "rt-NEW");
        let m = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600, "{mode:?}");
    }
}

// ---- 6. the HTML export keeps no dangerous link ---------------------------------------------

/// Every `href`/`src`/`action`/`formaction`/`xlink:href` attribute value of `html`, its
/// entities decoded (the few the page writes and numeric ones), as a browser would read it.
fn url_attributes(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = html.to_ascii_lowercase();
    for name in ["href=", "src=", "action=", "formaction="] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(name) {
            let at = from + i + name.len();
            from = at;
            let Some(q) = html[at..].chars().next() else {
                break;
            };
            let value = if q == '"' || q == '\'' {
                let end = html[at + 1..].find(q).map_or(html.len(), |e| at + 1 + e);
                &html[at + 1..end]
            } else {
                let end = html[at..]
                    .find(|c: char| c.is_whitespace() || c == '>')
                    .map_or(html.len(), |e| at + e);
                &html[at..end]
            };
            out.push(decode_entities(value));
        }
    }
    out
}

fn decode_entities(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|e| *e < 12) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let ent = &rest[1..end];
        let c = match ent {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "colon" => Some(':'),
            "Tab" => Some('\t'),
            "NewLine" => Some('\n'),
            _ => ent
                .strip_prefix("#x")
                .or_else(|| ent.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| ent.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The scheme a browser sees in `url` (ASCII whitespace and controls removed, lowercase).
fn scheme(url: &str) -> String {
    let cleaned: String = url
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control())
        .collect::<String>()
        .to_ascii_lowercase();
    match cleaned.find(':') {
        Some(i)
            if cleaned[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) =>
        {
            cleaned[..i].to_string()
        }
        _ => String::new(),
    }
}

#[test]
fn the_export_keeps_no_javascript_link() {
    let variants = [
        r#"<a href="javascript:alert(1)">raw-link-1</a>"#,
        r#"<a href="JaVaScRiPt:alert(2)">raw-link-2</a>"#,
        r#"<a href="java&#x09;script:alert(3)">raw-link-3</a>"#,
        r#"<a href=" javascript:alert(4)">raw-link-4</a>"#,
        r#"<a href='vbscript:msgbox(5)'>raw-link-5</a>"#,
        r#"<a href="data:text/html,<script>alert(6)</script>">raw-link-6</a>"#,
        r#"<img src="javascript:alert(7)"> <iframe src="data:text/html,x"></iframe>"#,
        "[md-link-1](javascript:alert(11))",
        "[md-link-2](JaVaScRiPt:alert(12))",
        "[md-link-3](java&#x09;script:alert(13))",
        "[md-link-4](<java script:alert(14)>)",
        "[md-link-5](vbscript:msgbox(15))",
        "[md-link-6](data:text/html;base64,PHNjcmlwdD4=)",
        "![md-img](javascript:alert(17))",
        "<javascript:alert(18)>",
        "[md-ref][r]\n\n[r]: javascript:alert(19)",
    ];
    let text = variants.join("\n\n");
    let w = World::new();
    let input = w.tmp().join("links.jsonl");
    let header = json!({"type":"session","version":3,"id":"s-1","timestamp":"2026-11-24T10:00:00.000Z","cwd":"/w"});
    let usage = json!({"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,
        "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}});
    let entries = [
        json!({"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-24T10:00:01.000Z",
            "message":{"role":"user","content":text,"timestamp":1}}),
        json!({"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-24T10:00:02.000Z",
            "message":{"role":"assistant","content":[{"type":"thinking","thinking":text},{"type":"text","text":text},
                {"type":"toolCall","id":"c1","name":"read","arguments":{"path":text}}],
            "api":"a","provider":"p","model":"m","usage":usage,"stopReason":"toolUse","timestamp":2}}),
        json!({"type":"message","id":"t1","parentId":"a1","timestamp":"2026-11-24T10:00:03.000Z",
            "message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":text}],
            "isError":false,"timestamp":3}}),
        json!({"type":"custom_message","id":"m1","parentId":"t1","timestamp":"2026-11-24T10:00:04.000Z",
            "customType":"note","content":text,"display":true}),
        json!({"type":"branch_summary","id":"b1","parentId":"m1","timestamp":"2026-11-24T10:00:05.000Z",
            "fromId":"u1","summary":text}),
        json!({"type":"compaction","id":"k1","parentId":"b1","timestamp":"2026-11-24T10:00:06.000Z",
            "summary":text,"firstKeptEntryId":"u1","tokensBefore":10}),
        json!({"type":"message","id":"x1","parentId":"k1","timestamp":"2026-11-24T10:00:07.000Z",
            "message":{"role":"bashExecution","command":text,"output":text,"exitCode":0,"cancelled":false,
            "truncated":false,"timestamp":7}}),
    ];
    let mut file = header.to_string();
    for e in &entries {
        file.push('\n');
        file.push_str(&e.to_string());
    }
    file.push('\n');
    std::fs::write(&input, file).unwrap();
    let out = w.tmp().join("links.html");
    let o = w
        .command(&["--export", input.to_str().unwrap(), out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&out).unwrap();
    for url in url_attributes(&page) {
        let s = scheme(&url);
        assert!(
            s.is_empty()
                || s == "http"
                || s == "https"
                || s == "mailto"
                // Inlined images, and the page's own download of the session file.
                || (s == "data"
                    && (url.starts_with("data:image/")
                        || url.starts_with("data:application/x-ndjson;base64,"))),
            "dangerous URL attribute on the page: {}",
            &url[..url.len().min(200)]
        );
    }
    // No raw markup of the message reaches the page as markup.
    let lower = page.to_ascii_lowercase();
    for raw in [
        "<a href=\"javascript",
        "<a href='vbscript",
        "<iframe",
        "<img src=\"javascript",
    ] {
        assert!(!lower.contains(raw), "{raw} on the page");
    }
    // The visible text stays.
    for label in [
        "raw-link-1",
        "raw-link-6",
        "md-link-1",
        "md-link-6",
        "md-ref",
    ] {
        assert!(page.contains(label), "{label} missing");
    }
}

/// `--no-approve` ignores every project file pith reads (settings, SYSTEM.md,
/// APPEND_SYSTEM.md, skills, prompt templates) in every mode; context files (`AGENTS.md`) are
/// still read, as pi reads them whatever the trust. `--approve` reads them all.
#[test]
fn no_approve_ignores_every_project_file_but_context_files() {
    use support::anthropic::{Sse, text};
    for mode in [&[][..], &["--compat", "0.87"][..]] {
        for approve in ["--no-approve", "--approve"] {
            let (w, llm) = support::fake_world(vec![Sse::numbered(1).reply(&[text(&["ok"])])]);
            let pi = w.cwd().join(".pi");
            std::fs::create_dir_all(pi.join("skills/proj-skill")).unwrap();
            std::fs::create_dir_all(pi.join("prompts")).unwrap();
            std::fs::write(pi.join("SYSTEM.md"), "PROJECT-SYSTEM-MD").unwrap();
            std::fs::write(pi.join("APPEND_SYSTEM.md"), "PROJECT-APPEND-MD").unwrap();
            std::fs::write(
                pi.join("skills/proj-skill/SKILL.md"),
                "---\nname: proj-skill\ndescription: PROJECT-SKILL\n---\nbody\n",
            )
            .unwrap();
            std::fs::write(
                pi.join("prompts/projtpl.md"),
                "---\ndescription: PROJECT-TEMPLATE\n---\nx\n",
            )
            .unwrap();
            std::fs::write(pi.join("settings.json"), r#"{"steeringMode":"all"}"#).unwrap();
            std::fs::write(w.cwd().join("AGENTS.md"), "PROJECT-AGENTS-MD").unwrap();
            let mut args = support::fake_rpc(&[approve]);
            args.extend_from_slice(mode);
            let mut p = w.spawn(&args);
            let state = p.call(json!({"type":"get_state"}), "s");
            let commands = p.call(json!({"type":"get_commands"}), "c");
            let names: Vec<&str> = commands["data"]["commands"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["name"].as_str())
                .filter(|n| *n != "llama")
                .collect();
            p.send(json!({"id":"p","type":"prompt","message":"hi"}));
            settle(&mut p);
            let body = llm.requests()[0].body.clone();
            p.finish(support::TIMEOUT);
            let trusted = approve == "--approve";
            let ctx = format!("{mode:?} {approve}");
            assert_eq!(
                state["data"]["steeringMode"],
                if trusted { "all" } else { "one-at-a-time" },
                "{ctx}"
            );
            let expected: Vec<&str> = if trusted {
                vec!["projtpl", "skill:proj-skill"]
            } else {
                vec![]
            };
            let mut got = names.clone();
            got.sort();
            assert_eq!(got, expected, "{ctx}");
            for marker in ["PROJECT-SYSTEM-MD", "PROJECT-APPEND-MD", "PROJECT-SKILL"] {
                assert_eq!(body.contains(marker), trusted, "{marker} {ctx}");
            }
            assert!(body.contains("PROJECT-AGENTS-MD"), "{ctx}");
        }
    }
}
