//! The target of an I/O run: a file (created at a size and filled with
//! incompressible data, so reads touch real blocks) or a block device
//! (never filled; writes refused when it holds a filesystem or is mounted,
//! unless forced).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A target, checked and ready.
#[derive(Clone, Debug)]
pub struct Target {
    /// The path.
    pub path: PathBuf,
    /// Usable bytes.
    pub size: u64,
    /// A block device rather than a file.
    pub is_block: bool,
    /// Logical block size (direct I/O alignment).
    pub logical_block: u64,
}

/// What must be done before a target can be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Use as is.
    Ready,
    /// Create (or grow/shrink) the file to this size and fill it.
    Fill {
        /// Bytes to write.
        size: u64,
    },
}

/// Why a target cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Bad input: the message names the value and what is allowed.
    #[error("{0}")]
    Refused(String),
    /// The system failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> TargetError + 'a {
    move |source| TargetError::Io { what, path: path.to_path_buf(), source }
}

/// Reads a number from sysfs.
fn sysfs_u64(p: &str) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Checks a target before anything is written: a block device's size and
/// block size, whether writing to it is allowed, or what a file needs.
pub fn inspect(path: &Path, size: u64, writes: bool, force: bool) -> Result<(Target, Plan), TargetError> {
    let meta = std::fs::metadata(path);
    if let Ok(m) = &meta {
        if m.file_type().is_block_device() {
            let real = std::fs::canonicalize(path).map_err(io_err("resolving", path))?;
            let name = real.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let dev_size = sysfs_u64(&format!("/sys/class/block/{name}/size")).unwrap_or(0) * 512;
            let lb = sysfs_u64(&format!("/sys/class/block/{name}/queue/logical_block_size"))
                .or_else(|| {
                    // A partition: its disk's queue.
                    let parent = std::fs::canonicalize(format!("/sys/class/block/{name}/..")).ok()?;
                    sysfs_u64(&format!("{}/queue/logical_block_size", parent.display()))
                })
                .unwrap_or(512);
            if writes && !force {
                if let Some(why) = in_use(&real, &name) {
                    return Err(TargetError::Refused(format!(
                        "{}: refusing to write to a block device that {why}; its data would be destroyed (add --force to write anyway)",
                        path.display()
                    )));
                }
            }
            if dev_size == 0 {
                return Err(TargetError::Refused(format!(
                    "{}: the block device has no size",
                    path.display()
                )));
            }
            return Ok((
                Target { path: real, size: dev_size, is_block: true, logical_block: lb },
                Plan::Ready,
            ));
        }
        if !m.is_file() {
            return Err(TargetError::Refused(format!(
                "{}: not a regular file or block device (give a file path, e.g. ./storbench-data/io.dat)",
                path.display()
            )));
        }
    }
    if size == 0 {
        return Err(TargetError::Refused("--size 0: must be more than zero".into()));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let current = meta.as_ref().map(|m| m.len()).unwrap_or(0);
    let plan = if current == size { Plan::Ready } else { Plan::Fill { size } };
    if plan != Plan::Ready {
        // The parent directory must exist: a mistyped path must not grow a
        // tree of directories (issue 24: `/nonexistent/dir/x.dat` made both
        // and wrote 1 GiB). The default's own directory is the one made,
        // one level, in a directory that exists.
        let probe = if dir.exists() {
            dir.to_path_buf()
        } else if is_default_dir(dir) {
            dir.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf()
        } else {
            return Err(TargetError::Refused(format!(
                "{}: the directory {} does not exist; create it first (only {DEFAULT_DIR} is made)",
                path.display(),
                dir.display()
            )));
        };
        let md = std::fs::metadata(&probe).map_err(io_err("checking", &probe))?;
        if !md.is_dir() {
            return Err(TargetError::Refused(format!(
                "{}: {} is not a directory",
                path.display(),
                probe.display()
            )));
        }
        let free = free_bytes(&probe).unwrap_or(u64::MAX);
        if size.saturating_sub(current) > free {
            return Err(TargetError::Refused(format!(
                "--size {}: larger than the free space on {} ({})",
                storbench_metrics::units::format_size(size),
                probe.display(),
                storbench_metrics::units::format_size(free)
            )));
        }
        if md.permissions().readonly() || !writable(&probe) {
            return Err(TargetError::Refused(format!(
                "{}: cannot create the file: {} is not writable",
                path.display(),
                probe.display()
            )));
        }
    } else if !writable_file(path) && writes {
        return Err(TargetError::Refused(format!("{}: the file is not writable", path.display())));
    }
    let lb = 512;
    Ok((Target { path: path.to_path_buf(), size, is_block: false, logical_block: lb }, plan))
}

/// The directory of the default target, the only one a run creates.
pub const DEFAULT_DIR: &str = "./storbench-data";

fn is_default_dir(dir: &Path) -> bool {
    dir == Path::new(DEFAULT_DIR) || dir == Path::new("storbench-data")
}

fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the struct we own; the path is NUL-terminated.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut s) == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
    }
}

fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: access only reads the NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn writable_file(p: &Path) -> bool {
    OpenOptions::new().write(true).open(p).is_ok()
}

/// Why a block device must not be written: mounted, held by another device
/// (LVM, RAID, a partition in use), or carrying a filesystem signature.
fn in_use(dev: &Path, name: &str) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for l in mounts.lines() {
        let mut f = l.split_whitespace();
        let (src, at) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        if let Ok(s) = std::fs::canonicalize(src) {
            if s == dev || s.to_string_lossy().starts_with(&format!("{}p", dev.display())) {
                return Some(format!("is mounted at {at}"));
            }
        }
    }
    if let Ok(h) = std::fs::read_dir(format!("/sys/class/block/{name}/holders")) {
        if let Some(holder) = h.flatten().next() {
            return Some(format!("is in use by {}", holder.file_name().to_string_lossy()));
        }
    }
    fs_type(dev).map(|fs| format!("holds a {fs} filesystem"))
}

/// The filesystem signature on a block device (`blkid`'s low-level probe:
/// `xfs`, `ext4`, ...), `None` when it has none or cannot be read.
pub fn fs_type(dev: &Path) -> Option<String> {
    let out = std::process::Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE"])
        .arg(dev)
        .output()
        .ok()?;
    let fs = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !fs.is_empty()).then_some(fs)
}

/// Creates (or resizes) and fills the file with incompressible data in 1 MiB
/// direct writes, calling `progress(bytes_done)`; removes it if that fails.
pub fn fill(path: &Path, size: u64, progress: &mut dyn FnMut(u64)) -> Result<(), TargetError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        // `inspect` allowed only the default's directory; one level.
        std::fs::create_dir(dir).map_err(io_err("creating", dir))?;
    }
    let res = (|| {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .or_else(|_| OpenOptions::new().write(true).create(true).truncate(true).open(path))
            .map_err(io_err("creating", path))?;
        write_random(&f, path, size, progress)?;
        f.sync_all().map_err(io_err("syncing", path))
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(path);
    }
    res
}

fn write_random(
    mut f: &File,
    path: &Path,
    size: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<(), TargetError> {
    const CHUNK: usize = 1 << 20;
    let mut buf = crate::buf::AlignedBuf::new(CHUNK, 4096);
    let mut x = 0x243F_6A88_85A3_08D3u64;
    let mut done = 0u64;
    while done < size {
        for w in buf.as_mut_slice().chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = (size - done).min(CHUNK as u64) as usize;
        if !n.is_multiple_of(4096) {
            // The tail of an odd size: finish without O_DIRECT.
            let g = OpenOptions::new().write(true).open(path).map_err(io_err("writing", path))?;
            use std::os::unix::fs::FileExt;
            g.write_all_at(&buf.as_slice()[..n], done).map_err(io_err("writing", path))?;
        } else {
            f.write_all(&buf.as_slice()[..n]).map_err(io_err("writing", path))?;
        }
        done += n as u64;
        progress(done);
    }
    Ok(())
}
