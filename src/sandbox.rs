//! The kernel sandbox (`--sandbox off|read-only|workspace-write`, settings `pith.sandbox`).
//!
//! Every thread that runs a tool (the agent's tool threads, the RPC `bash` thread) calls
//! [`Sandbox::enter`] first, before it touches anything a tool asked for. That thread, every
//! thread it starts and every process it starts (the shell and whatever it runs) are confined
//! from then on; pith's own threads (state machine, stdin/stdout, session writes, LLM streams)
//! never call it and stay free. Tool threads are never reused: each call gets a fresh thread
//! that ends with the call, so no unrestricted thread runs a tool and no restricted one runs
//! pith's own work.
//!
//! - Files: Linux Landlock. Reads (and execution) are allowed everywhere; writes only under the
//!   working directory, the tools' temporary directory (`$TMPDIR`) and
//!   `pith.sandbox.writableRoots` (`workspace-write`), or only under `$TMPDIR` (`read-only`);
//!   `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty`, `/dev/ptmx` and `/dev/pts` stay writable
//!   so shells work. From Landlock ABI 6 on, signals to processes outside the sandbox (pith
//!   itself included) are denied too. The ruleset is built once at start-up; each tool thread enforces a copy of
//!   it (one `dup`, `prctl(NO_NEW_PRIVS)` and `landlock_restrict_self`).
//! - Network (unless `pith.sandbox.network: true`): Landlock (ABI 4) denies TCP connect and bind;
//!   a seccomp filter, compiled once at start-up and installed on the tool thread after Landlock
//!   (so inherited by every child across fork and exec), makes `socket`/`socketpair` of any
//!   family but `AF_UNIX` fail with `EPERM` (UDP, raw, netlink, ... and TCP a second time) and
//!   denies `io_uring` (whose requests would bypass the filter).
//! - Environment: under the sandbox the shell does not inherit variables whose names contain
//!   `KEY`, `SECRET`, `TOKEN` or `PASSWORD` (any case), unless `pith.sandbox.env: "inherit"`.
//!
//! Where the kernel cannot enforce what was asked (no Landlock, or an ABI below the one the mode
//! needs) pith refuses to start ([`crate::cli::EXIT_SANDBOX`]) unless `--sandbox-fallback warn`.
//! The policy resolution is a pure function ([`resolve_policy`]) unit-tested below.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// How much a sandboxed tool may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    /// Writes only under `$TMPDIR`.
    ReadOnly,
    /// Writes under the working directory, `$TMPDIR` and the writable roots.
    WorkspaceWrite,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "off" => Some(Mode::Off),
            "read-only" => Some(Mode::ReadOnly),
            "workspace-write" => Some(Mode::WorkspaceWrite),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
        }
    }

    /// Higher is stricter.
    fn strictness(self) -> u8 {
        match self {
            Mode::Off => 0,
            Mode::WorkspaceWrite => 1,
            Mode::ReadOnly => 2,
        }
    }
}

/// What happens when the kernel cannot enforce the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Refuse to start (exit 5).
    #[default]
    Fail,
    /// A warning on stderr, and the run goes on unsandboxed (reported as such).
    Warn,
}

impl Fallback {
    pub fn parse(s: &str) -> Option<Fallback> {
        match s {
            "fail" => Some(Fallback::Fail),
            "warn" => Some(Fallback::Warn),
            _ => None,
        }
    }
}

/// The command line's sandbox flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CliSandbox {
    /// `--sandbox MODE`.
    pub mode: Option<Mode>,
    /// `--sandbox-fallback warn|fail`.
    pub fallback: Option<Fallback>,
}

/// The sandbox the run asked for, resolved from the command line and both settings files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    /// Network allowed (`pith.sandbox.network: true`).
    pub network: bool,
    /// `pith.sandbox.writableRoots` (the user's), absolute.
    pub writable_roots: Vec<PathBuf>,
    /// `pith.sandbox.env: "inherit"`: the shell keeps secret-looking variables.
    pub env_inherit: bool,
    pub fallback: Fallback,
}

/// One settings file's `pith.sandbox`, read.
#[derive(Default)]
struct FileSettings {
    mode: Option<Mode>,
    fallback: Option<Fallback>,
    network: Option<bool>,
    writable_roots: Vec<String>,
    env_inherit: Option<bool>,
}

fn read_file_settings(
    pith: Option<&Map<String, Value>>,
    which: &str,
) -> Result<FileSettings, String> {
    let Some(sb) = pith.and_then(|p| p.get("sandbox")) else {
        return Ok(FileSettings::default());
    };
    let Some(sb) = sb.as_object() else {
        return Err(format!("{which} settings: pith.sandbox must be an object"));
    };
    let mut out = FileSettings::default();
    if let Some(v) = sb.get("mode") {
        out.mode = Some(v.as_str().and_then(Mode::parse).ok_or_else(|| {
            format!(
                "{which} settings: pith.sandbox.mode must be \"off\", \"read-only\" or \"workspace-write\" (got {v})"
            )
        })?);
    }
    if let Some(v) = sb.get("fallback") {
        out.fallback = Some(v.as_str().and_then(Fallback::parse).ok_or_else(|| {
            format!(
                "{which} settings: pith.sandbox.fallback must be \"fail\" or \"warn\" (got {v})"
            )
        })?);
    }
    if let Some(v) = sb.get("network") {
        out.network =
            Some(v.as_bool().ok_or_else(|| {
                format!("{which} settings: pith.sandbox.network must be a boolean")
            })?);
    }
    if let Some(v) = sb.get("writableRoots") {
        let list = v.as_array().ok_or_else(|| {
            format!("{which} settings: pith.sandbox.writableRoots must be an array of paths")
        })?;
        for item in list {
            let s = item.as_str().ok_or_else(|| {
                format!("{which} settings: pith.sandbox.writableRoots must be an array of paths")
            })?;
            out.writable_roots.push(s.to_string());
        }
    }
    if let Some(v) = sb.get("env") {
        out.env_inherit = Some(match v.as_str() {
            Some("inherit") => true,
            Some("filter") => false,
            _ => {
                return Err(format!(
                    "{which} settings: pith.sandbox.env must be \"inherit\" or \"filter\" (got {v})"
                ));
            }
        });
    }
    Ok(out)
}

/// The sandbox in force: the command line and the user's settings decide; the project's settings
/// (`project`, only when the project is trusted) may only tighten: a stricter mode, the network
/// off, the secret filter on. What a project tries to loosen is ignored with a warning (pushed on
/// `warnings`). A malformed `pith.sandbox` is an error: a sandbox asked for must not be dropped
/// because of a typo. `Ok(None)`: no sandbox. `home` expands `~/` in writable roots; relative
/// roots are taken from `cwd`.
pub fn resolve_policy(
    cli: CliSandbox,
    user: Option<&Map<String, Value>>,
    project: Option<&Map<String, Value>>,
    cwd: &Path,
    home: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<Option<Policy>, String> {
    let u = read_file_settings(user, "user")?;
    let p = read_file_settings(project, "project")?;
    let mut mode = cli.mode.or(u.mode).unwrap_or(Mode::Off);
    if let Some(pm) = p.mode {
        if pm.strictness() > mode.strictness() {
            mode = pm;
        } else if pm != mode {
            warnings.push(format!(
                "Warning: the project's pith.sandbox.mode \"{}\" is ignored: a project may only tighten the sandbox (\"{}\" stays)",
                pm.as_str(),
                mode.as_str()
            ));
        }
    }
    if mode == Mode::Off {
        return Ok(None);
    }
    let mut network = u.network.unwrap_or(false);
    match p.network {
        Some(false) => network = false,
        Some(true) if !network => warnings.push(
            "Warning: the project's pith.sandbox.network true is ignored: a project may only tighten the sandbox"
                .to_string(),
        ),
        _ => {}
    }
    if !p.writable_roots.is_empty() {
        warnings.push(
            "Warning: the project's pith.sandbox.writableRoots are ignored: a project may only tighten the sandbox"
                .to_string(),
        );
    }
    let mut env_inherit = u.env_inherit.unwrap_or(false);
    match p.env_inherit {
        Some(false) => env_inherit = false,
        Some(true) if !env_inherit => warnings.push(
            "Warning: the project's pith.sandbox.env \"inherit\" is ignored: a project may only tighten the sandbox"
                .to_string(),
        ),
        _ => {}
    }
    if p.fallback == Some(Fallback::Warn) && cli.fallback.or(u.fallback) != Some(Fallback::Warn) {
        warnings.push(
            "Warning: the project's pith.sandbox.fallback \"warn\" is ignored: a project may only tighten the sandbox"
                .to_string(),
        );
    }
    let fallback = cli.fallback.or(u.fallback).unwrap_or_default();
    let writable_roots = u
        .writable_roots
        .iter()
        .map(|r| {
            let expanded = match (r.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ if r == "~" => home.map_or_else(|| PathBuf::from(r), Path::to_path_buf),
                _ => PathBuf::from(r),
            };
            crate::tools::paths::normalize(&cwd.join(expanded))
        })
        .collect();
    Ok(Some(Policy {
        mode,
        network,
        writable_roots,
        env_inherit,
        fallback,
    }))
}

/// Whether the shell loses this variable under the sandbox (`*KEY*`, `*SECRET*`, `*TOKEN*`,
/// `*PASSWORD*`, any case).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASSWORD"]
        .iter()
        .any(|w| upper.contains(w))
}

/// The lowest Landlock ABI a policy needs: 3 for files (2 brings `rename`/`link` across
/// directories under control, 3 `truncate`), 4 when the network is off (TCP rules).
pub fn required_abi(policy: &Policy) -> i32 {
    if policy.network { 3 } else { 4 }
}

/// Why the kernel cannot enforce a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

/// How the sandbox is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// Landlock at this ABI (and the seccomp filter when the network is off).
    Landlock { abi: i32 },
    /// `--sandbox-fallback warn` on a kernel that cannot: nothing is confined.
    Unenforced { reason: String },
}

/// A sandbox set up at start-up, shared by every tool thread.
pub struct Sandbox {
    policy: Policy,
    /// Where tools may write (working directory in `workspace-write`, `$TMPDIR`, the roots).
    write_roots: Vec<PathBuf>,
    enforcement: Enforcement,
    #[cfg(target_os = "linux")]
    ruleset: Option<landlock::RulesetCreated>,
    /// The network filter, compiled before any tool runs.
    #[cfg(target_os = "linux")]
    seccomp: Option<seccompiler::BpfProgram>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("policy", &self.policy)
            .field("write_roots", &self.write_roots)
            .field("enforcement", &self.enforcement)
            .finish()
    }
}

/// The test-only switch that makes pith see no Landlock (debug builds only; docs/rpc.md).
const TEST_NO_LANDLOCK: &str = "PITH_TEST_NO_LANDLOCK";

impl Sandbox {
    /// Probe the kernel and prepare the ruleset and the filter for `policy`. `Err`: the kernel
    /// cannot enforce it (the caller refuses to start, or warns under `--sandbox-fallback warn`
    /// and calls [`Sandbox::unenforced`]).
    pub fn start(policy: Policy, cwd: &Path, tmp: &Path) -> Result<Sandbox, Unavailable> {
        let mut write_roots = Vec::new();
        if policy.mode == Mode::WorkspaceWrite {
            write_roots.push(cwd.to_path_buf());
            write_roots.extend(policy.writable_roots.iter().cloned());
        }
        write_roots.push(tmp.to_path_buf());
        if cfg!(debug_assertions) && std::env::var_os(TEST_NO_LANDLOCK).is_some_and(|v| v == "1") {
            return Err(Unavailable(format!(
                "Landlock is unavailable ({TEST_NO_LANDLOCK}=1, a test switch)"
            )));
        }
        imp::prepare(policy, write_roots)
    }

    /// The policy, not enforced (`--sandbox-fallback warn`).
    pub fn unenforced(policy: Policy, cwd: &Path, tmp: &Path, reason: String) -> Sandbox {
        let mut write_roots = Vec::new();
        if policy.mode == Mode::WorkspaceWrite {
            write_roots.push(cwd.to_path_buf());
            write_roots.extend(policy.writable_roots.iter().cloned());
        }
        write_roots.push(tmp.to_path_buf());
        Sandbox {
            policy,
            write_roots,
            enforcement: Enforcement::Unenforced { reason },
            #[cfg(target_os = "linux")]
            ruleset: None,
            #[cfg(target_os = "linux")]
            seccomp: None,
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// Confine the calling thread (and everything it starts) for good. Called first on every
    /// tool thread; `Err` means the tool must not run.
    pub fn enter(&self) -> Result<(), String> {
        match &self.enforcement {
            Enforcement::Unenforced { .. } => Ok(()),
            Enforcement::Landlock { .. } => imp::enter(self),
        }
    }

    /// The shell's environment under the sandbox: every secret-looking variable of pith's own
    /// environment, and of `env`, is removed (`None`), unless `pith.sandbox.env: "inherit"`.
    pub fn filter_env(&self, env: &mut Vec<(String, Option<String>)>) {
        if self.policy.env_inherit {
            return;
        }
        for (k, v) in env.iter_mut() {
            if is_secret_name(k) {
                *v = None;
            }
        }
        for (k, _) in std::env::vars_os() {
            let Some(k) = k.to_str() else { continue };
            if is_secret_name(k) && !env.iter().any(|(e, _)| e == k) {
                env.push((k.to_string(), None));
            }
        }
    }

    /// `get_state`'s `sandbox` (and the json mode's `sandbox` line).
    pub fn state_json(&self) -> Value {
        let roots: Vec<String> = self
            .write_roots
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let mut v = json!({
            "mode": self.policy.mode.as_str(),
            "network": self.policy.network,
            "writableRoots": roots,
            "env": if self.policy.env_inherit { "inherit" } else { "filter" },
        });
        match &self.enforcement {
            Enforcement::Landlock { abi } => {
                v["enforced"] = json!(format!("landlock-abi-{abi}"));
            }
            Enforcement::Unenforced { reason } => {
                v["enforced"] = json!("none");
                v["reason"] = json!(reason);
            }
        }
        v
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };

    /// The ABI whose rights pith asks for (V5 adds device ioctls). Newer kernels keep it.
    const TARGET: ABI = ABI::V5;

    /// Device files a shell needs to write to.
    const DEVICES: &[&str] = &[
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/ptmx",
    ];

    unsafe extern "C" {
        fn syscall(num: std::ffi::c_long, ...) -> std::ffi::c_long;
    }
    const SYS_LANDLOCK_CREATE_RULESET: std::ffi::c_long = 444;
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;

    /// The kernel's Landlock ABI, or why there is none.
    pub fn kernel_abi() -> Result<i32, Unavailable> {
        // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
        let v = unsafe {
            syscall(
                SYS_LANDLOCK_CREATE_RULESET,
                std::ptr::null::<u8>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if v >= 1 {
            return Ok(v as i32);
        }
        // errno of this thread, read right after the call.
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        Err(Unavailable(match errno {
            95 => "Landlock is supported by this kernel but not enabled (add landlock to the lsm= boot parameter)".to_string(),
            38 => "Landlock is not available: this kernel was built without it".to_string(),
            e => format!("Landlock is not available (landlock_create_ruleset: errno {e})"),
        }))
    }

    pub fn prepare(policy: Policy, write_roots: Vec<PathBuf>) -> Result<Sandbox, Unavailable> {
        let abi = kernel_abi()?;
        let need = required_abi(&policy);
        if abi < need {
            let why = if policy.network {
                "file rules"
            } else {
                "file rules and TCP rules (network off)"
            };
            return Err(Unavailable(format!(
                "Landlock ABI {abi} is below the ABI {need} this sandbox needs ({why})"
            )));
        }
        let err = |e: &dyn std::fmt::Display| Unavailable(format!("Landlock: {e}"));
        // Signals to processes outside the sandbox (pith itself, the user's other processes):
        // denied from ABI 6 on, where the kernel has it.
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(TARGET))
            .map_err(|e| err(&e))?
            .scope(Scope::Signal)
            .map_err(|e| err(&e))?;
        if !policy.network {
            ruleset = ruleset
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(|e| err(&e))?
                .set_compatibility(CompatLevel::BestEffort);
        }
        let mut created = ruleset.create().map_err(|e| err(&e))?;
        let root = PathFd::new("/").map_err(|e| err(&e))?;
        created = created
            .add_rule(PathBeneath::new(root, AccessFs::from_read(TARGET)))
            .map_err(|e| err(&e))?;
        let mut dirs: Vec<PathBuf> = write_roots.clone();
        dirs.push(PathBuf::from("/dev/pts"));
        for dir in &dirs {
            // A writable root that cannot be opened (missing) is skipped: nothing can be written
            // there, which is the safe side; said on stderr.
            let fd = match PathFd::new(dir) {
                Ok(fd) => fd,
                Err(e) => {
                    if dir != Path::new("/dev/pts") {
                        eprintln!(
                            "Warning: sandbox: {} cannot be opened, so nothing can be written there ({e})",
                            dir.display()
                        );
                    }
                    continue;
                }
            };
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_all(TARGET)))
                .map_err(|e| err(&e))?;
        }
        for dev in DEVICES {
            let Ok(fd) = PathFd::new(dev) else { continue };
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_file(TARGET)))
                .map_err(|e| err(&e))?;
        }
        let seccomp = if policy.network {
            None
        } else {
            Some(network_filter().map_err(Unavailable)?)
        };
        Ok(Sandbox {
            policy,
            write_roots,
            enforcement: Enforcement::Landlock { abi },
            ruleset: Some(created),
            seccomp,
        })
    }

    pub fn enter(sb: &Sandbox) -> Result<(), String> {
        let Some(ruleset) = &sb.ruleset else {
            return Err("the sandbox has no ruleset".to_string());
        };
        let copy = ruleset
            .try_clone()
            .map_err(|e| format!("Landlock: cannot copy the ruleset: {e}"))?;
        let status = copy.restrict_self().map_err(|e| format!("Landlock: {e}"))?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("Landlock did not enforce the ruleset".to_string());
        }
        if let Some(bpf) = &sb.seccomp {
            seccompiler::apply_filter(bpf).map_err(|e| format!("seccomp: {e}"))?;
        }
        Ok(())
    }

    /// Syscall numbers of the filter, per architecture: socket, socketpair, and io_uring's three
    /// (whose submissions the filter could not see).
    fn numbers() -> Result<(seccompiler::TargetArch, [i64; 2], Vec<i64>), String> {
        let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)
            .map_err(|e| format!("seccomp: {e}"))?;
        let uring = [425, 426, 427];
        Ok(match arch {
            seccompiler::TargetArch::x86_64 => {
                // The x32 ABI's numbers too (same audit architecture, bit 30 set).
                const X32: i64 = 0x4000_0000;
                let mut deny: Vec<i64> = uring.to_vec();
                deny.extend(uring.iter().map(|n| n + X32));
                (arch, [41, 53], deny)
            }
            seccompiler::TargetArch::aarch64 | seccompiler::TargetArch::riscv64 => {
                (arch, [198, 199], uring.to_vec())
            }
        })
    }

    /// `socket`/`socketpair` with a family other than `AF_UNIX`, and `io_uring_*`: `EPERM`.
    pub fn network_filter() -> Result<seccompiler::BpfProgram, String> {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule,
        };
        use std::collections::BTreeMap;
        const AF_UNIX: u64 = 1;
        const EPERM: u32 = 1;
        let (arch, sockets, deny) = numbers()?;
        let e = |e: seccompiler::BackendError| format!("seccomp: {e}");
        let not_unix = || -> Result<Vec<SeccompRule>, String> {
            let cond = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, AF_UNIX)
                .map_err(e)?;
            Ok(vec![SeccompRule::new(vec![cond]).map_err(e)?])
        };
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for n in sockets {
            rules.insert(n, not_unix()?);
            if arch == seccompiler::TargetArch::x86_64 {
                rules.insert(n + 0x4000_0000, not_unix()?);
            }
        }
        for n in deny {
            rules.insert(n, Vec::new());
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(EPERM),
            arch,
        )
        .map_err(e)?;
        filter.try_into().map_err(e)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    pub fn prepare(_: Policy, _: Vec<PathBuf>) -> Result<Sandbox, Unavailable> {
        Err(Unavailable(
            "Landlock is not available: it is a Linux kernel feature".to_string(),
        ))
    }

    pub fn enter(_: &Sandbox) -> Result<(), String> {
        Err("the sandbox is not available on this system".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn resolve(
        cli: CliSandbox,
        user: Value,
        project: Value,
    ) -> (Result<Option<Policy>, String>, Vec<String>) {
        let mut w = Vec::new();
        let u = obj(user);
        let p = obj(project);
        let r = resolve_policy(
            cli,
            u.get("pith").and_then(Value::as_object),
            p.get("pith").and_then(Value::as_object),
            Path::new("/work/proj"),
            Some(Path::new("/home/u")),
            &mut w,
        );
        (r, w)
    }

    #[test]
    fn no_sandbox_unless_asked() {
        let (r, w) = resolve(CliSandbox::default(), json!({}), json!({}));
        assert_eq!(r, Ok(None));
        assert!(w.is_empty());
    }

    #[test]
    fn flag_and_user_settings() {
        let cli = CliSandbox {
            mode: Some(Mode::WorkspaceWrite),
            fallback: None,
        };
        let user = json!({"pith": {"sandbox": {
            "writableRoots": ["~/cache", "rel", "/abs/x/../y"], "network": true, "env": "inherit"
        }}});
        let (r, w) = resolve(cli, user, json!({}));
        let p = r.unwrap().unwrap();
        assert_eq!(p.mode, Mode::WorkspaceWrite);
        assert!(p.network);
        assert!(p.env_inherit);
        assert_eq!(p.fallback, Fallback::Fail);
        assert_eq!(
            p.writable_roots,
            vec![
                PathBuf::from("/home/u/cache"),
                PathBuf::from("/work/proj/rel"),
                PathBuf::from("/abs/y")
            ]
        );
        assert!(w.is_empty());
        // Settings alone turn it on; the flag wins over them.
        let user = json!({"pith": {"sandbox": {"mode": "workspace-write", "fallback": "warn"}}});
        let (r, _) = resolve(CliSandbox::default(), user.clone(), json!({}));
        let p = r.unwrap().unwrap();
        assert_eq!(
            (p.mode, p.network, p.fallback),
            (Mode::WorkspaceWrite, false, Fallback::Warn)
        );
        let off = CliSandbox {
            mode: Some(Mode::Off),
            fallback: None,
        };
        assert_eq!(resolve(off, user, json!({})).0, Ok(None));
    }

    #[test]
    fn a_project_only_tightens() {
        let ww = CliSandbox {
            mode: Some(Mode::WorkspaceWrite),
            fallback: None,
        };
        let user = json!({"pith": {"sandbox": {"network": true, "env": "inherit"}}});
        let project =
            json!({"pith": {"sandbox": {"mode": "read-only", "network": false, "env": "filter"}}});
        let (r, w) = resolve(ww, user, project);
        let p = r.unwrap().unwrap();
        assert_eq!(
            (p.mode, p.network, p.env_inherit),
            (Mode::ReadOnly, false, false)
        );
        assert!(w.is_empty());
        // A project can switch a sandbox on.
        let (r, _) = resolve(
            CliSandbox::default(),
            json!({}),
            json!({"pith": {"sandbox": {"mode": "workspace-write"}}}),
        );
        assert_eq!(r.unwrap().unwrap().mode, Mode::WorkspaceWrite);
        // ... never loosen one.
        let loosen = json!({"pith": {"sandbox": {
            "mode": "off", "network": true, "env": "inherit", "writableRoots": ["/"], "fallback": "warn"
        }}});
        let (r, w) = resolve(ww, json!({}), loosen.clone());
        let p = r.unwrap().unwrap();
        assert_eq!(p.mode, Mode::WorkspaceWrite);
        assert!(!p.network && !p.env_inherit && p.writable_roots.is_empty());
        assert_eq!(p.fallback, Fallback::Fail);
        assert_eq!(w.len(), 5, "{w:?}");
        assert!(w.iter().all(|w| w.contains("may only tighten")));
        let ro = CliSandbox {
            mode: Some(Mode::ReadOnly),
            fallback: None,
        };
        let (r, _) = resolve(
            ro,
            json!({}),
            json!({"pith": {"sandbox": {"mode": "workspace-write"}}}),
        );
        assert_eq!(r.unwrap().unwrap().mode, Mode::ReadOnly);
    }

    #[test]
    fn malformed_settings_are_errors() {
        let (r, _) = resolve(
            CliSandbox::default(),
            json!({"pith": {"sandbox": {"mode": "readonly"}}}),
            json!({}),
        );
        assert!(r.unwrap_err().contains("pith.sandbox.mode"));
        let (r, _) = resolve(
            CliSandbox::default(),
            json!({}),
            json!({"pith": {"sandbox": {"writableRoots": "/x"}}}),
        );
        assert!(r.unwrap_err().contains("project settings"));
        let (r, _) = resolve(
            CliSandbox::default(),
            json!({"pith": {"sandbox": 1}}),
            json!({}),
        );
        assert!(r.is_err());
    }

    #[test]
    fn secret_names() {
        for n in [
            "OPENAI_API_KEY",
            "aws_secret_access_key",
            "GH_TOKEN",
            "PGPASSWORD",
            "key",
            "Monkey",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["PATH", "HOME", "TOKE", "PASSWD", "SECRE"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn required_abis() {
        let mut p = Policy {
            mode: Mode::ReadOnly,
            network: false,
            writable_roots: Vec::new(),
            env_inherit: false,
            fallback: Fallback::Fail,
        };
        assert_eq!(required_abi(&p), 4);
        p.network = true;
        assert_eq!(required_abi(&p), 3);
    }

    #[test]
    fn env_filter() {
        let p = Policy {
            mode: Mode::WorkspaceWrite,
            network: false,
            writable_roots: Vec::new(),
            env_inherit: false,
            fallback: Fallback::Fail,
        };
        let sb = Sandbox::unenforced(p.clone(), Path::new("/w"), Path::new("/t"), "x".into());
        let mut env = vec![
            ("PI_CODING_AGENT".to_string(), Some("true".to_string())),
            ("MY_TOKEN".to_string(), Some("t".to_string())),
        ];
        sb.filter_env(&mut env);
        assert_eq!(
            env[0],
            ("PI_CODING_AGENT".to_string(), Some("true".to_string()))
        );
        assert_eq!(env[1], ("MY_TOKEN".to_string(), None));
        assert!(
            env.iter()
                .skip(2)
                .all(|(k, v)| is_secret_name(k) && v.is_none())
        );
        let sb = Sandbox::unenforced(
            Policy {
                env_inherit: true,
                ..p
            },
            Path::new("/w"),
            Path::new("/t"),
            "x".into(),
        );
        let mut env = vec![("MY_TOKEN".to_string(), Some("t".to_string()))];
        sb.filter_env(&mut env);
        assert_eq!(env, vec![("MY_TOKEN".to_string(), Some("t".to_string()))]);
        assert_eq!(
            sb.state_json(),
            json!({"mode": "workspace-write", "network": false, "writableRoots": ["/w", "/t"],
                   "env": "inherit", "enforced": "none", "reason": "x"})
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_network_filter_compiles() {
        let bpf = imp::network_filter().unwrap();
        assert!(!bpf.is_empty());
    }
}
