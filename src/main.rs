//! The `pith` binary: parse the command line, hand over to [`pith::app`].

fn main() {
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
        Err(e) => {
            eprintln!("pith: {e}\nTry 'pith --help' for more information.");
            pith::cli::EXIT_USAGE
        }
    };
    std::process::exit(code);
}
