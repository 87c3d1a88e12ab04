//! The directory walks of `grep` and `find`: ripgrep's and fd's own walker (`ignore`'s
//! [`WalkBuilder`]) configured with the flags the reference passes them.
//!
//! - `grep` is `rg --hidden` (plus `--glob`): `.gitignore`, `.git/info/exclude` and the global git
//!   excludes apply only inside a git repository (rg requires git), `.ignore` and `.rgignore`
//!   apply everywhere, ignore files of parent directories apply too.
//! - `find` is `fd --hidden --no-require-git`: the same git rules whether or not there is a
//!   repository, `.ignore` and `.fdignore`, and fd's global ignore file
//!   (`$XDG_CONFIG_HOME/fd/ignore` or `~/.config/fd/ignore`).
//!
//! Two things differ on purpose (docs/rpc.md): entries come sorted by file name, directory by
//! directory (rg's `--sort path` order; both tools otherwise print in the order their parallel
//! walkers happen to finish), and `.git` directories are never entered (both tools would list
//! and search the repository's internals under `--hidden`). [`super::ordered_walk`] runs these
//! walks on several threads and keeps that order.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use ignore::overrides::Override;

/// Which tool's defaults the walk follows.
#[derive(Clone)]
pub enum Flavor {
    /// ripgrep: `--hidden`, git rules only inside a repository, `.rgignore`, `--glob` overrides.
    Rg(Override),
    /// fd: `--hidden --no-require-git`, `.fdignore`, fd's global ignore file.
    Fd,
}

/// A walker over `roots` (walked one after the other) with `flavor`'s ignore rules. `cwd` is the
/// tool's working directory (where the reference runs rg/fd): global git excludes are matched
/// relative to it.
pub fn builder(roots: &[&Path], cwd: &Path, flavor: &Flavor) -> WalkBuilder {
    let mut b = WalkBuilder::empty();
    for root in roots {
        b.add(root);
    }
    b.hidden(false)
        .parents(true)
        .ignore(true)
        .git_global(true)
        .git_ignore(true)
        .git_exclude(true)
        .follow_links(false)
        .current_dir(cwd)
        // Siblings share their parent's path, so comparing whole paths byte by byte orders
        // them by file name (rg's `--sort path`) without taking the name apart per comparison.
        .sort_by_file_path(|a: &Path, b: &Path| a.as_os_str().cmp(b.as_os_str()))
        .filter_entry(|e| !is_git_dir(e));
    match flavor {
        Flavor::Rg(overrides) => {
            b.require_git(true)
                .add_custom_ignore_filename(".rgignore")
                .overrides(overrides.clone());
        }
        Flavor::Fd => {
            b.require_git(false).add_custom_ignore_filename(".fdignore");
            if let Some(global) = fd_global_ignore().filter(|p| p.is_file()) {
                // Like fd: a partly malformed file still applies its good lines.
                let _ = b.add_ignore(global);
            }
        }
    }
    b
}

fn is_git_dir(e: &ignore::DirEntry) -> bool {
    e.depth() > 0 && e.file_name() == ".git" && e.file_type().is_some_and(|t| t.is_dir())
}

/// fd's global ignore file: `$XDG_CONFIG_HOME/fd/ignore`, else `$HOME/.config/fd/ignore`.
fn fd_global_ignore() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(config.join("fd").join("ignore"))
}

/// `path` relative to `root` with `/` separators (the entry itself when it is the root).
pub fn relative(path: &Path, root: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.to_string_lossy().into_owned()
}
