//! The core: the one [`event::Event`] enum every thread sends, and the state machine that owns all
//! state and handles them one at a time.

pub mod agent;
pub mod auto_retry;
pub mod bash;
pub mod compact;
pub mod context;
pub mod event;
pub mod export;
pub mod ext;
pub mod gate;
pub mod limits;
pub mod machine;
pub mod mcp;
pub mod plugins;
pub mod queues;
pub mod session_query;
pub mod sessions;
pub mod system_message;
pub mod system_prompt;
