//! Automatic retry of failed LLM requests.

/// Automatic retry of failed LLM requests.
#[derive(Debug)]
pub struct Retry {}
