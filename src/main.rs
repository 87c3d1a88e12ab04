//! The `pith` binary: parse the command line, hand over to [`pith::app`].
//!
//! The C runtime calls `main` here directly (`#![no_main]`), not through Rust's runtime start,
//! which spends a tenth of a bare program's start-up on what pith does not use: it asks glibc
//! for the main thread's stack bounds (`pthread_getattr_np` reads and `sscanf`s the whole of
//! `/proc/self/maps`, about 100,000 instructions) and gives every thread an alternate signal
//! stack (three system calls and a mapping at each thread's start, two at its end), both only
//! so that a stack overflow prints a message before the process dies. What it does that pith
//! needs is done in [`start`]: standard descriptors that are closed are opened on `/dev/null`
//! (else the first file pith opens would become its stdout), SIGPIPE is ignored (a host that
//! closes stdout is an `EPIPE` on write, `io/stdout.rs`), the arguments are taken from `argv`
//! (musl's `std::env::args` is filled by that runtime start), and a panic that reaches `main`
//! ends the process with 101, as it would. A stack overflow still ends the process (by SIGSEGV,
//! without the message); a panic on the main thread names it `<unnamed>` instead of `main`.
//! docs/architecture.md, "Memory per agent" (cold start).

#![no_main]

use std::ffi::{CStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStringExt;

/// Called by the C runtime's start (`crt1.o`) as any C program's `main`.
#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    start::standard_descriptors();
    start::ignore_sigpipe();
    // SAFETY: the C runtime passes `argc` strings in `argv`, NUL-terminated, alive until exit.
    let args = unsafe { start::args(argc, argv) };
    let code = std::panic::catch_unwind(move || run(args)).unwrap_or(101);
    // Flushes Rust's stdout buffer, then exits (other threads end with the process).
    std::process::exit(code);
}

fn run(args: Vec<OsString>) -> i32 {
    pith::malloc::arenas_for_searches();
    if args.get(1).is_some_and(|a| a == pith::codemode::WORKER_ARG) {
        return codemode_worker();
    }
    let parsed = pith::cli::parse(args.into_iter().skip(1)).and_then(|p| match p {
        // Runs that load no extensions: a flag no extension can take is the usage error
        // (`--list-models` loads them when there are any: `app::run`).
        pith::cli::Parsed::Run(opts)
            if opts.list_models.is_none()
                && (opts.mode == pith::cli::Mode::Acp || opts.export.is_some()) =>
        {
            match pith::cli::unknown_flags_error(&opts.extension_flags) {
                Some(e) => Err(e),
                None => Ok(pith::cli::Parsed::Run(opts)),
            }
        }
        other => Ok(other),
    });
    let code = match parsed {
        Ok(pith::cli::Parsed::Help) => {
            print!("{}", pith::cli::HELP);
            0
        }
        Ok(pith::cli::Parsed::Version) => {
            println!("pith {}", env!("CARGO_PKG_VERSION"));
            0
        }
        // ACP sits above app (it starts each session with app's start-up); `--export` and
        // `--list-models` stay app's whatever the mode.
        Ok(pith::cli::Parsed::Run(opts))
            if opts.mode == pith::cli::Mode::Acp
                && opts.export.is_none()
                && opts.list_models.is_none() =>
        {
            pith::acp::run(*opts)
        }
        Ok(pith::cli::Parsed::Run(opts)) => pith::app::run(*opts),
        Ok(pith::cli::Parsed::Schema(version)) => {
            println!("{}", pith::schema::document(version));
            0
        }
        Ok(pith::cli::Parsed::PiCommand(text) | pith::cli::Parsed::Refused(text)) => {
            eprintln!("{text}");
            pith::cli::EXIT_FAILURE
        }
        Err(e) => {
            eprintln!("pith: {e}\nTry 'pith --help' for more information.");
            pith::cli::EXIT_USAGE
        }
    };
    // A lock on auth.json that a request's worker still holds (an OAuth refresh under way).
    pith::llm::lockfile::release_all();
    code
}

/// `pith __codemode-worker`: one codemode script (pith starts it; docs/codemode.md).
fn codemode_worker() -> i32 {
    #[cfg(feature = "codemode")]
    {
        pith::codemode::worker::main()
    }
    #[cfg(not(feature = "codemode"))]
    {
        eprintln!("pith was built without the codemode feature");
        pith::cli::EXIT_FAILURE
    }
}

/// What Rust's runtime start would have done that pith relies on.
mod start {
    use super::*;

    use pith::io::sys::{POLLNVAL, PollFd, SIG_IGN, poll, signal};

    unsafe extern "C" {
        fn open(path: *const c_char, flags: c_int, ...) -> c_int;
    }

    const O_RDWR: c_int = 2;
    const SIGPIPE: c_int = 13;

    /// A standard descriptor (0, 1, 2) that is not open is opened on `/dev/null`, so that no file
    /// opened later takes its number; pith cannot run without them (abort, as Rust's start does).
    pub fn standard_descriptors() {
        let mut fds: [PollFd; 3] = std::array::from_fn(|fd| PollFd {
            fd: fd as c_int,
            events: 0,
            revents: 0,
        });
        // SAFETY: three valid pollfds for the duration of the call; a zero timeout.
        if unsafe { poll(fds.as_mut_ptr(), 3, 0) } < 0 {
            // Cannot tell (a poll that fails on three descriptors): leave them as they are.
            return;
        }
        for p in fds {
            if p.revents & POLLNVAL != 0 {
                // SAFETY: a NUL-terminated path; `open` returns the lowest free descriptor,
                // which is this one (the lower ones are open or were just opened).
                if unsafe { open(c"/dev/null".as_ptr(), O_RDWR) } != p.fd {
                    std::process::abort();
                }
            }
        }
    }

    /// Writing to a pipe or socket nobody reads is an `EPIPE` error, not a deadly signal.
    pub fn ignore_sigpipe() {
        // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; no handler code is involved.
        unsafe {
            signal(SIGPIPE, SIG_IGN);
        }
    }

    /// The command line as the C runtime passed it.
    ///
    /// # Safety
    /// `argv` holds `argc` pointers to NUL-terminated strings that live as long as the process.
    pub unsafe fn args(argc: c_int, argv: *const *const c_char) -> Vec<OsString> {
        let n = if argv.is_null() {
            0
        } else {
            usize::try_from(argc).unwrap_or(0)
        };
        (0..n)
            .map(|i| {
                // SAFETY: `i < argc`, and each entry is a NUL-terminated string (the caller's
                // promise); a null entry (none is expected before `argc`) counts as empty.
                let p = unsafe { *argv.add(i) };
                if p.is_null() {
                    return OsString::new();
                }
                // SAFETY: as above.
                let s = unsafe { CStr::from_ptr(p) };
                OsString::from_vec(s.to_bytes().to_vec())
            })
            .collect()
    }
}
