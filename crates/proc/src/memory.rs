//! Memory groups (cgroup v1): a limit on the memory of a process and what
//! it starts, page cache included.

use std::path::{Path, PathBuf};

use crate::ProcError;

/// A cgroup-v1 memory group (`/sys/fs/cgroup/memory/NAME`): a limit on the
/// memory, page cache included, of the processes in it. Processes a member
/// starts are members too, so joining before spawning a server puts the
/// server in it. `--memory-limit` (a command in a group for its life) and
/// managed PostgreSQL (a server in a group for the instance's life) use it.
pub struct MemoryGroup {
    dir: PathBuf,
}

/// Where the memory controller is mounted.
const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

impl MemoryGroup {
    /// Creates (or takes over) group `name` with a limit of `bytes`.
    pub fn create(name: &str, bytes: u64) -> Result<MemoryGroup, ProcError> {
        let root = Path::new(MEMORY_ROOT);
        if !root.join("memory.limit_in_bytes").exists() {
            return Err(ProcError::Refused(format!(
                "--memory-limit: this machine has no cgroup-v1 memory controller at {MEMORY_ROOT}"
            )));
        }
        if bytes < 64 << 20 {
            return Err(ProcError::Refused(format!(
                "--memory-limit {}: give at least 64M (the command itself needs tens of MB)",
                storbench_metrics::units::format_size(bytes)
            )));
        }
        let dir = root.join(name);
        let fail = |what: &str, e: std::io::Error| {
            ProcError::Refused(format!("--memory-limit: {what} {}: {e} (it needs root)", dir.display()))
        };
        std::fs::create_dir_all(&dir).map_err(|e| fail("creating", e))?;
        std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string())
            .map_err(|e| fail("limiting", e))?;
        Ok(MemoryGroup { dir })
    }

    /// The group `name` if it exists.
    pub fn existing(name: &str) -> Option<MemoryGroup> {
        let dir = Path::new(MEMORY_ROOT).join(name);
        dir.is_dir().then_some(MemoryGroup { dir })
    }

    /// Moves this process (every thread) into the group; what it starts
    /// from now on is in it too. Drops the host's clean page cache first
    /// (pages cached before are charged to no limit and would answer the
    /// reads the limit is there to send to the storage).
    pub fn join(&self) -> Result<(), ProcError> {
        nix::unistd::sync();
        let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
        std::fs::write(self.dir.join("cgroup.procs"), std::process::id().to_string()).map_err(|e| {
            ProcError::Refused(format!("--memory-limit: joining {}: {e} (it needs root)", self.dir.display()))
        })
    }

    /// Moves this process back to the root group (members it started stay).
    pub fn leave(&self) {
        let _ = std::fs::write(Path::new(MEMORY_ROOT).join("cgroup.procs"), std::process::id().to_string());
    }

    /// Removes the groups named `PREFIX-PID` whose process is gone (left by
    /// a command killed before it could remove its own; a group that still
    /// holds processes is not removed by the kernel, so nothing live is
    /// touched).
    pub fn sweep(prefix: &str) {
        let Ok(dir) = std::fs::read_dir(MEMORY_ROOT) else { return };
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(prefix).and_then(|p| p.strip_prefix('-')) else { continue };
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }

    /// Removes the group once it is empty (retrying briefly while the
    /// last members exit); false if members remain.
    pub fn remove(&self) -> bool {
        crate::wait_until(std::time::Duration::from_secs(1), || {
            std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists()
        })
    }
}
