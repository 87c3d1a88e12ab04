//! The built-in tools (wording, validation, environment).

/// The built-in tools (wording, validation, environment).
#[derive(Debug)]
pub struct Tools {}
