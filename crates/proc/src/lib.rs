//! Processes and what they hold, for every crate that starts or stops one:
//! whether a process runs ([`alive`], a zombie does not), which process a
//! pid names over time ([`Identity`]), its children, stopping it with
//! escalation and checking that it went ([`stop`]), running a command as
//! another user ([`as_user`], [`run_as`]), tying a child's life to its
//! parent's ([`die_with_parent`]), waiting for a condition or a child with a
//! timeout ([`wait_until`], [`wait_child`]), and the mount table, read in
//! one place with one unescaping ([`mounts`], [`holders`]), memory groups
//! ([`MemoryGroup`]), and the state directory where storbench records what
//! it started so a later one can stop it ([`state_dir`]). Built on
//! `procfs`, `nix`, `libc` (`prctl`) and `wait-timeout`; nothing here prints.

#![deny(missing_docs)]

mod background;
mod memory;
mod mounts;
mod state;
mod user;
mod wait;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub use background::{Background, Watchdog};
pub use memory::MemoryGroup;
pub use mounts::{holders, is_mounted, mount_of, mounts, unescape, Holder, Mount};
pub use nix::sys::signal::Signal as Sig;
pub use state::{load_json, lock, private_file, save_json, state_dir, Lock};
pub use user::{chown, reachable};
pub use wait::{wait_child, wait_until};

/// A process error.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// A process outlived every step of a stop.
    #[error("process {pid} ({what}) still runs after {steps}")]
    Survived {
        /// Its pid.
        pid: u32,
        /// What it is, as the caller named it.
        what: String,
        /// The steps tried, as `SIGINT 60s, SIGQUIT 10s, SIGKILL 5s`.
        steps: String,
    },
    /// Reading /proc failed.
    #[error("reading /proc: {0}")]
    Proc(String),
    /// Something the machine lacks or refuses (no memory controller, not
    /// root): the caller's input cannot be served here.
    #[error("{0}")]
    Refused(String),
    /// A step failed (a file could not be written, a command failed).
    #[error("{0}")]
    Failed(String),
}

fn stat(pid: u32) -> Option<procfs::process::Stat> {
    procfs::process::Process::new(pid as i32).ok()?.stat().ok()
}

/// Whether process `pid` runs: it exists and has not ended (a zombie, or
/// one being reaped, only waits for its parent).
pub fn alive(pid: u32) -> bool {
    pid > 0 && stat(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// When process `pid` started, in clock ticks after boot: with the pid, it
/// names one process even after the pid is reused.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.starttime)
}

/// One process over time: its pid and start time, so a reused pid is not
/// taken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The process id.
    pub pid: u32,
    /// Its start time ([`start_time`]).
    pub start: u64,
}

impl Identity {
    /// The process `pid` is now, if it runs.
    pub fn of(pid: u32) -> Option<Identity> {
        alive(pid).then(|| start_time(pid).map(|start| Identity { pid, start }))?
    }

    /// Whether this same process still runs.
    pub fn alive(&self) -> bool {
        alive(self.pid) && start_time(self.pid) == Some(self.start)
    }
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    find(|p| p.ppid == pid)
}

/// The CPU time (user + system, clock ticks) of process `root` and every
/// live descendant, plus what `root` has reaped of its exited children
/// (`cutime + cstime`: PostgreSQL's postmaster reaps its backends, so a
/// backend that came and went still counts); `None` when `root` is gone.
pub fn tree_cpu_ticks(root: u32) -> Option<u64> {
    let all = procfs::process::all_processes().ok()?;
    let stats: Vec<procfs::process::Stat> = all.flatten().filter_map(|p| p.stat().ok()).collect();
    let top = stats.iter().find(|s| s.pid as u32 == root)?;
    let mut total = top.utime + top.stime + (top.cutime + top.cstime).max(0) as u64;
    let parent: std::collections::HashMap<u32, u32> =
        stats.iter().map(|s| (s.pid as u32, s.ppid as u32)).collect();
    for s in &stats {
        // Walk up at most a few levels (backends are the postmaster's children).
        let mut p = s.ppid as u32;
        for _ in 0..8 {
            if p == root {
                total += s.utime + s.stime;
                break;
            }
            match parent.get(&p) {
                Some(&up) if up != p && p > 1 => p = up,
                _ => break,
            }
        }
    }
    Some(total)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of
/// [`tree_cpu_ticks`].
pub fn ticks_per_second() -> u64 {
    procfs::ticks_per_second()
}

/// The parent of process `pid`, and its command name.
pub fn parent_and_name(pid: u32) -> Option<(u32, String)> {
    let s = procfs::process::Process::new(pid as i32).ok()?.stat().ok()?;
    Some((s.ppid as u32, s.comm))
}

/// What [`find`] shows of a process.
pub struct Info {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid.
    pub ppid: u32,
    /// Its arguments (empty for a kernel thread).
    pub cmdline: Vec<String>,
}

/// The live processes `keep` accepts.
pub fn find(keep: impl Fn(&Info) -> bool) -> Vec<u32> {
    let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
    all.flatten()
        .filter_map(|p| {
            let s = p.stat().ok()?;
            if s.state == 'Z' || s.state == 'X' {
                return None;
            }
            let info =
                Info { pid: p.pid as u32, ppid: s.ppid as u32, cmdline: p.cmdline().unwrap_or_default() };
            keep(&info).then_some(info.pid)
        })
        .collect()
}

/// The files under `dir` that process `pid` has mapped into its memory
/// (shared memory segments under /dev/shm, say), each once.
pub fn mapped_files(pid: u32, dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(p) = procfs::process::Process::new(pid as i32) else { return Vec::new() };
    let Ok(maps) = p.maps() else { return Vec::new() };
    let mut out: Vec<std::path::PathBuf> = maps
        .into_iter()
        .filter_map(|m| match m.pathname {
            procfs::process::MMapPath::Path(f) if f.starts_with(dir) => Some(f),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Sends `sig` to `pid`; a process already gone is not an error.
pub fn signal(pid: u32, sig: Signal) {
    if pid > 0 {
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }
}

/// One step of a [`stop`]: a signal, and how long to wait for the process
/// to go after it.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// The signal.
    pub signal: Signal,
    /// The wait after it.
    pub wait: Duration,
    /// Send it to the process's children too (SIGKILL to a server whose
    /// backends would otherwise outlive it).
    pub children: bool,
}

impl Step {
    /// `signal`, then wait up to `wait` for the process alone.
    pub const fn new(signal: Signal, wait: Duration) -> Step {
        Step { signal, wait, children: false }
    }

    /// The same step sent to the children as well.
    pub const fn with_children(mut self) -> Step {
        self.children = true;
        self
    }
}

/// Stops process `who` by `steps` in turn (each sent only while it still
/// runs), and checks that it went: returns the step that stopped it
/// (`Ok(None)` when it was not running), or [`ProcError::Survived`].
pub fn stop(who: Identity, what: &str, steps: &[Step]) -> Result<Option<Signal>, ProcError> {
    if !who.alive() {
        return Ok(None);
    }
    for s in steps {
        let kids = if s.children { children(who.pid) } else { Vec::new() };
        signal(who.pid, s.signal);
        for k in kids {
            signal(k, s.signal);
        }
        if wait_until(s.wait, || !who.alive()) {
            // Its leader gone (a zombie) while a thread of it is still in
            // I/O (a multi-threaded server killed): it holds its files
            // until that ends, so it is waited for as below.
            if s.signal == Signal::SIGKILL && in_uninterruptible_wait(who.pid) {
                wait_until(KILLED_IO_WAIT, || !in_uninterruptible_wait(who.pid));
            }
            return Ok(Some(s.signal));
        }
    }
    let mut tried = steps
        .iter()
        .map(|s| format!("{} {}s", s.signal.as_str(), s.wait.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ");
    // Killed, but in an uninterruptible wait: it goes when its I/O
    // completes, which on a throttled or emulated device (a server's
    // checkpoint fsync at a disk's caps) can take minutes. Not a survivor
    // yet.
    if steps.last().is_some_and(|s| s.signal == Signal::SIGKILL) && in_uninterruptible_wait(who.pid) {
        if wait_until(KILLED_IO_WAIT, || !who.alive()) {
            return Ok(Some(Signal::SIGKILL));
        }
        tried.push_str(&format!(" and {}s more in uninterruptible I/O", KILLED_IO_WAIT.as_secs()));
    }
    Err(ProcError::Survived { pid: who.pid, what: what.to_string(), steps: tried })
}

/// How long a killed process in an uninterruptible wait (state `D`) is
/// given to finish its I/O and go.
pub const KILLED_IO_WAIT: Duration = Duration::from_secs(300);

/// Whether any thread of process `pid` is in an uninterruptible wait
/// (state `D`: I/O it cannot leave, even killed).
pub fn in_uninterruptible_wait(pid: u32) -> bool {
    let Ok(p) = procfs::process::Process::new(pid as i32) else { return false };
    let Ok(tasks) = p.tasks() else { return false };
    tasks.flatten().any(|t| t.stat().is_ok_and(|s| s.state == 'D'))
}

/// Process `pid`'s state letter (`R` running, `S` sleeping, `D` in an
/// uninterruptible wait, …), if it exists (the tests'; a stop asks
/// [`in_uninterruptible_wait`], which reads every thread's).
#[cfg(test)]
fn state(pid: u32) -> Option<char> {
    stat(pid).map(|s| s.state)
}

/// Whether this process runs as root (and so can give files to another
/// user and run commands as it).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Makes the process `c` spawns die (SIGKILL) when the thread that spawns
/// it ends, which a kill of this whole process (even SIGKILL) includes:
/// the kernel's `PR_SET_PDEATHSIG`, set in the child just before it execs.
/// For a server that must not outlive storbench and is stopped, in the
/// normal course, before the spawning thread's call returns: spawn it from
/// a thread that lives as long as it should. The kernel clears the setting
/// when the child changes its user or group ids or execs a set-user-ID
/// program, so the child must start as the user it runs as
/// ([`run_as`]), not switch to it itself. A parent gone between the fork
/// and the setting is caught: the spawn fails.
pub fn die_with_parent(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl and getppid are async-signal-safe, and the closure
    // allocates nothing (the error is a raw OS error).
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Makes `c` start as `user` and its login group (set before it execs, by
/// the spawn itself) when this process is root and `user` is another;
/// else nothing to do. An error when no such user exists.
pub fn run_as(c: &mut Command, user: &str) -> Result<(), ProcError> {
    use std::os::unix::process::CommandExt;
    if !is_root() || user == "root" {
        return Ok(());
    }
    let u = nix::unistd::User::from_name(user)
        .map_err(|e| ProcError::Failed(format!("looking up user {user}: {e}")))?
        .ok_or_else(|| ProcError::Refused(format!("no user named {user} on this machine")))?;
    c.uid(u.uid.as_raw()).gid(u.gid.as_raw());
    Ok(())
}

/// A command running `prog` as `user`: through `runuser -u USER --` when
/// this process is root and `user` is another, else directly.
pub fn as_user(user: &str, prog: &Path) -> Command {
    if is_root() && user != "root" {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--"]).arg(prog);
        c
    } else {
        Command::new(prog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_tied_to_its_parent_dies_when_the_spawning_thread_ends() {
        let pid = std::thread::spawn(|| {
            let mut c = Command::new("sleep");
            c.arg("30");
            die_with_parent(&mut c);
            c.spawn().unwrap().id()
        })
        .join()
        .unwrap();
        let gone = wait_until(Duration::from_secs(5), || !alive(pid));
        if !gone {
            signal(pid, Signal::SIGKILL);
        }
        // Reap it (this process is its parent).
        // SAFETY: waits for a child of this process, by its pid.
        unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), 0) };
        assert!(gone, "sleep {pid} outlived the thread that spawned it");
    }

    #[test]
    fn a_stopped_child_is_gone_and_a_reaped_pid_is_not_alive() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let who = Identity::of(child.id()).unwrap();
        assert!(who.alive());
        // A zombie (not yet reaped) is not alive.
        let got = stop(who, "sleep", &[Step::new(Signal::SIGTERM, Duration::from_secs(5))]).unwrap();
        assert_eq!(got, Some(Signal::SIGTERM));
        assert!(!alive(child.id()));
        child.wait().unwrap();
        assert_eq!(stop(who, "sleep", &[]).unwrap(), None, "a gone process needs no stop");
    }

    #[test]
    fn a_process_s_state_is_read_from_proc() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || state(child.id()) == Some('S')),
            "{:?}",
            state(child.id())
        );
        child.kill().unwrap();
        assert!(!in_uninterruptible_wait(child.id()), "asleep, not in I/O");
        assert!(wait_until(Duration::from_secs(5), || state(child.id()) == Some('Z')), "killed, not reaped");
        child.wait().unwrap();
        assert_eq!(state(child.id()), None, "reaped: gone");
    }

    #[test]
    fn a_process_that_ignores_a_signal_is_stopped_by_the_next_step_and_survival_is_an_error() {
        // A shell that ignores SIGTERM and SIGINT.
        let mut child = Command::new("sh").args(["-c", "trap '' TERM INT; sleep 30 & wait"]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let who = Identity::of(child.id()).unwrap();
        let err =
            stop(who, "stubborn", &[Step::new(Signal::SIGTERM, Duration::from_millis(300))]).unwrap_err();
        assert!(err.to_string().contains("still runs after SIGTERM 0.3s"), "{err}");
        let kids = children(who.pid);
        assert!(!kids.is_empty());
        let got = stop(
            who,
            "stubborn",
            &[
                Step::new(Signal::SIGINT, Duration::from_millis(300)),
                Step::new(Signal::SIGKILL, Duration::from_secs(5)).with_children(),
            ],
        )
        .unwrap();
        assert_eq!(got, Some(Signal::SIGKILL));
        child.wait().unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || kids.iter().all(|k| !alive(*k))),
            "children killed too"
        );
    }

    #[test]
    fn this_process_maps_its_own_executable() {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap();
        assert!(mapped_files(std::process::id(), dir).contains(&exe));
        assert!(mapped_files(std::process::id(), Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn find_sees_this_process_and_its_arguments() {
        let me = std::process::id();
        assert_eq!(find(|p| p.pid == me), [me]);
        assert!(find(|p| p.pid == me && !p.cmdline.is_empty()).contains(&me));
    }
}
