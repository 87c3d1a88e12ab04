//! Every input the fuzzers (`fuzz/`, `make fuzz`) found crashing or hanging, replayed through
//! the same harness (`src/harness.rs`) in `make test`: `fixtures/fuzz/regressions/<target>/`.
//! The seed corpora go through too, so a harness that stops working fails here first.

use std::path::{Path, PathBuf};

fn harness(target: &str) -> fn(&[u8]) {
    match target {
        "rpc_input" => pith::harness::rpc_input,
        "sse" => pith::harness::sse,
        "provider_anthropic" => |d| pith::harness::provider_stream("anthropic-messages", d),
        "provider_openai_completions" => {
            |d| pith::harness::provider_stream("openai-completions", d)
        }
        "provider_openai_responses" => |d| pith::harness::provider_stream("openai-responses", d),
        "provider_google" => |d| pith::harness::provider_stream("google-generative-ai", d),
        "provider_mistral" => |d| pith::harness::provider_stream("mistral-conversations", d),
        "provider_codex" => |d| pith::harness::provider_stream("openai-codex-responses", d),
        "provider_bedrock" => pith::harness::provider_bedrock,
        "resource_file" => pith::harness::resource_file,
        "session_file" => pith::harness::session_file,
        "export_html" => pith::harness::export_html,
        "config_files" => pith::harness::config_files,
        "tool_arguments" => pith::harness::tool_arguments,
        "error_body" => pith::harness::error_body,
        "extension_message" => pith::harness::extension_message,
        "mcp_message" => pith::harness::mcp_message,
        "bash_split" => pith::harness::bash_split,
        "permission_rule" => pith::harness::permission_rule,
        other => panic!("no harness for fuzz target {other}"),
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Run `target`'s harness on every file of `dirs`; returns how many ran.
fn replay(target: &str, dirs: &[&str]) -> usize {
    let run = harness(target);
    let mut n = 0;
    for d in dirs {
        for f in files(&fixtures().join(d)) {
            let data = std::fs::read(&f).expect("read input");
            // The harness panics on a violated property; name the input when it does.
            let result = std::panic::catch_unwind(|| run(&data));
            assert!(result.is_ok(), "{target} fails on {}", f.display());
            n += 1;
        }
    }
    n
}

#[test]
fn every_regression_input_passes() {
    let root = fixtures().join("fuzz/regressions");
    let mut targets: Vec<String> = std::fs::read_dir(&root)
        .expect("fixtures/fuzz/regressions")
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    targets.sort();
    assert!(!targets.is_empty());
    for target in targets {
        let rel = format!("fuzz/regressions/{target}");
        assert!(replay(&target, &[&rel]) > 0, "{rel} is empty");
    }
}

#[test]
fn the_seed_corpora_pass() {
    let sse = ["anthropic", "openai", "google"];
    assert!(replay("rpc_input", &["fuzz/rpc_input"]) > 0);
    assert!(replay("sse", &sse) > 0);
    for t in [
        "provider_anthropic",
        "provider_openai_completions",
        "provider_openai_responses",
        "provider_google",
    ] {
        assert!(replay(t, &sse) > 0);
    }
    assert!(replay("provider_mistral", &sse) > 0);
    assert!(replay("provider_codex", &sse) > 0);
    assert!(replay("provider_bedrock", &["fuzz/provider_bedrock"]) > 0);
    assert!(replay("resource_file", &["fuzz/resource_file"]) > 0);
    // The 839 frontmatter cases recorded from pi.
    let cases = std::fs::read_to_string(fixtures().join("skills/frontmatter_pi_0.73.1.json"))
        .expect("frontmatter cases");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&cases).expect("json");
    assert!(cases.len() > 800);
    for c in &cases {
        let input = c["input"].as_str().expect("input");
        pith::harness::resource_file(input.as_bytes());
    }
    assert!(replay("session_file", &["sessions"]) > 0);
    assert!(replay("export_html", &["sessions", "fuzz/export_html"]) > 1);
    assert!(replay("config_files", &["fuzz/config_files"]) > 0);
    assert!(replay("tool_arguments", &["fuzz/tool_arguments"]) > 0);
    assert!(replay("error_body", &["fuzz/error_body"]) > 0);
    assert!(replay("extension_message", &["fuzz/extension_message"]) > 0);
    assert!(replay("mcp_message", &["fuzz/mcp_message"]) > 0);
    assert!(replay("bash_split", &["fuzz/bash_split"]) > 0);
    assert!(replay("permission_rule", &["fuzz/permission_rule"]) > 0);
}
