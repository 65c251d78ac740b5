//! The database's own wait events, sampled as an active-session history
//! (issue 28): ten times a second, on a connection of its own, what each
//! active session of the benchmark's database is waiting on — PostgreSQL's
//! `pg_stat_activity.wait_event_type`/`wait_event`, MariaDB's and MySQL's
//! `performance_schema.events_waits_current` — with an active session that
//! waits on nothing counted as `CPU` (running, or runnable). A step takes
//! the seconds it spans as per-second shares per wait class
//! ([`WaitSampler::window`]): `wait.share.IO.WALSync` = the fraction of the
//! second's sampled active sessions that waited on `IO:WALSync`; a second's
//! shares sum to 1, and `wait.aas` (average active sessions) says how many
//! sessions the shares are of.
//!
//! SQLite has no server and no sessions to look at: storbench's
//! connections keep their own state, as a server keeps its sessions'
//! (`vfs.rs`, a shim over the default VFS), and a look counts the
//! database's open connections by the state each is in at the look,
//! exactly as PostgreSQL's look counts sessions: in `xRead` (`IO.Read`),
//! `xWrite` or `xTruncate` (`IO.Write`), `xSync` (`IO.Sync`), the busy
//! handler's `xSleep` (`Lock.Busy`, waiting for another connection's write
//! lock), or inside a call of SQLite (a statement, begin, commit) and in
//! none of these (`CPU`); a connection outside SQLite's calls is not
//! active and not counted. So `wait.aas` is the average number of
//! connections inside SQLite, and the shares are computed as a server's.
//!
//! It never blocks the run: its queries run in its own thread on its own
//! connection; a failed look is skipped (counted in `wait.missed`), a lost
//! connection ends the sampling. It never prints, and never changes the
//! server's settings: where the server does not keep waits
//! (`performance_schema=OFF`, or its `events_waits_current` consumer off;
//! SQLite opened with `?timing=off`) [`WaitSource::open`] says why and
//! nothing is sampled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use storbench_metrics::{StepReport, Unit};

use crate::{Connection, Dialect, Stmt, VfsConnections};

/// Looks per second.
pub const HZ: u32 = 10;
/// The class of an active session that waits on nothing.
pub const CPU: &str = "CPU";
/// The prefix of a wait class's share (figure and per-second sample).
pub const SHARE: &str = "wait.share.";
/// Average active sessions (figure and per-second sample).
pub const AAS: &str = "wait.aas";
/// Looks taken in the measured window (figure).
pub const LOOKS: &str = "wait.samples";
/// Looks that failed in the measured window (figure).
pub const MISSED: &str = "wait.missed";

/// What the active sessions wait on at one instant: class → sessions (for
/// SQLite: its connections inside a call, by the state each is in).
/// A class is `Type.Event` (`IO.WALSync`, `Lock.transactionid`) or `CPU`.
pub type Snapshot = Vec<(String, f64)>;

/// `IO.WALSync` as people read it: `IO:WALSync`.
pub fn display_class(class: &str) -> String {
    class.replacen('.', ":", 1)
}

/// PostgreSQL: the active sessions of this database (its client backends
/// and their parallel workers) but the sampler's own, grouped in the
/// server. It reads `pg_stat_get_activity` directly, not the
/// `pg_stat_activity` view (which joins `pg_database` and `pg_authid` for
/// names nobody here reads), with the database's oid and the sampler's pid
/// filled in at [`WaitSource::open`]: one prepared statement on one
/// persistent connection, looking at nothing but what it counts.
fn pg_look(db_oid: i64, own_pid: i64) -> String {
    format!(
        "SELECT COALESCE(wait_event_type, ''), COALESCE(wait_event, ''), COUNT(*) \
         FROM pg_stat_get_activity(NULL) WHERE datid = {db_oid} AND state = 'active' \
         AND backend_type IN ('client backend', 'parallel worker') AND pid <> {own_pid} GROUP BY 1, 2"
    )
}

/// MariaDB/MySQL: the threads running a command on this database (not
/// sleeping) but the sampler's own, each with the wait it is in now (the
/// innermost one's name when waits nest).
const MY_LOOK: &str = "SELECT COALESCE(w.e, ''), COUNT(*) FROM performance_schema.threads t \
     LEFT JOIN (SELECT THREAD_ID, MIN(EVENT_NAME) AS e FROM performance_schema.events_waits_current \
     WHERE END_EVENT_ID IS NULL AND EVENT_NAME <> 'idle' GROUP BY THREAD_ID) w ON w.THREAD_ID = t.THREAD_ID \
     WHERE t.PROCESSLIST_DB = DATABASE() AND t.PROCESSLIST_COMMAND NOT IN ('Sleep', 'Daemon') \
     AND t.PROCESSLIST_ID <> CONNECTION_ID() GROUP BY 1";

/// A process of the server as the server names it, for watching its CPU
/// from this host (`storbench_sysmon::server`): PostgreSQL's backend of
/// `conn` (`pg_backend_pid()`, a child of the postmaster); MariaDB's and
/// MySQL's server process (`@@pid_file`'s pid, when the file is readable
/// here). `None` for SQLite or when the server does not say. The pid is
/// the server host's: the caller checks the process is a server's.
pub fn server_pid(conn: &mut dyn Connection) -> Option<u32> {
    match conn.dialect() {
        Dialect::Postgres => {
            conn.query_one(&Stmt::new("SELECT pg_backend_pid()"), &[]).ok()?.int(0).ok().map(|p| p as u32)
        }
        Dialect::Mysql => {
            let file = conn.query_one(&Stmt::new("SELECT @@pid_file"), &[]).ok()?.text(0).ok()?;
            std::fs::read_to_string(file).ok()?.trim().parse().ok()
        }
        Dialect::Sqlite => None,
    }
}

/// A connection that can look at the database's waits.
pub struct WaitSource {
    conn: Box<dyn Connection>,
    how: How,
}

/// What a look reads.
enum How {
    /// A server's sessions, by this query.
    Query(Stmt),
    /// SQLite's connections' states (`vfs.rs`).
    Vfs(Arc<VfsConnections>),
}

/// SQLite's connections counted per class, as a server's sessions are:
/// those inside a call, by the wait each is in, or `CPU`.
fn vfs_look(timings: &VfsConnections) -> Snapshot {
    let s = timings.states();
    [("IO.Read", s.read), ("IO.Write", s.write), ("IO.Sync", s.sync), ("Lock.Busy", s.busy), (CPU, s.cpu)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| (c.to_string(), n as f64))
        .collect()
}

/// PostgreSQL's type and event as a class: `IO.WALSync`; no type is `CPU`.
fn pg_class(kind: &str, event: &str) -> String {
    if kind.is_empty() {
        CPU.to_string()
    } else {
        format!("{kind}.{event}")
    }
}

/// A performance_schema event as a class:
/// `wait/io/file/innodb/innodb_log_file` → `IO.file/innodb/innodb_log_file`,
/// `wait/synch/mutex/…` → `Synch.mutex/…`, `wait/lock/table/…` →
/// `Lock.table/…`; none is `CPU`.
fn my_class(event: &str) -> String {
    let Some(rest) = event.strip_prefix("wait/") else {
        return if event.is_empty() { CPU.to_string() } else { format!("Other.{event}") };
    };
    let (kind, ev) = rest.split_once('/').unwrap_or((rest, ""));
    let kind = match kind {
        "io" => "IO".to_string(),
        "synch" => "Synch".to_string(),
        "lock" => "Lock".to_string(),
        k => k.to_string(),
    };
    format!("{kind}.{ev}")
}

impl WaitSource {
    /// Checks that `conn`'s server keeps what the sampler reads; the error
    /// is one sentence saying why not (it is shown once, and nothing is
    /// sampled).
    pub fn open(mut conn: Box<dyn Connection>) -> Result<WaitSource, String> {
        let one = |c: &mut Box<dyn Connection>, sql: &str| {
            c.query_one(&Stmt::new(sql), &[])
                .map(|r| r.text(0).or_else(|_| r.int(0).map(|v| v.to_string())).unwrap_or_default())
                .map_err(|e| e.to_string())
        };
        let look = match conn.dialect() {
            Dialect::Postgres => {
                let me = conn
                    .query_one(
                        &Stmt::new(
                            "SELECT oid::bigint, pg_backend_pid()::bigint FROM pg_database \
                             WHERE datname = current_database()",
                        ),
                        &[],
                    )
                    .map_err(|e| e.to_string())?;
                pg_look(me.int(0).map_err(|e| e.to_string())?, me.int(1).map_err(|e| e.to_string())?)
            }
            Dialect::Mysql => {
                let on = one(&mut conn, "SELECT @@performance_schema")?;
                if on != "1" && !on.eq_ignore_ascii_case("on") {
                    return Err("performance_schema is OFF on the server, so it keeps no wait events \
                         (performance_schema=ON in its configuration and a restart turn it on)"
                        .into());
                }
                let consumer = one(
                    &mut conn,
                    "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'events_waits_current'",
                )?;
                if !consumer.eq_ignore_ascii_case("yes") {
                    return Err("performance_schema's events_waits_current consumer is off, so it keeps no \
                         current waits (UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' \
                         WHERE NAME = 'events_waits_current' turns it on)"
                        .into());
                }
                MY_LOOK.to_string()
            }
            Dialect::Sqlite => {
                let timings = conn
                    .vfs_connections()
                    .map_err(|why| format!("{why}, so its connections' waits are not kept"))?;
                return Ok(WaitSource { conn, how: How::Vfs(timings) });
            }
        };
        let mut s = WaitSource { conn, how: How::Query(Stmt::new(look)) };
        s.look().map_err(|e| e.to_string())?;
        Ok(s)
    }

    /// One look: what each active session waits on now (SQLite: each
    /// connection inside a call).
    pub fn look(&mut self) -> Result<Snapshot, crate::DbError> {
        let look = match &mut self.how {
            How::Query(q) => q,
            How::Vfs(v) => return Ok(vfs_look(v)),
        };
        let rows = self.conn.query(look, &[])?;
        let mut out: Snapshot = Vec::with_capacity(rows.len());
        let dialect = self.conn.dialect();
        for r in rows {
            let (class, n) = match dialect {
                Dialect::Postgres => (pg_class(&r.text(0)?, &r.text(1)?), r.int(2)?),
                _ => (my_class(&r.text(0)?), r.int(1)?),
            };
            match out.iter_mut().find(|(c, _)| *c == class) {
                Some(e) => e.1 += n as f64,
                None => out.push((class, n as f64)),
            }
        }
        Ok(out)
    }

    /// True once the connection is known to be gone.
    fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }
}

/// How long looks are kept: six hours (about 2 MB an hour at 10 looks a
/// second).
const KEEP: Duration = Duration::from_secs(6 * 3600);

/// One look and when it was taken; `None` when it failed.
type Look = (Instant, Option<Snapshot>);

/// A running sampler; stops when dropped.
pub struct WaitSampler {
    history: Arc<Mutex<Vec<Look>>>,
    stop: Arc<AtomicBool>,
    looks: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl WaitSampler {
    /// Starts looking [`HZ`] times a second through `src`, on ticks of a
    /// fixed schedule (a slow look does not shift the next ones).
    pub fn start(mut src: WaitSource) -> WaitSampler {
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let looks = Arc::new(AtomicU64::new(0));
        let (h, st, n) = (history.clone(), stop.clone(), looks.clone());
        // Named, so its CPU can be read from /proc (bench/wait-sampling-cost.sh).
        let thread = std::thread::Builder::new().name("wait-sampler".into()).spawn(move || {
            let every = Duration::from_secs(1) / HZ;
            let t0 = Instant::now();
            let mut k = 0u32;
            while !st.load(Ordering::Relaxed) && !src.is_closed() {
                k += 1;
                let due = t0 + every * k;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                } else {
                    // Late by whole ticks: skip them rather than burst.
                    k += ((now - due).as_nanos() / every.as_nanos()) as u32;
                }
                let snap = src.look().ok();
                n.fetch_add(1, Ordering::Relaxed);
                h.lock().expect("wait history").push((Instant::now(), snap));
            }
        });
        // A thread that cannot start takes no looks: the step then has no
        // samples and says so, as a run with too few does.
        WaitSampler { history, stop, looks, thread: thread.ok() }
    }

    /// Looks taken so far.
    pub fn looks(&self) -> u64 {
        self.looks.load(Ordering::Relaxed)
    }

    /// The per-second shares from `start` to `end` (samples at the end of
    /// each second since `start`) and the measured window's figures (looks
    /// after `measure_from`). Steps may overlap (a TPC-H throughput test's
    /// streams), so looks are kept for [`KEEP`] (bounded memory on long
    /// plans), not dropped at a step's start.
    pub fn window(&self, start: Instant, measure_from: Instant, end: Instant) -> StepReport {
        let mut h = self.history.lock().expect("wait history");
        h.retain(|(at, _)| end.saturating_duration_since(*at) < KEEP);
        let looks: Vec<&Look> = h.iter().filter(|(at, _)| *at > start && *at <= end).collect();
        summarise(&looks, start, measure_from)
    }
}

impl Drop for WaitSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sessions per class over some looks, and how many looks.
#[derive(Default)]
struct Tally {
    looks: u32,
    missed: u32,
    classes: BTreeMap<String, f64>,
}

impl Tally {
    fn add(&mut self, snap: &Option<Snapshot>) {
        self.looks += 1;
        match snap {
            Some(s) => {
                for (c, n) in s {
                    *self.classes.entry(c.clone()).or_default() += *n;
                }
            }
            None => self.missed += 1,
        }
    }

    /// Each class's share of the sessions seen, and the average active
    /// sessions per (successful) look.
    fn shares(&self) -> (Vec<(&str, f64)>, f64) {
        let total: f64 = self.classes.values().sum();
        let ok = self.looks.saturating_sub(self.missed).max(1) as f64;
        let shares = if total > 0.0 {
            self.classes.iter().map(|(c, n)| (c.as_str(), n / total)).collect()
        } else {
            Vec::new()
        };
        (shares, total / ok)
    }
}

/// Per-second samples and the window's figures from looks in time order.
fn summarise(looks: &[&Look], start: Instant, measure_from: Instant) -> StepReport {
    let mut r = StepReport::default();
    let mut secs: BTreeMap<u64, Tally> = BTreeMap::new();
    let mut window = Tally::default();
    for (at, snap) in looks {
        let k = at.saturating_duration_since(start).as_secs();
        secs.entry(k).or_default().add(snap);
        if *at > measure_from {
            window.add(snap);
        }
    }
    for (k, t) in &secs {
        let t_ms = (k + 1) * 1000;
        if t.looks == t.missed {
            continue;
        }
        let (shares, aas) = t.shares();
        r.sample(t_ms, AAS, aas);
        for (c, s) in shares {
            r.sample(t_ms, format!("{SHARE}{c}"), s);
        }
    }
    if window.looks > 0 {
        let (shares, aas) = window.shares();
        for (c, s) in shares {
            r.figure(format!("{SHARE}{c}"), s, Unit::Ratio);
        }
        r.figure(AAS, aas, Unit::Count);
        r.figure(LOOKS, window.looks as f64, Unit::Count);
        r.figure(MISSED, window.missed as f64, Unit::Count);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_read_as_type_and_event() {
        assert_eq!(pg_class("IO", "WALSync"), "IO.WALSync");
        assert_eq!(pg_class("", ""), "CPU");
        assert_eq!(my_class("wait/io/file/innodb/innodb_log_file"), "IO.file/innodb/innodb_log_file");
        assert_eq!(my_class("wait/synch/mutex/innodb/log_sys_mutex"), "Synch.mutex/innodb/log_sys_mutex");
        assert_eq!(my_class(""), "CPU");
        assert_eq!(display_class("Lock.transactionid"), "Lock:transactionid");
        assert_eq!(display_class("IO.file/innodb/x.ibd"), "IO:file/innodb/x.ibd");
    }

    /// A SQLite look counts connections as a server's counts sessions:
    /// one blocked in the busy handler is one `Lock.Busy`, one holding a
    /// transaction open between its statements is not active, and a
    /// closed one is nothing.
    #[test]
    fn a_sqlite_look_counts_its_connections_by_the_state_each_is_in() {
        let dir = tempfile::tempdir().unwrap();
        let url = |o: &str| crate::DbUrl::parse(&format!("sqlite:{}/w.db{o}", dir.path().display())).unwrap();
        let mut a = crate::connect(&url("")).unwrap();
        a.batch("CREATE TABLE t (id INTEGER PRIMARY KEY)").unwrap();
        let mut src = WaitSource::open(crate::connect(&url("")).unwrap()).unwrap();
        // Open, between calls: nobody is active.
        assert_eq!(src.look().unwrap(), Snapshot::new());
        a.begin().unwrap();
        let mut b = crate::connect(&url("")).unwrap();
        let waiter = std::thread::spawn(move || {
            b.begin().unwrap();
            b.commit().unwrap();
        });
        // The waiter sleeps in its busy handler and tries again (a moment
        // of CPU) until the lock is free; the holder is idle meanwhile.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut busy = None;
        while busy.is_none() && Instant::now() < deadline {
            busy = Some(src.look().unwrap()).filter(|s| s.iter().any(|(c, _)| c == "Lock.Busy"));
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(busy, Some(vec![("Lock.Busy".to_string(), 1.0)]));
        a.commit().unwrap();
        waiter.join().unwrap();
        assert_eq!(src.look().unwrap(), Snapshot::new());
        drop(a);
        assert_eq!(src.look().unwrap(), Snapshot::new());
        let off = WaitSource::open(crate::connect(&url("?timing=off")).unwrap()).err().unwrap();
        assert!(off.contains("timing=off"), "{off}");
    }

    /// At `synchronous=full` on a disk (/tmp here is ext4) a commit spends
    /// most of its time in the WAL's flush, so the sampler's looks (ten a
    /// second) see the committing connection in `IO.Sync`; every look sees
    /// at most the one connection.
    #[test]
    fn a_sampler_s_looks_see_full_commits_in_io_sync() {
        let dir = tempfile::tempdir().unwrap();
        let url =
            crate::DbUrl::parse(&format!("sqlite:{}/s.db?synchronous=full", dir.path().display())).unwrap();
        let mut w = crate::connect(&url).unwrap();
        w.batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)").unwrap();
        let start = Instant::now();
        let sampler = WaitSampler::start(WaitSource::open(crate::connect(&url).unwrap()).unwrap());
        let ins = Stmt::new("INSERT INTO t (v) VALUES ($1)");
        let mut i = 0i64;
        while sampler.looks() < 12 {
            w.begin().unwrap();
            w.execute(&ins, &[i.into()]).unwrap();
            w.commit().unwrap();
            i += 1;
        }
        let r = sampler.window(start, start, Instant::now());
        drop(sampler);
        let sync = r.get("wait.share.IO.Sync").unwrap_or(0.0);
        let aas = r.get(AAS).unwrap();
        assert!(sync > 0.0, "{r:?}");
        assert!(aas > 0.0 && aas <= 1.0, "{r:?}");
        let sum: f64 = ["IO.Sync", "IO.Write", "IO.Read", "Lock.Busy", CPU]
            .iter()
            .filter_map(|c| r.get(&format!("{SHARE}{c}")))
            .sum();
        assert!((sum - 1.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn each_second_s_shares_sum_to_one_and_aas_counts_sessions() {
        let t0 = Instant::now();
        let snap = |v: &[(&str, f64)]| Some(v.iter().map(|(c, n)| (c.to_string(), *n)).collect::<Snapshot>());
        let looks: Vec<Look> = vec![
            (t0 + Duration::from_millis(100), snap(&[("CPU", 1.0), ("Lock.transactionid", 3.0)])),
            (t0 + Duration::from_millis(600), snap(&[("IO.WALSync", 2.0)])),
            (t0 + Duration::from_millis(1100), None),
            (t0 + Duration::from_millis(1200), snap(&[])),
            (t0 + Duration::from_millis(2300), None),
        ];
        let refs: Vec<&Look> = looks.iter().collect();
        let r = summarise(&refs, t0, t0 + Duration::from_millis(1000));
        let at = |t: u64, n: &str| r.samples.iter().find(|s| s.t_ms == t && s.name == n).map(|s| s.value);
        assert_eq!(at(1000, "wait.share.Lock.transactionid"), Some(0.5));
        assert_eq!(at(1000, "wait.share.IO.WALSync"), Some(2.0 / 6.0));
        assert_eq!(at(1000, AAS), Some(3.0));
        let first: f64 =
            r.samples.iter().filter(|s| s.t_ms == 1000 && s.name.starts_with(SHARE)).map(|s| s.value).sum();
        assert!((first - 1.0).abs() < 1e-12, "{first}");
        // The second second: one failed look and one of no session.
        assert_eq!(at(2000, AAS), Some(0.0));
        assert!(r.samples.iter().all(|s| s.t_ms != 2000 || !s.name.starts_with(SHARE)));
        // The third: only a failed look, so nothing.
        assert!(r.samples.iter().all(|s| s.t_ms != 3000));
        // The window (after 1 s): three looks, two missed, no sessions.
        assert_eq!(r.get(LOOKS), Some(3.0));
        assert_eq!(r.get(MISSED), Some(2.0));
        assert_eq!(r.get(AAS), Some(0.0));
    }
}
