//! A device model under SQLite's files, in process (issue 25): the URL
//! option `?model=SPEC` opens the database through the timing VFS
//! (`vfs.rs`) with a [`FileDevice`] behind its files, which makes each
//! `xSync` wait as long as the model says writing the file's dirty pages
//! back and flushing would take on that device, in place of the file's
//! own sync (which is not made: a crash can lose what the model called
//! durable). The files live wherever the path puts them and are read and
//! written there as usual (through the host's page cache), so the only
//! difference from the same database on the real disk below is the sync:
//! the device's time comes from the model, exact to the thread's wake-up,
//! with no FUSE round trip or loop device between. A model whose commit
//! takes less than the FUSE emulator's own round trip can so still be held
//! against a database (what `media validate --db-check` does with it).
//!
//! This crate does not know device models: the binary registers an
//! opener ([`set_device_opener`]) that builds one from the SPEC a URL
//! names (a built-in model's name or a model file), as `media create
//! --model` takes it.

use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A device under a database's files, as the VFS drives it: writes land
/// in the page cache (no wait), a sync waits for their writeback and the
/// device's flush.
pub trait FileDevice: Send + Sync + std::fmt::Debug {
    /// A file of the database is opened; the id its calls will name.
    fn open(&self, path: &Path) -> u32;
    /// `len` bytes were read at `offset` of `file`. By default they came
    /// from the page cache (no wait): the database is taken to be in
    /// memory, as one built just before its run on a host with memory to
    /// spare is (the database check's, on both sides).
    fn read(&self, _file: u32, _offset: u64, _len: u64) {}
    /// `len` bytes were written at `offset` of `file` (into the page
    /// cache: no wait).
    fn write(&self, file: u32, offset: u64, len: u64);
    /// `file` was cut to `size` bytes.
    fn truncate(&self, file: u32, size: u64);
    /// `file`'s written bytes are made durable: returns when the device
    /// would have written them back and flushed its cache.
    fn sync(&self, file: u32);
    /// The file at `path` was deleted: opened again, it is a new, empty
    /// file.
    fn delete(&self, _path: &Path) {}
    /// What the device is, for the run's record (the SPEC and its model's
    /// label).
    fn describe(&self) -> String;
}

/// Builds a device from a URL's `model=SPEC` for a database in the
/// directory given (whose filesystem decides how an inode's change
/// reaches the device), or says why it cannot.
pub type DeviceOpener = fn(&str, &Path) -> Result<Arc<dyn FileDevice>, String>;

static OPENER: OnceLock<DeviceOpener> = OnceLock::new();

/// Sets the function that builds a device for `?model=SPEC` (once per
/// process; later calls are ignored).
pub fn set_device_opener(f: DeviceOpener) {
    let _ = OPENER.set(f);
}

/// The device `spec` names for a database in `dir`, through the
/// registered opener.
pub(crate) fn open_device(spec: &str, dir: &Path) -> Result<Arc<dyn FileDevice>, String> {
    match OPENER.get() {
        Some(f) => f(spec, dir),
        None => Err("this program has no device models (no opener was registered)".into()),
    }
}

/// A device file as a VFS file holds it: the device and the file's id.
pub(crate) struct DevFile {
    pub(crate) dev: Arc<dyn FileDevice>,
    pub(crate) id: u32,
}
