//! Where pith keeps its files and what `settings.json` says.
//!
//! The layout is the reference's, so an existing `~/.pi/agent` works unchanged: the config dir is
//! `$PI_CODING_AGENT_DIR` (with `~` expanded) or `~/.pi/agent`; `settings.json` there is merged
//! with the project's `<cwd>/.pi/settings.json` (project wins, nested objects merged one level).
//! pith only reads settings: RPC setters change the running process, never the file (a
//! deliberate difference from the reference, see docs/rpc.md).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::message::ThinkingLevel;
use crate::rpc::command::QueueMode;

pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

pub fn expand_tilde(p: &str) -> PathBuf {
    if p == "~" {
        return home_dir().unwrap_or_else(|| PathBuf::from(p));
    }
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(h) = home_dir() {
            return h.join(rest);
        }
    }
    PathBuf::from(p)
}

/// `$PI_CODING_AGENT_DIR` or `~/.pi/agent`.
pub fn agent_dir() -> PathBuf {
    match std::env::var("PI_CODING_AGENT_DIR") {
        Ok(d) if !d.is_empty() => expand_tilde(&d),
        _ => home_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".pi")
            .join("agent"),
    }
}

/// The effective settings (global merged with project), with typed accessors for what pith uses.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    raw: Map<String, Value>,
    /// The two files as read (resource paths resolve against their own file's directory).
    global: Map<String, Value>,
    project: Map<String, Value>,
}

impl Settings {
    /// Load and merge both files. A missing file is empty; a malformed one is a warning (returned
    /// for stderr) and counts as empty.
    pub fn load(agent_dir: &Path, cwd: &Path) -> (Settings, Vec<String>) {
        let mut warnings = Vec::new();
        let global = read_object(&agent_dir.join("settings.json"), &mut warnings);
        let project = read_object(&cwd.join(".pi").join("settings.json"), &mut warnings);
        let mut raw = global.clone();
        for (k, v) in project.clone() {
            match (raw.get_mut(&k), v) {
                (Some(Value::Object(base)), Value::Object(over)) => {
                    for (k2, v2) in over {
                        base.insert(k2, v2);
                    }
                }
                (_, v) => {
                    raw.insert(k, v);
                }
            }
        }
        (
            Settings {
                raw,
                global,
                project,
            },
            warnings,
        )
    }

    /// Only the global `settings.json` (an untrusted project's own file is ignored).
    pub fn load_global(agent_dir: &Path) -> (Settings, Vec<String>) {
        let mut warnings = Vec::new();
        let raw = read_object(&agent_dir.join("settings.json"), &mut warnings);
        (
            Settings {
                global: raw.clone(),
                raw,
                project: Map::new(),
            },
            warnings,
        )
    }

    /// The merged settings as read (pi's `getSettings()`).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// What [`Settings::load_global`] would read, from the file already read.
    pub fn global_only(&self) -> Settings {
        Settings {
            raw: self.global.clone(),
            global: self.global.clone(),
            project: Map::new(),
        }
    }

    /// `defaultProjectTrust` (pi 0.79): `always`, `never` or `ask`.
    pub fn default_project_trust(&self) -> Option<&str> {
        self.str("defaultProjectTrust")
    }

    pub fn from_value(v: Value) -> Settings {
        let raw = v.as_object().cloned().unwrap_or_default();
        Settings {
            global: raw.clone(),
            raw,
            project: Map::new(),
        }
    }

    /// The config dir's settings.json as read.
    pub fn global(&self) -> &Map<String, Value> {
        &self.global
    }

    /// The project's `.pi/settings.json` as read.
    pub fn project(&self) -> &Map<String, Value> {
        &self.project
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.raw.get(key)
    }

    fn nested(&self, obj: &str, key: &str) -> Option<&Value> {
        self.raw.get(obj).and_then(|o| o.get(key))
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    pub fn default_provider(&self) -> Option<&str> {
        self.str("defaultProvider")
    }
    pub fn default_model(&self) -> Option<&str> {
        self.str("defaultModel")
    }
    /// `sessionDir`: where new sessions are written (`~` expanded; a relative path is taken as
    /// given, from the working directory).
    pub fn session_dir(&self) -> Option<PathBuf> {
        self.str("sessionDir")
            .filter(|d| !d.is_empty())
            .map(expand_tilde)
    }
    /// `thinkingBudgets`: `{minimal?, low?, medium?, high?}` token budgets (whole numbers).
    pub fn thinking_budgets(&self) -> [Option<u64>; 4] {
        let b = self.get("thinkingBudgets");
        ["minimal", "low", "medium", "high"]
            .map(|k| b.and_then(|b| b.get(k)).and_then(Value::as_u64))
    }
    pub fn default_thinking_level(&self) -> Option<ThinkingLevel> {
        self.str("defaultThinkingLevel")
            .and_then(ThinkingLevel::parse)
    }
    /// pi 0.87.1's per-model level: `modelThinkingLevels["<provider>/<id>"]`.
    pub fn model_thinking_level(&self, provider: &str, id: &str) -> Option<ThinkingLevel> {
        self.get("modelThinkingLevels")?
            .get(format!("{provider}/{id}"))?
            .as_str()
            .and_then(ThinkingLevel::parse)
    }
    /// `steeringMode` (legacy `queueMode`); anything but "one-at-a-time" means "all", as the reference.
    pub fn steering_mode(&self) -> QueueMode {
        queue_mode(self.str("steeringMode").or_else(|| self.str("queueMode")))
    }
    pub fn follow_up_mode(&self) -> QueueMode {
        queue_mode(self.str("followUpMode"))
    }
    pub fn compaction_enabled(&self) -> bool {
        self.nested("compaction", "enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }
    pub fn compaction_reserve_tokens(&self) -> u64 {
        self.nested("compaction", "reserveTokens")
            .and_then(Value::as_u64)
            .unwrap_or(16384)
    }
    pub fn compaction_keep_recent_tokens(&self) -> u64 {
        self.nested("compaction", "keepRecentTokens")
            .and_then(Value::as_u64)
            .unwrap_or(20000)
    }
    pub fn retry_enabled(&self) -> bool {
        self.nested("retry", "enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }
    pub fn retry_max_retries(&self) -> u32 {
        self.nested("retry", "maxRetries")
            .and_then(Value::as_u64)
            .map(|v| v.min(1000) as u32)
            .unwrap_or(3)
    }
    pub fn retry_base_delay_ms(&self) -> u64 {
        self.nested("retry", "baseDelayMs")
            .and_then(Value::as_u64)
            .unwrap_or(2000)
    }
    /// pi 0.87.1's cap on agent-level retry delays (`retry.maxAgentDelayMs`, default 60 s).
    pub fn retry_max_agent_delay_ms(&self) -> u64 {
        self.nested("retry", "maxAgentDelayMs")
            .and_then(Value::as_u64)
            .unwrap_or(60_000)
    }
    pub fn retry_max_delay_ms(&self) -> u64 {
        self.nested("retry", "maxDelayMs")
            .and_then(Value::as_u64)
            .unwrap_or(60000)
    }
    /// `codemode.mode` and `codemode.inlineBudget` (pi 1.6.0; docs/codemode.md).
    pub fn codemode_presentation(&self) -> crate::codemode::Presentation {
        crate::codemode::Presentation {
            only: self.nested("codemode", "mode").and_then(Value::as_str) == Some("only"),
            inline_budget: self
                .nested("codemode", "inlineBudget")
                .and_then(Value::as_f64)
                .filter(|b| b.is_finite() && *b >= 0.0)
                .map_or(crate::codemode::DEFAULT_INLINE_BUDGET, |b| b as u64),
        }
    }
    pub fn shell_path(&self) -> Option<&str> {
        self.str("shellPath")
    }
    pub fn shell_command_prefix(&self) -> Option<&str> {
        self.str("shellCommandPrefix")
    }
    pub fn enabled_models(&self) -> Vec<String> {
        match self.get("enabledModels") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        }
    }
    /// `defaultTools`: the tools active when `--tools` is not given (`None`: pi's four).
    /// With `modifiers` (pi 1.6.0), `+name` / `-name` entries change pi's four (or the plain
    /// names listed with them), and a project list of only such entries extends the global
    /// list instead of replacing it. Without (0.87.1), the list as merged, every entry a name.
    pub fn default_tools(&self, modifiers: bool) -> Option<Vec<String>> {
        let strings = |v: &Value| -> Option<Vec<String>> {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
        };
        if !modifiers {
            return self.get("defaultTools").and_then(strings);
        }
        use crate::tools::selection::{apply_modifiers, is_modifier};
        let global = self.global.get("defaultTools");
        let project = self.project.get("defaultTools");
        let entries: Vec<String> = match (global, project) {
            (g, None) => strings(g?)?,
            (Some(g @ Value::Array(_)), Some(p @ Value::Array(pa)))
                if pa.iter().all(|e| e.as_str().is_some_and(is_modifier)) =>
            {
                let mut all = strings(g)?;
                all.extend(strings(p)?);
                all
            }
            (_, Some(p)) => strings(p).unwrap_or_default(),
        };
        let plain: Vec<String> = entries
            .iter()
            .filter(|e| !is_modifier(e))
            .cloned()
            .collect();
        let base = if !plain.is_empty() || entries.is_empty() {
            plain
        } else {
            crate::tools::DEFAULT_TOOLS
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        Some(apply_modifiers(&base, &entries))
    }
    pub fn block_images(&self) -> bool {
        self.nested("images", "blockImages")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
    /// pith's own: `pith.compat` ("0.73" or "0.87"); None when absent or unknown.
    pub fn protocol_version(&self) -> Option<crate::protocol::Version> {
        self.nested("pith", "compat")
            .and_then(Value::as_str)
            .and_then(crate::protocol::Version::parse)
    }
    /// pith's own: seconds without a byte from the provider before the stream is failed (default 120).
    pub fn stream_stall_timeout_secs(&self) -> u64 {
        self.nested("pith", "streamStallTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(120)
    }
    /// pith's own: after stdin closed, seconds without any progress (no stream delta, no tool
    /// output or result) before the work still running is aborted and pith exits (default 300).
    pub fn eof_idle_timeout_secs(&self) -> u64 {
        self.nested("pith", "eofIdleTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(300)
    }
    /// pith's own: `pith.limits` (`limits.rs`), run limits of every prompt; an invalid
    /// object is an error (a limit must not silently vanish).
    pub fn limits(&self) -> Result<crate::limits::Limits, String> {
        match self.nested("pith", "limits") {
            None | Some(Value::Null) => Ok(Default::default()),
            Some(v) => crate::limits::Limits::from_json(v)
                .map_err(|e| format!("settings.json: pith.limits: {e}")),
        }
    }
    /// `cacheWarming` (pi 1.6.0: `"off"`, `"streaming"` or `"idle"`, default `"idle"`; a global
    /// setting only). pith keeps no provider cache warm: it never sends a request nobody asked
    /// for. A stderr note when the user's settings ask for warming (docs/rpc.md); `None` when
    /// the setting is absent, `"off"`, or a value pi itself ignores.
    pub fn cache_warming_note(&self) -> Option<String> {
        let mode = self.global.get("cacheWarming")?.as_str()?;
        matches!(mode, "streaming" | "idle").then(|| {
            format!(
                "pith: cacheWarming \"{mode}\" is not honoured: pith sends no cache-warming requests (it acts as \"off\")"
            )
        })
    }
    /// `mcpServers` (the widely used MCP client format; merged by server name like any object).
    pub fn mcp_servers(&self) -> Option<&Value> {
        self.get("mcpServers")
    }
    /// pith's own: `pith.confirmTools` (a comma list, `all`, or an array of tool names). A
    /// project only adds tools to the user's list: it can never lower it.
    pub fn confirm_tools(&self) -> Option<crate::perms::approval::ConfirmTools> {
        let user = own(&self.global, "confirmTools")
            .and_then(crate::perms::approval::ConfirmTools::from_setting);
        let project = self.project_confirm_tools();
        match (user, project) {
            (None, None) => None,
            (u, p) => Some(u.unwrap_or_default().union(p.unwrap_or_default())),
        }
    }
    /// The project's own `pith.confirmTools` (added to the user's or the command line's).
    pub fn project_confirm_tools(&self) -> Option<crate::perms::approval::ConfirmTools> {
        own(&self.project, "confirmTools")
            .and_then(crate::perms::approval::ConfirmTools::from_setting)
    }
    /// pith's own: `pith.permissions` of the user's settings and of the project's, each as
    /// written (they are merged by [`crate::perms::Policy::build`], where a project can only
    /// tighten).
    pub fn permissions(&self) -> (Option<&Value>, Option<&Value>) {
        (
            own(&self.global, "permissions"),
            own(&self.project, "permissions"),
        )
    }
    /// pith's own: seconds a `--confirm-tools` dialog waits (default 60; 0 = no limit).
    pub fn confirm_timeout_secs(&self) -> u64 {
        self.nested("pith", "confirmTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(60)
    }
    /// pith's own: seconds an extension has to register and to answer each call (default 60).
    pub fn extension_timeout_secs(&self) -> u64 {
        self.nested("pith", "extensionTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(60)
    }
    /// pith's own: the node that hosts pi's TypeScript extensions (`PITH_NODE` wins).
    pub fn node_path(&self) -> Option<&str> {
        self.nested("pith", "node").and_then(Value::as_str)
    }
    /// pith's own: seconds an extension's tool may run without a `tool_update` (default 600).
    pub fn extension_tool_timeout_secs(&self) -> u64 {
        self.nested("pith", "extensionToolTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(600)
    }
    /// pith's own: seconds an MCP server has for `initialize` and `tools/list` (default 30).
    pub fn mcp_startup_timeout_secs(&self) -> u64 {
        self.nested("pith", "mcpStartupTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(30)
    }
    /// pith's own: seconds an MCP `tools/call` may take without progress (default 120).
    pub fn mcp_tool_timeout_secs(&self) -> u64 {
        self.nested("pith", "mcpToolTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(120)
    }
    /// pith's own: seconds to wait for a TCP/TLS connection (default 30).
    pub fn connect_timeout_secs(&self) -> u64 {
        self.nested("pith", "connectTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(30)
    }
}

/// `pith.<key>` of one file.
fn own<'a>(file: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    file.get("pith").and_then(|p| p.get(key))
}

fn queue_mode(v: Option<&str>) -> QueueMode {
    match v {
        None | Some("one-at-a-time") => QueueMode::OneAtATime,
        Some(_) => QueueMode::All,
    }
}

fn read_object(path: &Path, warnings: &mut Vec<String>) -> Map<String, Value> {
    let text = match crate::files::read_text(path) {
        Ok(t) => t,
        Err(e) => {
            warnings.extend(e.warning(path));
            return Map::new();
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            warnings.push(format!(
                "Warning: {} is not a JSON object; ignored",
                path.display()
            ));
            Map::new()
        }
        Err(e) => {
            warnings.push(format!(
                "Warning: cannot parse {}: {e}; ignored",
                path.display()
            ));
            Map::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_settings_override_global_one_level_deep() {
        let g = tempfile::tempdir().unwrap();
        let c = tempfile::tempdir().unwrap();
        std::fs::write(
            g.path().join("settings.json"),
            r#"{"retry":{"enabled":false,"maxRetries":5},"steeringMode":"all"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(c.path().join(".pi")).unwrap();
        std::fs::write(
            c.path().join(".pi/settings.json"),
            r#"{"retry":{"maxRetries":2}}"#,
        )
        .unwrap();
        let (s, w) = Settings::load(g.path(), c.path());
        assert!(w.is_empty());
        assert!(!s.retry_enabled());
        assert_eq!(s.retry_max_retries(), 2);
        assert_eq!(s.steering_mode(), QueueMode::All);
        assert_eq!(s.follow_up_mode(), QueueMode::OneAtATime);
    }

    #[test]
    fn a_project_cannot_lower_confirm_tools() {
        use crate::perms::approval::ConfirmTools;
        let g = tempfile::tempdir().unwrap();
        let c = tempfile::tempdir().unwrap();
        std::fs::write(
            g.path().join("settings.json"),
            r#"{"pith":{"confirmTools":"all","permissions":{"deny":["bash"]}}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(c.path().join(".pi")).unwrap();
        std::fs::write(
            c.path().join(".pi/settings.json"),
            r#"{"confirmTools":"none","pith":{"confirmTools":"none","permissions":{"allow":["*"]}}}"#,
        )
        .unwrap();
        let (s, _) = Settings::load(g.path(), c.path());
        assert_eq!(s.confirm_tools(), Some(ConfirmTools::All));
        let (user, project) = s.permissions();
        assert_eq!(user.unwrap()["deny"][0], "bash");
        assert_eq!(project.unwrap()["allow"][0], "*");
        std::fs::write(g.path().join("settings.json"), "{}").unwrap();
        std::fs::write(
            c.path().join(".pi/settings.json"),
            r#"{"pith":{"confirmTools":["write"]}}"#,
        )
        .unwrap();
        let (s, _) = Settings::load(g.path(), c.path());
        assert_eq!(
            s.confirm_tools(),
            Some(ConfirmTools::Some(vec!["write".into()]))
        );
    }

    #[test]
    fn cache_warming_is_accepted_and_noted_when_asked_for() {
        let g = tempfile::tempdir().unwrap();
        let c = tempfile::tempdir().unwrap();
        let note = |global: &str, project: Option<&str>| {
            std::fs::write(g.path().join("settings.json"), global).unwrap();
            if let Some(p) = project {
                std::fs::create_dir_all(c.path().join(".pi")).unwrap();
                std::fs::write(c.path().join(".pi/settings.json"), p).unwrap();
            }
            Settings::load(g.path(), c.path()).0.cache_warming_note()
        };
        assert_eq!(note("{}", None), None);
        assert_eq!(note(r#"{"cacheWarming":"off"}"#, None), None);
        assert_eq!(note(r#"{"cacheWarming":"sometimes"}"#, None), None);
        assert_eq!(
            note(r#"{"cacheWarming":"idle"}"#, None).as_deref(),
            Some(
                "pith: cacheWarming \"idle\" is not honoured: pith sends no cache-warming requests (it acts as \"off\")"
            )
        );
        assert!(note(r#"{"cacheWarming":"streaming"}"#, None).is_some());
        // A global setting only: the project's is not read.
        assert_eq!(note("{}", Some(r#"{"cacheWarming":"idle"}"#)), None);
    }

    #[test]
    fn malformed_settings_is_a_warning() {
        let g = tempfile::tempdir().unwrap();
        std::fs::write(g.path().join("settings.json"), "{nope").unwrap();
        let (s, w) = Settings::load(g.path(), g.path());
        assert_eq!(w.len(), 1);
        assert!(s.compaction_enabled());
    }
}
