//! The export page: a session's entries → HTML bytes (pure; no file access, no clock).
//!
//! A first pass ([`super::scan`]) collects what the page's top needs (the sidebar rows, totals,
//! the tool calls that tool results answer); a second pass writes every entry in [`order`]'s layout
//! straight to the output, one entry at a time, so memory follows the largest entry, not the
//! session. Everything from the session goes through [`escape_into`], [`markdown`] or
//! [`highlight`] on its way into the markup.
//!
//! The page works without script: every branch is on it (the current one first, marked), the
//! sidebar's entries are links, filters and toggles are CSS driven by form controls, the JSONL is
//! a `data:` link. The script (viewer.js) adds showing one branch at a time, navigation by the
//! tree, search, keyboard shortcuts and the download of sessions too large for a `data:` link.

use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::Value;

use crate::message::{
    AgentMessage, AssistantMessage, Content, ImageContent, StopReason, UserContent,
};
use crate::session::entry::{Entry, EntryKind};
use crate::session::{Session, ids, store};

use super::highlight::{self, Lang};
use super::html::{
    base64_into, bounded, compact_count, dollars, escape, escape_into, grouped, is_base64,
    is_inline_image_mime, strip_ansi,
};
use super::markdown;
use super::order::{self, Layout, Step};
use super::scan::{RowKind, Scan, Totals, skill_block, system_message};

/// What the live agent adds to a session's export: the system prompt and tools it runs with.
/// `--export <file>` has neither (only what the file recorded).
#[derive(Debug, Default)]
pub struct Extras {
    pub system_prompt: Option<String>,
    pub tools: Vec<ToolSpec>,
}

/// One tool as offered to the model.
#[derive(Debug)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One text block shows at most this much; the rest is in the JSONL download.
const MAX_TEXT: usize = 256 * 1024;
/// Sessions up to this size are downloadable through a `data:` link (browsers cap URLs at
/// 2 MiB; base64 adds a third); larger ones through the script.
const MAX_DATA_URL_SESSION: usize = 1024 * 1024;
/// The output buffer is handed to the writer when it grows past this.
const FLUSH_AT: usize = 64 * 1024;

const CSS: &str = include_str!("viewer.css");
const JS: &str = include_str!("viewer.js");

/// Write the page for `session` to `out`.
pub fn render(session: &Session, extras: &Extras, out: &mut dyn Write) -> io::Result<()> {
    let entries = session.entries();
    let layout = order::layout(
        entries.len(),
        |i| session.parent_index(i),
        session.leaf_index(),
    );
    let scan = Scan::new(session, &layout);
    let mut page = Page {
        session,
        entries,
        layout: &layout,
        scan: &scan,
        extras,
        buf: String::with_capacity(FLUSH_AT * 2),
        out,
        skip: vec![false; entries.len()],
        last_day: String::new(),
    };
    page.write_all()
}

// ---------------------------------------------------------------------------------------------
// Second pass: the page.

struct Page<'a> {
    session: &'a Session,
    entries: &'a [Entry],
    layout: &'a Layout,
    scan: &'a Scan,
    extras: &'a Extras,
    buf: String,
    out: &'a mut dyn Write,
    /// Tool results already shown inside the assistant message that made the call.
    skip: Vec<bool>,
    /// The day (`YYYY-MM-DD`) of the last timestamp shown, to show dates only when they change.
    last_day: String,
}

/// `sha256-…` of an inline script or style, for the Content-Security-Policy.
fn csp_hash(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut out = String::from("'sha256-");
    base64_into(&mut out, digest.as_ref());
    out.push('\'');
    out
}

fn policy() -> &'static str {
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        format!(
            "default-src 'none'; style-src {}; script-src {}; img-src data:; base-uri 'none'; form-action 'none'",
            csp_hash(CSS),
            csp_hash(JS)
        )
    })
}

impl Page<'_> {
    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        Ok(())
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn s(&mut self, s: &str) {
        self.buf.push_str(s);
    }

    fn e(&mut self, s: &str) {
        escape_into(&mut self.buf, s);
    }

    fn write_all(&mut self) -> io::Result<()> {
        self.head();
        self.flush()?;
        self.sidebar()?;
        self.s("<main id=\"main\">\n");
        self.header();
        self.flush()?;
        self.entries_html()?;
        self.s("</main>\n</div>\n");
        self.data()?;
        self.s("<script>");
        self.s(JS);
        self.s("</script>\n</body>\n</html>\n");
        self.flush()
    }

    fn title(&self) -> String {
        match self.session.session_name() {
            Some(n) => format!("{n} — pith session"),
            None => format!("Session {} — pith", self.session.id()),
        }
    }

    fn head(&mut self) {
        self.s("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        self.s("<meta http-equiv=\"Content-Security-Policy\" content=\"");
        self.s(policy());
        self.s("\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        self.s("<meta name=\"referrer\" content=\"no-referrer\">\n");
        self.s("<meta name=\"color-scheme\" content=\"light dark\">\n");
        let _ = writeln!(
            self.buf,
            "<meta name=\"generator\" content=\"pith {}\">",
            env!("CARGO_PKG_VERSION")
        );
        self.s("<title>");
        let title = self.title();
        self.e(&title);
        self.s("</title>\n<style>");
        self.s(CSS);
        self.s("</style>\n</head>\n<body>\n");
        // Form controls first: the stylesheet's filters and toggles are `:checked ~ …` rules.
        self.s("<input type=\"checkbox\" class=\"ctl\" id=\"t-thinking\" checked aria-label=\"Show thinking\">");
        self.s("<input type=\"checkbox\" class=\"ctl\" id=\"t-tools\" checked aria-label=\"Show tool output\">");
        for (id, checked) in [
            ("f-default", true),
            ("f-notools", false),
            ("f-user", false),
            ("f-labeled", false),
            ("f-all", false),
        ] {
            let _ = write!(
                self.buf,
                "<input type=\"radio\" class=\"ctl\" name=\"filter\" id=\"{id}\"{}>",
                if checked { " checked" } else { "" }
            );
        }
        self.s("\n<div id=\"app\">\n");
    }

    // ----- sidebar -----

    fn sidebar(&mut self) -> io::Result<()> {
        self.s("<nav id=\"side\" aria-label=\"Session tree\">\n<div class=\"side-head\">\n");
        self.s("<input type=\"search\" id=\"q\" placeholder=\"Search entries  ( / )\" autocomplete=\"off\" hidden>\n");
        self.s("<div class=\"filters\" role=\"group\" aria-label=\"Filter the tree\">");
        for (id, label, title) in [
            ("f-default", "Default", "Messages and tools (no settings)"),
            ("f-notools", "No tools", "Messages without tool results"),
            ("f-user", "User", "Only your messages"),
            ("f-labeled", "Labeled", "Only labeled entries"),
            ("f-all", "All", "Every entry"),
        ] {
            let _ = write!(
                self.buf,
                "<label for=\"{id}\" title=\"{title}\">{label}</label>"
            );
        }
        self.s("</div>\n</div>\n<ol class=\"tree\">\n");
        let steps = &self.layout.steps;
        for step in steps {
            match *step {
                Step::Row { i, branch_start } => self.row(i, branch_start),
                Step::ForkOpen => self.s("<li class=\"fork\">"),
                Step::BranchOpen => self.s("<ol class=\"br\">\n"),
                Step::BranchClose => self.s("</ol>"),
                Step::ForkClose => self.s("</li>\n"),
            }
            self.maybe_flush()?;
        }
        let n = self.entries.len();
        let _ = write!(
            self.buf,
            "</ol>\n<p class=\"side-foot\" id=\"status\">{} entr{} · {} branch{}</p>\n</nav>\n",
            grouped(n as u64),
            if n == 1 { "y" } else { "ies" },
            self.layout.branches(),
            if self.layout.branches() == 1 {
                ""
            } else {
                "es"
            }
        );
        Ok(())
    }

    fn row(&mut self, i: usize, branch_start: bool) {
        let entry = &self.entries[i];
        let row = &self.scan.rows[i];
        let label = self.session.label(entry.id());
        self.s("<li class=\"r ");
        self.s(row.kind.class());
        if row.no_text {
            self.s(" nt");
        }
        if label.is_some() {
            self.s(" lab");
        }
        if self.layout.on_path[i] {
            self.s(" p");
        }
        if self.session.leaf_index() == Some(i) {
            self.s(" leaf");
        }
        if row.error {
            self.s(" err");
        }
        if branch_start {
            self.s(" bs");
        }
        self.s("\"><a href=\"#e-");
        self.e(entry.id());
        let _ = write!(self.buf, "\" data-i=\"{i}\">");
        if let Some(l) = label {
            self.s("<span class=\"chip\">");
            self.e(l);
            self.s("</span>");
        }
        self.s("<span class=\"rt\">");
        self.s(row.tag);
        self.s("</span> ");
        let text = &self.scan.rows[i].text;
        escape_into(&mut self.buf, text);
        self.s("</a></li>\n");
    }

    // ----- header -----

    fn header(&mut self) {
        let name = self.session.session_name();
        self.s("<header class=\"top\">\n<h1>");
        match &name {
            Some(n) => self.e(n),
            None => self.s("Session"),
        }
        self.s("</h1>\n<p class=\"sid\"><code>");
        self.e(self.session.id());
        self.s("</code></p>\n<dl class=\"meta\">\n");
        let header = self.session.header();
        if let Some(ts) = header.get("timestamp").and_then(Value::as_str) {
            let shown = ts.get(..19).unwrap_or(ts).replace('T', " ");
            self.meta("Started", &format!("{shown} UTC"));
        }
        let session = self.session;
        self.meta("Directory", session.cwd());
        if let Some(p) = header.get("parentSession").and_then(Value::as_str) {
            self.meta("Forked from", p);
        }
        if !self.scan.models.is_empty() {
            self.meta("Models", &self.scan.models.join(", "));
        }
        let n = self.entries.len() as u64;
        let branches = self.layout.branches();
        self.meta(
            "Entries",
            &format!(
                "{} · {} branch{} · current branch {}",
                grouped(n),
                branches,
                if branches == 1 { "" } else { "es" },
                grouped(self.layout.path_len as u64)
            ),
        );
        let sc = self.scan;
        let mut msgs = vec![
            format!("{} user", grouped(sc.users)),
            format!("{} assistant", grouped(sc.all.assistant)),
            count(sc.tool_results, "tool result", "tool results"),
        ];
        if sc.compactions > 0 {
            msgs.push(count(sc.compactions, "compaction", "compactions"));
        }
        if sc.branch_summaries > 0 {
            msgs.push(count(
                sc.branch_summaries,
                "branch summary",
                "branch summaries",
            ));
        }
        self.meta("Messages", &msgs.join(" · "));
        self.meta("Tool calls", &grouped(sc.tool_calls));
        let tokens = |t: &Totals| {
            format!(
                "↑{} ↓{} · cache read {} · cache write {}",
                grouped(t.input),
                grouped(t.output),
                grouped(t.cache_read),
                grouped(t.cache_write)
            )
        };
        self.meta("Tokens", &tokens(&sc.all));
        let cost = if branches > 1 {
            format!(
                "{} · current branch {}",
                dollars(sc.all.cost),
                dollars(sc.path.cost)
            )
        } else {
            dollars(sc.all.cost)
        };
        self.meta("Cost", &cost);
        self.s("</dl>\n<div class=\"toolbar\">");
        self.s("<label for=\"t-thinking\" class=\"btn tg\" title=\"Show or hide thinking (T)\">Thinking</label>");
        self.s("<label for=\"t-tools\" class=\"btn tg\" title=\"Show or hide tool output (O)\">Tool output</label>");
        self.s("<button type=\"button\" class=\"btn\" id=\"all-branches\" hidden title=\"Show every branch at once (B)\">All branches</button>");
        self.download_link();
        self.s("<span class=\"keys\" hidden>/ search · T thinking · O tools · B branches</span>");
        self.s("</div>\n");
        self.system_prompt_block();
        self.s("</header>\n");
    }

    fn meta(&mut self, k: &str, v: &str) {
        self.s("<dt>");
        self.e(k);
        self.s("</dt><dd>");
        self.e(v);
        self.s("</dd>\n");
    }

    fn jsonl_len(&self) -> usize {
        let header = store::to_line(self.session.header()).len() + 1;
        header
            + self
                .entries
                .iter()
                .map(|e| e.line().len() + 1)
                .sum::<usize>()
    }

    fn download_link(&mut self) {
        let name = format!("{}.jsonl", self.session.id());
        self.s("<a class=\"btn\" id=\"dl\" download=\"");
        self.e(&name);
        if self.jsonl_len() <= MAX_DATA_URL_SESSION {
            self.s("\" href=\"data:application/x-ndjson;base64,");
            let mut enc = Base64Stream::default();
            let header = store::to_line(self.session.header());
            enc.push(&mut self.buf, header.as_bytes());
            enc.push(&mut self.buf, b"\n");
            for e in self.entries {
                enc.push(&mut self.buf, e.line().as_bytes());
                enc.push(&mut self.buf, b"\n");
            }
            enc.finish(&mut self.buf);
            self.s("\">Download JSONL</a>");
        } else {
            // Too long for a URL: the script builds the file from the copy at the page's end.
            self.s("\" href=\"#pith-jsonl\" data-blob=\"1\" title=\"Needs JavaScript for a session this large\">Download JSONL</a>");
        }
    }

    fn system_prompt_block(&mut self) {
        let extras = self.extras;
        let sc = self.scan;
        if let Some(prompt) = extras.system_prompt.as_deref().filter(|p| !p.is_empty()) {
            let _ = write!(
                self.buf,
                "<details class=\"sys\"><summary>System prompt <span class=\"dim\">· {}</span></summary><pre class=\"plain\">",
                count(prompt.lines().count() as u64, "line", "lines")
            );
            self.e(prompt);
            self.s("</pre></details>\n");
        } else if !sc.recorded_sections.is_empty() {
            let _ = write!(
                self.buf,
                "<details class=\"sys\"><summary>System prompt <span class=\"dim\">· as recorded · {} sections</span></summary>",
                sc.recorded_sections.len()
            );
            for (name, text) in &sc.recorded_sections {
                self.s("<h3 class=\"sec\">");
                self.e(name);
                self.s("</h3><pre class=\"plain\">");
                self.e(text);
                self.s("</pre>");
            }
            self.s("</details>\n");
        }
        if !extras.tools.is_empty() {
            let names: Vec<&str> = extras.tools.iter().map(|t| t.name.as_str()).collect();
            self.s("<details class=\"sys\"><summary>Tools <span class=\"dim\">· ");
            self.e(&names.join(", "));
            self.s("</span></summary><dl class=\"tools\">");
            for t in &extras.tools {
                self.tool_spec(&t.name, &t.description, &t.parameters);
            }
            self.s("</dl></details>\n");
        } else if !sc.recorded_tools.is_empty() {
            let names: Vec<&str> = sc
                .recorded_tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .collect();
            self.s("<details class=\"sys\"><summary>Tools <span class=\"dim\">· as recorded · ");
            self.e(&names.join(", "));
            self.s("</span></summary><dl class=\"tools\">");
            for t in &sc.recorded_tools {
                let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let params = t.get("parameters").cloned().unwrap_or(Value::Null);
                self.tool_spec(&s("name"), &s("description"), &params);
            }
            self.s("</dl></details>\n");
        }
    }

    fn tool_spec(&mut self, name: &str, description: &str, parameters: &Value) {
        self.s("<dt><code>");
        self.e(name);
        self.s("</code></dt><dd><p>");
        self.e(description);
        self.s("</p>");
        if let Some(props) = parameters.get("properties").and_then(Value::as_object) {
            let required: Vec<&str> = parameters
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            self.s("<ul class=\"params\">");
            for (p, spec) in props {
                self.s("<li><code>");
                self.e(p);
                self.s("</code> <span class=\"dim\">");
                let ty = spec.get("type").map_or_else(
                    || "any".to_string(),
                    |t| t.as_str().map_or_else(|| t.to_string(), str::to_string),
                );
                self.e(&ty);
                self.s(if required.contains(&p.as_str()) {
                    " · required"
                } else {
                    " · optional"
                });
                self.s("</span>");
                if let Some(d) = spec.get("description").and_then(Value::as_str) {
                    self.s(" — ");
                    self.e(d);
                }
                self.s("</li>");
            }
            self.s("</ul>");
        }
        self.s("</dd>\n");
    }

    // ----- entries -----

    fn entries_html(&mut self) -> io::Result<()> {
        let layout = self.layout;
        self.s("<section class=\"seg cur\" id=\"current\" aria-label=\"Current branch\">\n");
        if layout.path_len == 0 && !layout.order.is_empty() {
            self.s("<p class=\"seg-h\">No current branch (the leaf was reset).</p>\n");
        }
        let mut others_open = false;
        for (pos, &i) in layout.order.iter().enumerate() {
            if pos == layout.path_len && !others_open && pos > 0 {
                self.s(
                    "</section>\n<h2 class=\"others\" id=\"other-branches\">Other branches</h2>\n",
                );
                others_open = true;
                self.segment_head(i);
            } else if layout.starts_segment(pos) {
                self.s("</section>\n");
                if !others_open {
                    self.s("<h2 class=\"others\" id=\"other-branches\">Other branches</h2>\n");
                    others_open = true;
                }
                self.segment_head(i);
            }
            self.entry(i);
            self.maybe_flush()?;
        }
        if self.entries.is_empty() {
            self.s("<p class=\"empty\">This session has no entries yet.</p>\n");
        }
        self.s("</section>\n");
        Ok(())
    }

    fn segment_head(&mut self, i: usize) {
        self.s("<section class=\"seg\">\n<p class=\"seg-h\">");
        match self.layout.parent[i] {
            Some(p) => {
                self.s("Branch from <a href=\"#e-");
                self.e(self.entries[p].id());
                self.s("\">");
                let row = &self.scan.rows[p];
                self.s(row.tag);
                self.s(": ");
                let text = row.text.clone();
                self.e(&text);
                self.s("</a>");
            }
            None => self.s("Another root of this session"),
        }
        self.s("</p>\n");
    }

    fn time(&mut self, ms: u64) {
        if ms == 0 {
            return;
        }
        let iso = ids::iso_timestamp(ms);
        let day = iso.get(..10).unwrap_or("").to_string();
        let clock = iso.get(11..19).unwrap_or("");
        self.s("<time datetime=\"");
        self.e(&iso);
        self.s("\">");
        if day != self.last_day {
            self.e(&day);
            self.s(" ");
        }
        self.e(clock);
        self.s("</time>");
        self.last_day = day;
    }

    /// `<article …><header>who … time link</header>`; close with `</article>`.
    fn open(&mut self, i: usize, class: &str, who: &str, extra: Option<&str>) {
        let entry = &self.entries[i];
        let leaf = self.session.leaf_index() == Some(i);
        self.s("<article class=\"entry ");
        self.s(class);
        if leaf {
            self.s(" leaf");
        }
        self.s("\" id=\"e-");
        self.e(entry.id());
        let _ = write!(
            self.buf,
            "\" data-i=\"{i}\">\n<header class=\"eh\"><span class=\"who\">"
        );
        self.e(who);
        self.s("</span>");
        if let Some(x) = extra {
            self.s("<span class=\"dim\">");
            self.e(x);
            self.s("</span>");
        }
        if let Some(l) = self.session.label(entry.id()) {
            self.s("<span class=\"chip\">");
            self.e(l);
            self.s("</span>");
        }
        if leaf {
            self.s("<span class=\"chip here\">current leaf</span>");
        }
        self.s("<span class=\"sp\"></span>");
        self.time(entry.timestamp_ms());
        self.s("<a class=\"ln\" href=\"#e-");
        self.e(entry.id());
        self.s("\" title=\"Link to this entry\">#</a></header>\n");
    }

    fn note(&mut self, i: usize, html_text: &str) {
        let entry = &self.entries[i];
        self.s("<div class=\"entry note\" id=\"e-");
        self.e(entry.id());
        let _ = write!(self.buf, "\" data-i=\"{i}\"><span>");
        self.s(html_text);
        self.s("</span><span class=\"sp\"></span>");
        self.time(entry.timestamp_ms());
        self.s("</div>\n");
    }

    fn entry_link(&self, id: &str) -> String {
        let mut s = String::from("<a href=\"#e-");
        escape_into(&mut s, id);
        s.push_str("\">");
        match self.session.entry(id) {
            Some(_) => escape_into(&mut s, id),
            None => {
                escape_into(&mut s, id);
                s.push_str(" (not in this file)");
            }
        }
        s.push_str("</a>");
        s
    }

    fn entry(&mut self, i: usize) {
        if self.skip[i] {
            return;
        }
        let entries = self.entries;
        let entry = &entries[i];
        match entry.kind() {
            EntryKind::Message { role, .. } if role == "system" => self.system_entry(i),
            EntryKind::Message { role, .. } => match entry.message_uncached() {
                Some(m) => self.message(i, &m),
                None => {
                    let html = format!("Message with role “{}” (not shown)", escape(role));
                    self.note(i, &html);
                }
            },
            EntryKind::ModelChange { provider, model_id } => {
                let html = format!("Model → <b>{}/{}</b>", escape(provider), escape(model_id));
                self.note(i, &html);
            }
            EntryKind::ThinkingLevelChange(level) => {
                let html = format!("Thinking level → <b>{}</b>", escape(level));
                self.note(i, &html);
            }
            EntryKind::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
            } => {
                self.open(i, "m-sum compaction", "Compaction", None);
                let _ = write!(
                    self.buf,
                    "<p class=\"dim\">{} tokens summarized; the context keeps entries from {} on.</p>",
                    grouped(*tokens_before),
                    self.entry_link(first_kept_entry_id)
                );
                self.s("<details class=\"summary\"><summary>Summary</summary><div class=\"md\">");
                self.markdown(summary);
                self.s("</div></details>\n</article>\n");
            }
            EntryKind::BranchSummary { from_id, summary } => {
                self.open(i, "m-sum", "Branch summary", None);
                let _ = write!(
                    self.buf,
                    "<p class=\"dim\">Summary of the branch left at {}</p><div class=\"md\">",
                    self.entry_link(from_id)
                );
                self.markdown(summary);
                self.s("</div>\n</article>\n");
            }
            EntryKind::CustomMessage(m) => match m {
                Some(m) => {
                    let class = if m.display {
                        "m-ext"
                    } else {
                        "m-ext hidden-msg"
                    };
                    self.open(i, class, "Extension message", Some(&m.custom_type));
                    if !m.display {
                        self.s("<p class=\"dim\">Not displayed in the conversation; sent to the model.</p>");
                    }
                    self.user_content(&m.content);
                    self.s("</article>\n");
                }
                None => self.note(i, "Extension message (unreadable)"),
            },
            EntryKind::Custom => {
                let v: Value = serde_json::from_str(&entry.line()).unwrap_or(Value::Null);
                let ty = v.get("customType").and_then(Value::as_str).unwrap_or("");
                let mut html = format!("Extension data <b>{}</b>", escape(ty));
                if let Some(data) = v.get("data") {
                    html.push_str(" <details class=\"inline\"><summary>data</summary><pre class=\"code\"><code>");
                    json_block(&mut html, data);
                    html.push_str("</code></pre></details>");
                }
                self.note(i, &html);
            }
            EntryKind::Label { target_id, label } => {
                let html = match label.as_deref().filter(|l| !l.is_empty()) {
                    Some(l) => format!(
                        "Label <b>{}</b> on {}",
                        escape(l),
                        self.entry_link(target_id)
                    ),
                    None => format!("Label cleared on {}", self.entry_link(target_id)),
                };
                self.note(i, &html);
            }
            EntryKind::SessionInfo { name } => {
                let html = match name.as_deref() {
                    Some(n) => format!("Session named <b>{}</b>", escape(n)),
                    None => "Session name cleared".to_string(),
                };
                self.note(i, &html);
            }
            EntryKind::Unknown => self.unknown_entry(i),
        }
    }

    fn unknown_entry(&mut self, i: usize) {
        let entry = &self.entries[i];
        let v: Value = serde_json::from_str(&entry.line()).unwrap_or(Value::Null);
        let html = match entry.entry_type() {
            "context_edit" => {
                let target = v.get("targetId").and_then(Value::as_str).unwrap_or("");
                let what = if v.get("replacement").is_none_or(Value::is_null) {
                    "left out of the context"
                } else {
                    "replaced in the context"
                };
                format!("Context edit: {} {what}", self.entry_link(target))
            }
            "usage" => {
                let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let u = v.get("usage");
                let n = |k: &str| {
                    u.and_then(|u| u.get(k))
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                };
                format!(
                    "Usage ({}) {}/{}: ↑{} ↓{} · cache read {} · write {}",
                    escape(&s("kind")),
                    escape(&s("provider")),
                    escape(&s("model")),
                    grouped(n("input")),
                    grouped(n("output")),
                    grouped(n("cacheRead")),
                    grouped(n("cacheWrite"))
                )
            }
            other => {
                let mut html = format!("Entry of type <b>{}</b>", escape(other));
                html.push_str(
                    " <details class=\"inline\"><summary>JSON</summary><pre class=\"code\"><code>",
                );
                json_block(&mut html, &v);
                html.push_str("</code></pre></details>");
                html
            }
        };
        self.note(i, &html);
    }

    fn system_entry(&mut self, i: usize) {
        let Some(m) = system_message(&self.entries[i]) else {
            self.note(i, "System prompt (unreadable)");
            return;
        };
        let first = !self
            .layout
            .has_ancestor(i, |j| self.scan.rows[j].kind == RowKind::System);
        self.open(
            i,
            "m-sys",
            if first {
                "System prompt"
            } else {
                "System prompt update"
            },
            None,
        );
        if let Some(obj) = m.get("sections").and_then(Value::as_object) {
            for (name, text) in obj {
                match text.as_str() {
                    Some(t) => {
                        let _ = write!(
                            self.buf,
                            "<details class=\"sec\"><summary>{} <span class=\"dim\">· {}</span></summary><pre class=\"plain\">",
                            escape(name),
                            count(t.lines().count() as u64, "line", "lines")
                        );
                        self.bounded_text(t);
                        self.s("</pre></details>\n");
                    }
                    None => {
                        let _ = write!(
                            self.buf,
                            "<p class=\"dim\">Section <b>{}</b> removed</p>",
                            escape(name)
                        );
                    }
                }
            }
        }
        if let Some(added) = m.get("toolsAdded").and_then(Value::as_array) {
            self.s("<details class=\"sec\"><summary>Tools added <span class=\"dim\">· ");
            let names: Vec<&str> = added
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .collect();
            self.e(&names.join(", "));
            self.s("</span></summary><dl class=\"tools\">");
            for t in added {
                let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let params = t.get("parameters").cloned().unwrap_or(Value::Null);
                self.tool_spec(&s("name"), &s("description"), &params);
            }
            self.s("</dl></details>\n");
        }
        if let Some(removed) = m.get("toolsRemoved").and_then(Value::as_array) {
            let names: Vec<&str> = removed
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .collect();
            if !names.is_empty() {
                self.s("<p class=\"dim\">Tools removed: ");
                self.e(&names.join(", "));
                self.s("</p>");
            }
        }
        self.s("</article>\n");
    }

    fn markdown(&mut self, text: &str) {
        let (shown, rest) = bounded(text, MAX_TEXT);
        markdown::render_into(&mut self.buf, shown);
        self.omitted(rest);
    }

    fn omitted(&mut self, rest: usize) {
        if rest > 0 {
            let _ = write!(
                self.buf,
                "<p class=\"dim omitted\">… {} more bytes not shown (they are in the JSONL download)</p>",
                grouped(rest as u64)
            );
        }
    }

    fn bounded_text(&mut self, text: &str) {
        let (shown, rest) = bounded(text, MAX_TEXT);
        self.e(shown);
        if rest > 0 {
            let _ = write!(self.buf, "\n… {} more bytes", grouped(rest as u64));
        }
    }

    fn message(&mut self, i: usize, m: &AgentMessage) {
        match m {
            AgentMessage::User(u) => {
                self.open(i, "m-user", "You", None);
                self.user_content(&u.content);
                self.s("</article>\n");
            }
            AgentMessage::Assistant(a) => self.assistant(i, a),
            AgentMessage::ToolResult(r) => {
                // A result whose call was not found: on its own.
                self.open(i, "m-tool", "Tool result", Some(&r.tool_name));
                self.s("<div class=\"tool ");
                self.s(if r.is_error { "bad" } else { "ok" });
                self.s("\"><div class=\"out\">");
                self.result_content(&r.content, None, 20);
                self.s("</div></div></article>\n");
            }
            AgentMessage::BashExecution(b) => {
                self.open(i, "m-bash", "Shell", Some("run by the user"));
                let failed = b.cancelled || b.exit_code.is_some_and(|c| c != 0);
                self.s("<div class=\"tool t-bash ");
                self.s(if failed { "bad" } else { "ok" });
                self.s("\"><div class=\"th\"><code class=\"cmd\">");
                highlight::highlight_into(&mut self.buf, &format!("$ {}", b.command), lang("sh"));
                self.s("</code></div><div class=\"out\">");
                self.output(&strip_ansi(&b.output), None, 20);
                self.s("</div>");
                let mut status = Vec::new();
                if let Some(code) = b.exit_code.filter(|c| *c != 0) {
                    status.push(format!("exit code {code}"));
                }
                if b.cancelled {
                    status.push("cancelled".into());
                }
                if b.truncated {
                    status.push("output truncated".into());
                }
                if let Some(p) = &b.full_output_path {
                    status.push(format!("full output: {p}"));
                }
                if b.exclude_from_context == Some(true) {
                    status.push("not sent to the model".into());
                }
                if !status.is_empty() {
                    self.s("<p class=\"status\">");
                    self.e(&status.join(" · "));
                    self.s("</p>");
                }
                self.s("</div></article>\n");
            }
            AgentMessage::Custom(c) => {
                self.open(i, "m-ext", "Extension message", Some(&c.custom_type));
                self.user_content(&c.content);
                self.s("</article>\n");
            }
            AgentMessage::BranchSummary(b) => {
                self.open(i, "m-sum", "Branch summary", None);
                self.s("<div class=\"md\">");
                self.markdown(&b.summary);
                self.s("</div></article>\n");
            }
            AgentMessage::CompactionSummary(c) => {
                self.open(i, "m-sum", "Compaction summary", None);
                self.s("<div class=\"md\">");
                self.markdown(&c.summary);
                self.s("</div></article>\n");
            }
            #[allow(unreachable_patterns)]
            _ => self.note(i, "Message of a kind this viewer does not know"),
        }
    }

    fn user_content(&mut self, c: &UserContent) {
        match c {
            UserContent::Text(t) => self.user_text(t),
            UserContent::Blocks(blocks) => {
                let images: Vec<&ImageContent> = blocks
                    .iter()
                    .filter_map(|b| match b {
                        Content::Image(i) => Some(i),
                        _ => None,
                    })
                    .collect();
                if !images.is_empty() {
                    self.s("<div class=\"imgs\">");
                    for img in images {
                        self.image(img);
                    }
                    self.s("</div>");
                }
                for b in blocks {
                    match b {
                        Content::Text(t) => self.user_text(&t.text),
                        Content::Thinking(t) => {
                            self.thinking(&t.thinking, t.redacted == Some(true))
                        }
                        Content::ToolCall(tc) => {
                            self.s("<p class=\"dim\">Tool call ");
                            self.e(&tc.name);
                            self.s("</p>");
                        }
                        Content::Image(_) => {}
                    }
                }
            }
        }
    }

    /// User text: markdown, with a leading skill block (`<skill name=… location=…>…</skill>`)
    /// shown folded.
    fn user_text(&mut self, text: &str) {
        if let Some((name, location, body, rest)) = skill_block(text) {
            self.s("<details class=\"skill\"><summary>Skill <b>");
            self.e(name);
            self.s("</b> <span class=\"dim\">");
            self.e(location);
            self.s("</span></summary><div class=\"md\">");
            self.markdown(body);
            self.s("</div></details>");
            if !rest.trim().is_empty() {
                self.s("<div class=\"md\">");
                self.markdown(rest);
                self.s("</div>");
            }
            return;
        }
        if text.trim().is_empty() {
            return;
        }
        self.s("<div class=\"md\">");
        self.markdown(text);
        self.s("</div>\n");
    }

    fn thinking(&mut self, text: &str, redacted: bool) {
        if text.trim().is_empty() && !redacted {
            return;
        }
        self.s("<div class=\"thinking\"><div class=\"th-h\">Thinking");
        if redacted {
            self.s(" <span class=\"dim\">(redacted by the provider)</span>");
        }
        self.s("</div><div class=\"th-b\">");
        if !redacted {
            self.bounded_text(text.trim());
        }
        self.s("</div></div>\n");
    }

    fn image(&mut self, img: &ImageContent) {
        if is_inline_image_mime(&img.mime_type) && is_base64(&img.data) {
            self.s("<img class=\"shot\" alt=\"image\" loading=\"lazy\" src=\"data:");
            self.e(&img.mime_type.to_ascii_lowercase());
            self.s(";base64,");
            self.s(&img.data);
            self.s("\">");
        } else {
            self.s("<span class=\"dim\">[image: ");
            self.e(&img.mime_type);
            let _ = write!(
                self.buf,
                ", {} bytes of base64]</span>",
                grouped(img.data.len() as u64)
            );
        }
    }

    fn assistant(&mut self, i: usize, a: &AssistantMessage) {
        let mut model = String::with_capacity(a.provider.len() + a.model.len() + 1);
        if !a.provider.is_empty() {
            model.push_str(&a.provider);
            model.push('/');
        }
        model.push_str(&a.model);
        let class = match a.stop_reason {
            StopReason::Error | StopReason::Aborted => "m-asst failed",
            _ => "m-asst",
        };
        self.open(i, class, "Assistant", Some(&model));
        let calls = a
            .content
            .iter()
            .filter(|c| matches!(c, Content::ToolCall(_)))
            .count();
        for block in &a.content {
            match block {
                Content::Text(t) => {
                    if !t.text.trim().is_empty() {
                        self.s("<div class=\"md\">");
                        self.markdown(&t.text);
                        self.s("</div>\n");
                    }
                }
                Content::Thinking(t) => self.thinking(&t.thinking, t.redacted == Some(true)),
                Content::ToolCall(tc) => {
                    let result = self.find_result(i, &tc.id, calls);
                    self.tool_call(&tc.name, &tc.arguments, result);
                }
                Content::Image(img) => self.image(img),
            }
        }
        match a.stop_reason {
            StopReason::Error => {
                self.s("<p class=\"error\">Error: ");
                self.e(a.error_message.as_deref().unwrap_or("unknown error"));
                self.s("</p>\n");
            }
            StopReason::Aborted => self.s("<p class=\"error\">Aborted</p>\n"),
            StopReason::Length => {
                self.s("<p class=\"warn\">Stopped at the output token limit</p>\n")
            }
            _ => {}
        }
        self.usage(a);
        self.s("</article>\n");
    }

    fn usage(&mut self, a: &AssistantMessage) {
        let u = &a.usage;
        if u.input + u.output + u.cache_read + u.cache_write == 0 && u.cost.total == 0.0 {
            return;
        }
        let mut t = Totals::default();
        t.add(a);
        let _ = write!(
            self.buf,
            "<footer class=\"usage\"><span title=\"input tokens: {}\">↑{}</span> <span title=\"output tokens: {}\">↓{}</span>",
            grouped(u.input),
            compact_count(u.input),
            grouped(u.output),
            compact_count(u.output)
        );
        if u.cache_read > 0 || u.cache_write > 0 {
            let _ = write!(
                self.buf,
                " <span title=\"cache read: {} · cache write: {}\">cache R{} W{}</span>",
                grouped(u.cache_read),
                grouped(u.cache_write),
                compact_count(u.cache_read),
                compact_count(u.cache_write)
            );
        }
        let _ = writeln!(
            self.buf,
            " <span class=\"cost\">{}</span></footer>",
            dollars(t.cost)
        );
    }

    /// The tool result answering call `call_id` of assistant entry `a`: a later entry on a
    /// branch through `a`, within a few steps of it.
    fn find_result(&mut self, a: usize, call_id: &str, calls: usize) -> Option<usize> {
        let candidates = self.scan.results.get(call_id)?;
        let reach = calls + 8;
        // Ids repeat only in odd files; a bound keeps a hostile one from going quadratic.
        let found = candidates.iter().copied().take(64).find(|&r| {
            !self.skip[r] && {
                let mut cur = self.layout.parent[r];
                let mut steps = 0;
                loop {
                    match cur {
                        Some(p) if p == a => break true,
                        Some(p) if steps < reach => {
                            cur = self.layout.parent[p];
                            steps += 1;
                        }
                        _ => break false,
                    }
                }
            }
        })?;
        self.skip[found] = true;
        Some(found)
    }

    fn tool_call(&mut self, name: &str, args: &Value, result: Option<usize>) {
        let entries = self.entries;
        let msg = result.and_then(|r| entries[r].message_uncached());
        let res = match msg.as_deref() {
            Some(AgentMessage::ToolResult(r)) => Some(r),
            _ => None,
        };
        let state = match res {
            Some(r) if r.is_error => "bad",
            Some(_) => "ok",
            None => "none",
        };
        self.s("<div class=\"tool t-");
        self.s(match name {
            "bash" | "read" | "write" | "edit" | "ls" | "grep" | "find" => name,
            _ => "other",
        });
        self.s(" ");
        self.s(state);
        self.s("\"");
        if let Some(r) = result {
            self.s(" id=\"e-");
            self.e(entries[r].id());
            let _ = write!(self.buf, "\" data-i=\"{r}\"");
        }
        self.s("><div class=\"th\">");
        let s = |k: &str| args.get(k).and_then(Value::as_str);
        let path = s("path").or_else(|| s("file_path"));
        let path_lang = path.and_then(highlight::lang_for_path);
        match name {
            "bash" => {
                self.s("<code class=\"cmd\">");
                let cmd = format!("$ {}", s("command").unwrap_or(""));
                highlight::highlight_into(&mut self.buf, &cmd, lang("sh"));
                self.s("</code>");
                if let Some(t) = args.get("timeout").and_then(Value::as_u64) {
                    let _ = write!(self.buf, " <span class=\"dim\">timeout {t}s</span>");
                }
            }
            _ => {
                self.s("<span class=\"tn\">");
                self.e(name);
                self.s("</span> ");
                match (name, path) {
                    ("read" | "write" | "edit" | "ls", Some(p)) => {
                        self.s("<code class=\"path\">");
                        self.e(p);
                        self.s("</code>");
                        if name == "read" {
                            let off = args.get("offset").and_then(Value::as_u64);
                            let lim = args.get("limit").and_then(Value::as_u64);
                            if off.is_some() || lim.is_some() {
                                let start = off.unwrap_or(1);
                                let end = lim
                                    .map(|l| (start + l).saturating_sub(1).to_string())
                                    .unwrap_or_default();
                                let _ =
                                    write!(self.buf, "<span class=\"dim\">:{start}–{end}</span>");
                            }
                        }
                        if name == "write" {
                            if let Some(c) = s("content") {
                                let _ = write!(
                                    self.buf,
                                    " <span class=\"dim\">{}</span>",
                                    count(c.lines().count() as u64, "line", "lines")
                                );
                            }
                        }
                    }
                    ("grep" | "find", _) => {
                        self.s("<code class=\"path\">");
                        self.e(s("pattern").unwrap_or(""));
                        self.s("</code>");
                        if let Some(p) = path {
                            self.s(" <span class=\"dim\">in</span> <code class=\"path\">");
                            self.e(p);
                            self.s("</code>");
                        }
                        if let Some(g) = s("glob") {
                            self.s(" <span class=\"dim\">glob</span> <code class=\"path\">");
                            self.e(g);
                            self.s("</code>");
                        }
                    }
                    ("ls", None) => self.s("<code class=\"path\">.</code>"),
                    _ => {}
                }
            }
        }
        self.s("<span class=\"sp\"></span><span class=\"st\">");
        self.s(match state {
            "bad" => "error",
            "ok" => "",
            _ => "no result recorded",
        });
        self.s("</span></div>");
        // The call's own content (what is written / replaced / asked).
        match name {
            "write" => {
                if let Some(c) = s("content") {
                    self.s("<div class=\"out\">");
                    self.output(c, path_lang, 12);
                    self.s("</div>");
                }
            }
            "edit" => {
                let diff = res
                    .and_then(|r| r.details.as_ref())
                    .and_then(|d| d.get("diff"))
                    .and_then(Value::as_str);
                self.s("<div class=\"out\">");
                match diff {
                    Some(d) if !(res.is_some_and(|r| r.is_error)) => {
                        self.output(d, Some(lang("diff")), 40)
                    }
                    _ => {
                        let d = edits_as_diff(args);
                        if !d.is_empty() {
                            self.output(&d, Some(lang("diff")), 40);
                        }
                    }
                }
                self.s("</div>");
            }
            "bash" | "read" | "ls" | "grep" | "find" => {}
            _ => {
                if args.as_object().is_some_and(|o| !o.is_empty()) {
                    let mut json = String::new();
                    json_text(&mut json, args);
                    self.s("<div class=\"args\">");
                    self.output(&json, Some(lang("json")), 12);
                    self.s("</div>");
                }
            }
        }
        // The result.
        if let Some(r) = res {
            let show = match name {
                // Success messages of write/edit add nothing to what is shown above.
                "write" | "edit" => r.is_error,
                _ => true,
            };
            if show {
                self.s("<div class=\"out\">");
                let (lang, lines) = match name {
                    "read" => (path_lang, 16),
                    "bash" => (None, 16),
                    _ => (None, 20),
                };
                self.result_content(&r.content, lang, lines);
                self.s("</div>");
            }
        }
        self.s("</div>\n");
    }

    fn result_content(&mut self, content: &[Content], lang: Option<&'static Lang>, lines: usize) {
        let mut text = String::new();
        for c in content {
            match c {
                Content::Text(t) => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&t.text);
                }
                Content::Image(img) => self.image(img),
                _ => {}
            }
        }
        if !text.trim().is_empty() {
            self.output(&strip_ansi(&text), lang, lines);
        }
    }

    /// Output text: the first `preview` lines, the rest folded (`<details>`), highlighted when a
    /// language is known.
    fn output(&mut self, text: &str, lang: Option<&'static Lang>, preview: usize) {
        let (text, rest_bytes) = bounded(text, MAX_TEXT);
        let text = text.trim_end_matches('\n');
        let split = text
            .match_indices('\n')
            .nth(preview.saturating_sub(1))
            .map(|(p, _)| p);
        let tail_lines = split.map_or(0, |p| {
            text[p + 1..].bytes().filter(|&b| b == b'\n').count() + 1
        });
        let (head, tail) = match split {
            // Fold only when it hides a good amount.
            Some(p) if tail_lines > 3 => (&text[..p], Some(&text[p + 1..])),
            _ => (text, None),
        };
        self.code(head, lang, "");
        if let Some(tail) = tail {
            let _ = write!(
                self.buf,
                "<details class=\"more\"><summary>{} more</summary>",
                count(tail_lines as u64, "line", "lines")
            );
            self.code(tail, lang, " cont");
            self.s("</details>");
        }
        self.omitted(rest_bytes);
    }

    fn code(&mut self, text: &str, lang: Option<&'static Lang>, extra_class: &str) {
        self.s("<pre class=\"code");
        self.s(extra_class);
        self.s("\"><code>");
        match lang {
            Some(l) => highlight::highlight_into(&mut self.buf, text, l),
            None => escape_into(&mut self.buf, text),
        }
        self.s("</code></pre>");
    }

    // ----- data for the script -----

    fn data(&mut self) -> io::Result<()> {
        // Parents by index and the leaf: what the script needs to show one branch at a time.
        self.s("<script type=\"application/json\" id=\"pith-data\">{\"leaf\":");
        match self.session.leaf_index() {
            Some(l) => {
                let _ = write!(self.buf, "{l}");
            }
            None => self.s("-1"),
        }
        self.s(",\"parent\":[");
        for (k, p) in self.layout.parent.iter().enumerate() {
            if k > 0 {
                self.s(",");
            }
            match p {
                Some(p) => {
                    let _ = write!(self.buf, "{p}");
                }
                None => self.s("-1"),
            }
            if self.buf.len() >= FLUSH_AT {
                self.flush()?;
            }
        }
        self.s("]}</script>\n");
        if self.jsonl_len() > MAX_DATA_URL_SESSION {
            // The session for the download link, as JSON lines in a data block. `<` is written
            // `\u003c` (it only occurs inside JSON strings), so nothing can end the block early.
            self.s("<script type=\"application/x-ndjson\" id=\"pith-jsonl\">");
            let header = store::to_line(self.session.header());
            push_json_line(&mut self.buf, &header);
            for e in self.entries {
                push_json_line(&mut self.buf, &e.line());
                if self.buf.len() >= FLUSH_AT {
                    self.flush()?;
                }
            }
            self.s("</script>\n");
        }
        Ok(())
    }
}

impl Layout {
    /// Whether an ancestor of `i` satisfies `f` (walks `i`'s parents).
    fn has_ancestor(&self, i: usize, f: impl Fn(usize) -> bool) -> bool {
        let mut cur = self.parent[i];
        let mut steps = 0;
        while let Some(p) = cur {
            if f(p) {
                return true;
            }
            steps += 1;
            if steps > self.parent.len() {
                return false;
            }
            cur = self.parent[p];
        }
        false
    }
}

/// `1 line`, `12 lines`, `1,200 lines`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", grouped(n), if n == 1 { one } else { many })
}

fn lang(name: &str) -> &'static Lang {
    match name {
        "diff" => highlight::diff_lang(),
        "json" => highlight::json(),
        _ => highlight::shell(),
    }
}

fn push_json_line(out: &mut String, mut line: &str) {
    while let Some(k) = line.find('<') {
        out.push_str(&line[..k]);
        out.push_str("\\u003c");
        line = &line[k + 1..];
    }
    out.push_str(line);
    out.push('\n');
}

/// Pretty JSON (escaped) for a code block, bounded.
fn json_block(out: &mut String, v: &Value) {
    let mut text = String::new();
    json_text(&mut text, v);
    let (shown, rest) = bounded(&text, 16 * 1024);
    highlight::highlight_into(out, shown, lang("json"));
    if rest > 0 {
        let _ = write!(out, "\n… {} more bytes", grouped(rest as u64));
    }
}

fn json_text(out: &mut String, v: &Value) {
    out.push_str(&serde_json::to_string_pretty(v).unwrap_or_default());
}

/// An edit call's `edits` (or legacy `oldText`/`newText`) as a diff, when no result diff exists.
fn edits_as_diff(args: &Value) -> String {
    let mut out = String::new();
    let mut one = |old: &str, new: &str| {
        if !out.is_empty() {
            out.push_str("@@\n");
        }
        for l in old.lines() {
            out.push('-');
            out.push_str(l);
            out.push('\n');
        }
        for l in new.lines() {
            out.push('+');
            out.push_str(l);
            out.push('\n');
        }
    };
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(edits) = args.get("edits").and_then(Value::as_array) {
        for e in edits {
            one(&s(e, "oldText"), &s(e, "newText"));
        }
    } else if args.get("oldText").is_some() {
        one(&s(args, "oldText"), &s(args, "newText"));
    }
    out
}

/// Streaming base64: bytes pushed in pieces, encoded in groups of three.
#[derive(Default)]
struct Base64Stream {
    carry: [u8; 3],
    len: usize,
}

impl Base64Stream {
    fn push(&mut self, out: &mut String, mut data: &[u8]) {
        while self.len > 0 && self.len < 3 && !data.is_empty() {
            self.carry[self.len] = data[0];
            self.len += 1;
            data = &data[1..];
        }
        if self.len == 3 {
            base64_into(out, &self.carry);
            self.len = 0;
        }
        let whole = data.len() / 3 * 3;
        base64_into(out, &data[..whole]);
        for &b in &data[whole..] {
            self.carry[self.len] = b;
            self.len += 1;
        }
    }

    fn finish(&mut self, out: &mut String) {
        base64_into(out, &self.carry[..self.len]);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_stream_matches_one_shot() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut whole = String::new();
        base64_into(&mut whole, &data);
        for cut in [1usize, 2, 3, 4, 7, 100] {
            let mut s = String::new();
            let mut enc = Base64Stream::default();
            for chunk in data.chunks(cut) {
                enc.push(&mut s, chunk);
            }
            enc.finish(&mut s);
            assert_eq!(s, whole, "chunks of {cut}");
        }
    }

    #[test]
    fn json_lines_cannot_close_the_block() {
        let mut s = String::new();
        push_json_line(&mut s, r#"{"t":"</script><!--x"}"#);
        assert_eq!(s, "{\"t\":\"\\u003c/script>\\u003c!--x\"}\n");
        let v: Value = serde_json::from_str(s.trim()).unwrap();
        assert_eq!(v["t"], "</script><!--x");
    }

    #[test]
    fn edits_become_a_diff() {
        let v = serde_json::json!({"path":"a","edits":[{"oldText":"a\nb","newText":"c"}]});
        assert_eq!(edits_as_diff(&v), "-a\n-b\n+c\n");
    }

    #[test]
    fn policy_hashes_the_inline_assets() {
        let p = policy();
        assert!(
            p.starts_with("default-src 'none'; style-src 'sha256-"),
            "{p}"
        );
        assert!(p.contains("script-src 'sha256-"));
        assert!(!p.contains("unsafe"));
    }
}
