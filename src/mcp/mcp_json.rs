//! pi's `mcp.json` (pi 1.6.0, `--compat 1.6`), pure: `<agentDir>/mcp.json`, then the trusted
//! project's `.pi/mcp.json`. A project entry replaces a global one of the same name; a project
//! entry without `command`, `url` or `type` only overrides `enabled`, `exposure` and
//! `toolExposure` of the global entry (so a checkout cannot point a user's credentials
//! elsewhere). `type` is `stdio`, `http` or `streamable-http` (the legacy `sse` is refused);
//! `~/` names the home directory in `command`, `args` and `cwd`; a relative `cwd` is the
//! session directory's; `env` and `headers` values take `$VAR` / `${VAR}` (`$$` and `$!` escape)
//! or a whole-value `!command`. An invalid entry is an error line and is skipped; the others
//! still start. Disabled servers are kept (listed by `/mcp`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::config::{Exposure, OAuthClient, ServerConfig, Transport};

/// What the files say.
#[derive(Debug, Default)]
pub struct McpJson {
    pub servers: Vec<ServerConfig>,
    /// Top-level `autoEnableCodemode` (the project's wins); None: not set (pi's default: true).
    pub auto_enable_codemode: Option<bool>,
    /// One line per problem, `<file>: <what>` (pi's wording).
    pub errors: Vec<String>,
}

/// Where values come from: the environment, the home directory, `!command` output.
pub struct Inputs<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub home: Option<PathBuf>,
    /// Runs a `!command` value: its trimmed output, or None when it failed.
    pub run: &'a dyn Fn(&str) -> Option<String>,
}

const OVERRIDE_KEYS: [&str; 3] = ["enabled", "exposure", "toolExposure"];

/// Read both files. `read`: a file's text (None: missing); `session_dir`: where a relative `cwd`
/// resolves.
pub fn load(
    agent_dir: &Path,
    project: Option<&Path>,
    session_dir: &Path,
    read: &dyn Fn(&Path) -> Result<Option<String>, String>,
    inputs: &Inputs,
) -> McpJson {
    let mut out = McpJson::default();
    let mut slots: Vec<Slot> = Vec::new();
    let global = agent_dir.join("mcp.json");
    let mut cx = Cx {
        read,
        inputs,
        session_dir,
        slots: &mut slots,
        out: &mut out,
    };
    cx.read_file(&global, false);
    if let Some(p) = project {
        cx.read_file(&p.join(".pi").join("mcp.json"), true);
    }
    out.servers = slots.into_iter().map(|s| s.config).collect();
    out
}

/// A server read so far: its raw entry (what a project override merges into) and its config.
struct Slot {
    raw: Map<String, Value>,
    config: ServerConfig,
}

struct Cx<'a> {
    read: &'a dyn Fn(&Path) -> Result<Option<String>, String>,
    inputs: &'a Inputs<'a>,
    session_dir: &'a Path,
    slots: &'a mut Vec<Slot>,
    out: &'a mut McpJson,
}

impl Cx<'_> {
    fn read_file(&mut self, path: &Path, project: bool) {
        let out = &mut *self.out;
        let text = match (self.read)(path) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                out.errors.push(format!("{}: {e}", path.display()));
                return;
            }
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let parsed: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                out.errors.push(format!("{}: {e}", path.display()));
                return;
            }
        };
        let servers = match &parsed {
            Value::Object(m) => match m.get("mcpServers") {
                None => None,
                Some(Value::Object(s)) => Some(s),
                Some(_) => {
                    out.errors.push(format!(
                        "{}: expected an object with an \"mcpServers\" object",
                        path.display()
                    ));
                    return;
                }
            },
            _ => {
                out.errors.push(format!(
                    "{}: expected an object with an \"mcpServers\" object",
                    path.display()
                ));
                return;
            }
        };
        match parsed.get("autoEnableCodemode") {
            None => {}
            Some(Value::Bool(b)) => out.auto_enable_codemode = Some(*b),
            Some(_) => out.errors.push(format!(
                "{}: autoEnableCodemode must be a boolean",
                path.display()
            )),
        }
        let Some(servers) = servers else { return };
        for (name, value) in servers {
            let Some(entry) = value.as_object() else {
                out.errors.push(format!(
                    "{}: server \"{name}\" must be an object",
                    path.display()
                ));
                continue;
            };
            if project && is_override(entry) {
                let Some(slot) = self.slots.iter_mut().find(|s| &s.config.name == name) else {
                    out.errors.push(format!(
                    "{}: server \"{name}\" needs \"command\" or \"url\", or a global server to override",
                    path.display()
                ));
                    continue;
                };
                if entry.keys().any(|k| !OVERRIDE_KEYS.contains(&k.as_str())) {
                    out.errors.push(format!(
                        "{}: server \"{name}\": an override can only set {}",
                        path.display(),
                        OVERRIDE_KEYS.join(", ")
                    ));
                    continue;
                }
                let mut merged = slot.raw.clone();
                for (k, v) in entry {
                    merged.insert(k.clone(), v.clone());
                }
                match server(
                    name,
                    &merged,
                    &slot.config.source,
                    self.session_dir,
                    self.inputs,
                ) {
                    Ok(c) => {
                        slot.raw = merged;
                        slot.config = c;
                    }
                    Err(e) => out.errors.push(format!("{}: {e}", path.display())),
                }
                continue;
            }
            let config = match server(name, entry, path, self.session_dir, self.inputs) {
                Ok(c) => c,
                Err(e) => {
                    out.errors.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            if let Some(other) = self.slots.iter().find(|s| {
                &s.config.name != name && namespace_key(&s.config.name) == namespace_key(name)
            }) {
                out.errors.push(format!(
                    "{}: server \"{name}\" conflicts with \"{}\"",
                    path.display(),
                    other.config.name
                ));
                continue;
            }
            let item = Slot {
                raw: entry.clone(),
                config,
            };
            match self.slots.iter_mut().find(|s| &s.config.name == name) {
                Some(slot) => *slot = item,
                None => self.slots.push(item),
            }
        }
    }
}

/// An entry that overrides instead of defining: no `command`, `url` or `type`.
fn is_override(entry: &Map<String, Value>) -> bool {
    !entry.contains_key("command") && !entry.contains_key("url") && !entry.contains_key("type")
}

fn namespace_key(name: &str) -> String {
    name.replace('-', "_")
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn exposure(v: &Value) -> Option<Exposure> {
    v.as_str().and_then(Exposure::parse)
}

const EXPOSURES: &str = "\"codemode\", \"deferred\", \"direct\", \"hidden\"";

fn server(
    name: &str,
    e: &Map<String, Value>,
    source: &Path,
    session_dir: &Path,
    inputs: &Inputs,
) -> Result<ServerConfig, String> {
    if !valid_name(name) {
        return Err(format!(
            "invalid server name \"{name}\" (use letters, digits, \"_\" and \"-\")"
        ));
    }
    let fail = |what: &str| Err(format!("server \"{name}\": {what}"));
    let enabled = match e.get("enabled") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return fail("enabled must be a boolean"),
    };
    let description = match e.get("description") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return fail("description must be a string"),
    };
    let timeout = match e.get("timeout") {
        None => None,
        Some(Value::Number(n)) if n.as_f64().is_some_and(|t| t > 0.0 && t.is_finite()) => {
            let secs = n.as_f64().unwrap_or(60.0).min(1e9);
            Some(std::time::Duration::from_secs_f64(secs))
        }
        Some(_) => return fail("timeout must be a positive number of seconds"),
    };
    let ty = e.get("type").and_then(Value::as_str);
    if ty == Some("sse") {
        return fail("legacy SSE transport is not supported; use the streamable HTTP URL");
    }
    let mut start_error: Option<String> = None;
    let transport = match (e.get("url"), e.get("command")) {
        (Some(Value::String(url)), _) if matches!(ty, None | Some("http" | "streamable-http")) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
                return fail("url must be an http or https URL");
            }
            let mut headers = Vec::new();
            match e.get("headers") {
                None => {}
                Some(Value::Object(h)) => {
                    if h.values().any(|v| !v.is_string()) {
                        return fail("headers must map names to strings");
                    }
                    for (k, v) in h {
                        match resolve_value(v.as_str().unwrap_or_default(), inputs) {
                            Ok(v) => headers.push((k.clone(), v)),
                            Err(u) if start_error.is_none() => {
                                let what = format!("MCP server \"{name}\" header \"{k}\"");
                                start_error = Some(u.pi_text(&what));
                            }
                            Err(_) => {}
                        }
                    }
                }
                Some(_) => return fail("headers must map names to strings"),
            }
            if e.contains_key("auth") {
                return fail(
                    "auth (a /login provider's credential) is not supported by pith; use headers",
                );
            }
            let oauth_client = oauth_client(e.get("oauth"), inputs)
                .map_err(|m| format!("server \"{name}\": {m}"))?;
            Transport::Http {
                url: url.clone(),
                headers,
                oauth_client,
            }
        }
        (_, Some(Value::String(command))) if matches!(ty, None | Some("stdio")) => {
            let args = match e.get("args") {
                None => Vec::new(),
                Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| expand_home(s, inputs))
                    .collect(),
                Some(_) => return fail("args must be an array of strings"),
            };
            let mut env = Vec::new();
            match e.get("env") {
                None => {}
                Some(Value::Object(m)) => {
                    if m.values().any(|v| !v.is_string()) {
                        return fail("env must map names to strings");
                    }
                    for (k, v) in m {
                        match resolve_value(v.as_str().unwrap_or_default(), inputs) {
                            Ok(v) => env.push((k.clone(), v)),
                            Err(u) if start_error.is_none() => {
                                let what = format!("MCP server \"{name}\" env \"{k}\"");
                                start_error = Some(u.pi_text(&what));
                            }
                            Err(_) => {}
                        }
                    }
                }
                Some(_) => return fail("env must map names to strings"),
            }
            let cwd = match e.get("cwd") {
                None => session_dir.to_path_buf(),
                Some(Value::String(c)) => session_dir.join(expand_home(c, inputs)),
                Some(_) => return fail("cwd must be a string"),
            };
            Transport::Stdio {
                command: expand_home(command, inputs),
                args,
                env,
                cwd: Some(cwd),
            }
        }
        _ => {
            // pi 1.6.0's text has no colon after the name here.
            return Err(format!(
                "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
            ));
        }
    };
    let exposure = match e.get("exposure") {
        None => Exposure::Codemode,
        Some(v) => match self::exposure(v) {
            Some(x) => x,
            None => return fail(&format!("exposure must be one of {EXPOSURES}")),
        },
    };
    let mut tool_exposure = Vec::new();
    match e.get("toolExposure") {
        None => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                match self::exposure(v) {
                    Some(x) => tool_exposure.push((k.clone(), x)),
                    None => {
                        return fail(&format!("toolExposure \"{k}\" must be one of {EXPOSURES}"));
                    }
                }
            }
        }
        Some(_) => return fail("toolExposure must map tool names to exposures"),
    }
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        exposure,
        tool_exposure,
        description,
        timeout,
        enabled,
        source: source.to_path_buf(),
        start_error,
    })
}

fn expand_home(s: &str, inputs: &Inputs) -> String {
    match &inputs.home {
        Some(h) if s == "~" => h.display().to_string(),
        Some(h) if s.starts_with("~/") => h.join(&s[2..]).display().to_string(),
        _ => s.to_string(),
    }
}

/// `oauth`, checked as pi 1.6.0 checks it. Only the registered client (`clientId`, with
/// `clientSecret` taking `${VAR}` / `!command` like a header) matters to pith, which refreshes
/// the tokens pi's sign-in stored; the other settings (callback, client name, registration,
/// metadata URL, scope) shape the interactive sign-in, which is pi's.
fn oauth_client(v: Option<&Value>, inputs: &Inputs) -> Result<Option<OAuthClient>, String> {
    let Some(v) = v else { return Ok(None) };
    let Some(o) = v.as_object() else {
        return Err("oauth must be an object".into());
    };
    let string = |k: &str| -> Result<Option<&str>, String> {
        match o.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("oauth.{k} must be a string")),
        }
    };
    let client_id = string("clientId")?;
    let secret = string("clientSecret")?;
    let port = match o.get("callbackPort") {
        None => None,
        Some(p) => match p.as_u64().filter(|p| (1..=65535).contains(p)) {
            Some(p) => Some(p),
            None => return Err("oauth.callbackPort must be a port number".into()),
        },
    };
    if let Some(cb) = o.get("callbackUrl") {
        let url = cb.as_str().and_then(loopback_redirect).ok_or_else(|| {
            "oauth.callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] without query or fragment".to_string()
        })?;
        if let (Some(a), Some(b)) = (url, port) {
            if a != b {
                return Err("oauth.callbackUrl and oauth.callbackPort name different ports".into());
            }
        }
    }
    string("scope")?;
    match o.get("clientName") {
        None => {}
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        Some(_) => return Err("oauth.clientName must be a non-empty string".into()),
    }
    match o.get("clientRegistration").map(|r| r.as_str()) {
        None | Some(Some("auto" | "dcr")) => {}
        Some(Some("cimd")) => {
            if client_id.is_some() || o.contains_key("clientName") {
                return Err("oauth.clientRegistration \"cimd\" cannot be combined with oauth.clientId or oauth.clientName".into());
            }
        }
        Some(_) => {
            return Err("oauth.clientRegistration must be \"auto\", \"dcr\", or \"cimd\"".into());
        }
    }
    if let Some(m) = o.get("authServerMetadataUrl") {
        let ok = m.as_str().is_some_and(|u| {
            u.starts_with("https://") || (u.starts_with("http://") && loopback_host(u))
        });
        if !ok {
            return Err("oauth.authServerMetadataUrl must be an https URL, or http on localhost, 127.0.0.1, or [::1]".into());
        }
    }
    let Some(client_id) = client_id else {
        return Ok(None);
    };
    let client_secret = match secret {
        Some(s) => Some(resolve_value(s, inputs).map_err(|m| format!("oauth.clientSecret: {m}"))?),
        None => None,
    };
    Ok(Some(OAuthClient {
        client_id: client_id.to_string(),
        client_secret: client_secret.filter(|s| !s.is_empty()),
    }))
}

/// The host of an `http://` URL is loopback (`localhost`, `127.0.0.1`, `[::1]`).
fn loopback_host(url: &str) -> bool {
    let rest = url.strip_prefix("http://").unwrap_or("");
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6
            .split(']')
            .next()
            .map(|h| format!("[{h}]"))
            .unwrap_or_default(),
        None => authority
            .split(':')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase(),
    };
    matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

/// A loopback redirect URI without query or fragment: `Some(port)` (`None` inside when it names
/// none); `None` when it is not one.
fn loopback_redirect(url: &str) -> Option<Option<u64>> {
    if !url.starts_with("http://") || !loopback_host(url) || url.contains(['?', '#']) {
        return None;
    }
    let authority = url["http://".len()..].split('/').next().unwrap_or("");
    let port = authority
        .rsplit_once(':')
        .and_then(|(h, p)| (!h.is_empty() && !p.contains(']')).then(|| p.parse::<u64>().ok()));
    match port {
        Some(None) => None,
        Some(p) => Some(p),
        None => Some(None),
    }
}

/// A value of `env` or `headers`: `!command` (the whole value) runs it; otherwise `$VAR` and
/// `${VAR}` are replaced (an unset or empty variable is an error), `$$` is `$` and `$!` is `!`.
pub fn resolve_value(v: &str, inputs: &Inputs) -> Result<String, Unresolved> {
    if let Some(cmd) = v.strip_prefix('!') {
        return (inputs.run)(cmd).ok_or_else(|| Unresolved::Command(cmd.to_string()));
    }
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    let mut missing: Vec<String> = Vec::new();
    let mut var = |name: &str| match (inputs.env)(name).filter(|x| !x.is_empty()) {
        Some(x) => Ok::<String, Unresolved>(x),
        None => {
            if !missing.iter().any(|m| m == name) {
                missing.push(name.to_string());
            }
            Ok(String::new())
        }
    };
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.chars().next() {
            Some(c @ ('$' | '!')) => {
                out.push(c);
                rest = &after[1..];
            }
            Some('{') => match after.find('}') {
                Some(end) if is_var_name(&after[1..end]) => {
                    out.push_str(&var(&after[1..end])?);
                    rest = &after[end + 1..];
                }
                Some(end) => {
                    out.push('$');
                    out.push_str(&after[..=end]);
                    rest = &after[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            },
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let len = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                out.push_str(&var(&after[..len])?);
                rest = &after[len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    if !missing.is_empty() {
        return Err(Unresolved::Vars(missing));
    }
    Ok(out)
}

/// Why a configured value could not be resolved.
#[derive(Debug, PartialEq)]
pub enum Unresolved {
    /// These variables are unset or empty.
    Vars(Vec<String>),
    /// This command failed.
    Command(String),
}

impl Unresolved {
    /// pi 1.6.0's words, `what` naming the value (`MCP server "x" header "H"`).
    pub fn pi_text(&self, what: &str) -> String {
        match self {
            Unresolved::Vars(v) if v.len() == 1 => {
                format!(
                    "Failed to resolve {what} from environment variable: {}",
                    v[0]
                )
            }
            Unresolved::Vars(v) => format!(
                "Failed to resolve {what} from environment variables: {}",
                v.join(", ")
            ),
            Unresolved::Command(c) => format!("Failed to resolve {what} from shell command: {c}"),
        }
    }
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unresolved::Vars(v) => write!(f, "environment variable {} is not set", v.join(", ")),
            Unresolved::Command(c) => write!(f, "command failed: {c}"),
        }
    }
}

fn is_var_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn inputs() -> Inputs<'static> {
        Inputs {
            env: &|k| match k {
                "TOKEN" => Some("t0k".into()),
                "EMPTY" => Some(String::new()),
                _ => None,
            },
            home: Some(PathBuf::from("/home/u")),
            run: &|c| (c == "echo hi").then(|| "hi".to_string()),
        }
    }

    fn load_with(files: &[(&str, &str)], trusted: bool) -> McpJson {
        let map: HashMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        let read = move |p: &Path| Ok(map.get(p).cloned());
        load(
            Path::new("/agent"),
            trusted.then_some(Path::new("/proj")),
            Path::new("/proj"),
            &read,
            &inputs(),
        )
    }

    #[test]
    fn values() {
        let i = inputs();
        assert_eq!(resolve_value("Bearer ${TOKEN}", &i).unwrap(), "Bearer t0k");
        assert_eq!(resolve_value("$TOKEN-x", &i).unwrap(), "t0k-x");
        assert_eq!(resolve_value("a$$b$!c", &i).unwrap(), "a$b!c");
        assert_eq!(resolve_value("!echo hi", &i).unwrap(), "hi");
        assert_eq!(resolve_value("${a-b}", &i).unwrap(), "${a-b}");
        assert_eq!(
            resolve_value("${EMPTY}", &i).unwrap_err().to_string(),
            "environment variable EMPTY is not set"
        );
        let e = resolve_value("$A-${EMPTY}-$A", &i).unwrap_err();
        assert_eq!(
            e.pi_text("MCP server \"m\" header \"H\""),
            "Failed to resolve MCP server \"m\" header \"H\" from environment variables: A, EMPTY"
        );
        assert_eq!(
            resolve_value("!false", &i).unwrap_err().pi_text("x"),
            "Failed to resolve x from shell command: false"
        );
    }

    #[test]
    fn global_project_and_overrides() {
        let m = load_with(
            &[
                (
                    "/agent/mcp.json",
                    r#"{"autoEnableCodemode": false, "mcpServers": {
                        "a": {"command": "~/bin/a", "args": ["~/x", "y"], "env": {"K": "${TOKEN}"}, "exposure": "direct"},
                        "b": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer $TOKEN"}, "toolExposure": {"get_*": "hidden", "x": "codemode-deferred"}},
                        "c": {"command": "c", "enabled": false, "timeout": 5}
                    }}"#,
                ),
                (
                    "/proj/.pi/mcp.json",
                    r#"{"mcpServers": {
                        "b": {"enabled": false},
                        "a": {"exposure": "hidden", "env": {}},
                        "d": {"type": "sse", "url": "https://h/sse"},
                        "e": {"enabled": true},
                        "c-d": {"command": "x"},
                        "c_d": {"command": "y"}
                    }}"#,
                ),
            ],
            true,
        );
        let names: Vec<&str> = m.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "c-d"]);
        assert_eq!(m.auto_enable_codemode, Some(false));
        let a = &m.servers[0];
        assert_eq!(a.exposure, Exposure::Direct);
        assert_eq!(
            a.transport,
            Transport::Stdio {
                command: "/home/u/bin/a".into(),
                args: vec!["/home/u/x".into(), "y".into()],
                env: vec![("K".into(), "t0k".into())],
                cwd: Some(PathBuf::from("/proj")),
            }
        );
        let b = &m.servers[1];
        assert!(!b.enabled);
        assert_eq!(b.exposure_of("get_x"), Exposure::Hidden);
        assert_eq!(b.exposure_of("x"), Exposure::Codemode);
        assert_eq!(b.exposure_of("other"), Exposure::Codemode);
        assert_eq!(
            m.servers[2].timeout,
            Some(std::time::Duration::from_secs(5))
        );
        assert_eq!(m.errors.len(), 4, "{:?}", m.errors);
        assert!(m.errors[0].contains("\"a\": an override can only set enabled"));
        assert!(m.errors[1].contains("legacy SSE transport is not supported"));
        assert!(m.errors[2].contains("server \"e\" needs \"command\" or \"url\""));
        assert!(m.errors[3].contains("\"c_d\" conflicts with \"c-d\""));
    }

    #[test]
    fn oauth_settings_are_checked_as_pi_and_the_registered_client_kept() {
        let i = inputs();
        let parse = |v: Value| oauth_client(Some(&v), &i);
        assert_eq!(
            parse(
                serde_json::json!({"clientId": "c", "clientSecret": "${TOKEN}",
                "callbackPort": 8765, "callbackUrl": "http://127.0.0.1:8765/callback",
                "scope": "read", "clientName": "x", "clientRegistration": "dcr",
                "authServerMetadataUrl": "https://a/.well-known/openid-configuration"})
            ),
            Ok(Some(OAuthClient {
                client_id: "c".into(),
                client_secret: Some("t0k".into())
            }))
        );
        assert_eq!(
            parse(serde_json::json!({"clientName": "Claude Code"})),
            Ok(None)
        );
        assert_eq!(
            parse(serde_json::json!({"callbackUrl": "http://[::1]/callback"})),
            Ok(None)
        );
        for (bad, msg) in [
            (serde_json::json!([]), "oauth must be an object"),
            (
                serde_json::json!({"clientId": 1}),
                "oauth.clientId must be a string",
            ),
            (
                serde_json::json!({"callbackPort": 0}),
                "oauth.callbackPort must be a port number",
            ),
            (
                serde_json::json!({"callbackUrl": "https://127.0.0.1/cb"}),
                "oauth.callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] without query or fragment",
            ),
            (
                serde_json::json!({"callbackUrl": "http://localhost:1/cb", "callbackPort": 2}),
                "oauth.callbackUrl and oauth.callbackPort name different ports",
            ),
            (
                serde_json::json!({"clientName": " "}),
                "oauth.clientName must be a non-empty string",
            ),
            (
                serde_json::json!({"clientRegistration": "cimd", "clientId": "c"}),
                "oauth.clientRegistration \"cimd\" cannot be combined with oauth.clientId or oauth.clientName",
            ),
            (
                serde_json::json!({"clientRegistration": "x"}),
                "oauth.clientRegistration must be \"auto\", \"dcr\", or \"cimd\"",
            ),
            (
                serde_json::json!({"authServerMetadataUrl": "http://a/x"}),
                "oauth.authServerMetadataUrl must be an https URL, or http on localhost, 127.0.0.1, or [::1]",
            ),
            (
                serde_json::json!({"clientId": "c", "clientSecret": "${NOPE}"}),
                "oauth.clientSecret: environment variable NOPE is not set",
            ),
        ] {
            assert_eq!(parse(bad.clone()), Err(msg.to_string()), "{bad}");
        }
    }

    #[test]
    fn untrusted_project_is_not_read_and_bad_files_are_errors() {
        let m = load_with(
            &[
                ("/agent/mcp.json", r#"{"mcpServers": []}"#),
                (
                    "/proj/.pi/mcp.json",
                    r#"{"mcpServers": {"p": {"command": "x"}}}"#,
                ),
            ],
            false,
        );
        assert!(m.servers.is_empty());
        assert_eq!(
            m.errors,
            ["/agent/mcp.json: expected an object with an \"mcpServers\" object"]
        );
        let m = load_with(&[("/agent/mcp.json", "{")], false);
        assert_eq!(m.errors.len(), 1);
    }
}
