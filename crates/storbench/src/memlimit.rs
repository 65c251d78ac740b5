//! `--memory-limit SIZE`: this process (and what it starts) in a cgroup-v1
//! memory group of that size, so the host's page cache cannot hold a
//! database larger than the limit and its reads reach the storage under
//! test, as on a server whose database is bigger than its memory (S1's
//! flash cache is about exactly those reads). The clean page cache is
//! dropped on entry. The group is removed on exit. `pg up` takes the same
//! option for its server instead (the group then lives with the instance).

use anyhow::Result;
use storbench_media::MemoryGroup;

use crate::error::usage;

/// The memory group this process is in; left and removed on drop.
pub struct MemoryLimit(MemoryGroup);

impl MemoryLimit {
    /// Moves this process into a new memory group of `bytes`.
    pub fn apply(bytes: u64) -> Result<MemoryLimit> {
        MemoryGroup::sweep("storbench");
        let g = MemoryGroup::create(&format!("storbench-{}", std::process::id()), bytes)
            .map_err(|e| usage(e.to_string()))?;
        let g = MemoryLimit(g);
        g.0.join().map_err(|e| usage(e.to_string()))?;
        Ok(g)
    }
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        self.0.leave();
        self.0.remove();
    }
}
