//! The I/O engine seam: an engine opens a target for one thread as a
//! [`Queue`] of buffer slots; the runner pushes I/Os into slots, submits,
//! waits and reaps completions. An engine states its capabilities
//! ([`Caps`]) and the runner asks those, never the engine's name. Behind
//! the seam: io_uring (the default), psync (pread/pwrite, one I/O in
//! flight) and null (completes every I/O at once without touching a
//! device, for testing the runner and measuring its own cost, as fio's
//! null engine does).
//!
//! Nothing here measures time: the runner stamps submission and completion.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::time::Duration;

pub use crate::buf::AlignedBuf;
use crate::error::IoError;
use crate::profile::Profile;
use crate::target::Target;

mod null;
mod psync;
mod uring;

pub use null::Null;
pub use psync::Psync;
pub use uring::{uring_available, Uring};

/// What an engine can do; the runner adapts to these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Caps {
    /// More than one I/O in flight per thread (a queue depth above 1 is
    /// reached). Without it the runner uses one slot per thread.
    pub asynchronous: bool,
    /// Buffers must be aligned for direct I/O (the engine allocates them).
    pub aligned_memory: bool,
    /// Touches no device (nothing to compare with the device's counters).
    pub diskless: bool,
}

/// One I/O handed to a queue.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// The buffer slot (0..depth); the completion carries it back.
    pub slot: usize,
    /// Byte offset in the target.
    pub offset: u64,
    /// A write (else a read).
    pub write: bool,
}

/// A finished I/O: its slot and the result (bytes moved, or -errno).
pub type Completion = (usize, i32);

/// An engine: opens a target for one thread.
pub trait IoEngine: Send + Sync {
    /// Its name, as `--engine` takes it and the run record shows it.
    fn name(&self) -> &'static str;
    /// What it can do.
    fn caps(&self) -> Caps;
    /// Opens `target` for one thread running `p`, with `depth` slots of
    /// `p.bs` bytes each.
    fn open(&self, target: &Target, p: &Profile, depth: usize) -> Result<Box<dyn Queue>, IoError>;
}

/// One thread's queue of I/Os. Slots are owned by the caller between a
/// completion and the next push into them.
pub trait Queue {
    /// The bytes of a slot (to fill before a write, to check after a read).
    fn buf(&mut self, slot: usize) -> &mut [u8];
    /// Queues an I/O; it may not reach the device until [`Queue::submit`]
    /// or [`Queue::wait`].
    fn push(&mut self, op: Op) -> Result<(), String>;
    /// Hands queued I/Os to the device without waiting.
    fn submit(&mut self) -> Result<(), String>;
    /// Submits and waits until at least `min` completions are ready, or
    /// `timeout` has passed.
    fn wait(&mut self, min: usize, timeout: Option<Duration>) -> Result<(), String>;
    /// Moves the ready completions into `out`.
    fn reap(&mut self, out: &mut Vec<Completion>);
    /// fsync (or fdatasync with `data_only`) the target.
    fn sync(&mut self, data_only: bool) -> std::io::Result<()>;
}

/// The engine called `name`: `io_uring` (also `uring`, `io-uring`),
/// `psync` (also `sync`) or `null`.
pub fn by_name(name: &str) -> Result<Arc<dyn IoEngine>, String> {
    Ok(match name {
        "io_uring" | "uring" | "io-uring" => Arc::new(Uring),
        "psync" | "sync" => Arc::new(Psync),
        "null" => Arc::new(Null),
        _ => return Err(format!("--engine {name}: use io_uring, psync or null")),
    })
}

/// The engine called `name`, falling back from io_uring to psync where
/// io_uring does not work (old kernel, seccomp); the note says why.
pub fn choose(name: &str) -> Result<(Arc<dyn IoEngine>, Option<String>), String> {
    let e = by_name(name)?;
    if e.name() == Uring.name() {
        if let Err(why) = uring_available() {
            return Ok((Arc::new(Psync), Some(format!("{why}; using psync (one I/O in flight per thread)"))));
        }
    }
    Ok((e, None))
}

/// Opens the target as a profile needs it (O_DIRECT unless buffered).
pub(crate) fn open_target(p: &Profile, target: &Target) -> Result<File, IoError> {
    let mut o = OpenOptions::new();
    o.read(true).write(p.writes());
    if p.direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(&target.path).map_err(|source| IoError::Target {
        what: "opening",
        path: target.path.clone(),
        source,
    })
}

/// `depth` aligned buffers of `bs` bytes.
pub(crate) fn buffers(depth: usize, bs: usize) -> Vec<AlignedBuf> {
    (0..depth).map(|_| AlignedBuf::new(bs, 4096)).collect()
}

/// fsync or fdatasync of a descriptor.
pub(crate) fn sync_fd(fd: i32, data_only: bool) -> std::io::Result<()> {
    // SAFETY: fd is an open descriptor owned by the caller.
    let r = unsafe {
        if data_only {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_by_name_and_their_capabilities() {
        assert!(by_name("io_uring").unwrap().caps().asynchronous);
        assert!(!by_name("psync").unwrap().caps().asynchronous);
        let null = by_name("null").unwrap();
        assert!(null.caps().diskless && null.caps().asynchronous);
        assert_eq!(by_name("aio").err().unwrap(), "--engine aio: use io_uring, psync or null");
    }
}
