//! The pi protocol versions pith speaks, each a [`Profile`] of named behaviours.
//!
//! `--compat 0.73` (default, the seeds' protocol, pi 0.73.1), `--compat 0.87` (pi 0.87.1) or
//! `--compat 1.6` (pi 1.6.0; `latest`),
//! chosen by `--compat` or settings `pith.compat` (the flag wins) and resolved once at start-up
//! into a `&'static Profile`. Commands are the union in every version; what pith *emits* (events,
//! response shapes, session entries, texts, requests) follows the selected version exactly.
//!
//! A profile is data only: small enums, booleans and `&'static` texts, grouped by concern (one
//! file each below). Every place that behaves differently per version reads one named field, so
//! `grep` finds every site a behaviour touches. Each version is one `const PROFILE` in its own
//! file ([`v073`], [`v087`]); a later version is written as the one before with only what
//! changed (`Profile { agent: Agent { .. }, ..v087::PROFILE }`).
//!
//! This module imports nothing from the rest of the crate: the layers above read it.

mod agent;
mod answers;
mod compaction;
mod events;
mod llm;
mod resources;
mod retry;
mod texts;
mod tools;
pub mod v073;
pub mod v087;
pub mod v16;

pub use agent::*;
pub use answers::*;
pub use compaction::*;
pub use events::*;
pub use llm::*;
pub use resources::*;
pub use retry::*;
pub use texts::*;
pub use tools::*;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// pi 0.73.1: the protocol of the seeds and the shared scenarios.
    #[default]
    V073,
    /// pi 0.87.1.
    V087,
    /// pi 1.6.0: today's pi.
    V16,
}

impl Version {
    /// Every version pith speaks, oldest first.
    pub const ALL: [Version; 3] = [Version::V073, Version::V087, Version::V16];

    /// The newest version pith speaks (`--compat latest`).
    pub const LATEST: Version = Version::V16;

    /// `0.73`, `0.73.1`, `0.87`, `0.87.1`, `1.6`, `1.6.0` (also with a leading `v`), `latest`.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        match s {
            "0.73" | "0.73.1" => Some(Version::V073),
            "0.87" | "0.87.1" => Some(Version::V087),
            "1.6" | "1.6.0" => Some(Version::V16),
            "latest" => Some(Version::LATEST),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V073 => "0.73",
            Version::V087 => "0.87",
            Version::V16 => "1.6",
        }
    }

    /// The behaviours of this version.
    pub fn profile(self) -> &'static Profile {
        match self {
            Version::V073 => &v073::PROFILE,
            Version::V087 => &v087::PROFILE,
            Version::V16 => &v16::PROFILE,
        }
    }
}

/// Everything that differs between protocol versions, by concern.
#[derive(Debug)]
pub struct Profile {
    pub version: Version,
    /// Shapes of RPC events.
    pub events: Events,
    /// Order and shape of the protocol's answers.
    pub answers: Answers,
    /// The agent loop.
    pub agent: Agent,
    /// Compaction and branch summaries.
    pub compaction: Compaction,
    /// Automatic retry of failed LLM requests.
    pub retry: Retry,
    /// The built-in tools.
    pub tools: Tools,
    /// Skills, prompt templates, context files, commands.
    pub resources: Resources,
    /// What providers see: the SDK generation and the built-in model catalog.
    pub llm: Llm,
    /// Texts that differ between the versions.
    pub texts: Texts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(Version::parse("0.73"), Some(Version::V073));
        assert_eq!(Version::parse("0.87.1"), Some(Version::V087));
        assert_eq!(Version::parse("v0.87"), Some(Version::V087));
        assert_eq!(Version::parse("1.6.0"), Some(Version::V16));
        assert_eq!(Version::parse("latest"), Some(Version::V16));
        assert_eq!(Version::parse("0.80"), None);
        assert_eq!(Version::parse("1.5"), None);
        assert_eq!(Version::default(), Version::V073);
        assert_eq!(Version::V087.profile().version, Version::V087);
        assert_eq!(Version::V073.profile().version, Version::V073);
    }
}
