//! The psync engine: pread/pwrite, one I/O in flight per thread. A push
//! performs the I/O; the completion is ready when it returns.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::{buffers, open_target, sync_fd, AlignedBuf, Caps, Completion, IoEngine, Op, Queue};
use crate::profile::Profile;
use crate::target::Target;

/// pread/pwrite, synchronous.
#[derive(Clone, Copy, Debug, Default)]
pub struct Psync;

impl IoEngine for Psync {
    fn name(&self) -> &'static str {
        "psync"
    }

    fn caps(&self) -> Caps {
        Caps { asynchronous: false, aligned_memory: true, diskless: false }
    }

    fn open(&self, target: &Target, p: &Profile, depth: usize) -> Result<Box<dyn Queue>, crate::IoError> {
        let file = open_target(p, target)?;
        Ok(Box::new(PsyncQueue {
            file,
            bufs: buffers(depth, p.bs as usize),
            done: Vec::with_capacity(depth),
        }))
    }
}

struct PsyncQueue {
    file: File,
    bufs: Vec<AlignedBuf>,
    done: Vec<Completion>,
}

impl Queue for PsyncQueue {
    fn buf(&mut self, slot: usize) -> &mut [u8] {
        self.bufs[slot].as_mut_slice()
    }

    fn push(&mut self, op: Op) -> Result<(), String> {
        let buf = &self.bufs[op.slot];
        let (fd, len) = (self.file.as_raw_fd(), buf.as_slice().len());
        // SAFETY: the buffer is valid for len bytes; fd is open.
        let n = unsafe {
            if op.write {
                libc::pwrite(fd, buf.ptr() as *const libc::c_void, len, op.offset as i64)
            } else {
                libc::pread(fd, buf.ptr() as *mut libc::c_void, len, op.offset as i64)
            }
        };
        let res = if n < 0 {
            -std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
        } else {
            n as i32
        };
        self.done.push((op.slot, res));
        Ok(())
    }

    fn submit(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn wait(&mut self, _: usize, _: Option<Duration>) -> Result<(), String> {
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.done);
    }

    fn sync(&mut self, data_only: bool) -> std::io::Result<()> {
        sync_fd(self.file.as_raw_fd(), data_only)
    }
}
