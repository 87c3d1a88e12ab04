//! How pith's threads share the C allocator (glibc's or musl's `malloc`, which Rust's global
//! allocator calls).
//!
//! glibc gives every thread that allocates an arena of its own, up to eight per core, each
//! keeping freed memory for itself (a few hundred KiB resident once a busy thread has used it).
//! pith's threads mostly hand data to each other rather than allocate side by side, so the
//! process keeps few arenas ([`arenas_for_searches`]): many agents on one host pay for every
//! arena each keeps (docs/architecture.md, "Memory per agent").
//!
//! Two places allocate side by side. `grep` and `find` walk a tree on one thread per core
//! (`tools/ordered_walk.rs`), every entry allocating (`ignore`'s paths, listings, matchers): in
//! one arena the threads took turns on its lock, 30,000-50,000 context switches per 20 walks of
//! the bench's tree and 1.5-1.8x the CPU (issue 29). So the process has one arena besides main's
//! per walk thread (three on two cores: about 20 KiB more resident at rest, 130 KiB after a
//! search). And the parse of a long session at start-up (`session/store.rs`): helper threads
//! build the messages of a 17 MB file while the main thread adds them to the tree, 145,000
//! allocations in all; in one arena they take turns on its lock: thousands of context switches,
//! and two threads slower than one. Their own arenas cost nothing that matters next to the tens
//! of MiB such a session occupies, so start-up gives them arenas ([`arenas_at_start`]) — which
//! glibc allows only then: it fixes the number of arenas a process may have when a thread other
//! than main first allocates, and never reads `M_ARENA_MAX` again. musl's malloc has one lock
//! for every thread, so there threads cannot allocate side by side at all and a long session is
//! parsed on one thread.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;

    unsafe extern "C" {
        fn sched_getaffinity(pid: i32, size: usize, mask: *mut u64) -> i32;
    }

    /// The cores this process may run on (1 when unknown): `sched_getaffinity` alone, as
    /// `available_parallelism` would also read the cgroup files and mountinfo, which costs
    /// more than the rest of start-up.
    pub fn cores() -> usize {
        let mut mask = [0u64; 16];
        // SAFETY: the mask is 1,024 bits, the size passed; the call writes at most that.
        let ok = unsafe { sched_getaffinity(0, std::mem::size_of_val(&mask), mask.as_mut_ptr()) };
        if ok != 0 {
            return 1;
        }
        mask.iter()
            .map(|w| w.count_ones() as usize)
            .sum::<usize>()
            .max(1)
    }

    /// The arenas [`super::arenas_for_searches`] set: the floor of [`super::arenas_at_start`].
    pub static BASE_ARENAS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

    pub fn arena_max(n: usize) -> bool {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        // SAFETY: mallopt only adjusts allocator parameters; M_ARENA_MAX takes any positive count.
        unsafe { mallopt(M_ARENA_MAX, n) == 1 }
    }
}

/// At the start of `main`, before any thread exists: main's arena and one per thread of a
/// search's walk (glibc; a no-op elsewhere).
pub fn arenas_for_searches() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let n = 1 + glibc::cores().min(crate::tools::ordered_walk::MAX_THREADS);
        glibc::BASE_ARENAS.store(n, std::sync::atomic::Ordering::Relaxed);
        glibc::arena_max(n);
    }
}

/// How many helper threads (of the `wanted`) may allocate side by side with the main thread,
/// each in an arena of its own. Only for start-up, before any thread but main exists (see the
/// module's documentation): later, glibc's limit is fixed at [`arenas_for_searches`]'.
/// glibc: arenas for `wanted` more threads, all of them; musl: none (one lock for all threads);
/// other allocators allocate side by side anyway.
pub fn arenas_at_start(wanted: usize) -> usize {
    if wanted == 0 {
        return 0;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let base = glibc::BASE_ARENAS.load(std::sync::atomic::Ordering::Relaxed);
        if glibc::arena_max((wanted + 1).max(base)) {
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
