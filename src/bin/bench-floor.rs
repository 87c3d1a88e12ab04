//! `make bench`'s floor for start-up figures: the least a program can do to be measured the way
//! pith's cold start is (spawned by the oracle's harness, answer the first `get_state`, exit at the
//! end of its input). What the harness measures for it on the same machine in the same run is
//! the part of pith's figure that is not pith's (process creation, the Python harness, the
//! machine's load). Built only with `--features bench`.

use std::io::{BufRead, Write};

fn main() {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    if let Some(Ok(_)) = lines.next() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(
            b"{\"id\":\"s0\",\"type\":\"response\",\"command\":\"get_state\",\"success\":true,\"data\":{}}\n",
        );
        let _ = out.flush();
    }
    for _ in lines {}
}
