//! The core: the one [`event::Event`] enum every thread sends, and the state machine that owns all
//! state and handles them one at a time.

pub mod agent;
pub mod bash;
pub mod codemode;
pub mod compaction;
pub mod event;
pub mod export;
pub mod ext;
pub mod gate;
pub mod machine;
pub mod mcp;
pub mod mcp_resources;
pub mod plugins;
pub mod prompt;
pub mod retry;
pub mod session_query;
pub mod sessions;
pub mod tool_search;
