//! Order and shape of the protocol's answers (`abort`, end of input).

/// Order and shape of the protocol's answers (`abort`, end of input).
#[derive(Debug)]
pub struct Answers {}
