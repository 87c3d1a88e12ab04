//! Finding the processes a test started (by a marker in their command line) and waiting for them
//! to start or to be gone.

use std::time::{Duration, Instant};

/// The pids of processes whose command line contains `marker`.
pub fn pgrep(marker: &str) -> Vec<String> {
    let out = std::process::Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits up to `limit` for no process whose command line contains `marker`.
pub fn assert_no_process_within(marker: &str, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        let left = pgrep(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "processes with {marker:?} left: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A marker no other test (or test run) uses: `pith_<tag>_<pid>_<nanos>`.
pub fn unique_marker(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("pith_{tag}_{}_{nanos}", std::process::id())
}
