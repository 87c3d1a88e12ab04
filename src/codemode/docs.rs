//! Where codemode's description tells the model to read about `models` (glue: reads the
//! environment and may write one file, once per process).
//!
//! pi names its installed `docs/codemode.md`. pith installs no docs tree, and a static binary
//! copied onto a server has no source tree next to it, so the path must exist wherever pith
//! runs: `PITH_DOCS_DIR` when set; else the source tree pith was built from when it is still
//! there (developer builds); else a copy of pith's own `docs/codemode.md`, carried in the
//! binary, written to the user's cache (`$XDG_CACHE_HOME/pith/docs/`, else
//! `~/.cache/pith/docs/`). The path is stable from run to run: it is part of the tool's
//! description, which providers cache with the prompt.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// pith's docs/codemode.md, as built.
const TEXT: &str = include_str!("../../docs/codemode.md");

/// The path, resolved (and the copy written) on first use.
pub fn docs_path() -> String {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let built = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/docs"));
        match resolve(
            env("PITH_DOCS_DIR").map(PathBuf::from),
            built,
            cache_home(env("XDG_CACHE_HOME"), env("HOME")),
        ) {
            Ok(p) => p,
            Err((p, e)) => {
                eprintln!("pith: codemode: cannot write {p}: {e}");
                format!("{}/codemode.md", built.display())
            }
        }
    })
    .clone()
}

/// `$XDG_CACHE_HOME` (absolute only, as the spec says), else `$HOME/.cache`.
fn cache_home(
    xdg: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    xdg.map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.map(|h| PathBuf::from(h).join(".cache")))
}

/// The order above; `Err` names the copy that could not be written.
fn resolve(
    docs_dir: Option<PathBuf>,
    built: &Path,
    cache: Option<PathBuf>,
) -> Result<String, (String, String)> {
    if let Some(d) = docs_dir {
        return Ok(d.join("codemode.md").display().to_string());
    }
    let here = built.join("codemode.md");
    if here.is_file() {
        return Ok(here.display().to_string());
    }
    let Some(cache) = cache else {
        return Err((
            "~/.cache/pith/docs/codemode.md".into(),
            "neither XDG_CACHE_HOME nor HOME is set".into(),
        ));
    };
    let file = cache.join("pith").join("docs").join("codemode.md");
    let shown = file.display().to_string();
    write_copy(&file).map_err(|e| (shown.clone(), e.to_string()))?;
    Ok(shown)
}

/// Writes the copy unless the file already holds it (atomically: a reader never sees half).
fn write_copy(file: &Path) -> std::io::Result<()> {
    if std::fs::read(file).is_ok_and(|b| b == TEXT.as_bytes()) {
        return Ok(());
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, TEXT.as_bytes())?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_dir_wins_then_the_source_tree_then_a_copy_in_the_cache() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        assert_eq!(
            resolve(Some("/opt/pith/docs".into()), t.path(), Some(cache.clone())),
            Ok("/opt/pith/docs/codemode.md".into())
        );
        let src = t.path().join("src-docs");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("codemode.md"), "x").unwrap();
        assert_eq!(
            resolve(None, &src, Some(cache.clone())),
            Ok(src.join("codemode.md").display().to_string())
        );
        // Gone (a copied binary): the copy is written, then left alone when it is current.
        let gone = t.path().join("gone");
        let want = cache.join("pith/docs/codemode.md");
        assert_eq!(
            resolve(None, &gone, Some(cache.clone())),
            Ok(want.display().to_string())
        );
        assert_eq!(std::fs::read_to_string(&want).unwrap(), TEXT);
        std::fs::write(&want, "stale").unwrap();
        resolve(None, &gone, Some(cache.clone())).unwrap();
        assert_eq!(std::fs::read_to_string(&want).unwrap(), TEXT);
        // Nowhere to write: an error naming the copy.
        let blocked = t.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        assert!(resolve(None, &gone, Some(blocked)).is_err());
        assert!(resolve(None, &gone, None).is_err());
    }

    #[test]
    fn the_cache_is_xdg_when_absolute_else_home() {
        assert_eq!(
            cache_home(Some("/x/c".into()), Some("/h".into())),
            Some(PathBuf::from("/x/c"))
        );
        assert_eq!(
            cache_home(Some("rel".into()), Some("/h".into())),
            Some(PathBuf::from("/h/.cache"))
        );
        assert_eq!(cache_home(None, None), None);
    }
}
