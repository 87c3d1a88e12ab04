//! The lock pi puts on `auth.json` while it refreshes an OAuth token, so several processes (pi's
//! and pith's, in any mix) never refresh the same login twice or overwrite each other.
//!
//! pi uses the npm package `proper-lockfile`: the lock is the *directory* `<file>.lock`, created
//! with `mkdir` (atomic on every filesystem, NFS included). Its holder touches the directory's
//! mtime every `stale / 2`; a lock whose mtime is older than `stale` (30 s for pi's refresh) is
//! abandoned and may be removed by anyone. Release removes the directory. pith does exactly the
//! same, so each side respects the other's lock. pi's quick synchronous locks (reading auth.json)
//! use proper-lockfile's default `stale` of 10 s, so while pith holds the lock a keeper thread
//! touches it every 2 s: a slow token endpoint never makes pith's lock look abandoned.
//!
//! A lock is released on every path: dropping [`Lock`] (every return and error of its holder,
//! a panic's unwinding) and, when pith exits while a request's worker still holds one (a token
//! endpoint that does not answer, then stdin closes or a signal comes), [`release_all`] on the
//! way out — proper-lockfile removes its locks on exit too. Otherwise pi and other pith
//! processes would wait for an abandoned lock until it turned stale.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// The lock directories this process holds; `None` once [`release_all`] ran (pith is exiting:
/// no new lock is taken). Process-wide behind a mutex because the exit path must remove the
/// locks of workers that may be stuck in a network call: a channel would need them to answer.
static HELD: Mutex<Option<Vec<PathBuf>>> = Mutex::new(Some(Vec::new()));

fn held() -> std::sync::MutexGuard<'static, Option<Vec<PathBuf>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remove every lock this process still holds and refuse new ones. Called once, as pith exits.
pub fn release_all() {
    let dirs = held().take().unwrap_or_default();
    for dir in dirs {
        let _ = std::fs::remove_dir(&dir);
    }
}

/// pi's `stale` for the refresh lock.
pub const STALE: Duration = Duration::from_secs(30);

/// How often a held lock is touched.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

/// A held lock; dropping it releases it.
#[derive(Debug)]
pub struct Lock {
    dir: PathBuf,
    /// Dropping the sender stops the keeper thread.
    keeper: Option<(crossbeam_channel::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Lock {
    fn new(dir: PathBuf) -> Lock {
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        let path = dir.clone();
        let keeper = std::thread::Builder::new()
            .name("auth-lock".into())
            .spawn(move || {
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    rx.recv_timeout(KEEP_ALIVE)
                {
                    touch(&path);
                }
            })
            .ok()
            .map(|h| (tx, h));
        Lock { dir, keeper }
    }
}

/// Set the lock directory's mtime to now (proper-lockfile's periodic update).
fn touch(dir: &Path) {
    let now = std::fs::FileTimes::new().set_modified(SystemTime::now());
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.set_times(now);
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some((tx, handle)) = self.keeper.take() {
            drop(tx);
            let _ = handle.join();
        }
        // Only while it is still ours: after `release_all` the directory may be someone else's.
        let mut held = held();
        if let Some(list) = held.as_mut() {
            if let Some(i) = list.iter().position(|d| *d == self.dir) {
                list.swap_remove(i);
                let _ = std::fs::remove_dir(&self.dir);
            }
        }
    }
}

/// The lock directory of `file`: `<realpath(file)>.lock`, as proper-lockfile resolves it.
pub fn lock_dir(file: &Path) -> PathBuf {
    let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let mut name = real.into_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// Whether a lock directory last touched at `mtime` is abandoned at `now`.
pub fn is_stale(mtime: SystemTime, now: SystemTime, stale: Duration) -> bool {
    now.duration_since(mtime).is_ok_and(|age| age > stale)
}

/// The wait before attempt `n` (0-based) after a busy lock: proper-lockfile's retry schedule for
/// pi's refresh (`minTimeout` 100 ms, `factor` 2, `maxTimeout` 10 s), randomised by up to ×2 as
/// its `randomize` does, from `jitter` in [0, 1).
pub fn backoff(n: u32, jitter: f64) -> Duration {
    let base = 100.0 * 2f64.powi(n.min(16) as i32);
    let ms = (base * (1.0 + jitter.clamp(0.0, 1.0))).min(10_000.0);
    Duration::from_millis(ms as u64)
}

/// Take the lock of `file`, waiting while another process holds it, for at most `patience`.
/// Abandoned locks (see [`is_stale`]) are removed.
pub fn acquire(file: &Path, patience: Duration) -> io::Result<Lock> {
    let dir = lock_dir(file);
    let deadline = Instant::now() + patience;
    let mut attempt = 0u32;
    loop {
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                let mut held = held();
                let Some(list) = held.as_mut() else {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(io::Error::other("pith is exiting"));
                };
                list.push(dir.clone());
                drop(held);
                return Ok(Lock::new(dir));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let stale = std::fs::metadata(&dir)
                    .and_then(|m| m.modified())
                    .map(|t| is_stale(t, SystemTime::now(), STALE))
                    // Gone between mkdir and stat: try again at once.
                    .unwrap_or(true);
                if stale {
                    let _ = std::fs::remove_dir(&dir);
                    if attempt > 64 {
                        return Err(io::Error::other("lock keeps coming back"));
                    }
                    attempt += 1;
                    continue;
                }
            }
            Err(e) => return Err(e),
        }
        let wait = backoff(attempt, jitter());
        if Instant::now() + wait > deadline {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another process", file.display()),
            ));
        }
        std::thread::sleep(wait);
        attempt += 1;
    }
}

/// Take the lock directory `dir` itself (proper-lockfile with `realpath: false`), abandoned after
/// `stale`, trying every `step` for at most `patience` (pi's MCP refresh lock: 20 s, 100 ms, 25 s).
pub fn acquire_dir(
    dir: &Path,
    stale: Duration,
    step: Duration,
    patience: Duration,
) -> io::Result<Lock> {
    let deadline = Instant::now() + patience;
    let mut takeovers = 0u32;
    loop {
        match std::fs::create_dir(dir) {
            Ok(()) => {
                let mut held = held();
                let Some(list) = held.as_mut() else {
                    let _ = std::fs::remove_dir(dir);
                    return Err(io::Error::other("pith is exiting"));
                };
                list.push(dir.to_path_buf());
                drop(held);
                return Ok(Lock::new(dir.to_path_buf()));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let abandoned = std::fs::metadata(dir)
                    .and_then(|m| m.modified())
                    .map(|t| is_stale(t, SystemTime::now(), stale))
                    .unwrap_or(true);
                if abandoned && takeovers < 64 {
                    let _ = std::fs::remove_dir(dir);
                    takeovers += 1;
                    continue;
                }
            }
            Err(e) => return Err(e),
        }
        if Instant::now() + step > deadline {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is held by another process", dir.display()),
            ));
        }
        std::thread::sleep(step);
    }
}

fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

/// Replace `file` with `contents` atomically (temporary file in the same directory, fsync,
/// rename), mode 0600 whatever the old file's was: auth.json holds secrets, and pi 0.73.1
/// writes it 0600 too.
pub fn write_atomic(file: &Path, contents: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".auth.json.")
        .tempfile_in(dir)?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    tmp.persist(&real).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_after_thirty_seconds() {
        let now = SystemTime::now();
        assert!(!is_stale(now, now, STALE));
        assert!(!is_stale(now - Duration::from_secs(29), now, STALE));
        assert!(is_stale(now - Duration::from_secs(31), now, STALE));
        // A clock that went backwards never makes a lock stale.
        assert!(!is_stale(now + Duration::from_secs(60), now, STALE));
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(0, 0.0), Duration::from_millis(100));
        assert_eq!(backoff(1, 0.0), Duration::from_millis(200));
        assert_eq!(backoff(3, 0.5), Duration::from_millis(1200));
        assert_eq!(backoff(30, 0.9), Duration::from_secs(10));
    }

    #[test]
    fn lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth.json");
        std::fs::write(&file, "{}").unwrap();
        let lock = acquire(&file, Duration::from_secs(1)).unwrap();
        assert!(dir.path().join("auth.json.lock").is_dir());
        let busy = acquire(&file, Duration::from_millis(250)).unwrap_err();
        assert_eq!(busy.kind(), io::ErrorKind::WouldBlock);
        drop(lock);
        assert!(!dir.path().join("auth.json.lock").exists());
        drop(acquire(&file, Duration::from_millis(10)).unwrap());
    }

    #[test]
    fn an_abandoned_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth.json");
        std::fs::write(&file, "{}").unwrap();
        let lock_dir = dir.path().join("auth.json.lock");
        std::fs::create_dir(&lock_dir).unwrap();
        let old = SystemTime::now() - Duration::from_secs(120);
        std::fs::File::open(&lock_dir)
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_modified(old))
            .unwrap();
        let lock = acquire(&file, Duration::from_millis(10)).unwrap();
        drop(lock);
    }

    #[test]
    fn atomic_write_is_always_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth.json");
        std::fs::write(&file, "{}").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&file, b"{\"a\": 1}").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"a\": 1}");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }
}
