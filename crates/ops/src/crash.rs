//! Crash points of a real database run (`storbench durability
//! --crash-points`): clients commit numbered rows ([`crate::acked`], with
//! their acknowledgement times), or run TPC-C ([`Workload::Tpcc`]: the
//! acknowledged New-Orders, per district), into a database whose files are on a
//! recording medium (`media create --record`), for each setting of a
//! matrix; then, from the medium's write journal alone
//! ([`storbench_emu::crash`]), each crash point's image is made, mounted
//! on a loop device, the engine recovers on it, and what it holds is
//! checked: acknowledged rows missing (those acknowledged before the
//! point's time), the engine's own consistency check, and whether recovery
//! worked at all. Every loop device, mount and image is undone after each
//! point (and on error, by [`Scratch`]'s drop). Nothing here prints: the
//! caller gets [`Event`]s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use storbench_db::{connect, DbUrl, Stmt};
use storbench_emu::crash::{self, CacheMode, Point, Replayer};
use storbench_emu::journal::{monotonic_ns, Journal};
use storbench_emu::walprefix;

use storbench_instances::pg::{self, Instance, Temporary};
use storbench_workloads::rand_tpc::TpcRng;
use storbench_workloads::tpcc::{self, Input, Tpcc};

use crate::acked::{self, AckLog, Writers};
use crate::backup::mariadbd;
use crate::error::OpsError;
use storbench_instances::tempserver::Registration;

const TABLE: &str = "sb_crash";

/// The database under test.
#[derive(Clone, Debug)]
pub enum Target {
    /// A SQLite file on the medium: `mount` is the medium's mount point,
    /// `path` the file under it.
    Sqlite {
        /// The medium's mount point.
        mount: PathBuf,
        /// The database file, under `mount`.
        path: PathBuf,
    },
    /// A running managed PostgreSQL whose data directory (and WAL) is on the medium.
    Postgres {
        /// The medium's mount point.
        mount: PathBuf,
        /// The instance.
        inst: Box<Instance>,
    },
    /// MariaDB: a mariadbd of storbench's own whose data directory `data`
    /// is on the medium (made by `mariadb-install-db` the first time),
    /// started for each setting's run and stopped after it.
    Mariadb {
        /// The medium's mount point.
        mount: PathBuf,
        /// Its data directory, under `mount`.
        data: PathBuf,
        /// The database the rows go in.
        database: String,
    },
}

impl Target {
    /// The engine's name.
    pub fn engine(&self) -> &'static str {
        match self {
            Target::Sqlite { .. } => "sqlite",
            Target::Postgres { .. } => "postgresql",
            Target::Mariadb { .. } => "mariadb",
        }
    }
}

/// What the clients run during each setting's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Workload {
    /// Numbered rows, one commit each ([`crate::acked`]): the rows acknowledged per client.
    #[default]
    Rows,
    /// TPC-C on a schema built beforehand (`tpcc build`), PostgreSQL or
    /// SQLite: the New-Orders acknowledged per district, and `tpcc
    /// check`'s consistency conditions after recovery.
    Tpcc,
}

impl Workload {
    /// Its name (`--workload`).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Rows => "rows",
            Workload::Tpcc => "tpcc",
        }
    }

    /// By name.
    pub fn parse(s: &str) -> Option<Workload> {
        [Workload::Rows, Workload::Tpcc].into_iter().find(|w| w.name() == s)
    }
}

/// Which crash points of a run to try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every one.
    All,
    /// This many, spread evenly over the run.
    Sample(usize),
    /// Only this index (to reproduce a result).
    One(usize),
}

impl std::str::FromStr for Selection {
    type Err = String;

    /// `--crash-points`: `all`, or how many points (1 or more) to spread
    /// over the run; [`Selection::One`] is `--crash-point K`'s.
    fn from_str(s: &str) -> Result<Selection, String> {
        match s.trim() {
            "all" => Ok(Selection::All),
            n => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(Selection::Sample(n)),
                _ => Err(format!("'{s}' is not a number of crash points: give 1 or more, or 'all'")),
            },
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The database.
    pub target: Target,
    /// The medium's write journal.
    pub journal: PathBuf,
    /// Where crash images and their mount points go (host disk, not the medium).
    pub scratch: PathBuf,
    /// What the clients run.
    pub workload: Workload,
    /// Clients committing at once.
    pub clients: u32,
    /// How long they commit per setting.
    pub run_for: Duration,
    /// The settings of each cell (`key=value` each); one run per entry.
    pub settings: Vec<Vec<(String, String)>>,
    /// The cache modes each run's journal is read under.
    pub modes: Vec<CacheMode>,
    /// Which points.
    pub selection: Selection,
    /// Check the medium's last recorded run of each setting again (its
    /// window and acknowledgement log, kept beside the journal) instead of
    /// running the workload: a point's index then names the same state.
    pub last_run: bool,
    /// Only the points that tear one write of the database's data pages
    /// ([`crash::points_tearing`]; PostgreSQL: the relation files under
    /// `base/` and `global/` but their free-space maps, which PostgreSQL
    /// rebuilds rather than trusts; SQLite: the database file).
    pub torn_pages: bool,
    /// PostgreSQL: a `CHECKPOINT` this often during the run, so data pages
    /// are written within it (a run shorter than `checkpoint_timeout`
    /// otherwise writes almost none).
    pub checkpoint_every: Option<Duration>,
    /// Points recovered at once ([`default_jobs`]; 1: one after another in
    /// journal order). The chosen points are split into this many
    /// contiguous runs in journal order, each worker with its own
    /// checkpoint image, scratch directory, loop device, mount point and
    /// temporary server.
    pub jobs: usize,
}

/// `--jobs` when not given: the CPUs, at most 4 (a point's recovery is
/// one server's work; more workers than CPUs only queue).
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// Scratch space `jobs` workers need on a medium of `size` bytes: each a
/// checkpoint image and one point's image, each up to the medium's size
/// (both sparse: they hold what the journal wrote, at most all of it).
pub fn scratch_needed(jobs: usize, size: u64) -> u64 {
    jobs as u64 * 2 * size
}

/// Refuses before anything runs when the scratch filesystem has less free
/// space than [`scratch_needed`].
fn check_scratch_space(o: &Options) -> Result<(), OpsError> {
    let size = Journal::medium_size(&o.journal)
        .map_err(|e| OpsError::Failed(format!("reading the write journal {}: {e}", o.journal.display())))?;
    let need = scratch_needed(o.jobs, size);
    let free = free_bytes(&o.scratch)
        .map_err(|e| OpsError::Failed(format!("--scratch {}: {e}", o.scratch.display())))?;
    if free < need {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        return Err(OpsError::Usage(format!(
            "--jobs {}: crash images need {:.1} GiB in {} ({} × a checkpoint image and a point's image, each up \
             to the medium's {:.1} GiB); it has {:.1} GiB free: give fewer --jobs or --scratch DIR with room",
            o.jobs,
            gib(need),
            o.scratch.display(),
            o.jobs,
            gib(size),
            gib(free)
        )));
    }
    Ok(())
}

/// Free bytes for an unprivileged user on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> Result<u64, String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: statvfs writes into a zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        Ok(st.f_bavail as u64 * st.f_frsize as u64)
    }
}

/// A setting's run as kept for `last_run`: its window and acknowledgements.
fn run_file(journal: &Path, label: &str) -> PathBuf {
    let safe: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    journal.with_extension(format!("run-{safe}.json"))
}

/// One setting's run: what was acknowledged, and when it ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct RunLog {
    /// Rows: per client; TPC-C: per district (the order of `districts`),
    /// the acknowledgement time of each New-Order.
    acks: AckLog,
    /// The run's window on CLOCK_MONOTONIC.
    start: u64,
    end: u64,
    /// TPC-C: each district's `(w_id, d_id, d_next_o_id)` before the run.
    districts: Vec<[i64; 3]>,
    /// With `torn_pages`: where the data pages are on the image, after the run.
    pages: Vec<(u64, u64)>,
    /// TPC-C on PostgreSQL: where its WAL was and where each acknowledged
    /// New-Order's commit record ends in it, for the WAL-extent reduction.
    wal: Option<WalLog>,
    /// TPC-C on PostgreSQL without `wal`: why the run has none (the
    /// reduction is then off).
    wal_off: Option<String>,
    /// MariaDB: the setting as the server's startup options (`--k=v`),
    /// given to the run's server and to each crash image's, as a server
    /// restarted after a power cut reads its option file again (some,
    /// `innodb_doublewrite`, can be set no other way).
    server: Vec<String>,
}

/// The run's WAL as [`walprefix`] reads it: positions `lo..hi` (the redo
/// point of the checkpoint before the run to the run's last insert), laid
/// on the image by `map` (each segment file's extents after the run), with
/// its final bytes those the journal holds up to `until_ns`; and, per
/// district in the order of [`RunLog::acks`], where each acknowledged
/// New-Order's commit record ends (`u64::MAX`: not in the run's WAL).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct WalLog {
    lo: u64,
    hi: u64,
    until_ns: u64,
    map: Vec<(u64, u64, u64)>,
    ends: Vec<Vec<u64>>,
}

impl WalLog {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "lo": self.lo, "hi": self.hi, "until_ns": self.until_ns, "map": self.map, "ends": self.ends })
    }

    fn from_json(v: &serde_json::Value) -> Option<WalLog> {
        Some(WalLog {
            lo: v["lo"].as_u64()?,
            hi: v["hi"].as_u64()?,
            until_ns: v["until_ns"].as_u64()?,
            map: serde_json::from_value(v["map"].clone()).ok()?,
            ends: serde_json::from_value(v["ends"].clone()).ok()?,
        })
    }
}

fn save_run(journal: &Path, label: &str, r: &RunLog) -> Result<(), OpsError> {
    let p = run_file(journal, label);
    let doc = serde_json::json!({
        "start_ns": r.start, "end_ns": r.end, "acks": r.acks.times, "districts": r.districts, "pages": r.pages,
        "wal": r.wal.as_ref().map(WalLog::to_json), "wal_off": r.wal_off,
        "server": r.server,
    });
    std::fs::write(&p, doc.to_string()).map_err(|e| OpsError::Failed(format!("writing {}: {e}", p.display())))
}

fn load_run(journal: &Path, label: &str) -> Result<RunLog, OpsError> {
    let p = run_file(journal, label);
    let text = std::fs::read_to_string(&p).map_err(|_| {
        OpsError::Usage(format!(
            "no recorded run of settings '{label}' on this medium to check again ({} is missing)",
            p.display()
        ))
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| OpsError::Failed(format!("reading {}: {e}", p.display())))?;
    let times: Vec<Vec<u64>> = serde_json::from_value(v["acks"].clone())
        .map_err(|e| OpsError::Failed(format!("reading {}: {e}", p.display())))?;
    let num = |k: &str| v[k].as_u64().unwrap_or(0);
    let districts: Vec<[i64; 3]> = serde_json::from_value(v["districts"].clone()).unwrap_or_default();
    let pages: Vec<(u64, u64)> = serde_json::from_value(v["pages"].clone()).unwrap_or_default();
    let wal = WalLog::from_json(&v["wal"]);
    let wal_off = v["wal_off"].as_str().map(str::to_string);
    Ok(RunLog {
        acks: AckLog { times },
        start: num("start_ns"),
        end: num("end_ns"),
        districts,
        pages,
        wal,
        wal_off,
        server: serde_json::from_value(v["server"].clone()).unwrap_or_default(),
    })
}

/// What one crash point showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Acknowledged rows missing.
    pub lost: i64,
    /// The engine's consistency check failed (its first complaint).
    pub inconsistent: Option<String>,
    /// Recovery failed (why): the filesystem did not mount or the database did not open.
    pub failed: Option<String>,
    /// TPC-C: the run's orders found per district (recovered, or predicted
    /// by the WAL extent); empty otherwise.
    pub found: Vec<i64>,
}

impl Outcome {
    /// An error while the engine recovered (`recovering`) or checked after:
    /// one saying the engine found a page damaged (redo reading a page that
    /// fails its checksum stops recovery) is the corruption the check is
    /// for, so inconsistent; any other, a failed recovery.
    fn error(&mut self, e: &str, recovering: bool) {
        let why = first_line(e);
        match (damaged(&why), recovering) {
            (true, true) => self.inconsistent = Some(format!("recovery stopped: {why}")),
            (true, false) => self.inconsistent = Some(why),
            (false, true) => self.failed = Some(format!("recovery failed: {why}")),
            (false, false) => self.failed = Some(format!("after recovery: {why}")),
        }
    }

    /// Whether it lost anything or is inconsistent or failed.
    pub fn bad(&self) -> bool {
        self.lost > 0 || self.inconsistent.is_some() || self.failed.is_some()
    }
}

/// Where a point's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// Making its image (checkpoint brought forward, copied, volatile writes laid on).
    pub image: Duration,
    /// Attaching the loop device and mounting (the filesystem's journal replay).
    pub mount: Duration,
    /// The engine's start and crash recovery (PostgreSQL; SQLite's is in `check`).
    pub recover: Duration,
    /// Looking for the rows and the consistency check (and stopping the engine).
    pub check: Duration,
    /// Unmounting, detaching, deleting the image.
    pub cleanup: Duration,
}

impl Timing {
    fn add(&mut self, t: &Timing) {
        self.image += t.image;
        self.mount += t.mount;
        self.recover += t.recover;
        self.check += t.check;
        self.cleanup += t.cleanup;
    }
}

/// The figures of one cell: a setting under a cache mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    /// The setting, as `key=value,…`.
    pub setting: String,
    /// The cache mode.
    pub mode: String,
    /// Rows acknowledged in the run.
    pub acknowledged: i64,
    /// Crash points the run has under this mode.
    pub points: usize,
    /// Crash points tried.
    pub tried: usize,
    /// The most acknowledged rows one point lost.
    pub lost_max: i64,
    /// Points that lost any.
    pub points_losing: usize,
    /// Points whose consistency check failed.
    pub inconsistent: usize,
    /// Points whose recovery failed.
    pub failed: usize,
    /// The first bad point's index and what it showed.
    pub first_bad: Option<(usize, Outcome)>,
    /// What each tried point lost, in index order (the distribution).
    pub lost: Vec<i64>,
    /// Every bad point's index and what it showed, in index order.
    pub bad: Vec<(usize, Outcome)>,
    /// Where the tried points' time went, summed.
    pub time: Timing,
    /// The wall time the tried points took together, from the first one's
    /// start to the last one's end: with several jobs less than the sum of
    /// `time` (points a minute are `tried` over this).
    pub wall: Duration,
    /// Points covered by the WAL-extent reduction without recovering them
    /// (`--crash-points all` on TPC-C): their loss read from the WAL they hold.
    pub predicted: usize,
    /// Recovered points whose recovery found other orders than the WAL
    /// extent predicted (each also in `bad`): the reduction is wrong there.
    pub disagreed: usize,
    /// With the reduction: the points it chose to recover (reached or not).
    pub to_recover: usize,
    /// With the reduction: the distinct non-WAL states among the points.
    pub states: usize,
    /// What the reader must know of how the cell was checked: the
    /// WAL-extent reduction off (`--crash-points all` on TPC-C), and why.
    pub note: Option<String>,
}

impl Cell {
    /// The `q`-quantile (0..=1) of the acknowledged commits the tried
    /// points lost (nearest rank); 0 when none was tried.
    pub fn lost_quantile(&self, q: f64) -> i64 {
        let mut v = self.lost.clone();
        v.sort_unstable();
        match v.len() {
            0 => 0,
            n => v[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
        }
    }

    /// The mean the tried points lost.
    pub fn lost_mean(&self) -> f64 {
        if self.lost.is_empty() {
            0.0
        } else {
            self.lost.iter().sum::<i64>() as f64 / self.lost.len() as f64
        }
    }
}

/// What the run tells its caller as it goes.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    /// A setting's run starts.
    Run {
        /// Its settings, `key=value,…`.
        setting: &'a str,
    },
    /// A point was checked.
    Point {
        /// The cell so far.
        cell: &'a Cell,
        /// The point.
        point: &'a Point,
        /// What it showed.
        outcome: &'a Outcome,
        /// Points done in this cell, this one included.
        done: usize,
        /// Points to try in this cell.
        of: usize,
        /// How long this one took (image, mount, recovery, checks, cleanup).
        took: Duration,
        /// Where that went.
        timing: &'a Timing,
    },
    /// The WAL-extent reduction has read every point of a cell: how many it
    /// covers and how many are to be recovered.
    Reduced {
        /// Points covered by their WAL extent.
        predicted: usize,
        /// Points to recover (their own non-WAL state, and a spread of the others).
        recover: usize,
        /// Distinct non-WAL states among the points.
        states: usize,
    },
    /// The WAL-extent reduction is off for a cell it would serve
    /// (`--crash-points all` on TPC-C): every point is recovered.
    ReductionOff {
        /// Why, in a phrase.
        why: &'a str,
    },
    /// A cell is complete.
    CellDone(&'a Cell),
}

/// The settings as `key=value,…`.
pub fn setting_label(s: &[(String, String)]) -> String {
    s.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Runs every setting and checks its crash points under every mode.
pub fn run(o: &Options, stop: &AtomicBool, on: &mut dyn FnMut(Event)) -> Result<Vec<Cell>, OpsError> {
    if o.jobs == 0 {
        return Err(OpsError::Usage("--jobs 0: give 1 or more points to recover at once".into()));
    }
    std::fs::create_dir_all(&o.scratch)
        .map_err(|e| OpsError::Failed(format!("creating {}: {e}", o.scratch.display())))?;
    check_scratch_space(o)?;
    let mut cells = Vec::new();
    for s in &o.settings {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let label = setting_label(s);
        on(Event::Run { setting: &label });
        let r = if o.last_run {
            load_run(&o.journal, &label)?
        } else {
            let mut r = workload(o, s)?;
            if o.torn_pages {
                r.pages = data_pages(&o.target)?;
            }
            save_run(&o.journal, &label, &r)?;
            r
        };
        if o.torn_pages && r.pages.is_empty() {
            return Err(OpsError::Usage(format!(
                "--torn-pages: the recorded run of settings '{label}' has no data pages' places; run it again without --last-run"
            )));
        }
        if o.workload == Workload::Tpcc && r.districts.is_empty() {
            return Err(OpsError::Usage(format!(
                "the recorded run of settings '{label}' is not a TPC-C run; run it again without --last-run"
            )));
        }
        for &mode in &o.modes {
            let cell = check_cell(o, &label, mode, &r, stop, on)?;
            on(Event::CellDone(&cell));
            cells.push(cell);
        }
    }
    Ok(cells)
}

/// Runs the workload for `o.run_for` under setting `s`: the acknowledgement
/// log and the run's window on CLOCK_MONOTONIC.
fn workload(o: &Options, s: &[(String, String)]) -> Result<RunLog, OpsError> {
    match &o.target {
        Target::Sqlite { path, .. } if o.workload == Workload::Tpcc => tpcc_sqlite_workload(o, path, s),
        Target::Mariadb { data, database, .. } => maria_workload(o, data, database, s),
        Target::Postgres { inst, .. } if o.workload == Workload::Tpcc => tpcc_workload(o, inst, s),
        Target::Sqlite { path, .. } => {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            let url = DbUrl::parse(&format!("sqlite:{}", path.display())).map_err(OpsError::Usage)?;
            let open = || open_sqlite(&url, s);
            open()?.batch(&acked::create_table(TABLE))?;
            let conns = (0..o.clients).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
            Ok(commit_for(o.run_for, conns))
        }
        Target::Postgres { inst, .. } => {
            let url = DbUrl::parse(&pg::resolve(&inst.name)?).map_err(OpsError::Usage)?;
            let open =
                || connect(&url).map_err(|e| OpsError::Unreachable(format!("managed:{}: {e}", inst.name)));
            let mut admin = open()?;
            // The server's own setting (the crash image's copy starts with it too).
            let settings = Altered::apply(open()?, s)?;
            admin.batch(&acked::create_table(TABLE))?;
            admin.batch("CHECKPOINT")?;
            let conns = (0..o.clients).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
            let every = o.checkpoint_every.map(|d| checkpoints(open(), d)).transpose()?;
            let out = commit_for(o.run_for, conns);
            drop(every);
            settings.reset()?;
            Ok(out)
        }
    }
}

/// MariaDB: storbench's own mariadbd on `data` (on the medium; made by
/// `mariadb-install-db` the first time) for the run, setting `s` by `SET
/// GLOBAL`, stopped cleanly after. The clients commit numbered rows, or
/// run TPC-C (`--workload tpcc`) on a scale-1 schema built here the first
/// time: the server is storbench's, not the URL's, so `tpcc build` cannot
/// reach it. A district's New-Orders take its next id under the district
/// row's lock (InnoDB's row lock, held to the commit), so its committed
/// orders are its ids from `d_next_o_id` on, in commit order, as on
/// PostgreSQL.
fn maria_workload(
    o: &Options,
    data: &Path,
    database: &str,
    s: &[(String, String)],
) -> Result<RunLog, OpsError> {
    let scratch = Scratch::new(&o.scratch)?;
    let run_dir = scratch.dir.join("live");
    if !data.join("mysql").is_dir() {
        mariadbd::install(data, &maria_settings()).map_err(maria_err)?;
    }
    // The setting as startup options (values are words, the settings'
    // parser allows no more): `SET GLOBAL` cannot change them all.
    let options: Vec<String> = s.iter().map(|(k, v)| format!("--{k}={v}")).collect();
    let (mut server, _reg) = maria_start(data, &run_dir, false, &options)?;
    // The live part (the schema built the first time, the run, its end) is
    // bounded too: a server that stops answering ends the cell with an
    // error instead of holding it.
    let live_for = o.run_for + LIVE_ALLOWANCE;
    let dog = watch(server.pid(), storbench_proc::Sig::SIGKILL, live_for);
    let outlived = || {
        OpsError::Failed(format!(
            "mariadbd on {} did not finish the run within {} s: killed",
            data.display(),
            live_for.as_secs()
        ))
    };
    let live = || -> Result<RunLog, OpsError> {
        let mut admin = connect(&maria_url(server.socket(), "mysql")?)?;
        admin.batch(&format!("CREATE DATABASE IF NOT EXISTS `{database}`"))?;
        let url = maria_url(server.socket(), database)?;
        let info = match o.workload {
            Workload::Tpcc => Some(maria_tpcc(&url)?),
            Workload::Rows => {
                connect(&url)?.batch(&acked::create_table(TABLE))?;
                None
            }
        };
        Ok(match &info {
            None => {
                commit_for(o.run_for, (0..o.clients).map(|_| connect(&url)).collect::<Result<Vec<_>, _>>()?)
            }
            Some(info) => {
                let districts = tpcc_districts(connect(&url)?.as_mut())?;
                let conns = (0..o.clients).map(|_| connect(&url)).collect::<Result<Vec<_>, _>>()?;
                tpcc_run_log(o, conns, info, districts)
            }
        })
    };
    let run = live();
    // Killed at the bound: whatever the clients met after is its echo.
    if fired(&dog) {
        return Err(outlived());
    }
    let mut out = run?;
    drop(dog);
    server.stop().map_err(maria_err)?;
    out.server = options;
    Ok(out)
}

/// The TPC-C schema at `url`, built (one warehouse, two loaders) when there is none.
fn maria_tpcc(url: &DbUrl) -> Result<tpcc::SchemaInfo, OpsError> {
    if let Some(info) = tpcc::inspect(connect(url)?.as_mut())? {
        return Ok(info);
    }
    let open = || connect(url);
    tpcc::build(&open, 1, 2, &|_| {})?;
    tpcc::inspect(connect(url)?.as_mut())?
        .ok_or_else(|| OpsError::Failed("--workload tpcc: the TPC-C build left no schema".into()))
}

/// A `CHECKPOINT` every `every` on `conn` until dropped (a failed one is
/// not retried: the run goes on without).
fn checkpoints(
    conn: Result<Box<dyn storbench_db::Connection>, OpsError>,
    every: Duration,
) -> Result<storbench_proc::Background, OpsError> {
    let mut conn = conn?;
    storbench_proc::Background::named("crash-checkpoints", move |stop| {
        let mut next = Instant::now() + every;
        while !stop.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                if conn.batch("CHECKPOINT").is_err() {
                    return;
                }
                next += every;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
    .map_err(|e| OpsError::Failed(format!("starting the checkpoint thread: {e}")))
}

/// Where the database's data pages are on the image, after the run:
/// PostgreSQL's relation files (`base/*/*`, `global/*`: a relation's
/// segments and visibility map, not its free-space map, which PostgreSQL
/// zeroes when damaged rather than trusts, nor `pg_filenode.map` and the
/// like); SQLite's database file; InnoDB's tablespaces (`ibdata1`, each
/// table's `.ibd`), not its redo log.
fn data_pages(target: &Target) -> Result<Vec<(u64, u64)>, OpsError> {
    let list = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d).into_iter().flatten().flatten().map(|e| e.path()).collect()
    };
    let files: Vec<PathBuf> = match target {
        Target::Sqlite { path, .. } => vec![path.clone()],
        Target::Mariadb { data, .. } => list(data)
            .into_iter()
            .flat_map(|p| if p.is_dir() { list(&p) } else { vec![p] })
            .filter(|p| p.ends_with("ibdata1") || p.extension().is_some_and(|x| x == "ibd"))
            .collect(),
        Target::Postgres { inst, .. } => {
            let relation = |n: &str| {
                let stem = n.strip_suffix("_vm").unwrap_or(n);
                let (node, seg) = stem.split_once('.').unwrap_or((stem, "0"));
                [node, seg].iter().all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()))
            };
            let dirs = list(&inst.data.join("base")).into_iter().chain([inst.data.join("global")]);
            dirs.flat_map(|d| list(&d))
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(relation))
                .collect()
        }
    };
    let mut out = Vec::new();
    for f in files {
        match crash::file_extents(&f) {
            Ok(x) => out.extend(x),
            // Dropped since it was listed: it holds no pages.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(OpsError::Failed(format!("--torn-pages: {e}"))),
        }
    }
    Ok(out)
}

/// The clients commit for `d`: their acknowledgement log and the window.
fn commit_for(d: Duration, conns: Vec<Box<dyn storbench_db::Connection>>) -> RunLog {
    let start = monotonic_ns();
    let writers = Writers::start(TABLE, conns);
    std::thread::sleep(d);
    let acks = writers.stop_timed();
    RunLog {
        acks,
        start,
        end: monotonic_ns(),
        districts: Vec::new(),
        pages: Vec::new(),
        wal: None,
        wal_off: None,
        server: Vec::new(),
    }
}

/// TPC-C for `o.run_for` under setting `s` on a schema built beforehand:
/// the clients run the mix without think times (routines where the build
/// made them, as `tpcc run` does), each New-Order that comes back committed
/// logged with its time under its district. Orders take their district's
/// next id under the district row's lock, so a district's committed orders
/// are its ids from `d_next_o_id` on, in commit order.
fn tpcc_workload(o: &Options, inst: &Instance, s: &[(String, String)]) -> Result<RunLog, OpsError> {
    let url = DbUrl::parse(&pg::resolve(&inst.name)?).map_err(OpsError::Usage)?;
    let open = || connect(&url).map_err(|e| OpsError::Unreachable(format!("managed:{}: {e}", inst.name)));
    let mut admin = open()?;
    let info = tpcc::inspect(admin.as_mut())?.ok_or_else(|| {
        OpsError::Usage(format!(
            "--workload tpcc: no TPC-C schema in managed:{0}; build one first (storbench tpcc build --db managed:{0})",
            inst.name
        ))
    })?;
    let settings = Altered::apply(open()?, s)?;
    let districts = tpcc_districts(admin.as_mut())?;
    admin.batch("CHECKPOINT")?;
    let before = wal_before(admin.as_mut())?;
    let conns = (0..o.clients).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
    let every = o.checkpoint_every.map(|d| checkpoints(open(), d)).transpose()?;
    let (acked, start, end) = tpcc_drive(o, conns, &info, &districts, true);
    drop(every);
    let times = acked.iter().map(|a| a.iter().map(|x| x.0).collect()).collect();
    let xids: Vec<Vec<u64>> = acked.iter().map(|a| a.iter().map(|x| x.1).collect()).collect();
    // Without every commit's place the reduction is off (all points are recovered).
    let unknown = xids.iter().flatten().filter(|&&x| x == 0).count();
    let (wal, wal_off) = match before {
        None => (None, Some("the server did not give its redo point before the run".to_string())),
        Some(_) if unknown > 0 => (
            None,
            Some(format!(
                "{unknown} of {} acknowledged New-Orders have no transaction id (a TPC-C schema without \
                 stored routines commits each in client SQL; `tpcc build --replace` makes them)",
                xids.iter().map(Vec::len).sum::<usize>()
            )),
        ),
        Some(b) => match wal_after(admin.as_mut(), inst, b, &xids)? {
            Ok(w) => (Some(w), None),
            Err(why) => (None, Some(why)),
        },
    };
    settings.reset()?;
    Ok(RunLog {
        acks: AckLog { times },
        start,
        end,
        districts,
        pages: Vec::new(),
        wal,
        wal_off,
        server: Vec::new(),
    })
}

/// TPC-C on SQLite for `o.run_for` under setting `s` (`PRAGMA key=value`
/// on every connection) on a schema built beforehand in the file `path`:
/// the acknowledged New-Orders per district, as on PostgreSQL (no
/// WAL-extent reduction: SQLite's points are each recovered).
fn tpcc_sqlite_workload(o: &Options, path: &Path, s: &[(String, String)]) -> Result<RunLog, OpsError> {
    let url = DbUrl::parse(&format!("sqlite:{}", path.display())).map_err(OpsError::Usage)?;
    let open = || open_sqlite(&url, s);
    let no_schema = || {
        OpsError::Usage(format!(
            "--workload tpcc: no TPC-C schema in {0}; build one first (storbench tpcc build --db sqlite:{0})",
            path.display()
        ))
    };
    if !path.exists() {
        return Err(no_schema());
    }
    let mut admin = open()?;
    let info = tpcc::inspect(admin.as_mut())?.ok_or_else(no_schema)?;
    let districts = tpcc_districts(admin.as_mut())?;
    drop(admin);
    let conns = (0..o.clients).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
    Ok(tpcc_run_log(o, conns, &info, districts))
}

/// TPC-C's New-Orders driven for the run on an engine without the
/// WAL-extent reduction: the acknowledgements per district, no WAL.
fn tpcc_run_log(
    o: &Options,
    conns: Vec<Box<dyn storbench_db::Connection>>,
    info: &tpcc::SchemaInfo,
    districts: Vec<[i64; 3]>,
) -> RunLog {
    let (acked, start, end) = tpcc_drive(o, conns, info, &districts, false);
    let times = acked.iter().map(|a| a.iter().map(|x| x.0).collect()).collect();
    RunLog {
        acks: AckLog { times },
        start,
        end,
        districts,
        pages: Vec::new(),
        wal: None,
        wal_off: None,
        server: Vec::new(),
    }
}

/// Each district's `(w_id, d_id, d_next_o_id)`, before the run.
fn tpcc_districts(c: &mut dyn storbench_db::Connection) -> Result<Vec<[i64; 3]>, OpsError> {
    Ok(c.query(&Stmt::new("SELECT d_w_id, d_id, d_next_o_id FROM district ORDER BY d_w_id, d_id"), &[])?
        .iter()
        .map(|r| Ok([r.int(0)?, r.int(1)?, r.int(2)?]))
        .collect::<Result<_, storbench_db::DbError>>()?)
}

/// The clients run TPC-C's mix without think times on `conns` for
/// `o.run_for`: per district (the order of `districts`), each New-Order
/// that came back committed, with its acknowledgement time and (`xid`,
/// PostgreSQL) its transaction id, in time order; and the run's window.
#[allow(clippy::type_complexity)]
fn tpcc_drive(
    o: &Options,
    conns: Vec<Box<dyn storbench_db::Connection>>,
    info: &tpcc::SchemaInfo,
    districts: &[[i64; 3]],
    xid: bool,
) -> (Vec<Vec<(u64, u64)>>, u64, u64) {
    let seed = monotonic_ns();
    let wl = std::sync::Arc::new(Tpcc::new(tpcc::Options { seed, ..tpcc::Options::default() }, info));
    let index: std::sync::Arc<std::collections::HashMap<(i64, i64), usize>> =
        std::sync::Arc::new(districts.iter().enumerate().map(|(i, d)| ((d[0], d[1]), i)).collect());
    let halt = std::sync::Arc::new(AtomicBool::new(false));
    let start = monotonic_ns();
    let threads: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(u, mut conn)| {
            let (wl, index, halt) = (wl.clone(), index.clone(), halt.clone());
            std::thread::spawn(move || {
                let keys = wl.keys();
                let mut rng = TpcRng::seeded(seed.wrapping_add(u as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
                let home = (u as i64 % keys.warehouses) + 1;
                let mut input = Input::default();
                let mut acks: Vec<(u64, usize, u64)> = Vec::new();
                while !halt.load(Ordering::Relaxed) && !conn.is_closed() {
                    let kind = tpcc::deal(&mut rng);
                    input.choose(kind, home, &keys, &mut rng);
                    // An error (a serialization failure, a deadlock) is not an
                    // acknowledgement: the order is not counted.
                    if kind != tpcc::NEW_ORDER {
                        let _ = wl.run_input(conn.as_mut(), &input);
                    } else if let Some(xid) = if xid {
                        new_order(conn.as_mut(), &wl, &input)
                    } else {
                        matches!(wl.run_input(conn.as_mut(), &input), Ok(false)).then_some(0)
                    } {
                        if let Some(&i) = index.get(&(input.w, input.d)) {
                            acks.push((monotonic_ns(), i, xid));
                        }
                    }
                }
                acks
            })
        })
        .collect();
    std::thread::sleep(o.run_for);
    halt.store(true, Ordering::Relaxed);
    let mut acked = vec![Vec::new(); districts.len()];
    for t in threads {
        for (at, i, xid) in t.join().unwrap_or_default() {
            acked[i].push((at, xid));
        }
    }
    let end = monotonic_ns();
    for a in &mut acked {
        a.sort_unstable();
    }
    (acked, start, end)
}

/// A New-Order in a transaction of its own making, so its id can be read
/// before it commits: the transaction id (mod 2^32, as the WAL has it)
/// when it committed an order; `None` when it rolled back (by design or by
/// error). The id is 0 when the server did not give one (the routine-less
/// path commits inside `run_input`): the run then has no reduction.
fn new_order(conn: &mut dyn storbench_db::Connection, wl: &Tpcc, input: &Input) -> Option<u64> {
    conn.batch("BEGIN").ok()?;
    match wl.run_input(conn, input) {
        Ok(false) => {
            let xid = conn
                .query_one(&Stmt::new("SELECT coalesce(pg_current_xact_id_if_assigned()::text, '0')"), &[])
                .and_then(|r| r.text(0))
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .map_or(0, |x| x & 0xFFFF_FFFF);
            conn.batch("COMMIT").ok().map(|_| xid)
        }
        _ => {
            let _ = conn.batch("ROLLBACK");
            None
        }
    }
}

/// `X/Y` (a `pg_lsn`) as a number.
fn lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.trim().split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// Before the run (after its checkpoint): the redo point, the timeline and
/// the segment size; `None` when the server does not say.
fn wal_before(c: &mut dyn storbench_db::Connection) -> Result<Option<(u64, u64, u64)>, OpsError> {
    let r = c.query_one(
        &Stmt::new(
            "SELECT redo_lsn::text, timeline_id::text,              (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size') FROM pg_control_checkpoint()",
        ),
        &[],
    )?;
    let (redo, tli, seg) = (r.text(0)?, r.text(1)?, r.text(2)?);
    Ok(lsn(&redo).zip(tli.parse().ok()).zip(seg.parse().ok()).map(|((a, b), c)| (a, b, c)))
}

/// After the run: the WAL's end once flushed, each segment's place on the
/// image, and each acknowledged New-Order's commit record's end (from
/// `pg_waldump` over the run's WAL). An `Err` saying so when a segment of
/// the run is gone (recycled by a checkpoint within it): its bytes' places
/// are lost.
fn wal_after(
    c: &mut dyn storbench_db::Connection,
    inst: &Instance,
    (lo, tli, seg): (u64, u64, u64),
    xids: &[Vec<u64>],
) -> Result<Result<WalLog, String>, OpsError> {
    let q = |c: &mut dyn storbench_db::Connection, sql: &str| -> Result<u64, OpsError> {
        let t = c.query_one(&Stmt::new(sql), &[])?.text(0)?;
        lsn(&t).ok_or_else(|| OpsError::Failed(format!("reading the WAL position: '{t}'")))
    };
    let hi = q(c, "SELECT pg_current_wal_insert_lsn()::text")?;
    // The WAL writer's last flush (synchronous_commit=off) lands on the image.
    let give_up = Instant::now() + Duration::from_secs(10);
    while q(c, "SELECT pg_current_wal_flush_lsn()::text")? < hi && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = inst.wal.clone().unwrap_or_else(|| inst.data.join("pg_wal"));
    let per_id = 0x1_0000_0000 / seg;
    let mut map = Vec::new();
    for segno in lo / seg..=hi.saturating_sub(1) / seg {
        let f = dir.join(format!("{tli:08X}{:08X}{:08X}", segno / per_id, segno % per_id));
        match crash::file_map(&f) {
            Ok(x) => map
                .extend(x.into_iter().map(|(logical, physical, len)| (physical, len, segno * seg + logical))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Err(format!(
                    "WAL segment {} of the run was recycled by a checkpoint within it (the places of \
                     its bytes on the image are lost); a shorter --cut-after or a larger max_wal_size keeps it",
                    f.file_name().unwrap_or_default().to_string_lossy()
                )))
            }
            Err(e) => return Err(OpsError::Failed(format!("mapping the WAL: {e}"))),
        }
    }
    let until_ns = monotonic_ns();
    let fmt = |x: u64| format!("{:X}/{:X}", x >> 32, x & 0xFFFF_FFFF);
    let out = Command::new(inst.bindir.join("pg_waldump"))
        .arg("-p")
        .arg(&dir)
        .args(["-t", &tli.to_string(), "-s", &fmt(lo), "-e", &fmt(hi), "-r", "Transaction"])
        .output()
        .map_err(|e| OpsError::Failed(format!("running pg_waldump: {e}")))?;
    let commits = commit_ends(&String::from_utf8_lossy(&out.stdout), seg);
    let ends = xids
        .iter()
        .map(|d| d.iter().map(|x| commits.get(x).copied().unwrap_or(u64::MAX)).collect())
        .collect();
    Ok(Ok(WalLog { lo, hi, until_ns, map, ends }))
}

/// From `pg_waldump` lines, each COMMIT record's transaction id and where
/// the record ends (its start plus its length, and the page headers it
/// crosses: 24 bytes, 40 at a segment's start).
fn commit_ends(text: &str, seg: u64) -> std::collections::HashMap<u64, u64> {
    const PAGE: u64 = 8192;
    let mut out = std::collections::HashMap::new();
    for l in text.lines().filter(|l| l.contains("desc: COMMIT")) {
        let field =
            |k: &str| l.split(k).nth(1).map(|r| r.trim_start().split([',', ' ']).next().unwrap_or(""));
        let tot = l
            .split("len (rec/tot):")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|r| r.split('/').nth(1));
        let (Some(xid), Some(start), Some(tot)) = (
            field("tx:").and_then(|x| x.parse::<u64>().ok()),
            field("lsn:").and_then(lsn),
            tot.and_then(|t| t.trim().parse::<u64>().ok()),
        ) else {
            continue;
        };
        let (mut at, mut left) = (start, tot);
        loop {
            let room = PAGE - at % PAGE;
            let take = room.min(left);
            at += take;
            left -= take;
            if left == 0 {
                break;
            }
            at += if at.is_multiple_of(seg) { 40 } else { 24 };
        }
        out.insert(xid, at);
    }
    out
}

/// Server settings a cell runs with (`ALTER SYSTEM SET` and a reload: the
/// crash image's copy of the configuration starts with them too), reset
/// when the cell's run ends — by [`Altered::reset`], or on drop when the
/// run failed partway, so the user's instance never keeps a cell's
/// `full_page_writes=off`.
struct Altered {
    conn: Box<dyn storbench_db::Connection>,
    keys: Vec<String>,
}

impl Altered {
    fn apply(conn: Box<dyn storbench_db::Connection>, s: &[(String, String)]) -> Result<Altered, OpsError> {
        let mut a = Altered { conn, keys: Vec::new() };
        for (k, v) in s {
            a.conn.batch(&format!("ALTER SYSTEM SET {k} = '{v}'"))?;
            a.keys.push(k.clone());
        }
        a.conn.batch("SELECT pg_reload_conf()")?;
        Ok(a)
    }

    fn reset(mut self) -> Result<(), OpsError> {
        Ok(self.undo()?)
    }

    fn undo(&mut self) -> Result<(), storbench_db::DbError> {
        if self.keys.is_empty() {
            return Ok(());
        }
        for k in std::mem::take(&mut self.keys) {
            self.conn.batch(&format!("ALTER SYSTEM RESET {k}"))?;
        }
        self.conn.batch("SELECT pg_reload_conf()")
    }
}

impl Drop for Altered {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

fn check_cell(
    o: &Options,
    label: &str,
    mode: CacheMode,
    run: &RunLog,
    stop: &AtomicBool,
    on: &mut dyn FnMut(Event),
) -> Result<Cell, OpsError> {
    let journal = Journal::open(&o.journal)
        .map_err(|e| OpsError::Failed(format!("reading the write journal {}: {e}", o.journal.display())))?;
    let pages = o.torn_pages.then_some(run.pages.as_slice());
    let (acks, all) = (&run.acks, crash::points_tearing(&journal, mode, run.start, run.end, pages));
    if o.torn_pages && all.is_empty() {
        // No point to try is not a clean result: say so rather than a 0.
        return Err(OpsError::Failed(format!(
            "{label} / {}: no write of the run tore a data page (--torn-pages); write pages within it: \
             --checkpoint-every on PostgreSQL, or a longer --cut-after",
            mode.name()
        )));
    }
    // Every point with the WAL-extent reduction: each point's prediction,
    // and the points that must be (or are chosen to be) recovered.
    let reduced = match (&run.wal, o.selection) {
        (Some(w), Selection::All) if !o.torn_pages => Some(reduce(&journal, w, &run.acks, &all)?),
        _ => None,
    };
    let off = if reduced.is_none() { reduction_off(o, run) } else { None };
    if let Some(why) = &off {
        on(Event::ReductionOff { why });
    }
    if let Some(r) = &reduced {
        on(Event::Reduced {
            predicted: all.len() - r.recover.len(),
            recover: r.recover.len(),
            states: r.states,
        });
    }
    let chosen = match (o.selection, &reduced) {
        (Selection::All, Some(r)) => r.recover.iter().map(|&i| all[i]).collect(),
        (Selection::All, None) => all.clone(),
        (Selection::Sample(n), _) => crash::sample(&all, n),
        (Selection::One(k), _) => all.get(k).copied().into_iter().collect(),
    };
    let mut cell = Cell {
        setting: label.to_string(),
        mode: mode.name().to_string(),
        acknowledged: acks.total(),
        points: all.len(),
        to_recover: reduced.as_ref().map_or(0, |r| r.recover.len()),
        states: reduced.as_ref().map_or(0, |r| r.states),
        note: off.map(|why| format!("WAL-extent reduction off: {why}; every point is recovered")),
        ..Cell::default()
    };
    // The checkpoint only moves forward cheaply: go through the points in
    // journal order, each worker a contiguous run of them; report them as
    // they are done, count them in index order.
    let mut order = chosen.clone();
    order.sort_by_key(|p| (p.t_ns, p.index));
    let (mut outcomes, tried) = recover(o, run, &journal, &order, reduced.as_ref(), &mut cell, stop, on)?;
    if let Some(r) = reduced {
        // The points not recovered, with what their WAL extent says (an
        // interrupted cell has only the points it reached).
        let reached =
            order.iter().filter(|p| !tried.contains(&p.index)).map(|p| p.t_ns).min().unwrap_or(u64::MAX);
        let recovered: std::collections::HashSet<usize> = r.recover.iter().copied().collect();
        for (p, out) in all.iter().zip(r.outcomes) {
            if !recovered.contains(&p.index) && p.t_ns < reached {
                cell.predicted += 1;
                outcomes.push((*p, out));
            }
        }
    }
    cell.tally(outcomes);
    Ok(cell)
}

/// Each tried point's outcome, and the indices tried.
type Recovered = (Vec<(Point, Outcome)>, std::collections::HashSet<usize>);

/// Recovers and checks the `order`ed points (journal order) with
/// `o.jobs` workers, each a contiguous run of them with its own
/// checkpoint image, scratch directory, loop device, mount point and
/// server; counts each into `cell` and reports it (in the order they are
/// done, `done` counting up) on this thread. Returns each point's outcome
/// and the indices tried (a prefix of each worker's run when `stop` was
/// set). A worker's error stops the others after their point in progress.
#[allow(clippy::too_many_arguments)]
fn recover(
    o: &Options,
    run: &RunLog,
    journal: &Journal,
    order: &[Point],
    reduced: Option<&Reduction>,
    cell: &mut Cell,
    stop: &AtomicBool,
    on: &mut dyn FnMut(Event),
) -> Result<Recovered, OpsError> {
    let acks = &run.acks;
    let scratch = Scratch::new(&o.scratch)?;
    let jobs = o.jobs.clamp(1, order.len().max(1));
    let mut workers = Vec::with_capacity(jobs);
    for w in 0..jobs {
        let (from, to) = (order.len() * w / jobs, order.len() * (w + 1) / jobs);
        let dir = Scratch::sub(&scratch, w)?;
        let journal = journal.try_clone().map_err(|e| {
            OpsError::Failed(format!("reading the write journal {}: {e}", o.journal.display()))
        })?;
        let replayer = Replayer::new(journal, &dir.dir.join("checkpoint.img"))
            .map_err(|e| OpsError::Failed(format!("making the checkpoint image: {e}")))?;
        workers.push((&order[from..to], dir, replayer));
    }
    let mut outcomes: Vec<(Point, Outcome)> = Vec::new();
    let mut tried = std::collections::HashSet::new();
    let halt = AtomicBool::new(false);
    let mut error = None;
    let started = Instant::now();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        for (points, dir, mut replayer) in workers {
            let (tx, halt) = (tx.clone(), &halt);
            s.spawn(move || {
                for p in points {
                    if stop.load(Ordering::Relaxed) || halt.load(Ordering::Relaxed) {
                        break;
                    }
                    let t0 = Instant::now();
                    let r = check_point(o, &mut replayer, &dir, p, run, &acks.before(p.t_ns));
                    let failed = r.is_err();
                    if tx.send(r.map(|(out, tm)| (*p, out, tm, t0.elapsed()))).is_err() || failed {
                        break;
                    }
                }
                // The worker's images and mount point go before it says it is done.
                drop(replayer);
                drop(dir);
            });
        }
        drop(tx);
        // One receiver: the cell, the events and `done` are this thread's alone.
        for r in rx {
            let (p, mut outcome, timing, took) = match r {
                Ok(x) => x,
                Err(e) => {
                    halt.store(true, Ordering::Relaxed);
                    error.get_or_insert(e);
                    continue;
                }
            };
            if let Some(r) = reduced {
                let want = &r.outcomes[p.index];
                if outcome.failed.is_none() && outcome.found != want.found {
                    cell.disagreed += 1;
                    outcome.failed = Some(format!(
                        "the WAL extent predicted {} lost (orders per district {:?}), recovery found {} lost ({:?})",
                        want.lost, want.found, outcome.lost, outcome.found
                    ));
                }
            }
            cell.tried += 1;
            cell.time.add(&timing);
            tried.insert(p.index);
            on(Event::Point {
                cell,
                point: &p,
                outcome: &outcome,
                done: cell.tried,
                of: order.len(),
                took,
                timing: &timing,
            });
            outcomes.push((p, outcome));
        }
    });
    cell.wall = started.elapsed();
    if let Some(e) = error {
        return Err(e);
    }
    Ok((outcomes, tried))
}

/// Why the WAL-extent reduction is off where it would serve (PostgreSQL
/// TPC-C, every point, no torn pages): every point is then recovered,
/// which for a run of seconds takes hours. `None` where it would not
/// serve anyway (the rows workload, sampled points).
fn reduction_off(o: &Options, run: &RunLog) -> Option<String> {
    let pg = matches!(o.target, Target::Postgres { .. });
    (pg && o.workload == Workload::Tpcc && o.selection == Selection::All && !o.torn_pages)
        .then(|| run.wal_off.clone().unwrap_or_else(|| "the recorded run kept no WAL positions".into()))
}

impl Cell {
    /// Counts the points' outcomes into the cell, in index order.
    fn tally(&mut self, mut outcomes: Vec<(Point, Outcome)>) {
        outcomes.sort_by_key(|(p, _)| p.index);
        for (p, out) in outcomes {
            self.lost_max = self.lost_max.max(out.lost);
            self.points_losing += usize::from(out.lost > 0);
            self.inconsistent += usize::from(out.inconsistent.is_some());
            self.failed += usize::from(out.failed.is_some());
            self.lost.push(out.lost);
            if out.bad() {
                if self.first_bad.is_none() {
                    self.first_bad = Some((p.index, out.clone()));
                }
                self.bad.push((p.index, out));
            }
        }
    }
}

/// The WAL-extent reduction of a cell's points (every one, in index order).
struct Reduction {
    /// Each point's predicted outcome: the orders its WAL holds per district and the acknowledged ones it lacks.
    outcomes: Vec<Outcome>,
    /// The points to recover, by index: the first of each non-WAL state, each
    /// whose volatile pieces touch anything outside the WAL, and a spread of the rest.
    recover: Vec<usize>,
    /// Distinct non-WAL states.
    states: usize,
}

/// Recovered as a cross-check beyond the points that must be: this many,
/// or one in [`SPREAD_EVERY`] if more, spread evenly over the predicted points.
const SPREAD: usize = 16;
const SPREAD_EVERY: usize = 5_000;

/// Reads every point's WAL extent in one pass over the journal
/// ([`walprefix::Prefix`]) and predicts what recovery finds: a district's
/// orders are those whose commit record ends within the intact WAL.
fn reduce(journal: &Journal, w: &WalLog, acks: &AckLog, all: &[Point]) -> Result<Reduction, OpsError> {
    let map = walprefix::LogMap::new(w.map.clone());
    let mut pre = walprefix::Prefix::new(journal, map, w.lo, w.hi, w.until_ns)
        .map_err(|e| OpsError::Failed(format!("reading the WAL from the write journal: {e}")))?;
    let mut sorted_ends = w.ends.clone();
    for e in &mut sorted_ends {
        e.sort_unstable();
    }
    let mut order: Vec<&Point> = all.iter().collect();
    order.sort_by_key(|p| (p.base(), p.index));
    let mut outcomes = vec![Outcome::default(); all.len()];
    let mut must = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut rest = Vec::new();
    for p in order {
        let r = pre
            .read(p)
            .map_err(|e| OpsError::Failed(format!("reading the WAL from the write journal: {e}")))?;
        let acked = acks.before(p.t_ns);
        let found: Vec<i64> =
            sorted_ends.iter().map(|e| e.partition_point(|&x| x <= r.intact_to) as i64).collect();
        let lost = acked.iter().zip(&found).map(|(&n, &f)| (n - f).max(0)).sum();
        outcomes[p.index] = Outcome { lost, found, ..Outcome::default() };
        let new_state = seen.insert(r.other);
        if r.other_extra || new_state {
            must.push(p.index);
        } else {
            rest.push(p.index);
        }
    }
    let states = seen.len();
    rest.sort_unstable();
    let spread = crash::sample(
        &rest.iter().map(|&i| all[i]).collect::<Vec<_>>(),
        SPREAD.max(rest.len() / SPREAD_EVERY),
    );
    let mut recover: Vec<usize> = must.into_iter().chain(spread.iter().map(|p| p.index)).collect();
    recover.sort_unstable();
    recover.dedup();
    Ok(Reduction { outcomes, recover, states })
}

/// A connection to the SQLite database at `url` with the cell's setting
/// `s` applied (`PRAGMA key=value` each).
fn open_sqlite(url: &DbUrl, s: &[(String, String)]) -> Result<Box<dyn storbench_db::Connection>, OpsError> {
    let mut c = connect(url)?;
    for (k, v) in s {
        c.batch(&format!("PRAGMA {k}={v}"))?;
    }
    Ok(c)
}

/// One point: its image, mounted, the engine's recovery and the checks; all undone after.
fn check_point(
    o: &Options,
    replayer: &mut Replayer,
    scratch: &Scratch,
    p: &Point,
    run: &RunLog,
    acked: &[i64],
) -> Result<(Outcome, Timing), OpsError> {
    let districts = &run.districts;
    let mut tm = Timing::default();
    let mut lap = Instant::now();
    let mut split = || std::mem::replace(&mut lap, Instant::now()).elapsed();
    let image = scratch.dir.join("point.img");
    replayer
        .materialise(p, &image)
        .map_err(|e| OpsError::Failed(format!("making crash point {}'s image: {e}", p.index)))?;
    tm.image = split();
    let mut m = Mounted { image, device: None, at: None };
    let failed = |why: String| Outcome { failed: Some(why), ..Outcome::default() };
    let dev = match losetup(&m.image) {
        Ok(d) => d,
        Err(e) => return Err(OpsError::Failed(format!("attaching crash point {}'s image: {e}", p.index))),
    };
    m.device = Some(dev.clone());
    let at = scratch.dir.join("mnt");
    std::fs::create_dir_all(&at).map_err(|e| OpsError::Failed(format!("creating {}: {e}", at.display())))?;
    let mut mount = Command::new("mount");
    // XFS refuses a second filesystem of the same UUID while the medium's
    // own is mounted: a crash image is a copy of it.
    if storbench_io::target::fs_type(Path::new(&dev)).as_deref() == Some("xfs") {
        mount.args(["-o", "nouuid"]);
    }
    if let Err(e) = run_cmd(mount.arg(&dev).arg(&at)) {
        let first = e.lines().next().unwrap_or("").to_string();
        tm.mount = split();
        drop(m);
        tm.cleanup = split();
        return Ok((failed(format!("the filesystem did not mount: {first}")), tm));
    }
    m.at = Some(at.clone());
    tm.mount = split();
    let out = match &o.target {
        Target::Sqlite { mount, path } => {
            let rel = path.strip_prefix(mount).unwrap_or(path);
            check_sqlite(&at.join(rel), districts, acked)
        }
        Target::Mariadb { mount, data, database } => {
            let rel = data.strip_prefix(mount).unwrap_or(data);
            let (out, recovered_in) = check_mariadb(
                &at.join(rel),
                &scratch.dir.join("run"),
                database,
                districts,
                acked,
                &run.server,
            );
            tm.recover = recovered_in;
            out
        }
        Target::Postgres { mount, inst } => {
            let rel = inst.data.strip_prefix(mount).unwrap_or(&inst.data);
            let (out, recovered_in) =
                check_postgres(&at.join(rel), &scratch.dir.join("run"), districts, acked);
            tm.recover = recovered_in;
            out
        }
    };
    tm.check = split().saturating_sub(tm.recover);
    drop(m);
    tm.cleanup = split();
    Ok((out, tm))
}

/// SQLite on a crash image: open (its WAL or rollback journal recovers),
/// `PRAGMA integrity_check`, and the acknowledged rows looked for; with
/// TPC-C (`districts` not empty) the acknowledged New-Orders per district
/// and `tpcc check`'s consistency conditions instead of the rows.
fn check_sqlite(db: &Path, districts: &[[i64; 3]], acked: &[i64]) -> Outcome {
    let mut out = Outcome::default();
    if !db.exists() {
        // SQLite would open an empty database in its place: every
        // acknowledged row is gone (a cache that lies about flushes can
        // lose the file's creation itself), and recovery did not happen.
        out.failed = Some(format!("{} is not on the recovered filesystem", db.display()));
        out.lost = acked.iter().sum();
        return out;
    }
    let conn = match rusqlite::Connection::open(db) {
        Ok(c) => c,
        Err(e) => {
            out.failed = Some(format!("opening: {e}"));
            return out;
        }
    };
    let check: Result<Vec<String>, _> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect());
    match check {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => {}
        Ok(rows) => out.inconsistent = Some(rows.into_iter().take(3).collect::<Vec<_>>().join("; ")),
        Err(e) => out.inconsistent = Some(e.to_string()),
    }
    if !districts.is_empty() {
        drop(conn);
        let checked = DbUrl::parse(&format!("sqlite:{}", db.display()))
            .map_err(|e| storbench_db::DbError::new(storbench_db::ErrorKind::Connect, e))
            .and_then(|u| connect(&u))
            .and_then(|mut c| {
                let first = out.inconsistent.take();
                check_tpcc(c.as_mut(), districts, acked, &mut out)?;
                // integrity_check's complaint first, the conditions' after.
                if first.is_some() {
                    out.inconsistent = first;
                }
                Ok(())
            });
        if let Err(e) = checked {
            if out.inconsistent.is_none() {
                out.error(&e.to_string(), false);
            }
        }
        return out;
    }
    let q = format!("SELECT count(*) FROM {TABLE} WHERE client = ?1 AND seq <= ?2");
    for (c, &n) in acked.iter().enumerate() {
        if n == 0 {
            continue;
        }
        match conn.query_row(&q, [c as i64, n], |r| r.get::<_, i64>(0)) {
            Ok(found) => out.lost += n - found,
            Err(e) if out.inconsistent.is_some() => {
                out.lost += n;
                let _ = e;
            }
            Err(e) => {
                out.failed = Some(format!("reading {TABLE}: {e}"));
                out.lost += n;
            }
        }
    }
    out
}

/// The temporary server's settings on a crash image, over the copy's own
/// (given on its command line), each one changing what recovery and the
/// check cost, never what they find: the image is thrown away after the
/// check, and redo replays the WAL's records as they are whatever the
/// settings say. Its TCP socket is off too ([`Temporary::start_with`]):
/// servers of parallel workers each have only their run directory's
/// Unix socket, so they cannot collide on a port.
const RECOVERY_SETTINGS: [(&str, &str); 4] = [
    // No fsync: crash recovery then skips syncing the whole data directory
    // before it starts (`SyncDataDirectory`: an fsync of every file of the
    // copy), and its end-of-recovery checkpoint writes its pages without
    // waiting for them to reach the disk. fsync only orders writes against
    // a crash of this server or host, which the check never has: the
    // queries read the pages from the server's buffers or the page cache,
    // the same bytes either way.
    ("fsync", "off"),
    // Redo applies the full-page images the run's WAL holds as the records
    // say (the setting decides only what new WAL gets); after recovery,
    // reads that set hint bits on a copy with data checksums would each
    // log the page whole first — a second copy of every page pg_amcheck
    // reads. Nothing the check counts reads that WAL.
    ("full_page_writes", "off"),
    // No vacuum or analyze beside the check: it would only remove dead
    // tuples and refresh statistics, neither of which a check condition,
    // a count of orders or pg_amcheck's verdict depends on, and competes
    // with the check for the CPU (stats are reset by crash recovery, so
    // it would start on every table).
    ("autovacuum", "off"),
    // No JIT compilation of the check's larger aggregates (`tpcc check`
    // over order_line passes jit_above_cost): it changes how expressions
    // run, not their results, and compiling costs more than a point's
    // queries save on a table of scale 1.
    ("jit", "off"),
];

/// PostgreSQL on a crash image: a temporary server on the copied data
/// directory (its crash recovery replays the WAL), the acknowledged rows
/// looked for (with TPC-C, `districts` not empty: the acknowledged
/// New-Orders per district, and `tpcc check`'s consistency conditions),
/// then `pg_amcheck` over every table and B-tree index of the database
/// ([`amcheck`]).
/// Stopped immediately after: the image is thrown away.
fn check_postgres(data: &Path, run_dir: &Path, districts: &[[i64; 3]], acked: &[i64]) -> (Outcome, Duration) {
    let mut out = Outcome::default();
    if !data.join("PG_VERSION").exists() {
        out.failed = Some(format!("{} is not on the recovered filesystem", data.display()));
        return (out, Duration::ZERO);
    }
    // The live server's lock: its pid is alive, which would stop the copy.
    let _ = std::fs::remove_file(data.join("postmaster.pid"));
    let _ = std::fs::remove_dir_all(run_dir);
    if let Err(e) = std::fs::create_dir_all(run_dir) {
        out.failed = Some(format!("creating {}: {e}", run_dir.display()));
        return (out, Duration::ZERO);
    }
    let t0 = Instant::now();
    let t = match Temporary::start_with(data, run_dir, &RECOVERY_SETTINGS, false) {
        Ok(t) => t,
        Err(e) => {
            out.error(&e.to_string(), true);
            let _ = std::fs::remove_dir_all(run_dir);
            return (out, t0.elapsed());
        }
    };
    let recovered_in = t0.elapsed();
    // As on MariaDB: a check that never ends is bounded (SIGQUIT: the
    // postmaster ends its backends at once, their clients get an error).
    let dog = watch(t.pid(), storbench_proc::Sig::SIGQUIT, CHECK_TIMEOUT);
    let dir =
        percent_encoding::utf8_percent_encode(&run_dir.to_string_lossy(), percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let checked = DbUrl::parse(&format!("postgres://root@{dir}:{}/storbench", t.port()))
        .map_err(|e| storbench_db::DbError::new(storbench_db::ErrorKind::Connect, e))
        .and_then(|u| connect(&u))
        .and_then(|mut c| {
            if !districts.is_empty() {
                return check_tpcc(c.as_mut(), districts, acked, &mut out);
            }
            out.lost = acked::look_for(c.as_mut(), TABLE, acked)?.iter().map(|c| c.missing()).sum();
            Ok(())
        });
    // amcheck after the rows or TPC-C's conditions (which read through
    // the indexes, and so can miss an index that lacks a heap tuple or a
    // heap page no query reads): its first complaint unless they complained first.
    if checked.is_ok() && out.inconsistent.is_none() {
        match amcheck(&t, run_dir) {
            Ok(bad) => out.inconsistent = bad,
            Err(e) => out.failed = Some(e),
        }
    }
    if fired(&dog) {
        out.failed = Some(did_not_finish(&None));
    } else if let Err(e) = checked {
        out.error(&e.to_string(), false);
    }
    drop(dog);
    // Immediate shutdown: nothing of this copy is kept.
    if let Some(pid) = t.pid() {
        // SAFETY: kill with a pid from the copy's postmaster.pid, which this started.
        unsafe { libc::kill(pid as i32, libc::SIGQUIT) };
        storbench_proc::wait_until(Duration::from_secs(30), || !storbench_proc::alive(pid));
    }
    drop(t);
    let _ = std::fs::remove_dir_all(run_dir);
    (out, recovered_in)
}

/// How long a recovered image's check (its rows looked for, its tables
/// checked) may take before its server is killed and the point is said to
/// have failed: a check on a damaged image may loop. Scale-1 TPC-C checks
/// in about a second here; a user's larger schema in minutes.
const CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// What a live MariaDB run may take beyond its `--cut-after`: the schema
/// built the first time (scale 1, about a minute on a modelled SSD here)
/// and a clean stop, with room.
const LIVE_ALLOWANCE: Duration = Duration::from_secs(1200);

/// A watchdog on `pid` (none when the process is gone, or when the
/// system cannot start its thread: then the work goes unbounded, as before).
fn watch(pid: Option<u32>, sig: storbench_proc::Sig, after: Duration) -> Option<storbench_proc::Watchdog> {
    storbench_proc::Watchdog::arm(pid?, sig, after).ok()
}

/// Whether `dog` killed its process.
fn fired(dog: &Option<storbench_proc::Watchdog>) -> bool {
    dog.as_ref().is_some_and(storbench_proc::Watchdog::fired)
}

/// A point's failure when its check outlived [`CHECK_TIMEOUT`].
fn did_not_finish(log: &Option<String>) -> String {
    let log = log.as_ref().map(|l| format!("; the server's log: {l}")).unwrap_or_default();
    format!(
        "the check did not finish within {} s (a damaged table's check can loop): the server was killed{log}",
        CHECK_TIMEOUT.as_secs()
    )
}

/// The mariadbd options of every server here, live or on a crash image:
/// a small buffer pool and redo log (the default log, 96 MiB, would not
/// fit a small medium; the data is small too).
const MARIA_SETTINGS: [&str; 2] = ["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M"];

fn maria_settings() -> Vec<String> {
    MARIA_SETTINGS.iter().map(|s| s.to_string()).collect()
}

fn maria_err(e: crate::backup::BackupError) -> OpsError {
    OpsError::Failed(e.to_string())
}

/// A mariadbd on `data` with its files in `run_dir` (made), recorded for
/// the sweep while it runs; a `copy` (a crash image's) is recorded as made
/// here, so a sweep after a killed storbench stops its server too.
fn maria_start(
    data: &Path,
    run_dir: &Path,
    copy: bool,
    options: &[String],
) -> Result<(mariadbd::Mariadbd, Registration), OpsError> {
    std::fs::create_dir_all(run_dir)
        .map_err(|e| OpsError::Failed(format!("creating {}: {e}", run_dir.display())))?;
    let mut reg = Registration::new("mariadbd", data, &[run_dir.to_path_buf()])?;
    if copy {
        reg.set_data_made()?;
    }
    let mut settings = maria_settings();
    settings.extend_from_slice(options);
    let bin = mariadbd::server_bin().map_err(maria_err)?;
    let never = AtomicBool::new(false);
    let m = mariadbd::Mariadbd::start(&bin, &settings, data, run_dir, &mut reg, &never).map_err(maria_err)?;
    Ok((m, reg))
}

fn maria_url(socket: &Path, database: &str) -> Result<DbUrl, OpsError> {
    crate::backup::physical::maria_db(socket, database, socket).map(|d| d.url).map_err(maria_err)
}

/// MariaDB on a crash image: a mariadbd on the copied data directory
/// (InnoDB's crash recovery replays its redo log; the doublewrite buffer
/// mends torn pages), the acknowledged rows looked for (TPC-C: the
/// acknowledged New-Orders per district and `tpcc check`'s conditions,
/// as on PostgreSQL), and `CHECK TABLE … EXTENDED` on every table of the
/// workload (InnoDB reads each index's every page, checksums checked, and
/// matches the secondary indexes against the clustered one). Killed
/// after: the image is thrown away.
fn check_mariadb(
    data: &Path,
    run_dir: &Path,
    database: &str,
    districts: &[[i64; 3]],
    acked: &[i64],
    server_options: &[String],
) -> (Outcome, Duration) {
    let mut out = Outcome::default();
    if !data.join("mysql").is_dir() {
        out.failed = Some(format!("{} is not on the recovered filesystem", data.display()));
        return (out, Duration::ZERO);
    }
    let _ = std::fs::remove_dir_all(run_dir);
    let t0 = Instant::now();
    let (mut server, _reg) = match maria_start(data, run_dir, true, server_options) {
        Ok(s) => s,
        Err(e) => {
            out.error(&e.to_string(), true);
            let _ = std::fs::remove_dir_all(run_dir);
            return (out, t0.elapsed());
        }
    };
    let recovered_in = server.started_in();
    // A check on a damaged image may never end (a B-tree whose page chain
    // loops, a server waiting on a page it cannot read): killed at the
    // bound, its client gets an error back and the point says why.
    let dog = watch(server.pid(), storbench_proc::Sig::SIGKILL, CHECK_TIMEOUT);
    let checked = maria_url(server.socket(), database).map_err(|e| e.to_string()).and_then(|u| {
        let mut c = connect(&u).map_err(|e| e.to_string())?;
        let tables: Vec<&str> = if districts.is_empty() {
            out.lost = acked::look_for(c.as_mut(), TABLE, acked)
                .map_err(|e| e.to_string())?
                .iter()
                .map(|c| c.missing())
                .sum();
            vec![TABLE]
        } else {
            check_tpcc(c.as_mut(), districts, acked, &mut out).map_err(|e| e.to_string())?;
            tpcc::TABLES.to_vec()
        };
        // CHECK TABLE's rows (Table, Op, Msg_type, Msg_text): each
        // table's verdict is its last row's text ("OK"); an `error` row
        // anywhere says what it found.
        let rows = c
            .query(&Stmt::new(format!("CHECK TABLE {} EXTENDED", tables.join(", "))), &[])
            .map_err(|e| e.to_string())?;
        let verdict: Vec<[String; 3]> =
            rows.iter().map(|r| [0, 2, 3].map(|i| r.text(i).unwrap_or_default())).collect();
        let bad_tables: Vec<&str> = verdict
            .iter()
            .enumerate()
            .filter(|(i, [t, kind, text])| {
                let last = verdict.get(i + 1).is_none_or(|n| &n[0] != t);
                kind.eq_ignore_ascii_case("error") || (last && text != "OK")
            })
            .map(|(_, [t, _, _])| t.as_str())
            .collect();
        // A bad table's every row but its status: the warnings say which
        // index and page (its verdict alone says only "Corrupt").
        let bad: Vec<String> = verdict
            .iter()
            .filter(|[t, kind, text]| {
                bad_tables.contains(&t.as_str()) && (!kind.eq_ignore_ascii_case("status") || text != "OK")
            })
            .map(|[t, _, text]| format!("{t}: {text}"))
            .collect();
        if out.inconsistent.is_none() && !bad.is_empty() {
            let log = server.complaint().map(|l| format!(" (the server's log: {l})")).unwrap_or_default();
            out.inconsistent = Some(format!("CHECK TABLE: {}{log}", bad.join("; ")));
        }
        Ok(())
    });
    if fired(&dog) {
        out.failed = Some(did_not_finish(&server.complaint()));
    }
    if let Err(e) = checked {
        if out.failed.is_none() {
            out.error(&e, false);
            // What the server's log says beside an error it sent (a table
            // it calls corrupted says no page; its log does).
            if let (Some(why), Some(log)) = (out.inconsistent.as_mut(), server.complaint()) {
                why.push_str(&format!(" (the server's log: {log})"));
            }
        }
    }
    drop(dog);
    server.kill();
    let _ = std::fs::remove_dir_all(run_dir);
    (out, recovered_in)
}

/// TPC-C after recovery: a district whose `n` New-Orders were acknowledged
/// must hold at least `n` orders from its `d_next_o_id` before the run on
/// (they are the first `n` ids: a district's orders take consecutive ids in
/// commit order); fewer is that many acknowledged orders lost. Then every
/// consistency condition of `tpcc check`.
fn check_tpcc(
    c: &mut dyn storbench_db::Connection,
    districts: &[[i64; 3]],
    acked: &[i64],
    out: &mut Outcome,
) -> Result<(), storbench_db::DbError> {
    let q = Stmt::new("SELECT count(*) FROM orders WHERE o_w_id = $1 AND o_d_id = $2 AND o_id >= $3");
    for (d, &n) in districts.iter().zip(acked) {
        let p =
            [storbench_db::Value::Int(d[0]), storbench_db::Value::Int(d[1]), storbench_db::Value::Int(d[2])];
        let found = c.query_one(&q, &p)?.int(0)?;
        out.found.push(found);
        out.lost += (n - found).max(0);
    }
    let failed: Vec<String> = tpcc::check(c)?
        .into_iter()
        .filter(|r| !r.passed)
        .map(|r| format!("tpcc check condition {} ({}): {}", r.number, r.name, r.detail))
        .collect();
    if let Some(first) = failed.first() {
        out.inconsistent = Some(if failed.len() > 1 {
            format!("{first} (and {} more condition(s))", failed.len() - 1)
        } else {
            first.clone()
        });
    }
    Ok(())
}

/// Whether an error says a page or the filesystem was found damaged: a
/// server's own words, or the kernel's for a filesystem structure that
/// fails its check (`EBADMSG`, "Bad message": an ext4 metadata block whose
/// checksum fails; `EUCLEAN`, "Structure needs cleaning"), seen when a
/// cache that ignored flushes lost the filesystem's own writes.
fn damaged(e: &str) -> bool {
    ["corrupt", "invalid page", "could not read block", "checksum", "Bad message", "Structure needs cleaning"]
        .iter()
        .any(|w| e.contains(w))
}

/// `pg_amcheck` over every table and B-tree index of the `storbench`
/// database, the catalogs included, each index's entries matched against
/// its table's (`--heapallindexed`): every page is read, so a page that
/// fails its checksum is found as well as a damaged tuple or index. Its
/// first complaint, or `None` when it found nothing; an error when it did
/// not run.
fn amcheck(t: &Temporary, run_dir: &Path) -> Result<Option<String>, String> {
    let mut c = Command::new(t.bindir().join("pg_amcheck"));
    c.arg("-h").arg(run_dir).args(["-p", &t.port().to_string(), "-U", "root", "-d", "storbench"]);
    c.args(["--install-missing", "--heapallindexed", "--no-password"]);
    match c.output() {
        Ok(o) if o.status.success() => Ok(None),
        Ok(o) => {
            let text =
                format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            let why = text.lines().map(str::trim).filter(|l| !l.is_empty()).take(2).collect::<Vec<_>>();
            Ok(Some(format!("pg_amcheck ({}): {}", o.status, why.join(" "))))
        }
        Err(e) => Err(format!("pg_amcheck did not run (postgresql-client-15): {e}")),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// A point's image on a loop device, mounted; undone on drop (unmount, detach, delete).
struct Mounted {
    image: PathBuf,
    device: Option<String>,
    at: Option<PathBuf>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(at) = self.at.take() {
            if run_cmd(Command::new("umount").arg(&at)).is_err() {
                let _ = run_cmd(Command::new("umount").arg("-l").arg(&at));
            }
        }
        if let Some(d) = self.device.take() {
            let _ = run_cmd(Command::new("losetup").arg("-d").arg(&d));
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// The cell's scratch directory (checkpoint image, point image, mount
/// point), removed with everything in it on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(parent: &Path) -> Result<Scratch, OpsError> {
        let dir = parent.join(format!("storbench-crash-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| OpsError::Failed(format!("creating {}: {e}", dir.display())))?;
        Ok(Scratch { dir })
    }

    /// Worker `w`'s directory inside (its checkpoint image, point image,
    /// mount point and server's run directory), removed on drop.
    fn sub(&self, w: usize) -> Result<Scratch, OpsError> {
        let dir = self.dir.join(format!("w{w}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| OpsError::Failed(format!("creating {}: {e}", dir.display())))?;
        Ok(Scratch { dir })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn losetup(file: &Path) -> Result<String, String> {
    // One attach at a time in this process: parallel workers asking for a
    // free device at once would be offered the same one.
    static ATTACH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ATTACH.lock().unwrap_or_else(|e| e.into_inner());
    run_cmd(Command::new("losetup").args(["--find", "--show"]).arg(file)).map(|s| s.trim().to_string())
}

fn run_cmd(c: &mut Command) -> Result<String, String> {
    let out = c.output().map_err(|e| format!("{c:?}: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_distribution_is_over_the_tried_points() {
        let c = Cell { lost: vec![0, 5, 0, 9, 1], ..Cell::default() };
        assert_eq!((c.lost_quantile(0.5), c.lost_quantile(0.9), c.lost_quantile(1.0)), (1, 9, 9));
        assert_eq!(c.lost_quantile(0.0), 0);
        assert!((c.lost_mean() - 3.0).abs() < 1e-9);
        assert_eq!(Cell::default().lost_quantile(0.5), 0);
        assert_eq!(Workload::parse("tpcc"), Some(Workload::Tpcc));
        assert_eq!(Workload::parse("tpc-c"), None);
    }

    /// What CI saw on a lying cache's point: the data directory's own
    /// directory block failed its checksum, so handing it to the server's
    /// user failed. The filesystem is damaged, not the recovery broken.
    #[test]
    fn a_damaged_filesystem_is_inconsistent_and_a_missing_tool_a_failed_recovery() {
        let mut out = Outcome::default();
        out.error(
            "giving /m/storbench-mariadb to mysql: chown: cannot read directory '/m/storbench-mariadb/sys': Bad message",
            true,
        );
        assert!(
            out.inconsistent.as_deref().is_some_and(|w| w.starts_with("recovery stopped: giving")),
            "{out:?}"
        );
        assert_eq!(out.failed, None);
        let mut out = Outcome::default();
        out.error("starting mariadbd: No such file or directory (os error 2)", true);
        assert_eq!(out.inconsistent, None);
        assert!(out.failed.as_deref().is_some_and(|w| w.starts_with("recovery failed: starting")), "{out:?}");
        let mut out = Outcome::default();
        out.error("reading t: Structure needs cleaning (os error 117)", false);
        assert_eq!(out.inconsistent.as_deref(), Some("reading t: Structure needs cleaning (os error 117)"));
    }
}
