//! The `get_commands` list: every slash command a host can send in a prompt, in pi's order and
//! shape (`name`, `description`, `source`, `sourceInfo`). Three sources, in this order:
//! extension commands, prompt templates, skills (`skill:<name>`). Templates and skills come from
//! [`Resources`]; extension commands are handed in by the extension host (`core/ext.rs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Resources, SourceInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandSource {
    /// Registered by an extension (or built into pi 0.87.1, like `llama`).
    Extension,
    /// A prompt template (`/name args`).
    Prompt,
    /// A skill (`/skill:name args`).
    Skill,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlashCommand {
    /// Without the leading `/`.
    pub name: String,
    /// Absent for an extension command registered without one; a template's may be a
    /// non-string value under 0.73.1 (see [`super::templates::Template::description`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Value>,
    pub source: CommandSource,
    /// pi 0.73.1's extension commands carry the extension's `path` instead of `sourceInfo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(
        rename = "sourceInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub source_info: Option<SourceInfo>,
}

/// The commands in pi's order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CommandList {
    pub commands: Vec<SlashCommand>,
}

impl CommandList {
    /// Extension commands first (in their registration order), then templates, then skills.
    pub fn new(extension_commands: Vec<SlashCommand>, resources: &Resources) -> CommandList {
        let mut commands = extension_commands;
        commands.reserve(resources.templates.len() + resources.skills.len());
        for t in &resources.templates {
            commands.push(SlashCommand {
                name: t.name.clone(),
                description: Some(t.description.clone()),
                source: CommandSource::Prompt,
                path: None,
                source_info: Some(t.source_info.clone()),
            });
        }
        for s in &resources.skills {
            commands.push(SlashCommand {
                name: format!("skill:{}", s.name),
                description: Some(Value::String(s.description.clone())),
                source: CommandSource::Skill,
                path: None,
                source_info: Some(s.source_info.clone()),
            });
        }
        CommandList { commands }
    }

    /// The `data` of the `get_commands` response: `{"commands":[...]}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{skills::Skill, templates::Template};
    use serde_json::json;

    #[test]
    fn order_and_shape() {
        let mut r = Resources::default();
        r.skills.push(Skill {
            name: "a".into(),
            description: "A".into(),
            file_path: "/s/a/SKILL.md".into(),
            base_dir: "/s/a".into(),
            source_info: SourceInfo::synthetic(
                "/s/a/SKILL.md",
                "auto",
                Some("user"),
                Some("/s".into()),
            ),
            disable_model_invocation: true,
        });
        r.templates.push(Template {
            name: "review".into(),
            description: json!("Review"),
            content: String::new(),
            file_path: "/p/review.md".into(),
            source_info: SourceInfo::synthetic("/p/review.md", "local", None, None),
        });
        let ext = SlashCommand {
            name: "llama".into(),
            description: None,
            source: CommandSource::Extension,
            path: None,
            source_info: Some(SourceInfo::synthetic(
                "<inline:llama.cpp>",
                "inline",
                None,
                None,
            )),
        };
        let v = CommandList::new(vec![ext], &r).to_json();
        assert_eq!(
            v,
            json!({"commands":[
                {"name":"llama","source":"extension","sourceInfo":{"path":"<inline:llama.cpp>","source":"inline","scope":"temporary","origin":"top-level"}},
                {"name":"review","description":"Review","source":"prompt","sourceInfo":{"path":"/p/review.md","source":"local","scope":"temporary","origin":"top-level"}},
                {"name":"skill:a","description":"A","source":"skill","sourceInfo":{"path":"/s/a/SKILL.md","source":"auto","scope":"user","origin":"top-level","baseDir":"/s"}}
            ]})
        );
        let text = serde_json::to_string(&v["commands"][2]).unwrap();
        assert_eq!(
            text,
            r#"{"name":"skill:a","description":"A","source":"skill","sourceInfo":{"path":"/s/a/SKILL.md","source":"auto","scope":"user","origin":"top-level","baseDir":"/s"}}"#
        );
    }
}
