//! Host and target descriptions for `env_json`.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Host facts: hostname, CPU model and count, memory, kernel.
pub fn host_env() -> Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mem_kib = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    json!({
        "host": read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        "cpu_model": model,
        "cpus": cpus,
        "memory_bytes": mem_kib * 1024,
        "kernel": read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
    })
}

/// Where a path lives: its filesystem and the block device behind it.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PathInfo {
    /// The path as given, made absolute.
    pub path: PathBuf,
    /// Filesystem type (`ext4`, `xfs`, `tmpfs`, ...), or `block` for a device.
    pub fs_type: String,
    /// The filesystem's block size (statvfs f_bsize), or the device's logical
    /// block size for a block device.
    pub block_size: u64,
    /// Mount point holding the path (empty for a block device).
    pub mount_point: PathBuf,
    /// The device, e.g. `/dev/vda` or `/dev/loop3`.
    pub device: String,
    /// Kernel name of the device (`vda`, `loop3`), for /proc/diskstats.
    pub device_name: String,
    /// For a loop device: its backing file.
    pub loop_backing_file: Option<PathBuf>,
    /// Logical block size of the device (direct I/O alignment).
    pub logical_block_size: u64,
    /// The whole disk the device is (a partition's parent disk), by kernel
    /// name.
    pub disk: String,
    /// That disk's size in bytes (0 if unknown).
    pub disk_bytes: u64,
}

/// Unescapes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() + 1 && b[i + 1..].len() >= 3 {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v as char);
                i += 4;
                continue;
            }
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// Kernel device name for a major:minor pair, from /sys/dev/block.
fn dev_name(major: u32, minor: u32) -> Option<String> {
    let link = fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn fill_device(info: &mut PathInfo, name: &str) {
    info.device_name = name.to_string();
    info.device = format!("/dev/{name}");
    // A partition's queue (and the whole disk's size) live under its
    // parent disk.
    info.disk = if Path::new(&format!("/sys/block/{name}/queue")).exists() {
        name.to_string()
    } else {
        fs::read_link(format!("/sys/class/block/{name}"))
            .ok()
            .and_then(|l| l.parent().and_then(|p| p.file_name()).map(|p| p.to_string_lossy().into_owned()))
            .unwrap_or_default()
    };
    let disk = &info.disk;
    info.logical_block_size = read_trim(format!("/sys/block/{disk}/queue/logical_block_size"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    info.disk_bytes =
        read_trim(format!("/sys/block/{disk}/size")).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 512;
    info.loop_backing_file = read_trim(format!("/sys/block/{name}/loop/backing_file")).map(PathBuf::from);
}

/// Describes `path` (a file, a directory, or a block device). For a path that
/// does not exist yet, its nearest existing parent is described.
pub fn path_env(path: &Path) -> PathInfo {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    let mut info = PathInfo { path: abs.clone(), ..Default::default() };
    let mut existing = abs.clone();
    while !existing.exists() {
        if !existing.pop() {
            return info;
        }
    }
    let Ok(meta) = fs::metadata(&existing) else { return info };
    if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        let (major, minor) = (libc::major(rdev), libc::minor(rdev));
        info.fs_type = "block".into();
        if let Some(name) = dev_name(major, minor) {
            fill_device(&mut info, &name);
        }
        info.block_size = info.logical_block_size;
        return info;
    }
    let canon = fs::canonicalize(&existing).unwrap_or(existing);
    // The mount with the longest mount point that prefixes the path.
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut best: Option<(PathBuf, String, String, String)> = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 2 {
            continue;
        }
        let mp = PathBuf::from(unescape(l[4]));
        if canon.starts_with(&mp)
            && best.as_ref().is_none_or(|b| mp.as_os_str().len() >= b.0.as_os_str().len())
        {
            best = Some((mp, r[0].to_string(), unescape(r[1]), l[2].to_string()));
        }
    }
    if let Some((mp, fstype, source, majmin)) = best {
        info.mount_point = mp;
        info.fs_type = fstype;
        info.device = source;
        if let Some((ma, mi)) = majmin.split_once(':') {
            if let (Ok(ma), Ok(mi)) = (ma.parse(), mi.parse()) {
                if let Some(name) = dev_name(ma, mi) {
                    fill_device(&mut info, &name);
                }
            }
        }
        // btrfs (and other multi-device filesystems) report an anonymous
        // device number: fall back to the mount's source device.
        if info.device_name.is_empty() && info.device.starts_with("/dev/") {
            if let Some(name) = fs::canonicalize(&info.device)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            {
                if Path::new(&format!("/sys/class/block/{name}")).exists() {
                    fill_device(&mut info, &name);
                }
            }
        }
    }
    // SAFETY: statvfs writes into a zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let c = std::ffi::CString::new(canon.as_os_str().as_encoded_bytes()).unwrap_or_default();
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) == 0 {
            info.block_size = st.f_bsize as u64;
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_env_has_the_basics() {
        let h = host_env();
        assert!(h["cpus"].as_u64().unwrap() >= 1);
        assert!(h["memory_bytes"].as_u64().unwrap() > 0);
        assert!(!h["kernel"].as_str().unwrap().is_empty());
    }

    #[test]
    fn describes_a_file_in_a_temporary_directory() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("not-yet");
        let info = path_env(&f);
        assert_eq!(info.path, f);
        assert!(!info.fs_type.is_empty());
        assert!(info.block_size >= 512, "{info:?}");
        assert!(info.mount_point.is_absolute());
    }

    /// The whole disk under a path on a block device is named and sized,
    /// and holds the filesystem (statvfs's count, read apart from sysfs).
    #[test]
    fn the_disk_under_a_path_is_at_least_its_filesystem() {
        let here = std::env::current_dir().unwrap();
        let info = path_env(&here);
        if info.device_name.is_empty() {
            return; // not on a block device (an overlay, a tmpfs)
        }
        assert!(!info.disk.is_empty(), "{info:?}");
        let c = std::ffi::CString::new(here.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: statvfs fills a zeroed struct we own from a NUL-terminated path.
        let fs_bytes = unsafe {
            let mut st: libc::statvfs = std::mem::zeroed();
            assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
            st.f_blocks as u64 * st.f_frsize as u64
        };
        assert!(info.disk_bytes >= fs_bytes, "disk {} B, filesystem {fs_bytes} B: {info:?}", info.disk_bytes);
    }

    #[test]
    fn unescapes_mountinfo_spaces() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
