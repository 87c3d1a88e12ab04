//! pi 1.6.0's `codemode` tool (docs/codemode.md): the model writes JavaScript that calls the other
//! tools. The script runs in QuickJS inside a child process of pith's own binary
//! (`pith __codemode-worker`, [`worker`]); the state machine drives it like an MCP server
//! (`core/codemode.rs`): its tool calls go through the normal tool path as nested calls.
//!
//! This module is the pure part: the tool's declaration, the `// @options:` line, the store
//! (`codemode-store` entries of a branch), the result's layout, the wire format.

use serde_json::{Value, json};

use crate::message::Content;

pub mod discovery;
mod docs;
pub mod render;
pub mod wire;
#[cfg(feature = "codemode")]
pub mod worker;

/// The tool's name.
pub const NAME: &str = "codemode";
/// The hidden subcommand that runs a worker.
pub const WORKER_ARG: &str = "__codemode-worker";
/// `customType` of the session entries holding one script's `store()` writes.
pub const STORE_ENTRY: &str = "codemode-store";
/// The VM's heap (pi's limit).
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;
/// Workers alive at once when `PI_CODEMODE_MAX_WORKERS` does not say.
pub const DEFAULT_MAX_WORKERS: usize = 2;
/// How long a script waits for a free worker.
pub const WORKER_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;
const CHARS_PER_TOKEN: u64 = 4;
const MAX_TIMEOUT_MS: u64 = 2_147_483_647;
const OPTIONS_PREFIX: &str = "// @options:";

/// `PI_CODEMODE_MAX_WORKERS` if it is a positive integer.
pub fn max_workers() -> usize {
    std::env::var("PI_CODEMODE_MAX_WORKERS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_WORKERS)
}

pub use docs::docs_path;

/// The tool as it is declared (its description lists no tool: pith's tools are all declared,
/// `codemode.mode` `on`).
pub struct CodemodeTool {
    pub docs_path: String,
}

/// Description of the tool (pi 1.6.0's wording).
pub fn description(docs_path: &str, listed: &[String]) -> String {
    let mut s = String::from(
        "Run JavaScript that calls other tools. The input is raw JavaScript (not JSON, no code fence), run as an async function body in a QuickJS sandbox: top-level `await` and `return` work. No Node, file system, network, or timers.\n\
- `await tools.<name>({ ...args })` resolves to a string, or an object if the tool's declaration says so, and rejects with an Error on failure. A tool whose declaration returns an object resolves on failure too when it returned that object; check its fields. Calls still running when the script ends are cancelled.\n\
- Optional first line: `// @options: {\"max_output_tokens\": 10000, \"timeout_ms\": 60000}`\n\n\
Globals:\n\
- `text(value)`, `image(dataUrlOrImageBlock)`, `console.log(...)`, and top-level `return` add output; `exit()` ends the script. With several text items, each starts with a `==> text N/M <==` line, and `console` lines follow the other output in one `<console_output>` block. `image()` also saves the image to a temp file and the result names its path.\n\
- `store(key, value)` and `load(key)` keep JSON values across codemode calls.\n\
- `ALL_TOOLS`, `await searchTools(query, { limit?, namespace? })`, `await describeTool(name)`, `await describeNamespace(name)`: find unlisted tools, such as MCP tools.\n",
    );
    s.push_str(&format!(
        "- `models`: classifiers and image generation. Read {docs_path} first."
    ));
    if !listed.is_empty() {
        s.push_str("\n\nNested tools:\n\n");
        s.push_str(&listed.join("\n\n"));
    }
    s
}

pub const SNIPPET: &str = "Run JavaScript that calls other tools";
pub const GUIDELINE: &str = "Use codemode to batch independent tool calls (Promise.allSettled), chain them, or filter large output, instead of many separate calls.";

pub fn parameters() -> Value {
    json!({
        "type": "object",
        "required": ["code"],
        "properties": {"code": {"type": "string", "description": "Raw JavaScript source."}}
    })
}

impl crate::tools::Tool for CodemodeTool {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> String {
        description(&self.docs_path, &[])
    }
    fn snippet(&self) -> &'static str {
        SNIPPET
    }
    fn parameters(&self) -> Value {
        parameters()
    }
    /// Never called: the state machine runs scripts itself (`core/codemode.rs`).
    fn execute(
        &self,
        _args: &Value,
        _ctx: &crate::tools::ToolContext,
        _on_update: &mut dyn FnMut(crate::tools::ToolOutput),
    ) -> crate::tools::ToolResult {
        Err("codemode scripts are run by the agent loop".into())
    }
}

/// `constrainedSampling` of the tool: the grammar of its input (an optional options line, then
/// the source), for providers that constrain tool input with a Lark grammar.
pub fn constrained_sampling() -> Value {
    json!({"type": "grammar", "variants": {"openai_lark": "\nstart: options_source | plain_source\noptions_source: OPTIONS_LINE NEWLINE SOURCE\nplain_source: SOURCE\n\nOPTIONS_LINE: /[ \\t]*\\/\\/ @options:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\nSOURCE: /[\\s\\S]+/\n"}})
}

/// `codemode.inlineBudget`'s default (estimated tokens).
pub const DEFAULT_INLINE_BUDGET: u64 = 3000;

/// How the tools are presented while `codemode` is declared (settings `codemode.*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Presentation {
    /// `codemode.mode: "only"`: the other tools are not declared; `codemode` lists them.
    pub only: bool,
    /// `codemode.inlineBudget`: estimated tokens the listed declarations may use.
    pub inline_budget: u64,
}

impl Default for Presentation {
    fn default() -> Self {
        Presentation {
            only: false,
            inline_budget: DEFAULT_INLINE_BUDGET,
        }
    }
}

/// With `codemode` declared: mode `on`, the other declared tools say how scripts call them;
/// mode `only`, they are taken out and listed in `codemode`'s description (as many as the
/// budget allows, cheapest first; scripts find the others with `searchTools()`).
/// `script` tells how scripts see a tool ([`ScriptView`]: what its call resolves to, its
/// guidelines, its output type).
pub fn annotate(
    decls: &mut [crate::message::ToolDeclaration],
    how: Presentation,
    script: &dyn Fn(&str) -> ScriptView,
) {
    let Some(at) = decls.iter().position(|d| d.name == NAME) else {
        return;
    };
    if !how.only {
        // `tool_search` is for the model only: scripts cannot call it.
        for d in decls
            .iter_mut()
            .filter(|d| d.name != NAME && d.name != crate::tools::tool_search::NAME)
        {
            let suffix = match script(&d.name).resolves {
                Some(r) => format!(
                    "\n\nCodemode: `tools.{}(args)` resolves to {r}.",
                    discovery::identifier(&d.name)
                ),
                None => script_call_suffix(&d.name),
            };
            d.description = format!("{}{suffix}", d.description.trim());
        }
        return;
    }
    // Mode `only` (pi's catalog): every tool but the model's own is listed in `codemode`'s
    // description, grouped (tools without a namespace first, then namespaces by name); in each
    // round every group places its cheapest remaining tool that fits the budget, and a group
    // whose next tool does not fit drops out. The tools stay in the declared set (pi's
    // `toolsAdded`); requests leave them out (`request_tools`).
    type Group = (Option<(String, Option<String>)>, Vec<(String, u64)>);
    let mut groups: Vec<Group> = vec![(None, Vec::new())];
    for d in decls.iter().filter(|d| listed_in_only(&d.name)) {
        let id = discovery::identifier(&d.name);
        let heading = if id == d.name {
            format!("### `{id}`")
        } else {
            format!("### `{id}` (`{}`)", d.name)
        };
        let view = script(&d.name);
        let guidelines: Vec<&str> = view.guidelines.iter().map(String::as_str).collect();
        let section = format!(
            "{heading}\n{}",
            render::sample(
                &d.name,
                &d.description,
                &guidelines,
                &d.parameters,
                &view.output
            )
            .trim()
        );
        let cost = (section.encode_utf16().count() as u64).div_ceil(4);
        let ns_name = view.namespace.as_ref().map(|n| n.0.clone());
        match groups
            .iter_mut()
            .find(|g| g.0.as_ref().map(|n| &n.0) == ns_name.as_ref())
        {
            Some(g) => g.1.push((section, cost)),
            None => groups.push((view.namespace.clone(), vec![(section, cost)])),
        }
    }
    let any = groups.iter().any(|g| !g.1.is_empty());
    groups[1..].sort_by(|a, b| {
        let (x, y) = (&a.0.as_ref().unwrap().0, &b.0.as_ref().unwrap().0);
        x.to_lowercase().cmp(&y.to_lowercase()).then(x.cmp(y))
    });
    let mut queues: Vec<Vec<usize>> = groups
        .iter()
        .map(|g| {
            let mut q: Vec<usize> = (0..g.1.len()).collect();
            q.sort_by_key(|i| g.1[*i].1);
            q
        })
        .collect();
    let mut shown: Vec<Vec<bool>> = groups.iter().map(|g| vec![false; g.1.len()]).collect();
    let mut left = how.inline_budget;
    let mut active: Vec<usize> = (0..groups.len())
        .filter(|g| !queues[*g].is_empty())
        .collect();
    while !active.is_empty() {
        active.retain(|&g| {
            let next = queues[g][0];
            let cost = groups[g].1[next].1;
            if cost > left {
                return false;
            }
            left -= cost;
            shown[g][next] = true;
            queues[g].remove(0);
            !queues[g].is_empty()
        });
    }
    let mut listed: Vec<String> = Vec::new();
    for (g, (ns, entries)) in groups.iter().enumerate() {
        let visible = shown[g].iter().filter(|x| **x).count();
        if let Some((name, desc)) = ns {
            let listing = if visible == entries.len() {
                ""
            } else if visible == 0 {
                " (tools not listed)"
            } else {
                " (some tools not listed)"
            };
            let desc = desc
                .as_deref()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| format!("\n{d}"))
                .unwrap_or_default();
            listed.push(format!("## {name}{listing}{desc}"));
        }
        for (i, (section, _)) in entries.iter().enumerate() {
            if shown[g][i] {
                listed.push(section.clone());
            }
        }
    }
    let mut text = description(&docs_path(), &listed);
    if any && listed.is_empty() {
        text.push_str("\n\nNested tools:");
    }
    decls[at].description = text;
}

/// In mode `only`: whether a declared tool is listed in `codemode`'s description and left out
/// of requests (every tool scripts can call: not `codemode`, not `tool_search`).
pub fn listed_in_only(name: &str) -> bool {
    name != NAME && name != crate::tools::tool_search::NAME
}

/// What a declared tool's description says of its script call (codemode `on`): how a script
/// calls it and what the call resolves to.
pub fn script_call_suffix(name: &str) -> String {
    let resolves = match name {
        "read" => "`string | { data: string; mimeType: string; note: string; type: \"image\"; }`",
        "bash" => "`{ output, truncated, full_output_path?, exit_code, wall_time_seconds }`",
        _ => "a string",
    };
    format!(
        "\n\nCodemode: `tools.{}(args)` resolves to {resolves}.",
        discovery::identifier(name)
    )
}

/// How scripts see a tool: what its call resolves to when it is not a string (the
/// description's `Codemode:` line), its guidelines and its output type (its declaration).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScriptView {
    pub resolves: Option<String>,
    pub guidelines: Vec<String>,
    pub output: String,
    /// Its namespace (an MCP server's `mcp__<server>`) and the namespace's description.
    pub namespace: Option<(String, Option<String>)>,
}

impl ScriptView {
    /// A built-in tool: `read`'s and `bash`'s objects, else a string.
    pub fn builtin(name: &str, guidelines: &[&str]) -> ScriptView {
        ScriptView {
            resolves: None,
            guidelines: guidelines.iter().map(|g| g.to_string()).collect(),
            output: match name {
                "read" => render::READ_OUTPUT.into(),
                "bash" => render::BASH_OUTPUT.into(),
                _ => "string".into(),
            },
            namespace: None,
        }
    }
}

/// What a script's call of an MCP tool resolves to, as pi 1.6.0 says it: the fields of its
/// `CallToolResult`, with the fields of `structuredContent` when the tool has an output schema.
pub fn mcp_resolves(output_schema: Option<&Value>) -> String {
    let structured = output_schema
        .and_then(|s| object_fields(s, 0))
        .map(|f| format!(": {f}"))
        .unwrap_or_default();
    format!("`{{ content, structuredContent?{structured}, isError? }}`")
}

/// pi's `describeFields`: `{ a, b? }` for an object schema with properties (`: "v"` for a
/// `const` field; fields of object fields `depth` more levels deep), else none.
fn object_fields(schema: &Value, depth: usize) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let props = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .iter()
        .map(|(name, field)| {
            let opt = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let nested = match field.get("const") {
                Some(c) => Some(c.to_string()),
                None if depth > 0 => object_fields(field, depth - 1),
                None => None,
            };
            match nested {
                Some(n) => format!("{name}{opt}: {n}"),
                None => format!("{name}{opt}"),
            }
        })
        .collect();
    Some(format!("{{ {} }}", fields.join(", ")))
}

/// The script's options (`// @options:` line).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScriptOptions {
    pub max_output_tokens: Option<u64>,
    pub timeout_ms: Option<u64>,
}

const FIELDS: &str = "`max_output_tokens` and `timeout_ms`";

/// Split the optional options line from the script. The code keeps the line break after the
/// options line, so line numbers in errors stay the model's.
pub fn parse_source(input: &str) -> Result<(String, ScriptOptions), String> {
    if input.trim().is_empty() {
        return Err("Expected JavaScript source text (non-empty). Provide JS only, optionally with a first line `// @options: {\"max_output_tokens\": 1000}`.".into());
    }
    if let Some(n) = input
        .split('\n')
        .enumerate()
        .skip(1)
        .find(|(_, l)| l.trim_start().starts_with(OPTIONS_PREFIX))
        .map(|(i, _)| i)
    {
        return Err(format!(
            "The {OPTIONS_PREFIX} line must be the first line of the input; found one on line {}",
            n + 1
        ));
    }
    let first = input.split('\n').next().unwrap_or("");
    let first = first.strip_suffix('\r').unwrap_or(first).trim_start();
    let Some(directive) = first.strip_prefix(OPTIONS_PREFIX) else {
        return Ok((input.to_string(), ScriptOptions::default()));
    };
    let code = input.find('\n').map(|i| &input[i..]).unwrap_or("");
    if code.trim().is_empty() {
        return Err(
            "The @options line must be followed by JavaScript source on subsequent lines".into(),
        );
    }
    Ok((code.to_string(), parse_options(directive.trim())?))
}

fn parse_options(directive: &str) -> Result<ScriptOptions, String> {
    let not_object = || format!("@options must be a JSON object with supported fields {FIELDS}");
    if directive.is_empty() {
        return Err(not_object());
    }
    let v: Value = serde_json::from_str(directive)
        .map_err(|e| format!("@options must be valid JSON with supported fields {FIELDS}: {e}"))?;
    let Value::Object(m) = v else {
        return Err(not_object());
    };
    if let Some(k) = m
        .keys()
        .find(|k| *k != "max_output_tokens" && *k != "timeout_ms")
    {
        return Err(format!("@options only supports {FIELDS}; got `{k}`"));
    }
    let safe = |v: &Value| v.as_u64().filter(|n| *n <= 9_007_199_254_740_991);
    let mut o = ScriptOptions::default();
    if let Some(v) = m.get("max_output_tokens") {
        o.max_output_tokens = Some(safe(v).ok_or(
            "@options field `max_output_tokens` must be a non-negative safe integer".to_string(),
        )?);
    }
    if let Some(v) = m.get("timeout_ms") {
        o.timeout_ms = Some(
            safe(v)
                .filter(|n| *n > 0 && *n <= MAX_TIMEOUT_MS)
                .ok_or(format!(
                    "@options field `timeout_ms` must be a positive integer up to {MAX_TIMEOUT_MS}"
                ))?,
        );
    }
    Ok(o)
}

/// `load()`'s values on a branch: the `data` of its `codemode-store` entries, applied from the
/// root (`{set: {k: v}, delete: [k]}`).
pub fn fold_store<'a>(datas: impl Iterator<Item = &'a Value>) -> serde_json::Map<String, Value> {
    let mut store = serde_json::Map::new();
    for d in datas {
        let (Some(set), Some(del)) = (
            d.get("set").and_then(Value::as_object),
            d.get("delete").and_then(Value::as_array),
        ) else {
            continue;
        };
        if !del.iter().all(Value::is_string) {
            continue;
        }
        for k in del.iter().filter_map(Value::as_str) {
            store.remove(k);
        }
        for (k, v) in set {
            store.insert(k.clone(), v.clone());
        }
    }
    store
}

/// One item of a script's output.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Text(String),
    Console(String),
    Image { data: String, mime: String },
}

/// How a script ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    Completed {
        value: Option<String>,
    },
    /// The text after `Script error:` (without the call summary).
    Failed(String),
}

/// One nested call, as the `details.calls` rows show it.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRow {
    /// `<parent>/<n>`, or `<parent>/?` until the call has an id.
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// `running`, `ok`, `error`, `cancelled`.
    pub status: &'static str,
    pub duration_ms: Option<f64>,
    pub error: Option<String>,
}

impl CallRow {
    /// The row of `details.calls`.
    pub fn detail(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert("args".into(), Value::String(preview_args(&self.arguments)));
        m.insert("status".into(), Value::String(self.status.into()));
        if let Some(d) = self.duration_ms {
            m.insert("durationMs".into(), json!(d));
        }
        if let Some(e) = &self.error {
            m.insert("error".into(), Value::String(e.clone()));
        }
        Value::Object(m)
    }

    /// The row of the toolResult's `nestedCalls.calls`.
    pub fn record(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert("status".into(), Value::String(self.status.into()));
        m.insert("arguments".into(), self.arguments.clone());
        if let Some(d) = self.duration_ms {
            m.insert("durationMs".into(), json!(d.round() as u64));
        }
        // pi 1.6.0 keeps a failed call's error text in the record too.
        if let Some(e) = &self.error {
            m.insert("error".into(), Value::String(e.clone()));
        }
        Value::Object(m)
    }
}

/// `details` of the codemode result and its updates.
pub fn details(rows: &[CallRow]) -> Value {
    json!({"calls": rows.iter().map(CallRow::detail).collect::<Vec<_>>()})
}

/// Arguments as the rows preview them: compact JSON, cut at 200 characters.
fn preview_args(args: &Value) -> String {
    if args.is_null() {
        return String::new();
    }
    cut(&serde_json::to_string(args).unwrap_or_default(), 200)
}

/// `s` cut to `max` characters (the last three `...`).
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(3)).collect();
    out.push_str("...");
    out
}

/// Where long output and images go (a temp file; `Err` says why it could not be written).
pub trait Spill {
    fn save(&mut self, extension: &str, bytes: &[u8]) -> Result<String, String>;
}

/// The result's content: the header, the output items, the error; output over the token budget
/// is cut in the middle and saved whole; images are saved and named. Returns the content and
/// the path of the saved full output.
pub fn layout(
    ending: &Ending,
    items: Vec<Item>,
    rows: &[CallRow],
    options: &ScriptOptions,
    wall: std::time::Duration,
    spill: &mut dyn Spill,
) -> (Vec<Content>, Option<String>) {
    let mut items = items;
    if let Ending::Completed { value: Some(v) } = ending {
        items.push(Item::Text(v.clone()));
    }
    let total = items.iter().filter(|i| matches!(i, Item::Text(_))).count();
    let mut out: Vec<Item> = Vec::new();
    let mut console: Vec<String> = Vec::new();
    let mut n = 0;
    for item in items {
        match item {
            Item::Console(t) => console.push(t),
            Item::Text(t) => {
                n += 1;
                out.push(Item::Text(if total > 1 {
                    format!("==> text {n}/{total} <==\n{t}")
                } else {
                    t
                }))
            }
            image => out.push(image),
        }
    }
    if !console.is_empty() {
        out.push(Item::Text(format!(
            "<console_output>\n{}\n</console_output>",
            console.join("\n")
        )));
    }
    if let Ending::Failed(e) = ending {
        let summary = if rows.is_empty() {
            "No tool calls were made.".to_string()
        } else {
            format!(
                "Tool calls made before the failure (they are not undone): {}",
                rows.iter()
                    .map(|r| format!("{} ({})", r.name, r.status))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        out.push(Item::Text(format!("Script error:\n{e}\n\n{summary}")));
    }
    let out = join_texts(out);
    let budget = options
        .max_output_tokens
        .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
        .saturating_mul(CHARS_PER_TOKEN);
    let (out, full) = truncate(out, budget, spill);
    // Each image gets a text naming its file just before it (saved once per distinct image).
    let mut saved: Vec<(String, String)> = Vec::new();
    let mut labelled = Vec::new();
    for item in out {
        if let Item::Image { data, mime } = &item {
            let label = match saved.iter().find(|(d, _)| d == data) {
                Some((_, l)) => l.clone(),
                None => {
                    let l = image_label(data, mime, spill);
                    saved.push((data.clone(), l.clone()));
                    l
                }
            };
            labelled.push(Item::Text(label));
        }
        labelled.push(item);
    }
    let header = format!(
        "{}\nWall time {:.1} seconds\nOutput:\n",
        match ending {
            Ending::Completed { .. } => "Script completed",
            Ending::Failed(_) => "Script failed",
        },
        wall.as_secs_f64()
    );
    let mut content = vec![Content::text(header)];
    for item in join_texts(labelled) {
        match item {
            Item::Text(t) | Item::Console(t) => content.push(Content::text(t)),
            Item::Image { data, mime } => {
                content.push(Content::Image(crate::message::ImageContent {
                    data,
                    mime_type: mime,
                }))
            }
        }
    }
    (content, full)
}

fn image_label(data: &str, mime: &str, spill: &mut dyn Spill) -> String {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap_or_default();
    let kind = format!(
        "{mime}, {}",
        crate::tools::truncate::format_size(bytes.len())
    );
    let ext = match mime {
        "image/png" => ".png",
        "image/jpeg" => ".jpg",
        "image/gif" => ".gif",
        _ => ".webp",
    };
    match spill.save(ext, &bytes) {
        Ok(p) => format!("[Image saved to {p} ({kind})]"),
        Err(e) => format!("[Image ({kind}) could not be saved: {e}]"),
    }
}

/// Adjacent texts become one, each part on its own line.
fn join_texts(items: Vec<Item>) -> Vec<Item> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut last_nonempty_ends_nl = true;
    for item in items {
        match item {
            Item::Text(t) => {
                let s = cur.get_or_insert_with(String::new);
                if !last_nonempty_ends_nl {
                    s.push('\n');
                    last_nonempty_ends_nl = true;
                }
                if !t.is_empty() {
                    last_nonempty_ends_nl = t.ends_with('\n');
                }
                s.push_str(&t);
            }
            other => {
                if let Some(s) = cur.take() {
                    out.push(Item::Text(s));
                }
                last_nonempty_ends_nl = true;
                out.push(other);
            }
        }
    }
    if let Some(s) = cur {
        out.push(Item::Text(s));
    }
    out
}

fn truncate(items: Vec<Item>, budget: u64, spill: &mut dyn Spill) -> (Vec<Item>, Option<String>) {
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let combined = texts.join("\n");
    let len = combined.chars().count() as u64;
    if texts.is_empty() || len <= budget {
        return (items, None);
    }
    let head_n = (budget / 2) as usize;
    let tail_n = (budget as usize).saturating_sub(head_n);
    let removed = len as usize - head_n - tail_n;
    let head: String = combined.chars().take(head_n).collect();
    let tail: String = combined.chars().skip(len as usize - tail_n).collect();
    let mut text = format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {}\n\n{head}…{} tokens truncated…{tail}",
        len.div_ceil(CHARS_PER_TOKEN),
        combined.split('\n').count(),
        (removed as u64).div_ceil(CHARS_PER_TOKEN),
    );
    let full = match spill.save(".txt", combined.as_bytes()) {
        Ok(p) => {
            text.push_str(&format!("\n\n[Full output: {p} (read with offset/limit)]"));
            Some(p)
        }
        Err(e) => {
            text.push_str(&format!("\n\n[Could not save the full output: {e}]"));
            None
        }
    };
    let mut out = vec![Item::Text(text)];
    out.extend(
        items
            .into_iter()
            .filter(|i| matches!(i, Item::Image { .. })),
    );
    (out, full)
}

/// Temp files `<tmpdir>/pi-codemode-<hex><ext>`.
pub struct TempSpill;

impl Spill for TempSpill {
    fn save(&mut self, extension: &str, bytes: &[u8]) -> Result<String, String> {
        let dir = std::env::temp_dir();
        let mut last = String::new();
        for attempt in 0..8u64 {
            let path = dir.join(format!(
                "pi-codemode-{}{extension}",
                crate::tools::process::random_hex(attempt)
            ));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    use std::io::Write;
                    f.write_all(bytes).map_err(|e| e.to_string())?;
                    return Ok(path.to_string_lossy().into_owned());
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Mem(Vec<(String, usize)>);
    impl Spill for Mem {
        fn save(&mut self, ext: &str, bytes: &[u8]) -> Result<String, String> {
            self.0.push((ext.into(), bytes.len()));
            Ok(format!("/tmp/x{}{ext}", self.0.len()))
        }
    }

    fn texts(c: &[Content]) -> Vec<String> {
        c.iter()
            .map(|c| match c {
                Content::Text(t) => t.text.clone(),
                _ => "<image>".into(),
            })
            .collect()
    }

    #[test]
    fn presentation_on_and_only() {
        use crate::message::ToolDeclaration;
        let decl = |n: &str, d: &str| ToolDeclaration {
            name: n.into(),
            description: d.into(),
            parameters: json!({"type":"object","required":["path"],"properties":{"path":{"type":"string"},"n":{"type":"number"}}}),
            constrained_sampling: None,
        };
        let all = vec![
            decl("read", "Read it."),
            decl("my-tool", "Mine."),
            decl(NAME, "x"),
        ];
        let mut on = all.clone();
        annotate(&mut on, Presentation::default(), &|n| {
            ScriptView::builtin(n, &[])
        });
        assert!(
            on[1]
                .description
                .ends_with("\n\nCodemode: `tools.my_tool(args)` resolves to a string.")
        );
        let mut only = all.clone();
        annotate(
            &mut only,
            Presentation {
                only: true,
                inline_budget: 3000,
            },
            &|n| ScriptView::builtin(n, &[]),
        );
        // The tools stay declared (pi's active set); codemode lists them.
        assert_eq!(only.len(), 3);
        assert!(only[2].description.ends_with(
            "Nested tools:\n\n### `read`\nRead it.\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { read(args: { n?: number; path: string; }): Promise<string | { data: string; mimeType: string; note: string; type: \"image\"; }>; };\n```\n\n### `my_tool` (`my-tool`)\nMine.\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { my_tool(args: { n?: number; path: string; }): Promise<string>; };\n```"
        ), "{}", only[2].description);
        // A budget that fits one section keeps the cheaper one.
        let mut tight = all.clone();
        annotate(
            &mut tight,
            Presentation {
                only: true,
                inline_budget: 45,
            },
            &|n| ScriptView::builtin(n, &[]),
        );
        assert!(tight[2].description.contains("### `my_tool`"));
        assert!(!tight[2].description.contains("### `read`"));
        let mut none = all;
        annotate(
            &mut none,
            Presentation {
                only: true,
                inline_budget: 0,
            },
            &|n| ScriptView::builtin(n, &[]),
        );
        // None fits: pi's heading alone.
        assert!(none[2].description.ends_with("first.\n\nNested tools:"));
    }

    #[test]
    fn options_line() {
        assert_eq!(
            parse_source("// @options: {\"timeout_ms\": 5}\nreturn 1").unwrap(),
            (
                "\nreturn 1".to_string(),
                ScriptOptions {
                    max_output_tokens: None,
                    timeout_ms: Some(5)
                }
            )
        );
        assert_eq!(parse_source("x()").unwrap().0, "x()");
        assert!(
            parse_source("x()\n// @options: {}")
                .unwrap_err()
                .contains("found one on line 2")
        );
        assert!(
            parse_source("// @options: {\"a\":1}\nx")
                .unwrap_err()
                .contains("got `a`")
        );
        assert!(parse_source("// @options: {\"timeout_ms\":0}\nx").is_err());
        assert!(parse_source("  ").is_err());
        assert!(parse_source("// @options: {}\n ").is_err());
    }

    #[test]
    fn store_folds_sets_and_deletes() {
        let a = json!({"set": {"k": 1, "j": 2}, "delete": []});
        let b = json!({"set": {"k": 3}, "delete": ["j"]});
        let bad = json!({"set": 1});
        let s = fold_store([&a, &bad, &b].into_iter());
        assert_eq!(Value::Object(s), json!({"k": 3}));
    }

    #[test]
    fn layout_numbers_texts_and_reports_failures() {
        let mut m = Mem(Vec::new());
        let (c, full) = layout(
            &Ending::Completed { value: None },
            vec![Item::Text("AAA\n".into()), Item::Text("B".into())],
            &[],
            &ScriptOptions::default(),
            std::time::Duration::from_millis(260),
            &mut m,
        );
        assert_eq!(
            texts(&c),
            [
                "Script completed\nWall time 0.3 seconds\nOutput:\n",
                "==> text 1/2 <==\nAAA\n==> text 2/2 <==\nB"
            ]
        );
        assert!(full.is_none());
        let row = CallRow {
            id: "t/1".into(),
            name: "read".into(),
            arguments: json!({}),
            status: "ok",
            duration_ms: None,
            error: None,
        };
        let (c, _) = layout(
            &Ending::Failed("Error: x".into()),
            vec![Item::Text("{}".into()), Item::Console("log".into())],
            &[row],
            &ScriptOptions::default(),
            std::time::Duration::ZERO,
            &mut m,
        );
        assert_eq!(
            texts(&c)[1],
            "{}\n<console_output>\nlog\n</console_output>\nScript error:\nError: x\n\nTool calls made before the failure (they are not undone): read (ok)"
        );
    }

    #[test]
    fn layout_cuts_long_output_and_saves_images() {
        let mut m = Mem(Vec::new());
        let long = "x".repeat(100);
        let (c, full) = layout(
            &Ending::Completed {
                value: Some(long.clone()),
            },
            vec![Item::Image {
                data: "iVBORw0KGgo=".into(),
                mime: "image/png".into(),
            }],
            &[],
            &ScriptOptions {
                max_output_tokens: Some(5),
                timeout_ms: None,
            },
            std::time::Duration::ZERO,
            &mut m,
        );
        let t = texts(&c);
        assert!(t[1].starts_with("Warning: truncated output (original token count: 25)\nTotal output lines: 1\n\nxxxxxxxxxx…20 tokens truncated…xxxxxxxxxx\n\n[Full output: /tmp/x1.txt"), "{}", t[1]);
        assert!(
            t[1].ends_with("[Image saved to /tmp/x2.png (image/png, 8B)]"),
            "{}",
            t[1]
        );
        assert_eq!(t[2], "<image>");
        assert_eq!(full.as_deref(), Some("/tmp/x1.txt"));
    }
}
