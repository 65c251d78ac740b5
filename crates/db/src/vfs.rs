//! SQLite's waits, seen in its VFS (issue 28): a `sqlite3_vfs` named
//! [`NAME`], registered once per process, that wraps the default VFS
//! (`unix`) and forwards every call to it unchanged, keeping for each
//! connection the state it is in now, as PostgreSQL's `pg_stat_activity`
//! keeps a backend's: not in a call of SQLite; in one and running (CPU);
//! or in one and waiting in `xRead`, `xWrite` (and `xTruncate`), `xSync`,
//! or the VFS's `xSleep`, which SQLite's busy handler sleeps in while
//! another connection holds the write lock. A call of a `SqliteConn` (its
//! close included) is [`Active`]. The wait sampler (`waits.rs`) reads
//! every open connection's state at each of its looks (ten a second) and
//! counts connections per class, exactly as it counts a server's
//! sessions.
//!
//! Cheap on the hot path (the goal: under 1 % of a CPU-bound run):
//! entering or leaving a call or a wait is a load and a store or two of
//! the connection's own state, relaxed, on a cache line that only its
//! thread writes ([`ConnState`]); no clock is read, no lock taken, no
//! reference count touched (a file holds its connection's state from open
//! to close). What it must not do: time anything. Time comes from the
//! looks, as for PostgreSQL: a class's share of the looks is its share of
//! the connections' time, to the sampling's error.
//!
//! Which connection a file belongs to: the one whose call is running on
//! this thread when SQLite opens the file (its main file at connect, its
//! WAL and temporary files on first use; a connection runs on one thread
//! at a time, and SQLite does its file I/O on the calling thread). A file
//! opened outside such a call (none in storbench) is forwarded but not
//! seen.
//!
//! This is the crate's only `unsafe` code: C-ABI callbacks over the
//! structures SQLite hands them. Each wrapper finds the wrapped file right
//! behind its own header (the layout SQLite's shims, e.g. `vfstrace.c`,
//! use) and calls the wrapped VFS's method of the same name with the same
//! arguments; a method the wrapped VFS or file does not have is reported
//! as SQLite's "not available" for it.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rusqlite::ffi;

use crate::device::{DevFile, FileDevice};

/// The shim's VFS name, as connections name it when they open.
pub const NAME: &str = "storbench-timed";
const NAME_C: &std::ffi::CStr = c"storbench-timed";

/// A connection's states, in `ConnState::state`: not in a call, in one
/// and running, in one of the waits (every state from `READ` on is a
/// wait).
const IDLE: u8 = 0;
const CPU: u8 = 1;
const READ: u8 = 2;
const WRITE: u8 = 3;
const SYNC: u8 = 4;
const BUSY: u8 = 5;
const STATES: usize = 6;

/// One connection's state now, written by the thread running the
/// connection (one at a time: a connection is used by one thread at a
/// time, and its files' I/O happens in its calls), read by the sampler's
/// looks. A single byte, so a look sees a whole state; relaxed, as a look
/// needs no order with anything else (a look a few nanoseconds early or
/// late is still a sample). A cache line of its own: no other
/// connection's thread writes near it.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct ConnState {
    state: AtomicU8,
    /// The device under the database's files (`?model=`, `device.rs`),
    /// which the files this connection opens are given.
    device: Option<Arc<dyn FileDevice>>,
}

impl ConnState {
    /// A wait of `class` begins; the state to go back to when it ends
    /// (`None`: it was in a wait already, which keeps the state — none
    /// nests in SQLite; the outer one names it).
    #[inline(always)]
    fn wait_begins(&self, class: u8) -> Option<u8> {
        let before = self.state.load(Ordering::Relaxed);
        if before >= READ {
            return None;
        }
        self.state.store(class, Ordering::Relaxed);
        Some(before)
    }

    /// The wait ends: back to the state it began in.
    #[inline(always)]
    fn wait_ends(&self, before: u8) {
        self.state.store(before, Ordering::Relaxed);
    }

    /// The state now. Any thread.
    fn now(&self) -> u8 {
        self.state.load(Ordering::Relaxed)
    }
}

/// A database's connections in this process (every one through the
/// timing VFS while it is open), for the sampler's looks.
#[derive(Debug, Default)]
pub struct VfsConnections {
    open: Mutex<Vec<Arc<ConnState>>>,
    /// The device under the database's files, set by its first connection
    /// that names one (`?model=`); every later connection's files share it,
    /// as files on one device do.
    device: OnceLock<Arc<dyn FileDevice>>,
}

/// How many of a database's connections are in each state at one look,
/// as PostgreSQL's `pg_stat_activity` counts sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VfsStates {
    /// Open, and not inside a call of SQLite (storbench's own time, or a
    /// transaction left open between statements).
    pub idle: u32,
    /// Inside a call (a statement, begin, commit, load, close) and in none
    /// of the waits below: running, or runnable.
    pub cpu: u32,
    /// In `xRead`: a page read from the database or WAL file.
    pub read: u32,
    /// In `xWrite` or `xTruncate`.
    pub write: u32,
    /// In `xSync`: the flush of the WAL (at commit) or of the database
    /// file (at a checkpoint).
    pub sync: u32,
    /// In `xSleep`: the busy handler waiting for another connection's
    /// lock.
    pub busy: u32,
}

impl VfsStates {
    /// The connections inside a call: those not idle.
    pub fn active(&self) -> u32 {
        self.cpu + self.read + self.write + self.sync + self.busy
    }
}

impl VfsConnections {
    /// One look: the open connections counted by the state each is in
    /// now. Connections closed since the last look are dropped from the
    /// list here.
    pub fn states(&self) -> VfsStates {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = [0u32; STATES];
        // Only this list holds a gone one: the connection and its files
        // are closed, and nothing writes to it any more.
        open.retain(|c| Arc::strong_count(c) > 1);
        for c in open.iter() {
            n[(c.now() as usize).min(STATES - 1)] += 1;
        }
        VfsStates {
            idle: n[IDLE as usize],
            cpu: n[CPU as usize],
            read: n[READ as usize],
            write: n[WRITE as usize],
            sync: n[SYNC as usize],
            busy: n[BUSY as usize],
        }
    }

    /// The device under the database's files: `dev` when it has none yet,
    /// else the one it has (the first connection's).
    pub(crate) fn device(&self, dev: Arc<dyn FileDevice>) -> Arc<dyn FileDevice> {
        self.device.get_or_init(|| dev).clone()
    }

    /// The device under the database's files, if it has one.
    pub(crate) fn current_device(&self) -> Option<Arc<dyn FileDevice>> {
        self.device.get().cloned()
    }

    /// The state of a new connection to the database.
    pub(crate) fn connect(&self) -> Arc<ConnState> {
        let c = Arc::new(ConnState { device: self.device.get().cloned(), ..ConnState::default() });
        self.open.lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
        c
    }
}

/// The connections of the database at `path`, shared by every connection
/// to it in this process (the path as its directory resolves, so two
/// spellings of one file share them).
pub(crate) fn connections_for(path: &Path) -> Arc<VfsConnections> {
    static ALL: Mutex<Vec<(PathBuf, Weak<VfsConnections>)>> = Mutex::new(Vec::new());
    let key = match (path.parent().and_then(|p| std::fs::canonicalize(p).ok()), path.file_name()) {
        (Some(dir), Some(name)) => dir.join(name),
        _ => path.to_path_buf(),
    };
    let mut all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = all.iter().find(|(p, _)| *p == key).and_then(|(_, w)| w.upgrade()) {
        return t;
    }
    let t = Arc::new(VfsConnections::default());
    all.push((key, Arc::downgrade(&t)));
    t
}

thread_local! {
    /// The state of the connection whose call runs on this thread (an
    /// `Arc`'s pointer, held by the [`Active`] that set it; null outside
    /// calls).
    static CURRENT: Cell<*const ConnState> = const { Cell::new(std::ptr::null()) };
}

/// A connection's call in progress: the connection is in a call (CPU,
/// unless a wait says otherwise) until it ends, and files SQLite opens
/// meanwhile on this thread are the connection's (a call inside another
/// of the same connection changes nothing).
pub(crate) struct Active<'a> {
    conn: &'a ConnState,
    outer: bool,
    before: *const ConnState,
}

impl<'a> Active<'a> {
    /// The call begins.
    #[inline(always)]
    pub(crate) fn new(conn: &'a Arc<ConnState>) -> Active<'a> {
        let before = CURRENT.try_with(|c| c.replace(Arc::as_ptr(conn))).unwrap_or(std::ptr::null());
        let outer = conn.state.load(Ordering::Relaxed) == IDLE;
        if outer {
            conn.state.store(CPU, Ordering::Relaxed);
        }
        Active { conn, outer, before }
    }
}

impl Drop for Active<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.outer {
            self.conn.state.store(IDLE, Ordering::Relaxed);
        }
        let _ = CURRENT.try_with(|c| c.set(self.before));
    }
}

/// Registers the shim (once per process); an error says why it could not
/// be, and connections then open on the default VFS unseen.
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

/// Our file: SQLite's header (our methods), the state of the connection
/// it belongs to (an `Arc`'s pointer, its count raised at open and
/// lowered at close; null when no connection's), then the wrapped VFS's
/// own file, `szOsFile` bytes of it.
#[repr(C)]
struct TimedFile {
    base: ffi::sqlite3_file,
    conn: *const ConnState,
    /// The file on its connection's device (null: none, as on a database
    /// without `?model=`); owned, freed with the file.
    dev: *mut DevFile,
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

forward_vfs!(x_delete_real, xDelete, (z: *const c_char, sync_dir: c_int) -> c_int, ffi::SQLITE_IOERR_DELETE);

/// `xDelete`; a file deleted on a device (SQLite deletes the WAL when its
/// last connection closes) is new to it when it is made again.
unsafe extern "C" fn x_delete(vfs: *mut ffi::sqlite3_vfs, z: *const c_char, sync_dir: c_int) -> c_int {
    // SAFETY: forwarded as SQLite called it; `z` is a path SQLite gives
    // (NUL-terminated) and a non-null CURRENT is the state of the
    // connection whose call runs on this thread (see `x_sleep`).
    unsafe {
        let rc = x_delete_real(vfs, z, sync_dir);
        let current = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
        if let (Some(c), false) = (current.as_ref(), z.is_null()) {
            if let Some(dev) = &c.device {
                dev.delete(Path::new(std::ffi::CStr::from_ptr(z).to_string_lossy().as_ref()));
            }
        }
        rc
    }
}
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

/// `xSleep`, seen as the busy handler's wait for another connection.
unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, us: c_int) -> c_int {
    let current = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
    // SAFETY: a non-null CURRENT is the state of the connection whose
    // call runs on this thread, which its `Active` keeps alive until it
    // resets CURRENT.
    let conn = unsafe { current.as_ref() };
    let before = conn.and_then(|c| c.wait_begins(BUSY));
    // SAFETY: forwarded as SQLite called it.
    let slept = unsafe { x_sleep_real(vfs, us) };
    if let (Some(c), Some(before)) = (conn, before) {
        c.wait_ends(before);
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
    // holds the state, so they are released here. A non-null CURRENT
    // is an `Arc`'s pointer that its `Active` keeps alive meanwhile, so
    // its count can be raised.
    unsafe {
        let ours = file.cast::<TimedFile>();
        (*ours).base.pMethods = std::ptr::null();
        let current = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
        if !current.is_null() {
            Arc::increment_strong_count(current);
        }
        (*ours).conn = current;
        (*ours).dev = std::ptr::null_mut();
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
            // A named file of a connection with a device is on it (a
            // temporary file has no name and is never synced).
            if let (Some(c), false, ffi::SQLITE_OK) = (current.as_ref(), name.is_null(), rc) {
                if let Some(dev) = &c.device {
                    let path = std::ffi::CStr::from_ptr(name).to_string_lossy();
                    let id = dev.open(Path::new(path.as_ref()));
                    (*ours).dev = Box::into_raw(Box::new(DevFile { dev: dev.clone(), id }));
                }
            }
        }
        rc
    }
}

/// Drops the file's hold on its connection's state.
///
/// # Safety
/// `f` is one of our files, not released before.
unsafe fn release(f: *mut TimedFile) {
    // SAFETY: a non-null `conn` had its count raised in x_open and is
    // lowered once (it is nulled here).
    unsafe {
        if !(*f).conn.is_null() {
            Arc::decrement_strong_count((*f).conn);
            (*f).conn = std::ptr::null();
        }
        // A non-null `dev` is the Box x_open leaked, freed once (nulled).
        if !(*f).dev.is_null() {
            drop(Box::from_raw((*f).dev));
            (*f).dev = std::ptr::null_mut();
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

/// A forwarded file method that is a wait of class `$class` of the file's
/// connection while it runs.
macro_rules! wait_file {
    ($name:ident, $plain:ident, $class:ident, ($($a:ident: $t:ty),*), |$d:ident| $dev:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($a: $t),*) -> c_int {
            // SAFETY: `file` is ours and open, so its connection's state
            // (when not null) is held until its xClose, and so is its
            // device file (when not null).
            let (conn, dev) = unsafe {
                let ours = file.cast::<TimedFile>();
                ((*ours).conn.as_ref(), (*ours).dev.as_ref())
            };
            let before = conn.and_then(|c| c.wait_begins($class));
            // SAFETY: forwarded as SQLite called it.
            let rc = unsafe { $plain(file, $($a),*) };
            // What the device makes of a call that succeeded (a sync's
            // wait for the writeback and the flush, inside the wait).
            if let (Some($d), ffi::SQLITE_OK) = (dev, rc) {
                $dev;
            }
            if let (Some(c), Some(before)) = (conn, before) {
                c.wait_ends(before);
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
forward_file!(sync_forwarded, xSync, (flags: c_int) -> c_int, ffi::SQLITE_IOERR_FSYNC);

/// `xSync` of the file below, unless the file is on a device model: then
/// the model's sync stands for it (`x_sync` waits for it) and the file's
/// own is not made, so the time a commit waits is the model's and not the
/// model's plus the real disk's.
///
/// # Safety
/// `file` is one of our open files.
unsafe fn sync_plain(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: per the contract; its device file, when set, lives until
    // its xClose.
    unsafe {
        if (*file.cast::<TimedFile>()).dev.is_null() {
            sync_forwarded(file, flags)
        } else {
            ffi::SQLITE_OK
        }
    }
}
wait_file!(x_read, read_plain, READ, (buf: *mut c_void, n: c_int, off: ffi::sqlite3_int64), |d| d
    .dev
    .read(d.id, off as u64, n as u64));
wait_file!(x_write, write_plain, WRITE, (buf: *const c_void, n: c_int, off: ffi::sqlite3_int64), |d| d
    .dev
    .write(d.id, off as u64, n as u64));
wait_file!(x_truncate, truncate_plain, WRITE, (size: ffi::sqlite3_int64), |d| d.dev.truncate(d.id, size as u64));
wait_file!(x_sync, sync_plain, SYNC, (flags: c_int), |d| d.dev.sync(d.id));
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

/// `xClose`: closes the wrapped file, then drops its hold on the state.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_cpu_a_wait_in_it_names_it_and_a_wait_inside_a_wait_keeps_the_outer() {
        let db = VfsConnections::default();
        let (a, b) = (db.connect(), db.connect());
        assert_eq!(db.states(), VfsStates { idle: 2, ..VfsStates::default() });
        let call = Active::new(&a);
        assert_eq!(db.states(), VfsStates { idle: 1, cpu: 1, ..VfsStates::default() });
        // A call inside the call changes nothing, and ending it ends
        // nothing.
        drop(Active::new(&a));
        assert_eq!(db.states().cpu, 1);
        let sync = a.wait_begins(SYNC).expect("not in a wait");
        assert_eq!(db.states(), VfsStates { idle: 1, sync: 1, ..VfsStates::default() });
        // A wait inside the wait: the outer one names the state until it
        // ends.
        assert_eq!(a.wait_begins(BUSY), None);
        assert_eq!(db.states().sync, 1);
        a.wait_ends(sync);
        assert_eq!(db.states(), VfsStates { idle: 1, cpu: 1, ..VfsStates::default() });
        // The other connection's wait is its own.
        let _b_call = Active::new(&b);
        let read = b.wait_begins(READ).unwrap();
        assert_eq!(db.states(), VfsStates { cpu: 1, read: 1, ..VfsStates::default() });
        assert_eq!(db.states().active(), 2);
        b.wait_ends(read);
        drop(call);
        assert_eq!(db.states(), VfsStates { idle: 1, cpu: 1, ..VfsStates::default() });
    }

    #[test]
    fn a_closed_connection_is_not_counted_and_a_call_sets_the_thread_s_connection() {
        let db = VfsConnections::default();
        let a = db.connect();
        {
            let _call = Active::new(&a);
            assert_eq!(CURRENT.with(Cell::get), Arc::as_ptr(&a));
        }
        assert!(CURRENT.with(Cell::get).is_null());
        drop(a);
        assert_eq!(db.states(), VfsStates::default());
        assert!(db.open.lock().unwrap().is_empty());
    }
}
