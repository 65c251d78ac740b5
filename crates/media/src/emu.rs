//! Modelled media: the supervision of a medium's device-model daemon
//! (`storbench media serve`, crate `emu`). The daemon is a separate process
//! in its own session (Ctrl-C in the terminal that made the medium does not
//! reach it), with a config, pid, log and counters file under
//! `STATE/emu/`; it is started before the loop device is attached to the
//! file it serves and stopped after the loop device is detached. A daemon
//! that died leaves an aborted FUSE connection, which [`stop`] unmounts, so
//! destroy works after any crash. Power cut and recovery live here too.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use storbench_emu::daemon::DaemonConfig;
use storbench_emu::Spec;

use crate::{floor, registry, state_dir, sys, MediaError, Medium};

/// A running (or once-running) daemon of a modelled medium.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Daemon {
    /// Its process id.
    pub pid: u32,
    /// The config it was started with (JSON).
    pub config: PathBuf,
    /// Its log (stderr).
    pub log: PathBuf,
    /// Its per-second counters (JSON lines, `storbench_emu::counters`).
    pub counters: PathBuf,
    /// The FUSE mount point.
    pub mountpoint: PathBuf,
    /// The served file the loop device is attached to.
    pub served: PathBuf,
    /// The I/O trace it writes, if any.
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Set by `media powercut`, cleared by `media recover`.
    #[serde(default)]
    pub cut: bool,
    /// The emulator's floor on this machine, measured when the daemon was
    /// started and absorbed by it ([`crate::floor`]); none if not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<floor::Floor>,
    /// The write journal it records (`media create --record`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<PathBuf>,
}

/// Checks that FUSE is usable here (root and /dev/fuse).
pub fn check_support() -> Result<(), MediaError> {
    if !sys::is_root() {
        return Err(MediaError::Usage(
            "a modelled medium (--model) needs root (FUSE mount and loop device)".into(),
        ));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(MediaError::Usage(
            "this machine has no FUSE (/dev/fuse is missing), so --model media cannot be made; use --emulate"
                .into(),
        ));
    }
    Ok(())
}

fn dir() -> PathBuf {
    state_dir().join("emu")
}

/// Removes a write journal and the runs kept beside it (`NAME.run-*.json`).
pub fn forget_journal(journal: &Path) {
    let _ = std::fs::remove_file(journal);
    let (Some(dir), Some(stem)) = (journal.parent(), journal.file_stem()) else { return };
    let prefix = format!("{}.run-", stem.to_string_lossy());
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Where medium `name`'s write journal is recorded (`media create --record`).
pub fn journal_path(name: &str) -> PathBuf {
    dir().join(format!("{name}.journal"))
}

/// The storbench executable that runs `media serve`: `STORBENCH_EXE`, else
/// the running one.
fn exe() -> Result<PathBuf, MediaError> {
    if let Some(p) = std::env::var_os("STORBENCH_EXE").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe().map_err(|e| MediaError::Failed(format!("finding the storbench executable: {e}")))
}

/// Starts a medium's daemon and waits until its file is served, having
/// measured the emulator's floor first (a probe daemon beside the image,
/// [`crate::floor`]), which the daemon absorbs.
pub(crate) fn start(
    name: &str,
    image: &Path,
    size: u64,
    spec: &Spec,
    trace: Option<&Path>,
    journal: Option<&Path>,
) -> Result<Daemon, MediaError> {
    let probe_dir = image.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let floor = measure(name, probe_dir)?;
    start_daemon(name, image, size, spec, trace, floor, journal)
}

/// Starts a daemon that absorbs `floor` (none: nothing absorbed).
pub(crate) fn start_daemon(
    name: &str,
    image: &Path,
    size: u64,
    spec: &Spec,
    trace: Option<&Path>,
    floor: Option<floor::Floor>,
    journal: Option<&Path>,
) -> Result<Daemon, MediaError> {
    let d = dir();
    std::fs::create_dir_all(&d).map_err(|e| MediaError::Failed(format!("creating {}: {e}", d.display())))?;
    let mountpoint = d.join(format!("{name}.mnt"));
    if sys::is_mounted(&mountpoint) {
        // Left by a daemon that died with storbench: nothing serves it.
        let _ = abort_and_unmount(&mountpoint);
    }
    let trace = trace.map(|t| std::path::absolute(t).unwrap_or_else(|_| t.to_path_buf()));
    if let Some(t) = &trace {
        // The trace shows where the medium's data is written: its owner's
        // only (0600); the daemon truncates it and keeps the mode.
        use std::os::unix::fs::PermissionsExt;
        let made = storbench_proc::private_file(t)
            .map(|_| ())
            .or_else(|_| std::fs::set_permissions(t, std::fs::Permissions::from_mode(0o600)));
        made.map_err(|e| MediaError::Failed(format!("creating the trace {}: {e}", t.display())))?;
    }
    let cfg = DaemonConfig {
        name: name.to_string(),
        image: std::path::absolute(image).unwrap_or_else(|_| image.to_path_buf()),
        mountpoint: mountpoint.clone(),
        size,
        spec: spec.clone(),
        counters: d.join(format!("{name}.counters")),
        pid_file: d.join(format!("{name}.pid")),
        trace: trace.clone(),
        floor_ns: floor.as_ref().map(|f| f.absorbed().as_nanos() as u64).unwrap_or(0),
        floor_64k_ns: floor.as_ref().map(|f| f.absorbed_64k().as_nanos() as u64).unwrap_or(0),
        lead: floor.as_ref().map(floor::Floor::lead).unwrap_or_default(),
        journal: journal.map(Path::to_path_buf),
    };
    let config = d.join(format!("{name}.json"));
    let log = d.join(format!("{name}.log"));
    let _ = std::fs::remove_file(&cfg.pid_file);
    std::fs::write(&config, serde_json::to_string_pretty(&cfg).expect("config serialises"))
        .map_err(|e| MediaError::Failed(format!("writing {}: {e}", config.display())))?;
    let logf = std::fs::File::create(&log)
        .map_err(|e| MediaError::Failed(format!("creating {}: {e}", log.display())))?;
    let mut cmd = Command::new(exe()?);
    cmd.args(["media", "serve", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf);
    // SAFETY: setsid is async-signal-safe; the child leaves the terminal's
    // process group so Ctrl-C there does not take the medium down.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| MediaError::Failed(format!("starting the model daemon: {e}")))?;
    let daemon = Daemon {
        pid: child.id(),
        config,
        log: log.clone(),
        counters: cfg.counters.clone(),
        mountpoint,
        served: cfg.served(),
        trace,
        cut: false,
        floor,
        journal: cfg.journal.clone(),
    };
    let t0 = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim();
            let last = last.trim_start_matches("storbench: error: ").to_string();
            let _ = stop(&daemon);
            let msg = format!("the model daemon for '{name}' exited ({status}): {last}");
            // A refusal about FUSE itself is the machine's, not a failure of the run.
            return Err(if last.contains("fuse") || last.contains("FUSE") {
                MediaError::Usage(msg)
            } else {
                MediaError::Failed(msg)
            });
        }
        if cfg.pid_file.exists() && daemon.served.exists() {
            return Ok(daemon);
        }
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = stop(&daemon);
            return Err(MediaError::Failed(format!(
                "the model daemon for '{name}' did not serve {} within 15 s (log: {})",
                daemon.served.display(),
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the daemon's process is alive (and is the daemon, not a reused pid).
pub fn alive(d: &Daemon) -> bool {
    if !storbench_proc::alive(d.pid) {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", d.pid)).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).contains(&*d.config.to_string_lossy())
}

/// For the modelled media behind `paths` (files or directories on their
/// filesystems, their loop devices, their served or backing files), one
/// line per medium whose daemon has died: `model daemon for medium 'X'
/// died (log: PATH)`, with the log's last line when it has one. For a run
/// whose step failed: the cause, when it is this, in words a user can act
/// on. Empty when every such daemon runs (or the registry cannot be read).
pub fn dead_daemons(paths: &[PathBuf]) -> Vec<String> {
    match registry::load() {
        Ok(all) => dead_daemons_in(&all, paths),
        Err(_) => Vec::new(),
    }
}

/// [`dead_daemons`] over a given list of media (as `media list --json`
/// gives them), without reading the registry.
pub fn dead_daemons_in(media: &[Medium], paths: &[PathBuf]) -> Vec<String> {
    // A path on a medium whose daemon died may not resolve (its filesystem
    // fails I/O): compare it as given (made absolute) and resolved.
    let forms: Vec<(PathBuf, Option<PathBuf>)> = paths
        .iter()
        .map(|p| (std::path::absolute(p).unwrap_or_else(|_| p.clone()), std::fs::canonicalize(p).ok()))
        .collect();
    let mut out = Vec::new();
    for m in media {
        let Some(d) = &m.daemon else { continue };
        let mut places: Vec<PathBuf> =
            vec![PathBuf::from(&m.device), d.mountpoint.clone(), m.backing_file.clone()];
        places.extend(m.mount_point.clone());
        let resolved: Vec<PathBuf> = places.iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect();
        places.extend(resolved);
        let behind = forms.iter().any(|(abs, canon)| {
            places
                .iter()
                .any(|place| abs.starts_with(place) || canon.as_ref().is_some_and(|c| c.starts_with(place)))
        });
        if !behind || alive(d) {
            continue;
        }
        let text = std::fs::read_to_string(&d.log).unwrap_or_default();
        // Its last words, not what it said while serving (notes, the
        // transport it serves through).
        let last = text.lines().rev().map(str::trim).find(|l| {
            !l.is_empty() && !l.starts_with("storbench: note:") && !l.starts_with("storbench: info:")
        });
        out.push(match last {
            Some(l) => format!(
                "model daemon for medium '{}' died: {} (log: {})",
                m.name,
                l.trim_start_matches("storbench: error: "),
                d.log.display()
            ),
            None => format!("model daemon for medium '{}' died (log: {})", m.name, d.log.display()),
        });
    }
    out
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: sending a signal to a process id we started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// The FUSE connection behind a mount point (its device minor number,
/// which names /sys/fs/fuse/connections/N).
fn fuse_connection(mountpoint: &Path) -> Option<String> {
    let m = storbench_proc::mounts().into_iter().find(|m| m.point == mountpoint)?;
    Some(m.dev.split(':').nth(1).unwrap_or("").to_string())
}

/// Aborts the FUSE connection (so nothing can wait on it) and unmounts.
fn abort_and_unmount(mountpoint: &Path) -> Result<(), MediaError> {
    if let Some(n) = fuse_connection(mountpoint) {
        let _ = std::fs::write(format!("/sys/fs/fuse/connections/{n}/abort"), "1");
    }
    sys::run(
        Command::new("umount").arg("-l").arg(mountpoint),
        &format!("unmounting {}", mountpoint.display()),
    )
    .map(|_| ())
}

/// Stops a daemon (SIGTERM, then SIGKILL), unmounts its filesystem even if
/// it died, and removes its files (the trace stays: it is the user's).
pub(crate) fn stop(d: &Daemon) -> Result<(), MediaError> {
    if let Some(who) = storbench_proc::Identity::of(d.pid).filter(|_| alive(d)) {
        use storbench_proc::{Sig, Step};
        let steps = [
            Step::new(Sig::SIGTERM, Duration::from_secs(5)),
            Step::new(Sig::SIGKILL, Duration::from_secs(5)),
        ];
        // Survival is checked below, after the unmount.
        let _ = storbench_proc::stop(who, "model daemon", &steps);
    }
    if sys::is_mounted(&d.mountpoint) {
        abort_and_unmount(&d.mountpoint)?;
    }
    let _ = std::fs::remove_dir(&d.mountpoint);
    let pid_file = d.config.with_extension("pid");
    for f in [&d.config, &d.log, &d.counters, &pid_file] {
        let _ = std::fs::remove_file(f);
    }
    if alive(d) {
        return Err(MediaError::Failed(format!("the model daemon (pid {}) did not stop", d.pid)));
    }
    Ok(())
}

/// Cuts a modelled medium's power: its volatile cache is lost and every
/// later I/O fails, until [`recover`].
pub fn powercut(name: &str) -> Result<(), MediaError> {
    let _lock = registry::lock()?;
    let mut all = registry::load()?;
    let m = find_modelled(&mut all, name)?;
    let d = m.daemon.as_mut().expect("modelled");
    if !alive(d) {
        return Err(MediaError::Failed(format!(
            "medium '{name}': its model daemon is not running (storbench media recover {name} restarts it)"
        )));
    }
    signal(d.pid, libc::SIGUSR1);
    d.cut = true;
    registry::save(&all)
}

/// Empties a modelled medium's cache tier (`media cache reset`): the next
/// run starts cold. Its dirty lines are written back first.
pub fn cache_reset(name: &str) -> Result<(), MediaError> {
    let _lock = registry::lock()?;
    let mut all = registry::load()?;
    let m = find_modelled(&mut all, name)?;
    if m.model.as_ref().is_none_or(|s| s.cache.is_none()) {
        return Err(MediaError::Usage(format!(
            "medium '{name}' has no cache tier (media create … --model M --cache SIZE makes one)"
        )));
    }
    let d = m.daemon.as_ref().expect("modelled");
    if !alive(d) {
        return Err(MediaError::Failed(format!(
            "medium '{name}': its model daemon is not running (storbench media recover {name} restarts it, with an empty cache)"
        )));
    }
    signal(d.pid, libc::SIGUSR2);
    Ok(())
}

fn find_modelled<'a>(all: &'a mut [Medium], name: &str) -> Result<&'a mut Medium, MediaError> {
    let m = all
        .iter_mut()
        .find(|m| m.name == name)
        .ok_or_else(|| MediaError::Usage(format!("no medium named '{name}' (storbench media list)")))?;
    if m.daemon.is_none() {
        return Err(MediaError::Usage(format!(
            "medium '{name}' has no device model (power cut and recover need a medium made with --model)"
        )));
    }
    Ok(m)
}

/// Brings a modelled medium back after a power cut (or a crashed daemon):
/// unmounts and detaches what is left, restarts the daemon on the image,
/// which holds exactly what was durable, reattaches and remounts (the
/// filesystem replays its journal). Returns the medium as it is now.
pub fn recover(name: &str) -> Result<Medium, MediaError> {
    let _lock = registry::lock()?;
    let mut all = registry::load()?;
    let m = find_modelled(&mut all, name)?;
    if let Some(mp) = &m.mount_point {
        if sys::is_mounted(mp) {
            // The device is dead since the cut: nothing can use it again.
            sys::umount_lazily(mp)?;
        }
    }
    let d = m.daemon.clone().expect("modelled");
    let dev = m.device.trim_start_matches("/dev/").to_string();
    let attached = std::fs::read_to_string(format!("/sys/block/{dev}/loop/backing_file"))
        .is_ok_and(|b| b.trim() == d.served.to_string_lossy());
    if attached {
        sys::detach(&m.device)?;
    }
    stop(&d)?;
    let spec = m.model.clone().expect("modelled");
    // The journal ends at a power cut: what the cut lost is in it, not on
    // the image, so it no longer rebuilds the image (a new daemon records none).
    if let Some(j) = &d.journal {
        forget_journal(j);
    }
    let nd = start(name, &m.backing_file, m.size, &spec, d.trace.as_deref(), None)?;
    let device = match sys::losetup(&nd.served) {
        Ok(dev) => dev,
        Err(e) => {
            let _ = stop(&nd);
            return Err(e);
        }
    };
    m.device = device;
    m.daemon = Some(nd);
    if let Some(mp) = &m.mount_point {
        std::fs::create_dir_all(mp)
            .map_err(|e| MediaError::Failed(format!("creating {}: {e}", mp.display())))?;
        let mounted = sys::mount(&m.fs, m.block_size, &m.device, mp);
        let out = m.clone();
        registry::save(&all)?;
        mounted.map_err(|e| {
            MediaError::Failed(format!(
                "medium '{name}' is back, but its filesystem did not survive the power cut: {e}"
            ))
        })?;
        return Ok(out);
    }
    let out = m.clone();
    registry::save(&all)?;
    Ok(out)
}

/// Removes an array's status and command files (at destroy: a recovered
/// daemon keeps them, so its array stays as degraded as it was).
pub fn forget_array(d: &Daemon) {
    let (status, ctl) = storbench_emu::daemon::array_files(&d.config.with_extension("pid"));
    let _ = std::fs::remove_file(status);
    let _ = std::fs::remove_file(ctl);
    let _ = std::fs::remove_file(storbench_emu::daemon::scale_file(&d.config.with_extension("pid")));
    let _ = std::fs::remove_file(owner_file(d));
}

/// A medium that is an array, with its daemon alive: its spec and daemon.
fn array_medium(name: &str) -> Result<(storbench_emu::ArraySpec, Daemon), MediaError> {
    let mut all = registry::load()?;
    let m = all
        .iter_mut()
        .find(|m| m.name == name)
        .ok_or_else(|| MediaError::Usage(format!("no medium named '{name}' (storbench media list)")))?;
    let Some(a) = m.model.as_ref().and_then(|s| s.array.clone()) else {
        return Err(MediaError::Usage(format!(
            "medium '{name}' is not an array (media create … --array raid5 --disks N makes one)"
        )));
    };
    let d = m.daemon.clone().expect("an array is modelled");
    if !alive(&d) {
        return Err(MediaError::Failed(format!(
            "medium '{name}': its model daemon is not running (storbench media recover {name} restarts it)"
        )));
    }
    Ok((a, d))
}

/// An array's state as its daemon last wrote it (healthy when it has not
/// written one yet); `None` for a medium that is not an array.
pub fn array_status(m: &Medium) -> Option<storbench_emu::ArrayStatus> {
    let a = m.model.as_ref()?.array.as_ref()?;
    let d = m.daemon.as_ref()?;
    let (status, _) = storbench_emu::daemon::array_files(&d.config.with_extension("pid"));
    let read = std::fs::read_to_string(status).ok().and_then(|t| serde_json::from_str(&t).ok());
    Some(read.unwrap_or_else(|| storbench_emu::ArrayStatus {
        state: "healthy".into(),
        label: a.label(),
        ..Default::default()
    }))
}

/// What `media fail`/`rebuild` send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayVerb {
    /// Fail a disk.
    Fail(usize),
    /// Rebuild at bytes per second.
    Rebuild(u64),
    /// Pause the rebuild.
    Pause,
}

/// Sends a command to an array's daemon and waits (up to 5 s) until it
/// says it applied it; returns the state then. A command the array refuses
/// (a second disk of a raid5, a disk that does not exist, a raid0) is bad
/// input: checked here first, against the state the daemon wrote.
pub fn array_command(name: &str, verb: ArrayVerb) -> Result<storbench_emu::ArrayStatus, MediaError> {
    use storbench_emu::ArrayCommand;
    let _lock = registry::lock()?;
    let (spec, d) = array_medium(name)?;
    let all = registry::load()?;
    let m = all.iter().find(|m| m.name == name).expect("found above");
    let now = array_status(m).expect("an array");
    match verb {
        ArrayVerb::Fail(disk) => {
            spec.check_fail(&now, disk).map_err(|e| MediaError::Usage(format!("media fail {name}: {e}")))?
        }
        ArrayVerb::Rebuild(_) if now.failed.is_empty() => {
            return Err(MediaError::Usage(format!(
                "media rebuild {name}: the array is healthy; nothing to rebuild (media fail {name} --disk N fails one)"
            )))
        }
        _ => {}
    }
    let seq = now.applied + 1;
    let cmd = match verb {
        ArrayVerb::Fail(disk) => ArrayCommand::Fail { disk, seq },
        ArrayVerb::Rebuild(rate) => ArrayCommand::Rebuild { rate, seq },
        ArrayVerb::Pause => ArrayCommand::Pause { seq },
    };
    let (status, _) = storbench_emu::daemon::array_files(&d.config.with_extension("pid"));
    send(&d, &storbench_emu::daemon::Command::Array(cmd))?;
    let t0 = Instant::now();
    loop {
        let st: Option<storbench_emu::ArrayStatus> =
            std::fs::read_to_string(&status).ok().and_then(|t| serde_json::from_str(&t).ok());
        if let Some(st) = st.filter(|s| s.applied >= seq) {
            if !st.error.is_empty() {
                return Err(MediaError::Usage(format!("{name}: {}", st.error)));
            }
            return Ok(st);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(MediaError::Failed(format!(
                "the model daemon for '{name}' did not take the command within 5 s (log: {})",
                d.log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes a command whole to the daemon's control file and signals it.
fn send(d: &Daemon, cmd: &storbench_emu::daemon::Command) -> Result<(), MediaError> {
    let (_, ctl) = storbench_emu::daemon::array_files(&d.config.with_extension("pid"));
    let tmp = ctl.with_extension("ctl.tmp");
    std::fs::write(&tmp, serde_json::to_string(cmd).expect("serialises"))
        .and_then(|_| std::fs::rename(&tmp, &ctl))
        .map_err(|e| MediaError::Failed(format!("writing {}: {e}", ctl.display())))?;
    signal(d.pid, storbench_emu::daemon::control_signal());
    Ok(())
}

/// The time scale a modelled medium's daemon last said is in effect (1
/// when it has written none: a daemon older than the scale); `None` for a
/// medium without a model.
pub fn scale_status(m: &Medium) -> Option<storbench_emu::daemon::ScaleStatus> {
    let d = m.daemon.as_ref()?;
    let path = storbench_emu::daemon::scale_file(&d.config.with_extension("pid"));
    let read = std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok());
    Some(read.unwrap_or(storbench_emu::daemon::ScaleStatus { scale: 1.0, ..Default::default() }))
}

/// Sets a modelled medium's time scale (`media scale`, storage
/// sensitivity): its device service times are multiplied by `factor` from
/// now on (0.5: twice as fast, 2: half as fast, 1: as modelled). Waits (up
/// to 5 s) until the daemon says it took it. A factor out of range or a
/// medium without a model is bad input.
pub fn set_scale(name: &str, factor: f64) -> Result<f64, MediaError> {
    storbench_emu::sched::check_scale(factor)
        .map_err(|e| MediaError::Usage(format!("scale {factor}: {e}")))?;
    let _lock = registry::lock()?;
    let mut all = registry::load()?;
    let m = find_modelled(&mut all, name)?;
    let d = m.daemon.clone().expect("modelled");
    if !alive(&d) {
        return Err(MediaError::Failed(format!(
            "medium '{name}': its model daemon is not running (storbench media recover {name} restarts it)"
        )));
    }
    let seq = scale_status(m).expect("modelled").applied + 1;
    send(&d, &storbench_emu::daemon::Command::Scale { factor, seq })?;
    let path = storbench_emu::daemon::scale_file(&d.config.with_extension("pid"));
    let t0 = Instant::now();
    loop {
        let st: Option<storbench_emu::daemon::ScaleStatus> =
            std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok());
        if let Some(st) = st.filter(|s| s.applied >= seq) {
            if !st.error.is_empty() {
                return Err(MediaError::Usage(format!("{name}: {}", st.error)));
            }
            return Ok(st.scale);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(MediaError::Failed(format!(
                "the model daemon for '{name}' did not take the time scale within 5 s (a daemon started before storbench had time scales ignores it: storbench media recover {name}; log: {})",
                d.log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A time scale that is undone: while it lives, the medium runs at the
/// scale given; dropped (a step's end, an error, Ctrl-C's unwinding), the
/// medium is back at 1. While it lives, the medium's `NAME.scale-owner`
/// file (beside its daemon's files) names this process; a storbench
/// killed outright leaves the scale and that file, and the next storbench
/// that looks at the medium (a run on it, `media list`) finds the owner
/// gone and puts the scale back to 1 ([`reset_orphaned_scale`]).
pub struct ScaleGuard {
    name: String,
    owner: Option<PathBuf>,
}

impl ScaleGuard {
    /// Sets `name`'s scale to `factor` until the guard is dropped.
    pub fn set(name: &str, factor: f64) -> Result<ScaleGuard, MediaError> {
        let owner = registry::load()
            .ok()
            .and_then(|all| all.into_iter().find(|m| m.name == name))
            .and_then(|m| m.daemon)
            .map(|d| owner_file(&d));
        if let (Some(path), Some(me)) = (&owner, storbench_proc::Identity::of(std::process::id())) {
            std::fs::write(path, format!("{} {}", me.pid, me.start))
                .map_err(|e| MediaError::Failed(format!("writing {}: {e}", path.display())))?;
        }
        let g = ScaleGuard { name: name.to_string(), owner };
        set_scale(name, factor)?;
        Ok(g)
    }

    /// Puts the scale back to 1 now, saying whether that worked (dropping
    /// the guard does the same and only logs a failure).
    pub fn restore(mut self) -> Result<(), MediaError> {
        let name = std::mem::take(&mut self.name);
        set_scale(&name, 1.0)?;
        if let Some(p) = self.owner.take() {
            let _ = std::fs::remove_file(p);
        }
        Ok(())
    }
}

impl Drop for ScaleGuard {
    fn drop(&mut self) {
        if self.name.is_empty() {
            return;
        }
        match set_scale(&self.name, 1.0) {
            Ok(_) => {
                if let Some(p) = self.owner.take() {
                    let _ = std::fs::remove_file(p);
                }
            }
            Err(e) => {
                eprintln!(
                    "storbench: warning: medium '{}' may still run at another time scale: {e}",
                    self.name
                )
            }
        }
    }
}

/// The file naming the process whose [`ScaleGuard`] holds a medium's
/// time scale, beside the daemon's config.
fn owner_file(d: &Daemon) -> PathBuf {
    d.config.with_extension("scale-owner")
}

/// Puts `m`'s time scale back to 1 when the storbench whose
/// [`ScaleGuard`] set it is gone (killed outright, so nothing undid it),
/// returning the scale it found; `None` when no guard's owner is recorded
/// or the owner still runs. A scale set by `media scale` has no owner and
/// stays: that one is the user's.
pub fn reset_orphaned_scale(m: &Medium) -> Option<f64> {
    let d = m.daemon.as_ref()?;
    let path = owner_file(d);
    // `PID STARTTIME`: the owner as storbench_proc::Identity names it, so a
    // pid used again by another process is not taken for it.
    let tag = std::fs::read_to_string(&path).ok()?;
    let mut f = tag.split_whitespace().map(str::parse::<u64>);
    let (pid, start) = (f.next()?.ok()?, f.next()?.ok()?);
    if (storbench_proc::Identity { pid: pid as u32, start }).alive() {
        return None;
    }
    let was = scale_status(m).map(|s| s.scale).unwrap_or(1.0);
    if was != 1.0 && alive(d) {
        set_scale(&m.name, 1.0).ok()?;
    }
    let _ = std::fs::remove_file(&path);
    Some(was)
}

/// The array's state now, for `media rebuild`'s progress (re-read from
/// the registry so it names the current daemon).
pub fn array_state(name: &str) -> Result<storbench_emu::ArrayStatus, MediaError> {
    let all = registry::load()?;
    let m = all
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| MediaError::Usage(format!("no medium named '{name}' (storbench media list)")))?;
    array_status(m).ok_or_else(|| MediaError::Usage(format!("medium '{name}' is not an array")))
}

/// Serves the probe image from a throwaway daemon with `spec` under a
/// loop device of its own and runs `f` on the device; everything is
/// undone after, whatever `f` returns.
fn with_probe<T>(
    probe: &str,
    image: &Path,
    spec: &Spec,
    f: impl FnOnce(&str) -> Result<T, MediaError>,
) -> Result<T, MediaError> {
    let mut undo = sys::Undo::default();
    let res = (|| {
        let d = start_daemon(probe, image, floor::PROBE_SIZE, spec, None, None, None)?;
        let probe_d = d.clone();
        undo.call(move || {
            let _ = stop(&probe_d);
            // Its status files too (the time scale's): a probe leaves nothing.
            forget_array(&probe_d);
        });
        let dev = sys::losetup(&d.served)?;
        undo.detach(&dev);
        f(&dev)
    })();
    undo.run();
    res
}

/// Measures the floor for medium `name` with a probe image in `dir`
/// (removed after), or takes it from `STORBENCH_EMU_FLOOR`. `None`: off.
/// The probes are daemons of this module; the timing is [`crate::floor`]'s.
pub(crate) fn measure(name: &str, dir: &Path) -> Result<Option<floor::Floor>, MediaError> {
    match std::env::var("STORBENCH_EMU_FLOOR").ok().as_deref().map(str::trim) {
        Some("off") => return Ok(None),
        Some(v) if !v.is_empty() => {
            let us: f64 = v.parse().ok().filter(|u: &f64| u.is_finite() && *u >= 0.0).ok_or_else(|| {
                MediaError::Usage(format!("STORBENCH_EMU_FLOOR={v}: give off or a time in µs (e.g. 20)"))
            })?;
            return Ok(Some(floor::Floor {
                qd1_p50_us: us,
                qd1_mean_us: us,
                qd16_iops: 0.0,
                how: "set by STORBENCH_EMU_FLOOR".into(),
                timed_extra_us: 0.0,
                write_mb_s: 0.0,
                timed_lead_us: 0.0,
                timed_lead_far_us: None,
                qd1_p50_64k_us: None,
            }));
        }
        _ => {}
    }
    let probe = format!("{name}.floor");
    let image = dir.join(format!("{probe}.img"));
    let _ = std::fs::remove_file(&image);
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(floor::PROBE_SIZE))
        .map_err(|e| MediaError::Failed(format!("creating {}: {e}", image.display())))?;
    let mut undo = sys::Undo::default();
    undo.remove_file(&image);
    let res = (|| {
        let zero = Spec { base: "constant".into(), ..Spec::default() };
        // One zero-time daemon for its three figures: 4 KiB reads, 64 KiB
        // reads, then (last, so the reads meet no dirty data) 256 KiB writes.
        let (zero_qd1, iops, zero_64k, wmbs) = with_probe(&probe, &image, &zero, |dev| {
            let (qd1, iops) = floor::time_reads(dev)?;
            let qd1_64k = floor::time_qd1_of(dev, 1300, 64 << 10, 300)?;
            Ok((qd1, iops, qd1_64k, floor::write_mb_s(dev)?))
        })?;
        let timed = |us: f64| {
            let mut s = Spec { base: "constant".into(), ..Spec::default() };
            s.set.insert("read".into(), format!("{us}us"));
            s
        };
        let near =
            with_probe(&probe, &image, &timed(floor::TIMED_PROBE_US), |dev| floor::time_qd1(dev, 800))?;
        // 300 counted after 100 of warm-up: 0.4 s.
        let far = with_probe(&probe, &image, &timed(floor::TIMED_FAR_US), |dev| {
            floor::time_qd1_of(dev, 400, 4096, 100)
        })?;
        Ok::<_, MediaError>((zero_qd1, zero_64k, iops, near, far, wmbs))
    })();
    undo.run();
    let (zero, zero_64k, iops, timed, far, write_mb_s) = res?;
    let beyond = |timed: f64, zero: f64| (timed - floor::TIMED_PROBE_US - zero).max(0.0);
    let far_lead = (far.p25 - floor::TIMED_FAR_US - zero.p25).max(0.0);
    Ok(Some(floor::Floor {
        qd1_p50_us: zero.p50,
        qd1_mean_us: zero.mean,
        qd16_iops: iops,
        how: "measured".into(),
        timed_extra_us: beyond(timed.p50, zero.p50),
        write_mb_s,
        timed_lead_us: beyond(timed.p25, zero.p25),
        timed_lead_far_us: Some(far_lead),
        qd1_p50_64k_us: Some(zero_64k.p50.max(zero.p50)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn medium(name: &str, dir: &Path, pid: u32, config: PathBuf) -> Medium {
        Medium {
            name: name.into(),
            size: 1 << 30,
            fs: "ext4".into(),
            block_size: 4096,
            emulate: None,
            caps: None,
            model: Some(Spec { base: "hdd".into(), ..Spec::default() }),
            daemon: Some(Daemon {
                pid,
                config,
                log: dir.join(format!("{name}.log")),
                counters: dir.join(format!("{name}.counters")),
                mountpoint: dir.join(format!("{name}.mnt")),
                served: dir.join(format!("{name}.mnt/image")),
                trace: None,
                cut: false,
                floor: None,
                journal: None,
            }),
            backing_file: dir.join(format!("{name}.img")),
            device: format!("/dev/loop-test-{name}"),
            mount_point: Some(dir.join("mnt").join(name)),
            created_at: String::new(),
        }
    }

    #[test]
    fn a_dead_daemon_behind_a_path_is_named_with_its_log() {
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let dir = std::env::temp_dir().join(format!("sb-dead-daemons-{}", std::process::id()));
        let _gone = Gone(dir.clone());
        std::fs::create_dir_all(dir.join("mnt/dead/pgdata")).unwrap();
        // A daemon that ran and exited (reaped: its pid names no process,
        // or another one whose command line lacks the config).
        let mut child = Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let dead = medium("dead", &dir, gone, dir.join("dead.json"));
        std::fs::write(dir.join("dead.log"), "starting\nstorbench: error: serving x: broken\n\n").unwrap();
        // A live one: this test process, whose command line holds its own path.
        let live = medium("live", &dir, std::process::id(), std::env::current_exe().unwrap());
        let media = [dead, live];
        let on_dead = vec![dir.join("mnt/dead/pgdata")];
        let msgs = dead_daemons_in(&media, &on_dead);
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert_eq!(
            msgs[0],
            format!(
                "model daemon for medium 'dead' died: serving x: broken (log: {})",
                dir.join("dead.log").display()
            )
        );
        // Its device, a path not yet made on it, twice: still one line.
        let more =
            vec![PathBuf::from("/dev/loop-test-dead"), dir.join("mnt/dead/not/yet"), dir.join("mnt/dead")];
        assert_eq!(dead_daemons_in(&media, &more).len(), 1);
        // A path on the live medium, or on no medium: nothing to say.
        assert!(dead_daemons_in(&media, &[dir.join("mnt/live/x")]).is_empty());
        assert!(dead_daemons_in(&media, &[PathBuf::from("/tmp/elsewhere")]).is_empty());
        // No log at all: the path of the log still.
        std::fs::remove_file(dir.join("dead.log")).unwrap();
        let msgs = dead_daemons_in(&media, &on_dead);
        assert_eq!(
            msgs,
            vec![format!("model daemon for medium 'dead' died (log: {})", dir.join("dead.log").display())]
        );
    }
}
