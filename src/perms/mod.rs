//! Permission rules (`pith.permissions`, `--allow` / `--ask` / `--deny`,
//! `--permission-default`): the pure rule matcher ([`rules`]) and bash line splitter
//! ([`shell`]). The machine's gate (`core/gate.rs`) applies them; see docs/security.md.

pub mod approval;
pub mod rules;
pub mod shell;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::perms::approval::ConfirmTools;
use rules::{Anchors, Level, Rule, RuleSet};

/// The permission rules in effect for a run, merged from the command line, the user's
/// settings and the project's (which can only tighten), with `--confirm-tools` as ask rules.
#[derive(Clone, Debug)]
pub struct Policy {
    pub rules: RuleSet,
    /// What a call no rule matches gets: `allow` when only `--confirm-tools` is configured,
    /// else `--permission-default`, else `ask` where a host can answer and `deny` where none can.
    pub default: Level,
    pub anchors: Anchors,
}

/// Where a run's permissions come from.
pub struct Sources<'a> {
    /// `--allow` / `--ask` / `--deny`, in order.
    pub cli: &'a [(Level, String)],
    pub cli_default: Option<Level>,
    /// `pith.permissions` of the user's settings and of the project's.
    pub user: Option<&'a Value>,
    pub project: Option<&'a Value>,
    /// `--confirm-tools` / `pith.confirmTools` (the project's already only added).
    pub confirm: &'a ConfirmTools,
    /// A host can answer dialogs (rpc mode).
    pub ui: bool,
    pub anchors: Anchors,
}

/// The lists and default of one settings file's `pith.permissions`.
struct FileRules {
    lists: Vec<(Level, String)>,
    default: Option<Level>,
}

fn read_file_rules(v: Option<&Value>, whose: &str) -> Result<FileRules, String> {
    let mut out = FileRules {
        lists: Vec::new(),
        default: None,
    };
    let Some(v) = v else { return Ok(out) };
    let Some(obj) = v.as_object() else {
        return Err(format!("{whose} pith.permissions: not an object"));
    };
    for (key, value) in obj {
        match key.as_str() {
            "allow" | "ask" | "deny" => {
                let level = Level::parse(key).unwrap_or(Level::Deny);
                let Some(list) = value.as_array() else {
                    return Err(format!(
                        "{whose} pith.permissions.{key}: not an array of rules"
                    ));
                };
                for r in list {
                    let Some(text) = r.as_str() else {
                        return Err(format!("{whose} pith.permissions.{key}: {r} is not a rule"));
                    };
                    out.lists.push((level, text.to_string()));
                }
            }
            "default" => {
                out.default = Some(value.as_str().and_then(Level::parse).ok_or_else(|| {
                    format!("{whose} pith.permissions.default: {value} is not ask, allow or deny")
                })?);
            }
            other => {
                return Err(format!(
                    "{whose} pith.permissions: unknown key \"{other}\" (allow, ask, deny, default)"
                ));
            }
        }
    }
    Ok(out)
}

impl Policy {
    /// Merge the sources. `Ok(None)`: nothing configured (pi's behaviour, no gate, no event).
    /// A malformed rule, from any source, is an error: pith does not start with rules it
    /// cannot read. Warnings (a project's loosening entries ignored) are for stderr.
    pub fn build(src: &Sources<'_>) -> Result<(Option<Policy>, Vec<String>), String> {
        let mut warnings = Vec::new();
        let user = read_file_rules(src.user, "settings")?;
        let project = read_file_rules(src.project, "project settings")?;
        let mut texts: Vec<(Level, String)> = src.cli.to_vec();
        texts.extend(user.lists);
        for (level, text) in project.lists {
            if level == Level::Allow {
                warnings.push(format!(
                    "Warning: the project's permission rule allow \"{text}\" is ignored: a project can only add deny and ask rules"
                ));
            } else {
                texts.push((level, text));
            }
        }
        let mut rules = Vec::with_capacity(texts.len());
        for (level, text) in &texts {
            rules.push(Rule::compile(text, *level, &src.anchors)?);
        }
        let own_default = src.cli_default.or(user.default);
        let mut ruled = !rules.is_empty() || own_default.is_some();
        let fail_closed = if src.ui { Level::Ask } else { Level::Deny };
        let mut default = own_default.unwrap_or(if ruled { fail_closed } else { Level::Allow });
        if let Some(p) = project.default {
            if p > default {
                default = p;
                ruled = true;
            } else if p < default {
                warnings.push(format!(
                    "Warning: the project's pith.permissions.default \"{}\" is ignored: a project cannot loosen the default \"{}\"",
                    p.as_str(),
                    default.as_str()
                ));
            }
        }
        for name in src.confirm.as_rules() {
            let mut r = Rule::compile(&name, Level::Ask, &src.anchors)
                .map_err(|e| format!("--confirm-tools: {e}"))?;
            r.confirm_tools = true;
            rules.push(r);
        }
        if !ruled && rules.is_empty() {
            return Ok((None, warnings));
        }
        let rules = RuleSet::new(rules, own_default)?;
        Ok((
            Some(Policy {
                rules,
                default: if ruled { default } else { Level::Allow },
                anchors: src.anchors.clone(),
            }),
            warnings,
        ))
    }

    /// Is `p` (resolved) inside the working directory?
    pub fn inside_cwd(&self, p: &Path) -> bool {
        p.starts_with(&self.anchors.cwd)
    }
}

/// The path argument of a file tool (`None` for other tools; `.` when a search tool names none).
pub fn file_tool_path(tool: &str, args: &Value) -> Option<String> {
    let path = args.get("path").and_then(Value::as_str);
    match tool {
        "read" | "write" | "edit" => path.map(str::to_string),
        "grep" | "find" | "ls" => Some(path.unwrap_or(".").to_string()),
        _ => None,
    }
}

/// The anchors of path patterns for a run in `cwd` (already canonical).
pub fn anchors(cwd: PathBuf, home: Option<PathBuf>) -> Anchors {
    Anchors { cwd, home }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(
        cli: &[(Level, &str)],
        cli_default: Option<Level>,
        user: Option<Value>,
        project: Option<Value>,
        confirm: ConfirmTools,
        ui: bool,
    ) -> Result<(Option<Policy>, Vec<String>), String> {
        let cli: Vec<(Level, String)> = cli.iter().map(|(l, t)| (*l, t.to_string())).collect();
        Policy::build(&Sources {
            cli: &cli,
            cli_default,
            user: user.as_ref(),
            project: project.as_ref(),
            confirm: &confirm,
            ui,
            anchors: anchors(PathBuf::from("/w"), None),
        })
    }

    #[test]
    fn nothing_configured_is_no_policy() {
        let (p, w) = build(&[], None, None, None, ConfirmTools::None, true).unwrap();
        assert!(p.is_none() && w.is_empty());
        // A project default that is not stricter than pi's behaviour changes nothing.
        let (p, w) = build(
            &[],
            None,
            None,
            Some(json!({"default":"allow"})),
            ConfirmTools::None,
            true,
        )
        .unwrap();
        assert!(p.is_none() && w.is_empty());
    }

    #[test]
    fn the_default_fails_closed_without_a_host() {
        let (p, _) = build(
            &[(Level::Allow, "read")],
            None,
            None,
            None,
            ConfirmTools::None,
            true,
        )
        .unwrap();
        assert_eq!(p.unwrap().default, Level::Ask);
        let (p, _) = build(
            &[(Level::Allow, "read")],
            None,
            None,
            None,
            ConfirmTools::None,
            false,
        )
        .unwrap();
        assert_eq!(p.unwrap().default, Level::Deny);
        let (p, _) = build(
            &[],
            Some(Level::Allow),
            None,
            None,
            ConfirmTools::None,
            false,
        )
        .unwrap();
        assert_eq!(p.unwrap().default, Level::Allow);
        // --confirm-tools alone keeps the other tools as they were.
        let (p, _) = build(&[], None, None, None, ConfirmTools::parse("bash"), false).unwrap();
        let p = p.unwrap();
        assert_eq!(p.default, Level::Allow);
        assert_eq!(p.rules.rules().len(), 1);
    }

    #[test]
    fn a_project_only_tightens() {
        let user = json!({"allow":["bash(git *)"], "default":"ask"});
        let project = json!({"allow":["*"], "deny":["bash(git push*)"], "default":"allow"});
        let (p, w) = build(
            &[],
            None,
            Some(user),
            Some(project),
            ConfirmTools::None,
            true,
        )
        .unwrap();
        let p = p.unwrap();
        assert_eq!(p.default, Level::Ask);
        let texts: Vec<&str> = p.rules.rules().iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["bash(git *)", "bash(git push*)"]);
        assert_eq!(w.len(), 2, "{w:?}");
        // A stricter project default counts, and turns the rules on.
        let (p, _) = build(
            &[],
            None,
            None,
            Some(json!({"default":"deny"})),
            ConfirmTools::None,
            true,
        )
        .unwrap();
        assert_eq!(p.unwrap().default, Level::Deny);
        // A project deny alone turns the rules on: unmatched calls then ask.
        let (p, _) = build(
            &[],
            None,
            None,
            Some(json!({"deny":["bash"]})),
            ConfirmTools::None,
            true,
        )
        .unwrap();
        assert_eq!(p.unwrap().default, Level::Ask);
    }

    #[test]
    fn malformed_settings_refuse_to_start() {
        for bad in [
            json!([]),
            json!({"allow":"read"}),
            json!({"deny":[3]}),
            json!({"deny":["bash("]}),
            json!({"default":"maybe"}),
            json!({"alow":[]}),
        ] {
            assert!(
                build(&[], None, Some(bad.clone()), None, ConfirmTools::None, true).is_err(),
                "{bad}"
            );
            assert!(
                build(&[], None, None, Some(bad.clone()), ConfirmTools::None, true).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn file_tools_name_their_path() {
        assert_eq!(
            file_tool_path("write", &json!({"path":"a"})).as_deref(),
            Some("a")
        );
        assert_eq!(file_tool_path("ls", &json!({})).as_deref(), Some("."));
        assert_eq!(file_tool_path("read", &json!({})), None);
        assert_eq!(file_tool_path("bash", &json!({"path":"a"})), None);
    }
}
