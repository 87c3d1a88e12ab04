//! Permission rules (`pith.permissions`, `--allow` / `--ask` / `--deny`,
//! `--permission-default`): the pure rule matcher ([`rules`]) and bash line splitter
//! ([`shell`]). The machine's gate (`core/gate.rs`) applies them; see docs/security.md.

pub mod rules;
pub mod shell;
