//! The state directory: where storbench records what it made and started
//! (media, managed instances, temporary servers), so that a later storbench
//! finds, stops and removes them after any crash. JSON lists written
//! atomically (a temporary file, then a rename) under one lock; files that
//! hold secrets or data are created private ([`private_file`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::ProcError;

/// Where storbench keeps its media, mounts and managed instances:
/// `STORBENCH_STATE`, else `/var/lib/storbench` as root, else
/// `$XDG_STATE_HOME/storbench` (or `~/.local/state/storbench`).
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STORBENCH_STATE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if crate::is_root() {
        return PathBuf::from("/var/lib/storbench");
    }
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("storbench")
}

/// Reads the JSON list `name` from the state directory (empty when absent).
pub fn load_json<T: serde::de::DeserializeOwned>(name: &str) -> Result<Vec<T>, ProcError> {
    let p = state_dir().join(name);
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t)
            .map_err(|e| ProcError::Failed(format!("{} is damaged ({e}); fix or remove it", p.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(ProcError::Failed(format!("reading {}: {e}", p.display()))),
    }
}

/// Writes the JSON list `name` into the state directory atomically.
pub fn save_json<T: serde::Serialize>(name: &str, items: &[T]) -> Result<(), ProcError> {
    let dir = state_dir();
    let p = dir.join(name);
    std::fs::create_dir_all(&dir)
        .map_err(|e| ProcError::Failed(format!("creating {}: {e}", dir.display())))?;
    let tmp = dir.join(format!(".{name}.tmp"));
    let text = serde_json::to_string_pretty(items).expect("a registry serialises");
    std::fs::write(&tmp, text)
        .and_then(|_| File::open(&tmp)?.sync_all())
        .and_then(|_| std::fs::rename(&tmp, &p))
        .map_err(|e| ProcError::Failed(format!("writing {}: {e}", p.display())))
}

/// An exclusive lock on the state directory, released when dropped.
pub struct Lock(#[allow(dead_code)] Flock<File>);

/// Takes the state directory's lock (waits for another storbench).
pub fn lock() -> Result<Lock, ProcError> {
    let dir = state_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| ProcError::Failed(format!("creating {}: {e}", dir.display())))?;
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .map_err(|e| ProcError::Failed(format!("locking {}: {e}", dir.display())))?;
    Flock::lock(f, FlockArg::LockExclusive)
        .map(Lock)
        .map_err(|(_, e)| ProcError::Failed(format!("locking {}: {e}", dir.display())))
}

/// Creates `p` (it must not exist) readable and writable by its owner only
/// (0600), whatever the umask: images, traces, passwords.
pub fn private_file(p: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_is_0600_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.img");
        private_file(&p).unwrap().set_len(1 << 20).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(private_file(&p).is_err(), "an existing file is not reused");
    }
}
