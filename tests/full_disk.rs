//! Full and read-only session directories, driven through the real binary: a write that fails
//! part-way leaves no torn line, the failure is reported once (stderr and a
//! `session_write_error` event), the entries wait in memory and are written — all of them, in
//! order — by the first write that works again (`session_write_resumed`), and the file then loads
//! with the whole conversation.
//!
//! Two ways to fill a disk: a small tmpfs mounted over the session dir in pith's own mount
//! namespace (`unshare -m`, needs root; the test sees it through `/proc/<pid>/root`), and pith's
//! `RLIMIT_FSIZE` lowered from the outside with prlimit(2) (works for anyone; SIGXFSZ is ignored
//! in the child, as a wrapper would). Read-only: a read-only remount in the namespace as root,
//! `chmod` otherwise.

mod support;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::anthropic::text_sse;
use support::fake_llm::Reply;
use support::frames::{messages, of_type};
use support::{Pith, World, fake_rpc, fake_world};

#[repr(C)]
struct RLimit {
    cur: u64,
    max: u64,
}

unsafe extern "C" {
    fn prlimit(pid: i32, resource: u32, new: *const RLimit, old: *mut RLimit) -> i32;
    fn signal(sig: i32, handler: usize) -> usize;
    fn geteuid() -> u32;
}

const RLIMIT_FSIZE: u32 = 1;
const SIGXFSZ: i32 = 25;
const SIG_IGN: usize = 1;

/// How the session dir of one pith process is made to fail.
enum Disk {
    /// A tmpfs over `dir` in pith's mount namespace.
    Tmpfs { dir: PathBuf, pid: u32 },
    /// pith's file size limit, set from here.
    Rlimit { dir: PathBuf, pid: u32 },
    /// `chmod` of the dir and its files (not root).
    Chmod { dir: PathBuf },
}

/// Whether this process may mount a tmpfs in a new mount namespace.
fn namespaces_work(world: &World) -> bool {
    let probe = world.tmp().join("probe");
    fs::create_dir_all(&probe).unwrap();
    Command::new("unshare")
        .args([
            "-m",
            "--propagation",
            "private",
            "mount",
            "-t",
            "tmpfs",
            "-o",
            "size=64k",
            "tmpfs",
        ])
        .arg(&probe)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { geteuid() == 0 }
}

impl Disk {
    /// pith on the fake provider writing sessions to `<world>/sessions`, whose disk this is.
    fn tmpfs(world: &World, read_only: bool) -> (Pith, Disk) {
        let dir = world.dir.path().join("sessions");
        fs::create_dir_all(&dir).unwrap();
        let dir_s = dir.to_string_lossy().into_owned();
        let script = if read_only {
            r#"mount -t tmpfs -o size=512k tmpfs "$0" && mount -o remount,ro "$0" && exec "$@""#
        } else {
            r#"mount -t tmpfs -o size=512k tmpfs "$0" && exec "$@""#
        };
        let wrapper = [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            &dir_s,
        ];
        let p = Pith::start(world.wrapped_command(&wrapper, &fake_rpc(&["--session-dir", &dir_s])));
        let pid = p.pid();
        (p, Disk::Tmpfs { dir, pid })
    }

    fn rlimit(world: &World) -> (Pith, Disk) {
        let dir = world.dir.path().join("sessions");
        let dir_s = dir.to_string_lossy().into_owned();
        let mut c = world.command(&fake_rpc(&["--session-dir", &dir_s]));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            c.pre_exec(|| {
                signal(SIGXFSZ, SIG_IGN);
                Ok(())
            });
        }
        let p = Pith::start(c);
        let pid = p.pid();
        (p, Disk::Rlimit { dir, pid })
    }

    fn chmod(world: &World) -> (Pith, Disk) {
        let dir = world.dir.path().join("sessions");
        fs::create_dir_all(&dir).unwrap();
        let dir_s = dir.to_string_lossy().into_owned();
        let p = world.spawn(&fake_rpc(&["--session-dir", &dir_s]));
        let disk = Disk::Chmod { dir };
        disk.read_only();
        (p, disk)
    }

    /// The session dir as this process sees it.
    fn dir(&self) -> PathBuf {
        match self {
            Disk::Tmpfs { dir, pid } => {
                Path::new(&format!("/proc/{pid}/root")).join(dir.strip_prefix("/").unwrap())
            }
            Disk::Rlimit { dir, .. } | Disk::Chmod { dir } => dir.clone(),
        }
    }

    /// The one session file in the dir.
    fn session_file(&self) -> PathBuf {
        support::sessions::only_jsonl(&self.dir())
    }

    /// No room left: the next write that needs more space fails part-way.
    fn fill(&self) {
        match self {
            Disk::Tmpfs { .. } => {
                let mut f = fs::File::create(self.dir().join("filler")).unwrap();
                let block = vec![0u8; 4096];
                while std::io::Write::write_all(&mut f, &block).is_ok() {}
            }
            Disk::Rlimit { pid, .. } => {
                let size = fs::metadata(self.session_file()).unwrap().len();
                set_fsize(*pid, size + 64);
            }
            Disk::Chmod { .. } => unreachable!(),
        }
    }

    fn free(&self) {
        match self {
            Disk::Tmpfs { .. } => fs::remove_file(self.dir().join("filler")).unwrap(),
            Disk::Rlimit { pid, .. } => set_fsize(*pid, u64::MAX),
            Disk::Chmod { .. } => unreachable!(),
        }
    }

    fn read_only(&self) {
        self.remount_or_chmod(true);
    }

    fn writable(&self) {
        self.remount_or_chmod(false);
    }

    fn remount_or_chmod(&self, read_only: bool) {
        use std::os::unix::fs::PermissionsExt;
        match self {
            Disk::Tmpfs { dir, pid } => {
                let mode = if read_only {
                    "remount,ro"
                } else {
                    "remount,rw"
                };
                let ok = Command::new("nsenter")
                    .arg("-t")
                    .arg(pid.to_string())
                    .args(["-m", "mount", "-o", mode])
                    .arg(dir)
                    .status()
                    .unwrap();
                assert!(ok.success());
            }
            Disk::Chmod { dir } => {
                let (d, f) = if read_only {
                    (0o555, 0o444)
                } else {
                    (0o755, 0o644)
                };
                for e in fs::read_dir(dir).unwrap() {
                    let p = e.unwrap().path();
                    fs::set_permissions(&p, fs::Permissions::from_mode(f)).unwrap();
                }
                fs::set_permissions(dir, fs::Permissions::from_mode(d)).unwrap();
            }
            Disk::Rlimit { .. } => unreachable!(),
        }
    }
}

fn set_fsize(pid: u32, cur: u64) {
    let new = RLimit { cur, max: u64::MAX };
    // SAFETY: valid pointers to a properly laid out rlimit; the old value is not asked for.
    let r = unsafe { prlimit(pid as i32, RLIMIT_FSIZE, &new, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
}

fn replies(n: usize) -> Vec<Reply> {
    (1..=n)
        .map(|i| Reply::sse(text_sse(i, &[&format!("Reply {i}.")])))
        .collect()
}

/// Send a prompt, return its frames up to `agent_settled`.
fn prompt(p: &mut Pith, id: &str, text: &str) -> Vec<Value> {
    p.send(json!({"id": id, "type": "prompt", "message": text}));
    p.recv_until(|v| v["type"] == "agent_settled")
}

/// Every line of the file is a complete JSON object and the file ends with a newline.
fn assert_no_torn_line(path: &Path) -> usize {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "the file ends mid-line");
    for line in text.lines() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object()),
            "torn line: {line:.200}"
        );
    }
    text.lines().count()
}

fn write_errors(p: &Pith) -> Vec<String> {
    p.stderr_lines()
        .into_iter()
        .filter(|l| l.contains("Cannot write") || l.contains("Cannot open"))
        .collect()
}

/// Wait (a hang guard only) until stderr holds `n` write errors: stderr is read by another thread.
fn wait_for_write_errors(p: &Pith, n: usize) -> Vec<String> {
    let until = std::time::Instant::now() + support::TIMEOUT;
    loop {
        let errors = write_errors(p);
        if errors.len() >= n || std::time::Instant::now() > until {
            return errors;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The whole story on a disk that fills up and is freed again.
fn full_disk_loses_nothing(world: &World, mut p: Pith, disk: &Disk, error_text: &str) {
    let first = prompt(&mut p, "p1", "Before the disk fills.");
    assert!(of_type(&first, "session_write_error").is_empty());
    let file = disk.session_file();
    let lines_before = assert_no_torn_line(&file);
    let bytes_before = fs::read(&file).unwrap();

    disk.fill();
    // A prompt far bigger than any slack the file's last block may have: its line is cut.
    let big = format!("A long prompt: {}", "x".repeat(12_000));
    let second = prompt(&mut p, "p2", &big);
    let errors = of_type(&second, "session_write_error");
    assert_eq!(errors.len(), 1, "reported once: {second:#?}");
    let e = errors[0];
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["type", "sessionFile", "error", "unsavedEntries"]);
    assert!(e["sessionFile"].as_str().unwrap().ends_with(".jsonl"));
    assert!(e["error"].as_str().unwrap().contains(error_text), "{e}");
    assert_eq!(e["unsavedEntries"], 1, "the user message");
    // The run itself went on as usual.
    let end = of_type(&second, "agent_end");
    assert_eq!(end[0]["messages"][1]["content"][0]["text"], "Reply 2.");
    // Nothing torn, nothing half-written: the file is exactly what it was.
    assert_eq!(fs::read(&file).unwrap(), bytes_before);
    assert_eq!(assert_no_torn_line(&file), lines_before);
    let third = prompt(&mut p, "p3", "Still full.");
    assert!(
        of_type(&third, "session_write_error").is_empty(),
        "only once"
    );
    assert_eq!(wait_for_write_errors(&p, 1).len(), 1, "one stderr line");

    disk.free();
    let fourth = prompt(&mut p, "p4", "Room again.");
    let resumed = of_type(&fourth, "session_write_resumed");
    assert_eq!(resumed.len(), 1, "{fourth:#?}");
    assert_eq!(
        *resumed[0],
        json!({"type":"session_write_resumed","sessionFile":e["sessionFile"],"savedEntries":5})
    );
    assert!(of_type(&fourth, "session_write_error").is_empty());
    assert_eq!(assert_no_torn_line(&file), lines_before + 6);
    let live = messages(&mut p);
    assert_eq!(live.len(), 8);

    // The file loads with the whole conversation (copied out: a tmpfs goes with its process).
    let copy = world.tmp().join("copy.jsonl");
    fs::copy(&file, &copy).unwrap();
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
    let copy_s = copy.to_string_lossy().into_owned();
    let mut again = world.spawn(&fake_rpc(&["--session", &copy_s]));
    assert_eq!(messages(&mut again), live);
}

#[test]
fn a_full_disk_rlimit_loses_nothing() {
    let (world, _llm) = fake_world(replies(4));
    let (p, disk) = Disk::rlimit(&world);
    full_disk_loses_nothing(&world, p, &disk, "File too large");
}

#[test]
fn a_full_tmpfs_loses_nothing() {
    let (world, _llm) = fake_world(replies(4));
    if !namespaces_work(&world) {
        eprintln!("skipped: cannot mount a tmpfs in a mount namespace (needs root)");
        return;
    }
    let (p, disk) = Disk::tmpfs(&world, false);
    full_disk_loses_nothing(&world, p, &disk, "No space left on device");
}

#[test]
fn a_read_only_session_dir_keeps_the_session_in_memory_until_it_is_writable() {
    let (world, _llm) = fake_world(replies(4));
    let (mut p, disk) = if namespaces_work(&world) {
        Disk::tmpfs(&world, true)
    } else if !is_root() {
        Disk::chmod(&world)
    } else {
        eprintln!("skipped: root without mount namespaces cannot make a directory read-only");
        return;
    };
    // The first flush (header and every entry so far) cannot create the file.
    let first = prompt(&mut p, "p1", "Into a read-only dir.");
    let errors = of_type(&first, "session_write_error");
    assert_eq!(errors.len(), 1, "{first:#?}");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("Cannot open"),
        "{}",
        errors[0]
    );
    // model_change, thinking_level_change, user, assistant.
    assert_eq!(errors[0]["unsavedEntries"], 4);
    let second = prompt(&mut p, "p2", "Still read-only.");
    assert!(of_type(&second, "session_write_error").is_empty());

    disk.writable();
    let third = prompt(&mut p, "p3", "Writable.");
    let resumed = of_type(&third, "session_write_resumed");
    assert_eq!(resumed[0]["savedEntries"], 7);
    let file = disk.session_file();
    assert_eq!(assert_no_torn_line(&file), 1 + 8);

    // Read-only again: a new series of failures, reported again; at exit the last attempt
    // fails too and stderr says what is lost.
    disk.read_only();
    let fourth = prompt(&mut p, "p4", "Read-only again.");
    assert_eq!(of_type(&fourth, "session_write_error").len(), 1);
    assert_eq!(assert_no_torn_line(&file), 1 + 8);
    p.close_stdin();
    let status = p.wait(support::TIMEOUT);
    assert!(status.success());
    let lost = wait_for_lost_line(&p);
    assert!(
        lost.starts_with("Error: 2 session entries were not saved: Cannot open "),
        "{lost}"
    );
    if let Disk::Chmod { .. } = disk {
        disk.writable();
    }
}

fn wait_for_lost_line(p: &Pith) -> String {
    let until = std::time::Instant::now() + support::TIMEOUT;
    loop {
        if let Some(l) = p
            .stderr_lines()
            .into_iter()
            .find(|l| l.starts_with("Error: "))
        {
            return l;
        }
        assert!(std::time::Instant::now() < until, "{:?}", p.stderr_lines());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A message as the library appends it.
fn message(role: &str, text: &str) -> pith::message::AgentMessage {
    use pith::message::{AgentMessage, AssistantMessage, Content, UserContent, UserMessage};
    match role {
        "user" => AgentMessage::User(UserMessage {
            content: UserContent::Blocks(vec![Content::text(text)]),
            timestamp: 1,
        }),
        _ => {
            let mut a = AssistantMessage::empty("anthropic-messages", "fake", "fake-model");
            a.content.push(Content::text(text));
            AgentMessage::Assistant(a)
        }
    }
}

#[test]
fn a_large_backlog_is_retried_at_most_once_a_second_and_always_on_close() {
    use pith::session::{Session, WriteNotice};
    let world = World::new();
    // The session dir is a plain file at first: nothing can be created under it.
    let dir = world.dir.path().join("blocked");
    fs::write(&dir, "not a directory").unwrap();
    let file = dir.join("s.jsonl");
    let mut s = Session::create_at(&file, "/");
    s.append_message(&message("user", "small"));
    let failed = std::time::Instant::now();
    s.append_message(&message("assistant", &"b".repeat(100_000)));
    assert!(matches!(
        s.take_write_notices()[..],
        [WriteNotice::Failed { unsaved: 2, .. }]
    ));
    // The directory becomes possible; the backlog is over 64 KiB and the last attempt was just
    // now, so the next entry waits with it instead of rewriting 100 KB right away...
    fs::remove_file(&dir).unwrap();
    fs::create_dir(&dir).unwrap();
    s.append_message(&message("user", "next"));
    // (Unless this machine took over a second for the lines above: then the retry is due.)
    if failed.elapsed() < std::time::Duration::from_millis(900) {
        assert!(!file.exists());
        assert_eq!(s.unsaved_entries(), 3);
    }
    // ...and closing the session writes everything, in order.
    drop(s);
    let s = Session::open(&file).unwrap();
    let texts: Vec<usize> = s
        .build_context()
        .iter()
        .map(|m| serde_json::to_string(m).unwrap().len())
        .collect();
    assert_eq!(texts.len(), 3);
    assert!(texts[1] > 100_000);

    // A small backlog is retried with the very next entry.
    let dir2 = world.dir.path().join("blocked2");
    fs::write(&dir2, "x").unwrap();
    let file2 = dir2.join("s.jsonl");
    let mut s = Session::create_at(&file2, "/");
    s.append_message(&message("user", "small"));
    s.append_message(&message("assistant", "reply"));
    fs::remove_file(&dir2).unwrap();
    fs::create_dir(&dir2).unwrap();
    s.append_message(&message("user", "next"));
    assert_eq!(s.unsaved_entries(), 0);
    let notices = s.take_write_notices();
    assert!(matches!(
        notices[..],
        [
            WriteNotice::Failed { .. },
            WriteNotice::Resumed { saved: 3, .. }
        ]
    ));
}
