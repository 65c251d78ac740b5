//! The system side: losetup, mkfs, mount, the blkio throttle, and an undo
//! list that reverses whatever a failed creation had done.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Caps, MediaError};

/// Whether storbench runs as root (and so can give files to a server's
/// user and run commands as it).
pub fn is_root() -> bool {
    storbench_proc::is_root()
}

pub(crate) fn now() -> String {
    let out = Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills a struct we own from a NUL-terminated path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut s) == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

fn kib(b: u64) -> String {
    format!("{}k", b / 1024)
}

/// Checks a filesystem and block size before anything is made.
pub(crate) fn check_fs(fs: &str, bs: Option<u64>) -> Result<(), String> {
    let page = page_size();
    let tool =
        |t: &str| ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].iter().any(|d| Path::new(d).join(t).exists());
    match fs {
        "none" => {
            if bs.is_some() {
                return Err("--block-size needs a filesystem (--fs ext4, xfs or btrfs), not --fs none".into());
            }
            Ok(())
        }
        "ext4" | "xfs" | "btrfs" => {
            let mkfs = format!("mkfs.{fs}");
            if !tool(&mkfs) {
                return Err(format!("--fs {fs}: {mkfs} is not installed"));
            }
            let Some(b) = bs else { return Ok(()) };
            if !b.is_power_of_two() {
                return Err(format!("--block-size {b}: must be a power of two (1k, 2k, 4k, 8k, 16k, 64k)"));
            }
            match fs {
                "ext4" if !(1024..=65536).contains(&b) => Err(format!("--block-size {}: ext4 takes 1k to 64k", kib(b))),
                "ext4" if b > page => Err(format!(
                    "--block-size {}: ext4 cannot mount blocks larger than the page size ({}) on Linux; use 1k, 2k or 4k, or --fs xfs, which takes larger blocks on kernels 6.12 and later",
                    kib(b),
                    kib(page)
                )),
                "xfs" if !(1024..=65536).contains(&b) => Err(format!("--block-size {}: xfs takes 1k to 64k", kib(b))),
                "xfs" if b > page && !kernel_at_least(6, 12) => Err(format!(
                    "--block-size {}: xfs blocks larger than the page size ({}) need large block support (Linux 6.12 or later); this kernel is older",
                    kib(b),
                    kib(page)
                )),
                "btrfs" if b != page => Err(format!(
                    "--block-size {}: btrfs here takes only the page size ({}) as its sector size",
                    kib(b),
                    kib(page)
                )),
                _ => Ok(()),
            }
        }
        other => Err(format!("--fs {other}: use ext4, xfs, btrfs or none")),
    }
}

pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<String, MediaError> {
    let out = cmd.output().map_err(|e| MediaError::Failed(format!("{what}: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("failed").trim().to_string();
        return Err(MediaError::Failed(format!("{what}: {first}")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(crate) fn losetup(file: &Path) -> Result<String, MediaError> {
    run(
        Command::new("losetup").args(["--find", "--show", "--direct-io=on"]).arg(file),
        "attaching a loop device",
    )
}

pub(crate) fn detach(dev: &str) -> Result<(), MediaError> {
    run(Command::new("losetup").args(["-d", dev]), &format!("detaching {dev}")).map(|_| ())
}

pub(crate) fn mkfs(fs: &str, bs: u64, dev: &str) -> Result<(), MediaError> {
    let mut c = Command::new(format!("mkfs.{fs}"));
    match fs {
        "ext4" => c.args(["-q", "-F", "-b", &bs.to_string(), dev]),
        "xfs" => c.args(["-q", "-f", "-b", &format!("size={bs}"), dev]),
        "btrfs" => c.args(["-q", "-f", "--sectorsize", &bs.to_string(), dev]),
        _ => unreachable!("checked"),
    };
    // A refusal is about the input (size, block size): say so as bad input.
    run(&mut c, &format!("mkfs.{fs} with {}-byte blocks", bs))
        .map(|_| ())
        .map_err(|e| MediaError::Usage(e.to_string()))
}

pub(crate) fn mount(fs: &str, bs: u64, dev: &str, at: &Path) -> Result<(), MediaError> {
    run(
        Command::new("mount").args(["-t", fs, dev]).arg(at),
        &format!("mounting {fs} ({bs}-byte blocks) from {dev}"),
    )
    .map_err(|e| MediaError::Usage(format!("{e} (the kernel refused this filesystem or block size)")))
    .map(|_| ())
}

/// Unmounts `at`; a busy filesystem is an error naming what holds it, never
/// a lazy unmount that would leave it alive under a process.
pub(crate) fn umount(at: &Path) -> Result<(), MediaError> {
    let r = run(Command::new("umount").arg(at), &format!("unmounting {}", at.display()));
    if r.is_err() {
        if let Some(why) = in_use(at) {
            return Err(MediaError::Failed(format!("unmounting {}: {why}", at.display())));
        }
    }
    r.map(|_| ())
}

/// Unmounts `at`, lazily when it is busy: only for a medium whose device is
/// gone anyway (after a power cut), where no process can use it again.
pub(crate) fn umount_lazily(at: &Path) -> Result<(), MediaError> {
    if umount(at).is_err() {
        run(Command::new("umount").arg("-l").arg(at), &format!("unmounting {}", at.display()))?;
    }
    Ok(())
}

/// What holds the filesystem mounted at `at` (`in use by pid 123 (postgres
/// -D …)`), or None when nothing does.
pub(crate) fn in_use(at: &Path) -> Option<String> {
    let h = storbench_proc::holders(at);
    let first = h.first()?;
    let mut cmd = first.command.clone();
    if cmd.len() > 80 {
        cmd.truncate(cmd.char_indices().nth(77).map(|(i, _)| i).unwrap_or(cmd.len()));
        cmd.push_str("...");
    }
    let more = if h.len() > 1 { format!(" and {} more", h.len() - 1) } else { String::new() };
    Some(format!("in use by pid {} ({cmd}){more}", first.pid))
}

pub(crate) fn is_mounted(at: &Path) -> bool {
    storbench_proc::is_mounted(at)
}

const V1: &str = "/sys/fs/cgroup/blkio";

pub(crate) fn throttle_kind() -> Option<&'static str> {
    Path::new(&format!("{V1}/blkio.throttle.read_iops_device")).exists().then_some("cgroup v1 blkio")
}

fn majmin(dev: &str) -> Result<String, MediaError> {
    let name = dev.trim_start_matches("/dev/");
    std::fs::read_to_string(format!("/sys/class/block/{name}/dev"))
        .map(|s| s.trim().to_string())
        .map_err(|e| MediaError::Failed(format!("finding the device number of {dev}: {e}")))
}

/// Sets (or with `None` removes) a device's throttle rules in the root
/// blkio group, so writeback is throttled too.
pub(crate) fn throttle(dev: &str, caps: Option<&Caps>) -> Result<(), MediaError> {
    let mm = majmin(dev)?;
    let c = caps.copied().unwrap_or(Caps { read_iops: 0, write_iops: 0, read_bps: 0, write_bps: 0 });
    for (file, v) in [
        ("read_iops_device", c.read_iops),
        ("write_iops_device", c.write_iops),
        ("read_bps_device", c.read_bps),
        ("write_bps_device", c.write_bps),
    ] {
        let p = format!("{V1}/blkio.throttle.{file}");
        // Writing 0 removes a rule; a missing rule is fine.
        if v == 0 && !rule_present(&p, &mm) {
            continue;
        }
        std::fs::write(&p, format!("{mm} {v}"))
            .map_err(|e| MediaError::Failed(format!("setting {p} for {dev}: {e}")))?;
    }
    Ok(())
}

fn rule_present(file: &str, mm: &str) -> bool {
    std::fs::read_to_string(file).unwrap_or_default().lines().any(|l| l.split_whitespace().next() == Some(mm))
}

/// Whether any throttle rule names this device number (for tests and list).
pub fn has_throttle(majmin: &str) -> bool {
    ["read_iops_device", "write_iops_device", "read_bps_device", "write_bps_device"]
        .iter()
        .any(|f| rule_present(&format!("{V1}/blkio.throttle.{f}"), majmin))
}

enum Step {
    RemoveFile(PathBuf),
    Detach(String),
    Rmdir(PathBuf),
    Umount(PathBuf),
    Unthrottle(String),
    /// Anything else the caller knows how to undo (stopping a model's
    /// daemon: `emu` uses this module, so this module does not name it).
    Call(Box<dyn FnOnce()>),
}

/// What to reverse if creation fails, newest first.
#[derive(Default)]
pub(crate) struct Undo(Vec<Step>);

impl Undo {
    pub(crate) fn remove_file(&mut self, p: &Path) {
        self.0.push(Step::RemoveFile(p.to_path_buf()));
    }
    pub(crate) fn detach(&mut self, d: &str) {
        self.0.push(Step::Detach(d.to_string()));
    }
    pub(crate) fn rmdir(&mut self, p: &Path) {
        self.0.push(Step::Rmdir(p.to_path_buf()));
    }
    pub(crate) fn umount(&mut self, p: &Path) {
        self.0.push(Step::Umount(p.to_path_buf()));
    }
    pub(crate) fn unthrottle(&mut self, d: &str) {
        self.0.push(Step::Unthrottle(d.to_string()));
    }
    pub(crate) fn call(&mut self, f: impl FnOnce() + 'static) {
        self.0.push(Step::Call(Box::new(f)));
    }
    pub(crate) fn forget(&mut self) {
        self.0.clear();
    }
    pub(crate) fn run(&mut self) {
        while let Some(s) = self.0.pop() {
            let _ = match s {
                Step::RemoveFile(p) => std::fs::remove_file(p).map_err(|e| MediaError::Failed(e.to_string())),
                Step::Detach(d) => detach(&d),
                Step::Rmdir(p) => std::fs::remove_dir(p).map_err(|e| MediaError::Failed(e.to_string())),
                Step::Umount(p) => umount(&p),
                Step::Unthrottle(d) => throttle(&d, None),
                Step::Call(f) => {
                    f();
                    Ok(())
                }
            };
        }
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        self.run();
    }
}
