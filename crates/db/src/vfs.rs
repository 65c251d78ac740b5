//! SQLite's waits, timed in its VFS (issue 28): a `sqlite3_vfs` named
//! [`NAME`], registered once per process, that wraps the default VFS
//! (`unix`) and forwards every call to it unchanged, timing the calls a
//! connection waits in — `xRead`, `xWrite` (and `xTruncate`), `xSync`, and
//! the VFS's `xSleep`, which SQLite's busy handler sleeps in while another
//! connection holds the write lock — beside the time storbench's
//! connections spend inside SQLite at all (`active`: every call of a
//! `SqliteConn`, timed by [`Active`], its close included). `waits.rs`
//! turns them into the same per-second shares the servers' sessions give.
//!
//! Cheap on the hot path (the goal: under 1 % of a CPU-bound run): each
//! connection has counters of its own ([`ConnTimes`], a cache line that
//! only its thread writes, with plain loads and stores, no atomic
//! read-modify-write), a file holds its connection's counters from open to
//! close (no reference count touched per call), and a timed call reads the
//! clock twice: the CPU's time-stamp counter where the kernel keeps time
//! by it (x86-64, clocksource `tsc`: invariant and the same on every
//! CPU; about 10 ns a read against 25-30 ns for `Instant::now()` on the
//! reference host), else the monotonic clock. A database's
//! [`VfsTimings`] lists its connections' counters, read only by the wait
//! sampler's looks (ten a second) and folded into a closed total when a
//! connection is gone. A look counts a call or a wait in progress up to
//! the look, so each look holds the time between it and the last one,
//! nothing from before (a long call, or one begun before the sampler
//! opened, is not lumped into the look after it ends).
//!
//! Which connection a file belongs to: the one whose call is running on
//! this thread when SQLite opens the file (its main file at connect, its
//! WAL and temporary files on first use; a connection runs on one thread
//! at a time, and SQLite does its file I/O on the calling thread). A file
//! opened outside such a call (none in storbench) is forwarded but not
//! timed.
//!
//! This is the crate's only `unsafe` code: C-ABI callbacks over the
//! structures SQLite hands them, and the time-stamp counter. Each wrapper
//! finds the wrapped file right behind its own header (the layout SQLite's
//! shims, e.g. `vfstrace.c`, use) and calls the wrapped VFS's method of the
//! same name with the same arguments; a method the wrapped VFS or file does
//! not have is reported as SQLite's "not available" for it.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use rusqlite::ffi;

/// The shim's VFS name, as connections name it when they open.
pub const NAME: &str = "storbench-timed";
const NAME_C: &std::ffi::CStr = c"storbench-timed";

/// The clock the counters count in: ticks of the time-stamp counter, or
/// nanoseconds; never 0 (0 marks "no call in progress").
mod clock {
    use super::*;

    /// Ticks are the time-stamp counter's (set once, at registration).
    static TSC: AtomicBool = AtomicBool::new(false);
    /// Nanoseconds per tick as a fraction (ns, ticks), and the start of
    /// the monotonic clock's count.
    static SCALE: OnceLock<(u128, u128, Instant)> = OnceLock::new();

    /// Picks the clock, once: the time-stamp counter where the kernel's
    /// own clocksource is it (so it is invariant and synchronised),
    /// calibrated against the monotonic clock over 2 ms.
    pub(super) fn init() {
        SCALE.get_or_init(|| {
            let epoch = Instant::now();
            match tsc_per_ns() {
                Some((ns, ticks)) => {
                    TSC.store(true, Ordering::Relaxed);
                    (ns, ticks, epoch)
                }
                None => (1, 1, epoch),
            }
        });
    }

    #[cfg(target_arch = "x86_64")]
    fn tsc_per_ns() -> Option<(u128, u128)> {
        let source =
            std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        if source.ok()?.trim() != "tsc" {
            return None;
        }
        // A tick read between two clock reads close together (a
        // preemption between them would misplace it).
        let pair = || {
            for _ in 0..100 {
                let a = Instant::now();
                let t = rdtsc();
                let b = Instant::now();
                if b - a < Duration::from_micros(5) {
                    return Some((a + (b - a) / 2, t));
                }
            }
            None
        };
        let (i0, t0) = pair()?;
        std::thread::sleep(Duration::from_millis(2));
        let (i1, t1) = pair()?;
        let (ns, ticks) = ((i1 - i0).as_nanos(), t1.checked_sub(t0)? as u128);
        (ns > 0 && ticks > 0).then_some((ns, ticks))
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn tsc_per_ns() -> Option<(u128, u128)> {
        None
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn rdtsc() -> u64 {
        // SAFETY: every x86-64 CPU has RDTSC; it reads a counter and
        // touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// Now, in ticks.
    #[inline(always)]
    pub(super) fn now() -> u64 {
        #[cfg(target_arch = "x86_64")]
        if TSC.load(Ordering::Relaxed) {
            return rdtsc().max(1);
        }
        let epoch = SCALE.get().map_or_else(Instant::now, |s| s.2);
        epoch.elapsed().as_nanos() as u64 + 1
    }

    /// Ticks as nanoseconds.
    pub(super) fn ns(ticks: u64) -> u64 {
        match SCALE.get() {
            Some(&(ns, per, _)) => (ticks as u128 * ns / per) as u64,
            None => ticks,
        }
    }
}

/// The classes of time, as indexes into [`ConnTimes`]' totals.
const READ: usize = 0;
const WRITE: usize = 1;
const SYNC: usize = 2;
const BUSY: usize = 3;
const ACTIVE: usize = 4;
const CLASSES: usize = 5;

/// One connection's time (ticks) per class, written by the thread running
/// the connection (one at a time: a connection is used by one thread at a
/// time, and its files' I/O happens in its calls), read by the sampler.
/// A call or wait in progress is its start; when it ends, its time is
/// added to its class's total and the start cleared, together, inside a
/// sequence lock (`seq` odd meanwhile), so a reader sees either the start
/// or the total with the call in it, never both or neither. Starting one
/// only stores its start, which a reader may see or not: both are whole.
/// Cache lines of its own: no other connection writes near it.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct ConnTimes {
    seq: AtomicU64,
    total: [AtomicU64; CLASSES],
    call_from: AtomicU64,
    wait_from: AtomicU64,
    wait_class: AtomicU64,
}

impl ConnTimes {
    /// Adds `ticks` to `class` and clears `from` (the start it ran from),
    /// as one change to readers.
    #[inline(always)]
    fn end(&self, class: usize, ticks: u64, from: &AtomicU64) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let t = &self.total[class];
        t.store(t.load(Ordering::Relaxed).wrapping_add(ticks), Ordering::Relaxed);
        from.store(0, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// A wait of `class` begins; `None` when one is already in progress
    /// (none nests in SQLite; the outer one keeps the time).
    #[inline(always)]
    fn wait_begins(&self, class: usize) -> Option<u64> {
        if self.wait_from.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let t = clock::now();
        self.wait_class.store(class as u64, Ordering::Relaxed);
        self.wait_from.store(t, Ordering::Release);
        Some(t)
    }

    /// The wait begun at `from` ends.
    #[inline(always)]
    fn wait_ends(&self, from: u64) {
        let class = self.wait_class.load(Ordering::Relaxed) as usize;
        self.end(class.min(BUSY), clock::now().saturating_sub(from), &self.wait_from);
    }

    /// The totals now (ticks), a call or wait in progress counted up to
    /// now. Any thread.
    fn read(&self) -> [u64; CLASSES] {
        loop {
            let s = self.seq.load(Ordering::Acquire);
            if s % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut v = [0; CLASSES];
            for (v, t) in v.iter_mut().zip(&self.total) {
                *v = t.load(Ordering::Relaxed);
            }
            let call = self.call_from.load(Ordering::Relaxed);
            let wait = self.wait_from.load(Ordering::Acquire);
            let class = self.wait_class.load(Ordering::Relaxed) as usize;
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != s {
                continue;
            }
            let now = clock::now();
            if call != 0 {
                v[ACTIVE] = v[ACTIVE].wrapping_add(now.saturating_sub(call));
            }
            if wait != 0 {
                v[class.min(BUSY)] = v[class.min(BUSY)].wrapping_add(now.saturating_sub(wait));
            }
            return v;
        }
    }
}

/// Time a database's connections in this process spent in SQLite and in
/// its VFS's calls, summed over them: every connection's counters while it
/// is open, and those of the closed ones.
#[derive(Debug, Default)]
pub struct VfsTimings {
    conns: Mutex<Conns>,
}

#[derive(Debug, Default)]
struct Conns {
    open: Vec<Arc<ConnTimes>>,
    closed: [u64; CLASSES],
}

/// [`VfsTimings`] read at one instant, in nanoseconds since the first
/// connection to the database opened.
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
    /// commit, load, close): what the times above are part of.
    pub active_ns: u64,
}

impl VfsTimings {
    /// The totals now: calls and waits in progress counted up to now.
    pub fn totals(&self) -> VfsTotals {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut sum = [0u64; CLASSES];
        let Conns { open, closed } = &mut *conns;
        open.retain(|c| {
            let v = c.read();
            // Only this list holds it: the connection and its files are
            // gone, and nothing writes to it any more.
            let gone = Arc::strong_count(c) == 1;
            let into = if gone { &mut *closed } else { &mut sum };
            for (a, b) in into.iter_mut().zip(v) {
                *a = a.wrapping_add(b);
            }
            !gone
        });
        for (a, b) in sum.iter_mut().zip(*closed) {
            *a = a.wrapping_add(b);
        }
        VfsTotals {
            read_ns: clock::ns(sum[READ]),
            write_ns: clock::ns(sum[WRITE]),
            sync_ns: clock::ns(sum[SYNC]),
            busy_ns: clock::ns(sum[BUSY]),
            active_ns: clock::ns(sum[ACTIVE]),
        }
    }

    /// Counters for a new connection to the database.
    pub(crate) fn connect(&self) -> Arc<ConnTimes> {
        let c = Arc::new(ConnTimes::default());
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).open.push(c.clone());
        c
    }
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
    /// The counters of the connection whose call runs on this thread (an
    /// `Arc`'s pointer, held by the [`Active`] that set it; null outside
    /// calls).
    static CURRENT: Cell<*const ConnTimes> = const { Cell::new(std::ptr::null()) };
}

/// A connection's call in progress: files SQLite opens meanwhile on this
/// thread are timed into the connection's counters, and the call's time
/// is its `active` time (a call inside another of the same connection's
/// adds nothing).
pub(crate) struct Active<'a> {
    conn: &'a Arc<ConnTimes>,
    from: u64,
    before: *const ConnTimes,
}

impl<'a> Active<'a> {
    /// The call begins.
    #[inline(always)]
    pub(crate) fn new(conn: &'a Arc<ConnTimes>) -> Active<'a> {
        let before = CURRENT.try_with(|c| c.replace(Arc::as_ptr(conn))).unwrap_or(std::ptr::null());
        let from = if conn.call_from.load(Ordering::Relaxed) == 0 {
            let t = clock::now();
            conn.call_from.store(t, Ordering::Relaxed);
            t
        } else {
            0
        };
        Active { conn, from, before }
    }
}

impl Drop for Active<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.from != 0 {
            self.conn.end(ACTIVE, clock::now().saturating_sub(self.from), &self.conn.call_from);
        }
        let _ = CURRENT.try_with(|c| c.set(self.before));
    }
}

/// Registers the shim (once per process); an error says why it could not
/// be, and connections then open on the default VFS untimed.
pub(crate) fn register() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        clock::init();
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

/// Our file: SQLite's header (our methods), the counters of the
/// connection it belongs to (an `Arc`'s pointer, its count raised at open
/// and lowered at close; null when untimed), then the wrapped VFS's own
/// file, `szOsFile` bytes of it.
#[repr(C)]
struct TimedFile {
    base: ffi::sqlite3_file,
    conn: *const ConnTimes,
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
    let current = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
    // SAFETY: a non-null CURRENT is the counters of the connection whose
    // call runs on this thread, which its `Active` keeps alive until it
    // resets CURRENT.
    let conn = unsafe { current.as_ref() };
    let from = conn.and_then(|c| c.wait_begins(BUSY));
    // SAFETY: forwarded as SQLite called it.
    let slept = unsafe { x_sleep_real(vfs, us) };
    if let (Some(c), Some(from)) = (conn, from) {
        c.wait_ends(from);
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
    // holds the counters, so they are released here. A non-null CURRENT
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

/// Drops the file's hold on its connection's counters.
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

/// A forwarded file method timed as a wait of class `$class` of the
/// file's connection.
macro_rules! timed_file {
    ($name:ident, $plain:ident, $class:ident, ($($a:ident: $t:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($a: $t),*) -> c_int {
            // SAFETY: `file` is ours and open, so its connection's counters
            // (when not null) are held until its xClose.
            let conn = unsafe { (*file.cast::<TimedFile>()).conn.as_ref() };
            let from = conn.and_then(|c| c.wait_begins($class));
            // SAFETY: forwarded as SQLite called it.
            let rc = unsafe { $plain(file, $($a),*) };
            if let (Some(c), Some(from)) = (conn, from) {
                c.wait_ends(from);
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
timed_file!(x_read, read_plain, READ, (buf: *mut c_void, n: c_int, off: ffi::sqlite3_int64));
timed_file!(x_write, write_plain, WRITE, (buf: *const c_void, n: c_int, off: ffi::sqlite3_int64));
timed_file!(x_truncate, truncate_plain, WRITE, (size: ffi::sqlite3_int64));
timed_file!(x_sync, sync_plain, SYNC, (flags: c_int));
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

/// `xClose`: closes the wrapped file, then drops its hold on the counters.
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
