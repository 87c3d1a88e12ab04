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
        // codemode mode `only` (pi 1.6.0): the prompt lists the tools declared to the model.
        let only = active(crate::codemode::NAME) && self.env.settings.codemode_presentation().only;
        let shown = |n: &str| !only || !crate::codemode::listed_in_only(n);
        let mut names: Vec<(&str, &str)> = self
            .env
            .tools
            .iter()
            .filter(|t| shown(t.name()))
            .map(|t| (t.name(), t.snippet()))
            .collect();
        // Tools of extensions and MCP servers with a snippet, as the 0.73 prompt lists them.
        names.extend(
            remote
                .iter()
                .filter(|r| shown(&r.name))
                .filter_map(|r| r.snippet.as_deref().map(|s| (r.name.as_str(), s))),
        );
        let guidelines: Vec<&str> = remote
            .iter()
            .filter(|r| shown(&r.name))
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
        // pi connects its servers at the first prompt (after this section is made) unless
        // `/mcp` asked earlier, or the prompt waited for servers with direct tools.
        let known = self.plugins.mcp_connect_requested
            || self.plugins.servers.iter().any(|s| s.blocks_prompt);
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
                let instructions = s.instructions.as_deref().filter(|_| known);
                Some(Listed {
                    name: &s.cfg.name,
                    reach,
                    summary: summary(s.cfg.description.as_deref(), instructions),
                })
            })
            .collect();
        servers_section(listed)
    }

    /// What a script's call of remote tool `r` resolves to when it is not a string (pi 1.6.0's
    /// words for its output schema): an MCP tool's `CallToolResult`, the resource tools' objects.
    pub(crate) fn script_resolves(&self, r: &RemoteTool) -> Option<String> {
        use crate::core::mcp_resources::ResourceTool;
        use crate::core::plugins::Owner;
        match &r.owner {
            Owner::Mcp { server, .. } => {
                let s = self.plugins.servers.get(*server)?;
                let (_, t) = s.tools.iter().find(|(n, _)| *n == r.name)?;
                Some(crate::codemode::mcp_resolves(t.output_schema.as_ref()))
            }
            Owner::McpResources(ResourceTool::List) => {
                Some("`{ server?, resources, nextCursor?, errors? }`".into())
            }
            Owner::McpResources(ResourceTool::Templates) => {
                Some("`{ server?, resourceTemplates, nextCursor?, errors? }`".into())
            }
            Owner::McpResources(ResourceTool::Read) => Some("`{ server, uri, contents }`".into()),
            Owner::Ext(_) => None,
        }
    }

    /// How scripts see tool `name` (a built-in, or one of `remote`).
    pub(crate) fn script_view(
        &self,
        name: &str,
        remote: &[RemoteTool],
    ) -> crate::codemode::ScriptView {
        let Some(r) = remote.iter().find(|r| r.name == name) else {
            return crate::codemode::ScriptView::builtin(
                name,
                crate::prompt::sections::tool_rules(name, &self.profile.texts.system_prompt),
            );
        };
        let output = match &r.owner {
            crate::core::plugins::Owner::Mcp { server, .. } => {
                let schema = self
                    .plugins
                    .servers
                    .get(*server)
                    .and_then(|s| s.tools.iter().find(|(n, _)| *n == r.name))
                    .and_then(|(_, t)| t.output_schema.clone());
                crate::codemode::render::mcp_output(schema.as_ref())
            }
            _ => "string".into(),
        };
        let namespace = match &r.owner {
            crate::core::plugins::Owner::Mcp { server, .. } => {
                self.plugins.servers.get(*server).map(|s| {
                    (
                        crate::mcp::naming::namespace(&s.cfg.name),
                        s.cfg.description.clone(),
                    )
                })
            }
            _ => None,
        };
        crate::codemode::ScriptView {
            resolves: self.script_resolves(r),
            guidelines: r.guidelines.clone(),
            output,
            namespace,
        }
    }

    /// A remote tool's description in a request while `codemode` is declared with mode `on`
    /// (how a script calls it, as the system message declares it).
    pub(crate) fn script_call_description(&self, r: &RemoteTool) -> String {
        let suffix = match self.script_resolves(r) {
            Some(x) => format!(
                "\n\nCodemode: `tools.{}(args)` resolves to {x}.",
                crate::codemode::discovery::identifier(&r.name)
            ),
            None => crate::codemode::script_call_suffix(&r.name),
        };
        format!("{}{suffix}", r.description.trim())
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
        let mut wanted = with_prompt.then(|| self.wanted_sections(remote));
        // pi 1.6.0 lists the MCP servers as they are when a prompt starts: within a run (a
        // server connected, a tool changed) the section stays as declared.
        if let (Some(w), true) = (wanted.as_mut(), self.run.is_some()) {
            match declared.sections.get("mcp_servers") {
                Some(v) => {
                    w.insert("mcp_servers".into(), v.clone());
                }
                None => {
                    w.remove("mcp_servers");
                }
            }
        }
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
        let view = |name: &str| self.script_view(name, remote);
        crate::codemode::annotate(&mut tools, self.env.settings.codemode_presentation(), &view);
        let update = declared.update(wanted.as_ref(), &tools, crate::message::now_ms());
        if let Some(u) = &update {
            declared.apply(u);
        }
        let text = self.state.prompt_cache.get(&declared);
        (update, text)
    }
}
