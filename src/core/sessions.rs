//! Session commands: `new_session`, `switch_session`, `fork` / `branch`, `clone`. Each replaces
//! the session object the machine owns and rebuilds the agent's context from it; a running turn
//! is stopped silently first, as the reference does for all four. `switch_session` to a
//! file that does not exist starts a new empty session to be written there, as the reference.

use std::path::PathBuf;

use serde_json::json;

use crate::core::machine::{Answer, Machine};
use crate::message::ThinkingLevel;
use crate::protocol::SessionSwitch;
use crate::session::Session;

impl Machine {
    pub(crate) fn cmd_new_session(&mut self, parent_session: Option<String>) -> Answer {
        self.abort_before_replace();
        self.discard_run();
        // A bash result still waiting for the next prompt belongs to the session it ran in.
        self.flush_deferred_bash();
        let dir = self
            .state
            .session
            .session_dir()
            .map(PathBuf::from)
            .filter(|_| self.state.session.is_persisted());
        let cwd = self.env.cwd.to_string_lossy().to_string();
        self.state.session = Session::new(&cwd, dir, parent_session);
        self.rebuild_session_runtime();
        self.start_fresh_session();
        Ok(Some(json!({ "cancelled": false })))
    }

    /// A session that was just created: it records the model and thinking level it starts with
    /// (so a resume restores them), as the reference does for every new session; then the
    /// context (empty) and queues are reset.
    fn start_fresh_session(&mut self) {
        if let Some(m) = &self.state.model {
            let (provider, id) = (m.provider.clone(), m.id.clone());
            self.state.session.append_model_change(&provider, &id);
        }
        self.state
            .session
            .append_thinking_level_change(self.state.thinking);
        self.reset_context();
    }

    /// `--compat 0.87`: pi 0.87.1 rebuilds its whole runtime for every session it switches to
    /// (new, switch, fork, clone) from the command line again, and no longer saves the RPC
    /// setters of the model and thinking level. So the model is the CLI's, else the session's
    /// own (when it has messages), else the scoped pick (when it has none), else the first
    /// model; the level is the CLI's, else the scoped pick's, else the session's own, else the
    /// model's `modelThinkingLevels` setting, else `defaultThinkingLevel`, else `medium`. What
    /// was set over RPC for the previous session does not carry over. Under 0.73 nothing
    /// changes here (pi 0.73.1 saved the setters, so the current values carried over).
    fn rebuild_session_runtime(&mut self) {
        if self.profile.agent.session_switch != SessionSwitch::Rebuild {
            return;
        }
        self.state.session_context_files = None;
        let d = self.state.defaults.clone();
        let existing = self
            .state
            .session
            .entries()
            .iter()
            .any(|e| e.entry_type() == "message");
        let from_session = || {
            self.state.session.model().and_then(|(p, i)| {
                self.env
                    .registry
                    .find(&p, &i)
                    .filter(|m| self.env.auth.has_auth(&m.provider))
                    .cloned()
            })
        };
        let scoped = d.scoped.clone().filter(|_| !existing);
        let model = d
            .cli_model
            .clone()
            .or_else(|| if existing { from_session() } else { None })
            .or_else(|| scoped.as_ref().map(|(m, _)| m.clone()))
            .or_else(|| {
                self.state
                    .defaults
                    .initial(&self.env.registry, &self.env.auth)
            });
        let level = d
            .cli_level
            .or(scoped.and_then(|(_, l)| l))
            .or_else(|| {
                existing.then(|| {
                    self.state
                        .session
                        .thinking_level()
                        .or(self.env.settings.default_thinking_level())
                        .unwrap_or(ThinkingLevel::Medium)
                })
            })
            .or_else(|| {
                model
                    .as_ref()
                    .and_then(|m| self.env.settings.model_thinking_level(&m.provider, &m.id))
            })
            .or(self.env.settings.default_thinking_level())
            .unwrap_or(ThinkingLevel::Medium);
        self.state.thinking = match &model {
            Some(m) if m.reasoning => {
                crate::llm::clamp_thinking(&self.env.registry.thinking_levels(m), level)
            }
            _ => ThinkingLevel::Off,
        };
        self.state.model = model;
    }

    pub(crate) fn cmd_switch_session(&mut self, session_path: &str) -> Answer {
        let path = self.env.cwd.join(session_path);
        let meta = std::fs::metadata(&path);
        if !path.exists() || meta.as_ref().is_ok_and(|m| m.is_file() && m.len() == 0) {
            // The reference starts a new empty session that will be written at that path (also
            // for an empty file: it holds no session to lose).
            self.abort_before_replace();
            self.discard_run();
            self.flush_deferred_bash();
            let cwd = self.env.cwd.to_string_lossy().to_string();
            let mut fresh = Session::create_at(&path, &cwd);
            if let Some(dir) = self
                .state
                .session
                .session_dir()
                .filter(|_| self.state.session.is_persisted())
            {
                fresh.set_session_dir(dir.to_path_buf());
            }
            self.state.session = fresh;
            self.rebuild_session_runtime();
            self.start_fresh_session();
            return Ok(Some(json!({ "cancelled": false })));
        }
        // A FIFO would block the state machine in `open` until someone writes to it, a device
        // like /dev/zero would be read without end: only regular files are session files.
        let is_file = meta.as_ref().is_ok_and(|m| m.is_file());
        if !meta.is_ok_and(|m| m.is_file() || m.is_dir()) {
            return Err(format!(
                "Cannot read session file {}: not a regular file",
                path.display()
            ));
        }
        let mut loaded = Session::open(&path).map_err(|e| {
            // Readable but without a session header: pi 0.87.1's and 1.6.0's words (pi 0.73.1
            // overwrote such a file, which pith never does: docs/rpc.md, deviation 9).
            if is_file
                && crate::session::store::read_header(&path).is_none()
                && std::fs::File::open(&path).is_ok()
            {
                format!("Session file is not a valid pi session: {}", path.display())
            } else {
                e
            }
        })?;
        // pi's assertSessionCwdExists: a session recorded in a directory that is gone is refused.
        let recorded = loaded.cwd();
        if !recorded.is_empty() && !std::path::Path::new(recorded).exists() {
            return Err(format!(
                "Stored session working directory does not exist: {recorded}\nSession file: {}\nCurrent working directory: {}",
                path.display(),
                self.env.cwd.display()
            ));
        }
        self.abort_before_replace();
        self.discard_run();
        self.flush_deferred_bash();
        if let Some(dir) = self
            .state
            .session
            .session_dir()
            .filter(|_| self.state.session.is_persisted())
        {
            loaded.set_session_dir(dir.to_path_buf());
        }
        for w in loaded.take_warnings() {
            eprintln!("Warning: {w}");
        }
        self.state.session = loaded;
        if self.profile.agent.session_switch == SessionSwitch::Rebuild {
            self.rebuild_session_runtime();
            if self.state.session.thinking_level().is_none() {
                self.state
                    .session
                    .append_thinking_level_change(self.state.thinking);
            }
            self.reset_context();
            return Ok(Some(json!({ "cancelled": false })));
        }
        if let Some((p, i)) = self.state.session.model() {
            if let Some(m) = self
                .env
                .registry
                .find(&p, &i)
                .filter(|m| self.env.auth.has_auth(&m.provider))
            {
                self.state.model = Some(m.clone());
            }
        }
        let recorded = self.state.session.thinking_level();
        let wanted = recorded
            .or(self.env.settings.default_thinking_level())
            .unwrap_or(ThinkingLevel::Medium);
        self.state.thinking = match &self.state.model {
            Some(m) if m.reasoning => {
                crate::llm::clamp_thinking(&self.env.registry.thinking_levels(m), wanted)
            }
            _ => ThinkingLevel::Off,
        };
        if recorded.is_none() {
            self.state
                .session
                .append_thinking_level_change(self.state.thinking);
        }
        self.reset_context();
        Ok(Some(json!({ "cancelled": false })))
    }

    pub(crate) fn cmd_fork(&mut self, entry_id: &str) -> Answer {
        let (forked, text) = self.state.session.fork_at(entry_id)?;
        let target = self
            .state
            .session
            .entry(entry_id)
            .and_then(|e| e.parent_id());
        self.check_saved(target)?;
        self.replace_session(forked);
        Ok(Some(json!({ "text": text, "cancelled": false })))
    }

    pub(crate) fn cmd_clone(&mut self) -> Answer {
        self.check_saved(self.state.session.leaf_id())?;
        let cloned = self.state.session.clone_branch()?;
        self.replace_session(cloned);
        Ok(Some(json!({ "cancelled": false })))
    }

    /// pi 0.87.1+ (`agent.replace_aborts_run`): a run streaming a reply is aborted as by `abort`
    /// before the session is replaced (its events, its reply written to the session being left).
    /// A run whose tools are running is aborted before the command runs, which then waits for
    /// the run to end (`Machine::pending_replace`).
    fn abort_before_replace(&mut self) {
        if self.profile.agent.replace_aborts_run
            && let Some(run) = self.run.as_ref()
            && matches!(run.phase, crate::core::agent::Phase::Streaming { .. })
        {
            self.abort_requested = true;
            self.abort_run(None);
        }
    }

    /// A session switch must wait for the run to end (0.87+: a run whose tools are running is
    /// aborted first, and pi's abort waits for the tools; also while earlier switches wait).
    pub(crate) fn replace_waits_for_tools(&self) -> bool {
        self.profile.agent.replace_aborts_run
            && self.run.as_ref().is_some_and(|r| {
                !self.pending_replace.is_empty()
                    || matches!(r.phase, crate::core::agent::Phase::Tools(_))
            })
    }

    /// pi branches a saved session from its file: a session to be written that is not on disk
    /// yet cannot be branched at `target` (the entry the new branch ends at; `None`, a fork of
    /// the first message, starts an empty session and always works).
    fn check_saved(&self, target: Option<&str>) -> Result<(), String> {
        let s = &self.state.session;
        match target {
            Some(target) if s.is_persisted() && !s.is_flushed() => {
                Err(match self.profile.texts.fork_unsaved {
                    Some(text) => text.to_string(),
                    None => format!("Entry {target} not found"),
                })
            }
            _ => Ok(()),
        }
    }

    /// `fork` / `clone`: the reference tears the current session down as for `new_session`
    /// (a running turn stops silently, its reply is not written anywhere; the queues start
    /// empty), then continues on the new one.
    fn replace_session(&mut self, next: Session) {
        self.abort_before_replace();
        self.discard_run();
        // A bash result still waiting for the next prompt belongs to the session it ran in.
        self.flush_deferred_bash();
        self.state.session = next;
        // pi 1.6.0 writes a branched session at once when it holds a user message (as any
        // session from its first user message on).
        if self.profile.agent.early_session_file
            && self
                .state
                .session
                .entries()
                .iter()
                .any(|e| e.user_text().is_some())
        {
            self.state.session.start_file();
        }
        // pi 0.87.1 rebuilds its runtime from the command line (no-op under 0.73).
        self.rebuild_session_runtime();
        self.reset_context();
    }
}
