//! Compaction and branch summaries.

/// Compaction and branch summaries.
#[derive(Debug)]
pub struct Compaction {}
