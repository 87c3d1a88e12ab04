//! Shapes of RPC events (what a frame carries in each version).

/// Shapes of RPC events (what a frame carries in each version).
#[derive(Debug)]
pub struct Events {}
