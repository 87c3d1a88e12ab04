//! The `pith` binary: parse the command line, hand over to [`pith::app`].

fn main() {
    one_malloc_arena();
    let code = match pith::cli::parse(std::env::args_os().skip(1)) {
        Ok(pith::cli::Parsed::Help) => {
            print!("{}", pith::cli::HELP);
            0
        }
        Ok(pith::cli::Parsed::Version) => {
            println!("pith {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Ok(pith::cli::Parsed::Run(opts)) => pith::app::run(*opts),
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
    std::process::exit(code);
}

/// glibc gives every thread that allocates its own malloc arena (a few hundred KiB resident once
/// used). pith's threads hand data to each other rather than allocate side by side, so one
/// shared arena costs no measurable contention and saves that memory per agent — which is what
/// many agents on one host pay for (docs/architecture.md, "Memory").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;
    // SAFETY: mallopt only adjusts allocator parameters; called before any thread exists.
    unsafe {
        mallopt(M_ARENA_MAX, 1);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}
