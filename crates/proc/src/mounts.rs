//! The mount table, read from `/proc/self/mountinfo` in this one place
//! with one unescaping (the kernel writes a space in a path as `\040`), and
//! the processes that hold a mounted filesystem (a working directory, an
//! open file or a mapping on it): what makes an unmount fail, or, lazily
//! done, leave a filesystem alive under a server.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One mounted filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted (unescaped).
    pub point: PathBuf,
    /// Its filesystem type.
    pub fs: String,
    /// What is mounted (a device, or a name for a virtual filesystem).
    pub source: String,
    /// Its device number, `MAJOR:MINOR` (a FUSE mount's minor names its
    /// connection under /sys/fs/fuse/connections).
    pub dev: String,
}

/// Undoes the kernel's octal escapes (`\040` space, `\011` tab, `\012`
/// newline, `\134` backslash) in a mount table field.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8 + (b[i + 3] - b'0') as u32;
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount table now (empty if it cannot be read).
pub fn mounts() -> Vec<Mount> {
    let Ok(me) = procfs::process::Process::myself() else { return Vec::new() };
    let Ok(infos) = me.mountinfo() else { return Vec::new() };
    infos
        .into_iter()
        .map(|m| Mount {
            point: PathBuf::from(unescape(&m.mount_point.to_string_lossy())),
            fs: m.fs_type,
            source: unescape(m.mount_source.as_deref().unwrap_or("")),
            dev: m.majmin,
        })
        .collect()
}

/// Whether a filesystem is mounted at `at` (compared after resolving links).
pub fn is_mounted(at: &Path) -> bool {
    let want = std::fs::canonicalize(at).unwrap_or_else(|_| at.to_path_buf());
    mounts().iter().any(|m| m.point == want)
}

/// The mount `at` is on: the one with the longest mount point that
/// prefixes it.
pub fn mount_of(at: &Path) -> Option<Mount> {
    let p = std::fs::canonicalize(at).ok()?;
    mounts().into_iter().filter(|m| p.starts_with(&m.point)).max_by_key(|m| m.point.as_os_str().len())
}

/// A process that holds a filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: u32,
    /// Its command line, space-separated (its name for a kernel thread).
    pub command: String,
}

/// The processes (other than this one) with their working or root
/// directory, an open file or a file mapping on the filesystem mounted at
/// `point`, found by device number so paths need not match.
pub fn holders(point: &Path) -> Vec<Holder> {
    let Ok(dev) = std::fs::metadata(point).map(|m| m.dev()) else { return Vec::new() };
    let me = std::process::id() as i32;
    let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
    let on = |p: PathBuf| std::fs::metadata(p).is_ok_and(|m| m.dev() == dev);
    all.flatten()
        .filter(|p| p.pid != me)
        .filter(|p| {
            let base = PathBuf::from(format!("/proc/{}", p.pid));
            on(base.join("cwd"))
                || on(base.join("root"))
                    && std::fs::read_link(base.join("root")).is_ok_and(|r| r != Path::new("/"))
                || p.fd().is_ok_and(|fds| fds.flatten().any(|fd| on(base.join("fd").join(fd.fd.to_string()))))
                || p.maps().is_ok_and(|maps| {
                    maps.into_iter().any(|m| {
                        matches!(m.pathname, procfs::process::MMapPath::Path(_))
                            && nix::sys::stat::makedev(m.dev.0 as u64, m.dev.1 as u64) == dev
                    })
                })
        })
        .map(|p| {
            let args = p.cmdline().unwrap_or_default();
            let command =
                if args.is_empty() { p.stat().map(|s| s.comm).unwrap_or_default() } else { args.join(" ") };
            Holder { pid: p.pid as u32, command }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_undone_once() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/mnt/a\134040b"), r"/mnt/a\040b", "an escaped backslash stays one");
        assert_eq!(unescape(r"/mnt/a\tb\0"), r"/mnt/a\tb\0", "not an octal escape");
    }

    #[test]
    fn the_root_is_mounted_and_proc_is_found() {
        assert!(is_mounted(Path::new("/")));
        assert!(mounts().iter().any(|m| m.point == Path::new("/proc") && m.fs == "proc"));
        assert_eq!(mount_of(Path::new("/proc/self")).unwrap().point, Path::new("/proc"));
    }

    #[test]
    fn a_process_with_its_working_directory_on_a_filesystem_holds_it() {
        // /dev/shm is its own filesystem (tmpfs) on every Linux we run on.
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let mut child =
            std::process::Command::new("sleep").arg("30").current_dir(dir.path()).spawn().unwrap();
        let found = crate::wait_until(std::time::Duration::from_secs(5), || {
            holders(Path::new("/dev/shm"))
                .iter()
                .any(|h| h.pid == child.id() && h.command.starts_with("sleep"))
        });
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found);
        assert!(!holders(Path::new("/dev/shm")).iter().any(|h| h.pid == child.id()));
    }
}
