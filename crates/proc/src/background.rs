//! A thread that runs until its owner is dropped: the samplers' shape
//! (the system monitor, the server's CPU, the replication probe). Dropping
//! the handle raises the stop flag the thread polls and joins it, so no
//! sampler outlives what owns it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A background thread, stopped and joined when dropped.
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Runs `f` on a thread of its own; `f` should return soon after the
    /// flag it is given reads true.
    pub fn spawn(f: impl FnOnce(&AtomicBool) + Send + 'static) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || f(&flag));
        Background { stop, thread: Some(thread) }
    }

    /// As [`Background::spawn`], on a thread with a name (seen in `top -H`
    /// and panics), and an error instead of a panic when the system cannot
    /// start a thread.
    pub fn named(name: &str, f: impl FnOnce(&AtomicBool) + Send + 'static) -> std::io::Result<Background> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || f(&flag))?;
        Ok(Background { stop, thread: Some(thread) })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn dropping_stops_and_joins_the_thread() {
        let ran = Arc::new(AtomicU32::new(0));
        let r = ran.clone();
        let b = Background::spawn(move |stop| {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            r.store(1, Ordering::Relaxed);
        });
        drop(b);
        assert_eq!(ran.load(Ordering::Relaxed), 1, "joined after the thread saw the flag");
    }
}
