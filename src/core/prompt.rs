//! pi 0.87.1's system prompt as sections, the machine glue: when a run declares a change to the
//! prompt or the tools (the pure part is [`crate::prompt::sections`]).

use serde_json::{Map, Value};

use crate::core::machine::Machine;
use crate::core::plugins::RemoteTool;
use crate::message::{SystemMessage, ToolDeclaration};
use crate::prompt::sections::{Declared, SectionInputs, context_files, declaration, sections};

impl Machine {
    /// The sections this process would declare now.
    fn wanted_sections(&mut self, remote: &[RemoteTool]) -> Map<String, Value> {
        // pi 0.87.1 reads the context files once per session runtime (at start-up and on every
        // session switch), not before every run.
        let files = self
            .state
            .session_context_files
            .get_or_insert_with(|| context_files(&self.env.cwd, &self.env.agent_dir))
            .clone();
        // Skills are listed when the model can read their files: with read, else with bash.
        let active = |n: &str| {
            self.env.tools.iter().any(|t| t.name() == n) || remote.iter().any(|r| r.name == n)
        };
        let reader = if active("read") {
            Some(crate::resources::skills::ReadTool::Read)
        } else if active("bash") {
            Some(crate::resources::skills::ReadTool::Bash)
        } else {
            None
        };
        let skills = match reader {
            Some(tool) => self
                .env
                .resources
                .get()
                .skills_prompt(tool, self.profile.texts.system_prompt.skills_paths)
                .trim()
                .to_string(),
            None => String::new(),
        };
        let mut names: Vec<(&str, &str)> = self
            .env
            .tools
            .iter()
            .map(|t| (t.name(), t.snippet()))
            .collect();
        // Tools of extensions and MCP servers with a snippet, as the 0.73 prompt lists them.
        names.extend(
            remote
                .iter()
                .filter_map(|r| r.snippet.as_deref().map(|s| (r.name.as_str(), s))),
        );
        let guidelines: Vec<&str> = remote
            .iter()
            .flat_map(|r| r.guidelines.iter().map(String::as_str))
            .collect();
        let mut map = sections(&SectionInputs {
            cwd: &self.env.cwd,
            tools: &names,
            guidelines: &guidelines,
            custom: self.env.custom_system_prompt.as_deref(),
            append: self.env.append_system_prompt.as_deref(),
            context_files: &files,
            skills: &skills,
            texts: &self.profile.texts.system_prompt,
        });
        if let Some(text) = self.mcp_servers_section() {
            map.insert(
                "mcp_servers".into(),
                Value::String(format!("<mcp_servers>\n{text}\n</mcp_servers>")),
            );
        }
        map
    }

    /// pi's MCP client: the servers whose tools are not declared (codemode or deferred
    /// exposure), as they are when a prompt starts.
    fn mcp_servers_section(&self) -> Option<String> {
        use crate::mcp::config::Exposure;
        use crate::mcp::naming::{Listed, Reach, servers_section, summary};
        if self.plugins.cfg.mcp_dialect != crate::protocol::McpDialect::Pi {
            return None;
        }
        let listed: Vec<Listed> = self
            .plugins
            .servers
            .iter()
            .filter(|s| s.cfg.enabled)
            .filter_map(|s| {
                let ex: Vec<Exposure> = s.cfg.configured_exposures().collect();
                let reach = if ex.contains(&Exposure::Codemode) {
                    Reach::Codemode
                } else if ex.contains(&Exposure::Deferred) {
                    Reach::ToolSearch
                } else {
                    return None;
                };
                Some(Listed {
                    name: &s.cfg.name,
                    reach,
                    summary: summary(s.cfg.description.as_deref(), s.instructions.as_deref()),
                })
            })
            .collect();
        servers_section(listed)
    }

    /// Under `--compat 0.87`, at the start of a run: the system message that brings the context
    /// to this process's prompt and tools (sections only for a run that starts with a prompt,
    /// as pi: a retry only declares tool changes), and the prompt text the requests carry.
    pub(crate) fn system_update(
        &mut self,
        with_prompt: bool,
        remote: &[RemoteTool],
    ) -> (Option<SystemMessage>, String) {
        let mut declared = Declared::of(&self.state.messages);
        let wanted = with_prompt.then(|| self.wanted_sections(remote));
        // The built-ins (less those an extension replaces), then extensions' and MCP tools.
        let mut tools: Vec<ToolDeclaration> = self
            .env
            .tools
            .iter()
            .filter(|t| !remote.iter().any(|r| r.name == t.name()))
            .map(|t| declaration(t.as_ref()))
            .chain(remote.iter().map(|r| ToolDeclaration {
                name: r.name.clone(),
                description: r.description.clone(),
                parameters: r.parameters.clone(),
                constrained_sampling: None,
            }))
            .collect();
        crate::codemode::annotate(&mut tools, self.env.settings.codemode_presentation());
        let update = declared.update(wanted.as_ref(), &tools, crate::message::now_ms());
        if let Some(u) = &update {
            declared.apply(u);
        }
        let text = self.state.prompt_cache.get(&declared);
        (update, text)
    }
}
