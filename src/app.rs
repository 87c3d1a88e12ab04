//! Wiring: resolve the start-up state from CLI, config and registry, spawn the edge threads, run
//! the state machine on the main thread, and turn its end into an exit code.

use std::path::PathBuf;

use crate::cli::{self, Mode, Options};
use crate::config::{self, Settings};
use crate::core::machine::{Channels, Machine, Startup};
use crate::io;
use crate::message::ThinkingLevel;

/// Run pith with parsed options; returns the process exit code.
pub fn run(opts: Options) -> i32 {
    if opts.mode == Mode::Rpc && !opts.file_args.is_empty() {
        eprintln!("Error: @file arguments are not supported in RPC mode");
        return cli::EXIT_USAGE;
    }
    if opts.mode != Mode::Rpc {
        eprintln!("Error: --mode {:?} is not implemented yet", opts.mode);
        return cli::EXIT_FAILURE;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let agent_dir = config::agent_dir();
    let (settings, warnings) = Settings::load(&agent_dir, &cwd);
    for w in warnings {
        eprintln!("{w}");
    }
    let startup = Startup {
        cwd,
        agent_dir,
        thinking: opts.thinking.unwrap_or(ThinkingLevel::Off),
        settings,
        model: None,
        session_id: new_session_id(),
        session_file: None,
        partials: opts.partials,
    };
    run_rpc(startup)
}

fn run_rpc(startup: Startup) -> i32 {
    let (input_tx, input_rx) = crossbeam_channel::bounded(64);
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let (worker_tx, worker_rx) = crossbeam_channel::bounded(1024);
    let (stdout_tx, stdout_rx) = crossbeam_channel::bounded(io::stdout::QUEUE_FRAMES);

    let spawned = (|| {
        let writer = io::stdout::spawn(stdout_rx, control_tx.clone())?;
        io::signals::spawn(control_tx.clone())?;
        io::stdin::spawn(input_tx)?;
        Ok::<_, std::io::Error>(writer)
    })();
    let writer = match spawned {
        Ok(w) => w,
        Err(e) => {
            eprintln!("pith: cannot start threads: {e}");
            return cli::EXIT_FAILURE;
        }
    };

    let machine = Machine::new(startup, stdout_tx.clone());
    let exit = machine.run(Channels {
        input: input_rx,
        control: control_rx,
        worker: worker_rx,
        worker_tx,
        stdout: stdout_tx,
    });
    // The machine and its senders are gone: the writer drains what is queued and stops. (The
    // stdin thread may still be blocked in read(2); exiting the process ends it.)
    let _ = writer.join();
    exit.code()
}

/// A UUID v7 (time-ordered, as the reference's session ids).
fn new_session_id() -> String {
    let ms = crate::message::now_ms();
    let mut rnd = [0u8; 10];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut rnd);
    }
    let b = |i: usize| rnd[i];
    format!(
        "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
        (ms >> 16) as u32,
        (ms & 0xffff) as u16,
        (u16::from(b(0)) << 8 | u16::from(b(1))) & 0x0fff,
        ((u16::from(b(2)) << 8 | u16::from(b(3))) & 0x3fff) | 0x8000,
        (0..6).fold(0u64, |acc, i| acc << 8 | u64::from(b(4 + i)))
    )
}
