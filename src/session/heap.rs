//! Faulting in a long session's memory in one step (glibc only).
//!
//! Loading a 17 MB session allocates some 25 MB of messages, strings and tables, a few bytes to
//! a few KiB at a time. glibc grows its heap 128 KiB at a time for that, and the kernel then
//! faults every 4 KiB page in on first touch: over 6,000 traps, a third of the CPU time of the
//! resume. [`Reserve`] grows the heap once by what the load will need (`M_TOP_PAD`), asks for
//! transparent huge pages on that range and faults it in with one `madvise` (a dozen 2 MiB pages
//! instead of thousands of small ones). When the load is done the padding goes back to glibc's
//! default, so what the load did not use is given back at the next trim.
//!
//! Setting `M_TOP_PAD` also stops glibc from adapting its mmap threshold (it starts at 128 KiB
//! and rises to the size of the largest mapped block freed): [`Reserve`]'s drop sets it where
//! that adaptation would be after the first requests of such a session (bodies up to the
//! 4 MiB that `llm/body.rs` still builds whole come from the heap, not fresh mappings; the trim
//! threshold twice that), so turns are no dearer.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::ffi::c_void;

    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
        fn sbrk(increment: isize) -> *mut c_void;
        fn malloc(size: usize) -> *mut c_void;
        fn free(p: *mut c_void);
        fn madvise(addr: *mut c_void, len: usize, advice: i32) -> i32;
    }

    const M_TRIM_THRESHOLD: i32 = -1;
    const M_TOP_PAD: i32 = -2;
    const M_MMAP_THRESHOLD: i32 = -3;
    const MADV_HUGEPAGE: i32 = 14;
    const MADV_POPULATE_WRITE: i32 = 23;
    const DEFAULT_TOP_PAD: i32 = 128 * 1024;
    const PAGE: usize = 4096;

    /// The heap grown by about `bytes`, faulted in; glibc's defaults back when dropped.
    pub struct Reserve;

    impl Reserve {
        pub fn new(bytes: usize) -> Reserve {
            let bytes = bytes.min(1 << 30) as i32;
            // SAFETY: mallopt only sets allocator parameters; sbrk(0) only reads the current
            // break; the blocks taken are freed below, untouched; madvise on the range the
            // heap just grew by (mapped, ours, page-aligned) only sets a hint and faults pages
            // in, without changing their contents. Failures (an old kernel) only lose the gain.
            unsafe {
                mallopt(M_TOP_PAD, bytes);
                let before = sbrk(0) as usize;
                // Take small blocks (below the mmap threshold) until the heap has to grow, which
                // it then does by `bytes` more than asked.
                let mut held = [std::ptr::null_mut::<c_void>(); 64];
                let mut n = 0;
                while n < held.len() && sbrk(0) as usize == before {
                    held[n] = malloc(64 * 1024);
                    n += 1;
                }
                let after = sbrk(0) as usize;
                let start = before.next_multiple_of(PAGE);
                if after > start + bytes as usize / 2 {
                    let range = (start as *mut c_void, after - start);
                    madvise(range.0, range.1, MADV_HUGEPAGE);
                    madvise(range.0, range.1, MADV_POPULATE_WRITE);
                }
                for p in &held[..n] {
                    free(*p);
                }
            }
            Reserve
        }
    }

    impl Drop for Reserve {
        fn drop(&mut self) {
            // SAFETY: mallopt only sets allocator parameters.
            unsafe {
                mallopt(M_TOP_PAD, DEFAULT_TOP_PAD);
                mallopt(M_MMAP_THRESHOLD, 4 << 20);
                mallopt(M_TRIM_THRESHOLD, 8 << 20);
            }
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub use glibc::Reserve;

/// Other allocators: nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub struct Reserve;

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
impl Reserve {
    pub fn new(_bytes: usize) -> Reserve {
        Reserve
    }
}
