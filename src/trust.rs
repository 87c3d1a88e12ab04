//! Project trust (pi 0.79, `--approve` / `--no-approve`): whether project-local files — the
//! project's `.pi/settings.json`, `.pi/SYSTEM.md`, `.pi/APPEND_SYSTEM.md` (and its skills,
//! templates, extensions) and its `.mcp.json` (MCP servers: programs pith would start) — are
//! loaded. Context files (`AGENTS.md`, `CLAUDE.md`) are read in every case, as pi reads them.
//!
//! pi 0.87.1 (`--compat 0.87`) trusts a project without such files, and otherwise only when
//! `--approve` says so, the trust store (`<agent dir>/trust.json`, nearest ancestor entry) says
//! `true`, or the global `defaultProjectTrust` setting is `"always"`: without a terminal to ask,
//! an undecided project is not trusted. pi 0.73.1 had no project trust: everything is loaded
//! unless `--no-approve` says otherwise.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::protocol;

/// Entries of `<cwd>/.pi` whose presence asks for a trust decision.
const TRUST_REQUIRING: [&str; 8] = [
    "settings.json",
    // pi 1.6.0's MCP servers (`--compat 1.6` starts them).
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];

/// The project has files that need trust: an entry above under `.pi`, a `.mcp.json` (pith's
/// own: pi has no MCP, so it never starts that file's servers), or `.agents/skills` in cwd or an
/// ancestor (the user's own `~/.agents/skills` does not count).
pub fn has_trust_requiring_resources(cwd: &Path, home: Option<&Path>) -> bool {
    let dir = canonical(cwd);
    if TRUST_REQUIRING
        .iter()
        .any(|e| dir.join(".pi").join(e).exists())
        || dir.join(".mcp.json").exists()
    {
        return true;
    }
    let user_skills = home.map(|h| canonical(h).join(".agents").join("skills"));
    dir.ancestors().any(|d| {
        let skills = d.join(".agents").join("skills");
        Some(&skills) != user_skills.as_ref() && skills.exists()
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The nearest decision of `<agent dir>/trust.json` for `cwd` or an ancestor (`null` entries and
/// unreadable stores decide nothing).
pub fn stored_decision(agent_dir: &Path, cwd: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(agent_dir.join("trust.json")).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let Ok(Value::Object(store)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    canonical(cwd).ancestors().find_map(|d| {
        store
            .get(d.to_string_lossy().as_ref())
            .and_then(Value::as_bool)
    })
}

/// Whether this run loads project-local files.
pub fn project_trusted(
    profile: &protocol::Resources,
    approve: Option<bool>,
    cwd: &Path,
    agent_dir: &Path,
    default_project_trust: Option<&str>,
) -> bool {
    if let Some(decided) = approve {
        return decided;
    }
    if !profile.project_trust {
        return true;
    }
    if !has_trust_requiring_resources(cwd, crate::config::home_dir().as_deref()) {
        return true;
    }
    stored_decision(agent_dir, cwd).unwrap_or(default_project_trust == Some("always"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V073: &protocol::Resources = &protocol::v073::PROFILE.resources;
    const V087: &protocol::Resources = &protocol::v087::PROFILE.resources;

    #[test]
    fn trust_per_version_flag_store_and_default() {
        let d = tempfile::tempdir().unwrap();
        let agent = d.path().join("agent");
        let proj = d.path().join("proj");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(proj.join("sub")).unwrap();
        let trusted = |c, a, def| project_trusted(c, a, &proj.join("sub"), &agent, def);
        // Nothing that needs trust: trusted.
        assert!(trusted(V087, None, None));
        std::fs::create_dir_all(proj.join("sub/.pi")).unwrap();
        std::fs::write(proj.join("sub/.pi/settings.json"), "{}").unwrap();
        assert!(!trusted(V087, None, None));
        assert!(trusted(V087, None, Some("always")));
        assert!(trusted(V087, Some(true), None));
        assert!(trusted(V073, None, None));
        assert!(!trusted(V073, Some(false), None));
        // The nearest stored decision wins.
        let key = canonical(&proj).to_string_lossy().into_owned();
        std::fs::write(agent.join("trust.json"), format!("{{\"{key}\": true}}")).unwrap();
        assert!(trusted(V087, None, None));
        assert!(!trusted(V087, Some(false), None));
    }

    #[test]
    fn an_mcp_json_alone_asks_for_trust() {
        let d = tempfile::tempdir().unwrap();
        let agent = d.path().join("agent");
        let proj = d.path().join("proj");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(proj.join("AGENTS.md"), "context files need no trust").unwrap();
        assert!(!has_trust_requiring_resources(&proj, None));
        std::fs::write(proj.join(".mcp.json"), "{}").unwrap();
        assert!(has_trust_requiring_resources(&proj, None));
        assert!(!project_trusted(V087, None, &proj, &agent, None));
        assert!(project_trusted(V087, Some(true), &proj, &agent, None));
        assert!(project_trusted(V073, None, &proj, &agent, None));
        assert!(!project_trusted(V073, Some(false), &proj, &agent, None));
    }
}
