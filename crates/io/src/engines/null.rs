//! The null engine: every I/O completes at once with its full length and
//! touches nothing, so the runner can be tested (and its own cost per I/O
//! measured) without a device.

use std::collections::VecDeque;
use std::time::Duration;

use super::{AlignedBuf, Caps, Completion, IoEngine, Op, Queue};
use crate::profile::Profile;
use crate::target::Target;

/// Completes every I/O at once; no file is opened.
#[derive(Clone, Copy, Debug, Default)]
pub struct Null;

impl IoEngine for Null {
    fn name(&self) -> &'static str {
        "null"
    }

    fn caps(&self) -> Caps {
        Caps { asynchronous: true, aligned_memory: false, diskless: true }
    }

    fn open(&self, _: &Target, p: &Profile, depth: usize) -> Result<Box<dyn Queue>, crate::IoError> {
        Ok(Box::new(NullQueue {
            bufs: (0..depth).map(|_| AlignedBuf::new(p.bs as usize, 8)).collect(),
            done: VecDeque::with_capacity(depth),
            len: p.bs as i32,
        }))
    }
}

struct NullQueue {
    bufs: Vec<AlignedBuf>,
    done: VecDeque<Completion>,
    len: i32,
}

impl Queue for NullQueue {
    fn buf(&mut self, slot: usize) -> &mut [u8] {
        self.bufs[slot].as_mut_slice()
    }

    fn push(&mut self, op: Op) -> Result<(), String> {
        self.done.push_back((op.slot, self.len));
        Ok(())
    }

    fn submit(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn wait(&mut self, _: usize, _: Option<Duration>) -> Result<(), String> {
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.done.drain(..));
    }

    fn sync(&mut self, _: bool) -> std::io::Result<()> {
        Ok(())
    }
}
