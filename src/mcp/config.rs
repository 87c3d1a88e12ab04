//! Which MCP servers to start: the widely used `mcpServers` format
//! (`{"mcpServers":{"name":{"command","args","env","cwd"}}}`) from settings.json (user and project,
//! merged by server name, project winning) and the project's `.mcp.json` (winning over both).
//! `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env` values and `cwd`, as
//! other MCP clients do. An entry with `url` (`type` absent, `http` or `streamable-http`) is a
//! Streamable HTTP server (`headers` with `${VAR}` too); `"disabled": true` skips a server.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// How the server's tools reach the model (pi's `mcp.json`; `Direct` for the settings format).
    pub exposure: Exposure,
    /// `toolExposure`: the server's tool name or a `*` pattern, and its exposure, in file order.
    pub tool_exposure: Vec<(String, Exposure)>,
    /// `description`: one line for the system prompt, tool search and `describeNamespace`.
    pub description: Option<String>,
    /// `timeout`: per-request timeout (progress restarts it); None: the settings' default.
    pub timeout: Option<std::time::Duration>,
    /// `enabled: false` keeps the entry listed (in `/mcp`) without starting it.
    pub enabled: bool,
    /// The file that defines it (shown by `/mcp`).
    pub source: PathBuf,
    /// pi's `mcp.json`: a value of `headers`/`env` that could not be resolved (an unset
    /// variable, a failed command): the server fails to start with this text, as in pi.
    pub start_error: Option<String>,
}

/// How pith reaches a server.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// MCP's streamable HTTP transport.
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// pi 1.6.0's `oauth.clientId`/`clientSecret`: the registered client that refreshes the
        /// tokens pi's sign-in stored (pi's other `oauth` settings only concern the sign-in).
        oauth_client: Option<OAuthClient>,
    },
}

/// A pre-registered OAuth client (the secret never shows in `Debug`).
#[derive(Clone, PartialEq)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// How an MCP tool reaches the model (pi 1.6.0's `exposure` / `toolExposure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Callable from codemode scripts only (pi's default).
    Codemode,
    /// Declared once `tool_search` loads it.
    Deferred,
    /// Declared to the model like a built-in tool.
    Direct,
    /// Registered but unreachable.
    Hidden,
}

impl Exposure {
    pub fn parse(s: &str) -> Option<Exposure> {
        Some(match s {
            "codemode" | "codemode-deferred" => Exposure::Codemode,
            "deferred" => Exposure::Deferred,
            "direct" => Exposure::Direct,
            "hidden" => Exposure::Hidden,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Codemode => "codemode",
            Exposure::Deferred => "deferred",
            Exposure::Direct => "direct",
            Exposure::Hidden => "hidden",
        }
    }
}

/// Which MCP tools `--tools` and `--exclude-tools` leave (pi 1.6.0): `--tools` removes MCP tools
/// only when one of its entries starts with `mcp__` (then only the tools those entries name or
/// match are kept); `--exclude-tools` entries (names or `*` patterns) remove tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolFilter {
    pub include: Option<Vec<String>>,
    pub exclude: Vec<String>,
}

impl ToolFilter {
    pub fn from_cli(tools: Option<&[String]>, exclude: &[String]) -> ToolFilter {
        let include: Vec<String> = tools
            .unwrap_or_default()
            .iter()
            .filter(|e| e.starts_with("mcp__"))
            .cloned()
            .collect();
        ToolFilter {
            include: (!include.is_empty()).then_some(include),
            exclude: exclude.to_vec(),
        }
    }

    pub fn allows(&self, name: &str) -> bool {
        use crate::tools::selection::matches_any;
        self.include
            .as_ref()
            .is_none_or(|inc| matches_any(inc, name, true))
            && !matches_any(&self.exclude, name, true)
    }
}

impl ServerConfig {
    /// The exposure of the server's tool `tool`: an exact `toolExposure` key, else the first
    /// matching pattern, else the server's.
    pub fn exposure_of(&self, tool: &str) -> Exposure {
        if let Some((_, e)) = self.tool_exposure.iter().find(|(k, _)| k == tool) {
            return *e;
        }
        self.tool_exposure
            .iter()
            .find(|(k, _)| k.contains('*') && crate::tools::selection::matches_pattern(k, tool))
            .map(|(_, e)| *e)
            .unwrap_or(self.exposure)
    }

    /// Every exposure its tools can have, known before it connects.
    pub fn configured_exposures(&self) -> impl Iterator<Item = Exposure> + '_ {
        std::iter::once(self.exposure).chain(self.tool_exposure.iter().map(|(_, e)| *e))
    }
}

/// Expand `${VAR}` and `${VAR:-default}`; an unset variable without a default is an error.
pub fn expand_vars(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match env(name).filter(|v| !v.is_empty() || default.is_none()) {
            Some(v) => out.push_str(&v),
            None => match default {
                Some(d) => out.push_str(d),
                None => return Err(format!("environment variable {name} is not set")),
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn one(
    name: &str,
    v: &Value,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ServerConfig>, String> {
    let Some(obj) = v.as_object() else {
        return Err("expected an object".into());
    };
    if obj.get("disabled") == Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let ty = obj.get("type").and_then(Value::as_str);
    if let Some(t) = ty {
        if !matches!(t, "stdio" | "http" | "streamable-http") {
            return Err(format!(
                "transport \"{t}\" is not supported (stdio, http or streamable-http)"
            ));
        }
    }
    if ty != Some("stdio") && obj.contains_key("url") {
        let url = match obj.get("url") {
            Some(Value::String(u)) if !u.is_empty() => expand_vars(u, env)?,
            _ => return Err("\"url\" must be a string".into()),
        };
        let mut headers = Vec::new();
        match obj.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let Value::String(v) = v else {
                        return Err(format!("header \"{k}\" must be a string"));
                    };
                    headers.push((k.clone(), expand_vars(v, env)?));
                }
            }
            Some(_) => return Err("\"headers\" must be an object".into()),
        }
        return Ok(Some(ServerConfig {
            name: name.to_string(),
            transport: Transport::Http {
                url,
                headers,
                oauth_client: None,
            },
            exposure: Exposure::Direct,
            tool_exposure: Vec::new(),
            description: None,
            timeout: None,
            enabled: true,
            source: base.to_path_buf(),
            start_error: None,
        }));
    }
    if ty.is_some_and(|t| t != "stdio") {
        return Err("missing string \"url\"".into());
    }
    let command = match obj.get("command") {
        Some(Value::String(c)) if !c.is_empty() => expand_vars(c, env)?,
        _ => return Err("missing string \"command\"".into()),
    };
    let args = match obj.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => expand_vars(s, env),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err("\"args\" must be an array of strings".to_string()),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("\"args\" must be an array of strings".into()),
    };
    let mut vars = Vec::new();
    match obj.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => expand_vars(s, env)?,
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return Err(format!("env \"{k}\" must be a string")),
                };
                vars.push((k.clone(), v));
            }
        }
        Some(_) => return Err("\"env\" must be an object".into()),
    }
    let cwd = match obj.get("cwd") {
        Some(Value::String(c)) => Some(base.join(expand_vars(c, env)?)),
        _ => None,
    };
    Ok(Some(ServerConfig {
        name: name.to_string(),
        transport: Transport::Stdio {
            command,
            args,
            env: vars,
            cwd,
        },
        exposure: Exposure::Direct,
        tool_exposure: Vec::new(),
        description: None,
        timeout: None,
        enabled: true,
        source: base.to_path_buf(),
        start_error: None,
    }))
}

/// The servers to start, in order (settings first, then `.mcp.json` entries not already
/// named), and warnings for stderr. `settings`: the merged settings' `mcpServers`; `project`:
/// the parsed `.mcp.json` and its directory.
pub fn resolve(
    settings: Option<&Value>,
    project: Option<(&Value, &Path)>,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<ServerConfig>, Vec<String>) {
    let mut merged: Vec<(String, Value, PathBuf, &str)> = Vec::new();
    let mut warnings = Vec::new();
    let mut add = |map: &Map<String, Value>, base: &Path, origin: &'static str| {
        for (name, v) in map {
            match merged.iter_mut().find(|(n, ..)| n == name) {
                Some(slot) => *slot = (name.clone(), v.clone(), base.to_path_buf(), origin),
                None => merged.push((name.clone(), v.clone(), base.to_path_buf(), origin)),
            }
        }
    };
    match settings {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => add(m, cwd, "settings.json"),
        Some(_) => {
            warnings.push("Warning: settings \"mcpServers\" is not an object; ignored".into())
        }
    }
    if let Some((v, dir)) = project {
        match v.get("mcpServers") {
            Some(Value::Object(m)) => add(m, dir, ".mcp.json"),
            _ => warnings.push("Warning: .mcp.json has no \"mcpServers\" object; ignored".into()),
        }
    }
    let mut out = Vec::new();
    for (name, v, base, origin) in merged {
        if !crate::tools::valid_tool_name(&name) || name.contains("__") {
            warnings.push(format!(
                "Warning: MCP server name \"{name}\" ({origin}) must be letters, digits, _ or - (no \"__\"); skipped"
            ));
            continue;
        }
        match one(&name, &v, &base, env) {
            Ok(Some(c)) => out.push(c),
            Ok(None) => {}
            Err(e) => warnings.push(format!(
                "Warning: MCP server \"{name}\" ({origin}): {e}; skipped"
            )),
        }
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(k: &str) -> Option<String> {
        match k {
            "HOME" => Some("/home/u".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables() {
        assert_eq!(expand_vars("${HOME}/x", &env).unwrap(), "/home/u/x");
        assert_eq!(expand_vars("${NOPE:-d}", &env).unwrap(), "d");
        assert_eq!(expand_vars("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand_vars("${EMPTY}", &env).unwrap(), "");
        assert_eq!(expand_vars("a${b", &env).unwrap(), "a${b");
        assert_eq!(
            expand_vars("${NOPE}", &env).unwrap_err(),
            "environment variable NOPE is not set"
        );
    }

    #[test]
    fn merge_and_validate() {
        let settings = json!({
            "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
            "web": {"type": "http", "url": "http://x/${HOME}", "headers": {"X-Key": "${HOME}"}},
            "old": {"type": "sse", "url": "http://x"},
            "off": {"command": "x", "disabled": true},
            "bad name": {"command": "x"}
        });
        let project = json!({"mcpServers": {
            "time": {"command": "${HOME}/bin/time", "env": {"TZ": "UTC"}},
            "every": {"command": "npx", "args": ["-y", "server-everything"]}
        }});
        let (list, warnings) = resolve(
            Some(&settings),
            Some((&project, Path::new("/p"))),
            Path::new("/cwd"),
            &env,
        );
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].name, "time");
        let Transport::Stdio {
            command, env, args, ..
        } = &list[0].transport
        else {
            panic!("stdio expected")
        };
        assert_eq!(command, "/home/u/bin/time");
        assert_eq!(env, &vec![("TZ".to_string(), "UTC".to_string())]);
        assert!(args.is_empty());
        assert_eq!(list[1].name, "web");
        assert_eq!(
            list[1].transport,
            Transport::Http {
                url: "http://x//home/u".into(),
                headers: vec![("X-Key".into(), "/home/u".into())],
                oauth_client: None,
            }
        );
        assert_eq!(list[2].name, "every");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("transport \"sse\"")));
    }
}
