//! The io_uring engine: per thread one ring with the file and the buffers
//! registered (fixed files and buffers save a lookup and a page pin per
//! I/O), I/Os queued in the submission ring and completions reaped in
//! batches.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};

use super::{buffers, open_target, sync_fd, AlignedBuf, Caps, Completion, IoEngine, Op, Queue};
use crate::profile::Profile;
use crate::target::Target;

/// Whether io_uring works here; the reason when it does not.
pub fn uring_available() -> Result<(), String> {
    IoUring::new(2).map(|_| ()).map_err(|e| format!("io_uring is unavailable ({e})"))
}

/// io_uring with registered file and buffers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Uring;

impl IoEngine for Uring {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn caps(&self) -> Caps {
        Caps { asynchronous: true, aligned_memory: true, diskless: false }
    }

    fn open(&self, target: &Target, p: &Profile, depth: usize) -> Result<Box<dyn Queue>, crate::IoError> {
        let file = open_target(p, target)?;
        let entries = (depth as u32).next_power_of_two().max(2);
        let ring: IoUring = IoUring::builder()
            .setup_single_issuer()
            .build(entries)
            .or_else(|_| IoUring::new(entries))
            .map_err(|e| crate::IoError::Engine(format!("setting up io_uring: {e}")))?;
        let fd = file.as_raw_fd();
        let fixed_file = ring.submitter().register_files(&[fd]).is_ok();
        let bs = p.bs as usize;
        let bufs = buffers(depth, bs);
        let iovecs: Vec<libc::iovec> = bufs
            .iter()
            .map(|b| libc::iovec { iov_base: b.ptr() as *mut libc::c_void, iov_len: bs })
            .collect();
        // SAFETY: the buffers live in the queue with the ring, and the ring
        // is dropped first (field order).
        let fixed_bufs =
            depth <= u16::MAX as usize && unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(Box::new(UringQueue { ring, bufs, file, fixed_file, fixed_bufs, bs: bs as u32 }))
    }
}

struct UringQueue {
    // Dropped in this order: the ring before the buffers it points into.
    ring: IoUring,
    bufs: Vec<AlignedBuf>,
    file: File,
    fixed_file: bool,
    fixed_bufs: bool,
    bs: u32,
}

impl UringQueue {
    fn entry(&self, op: Op) -> squeue::Entry {
        let (ptr, bs, i) = (self.bufs[op.slot].ptr(), self.bs, op.slot as u16);
        let fd = self.file.as_raw_fd();
        match (op.write, self.fixed_bufs, self.fixed_file) {
            (false, true, true) => {
                opcode::ReadFixed::new(types::Fixed(0), ptr, bs, i).offset(op.offset).build()
            }
            (false, true, false) => {
                opcode::ReadFixed::new(types::Fd(fd), ptr, bs, i).offset(op.offset).build()
            }
            (true, true, true) => {
                opcode::WriteFixed::new(types::Fixed(0), ptr, bs, i).offset(op.offset).build()
            }
            (true, true, false) => {
                opcode::WriteFixed::new(types::Fd(fd), ptr, bs, i).offset(op.offset).build()
            }
            (false, false, true) => opcode::Read::new(types::Fixed(0), ptr, bs).offset(op.offset).build(),
            (false, false, false) => opcode::Read::new(types::Fd(fd), ptr, bs).offset(op.offset).build(),
            (true, false, true) => opcode::Write::new(types::Fixed(0), ptr, bs).offset(op.offset).build(),
            (true, false, false) => opcode::Write::new(types::Fd(fd), ptr, bs).offset(op.offset).build(),
        }
        .user_data(op.slot as u64)
    }
}

impl Queue for UringQueue {
    fn buf(&mut self, slot: usize) -> &mut [u8] {
        self.bufs[slot].as_mut_slice()
    }

    fn push(&mut self, op: Op) -> Result<(), String> {
        let e = self.entry(op);
        // SAFETY: the slot's buffer stays valid and untouched until its
        // completion is reaped (the runner owns slots in between).
        unsafe { self.ring.submission().push(&e) }.map_err(|_| "io_uring submission queue full".to_string())
    }

    fn submit(&mut self) -> Result<(), String> {
        self.ring.submit().map(|_| ()).map_err(|e| format!("io_uring submit: {e}"))
    }

    fn wait(&mut self, min: usize, timeout: Option<Duration>) -> Result<(), String> {
        let res = match timeout {
            None => self.ring.submit_and_wait(min),
            Some(t) => {
                let ts = types::Timespec::from(t.max(Duration::from_micros(1)));
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(min, &args)
            }
        };
        match res {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => Ok(()),
            Err(e) => Err(format!("io_uring submit: {e}")),
        }
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ring.completion().map(|c| (c.user_data() as usize, c.result())));
    }

    fn sync(&mut self, data_only: bool) -> std::io::Result<()> {
        sync_fd(self.file.as_raw_fd(), data_only)
    }
}
