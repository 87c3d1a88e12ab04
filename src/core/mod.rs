//! The core: the one [`event::Event`] enum every thread sends, and the state machine that owns all
//! state and handles them one at a time.

pub mod event;
pub mod machine;
pub mod queues;
pub mod stats;
