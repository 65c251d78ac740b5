//! SQLite's waits, timed in its VFS (issue 28): a `sqlite3_vfs` named
//! [`NAME`], registered once per process, that wraps the default VFS
//! (`unix`) and forwards every call to it unchanged, timing the calls a
//! connection waits in — `xRead`, `xWrite` (and `xTruncate`), `xSync`, and
//! the VFS's `xSleep`, which SQLite's busy handler sleeps in while another
//! connection holds the write lock. The nanoseconds are added to the
//! [`VfsTimings`] of the database the file belongs to, beside the time
//! storbench's connections spend inside SQLite at all (`active`: every
//! call of a `SqliteConn`, timed by [`Active`]). `waits.rs` turns them into
//! the same per-second shares the servers' sessions give.
//!
//! Which database a file belongs to: the one whose connection call is
//! running on this thread when SQLite opens the file (its main file at
//! connect, its WAL and shared memory on first use; a connection runs on
//! one thread at a time). A file opened outside such a call (none in
//! storbench) is forwarded but not timed.
//!
//! This is the crate's only `unsafe` code: C-ABI callbacks over the
//! structures SQLite hands them. Each wrapper finds the wrapped file right
//! behind its own header (the layout SQLite's shims, e.g. `vfstrace.c`, use)
//! and calls the wrapped VFS's method of the same name with the same
//! arguments; a method the wrapped VFS or file does not have is reported as
//! SQLite's "not available" for it.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use rusqlite::ffi;

/// The shim's VFS name, as connections name it when they open.
pub const NAME: &str = "storbench-timed";
const NAME_C: &std::ffi::CStr = c"storbench-timed";

/// Time a database's connections spent in SQLite and in its VFS's calls,
/// in nanoseconds since the first connection to it opened.
#[derive(Debug, Default)]
pub struct VfsTimings {
    read: AtomicU64,
    write: AtomicU64,
    sync: AtomicU64,
    busy: AtomicU64,
    active: AtomicU64,
}

/// [`VfsTimings`] read at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VfsTotals {
    /// In `xRead`: pages read from the database and WAL files.
    pub read_ns: u64,
    /// In `xWrite` and `xTruncate`.
    pub write_ns: u64,
    /// In `xSync`: the flushes of the WAL (at commit) and of the database
    /// file (at a checkpoint).
    pub sync_ns: u64,
    /// In `xSleep`: the busy handler waiting for another connection's lock.
    pub busy_ns: u64,
    /// Inside any call of storbench's connections (statements, begin,
    /// commit, load): what the times above are part of.
    pub active_ns: u64,
}

impl VfsTimings {
    /// The totals now.
    pub fn totals(&self) -> VfsTotals {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        VfsTotals {
            read_ns: g(&self.read),
            write_ns: g(&self.write),
            sync_ns: g(&self.sync),
            busy_ns: g(&self.busy),
            active_ns: g(&self.active),
        }
    }
}

fn add(counter: &AtomicU64, since: Instant) {
    counter.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// The timings of the database at `path`, shared by every connection to
/// it in this process (the path as its directory resolves, so two
/// spellings of one file share them).
pub(crate) fn timings_for(path: &Path) -> Arc<VfsTimings> {
    static ALL: Mutex<Vec<(PathBuf, Weak<VfsTimings>)>> = Mutex::new(Vec::new());
    let key = match (path.parent().and_then(|p| std::fs::canonicalize(p).ok()), path.file_name()) {
        (Some(dir), Some(name)) => dir.join(name),
        _ => path.to_path_buf(),
    };
    let mut all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = all.iter().find(|(p, _)| *p == key).and_then(|(_, w)| w.upgrade()) {
        return t;
    }
    let t = Arc::new(VfsTimings::default());
    all.push((key, Arc::downgrade(&t)));
    t
}

thread_local! {
    /// The timings of the connection whose call runs on this thread.
    static CURRENT: RefCell<Option<Arc<VfsTimings>>> = const { RefCell::new(None) };
}

fn current() -> Option<Arc<VfsTimings>> {
    CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()
}

/// A connection's call in progress: files SQLite opens meanwhile on this
/// thread are timed into `timings`, and the call's own time is added to
/// its `active` when dropped.
pub(crate) struct Active {
    start: Instant,
    timings: Arc<VfsTimings>,
    before: Option<Arc<VfsTimings>>,
}

impl Active {
    pub(crate) fn new(timings: &Arc<VfsTimings>) -> Active {
        let before = CURRENT.try_with(|c| c.replace(Some(timings.clone()))).ok().flatten();
        Active { start: Instant::now(), timings: timings.clone(), before }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        add(&self.timings.active, self.start);
        let before = self.before.take();
        let _ = CURRENT.try_with(|c| c.replace(before));
    }
}

/// Registers the shim (once per process); an error says why it could not
/// be, and connections then open on the default VFS untimed.
pub(crate) fn register() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which
        // SQLite keeps for the life of the process (storbench never
        // unregisters one), or null.
        let real = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) };
        if real.is_null() {
            return Err("SQLite has no default VFS to wrap".into());
        }
        // SAFETY: `real` is a valid, registered VFS (above).
        let r = unsafe { &*real };
        let size = std::mem::size_of::<TimedFile>() as c_int + r.szOsFile;
        let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
            iVersion: r.iVersion.min(3),
            szOsFile: size,
            mxPathname: r.mxPathname,
            pNext: std::ptr::null_mut(),
            zName: NAME_C.as_ptr(),
            pAppData: real.cast(),
            xOpen: Some(x_open),
            xDelete: Some(x_delete),
            xAccess: Some(x_access),
            xFullPathname: Some(x_full_pathname),
            xDlOpen: Some(x_dl_open),
            xDlError: Some(x_dl_error),
            xDlSym: Some(x_dl_sym),
            xDlClose: Some(x_dl_close),
            xRandomness: Some(x_randomness),
            xSleep: Some(x_sleep),
            xCurrentTime: Some(x_current_time),
            xGetLastError: Some(x_get_last_error),
            xCurrentTimeInt64: Some(x_current_time_int64),
            xSetSystemCall: Some(x_set_system_call),
            xGetSystemCall: Some(x_get_system_call),
            xNextSystemCall: Some(x_next_system_call),
        }));
        // SAFETY: `vfs` is leaked, so it lives as long as the process, as
        // SQLite requires of a registered VFS; it is registered once (the
        // OnceLock), not as the default.
        let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(format!("SQLite refused to register the {NAME} VFS (code {rc})"))
        }
    })
    .clone()
}

/// Our file: SQLite's header (our methods), the timings it adds to (an
/// `Arc` turned into a pointer at open, back at close; null when
/// untimed), then the wrapped VFS's own file, `szOsFile` bytes of it.
#[repr(C)]
struct TimedFile {
    base: ffi::sqlite3_file,
    timings: *const VfsTimings,
}

/// The wrapped VFS of ours.
///
/// # Safety
/// `vfs` is the VFS [`register`] made (SQLite passes it to its methods).
unsafe fn real_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: per the contract, `vfs` is ours, whose pAppData is the
    // wrapped VFS.
    unsafe { (*vfs).pAppData.cast() }
}

/// The wrapped file behind one of ours.
///
/// # Safety
/// `f` is a file our `x_open` was given (`szOsFile` bytes, so the wrapped
/// file follows our header).
unsafe fn real_file(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    // SAFETY: per the contract the allocation is our header plus the
    // wrapped file; TimedFile's size keeps pointer alignment.
    unsafe { f.cast::<u8>().add(std::mem::size_of::<TimedFile>()).cast() }
}

/// Forwards a VFS method to the wrapped VFS's; `$none` when it has none.
macro_rules! forward_vfs {
    ($name:ident, $field:ident, ($($a:ident: $t:ty),*) -> $r:ty, $none:expr) => {
        unsafe extern "C" fn $name(vfs: *mut ffi::sqlite3_vfs, $($a: $t),*) -> $r {
            // SAFETY: SQLite calls this with our VFS; the wrapped VFS gets
            // the same arguments SQLite gave us.
            unsafe {
                let real = real_vfs(vfs);
                match (*real).$field {
                    Some(f) => f(real, $($a),*),
                    None => $none,
                }
            }
        }
    };
}

forward_vfs!(x_delete, xDelete, (z: *const c_char, sync_dir: c_int) -> c_int, ffi::SQLITE_IOERR_DELETE);
forward_vfs!(
    x_access,
    xAccess,
    (z: *const c_char, flags: c_int, out: *mut c_int) -> c_int,
    ffi::SQLITE_IOERR_ACCESS
);
forward_vfs!(
    x_full_pathname,
    xFullPathname,
    (z: *const c_char, n: c_int, out: *mut c_char) -> c_int,
    ffi::SQLITE_CANTOPEN
);
forward_vfs!(x_dl_open, xDlOpen, (z: *const c_char) -> *mut c_void, std::ptr::null_mut());
forward_vfs!(x_dl_error, xDlError, (n: c_int, out: *mut c_char) -> (), ());
/// What `xDlSym` returns: a symbol, as SQLite types it.
type DlSym = Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)>;
forward_vfs!(x_dl_sym, xDlSym, (h: *mut c_void, z: *const c_char) -> DlSym, None);
forward_vfs!(x_dl_close, xDlClose, (h: *mut c_void) -> (), ());
forward_vfs!(x_randomness, xRandomness, (n: c_int, out: *mut c_char) -> c_int, 0);
forward_vfs!(x_current_time, xCurrentTime, (out: *mut f64) -> c_int, ffi::SQLITE_ERROR);
forward_vfs!(x_get_last_error, xGetLastError, (n: c_int, out: *mut c_char) -> c_int, 0);
forward_vfs!(
    x_current_time_int64,
    xCurrentTimeInt64,
    (out: *mut ffi::sqlite3_int64) -> c_int,
    ffi::SQLITE_ERROR
);
forward_vfs!(
    x_set_system_call,
    xSetSystemCall,
    (z: *const c_char, p: ffi::sqlite3_syscall_ptr) -> c_int,
    ffi::SQLITE_NOTFOUND
);
forward_vfs!(x_get_system_call, xGetSystemCall, (z: *const c_char) -> ffi::sqlite3_syscall_ptr, None);
forward_vfs!(x_next_system_call, xNextSystemCall, (z: *const c_char) -> *const c_char, std::ptr::null());
forward_vfs!(x_sleep_real, xSleep, (us: c_int) -> c_int, 0);

/// `xSleep`, timed as the busy handler's wait for another connection.
unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, us: c_int) -> c_int {
    let t = Instant::now();
    // SAFETY: forwarded as SQLite called it.
    let slept = unsafe { x_sleep_real(vfs, us) };
    if let Some(timings) = current() {
        add(&timings.busy, t);
    }
    slept
}

/// `xOpen`: opens the wrapped file behind our header and, when it set
/// methods, puts ours (of the same version) in front of them.
unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite gives our VFS and `szOsFile` (header + wrapped file)
    // bytes at `file`; the wrapped xOpen gets its part and the arguments
    // SQLite gave us. SQLite calls xClose (ours) exactly when pMethods is
    // set after xOpen, even on failure; when it is not, nothing else
    // holds the timings, so they are released here.
    unsafe {
        let ours = file.cast::<TimedFile>();
        (*ours).base.pMethods = std::ptr::null();
        (*ours).timings = current().map_or(std::ptr::null(), Arc::into_raw);
        let real = real_vfs(vfs);
        let inner = real_file(file);
        let rc = match (*real).xOpen {
            Some(f) => f(real, name, inner, flags, out_flags),
            None => ffi::SQLITE_CANTOPEN,
        };
        if (*inner).pMethods.is_null() {
            release(ours);
        } else {
            let v = (*(*inner).pMethods).iVersion.clamp(1, 3);
            (*ours).base.pMethods = &METHODS[(v - 1) as usize];
        }
        rc
    }
}

/// Drops the file's hold on its timings.
///
/// # Safety
/// `f` is one of our files, not released before.
unsafe fn release(f: *mut TimedFile) {
    // SAFETY: a non-null `timings` came from Arc::into_raw in x_open and
    // is turned back once (it is nulled here).
    unsafe {
        if !(*f).timings.is_null() {
            drop(Arc::from_raw((*f).timings));
            (*f).timings = std::ptr::null();
        }
    }
}

/// Forwards a file method to the wrapped file's; `$none` when it has none.
macro_rules! forward_file {
    ($name:ident, $field:ident, ($($a:ident: $t:ty),*) -> $r:ty, $none:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($a: $t),*) -> $r {
            // SAFETY: SQLite calls this with one of our open files, whose
            // wrapped file has methods (x_open set ours only then).
            unsafe {
                let inner = real_file(file);
                match (*(*inner).pMethods).$field {
                    Some(f) => f(inner, $($a),*),
                    None => $none,
                }
            }
        }
    };
}

/// A forwarded file method whose time is added to one of the timings.
macro_rules! timed_file {
    ($name:ident, $plain:ident, $counter:ident, ($($a:ident: $t:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($a: $t),*) -> c_int {
            let t = Instant::now();
            // SAFETY: forwarded as SQLite called it.
            let rc = unsafe { $plain(file, $($a),*) };
            // SAFETY: `file` is ours and open, so its timings (when not
            // null) are held until its xClose.
            if let Some(timings) = unsafe { (*file.cast::<TimedFile>()).timings.as_ref() } {
                add(&timings.$counter, t);
            }
            rc
        }
    };
}

forward_file!(
    read_plain,
    xRead,
    (buf: *mut c_void, n: c_int, off: ffi::sqlite3_int64) -> c_int,
    ffi::SQLITE_IOERR_READ
);
forward_file!(
    write_plain,
    xWrite,
    (buf: *const c_void, n: c_int, off: ffi::sqlite3_int64) -> c_int,
    ffi::SQLITE_IOERR_WRITE
);
forward_file!(truncate_plain, xTruncate, (size: ffi::sqlite3_int64) -> c_int, ffi::SQLITE_IOERR_TRUNCATE);
forward_file!(sync_plain, xSync, (flags: c_int) -> c_int, ffi::SQLITE_IOERR_FSYNC);
timed_file!(x_read, read_plain, read, (buf: *mut c_void, n: c_int, off: ffi::sqlite3_int64));
timed_file!(x_write, write_plain, write, (buf: *const c_void, n: c_int, off: ffi::sqlite3_int64));
timed_file!(x_truncate, truncate_plain, write, (size: ffi::sqlite3_int64));
timed_file!(x_sync, sync_plain, sync, (flags: c_int));
forward_file!(close_plain, xClose, () -> c_int, ffi::SQLITE_OK);
forward_file!(x_file_size, xFileSize, (size: *mut ffi::sqlite3_int64) -> c_int, ffi::SQLITE_IOERR_FSTAT);
forward_file!(x_lock, xLock, (level: c_int) -> c_int, ffi::SQLITE_IOERR_LOCK);
forward_file!(x_unlock, xUnlock, (level: c_int) -> c_int, ffi::SQLITE_IOERR_UNLOCK);
forward_file!(
    x_check_reserved_lock,
    xCheckReservedLock,
    (out: *mut c_int) -> c_int,
    ffi::SQLITE_IOERR_CHECKRESERVEDLOCK
);
forward_file!(x_file_control, xFileControl, (op: c_int, arg: *mut c_void) -> c_int, ffi::SQLITE_NOTFOUND);
forward_file!(x_sector_size, xSectorSize, () -> c_int, 4096);
forward_file!(x_device_characteristics, xDeviceCharacteristics, () -> c_int, 0);
forward_file!(
    x_shm_map,
    xShmMap,
    (pg: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int,
    ffi::SQLITE_IOERR_SHMMAP
);
forward_file!(x_shm_lock, xShmLock, (off: c_int, n: c_int, flags: c_int) -> c_int, ffi::SQLITE_IOERR_SHMLOCK);
forward_file!(x_shm_barrier, xShmBarrier, () -> (), ());
forward_file!(x_shm_unmap, xShmUnmap, (delete: c_int) -> c_int, ffi::SQLITE_OK);
forward_file!(x_fetch, xFetch, (off: ffi::sqlite3_int64, n: c_int, out: *mut *mut c_void) -> c_int, {
    // No mapping: SQLite reads through xRead instead.
    *out = std::ptr::null_mut();
    ffi::SQLITE_OK
});
forward_file!(x_unfetch, xUnfetch, (off: ffi::sqlite3_int64, p: *mut c_void) -> c_int, ffi::SQLITE_OK);

/// `xClose`: closes the wrapped file, then drops the timings it held.
unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes each file once; after the wrapped close nothing
    // times into it.
    unsafe {
        let rc = close_plain(file);
        release(file.cast());
        rc
    }
}

/// Our methods, one table per version: a file gets the version of its
/// wrapped file's, so SQLite never calls a method the wrapped one lacks.
static METHODS: [ffi::sqlite3_io_methods; 3] = [methods(1), methods(2), methods(3)];

const fn methods(version: c_int) -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: version,
        xClose: Some(x_close),
        xRead: Some(x_read),
        xWrite: Some(x_write),
        xTruncate: Some(x_truncate),
        xSync: Some(x_sync),
        xFileSize: Some(x_file_size),
        xLock: Some(x_lock),
        xUnlock: Some(x_unlock),
        xCheckReservedLock: Some(x_check_reserved_lock),
        xFileControl: Some(x_file_control),
        xSectorSize: Some(x_sector_size),
        xDeviceCharacteristics: Some(x_device_characteristics),
        xShmMap: Some(x_shm_map),
        xShmLock: Some(x_shm_lock),
        xShmBarrier: Some(x_shm_barrier),
        xShmUnmap: Some(x_shm_unmap),
        xFetch: Some(x_fetch),
        xUnfetch: Some(x_unfetch),
    }
}
