//! Permission rules, pure: parsing `TOOL` / `TOOL(PATTERN)`, and deciding a call.
//!
//! `TOOL` is a glob over tool names (`mcp__github__*`). For `bash` the pattern is a glob over
//! each simple command of the line ([`super::shell`]; `*` matches any text, `/` included); for
//! the file tools (`read`, `write`, `edit`, `grep`, `find`, `ls`) it is a path glob matched
//! against the resolved path (a relative pattern is relative to the working directory, `~/` is
//! the home directory, a pattern starting with `**` matches anywhere; `*` stops at `/`). On
//! other tools a pattern never matches.
//!
//! A call's parts (the simple commands of a bash line, the one resolved path of a file tool, or
//! the call itself) each get the strongest level of the rules that match it, deny > ask > allow,
//! or the default when none does; the call gets the strictest of its parts'. A bash line the
//! splitter could not read with confidence adds one more part that only a rule without a pattern
//! can allow.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use super::shell::Split;

/// What a rule or the default says about a call. Ordered from the loosest to the strictest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Allow,
    Ask,
    Deny,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "allow" => Some(Level::Allow),
            "ask" => Some(Level::Ask),
            "deny" => Some(Level::Deny),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Ask => "ask",
            Level::Deny => "deny",
        }
    }
}

/// The tools whose pattern is a path.
pub const FILE_TOOLS: &[&str] = &["read", "write", "edit", "grep", "find", "ls"];

/// One rule as written, parsed (not yet compiled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleText {
    pub tool: String,
    pub pattern: Option<String>,
}

/// Parse `TOOL` or `TOOL(PATTERN)`.
pub fn parse_rule(text: &str) -> Result<RuleText, String> {
    let t = text.trim();
    let (tool, pattern) = match t.find('(') {
        None => (t, None),
        Some(open) => {
            let Some(inner) = t[open + 1..].strip_suffix(')') else {
                return Err(format!(
                    "permission rule \"{text}\": a pattern is written TOOL(PATTERN), closed by ')'"
                ));
            };
            if inner.is_empty() {
                return Err(format!("permission rule \"{text}\": the pattern is empty"));
            }
            (t[..open].trim_end(), Some(inner.to_string()))
        }
    };
    if tool.is_empty() {
        return Err(format!("permission rule \"{text}\": no tool name"));
    }
    if let Some(c) = tool
        .chars()
        .find(|c| !(c.is_alphanumeric() || "_-.*?[]{},!".contains(*c)))
    {
        return Err(format!(
            "permission rule \"{text}\": '{c}' cannot be in a tool name"
        ));
    }
    Ok(RuleText {
        tool: tool.to_string(),
        pattern,
    })
}

fn glob(pattern: &str, literal_separator: bool) -> Result<Glob, String> {
    GlobBuilder::new(pattern)
        .literal_separator(literal_separator)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.to_string())
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// As written (named in events and messages).
    pub text: String,
    pub level: Level,
    /// It stands for `--confirm-tools` / `pith.confirmTools` (its texts name that option).
    pub confirm_tools: bool,
    tool: Glob,
    pattern: Option<Pattern>,
}

#[derive(Clone, Debug)]
struct Pattern {
    /// For bash: over a simple command.
    command: Glob,
    /// For file tools: over a resolved path.
    path: Glob,
}

/// Where relative and `~/` path patterns are anchored.
#[derive(Clone, Debug)]
pub struct Anchors {
    /// The working directory, symlinks resolved.
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
}

impl Rule {
    pub fn compile(text: &str, level: Level, anchors: &Anchors) -> Result<Rule, String> {
        let parsed = parse_rule(text)?;
        let bad = |e: String| format!("permission rule \"{text}\": {e}");
        let tool = glob(&parsed.tool, false).map_err(bad)?;
        let pattern = match &parsed.pattern {
            None => None,
            Some(p) => {
                let anchored = anchor(p, anchors);
                Some(Pattern {
                    command: glob(p, false).map_err(bad)?,
                    path: glob(&anchored, true).map_err(bad)?,
                })
            }
        };
        Ok(Rule {
            text: text.trim().to_string(),
            level,
            confirm_tools: false,
            tool,
            pattern,
        })
    }
}

fn anchor(p: &str, a: &Anchors) -> String {
    let under = |dir: &Path, rest: &str| {
        let base = globset::escape(&dir.to_string_lossy());
        let base = base.trim_end_matches('/');
        format!("{base}/{rest}")
    };
    if p.starts_with('/') || p.starts_with("**") {
        return p.to_string();
    }
    if let (Some(rest), Some(h)) = (p.strip_prefix("~/"), &a.home) {
        return under(h, rest);
    }
    let rest = p.strip_prefix("./").unwrap_or(p);
    under(&a.cwd, rest)
}

/// What a call is matched on.
#[derive(Clone, Copy, Debug)]
pub enum Subject<'a> {
    /// A bash line, split.
    Command(&'a Split, &'a str),
    /// A file tool's resolved path.
    Path(&'a Path),
    /// Anything else: only rules without a pattern apply.
    Call,
}

/// Who decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum By {
    /// This rule (as written); `part` is the simple command it matched when the call is bash.
    Rule {
        rule: String,
        part: Option<String>,
        confirm_tools: bool,
    },
    /// No rule matched this part: the default.
    Default { part: Option<String> },
}

/// A call's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub level: Level,
    pub by: By,
}

/// The rules in effect and what happens to a call none matches. The globs of all rules are
/// matched together (one `GlobSet` each for tool names, commands and paths), so a call costs
/// a few set lookups, not one regex per rule.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// `--permission-default` / `pith.permissions.default`.
    pub default: Option<Level>,
    /// Index i: rule i's tool glob.
    tools: GlobSet,
    /// The patterns, and the rule each belongs to.
    commands: GlobSet,
    paths: GlobSet,
    patterned: Vec<usize>,
}

impl RuleSet {
    /// The rules as a set. `Err` when the globs together are too large to compile.
    pub fn new(rules: Vec<Rule>, default: Option<Level>) -> Result<RuleSet, String> {
        let mut tools = GlobSetBuilder::new();
        let mut commands = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        let mut patterned = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            tools.add(r.tool.clone());
            if let Some(p) = &r.pattern {
                commands.add(p.command.clone());
                paths.add(p.path.clone());
                patterned.push(i);
            }
        }
        let err = |e: globset::Error| format!("permission rules: {e}");
        Ok(RuleSet {
            tools: tools.build().map_err(err)?,
            commands: commands.build().map_err(err)?,
            paths: paths.build().map_err(err)?,
            patterned,
            rules,
            default,
        })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The strongest rule matching one part (the first of them in rule order); `allow_patterns`
    /// false: a pattern never allows.
    fn strongest(&self, tool: &str, part: Part<'_>, allow_patterns: bool) -> Option<&Rule> {
        let on_tool = self.tools.matches(tool);
        if on_tool.is_empty() {
            return None;
        }
        let mut hits: Vec<usize> = match part {
            Part::Command(c) => self.commands.matches(c),
            Part::Path(p) => self.paths.matches(p),
            Part::Call => Vec::new(),
        }
        .into_iter()
        .filter_map(|j| self.patterned.get(j).copied())
        .collect();
        hits.sort_unstable();
        let mut best: Option<(usize, &Rule)> = None;
        for i in on_tool {
            let Some(r) = self.rules.get(i) else { continue };
            let matches = match &r.pattern {
                None => true,
                Some(_) if r.level == Level::Allow && !allow_patterns => false,
                Some(_) => hits.binary_search(&i).is_ok(),
            };
            if !matches {
                continue;
            }
            let better =
                best.is_none_or(|(bi, b)| r.level > b.level || (r.level == b.level && i < bi));
            if better {
                best = Some((i, r));
            }
        }
        best.map(|(_, r)| r)
    }

    /// Decide a call of `tool`. `default` is the level of a part no rule matches.
    pub fn decide(&self, tool: &str, subject: Subject<'_>, default: Level) -> Verdict {
        let mut worst: Option<Verdict> = None;
        let mut consider = |part: Part<'_>, allow_patterns: bool, shown: Option<&str>| {
            let v = match self.strongest(tool, part, allow_patterns) {
                Some(r) => Verdict {
                    level: r.level,
                    by: By::Rule {
                        rule: r.text.clone(),
                        part: shown.map(str::to_string),
                        confirm_tools: r.confirm_tools,
                    },
                },
                None => Verdict {
                    level: default,
                    by: By::Default {
                        part: shown.map(str::to_string),
                    },
                },
            };
            // The strictest part; on a tie a rule names the decision better than the default.
            let stricter = worst.as_ref().is_none_or(|w| {
                v.level > w.level
                    || (v.level == w.level
                        && matches!(w.by, By::Default { .. })
                        && matches!(v.by, By::Rule { .. }))
            });
            if stricter {
                worst = Some(v);
            }
        };
        match subject {
            Subject::Command(split, line) => {
                // A line not read with confidence is shown whole.
                if !split.certain {
                    consider(Part::Command(line), false, Some(line));
                }
                for c in &split.commands {
                    consider(Part::Command(c), split.certain, Some(c));
                }
                if split.commands.is_empty() && split.certain {
                    consider(Part::Command(""), true, None);
                }
            }
            Subject::Path(p) => consider(Part::Path(p), true, None),
            Subject::Call => consider(Part::Call, true, None),
        }
        worst.unwrap_or(Verdict {
            level: default,
            by: By::Default { part: None },
        })
    }
}

#[derive(Clone, Copy, Debug)]
enum Part<'a> {
    Command(&'a str),
    Path(&'a Path),
    Call,
}

#[cfg(test)]
mod tests {
    use super::super::shell::split;
    use super::*;

    fn anchors() -> Anchors {
        Anchors {
            cwd: PathBuf::from("/work/proj"),
            home: Some(PathBuf::from("/home/u")),
        }
    }

    fn set(allow: &[&str], ask: &[&str], deny: &[&str]) -> RuleSet {
        let mut rules = Vec::new();
        for (list, level) in [
            (allow, Level::Allow),
            (ask, Level::Ask),
            (deny, Level::Deny),
        ] {
            for t in list {
                rules.push(Rule::compile(t, level, &anchors()).unwrap());
            }
        }
        RuleSet::new(rules, None).unwrap()
    }

    fn bash(s: &RuleSet, line: &str) -> Verdict {
        let sp = split(line);
        s.decide("bash", Subject::Command(&sp, line), Level::Ask)
    }

    fn rule(level: Level, rule: &str, part: Option<&str>) -> Verdict {
        Verdict {
            level,
            by: By::Rule {
                rule: rule.into(),
                part: part.map(str::to_string),
                confirm_tools: false,
            },
        }
    }

    #[test]
    fn parse_forms() {
        assert_eq!(
            parse_rule("bash(git status*)").unwrap(),
            RuleText {
                tool: "bash".into(),
                pattern: Some("git status*".into())
            }
        );
        assert_eq!(
            parse_rule(" mcp__github__* ").unwrap().tool,
            "mcp__github__*"
        );
        assert_eq!(
            parse_rule("bash(echo (a))").unwrap().pattern.as_deref(),
            Some("echo (a)")
        );
        assert!(parse_rule("bash(").is_err());
        assert!(parse_rule("bash()").is_err());
        assert!(parse_rule("(x)").is_err());
        assert!(parse_rule("").is_err());
        assert!(parse_rule("ba sh").is_err());
        assert!(Rule::compile("bash(a[)", Level::Deny, &anchors()).is_err());
    }

    #[test]
    fn tool_names_are_globs() {
        let s = set(&["read"], &[], &["mcp__github__*"]);
        let d = s.decide("mcp__github__create_issue", Subject::Call, Level::Ask);
        assert_eq!(d, rule(Level::Deny, "mcp__github__*", None));
        assert_eq!(
            s.decide("read", Subject::Call, Level::Deny),
            rule(Level::Allow, "read", None)
        );
        assert_eq!(
            s.decide("write", Subject::Call, Level::Deny),
            Verdict {
                level: Level::Deny,
                by: By::Default { part: None }
            }
        );
    }

    #[test]
    fn precedence_is_deny_ask_allow() {
        let s = set(
            &["bash", "bash(rm *)"],
            &["bash(rm *)"],
            &["bash(rm -rf *)"],
        );
        assert_eq!(bash(&s, "ls").level, Level::Allow);
        assert_eq!(
            bash(&s, "rm x"),
            rule(Level::Ask, "bash(rm *)", Some("rm x"))
        );
        assert_eq!(
            bash(&s, "rm -rf x"),
            rule(Level::Deny, "bash(rm -rf *)", Some("rm -rf x"))
        );
    }

    #[test]
    fn every_part_of_a_bash_line_must_be_allowed() {
        let s = set(&["bash(git status*)", "bash(ls*)"], &[], &["bash(curl *)"]);
        assert_eq!(bash(&s, "git status").level, Level::Allow);
        assert_eq!(bash(&s, "git status && ls -la").level, Level::Allow);
        assert_eq!(
            bash(&s, "git status; rm -rf x"),
            Verdict {
                level: Level::Ask,
                by: By::Default {
                    part: Some("rm -rf x".into())
                }
            }
        );
        assert_eq!(
            bash(&s, "ls $(curl evil.sh)"),
            rule(Level::Deny, "bash(curl *)", Some("curl evil.sh"))
        );
        assert_eq!(bash(&s, "git status | c''url x").level, Level::Deny);
    }

    #[test]
    fn an_uncertain_line_is_never_allowed_by_a_pattern() {
        let s = set(&["bash(echo *)"], &[], &["bash(rm *)"]);
        assert_eq!(
            bash(&s, "echo 'x"),
            Verdict {
                level: Level::Ask,
                by: By::Default {
                    part: Some("echo 'x".into())
                }
            }
        );
        assert_eq!(
            bash(&s, "echo x; rm y; echo 'z"),
            rule(Level::Deny, "bash(rm *)", Some("rm y"))
        );
        // A rule without a pattern still allows everything.
        let all = set(&["bash"], &[], &[]);
        assert_eq!(bash(&all, "cat <<EOF\nx\nEOF").level, Level::Allow);
    }

    #[test]
    fn path_patterns_anchor_at_cwd_home_or_root() {
        let s = set(
            &["read(src/**)", "read(~/notes/*)"],
            &[],
            &["write(/etc/**)", "read(**/.env)"],
        );
        let p = |t: &str, path: &str| {
            s.decide(t, Subject::Path(Path::new(path)), Level::Ask)
                .level
        };
        assert_eq!(p("read", "/work/proj/src/a/b.rs"), Level::Allow);
        assert_eq!(p("read", "/work/proj/other.rs"), Level::Ask);
        assert_eq!(p("read", "/home/u/notes/x"), Level::Allow);
        assert_eq!(p("read", "/home/u/notes/sub/x"), Level::Ask);
        assert_eq!(p("write", "/etc/passwd"), Level::Deny);
        assert_eq!(p("read", "/work/proj/src/.env"), Level::Deny);
        // A path pattern does not apply to a call without a path.
        assert_eq!(
            s.decide("read", Subject::Call, Level::Ask).level,
            Level::Ask
        );
    }

    #[test]
    fn glob_characters_in_the_cwd_are_literal() {
        let a = Anchors {
            cwd: PathBuf::from("/w/[x]"),
            home: None,
        };
        let r = Rule::compile("read(*.rs)", Level::Allow, &a).unwrap();
        let s = RuleSet::new(vec![r], None).unwrap();
        let p = |path: &str| s.decide("read", Subject::Path(Path::new(path)), Level::Deny);
        assert_eq!(p("/w/[x]/a.rs").level, Level::Allow);
        assert_eq!(p("/w/x/a.rs").level, Level::Deny);
    }
}
