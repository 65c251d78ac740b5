//! A thread that runs until its owner is dropped: the samplers' shape
//! (the system monitor, the server's CPU, the replication probe). Dropping
//! the handle raises the stop flag the thread polls and joins it, so no
//! sampler outlives what owns it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// A process killed if it outlives a deadline: the bound on work that
/// waits on a server which may never answer (a check on a damaged
/// database whose query loops, a login never answered). Killing the
/// server closes its sockets, so whoever waits on it gets an error back.
/// Dropping the watchdog before the deadline disarms it.
pub struct Watchdog {
    fired: Arc<AtomicBool>,
    _thread: Background,
}

impl Watchdog {
    /// Sends `sig` to `pid` once `after` has passed, unless dropped first.
    pub fn arm(pid: u32, sig: nix::sys::signal::Signal, after: Duration) -> std::io::Result<Watchdog> {
        let fired = Arc::new(AtomicBool::new(false));
        let f = fired.clone();
        let deadline = Instant::now() + after;
        let thread = Background::named("watchdog", move |stop| {
            while !stop.load(Ordering::Relaxed) {
                if Instant::now() >= deadline {
                    f.store(true, Ordering::SeqCst);
                    crate::signal(pid, sig);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })?;
        Ok(Watchdog { fired, _thread: thread })
    }

    /// Whether the deadline passed and the signal went.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
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
    fn a_watchdog_kills_what_outlives_its_deadline_and_not_what_ends_before() {
        use std::process::Command;
        let mut slow = Command::new("sleep").arg("30").spawn().unwrap();
        let dog =
            Watchdog::arm(slow.id(), nix::sys::signal::Signal::SIGKILL, Duration::from_millis(200)).unwrap();
        let t0 = Instant::now();
        let st = slow.wait().unwrap();
        assert!(dog.fired() && !st.success(), "killed: {st}");
        assert!(t0.elapsed() < Duration::from_secs(10), "at the deadline, not at the end of its sleep");
        let mut quick = Command::new("sleep").arg("1").spawn().unwrap();
        let dog =
            Watchdog::arm(quick.id(), nix::sys::signal::Signal::SIGKILL, Duration::from_secs(30)).unwrap();
        assert!(quick.wait().unwrap().success());
        assert!(!dog.fired());
        drop(dog);
    }

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
