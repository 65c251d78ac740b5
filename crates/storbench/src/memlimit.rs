//! `--memory-limit SIZE`: this process (and what it starts) in a cgroup-v1
//! memory group of that size, so the host's page cache cannot hold a
//! database larger than the limit and its reads reach the storage under
//! test, as on a server whose database is bigger than its memory (S1's
//! flash cache is about exactly those reads). The clean page cache is
//! dropped on entry (pages cached before, by a build, are charged to no
//! limit and would answer the reads). The group is removed on exit.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error::usage;

const ROOT: &str = "/sys/fs/cgroup/memory";

/// The memory group this process is in; left (and removed) on drop.
pub struct MemoryLimit {
    dir: PathBuf,
}

impl MemoryLimit {
    /// Moves this process into a new memory group of `bytes`.
    pub fn apply(bytes: u64) -> Result<MemoryLimit> {
        let root = Path::new(ROOT);
        if !root.join("memory.limit_in_bytes").exists() {
            return Err(usage(format!(
                "--memory-limit: this machine has no cgroup-v1 memory controller at {ROOT}"
            )));
        }
        if bytes < 64 << 20 {
            return Err(usage(format!("--memory-limit {bytes}: give at least 64M")));
        }
        let dir = root.join(format!("storbench-{}", std::process::id()));
        let fail = |what: &str, e: std::io::Error| {
            usage(format!("--memory-limit: {what} {}: {e} (it needs root)", dir.display()))
        };
        std::fs::create_dir_all(&dir).map_err(|e| fail("creating", e))?;
        let guard = MemoryLimit { dir: dir.clone() };
        std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string())
            .map_err(|e| fail("limiting", e))?;
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
            .map_err(|e| fail("joining", e))?;
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
        Ok(guard)
    }
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        let _ = std::fs::write(Path::new(ROOT).join("cgroup.procs"), std::process::id().to_string());
        // Children that outlived us keep it busy; retry briefly.
        for _ in 0..20 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
