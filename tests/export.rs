//! The HTML export through the real binary: `--export <session.jsonl> [out.html]` (messages,
//! exit codes, the file left untouched), `export_html` over RPC with the live system prompt and
//! tools, and what the page contains for a crafted session with every kind of entry, three
//! branches and hostile text (`fixtures/export/rich.jsonl`). What a browser makes of the page is
//! in `export_browser.rs`.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use support::{World, faux, fixture};

fn run(w: &World, args: &[&str]) -> Output {
    w.command(args).output().expect("run pith")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A copy of the rich fixture in the world's tmp dir.
fn rich(w: &World) -> PathBuf {
    let p = w.tmp().join("rich.jsonl");
    fs::copy(fixture("export/rich.jsonl"), &p).expect("copy fixture");
    p
}

fn export_rich(w: &World) -> String {
    let input = rich(w);
    let out = w.tmp().join("rich.html");
    let o = run(
        w,
        &["--export", input.to_str().unwrap(), out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    fs::read_to_string(out).expect("page")
}

fn ids(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// --export

#[test]
fn cli_export_writes_the_page_says_where_and_leaves_the_file_alone() {
    let w = World::new();
    let input = rich(&w);
    let before = fs::read(&input).unwrap();
    let out = w.tmp().join("out.html");
    let o = run(
        &w,
        &["--export", input.to_str().unwrap(), out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), format!("Exported to: {}\n", out.display()));
    assert_eq!(text(&o.stderr), "");
    assert!(
        fs::read_to_string(&out)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    assert_eq!(fs::read(&input).unwrap(), before);
    // No temporary file left next to the output.
    let leftovers: Vec<_> = fs::read_dir(w.tmp())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("pith-export"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());

    // Without an output name: pi-session-<stem>.html in the cwd, named as given.
    let o = run(&w, &["--export", input.to_str().unwrap()]);
    assert_eq!(text(&o.stdout), "Exported to: pi-session-rich.html\n");
    assert!(w.cwd().join("pi-session-rich.html").is_file());
    // A relative input resolves against the cwd.
    fs::copy(&input, w.cwd().join("here.jsonl")).unwrap();
    let o = run(&w, &["--export", "here.jsonl", "here.html"]);
    assert_eq!(text(&o.stdout), "Exported to: here.html\n");
    assert!(w.cwd().join("here.html").is_file());
}

#[test]
fn cli_export_errors_are_pis() {
    let w = World::new();
    let cwd = w.cwd();
    let o = run(&w, &["--export", "missing.jsonl"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "Error: File not found: {}\n",
            cwd.join("missing.jsonl").display()
        )
    );
    assert_eq!(text(&o.stdout), "");

    fs::write(cwd.join("garbage.jsonl"), "garbage\n").unwrap();
    let o = run(&w, &["--export", "garbage.jsonl"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "Error: Session file is not a valid pi session: {}\n",
            cwd.join("garbage.jsonl").display()
        )
    );

    let o = run(&w, &["--export", w.tmp().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with("Error: "),
        "{}",
        text(&o.stderr)
    );

    // An output that cannot be written.
    let input = rich(&w);
    let o = run(
        &w,
        &[
            "--export",
            input.to_str().unwrap(),
            "/nonexistent-dir/x.html",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with(
            "Error: ENOENT: no such file or directory, open '/nonexistent-dir/x.html'"
        ),
        "{}",
        text(&o.stderr)
    );

    // An empty file is an empty session (as pi).
    fs::write(cwd.join("empty.jsonl"), "").unwrap();
    let o = run(&w, &["--export", "empty.jsonl", "empty.html"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = fs::read_to_string(cwd.join("empty.html")).unwrap();
    assert!(page.contains("This session has no entries yet."));
    assert_eq!(fs::read(cwd.join("empty.jsonl")).unwrap(), b"");

    // `--export` needs a value.
    let o = run(&w, &["--export"]);
    assert_eq!(o.status.code(), Some(2));
}

// ---------------------------------------------------------------------------------------------
// The page for the rich fixture

/// `(tag name, attributes)` of every tag in `html` (text `<` is always escaped in the page, so a
/// raw `<` starts a tag, a comment or a doctype; script bodies are skipped).
fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
    let b = html.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = html[i..].find('<') {
        i += off + 1;
        if html[i..].starts_with('!') || html[i..].starts_with('/') {
            continue;
        }
        let name_end = html[i..]
            .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .map_or(html.len(), |p| i + p);
        let name = html[i..name_end].to_ascii_lowercase();
        let mut attrs = Vec::new();
        let mut j = name_end;
        loop {
            while j < b.len() && (b[j] as char).is_whitespace() || j < b.len() && b[j] == b'/' {
                j += 1;
            }
            if j >= b.len() || b[j] == b'>' {
                break;
            }
            let a_end = html[j..]
                .find(|c: char| c.is_whitespace() || c == '=' || c == '>')
                .map_or(html.len(), |p| j + p);
            let an = html[j..a_end].to_ascii_lowercase();
            j = a_end;
            let mut val = String::new();
            if j < b.len() && b[j] == b'=' {
                j += 1;
                let q = b[j];
                let end = html[j + 1..]
                    .find(q as char)
                    .map_or(html.len(), |p| j + 1 + p);
                val = html[j + 1..end].to_string();
                j = end + 1;
            }
            attrs.push((an, val));
        }
        if name == "script" {
            i = html[j..].find("</script>").map_or(html.len(), |p| j + p);
        } else {
            i = j;
        }
        out.push((name, attrs));
    }
    out
}

fn attr<'a>(t: &'a (String, Vec<(String, String)>), name: &str) -> Option<&'a str> {
    t.1.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn every_entry_of_every_branch_is_on_the_page_once_with_the_current_branch_first() {
    let w = World::new();
    let page = export_rich(&w);
    let ids = ids(&fixture("export/rich.jsonl"));
    assert_eq!(ids.len(), 35);
    let mut last = 0;
    let current: Vec<&str> = vec![
        "a0000001", "a0000002", "a0000003", "a0000004", "a0000005", "a0000006", "a0000008",
        "a0000010", "a0000011", "a0000022", "a0000023", "a0000025", "a0000027", "a0000030",
        "a0000034", "a0000035",
    ];
    let main = &page[page.find("<main").unwrap()..];
    for id in &ids {
        let anchor = format!("id=\"e-{id}\"");
        assert_eq!(main.matches(&anchor).count(), 1, "{anchor}");
        // One sidebar row per entry.
        assert_eq!(
            page.matches(&format!("href=\"#e-{id}\" data-i=")).count(),
            1,
            "{id}"
        );
    }
    // The current branch is one run at the start of the main column, before "Other branches".
    let others = main.find("id=\"other-branches\"").unwrap();
    for id in current {
        let at = main.find(&format!("id=\"e-{id}\"")).unwrap();
        assert!(at > last && at < others, "{id} out of order");
        last = at;
    }
    for id in ["a0000012", "a0000019", "a0000020", "a0000021"] {
        assert!(
            main.find(&format!("id=\"e-{id}\"")).unwrap() > others,
            "{id}"
        );
    }
    // The leaf is marked, in the tree and on the page.
    assert!(page.contains("<li class=\"r k-asst p leaf\"><a href=\"#e-a0000035\""));
    assert_eq!(page.matches("current leaf</span>").count(), 1);
    // Three branches.
    assert!(page.contains("35 entries · 3 branches</p>"), "status line");
}

#[test]
fn the_page_is_self_contained_strict_and_escaped() {
    let w = World::new();
    let page = export_rich(&w);
    let all = tags(&page);
    // A strict policy: nothing from the network, inline style and script only by hash.
    let csp = all
        .iter()
        .find(|t| t.0 == "meta" && attr(t, "http-equiv") == Some("Content-Security-Policy"))
        .and_then(|t| attr(t, "content"))
        .expect("CSP meta");
    assert!(
        csp.starts_with("default-src 'none'; style-src 'sha256-"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe") && !csp.contains("http"), "{csp}");
    let style = &page[page.find("<style>").unwrap() + 7..page.find("</style>").unwrap()];
    let script_at = page.rfind("<script>").unwrap() + 8;
    let script = &page[script_at..page[script_at..].find("</script>").unwrap() + script_at];
    for (body, directive) in [(style, "style-src"), (script, "script-src")] {
        let digest = ring::digest::digest(&ring::digest::SHA256, body.as_bytes());
        let b64 = b64(digest.as_ref());
        assert!(
            csp.contains(&format!("{directive} 'sha256-{b64}'")),
            "{directive}: {csp}"
        );
    }
    // Exactly one executable script (the viewer) and two data blocks at most; no external
    // resource, no event handler attribute, no style attribute (the policy would refuse it).
    let scripts: Vec<_> = all.iter().filter(|t| t.0 == "script").collect();
    assert_eq!(
        scripts.iter().filter(|t| attr(t, "type").is_none()).count(),
        1
    );
    for s in &scripts {
        assert!(attr(s, "src").is_none());
        if let Some(ty) = attr(s, "type") {
            assert!(
                ty == "application/json" || ty == "application/x-ndjson",
                "{ty}"
            );
        }
    }
    for t in &all {
        assert!(
            ![
                "iframe", "object", "embed", "textarea", "form", "base", "link", "frame"
            ]
            .contains(&t.0.as_str()),
            "<{}> on the page",
            t.0
        );
        for (name, value) in &t.1 {
            assert!(!name.starts_with("on"), "<{} {name}=…>", t.0);
            assert_ne!(name, "style", "<{} style=…>", t.0);
            let v = unescape(value).to_ascii_lowercase();
            let v: String = v
                .chars()
                .filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control())
                .collect();
            if name == "src" {
                assert!(
                    v.starts_with("data:image/png;base64,"),
                    "<{} src={value}>",
                    t.0
                );
            }
            if name == "href" {
                let ok = v.starts_with('#')
                    || v.starts_with("https://")
                    || v.starts_with("data:application/x-ndjson;base64,");
                assert!(ok, "<{} href={value}>", t.0);
            }
        }
    }
    // Hostile text is text: in the title, the tree, the messages, code and tool output.
    assert!(!page.contains("<script>alert"));
    assert!(!page.contains("</textarea>"));
    assert!(page.contains("<title>Fix the lexer &lt;/title&gt;&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt; — pith session</title>"));
    assert!(page.contains("Raw HTML stays text: &lt;img src=x onerror=alert(&#39;img&#39;)&gt; &lt;/textarea&gt;&lt;script&gt;alert(&#39;md&#39;)&lt;/script&gt;"));
    assert!(page.contains(
        "Now add tests for it &lt;/textarea&gt;&lt;script&gt;alert(&#39;user&#39;)&lt;/script&gt;"
    ));
    // `javascript:`/`data:` links keep their text only; the remote image is a link, not loaded.
    assert!(page.contains(", click me, data, javascript:alert(2), and an image <a class=\"md-img-link\" href=\"https://evil.example/pixel.png\""));
    // The download link carries the session file itself.
    let dl = all
        .iter()
        .find(|t| attr(t, "id") == Some("dl"))
        .expect("download link");
    assert_eq!(
        attr(dl, "download"),
        Some("019ab5e0-7a11-7c3e-9d2f-5b0c1e2d3f40.jsonl")
    );
    let data = attr(dl, "href")
        .unwrap()
        .strip_prefix("data:application/x-ndjson;base64,")
        .unwrap();
    assert_eq!(unb64(data), fs::read(fixture("export/rich.jsonl")).unwrap());
}

#[test]
fn the_page_renders_every_kind_of_entry() {
    let w = World::new();
    let page = export_rich(&w);
    for want in [
        // Markdown, rendered at export time; code highlighted.
        "<h4>Fixed: the last token is kept</h4>",
        "<th>Input</th><th>Before</th><th>After</th>",
        "<pre class=\"code\" data-lang=\"rust\"><code><span class=\"hk\">if</span> !cur.<span class=\"hf\">is_empty</span>() {",
        "<span class=\"task done\">☑</span> flush after the loop",
        "<a href=\"https://doc.rust-lang.org/std/string/struct.String.html\" rel=\"noopener noreferrer nofollow\">the docs</a>",
        // Thinking, escaped.
        "<div class=\"thinking\"><div class=\"th-h\">Thinking</div><div class=\"th-b\">The user says the last token is dropped.",
        "Let me read the file first. &lt;script&gt;alert(&#39;thinking&#39;)&lt;/script&gt;</div>",
        // The user's image, inline.
        "<img class=\"shot\" alt=\"image\" loading=\"lazy\" src=\"data:image/png;base64,iVBORw0KGgo",
        // Tools with their results: read highlighted as Rust, edit as a diff, write, a failed bash
        // (ANSI colours removed), ls and grep.
        "<div class=\"tool t-read ok\" id=\"e-a0000007\" data-i=\"6\"><div class=\"th\"><span class=\"tn\">read</span> <code class=\"path\">src/lex.rs</code>",
        "<span class=\"hk\">pub</span> <span class=\"hk\">fn</span> <span class=\"hf\">tokens</span>",
        "<span class=\"da\">+14     if !cur.is_empty() {</span>",
        "<div class=\"tool t-write ok\" id=\"e-a0000014\"",
        "<div class=\"tool t-bash bad\" id=\"e-a0000016\"",
        "<span class=\"st\">error</span>",
        "<code>error[E0432]: unresolved import `lexer`",
        "<span class=\"tn\">grep</span> <code class=\"path\">fn tokens</code> <span class=\"dim\">in</span> <code class=\"path\">src</code>",
        // Provider error, aborted turn, context edit.
        "<p class=\"error\">Error: overloaded_error: Overloaded &lt;b&gt;retry later&lt;/b&gt;</p>",
        "<p class=\"error\">Aborted</p>",
        "Context edit: <a href=\"#e-a0000017\">a0000017</a> left out of the context",
        // Model and thinking changes, the label, the session name.
        "Model → <b>openai/gpt-5</b>",
        "Thinking level → <b>low</b>",
        "<span class=\"chip\">fix landed</span>",
        // Compaction and branch summary.
        "48,211 tokens summarized; the context keeps entries from <a href=\"#e-a0000025\">a0000025</a> on.",
        "<h4>Goal</h4>",
        "Summary of the branch left at <a href=\"#e-a0000019\">a0000019</a>",
        // The user's own shell command, the extension message and data, the usage entry.
        "<span class=\"who\">Shell</span>",
        "Remember to update <strong>CHANGELOG.md</strong>.",
        "Extension data <b>todo-state</b>",
        "Usage (cache_warm) openai/gpt-5",
        // The system prompt as the session recorded it (pi 0.86+ `role:"system"`), and its tools.
        "<span class=\"who\">System prompt</span>",
        "System prompt <span class=\"dim\">· as recorded · 4 sections</span>",
        "Tools <span class=\"dim\">· as recorded · read, bash, edit, write</span>",
        "<code>path</code> <span class=\"dim\">string · required</span> — Path to the file",
        // Tokens and cost per turn and in total.
        "<footer class=\"usage\"><span title=\"input tokens: 3,500\">↑3.5k</span> <span title=\"output tokens: 420\">↓420</span>",
        "<dt>Cost</dt><dd>$0.111 · current branch $0.063</dd>",
        "<dt>Tokens</dt><dd>↑29,300 ↓1,255 · cache read 30,700 · cache write 2,400</dd>",
        "<dt>Models</dt><dd>anthropic/claude-sonnet-4-5, openai/gpt-5</dd>",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
}

/// A session file from entry objects (a header first).
fn write_session(path: &Path, entries: &[Value]) {
    let mut text = json!({"type":"session","version":3,"id":"s-1","timestamp":"2026-11-24T10:00:00.000Z","cwd":"/w"}).to_string();
    text.push('\n');
    for e in entries {
        text.push_str(&e.to_string());
        text.push('\n');
    }
    fs::write(path, text).unwrap();
}

fn user_entry(id: &str, parent: Option<&str>, text: &str) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-24T10:00:01.000Z",
        "message":{"role":"user","content":text,"timestamp":1}})
}

#[test]
fn hostile_ids_and_fields_stay_inside_their_attributes() {
    let w = World::new();
    let input = w.tmp().join("ids.jsonl");
    let evil = "x\"><script>alert(1)</script>";
    write_session(
        &input,
        &[
            user_entry(evil, None, "hi"),
            json!({"type":"label","id":"l1","parentId":evil,"timestamp":"2026-11-24T10:00:02.000Z","targetId":evil,"label":"<b>lab</b>"}),
            json!({"type":"model_change","id":"m1","parentId":"l1","timestamp":"t","provider":"<i>p","modelId":"m\"'"}),
            json!({"type":"message","id":"a1","parentId":"m1","timestamp":"t","message":{"role":"assistant",
                "content":[{"type":"image","data":"AAAA\" onerror=\"x","mimeType":"image/png"},
                           {"type":"toolCall","id":"c1","name":"<svg onload=x>","arguments":{"<k>":"</script>"}}],
                "api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
                "stopReason":"stop","timestamp":2}}),
            json!({"type":"future_entry","id":"f1","parentId":"a1","timestamp":"t","payload":"</script><script>alert(2)</script>"}),
        ],
    );
    let out = w.tmp().join("ids.html");
    let o = run(
        &w,
        &["--export", input.to_str().unwrap(), out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = fs::read_to_string(&out).unwrap();
    assert!(!page.contains("<script>alert"), "raw script on the page");
    assert!(!page.contains("<svg") && !page.contains("<b>lab") && !page.contains("<i>p"));
    assert!(page.contains("id=\"e-x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""));
    // An image whose data is not plain base64 is not inlined.
    assert!(!page.contains("onerror"), "image data reached an attribute");
    assert!(page.contains("[image: image/png,"));
    // The unknown entry is shown as JSON, escaped.
    assert!(page.contains("Entry of type <b>future_entry</b>"));
    for t in tags(&page) {
        for (name, _) in &t.1 {
            assert!(!name.starts_with("on"), "<{} {name}>", t.0);
        }
    }
}

#[test]
fn long_texts_are_bounded_and_large_sessions_download_through_the_script() {
    let w = World::new();
    let input = w.tmp().join("big.jsonl");
    // One 600 KB message (shown up to 256 KiB) and enough others to pass 1 MiB of session.
    let huge = "word ".repeat(120_000);
    let mut entries = vec![user_entry("u0", None, &huge)];
    let mut parent = "u0".to_string();
    for k in 1..=6 {
        let id = format!("u{k}");
        entries.push(user_entry(
            &id,
            Some(&parent),
            &format!("{} <tag>", "filler ".repeat(20_000)),
        ));
        parent = id;
    }
    write_session(&input, &entries);
    assert!(fs::metadata(&input).unwrap().len() > 1024 * 1024);
    let out = w.tmp().join("big.html");
    let o = run(
        &w,
        &["--export", input.to_str().unwrap(), out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = fs::read_to_string(&out).unwrap();
    assert!(page.contains("more bytes not shown (they are in the JSONL download)"));
    assert!(page.contains(
        "<a class=\"btn\" id=\"dl\" download=\"s-1.jsonl\" href=\"#pith-jsonl\" data-blob=\"1\""
    ));
    // The copy for the download: every line, `<` written as \u003c so nothing ends the block.
    let start = page
        .find("<script type=\"application/x-ndjson\" id=\"pith-jsonl\">")
        .unwrap();
    let block = &page[start..];
    let block = &block[block.find('>').unwrap() + 1..block.find("</script>").unwrap()];
    assert!(!block.contains('<'));
    let original: Vec<Value> = fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let copy: Vec<Value> = block
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(copy, original);
}

// ---------------------------------------------------------------------------------------------
// export_html over RPC

#[test]
fn rpc_export_carries_the_live_system_prompt_and_tools() {
    let w = World::new();
    let sessions = w.tmp().join("sessions");
    let mut p = w.spawn(&faux(&["--session-dir", sessions.to_str().unwrap()]));
    p.send(json!({"id":"p","type":"prompt","message":"Hello **there** <script>x</script>"}));
    p.recv_until(|v| v["type"] == "agent_end");
    let out = w.tmp().join("live.html");
    let r = p.call(
        json!({"type":"export_html","outputPath":out.to_str().unwrap()}),
        "e",
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"], json!({"path": out.to_str().unwrap()}));
    let page = fs::read_to_string(&out).unwrap();
    assert!(page.contains("<details class=\"sys\"><summary>System prompt <span class=\"dim\">· "));
    assert!(page.contains("You are an expert coding assistant"));
    assert!(page.contains("Tools <span class=\"dim\">· read, bash, edit, write</span>"));
    assert!(page.contains("<dt><code>bash</code></dt>"));
    assert!(page.contains("Hello <strong>there</strong> &lt;script&gt;x&lt;/script&gt;"));
    assert!(page.contains("This is the faux provider."));
}

// ---------------------------------------------------------------------------------------------
// base64 for the checks above

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64(data: &[u8]) -> String {
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(B64[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn unb64(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let Some(v) = B64.iter().position(|&x| x == c) else {
            continue;
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
