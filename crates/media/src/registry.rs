//! The registry of media (and managed instances): JSON files in the state
//! directory, written atomically (temp file, then rename) under a lock.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::{MediaError, Medium};

/// Where storbench keeps its media, mounts and managed instances:
/// `STORBENCH_STATE`, else `/var/lib/storbench` as root, else
/// `$XDG_STATE_HOME/storbench` (or `~/.local/state/storbench`).
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STORBENCH_STATE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if crate::sys::is_root() {
        return PathBuf::from("/var/lib/storbench");
    }
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("storbench")
}

fn file(name: &str) -> PathBuf {
    state_dir().join(name)
}

/// Reads a JSON list from the state directory (empty when absent).
pub(crate) fn load_json<T: serde::de::DeserializeOwned>(name: &str) -> Result<Vec<T>, MediaError> {
    let p = file(name);
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t)
            .map_err(|e| MediaError::Failed(format!("{} is damaged ({e}); fix or remove it", p.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(MediaError::Failed(format!("reading {}: {e}", p.display()))),
    }
}

/// Writes a JSON list atomically.
pub(crate) fn save_json<T: serde::Serialize>(name: &str, items: &[T]) -> Result<(), MediaError> {
    let p = file(name);
    let dir = state_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| MediaError::Failed(format!("creating {}: {e}", dir.display())))?;
    let tmp = dir.join(format!(".{name}.tmp"));
    let text = serde_json::to_string_pretty(items).expect("registry serialises");
    std::fs::write(&tmp, text)
        .and_then(|_| File::open(&tmp)?.sync_all())
        .and_then(|_| std::fs::rename(&tmp, &p))
        .map_err(|e| MediaError::Failed(format!("writing {}: {e}", p.display())))
}

/// The media registry.
pub(crate) fn load() -> Result<Vec<Medium>, MediaError> {
    load_json("media.json")
}

/// Saves the media registry.
pub(crate) fn save(all: &[Medium]) -> Result<(), MediaError> {
    save_json("media.json", all)
}

/// An exclusive lock on the state directory, released when dropped.
pub(crate) struct Lock(File);

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: unlocking a descriptor we own.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Takes the state directory's lock (waits for another storbench).
pub(crate) fn lock() -> Result<Lock, MediaError> {
    let dir = state_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| MediaError::Failed(format!("creating {}: {e}", dir.display())))?;
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .map_err(|e| MediaError::Failed(format!("locking {}: {e}", dir.display())))?;
    // SAFETY: locking a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(MediaError::Failed(format!("locking {}", dir.display())));
    }
    Ok(Lock(f))
}
