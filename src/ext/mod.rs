//! Extensions: executables that speak JSON lines with pith (docs/extensions.md), and tool
//! approval for locked-down hosts (`--confirm-tools`). The pure parts live here (protocol
//! decoding and encoding, UI frames, approval texts, which extensions to load); the process I/O
//! is [`crate::io::child`] and the state-machine glue is `core::plugins` / `core::ext` /
//! `core::gate`.

pub mod load;
pub mod node_host;
pub mod protocol;
pub mod ui;
