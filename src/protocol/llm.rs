//! What providers see: the SDK generation they imitate (headers, betas, body fields, error wording, usage formulas) and the built-in model catalog.

/// What providers see: the SDK generation they imitate (headers, betas, body fields, error wording, usage formulas) and the built-in model catalog.
#[derive(Debug)]
pub struct Llm {}
