//! The few C library calls the edges make themselves (no `libc` crate): `poll(2)` and
//! `signal(2)`, shared by the watch thread (`watch.rs`) and the binary's own start (`main.rs`).

/// One entry of `poll(2)`'s array.
#[repr(C)]
pub struct PollFd {
    pub fd: i32,
    pub events: i16,
    pub revents: i16,
}

pub const POLLIN: i16 = 0x001;
pub const POLLERR: i16 = 0x008;
pub const POLLHUP: i16 = 0x010;
pub const POLLNVAL: i16 = 0x020;

/// `signal(2)` dispositions.
pub const SIG_DFL: usize = 0;
pub const SIG_IGN: usize = 1;

unsafe extern "C" {
    pub fn poll(fds: *mut PollFd, nfds: std::ffi::c_ulong, timeout: i32) -> i32;
    pub fn signal(signum: i32, handler: usize) -> usize;
}
