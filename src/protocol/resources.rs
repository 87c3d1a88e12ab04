//! Skills, prompt templates, context files and commands.

/// Skills, prompt templates, context files and commands.
#[derive(Debug)]
pub struct Resources {}
