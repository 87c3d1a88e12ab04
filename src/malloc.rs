//! How pith's threads share the C allocator (glibc's or musl's `malloc`, which Rust's global
//! allocator calls).
//!
//! glibc gives every thread that allocates an arena of its own, up to eight per core, each
//! keeping freed memory for itself (a few hundred KiB resident once a busy thread has used it).
//! pith's threads mostly hand data to each other rather than allocate side by side, so the
//! process keeps one arena ([`one_arena`]): many agents on one host pay for every arena each
//! keeps (docs/architecture.md, "Memory per agent").
//!
//! The one place where threads do allocate side by side is the parse of a long session at
//! start-up (`session/store.rs`): helper threads build the messages of a 17 MB file while the
//! main thread adds them to the tree, 145,000 allocations in all. In one arena they take turns
//! on its lock: thousands of context switches, and two threads slower than one. Their own arenas
//! cost nothing that matters next to the tens of MiB such a session occupies, so start-up gives
//! them arenas ([`arenas_at_start`]) — which glibc allows only then: it fixes the number of
//! arenas a process may have when a thread other than main first allocates, and never reads
//! `M_ARENA_MAX` again. musl's malloc has one lock for every thread, so there threads cannot
//! allocate side by side at all and a long session is parsed on one thread.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;

    pub fn arena_max(n: usize) -> bool {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        // SAFETY: mallopt only adjusts allocator parameters; M_ARENA_MAX takes any positive count.
        unsafe { mallopt(M_ARENA_MAX, n) == 1 }
    }
}

/// At the start of `main`, before any thread exists: one arena for the whole process (glibc; a
/// no-op elsewhere).
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::arena_max(1);
}

/// How many helper threads (of the `wanted`) may allocate side by side with the main thread,
/// each in an arena of its own. Only for start-up, before any thread but main exists (see the
/// module's documentation): later, glibc's limit is fixed at the one arena of [`one_arena`].
/// glibc: arenas for `wanted` more threads, all of them; musl: none (one lock for all threads);
/// other allocators allocate side by side anyway.
pub fn arenas_at_start(wanted: usize) -> usize {
    if wanted == 0 {
        return 0;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if glibc::arena_max(wanted + 1) {
            wanted
        } else {
            0
        }
    }
    #[cfg(target_env = "musl")]
    {
        0
    }
    #[cfg(not(any(all(target_os = "linux", target_env = "gnu"), target_env = "musl")))]
    {
        wanted
    }
}

/// [`arenas_at_start`] after start-up: how many helper threads may allocate side by side with
/// the calling one now. None with glibc (its one arena is fixed by then) or musl.
pub fn side_by_side(wanted: usize) -> usize {
    if cfg!(any(
        all(target_os = "linux", target_env = "gnu"),
        target_env = "musl"
    )) {
        0
    } else {
        wanted
    }
}
