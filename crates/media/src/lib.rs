//! Storage targets on one machine: a sparse backing file, a loop device with
//! direct I/O, a filesystem with a chosen block size (allocation unit),
//! mounted under the storbench state directory, optionally capped to an
//! emulated media class by the blkio throttle; and their registry. Managed
//! servers placed on them are `storbench-instances`'. A modelled medium
//! (`--model`) puts a supervised device-model daemon ([`emu`]) between the
//! loop device and the backing file. Every step of a creation is undone if
//! a later one fails. Nothing here prints.

#![deny(missing_docs)]

pub mod class;
pub mod emu;
pub mod floor;
mod registry;
mod sys;
pub use storbench_proc::MemoryGroup;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use class::Caps;
pub use registry::state_dir;
pub use storbench_proc::{chown, reachable};
pub use sys::{has_throttle, is_root};

/// A medium storbench made.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Medium {
    /// Its name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Filesystem (`ext4`, `xfs`, `btrfs`) or `none`.
    pub fs: String,
    /// Filesystem block size in bytes (0 for none).
    pub block_size: u64,
    /// Emulated class, as given (`hdd`, `custom:...`), if any.
    pub emulate: Option<String>,
    /// The caps applied.
    pub caps: Option<Caps>,
    /// The device model, if the medium is modelled (`--model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<storbench_emu::Spec>,
    /// The model's daemon: its files and the served file the loop device is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<emu::Daemon>,
    /// The sparse backing file.
    pub backing_file: PathBuf,
    /// The loop device.
    pub device: String,
    /// Where the filesystem is mounted (none for `--fs none`).
    pub mount_point: Option<PathBuf>,
    /// When it was made.
    pub created_at: String,
}

/// What `list` finds of a medium now.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub enum State {
    /// Loop device attached to its file and (if it has one) mounted.
    Ready,
    /// The loop device is gone or holds another file.
    LoopGone,
    /// The filesystem is not mounted.
    NotMounted,
    /// The model's daemon is not running.
    DaemonGone,
    /// The power is cut (`media powercut`); `media recover` brings it back.
    PowerCut,
}

impl State {
    /// For display.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Ready => "ready",
            State::LoopGone => "loop device gone",
            State::NotMounted => "not mounted",
            State::DaemonGone => "model daemon gone",
            State::PowerCut => "power cut",
        }
    }
}

/// A media error: bad input or a missing facility (exit 2), or a failure.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Bad input or something the machine lacks; names what and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// A step failed (its undo has been done).
    #[error("{0}")]
    Failed(String),
}

impl From<storbench_proc::ProcError> for MediaError {
    fn from(e: storbench_proc::ProcError) -> MediaError {
        match e {
            storbench_proc::ProcError::Refused(m) => MediaError::Usage(m),
            other => MediaError::Failed(other.to_string()),
        }
    }
}

/// What to create.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// Size in bytes.
    pub size: u64,
    /// ext4, xfs, btrfs or none.
    pub fs: String,
    /// Filesystem block size (None: the filesystem's default, 4 KiB).
    pub block_size: Option<u64>,
    /// Emulated class.
    pub emulate: Option<String>,
    /// Device model (exclusive with `emulate`).
    pub model: Option<storbench_emu::Spec>,
    /// Write an I/O trace of the modelled medium here.
    pub trace: Option<PathBuf>,
    /// Directory for the backing file (default: the state directory).
    pub backing: Option<PathBuf>,
    /// Record the modelled medium's write journal from its creation
    /// (`storbench_emu::journal`), for crash points.
    pub record: bool,
}

fn valid_name(name: &str) -> Result<(), MediaError> {
    if name.is_empty()
        || name.len() > 64
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || name.starts_with('.')
    {
        return Err(MediaError::Usage(format!(
            "medium name '{name}': use 1-64 letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

/// Checks that this machine can make media (root, loop devices, and the
/// blkio throttle when a class needs it).
pub fn check_support(need_throttle: bool) -> Result<(), MediaError> {
    if !sys::is_root() {
        return Err(MediaError::Usage(
            "storbench media needs root (loop devices, mkfs, mount and the blkio throttle)".into(),
        ));
    }
    if !Path::new("/dev/loop-control").exists() {
        return Err(MediaError::Usage(
            "this machine has no loop device support (/dev/loop-control is missing)".into(),
        ));
    }
    if need_throttle && sys::throttle_kind().is_none() {
        return Err(MediaError::Usage(
            "no blkio throttle: neither cgroup v1 blkio.throttle.* nor cgroup v2 io.max is available, so media classes cannot be emulated (use --emulate nvme or none)".into(),
        ));
    }
    Ok(())
}

/// Validates a creation request without touching anything.
pub fn validate(name: &str, o: &CreateOptions) -> Result<Option<Caps>, MediaError> {
    valid_name(name)?;
    if o.size < 16 << 20 {
        return Err(MediaError::Usage(format!("--size {}: must be at least 16M", o.size)));
    }
    if o.emulate.is_some() && o.model.is_some() {
        return Err(MediaError::Usage(
            "--emulate and --model: a medium has one or the other (caps from the blkio throttle, or a per-I/O device model)".into(),
        ));
    }
    if o.trace.is_some() && o.model.is_none() {
        return Err(MediaError::Usage("--trace records what a model's daemon sees: give --model too".into()));
    }
    if o.record && o.model.is_none() {
        return Err(MediaError::Usage(
            "--record journals what a model's daemon sees: give --model or --array too".into(),
        ));
    }
    let caps = match &o.emulate {
        Some(c) => class::caps(c).map_err(MediaError::Usage)?,
        None => None,
    };
    if let Some(spec) = &o.model {
        spec.build(o.size).map_err(|e| MediaError::Usage(e.to_string()))?;
    }
    // mkfs.xfs refuses a file system under 300 MB with a message of its
    // own (xfsprogs 5.19 on); say it first, as the flag's rule.
    if o.fs == "xfs" && o.size < XFS_MIN {
        return Err(MediaError::Usage(format!(
            "--size {}: --fs xfs needs at least 300m (mkfs.xfs refuses smaller); give --size 300m or more, or --fs ext4",
            storbench_metrics::units::format_size(o.size)
        )));
    }
    sys::check_fs(&o.fs, o.block_size).map_err(MediaError::Usage)?;
    check_support(caps.is_some())?;
    if o.model.is_some() {
        emu::check_support()?;
    }
    if registry::load()?.iter().any(|m| m.name == name) {
        return Err(MediaError::Usage(format!(
            "medium '{name}' exists already (storbench media destroy {name} first)"
        )));
    }
    if let Some(b) = &o.backing {
        if !b.is_dir() {
            let what = if b.exists() { "not a directory" } else { "no such directory" };
            return Err(MediaError::Usage(format!(
                "--backing {}: {what} (give an existing directory for the backing file)",
                b.display()
            )));
        }
    }
    let dir = o.backing.clone().unwrap_or_else(|| state_dir().join("backing"));
    let mut probe = dir.clone();
    while !probe.exists() {
        if !probe.pop() {
            break;
        }
    }
    if let Some(free) = sys::free_bytes(&probe) {
        // Sparse, but a full medium must fit.
        if o.size > free {
            return Err(MediaError::Usage(format!(
                "--size {}: larger than the free space on {} ({} bytes); the backing file is sparse but may fill",
                o.size,
                probe.display(),
                free
            )));
        }
    }
    Ok(caps)
}

/// The smallest file system mkfs.xfs makes: 300 MB (xfsprogs 5.19 and
/// later refuse less).
const XFS_MIN: u64 = 300_000_000;

/// Creates a medium; on failure every completed step is undone.
pub fn create(name: &str, o: &CreateOptions) -> Result<Medium, MediaError> {
    let caps = validate(name, o)?;
    let _lock = registry::lock()?;
    let mut undo = sys::Undo::default();
    let res = (|| {
        let dir = o.backing.clone().unwrap_or_else(|| state_dir().join("backing"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| MediaError::Failed(format!("creating {}: {e}", dir.display())))?;
        let backing = dir.join(format!("{name}.img"));
        if backing.exists() {
            return Err(MediaError::Usage(format!("{} exists already", backing.display())));
        }
        // 0600: the image holds whatever is stored on the medium (a
        // database's files, whose own directory is 0700).
        storbench_proc::private_file(&backing)
            .and_then(|f| f.set_len(o.size))
            .map_err(|e| MediaError::Failed(format!("creating {}: {e}", backing.display())))?;
        undo.remove_file(&backing);
        let daemon = match &o.model {
            Some(spec) => {
                let journal = o.record.then(|| emu::journal_path(name));
                let d = emu::start(name, &backing, o.size, spec, o.trace.as_deref(), journal.as_deref())?;
                let stop = d.clone();
                undo.call(move || {
                    let _ = emu::stop(&stop);
                });
                Some(d)
            }
            None => None,
        };
        let device = sys::losetup(daemon.as_ref().map(|d| d.served.as_path()).unwrap_or(&backing))?;
        undo.detach(&device);
        let bs = o.block_size.unwrap_or(if o.fs == "none" { 0 } else { 4096 });
        let mut mount_point = None;
        if o.fs != "none" {
            sys::mkfs(&o.fs, bs, &device)?;
            let mp = state_dir().join("mnt").join(name);
            std::fs::create_dir_all(&mp)
                .map_err(|e| MediaError::Failed(format!("creating {}: {e}", mp.display())))?;
            undo.rmdir(&mp);
            sys::mount(&o.fs, bs, &device, &mp)?;
            undo.umount(&mp);
            mount_point = Some(mp);
        }
        if let Some(c) = &caps {
            sys::throttle(&device, Some(c))?;
            undo.unthrottle(&device);
        }
        let m = Medium {
            name: name.to_string(),
            size: o.size,
            fs: o.fs.clone(),
            block_size: bs,
            emulate: o.emulate.clone(),
            caps,
            model: o.model.clone(),
            daemon,
            backing_file: backing,
            device,
            mount_point,
            created_at: sys::now(),
        };
        let mut all = registry::load()?;
        all.push(m.clone());
        registry::save(&all)?;
        Ok(m)
    })();
    match res {
        Ok(m) => {
            undo.forget();
            Ok(m)
        }
        Err(e) => {
            undo.run();
            Err(e)
        }
    }
}

/// Every registered medium with its state now.
pub fn list() -> Result<Vec<(Medium, State)>, MediaError> {
    Ok(registry::load()?
        .into_iter()
        .map(|m| {
            let s = state(&m);
            (m, s)
        })
        .collect())
}

/// A medium by name.
pub fn get(name: &str) -> Result<Option<Medium>, MediaError> {
    Ok(registry::load()?.into_iter().find(|m| m.name == name))
}

/// The file the loop device is attached to: the daemon's served file for
/// a modelled medium, else the backing file.
fn loop_file(m: &Medium) -> &Path {
    m.daemon.as_ref().map(|d| d.served.as_path()).unwrap_or(&m.backing_file)
}

fn state(m: &Medium) -> State {
    if let Some(d) = &m.daemon {
        if d.cut {
            return State::PowerCut;
        }
        if !emu::alive(d) {
            return State::DaemonGone;
        }
    }
    if !attached(m) {
        return State::LoopGone;
    }
    match &m.mount_point {
        Some(mp) if !sys::is_mounted(mp) => State::NotMounted,
        _ => State::Ready,
    }
}

/// Destroys a medium: unmounts, removes its throttle rules, detaches the
/// loop device, deletes the backing file and forgets it. Pieces already gone
/// are skipped, so a stale entry is cleaned too. A medium a process still
/// uses (a server with its data on it, a shell inside) is refused with
/// nothing touched: stop that first. Each step is checked, and the medium
/// is forgotten only when every one was done.
pub fn destroy(name: &str) -> Result<(), MediaError> {
    let _lock = registry::lock()?;
    let mut all = registry::load()?;
    let Some(i) = all.iter().position(|m| m.name == name) else {
        return Err(MediaError::Usage(format!("no medium named '{name}' (storbench media list)")));
    };
    let m = all[i].clone();
    if let Some(why) = m.mount_point.as_deref().filter(|mp| sys::is_mounted(mp)).and_then(sys::in_use) {
        return Err(MediaError::Usage(format!(
            "medium '{name}' is {why}: stop it first (a managed server: storbench pg down NAME); nothing was destroyed"
        )));
    }
    let mut errors = Vec::new();
    if let Some(mp) = &m.mount_point {
        if sys::is_mounted(mp) {
            if let Err(e) = sys::umount(mp) {
                errors.push(e.to_string());
            }
        }
        if !sys::is_mounted(mp) {
            let _ = std::fs::remove_dir(mp);
        }
    }
    if errors.is_empty() && attached(&m) {
        if m.caps.is_some() {
            if let Err(e) = sys::throttle(&m.device, None) {
                errors.push(e.to_string());
            }
        }
        if let Err(e) = sys::detach(&m.device) {
            errors.push(e.to_string());
        }
        // `losetup -d` of a busy device succeeds and only marks it to go
        // when released: see that it went.
        if !storbench_proc::wait_until(std::time::Duration::from_secs(5), || !attached(&m)) {
            errors.push(format!("{} is still attached to {} (in use)", m.device, loop_file(&m).display()));
        }
    }
    if let Some(d) = m.daemon.as_ref().filter(|_| errors.is_empty()) {
        if let Err(e) = emu::stop(d) {
            errors.push(e.to_string());
        }
        emu::forget_array(d);
        if let Some(j) = &d.journal {
            emu::forget_journal(j);
        }
    }
    if errors.is_empty() && m.backing_file.exists() {
        if let Err(e) = std::fs::remove_file(&m.backing_file) {
            errors.push(format!("removing {}: {e}", m.backing_file.display()));
        }
    }
    if !errors.is_empty() {
        return Err(MediaError::Failed(format!("destroying '{name}': {}", errors.join("; "))));
    }
    all.remove(i);
    registry::save(&all)
}

/// Whether the medium's loop device is attached to its file.
fn attached(m: &Medium) -> bool {
    let dev = m.device.trim_start_matches("/dev/");
    let backing = std::fs::read_to_string(format!("/sys/block/{dev}/loop/backing_file")).unwrap_or_default();
    backing.trim() == loop_file(m).to_string_lossy()
}

/// The medium a path lives on (its mount point prefixes the path, or the
/// path is its device), for a run's `env_json`.
pub fn describe_path(path: &Path) -> Option<serde_json::Value> {
    let abs = std::fs::canonicalize(path).ok().or_else(|| {
        let mut p = path.to_path_buf();
        while !p.exists() {
            if !p.pop() {
                return None;
            }
        }
        std::fs::canonicalize(p).ok()
    })?;
    let all = registry::load().ok()?;
    let m = all.into_iter().find(|m| {
        m.mount_point.as_ref().is_some_and(|mp| abs.starts_with(mp)) || abs == Path::new(&m.device)
    })?;
    // A run on it begins: a time scale a killed storbench left is undone.
    warn_orphaned_scale(&m);
    let note = if m.model.is_some() {
        Some("modelled per I/O by storbench's device-model daemon (FUSE under the loop device)")
    } else {
        m.caps.as_ref().map(|_| "emulated by blkio throttle caps (IOPS and bandwidth), not a latency model")
    };
    Some(serde_json::json!({
        "name": m.name, "fs": m.fs, "block_size": m.block_size, "device": m.device,
        "emulate": m.emulate, "caps": m.caps, "size": m.size,
        "model": m.model, "counters": m.daemon.as_ref().map(|d| &d.counters),
        "emu_floor": m.daemon.as_ref().and_then(|d| d.floor.as_ref()),
        // The time scale in effect (1: as modelled; storage sensitivity).
        "scale": emu::scale_status(&m).map(|s| s.scale),
        "note": note,
    }))
}

/// Puts back to 1 (and says so on stderr) a time scale that a storbench
/// killed during a sensitivity re-run left on `m` ([`emu::reset_orphaned_scale`]).
pub fn warn_orphaned_scale(m: &Medium) {
    if let Some(was) = emu::reset_orphaned_scale(m).filter(|s| *s != 1.0) {
        eprintln!(
            "storbench: warning: medium '{}' was left at time scale ×{was} by a storbench that ended without undoing it; put back to ×1",
            m.name
        );
    }
}

/// The directory a TARGET names: a medium's mount point, or a path. A
/// name without `/` that is neither a medium nor an existing path is bad
/// input (a mistyped medium must not become a directory under the current
/// one), and so is a path whose parent directory does not exist.
pub fn target_dir(target: &str) -> Result<PathBuf, MediaError> {
    if !target.contains('/') {
        if let Some(m) = get(target)? {
            return m.mount_point.ok_or_else(|| {
                MediaError::Usage(format!(
                    "medium '{target}' has no filesystem (--fs none): give a mounted medium or a directory"
                ))
            });
        }
        if !Path::new(target).exists() {
            return Err(MediaError::Usage(format!(
                "'{target}' is neither a medium (storbench media list) nor an existing path; give a medium's name or a path such as ./{target}"
            )));
        }
        return Ok(PathBuf::from(target));
    }
    let p = PathBuf::from(target);
    let parent = match p.parent() {
        Some(d) if d.as_os_str().is_empty() => Path::new("."),
        Some(d) => d,
        None => Path::new("/"),
    };
    if !parent.is_dir() {
        return Err(MediaError::Usage(format!(
            "{target}: its parent directory {} does not exist",
            parent.display()
        )));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_a_medium_an_existing_path_or_a_path_whose_parent_exists() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("STORBENCH_STATE", dir.path().join("state"));
        let inside = dir.path().join("new");
        assert_eq!(target_dir(inside.to_str().unwrap()).unwrap(), inside);
        let deep = dir.path().join("no/such/dir");
        let e = target_dir(deep.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("parent directory") && e.contains("no/such"), "{e}");
        let e = target_dir("nosuchmedium").unwrap_err().to_string();
        assert!(e.contains("'nosuchmedium' is neither a medium"), "{e}");
        assert!(matches!(target_dir("nosuchmedium"), Err(MediaError::Usage(_))));
    }
}
