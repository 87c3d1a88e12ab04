//! Tools that cannot hang pith, over pipes: devices, FIFOs and sockets are refused (or skipped by
//! a walk) with a clear error instead of blocking; a tool whose worker really is stuck in a
//! system call does not keep `abort` from being answered (it is abandoned after a short grace),
//! and stdin EOF still ends the process.
//!
//! A worker that is really stuck: `stuckfs` below is a minimal FUSE file system (spoken directly
//! on `/dev/fuse`, in a helper process) with one file whose reads are never answered, so a
//! `read(2)` of it blocks until the file system goes away. It needs root and FUSE; where either
//! is missing those tests say so and skip.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::{Pith, World, calls_then_done};

unsafe extern "C" {
    fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    fn mount(
        source: *const std::ffi::c_char,
        target: *const std::ffi::c_char,
        fstype: *const std::ffi::c_char,
        flags: u64,
        data: *const std::ffi::c_void,
    ) -> i32;
    fn umount2(target: *const std::ffi::c_char, flags: i32) -> i32;
    fn getuid() -> u32;
    fn getgid() -> u32;
}

fn cstr(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn faux_pith(world: &World, calls: Value, extra: &[&str]) -> Pith {
    let mut args = vec!["--tools", "read,write,edit,grep,find,ls", "--no-session"];
    args.extend_from_slice(extra);
    world.spawn_faux(&calls_then_done(calls), &args)
}

/// `(isError, text)` of every `tool_execution_end`, in call order.
fn results(frames: &[Value]) -> Vec<(bool, String)> {
    let order: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_start")
        .map(|f| &f["toolCallId"])
        .collect();
    order
        .iter()
        .map(|id| {
            let end = frames
                .iter()
                .find(|f| f["type"] == "tool_execution_end" && &&f["toolCallId"] == id)
                .expect("every call ends");
            (
                end["isError"] == true,
                end["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn devices_fifos_and_sockets_are_refused_or_skipped() {
    let world = World::new();
    let cwd = std::fs::canonicalize(world.cwd()).unwrap();
    let dir = cwd.join("special");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    // SAFETY: a valid path and mode.
    assert_eq!(unsafe { mkfifo(cstr(&fifo).as_ptr(), 0o644) }, 0);
    let sock = dir.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::fs::write(dir.join("plain.txt"), "needle\n").unwrap();
    // A device inside the tree (through a symlink, as a checkout can have one).
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
    let calls = json!([
        {"name": "read", "arguments": {"path": "/dev/zero"}},
        {"name": "read", "arguments": {"path": "/dev/urandom"}},
        {"name": "read", "arguments": {"path": "special/fifo"}},
        {"name": "read", "arguments": {"path": "special/sock"}},
        {"name": "write", "arguments": {"path": "special/fifo", "content": "x"}},
        {"name": "write", "arguments": {"path": "/dev/null", "content": "x"}},
        {"name": "edit", "arguments": {"path": "special/fifo", "oldText": "a", "newText": "b"}},
        {"name": "edit", "arguments": {"path": "/dev/zero", "oldText": "a", "newText": "b"}},
        {"name": "grep", "arguments": {"pattern": "x", "path": "special/fifo"}},
        {"name": "grep", "arguments": {"pattern": "x", "path": "/dev/zero"}},
        {"name": "grep", "arguments": {"pattern": "needle", "path": "special"}},
        {"name": "find", "arguments": {"pattern": "*", "path": "special"}},
        {"name": "ls", "arguments": {"path": "special"}},
        {"name": "ls", "arguments": {"path": "special/fifo"}},
        {"name": "read", "arguments": {"path": "special/zero"}},
        {"name": "edit", "arguments": {"path": "special/zero", "oldText": "a", "newText": "b"}},
    ]);
    let mut p = faux_pith(&world, calls, &[]);
    p.send(json!({"type": "prompt", "message": "go", "id": "p"}));
    let frames = p.recv_until(|v| v["type"] == "agent_end");
    let f = |name: &str| format!("{}/{name}", dir.display());
    let refused = |verb: &str, path: &str, kind: &str| {
        (
            true,
            format!("Cannot {verb} {path}: it is {kind}, not a regular file"),
        )
    };
    assert_eq!(
        results(&frames),
        vec![
            refused("read", "/dev/zero", "a character device"),
            refused("read", "/dev/urandom", "a character device"),
            refused("read", &f("fifo"), "a FIFO (named pipe)"),
            refused("read", &f("sock"), "a socket"),
            refused("write", &f("fifo"), "a FIFO (named pipe)"),
            refused("write", "/dev/null", "a character device"),
            refused("edit", &f("fifo"), "a FIFO (named pipe)"),
            refused("edit", "/dev/zero", "a character device"),
            refused("search", &f("fifo"), "a FIFO (named pipe)"),
            refused("search", "/dev/zero", "a character device"),
            (false, "plain.txt:1: needle".to_string()),
            (false, "fifo\nplain.txt\nsock\nzero".to_string()),
            (false, "fifo\nplain.txt\nsock\nzero".to_string()),
            (true, format!("Not a directory: {}", f("fifo"))),
            refused("read", &f("zero"), "a character device"),
            refused("edit", &f("zero"), "a character device"),
        ]
    );
    // Nothing was left running: stdin EOF ends the process.
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
}

// ---- a worker stuck in a system call ----------------------------------------------------------

/// The helper process serving `stuckfs` (see [`StuckFs`]); a no-op unless asked to serve.
#[test]
fn stuckfs_server() {
    let Some(dir) = std::env::var_os("PITH_STUCKFS_DIR") else {
        return;
    };
    stuckfs::serve(Path::new(&dir));
}

/// A mounted `stuckfs` with one file, `stuck.txt`, whose reads never return. Dropping it kills
/// the server (which fails the stuck reads) and unmounts.
struct StuckFs {
    server: Child,
    dir: PathBuf,
}

impl StuckFs {
    fn mount(dir: &Path) -> Option<StuckFs> {
        std::fs::create_dir_all(dir).unwrap();
        let mut server = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "stuckfs_server",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PITH_STUCKFS_DIR", dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The test harness prints its own lines first.
        let mut first = String::new();
        let mut out = BufReader::new(server.stdout.take().unwrap());
        while !first.contains("stuckfs:") {
            first.clear();
            if out.read_line(&mut first).unwrap_or(0) == 0 {
                break;
            }
        }
        let first = first.split("stuckfs:").nth(1).unwrap_or_default().trim();
        if first != "mounted" {
            eprintln!(
                "SKIPPED: cannot mount a FUSE file system here ({first}); needs root and /dev/fuse"
            );
            let _ = server.kill();
            let _ = server.wait();
            return None;
        }
        std::thread::spawn(move || for _ in out.lines() {});
        Some(StuckFs {
            server,
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for StuckFs {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        // SAFETY: a valid path; MNT_DETACH (2) also works while a reader is still inside.
        unsafe {
            umount2(cstr(&self.dir).as_ptr(), 2);
        }
    }
}

fn stuck_calls(file: &Path) -> Value {
    json!([
        {"name": "read", "arguments": {"path": file}},
        {"name": "grep", "arguments": {"pattern": "x", "path": file}},
    ])
}

#[test]
fn abort_is_answered_while_a_tool_is_stuck_in_a_system_call() {
    let world = World::new();
    let Some(fs) = StuckFs::mount(&world.tmp().join("stuckfs")) else {
        return;
    };
    let file = fs.dir.join("stuck.txt");
    let mut p = faux_pith(&world, stuck_calls(&file), &[]);
    p.send(json!({"type": "prompt", "message": "go", "id": "p"}));
    p.recv_until(|v| v["type"] == "tool_execution_start" && v["toolName"] == "grep");
    // Both workers are now (or are about to be) blocked in read(2) on stuckfs; the server never
    // answers, so only abandoning them can end the run.
    std::thread::sleep(Duration::from_millis(200));
    p.send(json!({"type": "abort", "id": "a"}));
    let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "a");
    assert_eq!(frames.last().unwrap()["success"], true);
    assert_eq!(
        results(&p.seen),
        vec![
            (true, "Operation aborted".to_string()),
            (true, "Operation aborted".to_string())
        ]
    );
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f["type"].as_str()).collect();
    let end = kinds
        .iter()
        .position(|k| *k == "agent_end")
        .expect("agent_end");
    assert_eq!(kinds[end + 1..], ["response"]);
    // pith answers other commands, and exits at EOF although both workers are still stuck.
    let state = p.call(json!({"type": "get_state"}), "s");
    assert_eq!(state["data"]["isStreaming"], false);
    p.close_stdin();
    exits_once_unstuck(p, fs);
}

/// pith has exited: every thread but the stuck workers is gone. The kernel does not let a
/// thread out of a FUSE request that the file system has received until it is answered (not
/// even for SIGKILL), so the process itself only disappears once `stuckfs` goes away: that
/// part is the kernel's, not pith's.
fn exits_once_unstuck(mut p: Pith, fs: StuckFs) {
    let pid = p.pid();
    let start = std::time::Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state after the command name: `Z` once the main thread has exited.
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            break;
        }
        assert!(
            start.elapsed() < support::TIMEOUT,
            "pith did not exit: {stat}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(fs);
    assert!(p.wait(support::TIMEOUT).success());
}

#[test]
fn stdin_eof_ends_pith_while_a_tool_is_stuck() {
    let world = World::new();
    let Some(fs) = StuckFs::mount(&world.tmp().join("stuckfs")) else {
        return;
    };
    world.write_agent_file("settings.json", r#"{"pith": {"eofIdleTimeoutSeconds": 1}}"#);
    let file = fs.dir.join("stuck.txt");
    let mut p = faux_pith(&world, stuck_calls(&file), &[]);
    p.send(json!({"type": "prompt", "message": "go", "id": "p"}));
    p.recv_until(|v| v["type"] == "tool_execution_start" && v["toolName"] == "grep");
    // Nobody can send `abort` once stdin is closed: after a second without progress pith
    // aborts the run itself (its events are still written) and exits.
    p.close_stdin();
    p.recv_until(|v| v["type"] == "agent_end");
    assert_eq!(
        results(&p.seen),
        vec![
            (true, "Operation aborted".to_string()),
            (true, "Operation aborted".to_string())
        ]
    );
    exits_once_unstuck(p, fs);
}

/// A FUSE file system with a root directory and one file, `stuck.txt`, whose reads are never
/// answered: just enough of the protocol (`linux/fuse.h`, 7.26) for `stat`, `open` and `read`.
mod stuckfs {
    use std::io::{Read, Write};
    use std::os::unix::io::AsRawFd;
    use std::path::Path;

    const ROOT: u64 = 1;
    const FILE: u64 = 2;
    const NAME: &[u8] = b"stuck.txt";

    pub fn serve(dir: &Path) {
        let mut dev = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
        {
            Ok(f) => f,
            Err(e) => return println!("stuckfs: /dev/fuse: {e}"),
        };
        // SAFETY: plain syscalls with valid NUL-terminated strings.
        let (uid, gid) = unsafe { (super::getuid(), super::getgid()) };
        let opts = format!(
            "fd={},rootmode=40755,user_id={uid},group_id={gid}",
            dev.as_raw_fd()
        );
        let opts = std::ffi::CString::new(opts).unwrap();
        let target = super::cstr(dir);
        let name = std::ffi::CString::new("stuckfs").unwrap();
        let fstype = std::ffi::CString::new("fuse").unwrap();
        // MS_NOSUID | MS_NODEV
        let r = unsafe {
            super::mount(
                name.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                2 | 4,
                opts.as_ptr().cast(),
            )
        };
        if r != 0 {
            return println!("stuckfs: mount: {}", std::io::Error::last_os_error());
        }
        println!("stuckfs: mounted");
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match dev.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(4) => continue, // EINTR
                Err(_) => return,                                  // unmounted
            };
            if n < 40 {
                continue;
            }
            let req = &buf[..n];
            let opcode = u32::from_le_bytes(req[4..8].try_into().unwrap());
            let unique = u64::from_le_bytes(req[8..16].try_into().unwrap());
            let node = u64::from_le_bytes(req[16..24].try_into().unwrap());
            let body = &req[40..];
            let reply: Option<Result<Vec<u8>, i32>> = match opcode {
                26 => Some(Ok(init_out(body))), // INIT
                1 => Some(
                    if body.split(|b| *b == 0).next() == Some(NAME) && node == ROOT {
                        Ok(entry_out()) // LOOKUP
                    } else {
                        Err(2) // ENOENT
                    },
                ),
                3 => Some(Ok(attr_out(node))),   // GETATTR
                14 => Some(Ok(vec![0u8; 16])),   // OPEN: fh 0
                15 => None,                      // READ: never answered
                18 | 25 => Some(Ok(Vec::new())), // RELEASE, FLUSH
                2 | 36 | 42 => None,             // FORGET, INTERRUPT, BATCH_FORGET
                _ => Some(Err(38)),              // ENOSYS
            };
            if let Some(reply) = reply {
                let (error, payload) = match reply {
                    Ok(p) => (0i32, p),
                    Err(e) => (-e, Vec::new()),
                };
                let mut out = Vec::with_capacity(16 + payload.len());
                out.extend_from_slice(&((16 + payload.len()) as u32).to_le_bytes());
                out.extend_from_slice(&error.to_le_bytes());
                out.extend_from_slice(&unique.to_le_bytes());
                out.extend_from_slice(&payload);
                let _ = dev.write_all(&out);
            }
        }
    }

    fn init_out(body: &[u8]) -> Vec<u8> {
        let max_readahead = body
            .get(8..12)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
        let mut o = Vec::new();
        o.extend_from_slice(&7u32.to_le_bytes()); // major
        o.extend_from_slice(&26u32.to_le_bytes()); // minor
        o.extend_from_slice(&max_readahead.to_le_bytes());
        o.extend_from_slice(&0u32.to_le_bytes()); // flags
        o.extend_from_slice(&1u16.to_le_bytes()); // max_background
        o.extend_from_slice(&1u16.to_le_bytes()); // congestion_threshold
        o.extend_from_slice(&4096u32.to_le_bytes()); // max_write
        o.extend_from_slice(&1u32.to_le_bytes()); // time_gran
        o.extend_from_slice(&[0u8; 4]); // max_pages, map_alignment
        o.extend_from_slice(&[0u8; 32]); // flags2, max_stack_depth, unused
        o
    }

    fn attr(node: u64) -> Vec<u8> {
        let (mode, size, nlink) = if node == ROOT {
            (0o040755u32, 0u64, 2u32)
        } else {
            (0o100644u32, 4096u64, 1u32)
        };
        let mut a = Vec::new();
        a.extend_from_slice(&node.to_le_bytes()); // ino
        a.extend_from_slice(&size.to_le_bytes());
        a.extend_from_slice(&size.div_ceil(512).to_le_bytes()); // blocks
        a.extend_from_slice(&[0u8; 24]); // atime, mtime, ctime
        a.extend_from_slice(&[0u8; 12]); // their nanoseconds
        a.extend_from_slice(&mode.to_le_bytes());
        a.extend_from_slice(&nlink.to_le_bytes());
        a.extend_from_slice(&[0u8; 8]); // uid, gid
        a.extend_from_slice(&0u32.to_le_bytes()); // rdev
        a.extend_from_slice(&4096u32.to_le_bytes()); // blksize
        a.extend_from_slice(&0u32.to_le_bytes()); // flags
        a
    }

    fn attr_out(node: u64) -> Vec<u8> {
        let mut o = vec![0u8; 16]; // attr_valid 0 s, 0 ns, dummy
        o.extend(attr(if node == FILE { FILE } else { ROOT }));
        o
    }

    fn entry_out() -> Vec<u8> {
        let mut o = Vec::new();
        o.extend_from_slice(&FILE.to_le_bytes()); // nodeid
        o.extend_from_slice(&[0u8; 8 + 8 + 8 + 4 + 4]); // generation, valid times
        o.extend(attr(FILE));
        o
    }
}
