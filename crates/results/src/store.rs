//! The store itself: open (with migrations and stale-run recovery), begin a
//! run, write a step in one transaction, finish a run, and read back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use storbench_metrics::StepReport;

use crate::schema::MIGRATIONS;

/// Errors from the results store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("results store {path}: {source}")]
    Sqlite {
        /// The store's file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The file was written by a newer storbench.
    #[error("results store {path} has schema version {found}; this storbench knows up to {known}: upgrade storbench")]
    TooNew {
        /// The store's file.
        path: PathBuf,
        /// Version found in the file.
        found: i64,
        /// Highest version this build knows.
        known: i64,
    },
    /// No run matches the given id or uuid prefix.
    #[error("no run '{0}' in the results store (see `storbench results list`)")]
    NoSuchRun(String),
    /// A uuid prefix matches several runs.
    #[error("run '{0}' is ambiguous: it matches several runs; give more of the uuid")]
    Ambiguous(String),
    /// A run still in progress cannot be deleted.
    #[error(
        "run '{0}' is still running: stop it first (or wait; a run whose process died reads as interrupted)"
    )]
    StillRunning(String),
    /// A step carries two figures or two histograms of one name: storing
    /// one would hide the other.
    #[error("step {step}: two {what}s named '{name}'; each name is stored once")]
    Duplicate {
        /// The step's index.
        step: i64,
        /// `figure` or `histogram`.
        what: &'static str,
        /// The name given twice.
        name: String,
    },
    /// A histogram could not be serialised.
    #[error("histogram {name}: {message}")]
    Histogram {
        /// Histogram name.
        name: String,
        /// What went wrong.
        message: String,
    },
}

/// The status of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In progress (or its process died; see [`Store::open`]).
    Running,
    /// Every step finished.
    Complete,
    /// Stopped by the user or by a lost process; completed steps are kept.
    Interrupted,
    /// Ended by an error; completed steps are kept.
    Failed,
}

impl Status {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Complete => "complete",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Status {
        match s {
            "complete" => Status::Complete,
            "interrupted" => Status::Interrupted,
            "failed" => Status::Failed,
            _ => Status::Running,
        }
    }
}

/// What a new run is: written when it begins.
#[derive(Clone, Debug)]
pub struct NewRun {
    /// Kind of run: `io`, `tpcc`, `tpcb`, `tpch`, ...
    pub kind: String,
    /// A human label (defaults to something derived from the config).
    pub label: String,
    /// The full configuration, as given after defaults were applied.
    pub config: Value,
    /// The environment that makes the numbers comparable (DESIGN.md).
    pub env: Value,
    /// The plan this run belongs to, if any.
    pub plan: Option<String>,
    /// The plan cell this run is, if any.
    pub cell: Option<String>,
}

/// A run as stored.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunRow {
    /// Integer id (local to this store).
    pub id: i64,
    /// Globally unique id.
    pub uuid: String,
    /// Kind of run.
    pub kind: String,
    /// Label.
    pub label: String,
    /// RFC 3339 start time (UTC).
    pub started_at: String,
    /// RFC 3339 end time (UTC), when finished.
    pub finished_at: Option<String>,
    /// Status.
    pub status: Status,
    /// Configuration.
    pub config: Value,
    /// Environment.
    pub env: Value,
    /// Plan name.
    pub plan: Option<String>,
    /// Plan cell.
    pub cell: Option<String>,
}

impl RunRow {
    /// The run's short uuid as printed beside its id: the first 8
    /// characters, or 13 (through the first dash) when those 8 are all
    /// digits — a key of digits alone is a run id, so the short form must
    /// never be one.
    pub fn short(&self) -> &str {
        short_uuid(&self.uuid)
    }
}

/// See [`RunRow::short`].
pub fn short_uuid(uuid: &str) -> &str {
    let head = uuid.get(..8).unwrap_or(uuid);
    if head.bytes().all(|b| b.is_ascii_digit()) {
        uuid.get(..13).unwrap_or(uuid)
    } else {
        head
    }
}

/// A step as stored.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepRow {
    /// Index within the run, from 0.
    pub idx: i64,
    /// Label, e.g. `users=8` or `read-random-8k`.
    pub label: String,
    /// Parameters of the load level.
    pub params: Value,
    /// RFC 3339 start.
    pub started_at: String,
    /// RFC 3339 end.
    pub finished_at: String,
}

/// A summary figure as stored.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MetricRow {
    /// Step index.
    pub step_idx: i64,
    /// Dotted name.
    pub name: String,
    /// Value.
    pub value: f64,
    /// Unit text.
    pub unit: String,
}

/// A per-second sample as stored.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SampleRow {
    /// Step index.
    pub step_idx: i64,
    /// Milliseconds since the step began.
    pub t_ms: i64,
    /// Series name.
    pub name: String,
    /// Value.
    pub value: f64,
}

/// A step's text note as stored (`verdict.kind`, `verdict.evidence`): what
/// a figure's number column cannot hold.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NoteRow {
    /// Step index.
    pub step_idx: i64,
    /// Dotted name.
    pub name: String,
    /// The text.
    pub text: String,
}

/// A serialised histogram as stored.
#[derive(Clone, Debug)]
pub struct HistogramRow {
    /// Step index.
    pub step_idx: i64,
    /// Name.
    pub name: String,
    /// HDR V2 (deflate) bytes.
    pub hdr: Vec<u8>,
}

/// Which runs to list.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    /// Only runs of this kind.
    pub kind: Option<String>,
    /// Only runs of this plan.
    pub plan: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

/// An open results store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The schema version of the file (older than [`MIGRATIONS`] only when
    /// opened with [`Store::open_read`]).
    version: i64,
}

/// The current time as the store writes it: RFC 3339, UTC, milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `s` as a LIKE pattern that matches only itself (escape character `\`).
fn like_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

fn process_alive(pid: i64) -> bool {
    if pid <= 0 || pid > i32::MAX as i64 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as i32, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Store {
    /// Opens (creating if needed) the store at `path`, applies migrations,
    /// and marks runs whose process has died as `interrupted`.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_with(path.as_ref(), true)
    }

    /// Opens the store at `path` for reading (`results`, `report`,
    /// `compare`): an older schema is read as it is, not migrated, so an
    /// older storbench still running a plan on this store keeps working.
    /// What the older schema lacks reads as empty (a version-1 store has no
    /// notes). A new or empty file is set up as [`Store::open`] does.
    pub fn open_read(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_with(path.as_ref(), false)
    }

    fn open_with(path: &Path, migrate: bool) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        let conn =
            Connection::open(&path).map_err(|source| StoreError::Sqlite { path: path.clone(), source })?;
        let mut store = Store { conn, path, version: 0 };
        store.init(migrate)?;
        Ok(store)
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |source| StoreError::Sqlite { path: self.path.clone(), source }
    }

    fn init(&mut self, migrate: bool) -> Result<(), StoreError> {
        let e = |source| StoreError::Sqlite { path: self.path.clone(), source };
        self.conn.busy_timeout(Duration::from_secs(30)).map_err(e)?;
        self.conn
            .execute_batch("PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;")
            .map_err(e)?;
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(e)?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(StoreError::TooNew { path: self.path.clone(), found: version, known });
        }
        if !migrate && version > 0 {
            self.version = version;
            return self.recover_stale();
        }
        let mut now = version;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(e)?;
            tx.execute_batch(sql).map_err(e)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(e)?;
            tx.commit().map_err(e)?;
            now = (i + 1) as i64;
        }
        self.version = now;
        self.recover_stale()
    }

    /// Marks `running` runs of this host whose process is gone as interrupted.
    fn recover_stale(&mut self) -> Result<(), StoreError> {
        let host = hostname();
        let stale: Vec<i64> = {
            let mut stmt = self
                .conn
                .prepare("SELECT id, pid, host FROM runs WHERE status = 'running'")
                .map_err(self.err())?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?, r.get::<_, Option<String>>(2)?))
                })
                .map_err(self.err())?;
            let mut stale = Vec::new();
            for row in rows {
                let (id, pid, h) = row.map_err(self.err())?;
                let ours = h.as_deref() == Some(host.as_str());
                if ours && !pid.is_some_and(process_alive) {
                    stale.push(id);
                }
            }
            stale
        };
        for id in stale {
            self.conn
                .execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = COALESCE(finished_at, ?2) WHERE id = ?1",
                    params![id, now_rfc3339()],
                )
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// Deletes the runs `keys` name (ids or uuid prefixes) with all their
    /// steps, figures, samples, histograms and notes, in one transaction:
    /// every key is resolved first, so an unknown, ambiguous or running one
    /// deletes nothing. Returns the runs deleted, in the order given.
    pub fn delete_runs(&mut self, keys: &[String]) -> Result<Vec<RunRow>, StoreError> {
        let mut runs: Vec<RunRow> = Vec::new();
        for key in keys {
            let run = self.run(key)?;
            if run.status == Status::Running {
                return Err(StoreError::StillRunning(key.clone()));
            }
            if !runs.iter().any(|r| r.id == run.id) {
                runs.push(run);
            }
        }
        let e = |source| StoreError::Sqlite { path: self.path.clone(), source };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(e)?;
        for r in &runs {
            // foreign_keys=ON: the run's rows in every other table go with it.
            tx.execute("DELETE FROM runs WHERE id = ?1", params![r.id]).map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(runs)
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records the start of a run; returns its id. Status is `running`.
    pub fn begin_run(&mut self, run: &NewRun) -> Result<RunRow, StoreError> {
        let uuid = uuid::Uuid::new_v4().to_string();
        let started = now_rfc3339();
        self.conn
            .execute(
                "INSERT INTO runs (uuid, kind, label, started_at, status, config_json, env_json, plan, cell, pid, host)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    uuid,
                    run.kind,
                    run.label,
                    started,
                    run.config.to_string(),
                    run.env.to_string(),
                    run.plan,
                    run.cell,
                    std::process::id() as i64,
                    hostname(),
                ],
            )
            .map_err(self.err())?;
        let id = self.conn.last_insert_rowid();
        self.run(&id.to_string())
    }

    /// Merges `extra` into the run's environment (e.g. the database version,
    /// learnt after connecting).
    pub fn update_env(&mut self, run_id: i64, env: &Value) -> Result<(), StoreError> {
        self.conn
            .execute("UPDATE runs SET env_json = ?2 WHERE id = ?1", params![run_id, env.to_string()])
            .map_err(self.err())?;
        Ok(())
    }

    /// Writes one whole step — its row, figures, samples and histograms — in
    /// one transaction. Two figures or two histograms of one name are
    /// refused ([`StoreError::Duplicate`]) before anything is written.
    #[allow(clippy::too_many_arguments)]
    pub fn write_step(
        &mut self,
        run_id: i64,
        idx: i64,
        label: &str,
        params_json: &Value,
        started_at: &str,
        finished_at: &str,
        report: &StepReport,
    ) -> Result<(), StoreError> {
        let dup = |what: &'static str, mut names: Vec<&str>| {
            names.sort_unstable();
            match names.windows(2).find(|w| w[0] == w[1]) {
                Some(w) => Err(StoreError::Duplicate { step: idx, what, name: w[0].to_string() }),
                None => Ok(()),
            }
        };
        dup("figure", report.figures.iter().map(|f| f.name.as_str()).collect())?;
        dup("histogram", report.histograms.iter().map(|(n, _)| n.as_str()).collect())?;
        let mut blobs = Vec::with_capacity(report.histograms.len());
        for (name, h) in &report.histograms {
            let bytes = h
                .to_bytes()
                .map_err(|e| StoreError::Histogram { name: name.clone(), message: e.to_string() })?;
            blobs.push((name, bytes));
        }
        let path = self.path.clone();
        let e = move |source| StoreError::Sqlite { path: path.clone(), source };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&e)?;
        tx.execute(
            "INSERT INTO steps (run_id, idx, label, params_json, started_at, finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![run_id, idx, label, params_json.to_string(), started_at, finished_at],
        )
        .map_err(&e)?;
        {
            let mut m = tx
                .prepare(
                    "INSERT INTO metrics (run_id, step_idx, name, value, unit) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(&e)?;
            for f in &report.figures {
                m.execute(params![run_id, idx, f.name, f.value, f.unit.as_str()]).map_err(&e)?;
            }
            let mut s = tx
                .prepare(
                    "INSERT INTO samples (run_id, step_idx, t_ms, name, value) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(&e)?;
            for x in &report.samples {
                s.execute(params![run_id, idx, x.t_ms as i64, x.name, x.value]).map_err(&e)?;
            }
            let mut h = tx
                .prepare("INSERT INTO histograms (run_id, step_idx, name, hdr) VALUES (?1, ?2, ?3, ?4)")
                .map_err(&e)?;
            for (name, bytes) in &blobs {
                h.execute(params![run_id, idx, name, bytes]).map_err(&e)?;
            }
        }
        tx.commit().map_err(&e)?;
        Ok(())
    }

    /// Ends a run with `status`.
    pub fn finish_run(&mut self, run_id: i64, status: Status) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE runs SET status = ?2, finished_at = ?3 WHERE id = ?1",
                params![run_id, status.as_str(), now_rfc3339()],
            )
            .map_err(self.err())?;
        Ok(())
    }

    fn row_to_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
        let config: String = r.get(7)?;
        let env: String = r.get(8)?;
        Ok(RunRow {
            id: r.get(0)?,
            uuid: r.get(1)?,
            kind: r.get(2)?,
            label: r.get(3)?,
            started_at: r.get(4)?,
            finished_at: r.get(5)?,
            status: Status::parse(&r.get::<_, String>(6)?),
            config: serde_json::from_str(&config).unwrap_or(Value::Null),
            env: serde_json::from_str(&env).unwrap_or(Value::Null),
            plan: r.get(9)?,
            cell: r.get(10)?,
        })
    }

    const RUN_COLUMNS: &'static str =
        "id, uuid, kind, label, started_at, finished_at, status, config_json, env_json, plan, cell";

    /// Finds a run by integer id or by a (unique) prefix of its uuid. A key
    /// of digits alone is an id and nothing else: a number that names no
    /// run is [`StoreError::NoSuchRun`], never a uuid that happens to start
    /// with those digits (a script asking for run 12 must not get another
    /// run). [`RunRow::short`] is the short form that always finds its run.
    /// `%` and `_` in a key match themselves, not any text.
    pub fn run(&self, key: &str) -> Result<RunRow, StoreError> {
        if !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()) {
            let sql = format!("SELECT {} FROM runs WHERE id = ?1", Self::RUN_COLUMNS);
            let id = key.parse::<i64>().map_err(|_| StoreError::NoSuchRun(key.to_string()))?;
            return self
                .conn
                .query_row(&sql, params![id], Self::row_to_run)
                .optional()
                .map_err(self.err())?
                .ok_or_else(|| StoreError::NoSuchRun(key.to_string()));
        }
        if key.is_empty() {
            return Err(StoreError::NoSuchRun(key.to_string()));
        }
        let sql =
            format!("SELECT {} FROM runs WHERE uuid LIKE ?1 || '%' ESCAPE '\\' LIMIT 2", Self::RUN_COLUMNS);
        let mut stmt = self.conn.prepare(&sql).map_err(self.err())?;
        let rows: Vec<RunRow> = stmt
            .query_map(params![like_literal(key)], Self::row_to_run)
            .map_err(self.err())?
            .collect::<Result<_, _>>()
            .map_err(self.err())?;
        match rows.len() {
            0 => Err(StoreError::NoSuchRun(key.to_string())),
            1 => Ok(rows.into_iter().next().expect("one row")),
            _ => Err(StoreError::Ambiguous(key.to_string())),
        }
    }

    /// Runs matching `filter`, newest first.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM runs WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR plan = ?2) ORDER BY id DESC LIMIT ?3",
            Self::RUN_COLUMNS
        );
        let limit = filter.limit.map(|l| l as i64).unwrap_or(-1);
        let mut stmt = self.conn.prepare(&sql).map_err(self.err())?;
        let rows = stmt
            .query_map(params![filter.kind, filter.plan, limit], Self::row_to_run)
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// The completed run of `plan` / `cell`, if any (for resuming plans).
    pub fn completed_cell(&self, plan: &str, cell: &str) -> Result<Option<RunRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM runs WHERE plan = ?1 AND cell = ?2 AND status = 'complete' ORDER BY id DESC LIMIT 1",
            Self::RUN_COLUMNS
        );
        self.conn.query_row(&sql, params![plan, cell], Self::row_to_run).optional().map_err(self.err())
    }

    /// The steps of a run, in order.
    pub fn steps(&self, run_id: i64) -> Result<Vec<StepRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT idx, label, params_json, started_at, finished_at FROM steps WHERE run_id = ?1 ORDER BY idx")
            .map_err(self.err())?;
        let rows = stmt
            .query_map(params![run_id], |r| {
                let p: String = r.get(2)?;
                Ok(StepRow {
                    idx: r.get(0)?,
                    label: r.get(1)?,
                    params: serde_json::from_str(&p).unwrap_or(Value::Null),
                    started_at: r.get(3)?,
                    finished_at: r.get(4)?,
                })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// The summary figures of a run, by step then name.
    pub fn metrics(&self, run_id: i64) -> Result<Vec<MetricRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT step_idx, name, value, unit FROM metrics WHERE run_id = ?1 ORDER BY step_idx, rowid",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map(params![run_id], |r| {
                Ok(MetricRow { step_idx: r.get(0)?, name: r.get(1)?, value: r.get(2)?, unit: r.get(3)? })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// The per-second samples of a run, by step, series and time.
    pub fn samples(&self, run_id: i64) -> Result<Vec<SampleRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT step_idx, t_ms, name, value FROM samples WHERE run_id = ?1 ORDER BY step_idx, name, t_ms")
            .map_err(self.err())?;
        let rows = stmt
            .query_map(params![run_id], |r| {
                Ok(SampleRow { step_idx: r.get(0)?, t_ms: r.get(1)?, name: r.get(2)?, value: r.get(3)? })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// Writes (or replaces) text notes of step `step_idx`, all in one
    /// transaction; the step itself is written by [`Store::write_step`].
    pub fn write_notes(
        &mut self,
        run_id: i64,
        step_idx: i64,
        notes: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = move |source| StoreError::Sqlite { path: path.clone(), source };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&e)?;
        {
            let mut n = tx
                .prepare(
                    "INSERT OR REPLACE INTO notes (run_id, step_idx, name, text) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(&e)?;
            for (name, text) in notes {
                n.execute(params![run_id, step_idx, name, text]).map_err(&e)?;
            }
        }
        tx.commit().map_err(&e)?;
        Ok(())
    }

    /// The text notes of a run, by step then name.
    pub fn notes(&self, run_id: i64) -> Result<Vec<NoteRow>, StoreError> {
        if self.version < 2 {
            return Ok(Vec::new()); // notes came with migration 2
        }
        let mut stmt = self
            .conn
            .prepare("SELECT step_idx, name, text FROM notes WHERE run_id = ?1 ORDER BY step_idx, name")
            .map_err(self.err())?;
        let rows = stmt
            .query_map(params![run_id], |r| {
                Ok(NoteRow { step_idx: r.get(0)?, name: r.get(1)?, text: r.get(2)? })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// The serialised histograms of a run.
    pub fn histograms(&self, run_id: i64) -> Result<Vec<HistogramRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT step_idx, name, hdr FROM histograms WHERE run_id = ?1 ORDER BY step_idx, name")
            .map_err(self.err())?;
        let rows = stmt
            .query_map(params![run_id], |r| {
                Ok(HistogramRow { step_idx: r.get(0)?, name: r.get(1)?, hdr: r.get(2)? })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storbench_metrics::{LatencyHistogram, Unit};

    fn new_run() -> NewRun {
        NewRun {
            kind: "io".into(),
            label: "test".into(),
            config: serde_json::json!({"bs": 8192}),
            env: serde_json::json!({"host": "h"}),
            plan: Some("p".into()),
            cell: Some("c1".into()),
        }
    }

    #[test]
    fn round_trips_a_run_with_a_step() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path().join("r.db")).unwrap();
        let run = s.begin_run(&new_run()).unwrap();
        assert_eq!(run.status, Status::Running);
        let mut rep = StepReport::default();
        rep.figure("io.read.iops", 1234.5, Unit::PerS);
        rep.sample(1000, "io.read.iops", 1200.0);
        let mut h = LatencyHistogram::new();
        h.record_ns(38_000);
        rep.latency("io.read.lat", &h);
        s.write_step(run.id, 0, "read-random-8k", &serde_json::json!({"qd": 8}), "a", "b", &rep).unwrap();
        s.finish_run(run.id, Status::Complete).unwrap();
        drop(s);

        let s = Store::open(dir.path().join("r.db")).unwrap();
        let back = s.run(run.short()).unwrap();
        assert_eq!(back.status, Status::Complete);
        assert_eq!(s.run(&run.id.to_string()).unwrap().id, run.id);
        assert!(matches!(s.run("99999"), Err(StoreError::NoSuchRun(_))));
        assert_eq!(back.config["bs"], 8192);
        assert!(s.completed_cell("p", "c1").unwrap().is_some());
        assert!(s.completed_cell("p", "c2").unwrap().is_none());
        let m = s.metrics(run.id).unwrap();
        assert_eq!(m[0].name, "io.read.iops");
        assert_eq!(m[0].value, 1234.5);
        assert_eq!(m[0].unit, "per_s");
        assert_eq!(s.samples(run.id).unwrap().len(), 1);
        let hs = s.histograms(run.id).unwrap();
        let back_h = LatencyHistogram::from_bytes(&hs[0].hdr).unwrap();
        assert_eq!(back_h.summary(), h.summary());
        assert_eq!(s.steps(run.id).unwrap()[0].params["qd"], 8);
    }

    #[test]
    fn notes_sit_beside_a_steps_figures_and_reach_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path().join("r.db")).unwrap();
        let run = s.begin_run(&new_run()).unwrap();
        let rep = StepReport::default();
        s.write_step(run.id, 0, "a", &serde_json::json!({}), "a", "b", &rep).unwrap();
        s.write_step(run.id, 1, "b", &serde_json::json!({}), "a", "b", &rep).unwrap();
        s.write_notes(run.id, 1, &[("verdict.kind", "cpu"), ("verdict.evidence", "CPU 97 % busy")]).unwrap();
        // Written again (a recomputed verdict): replaced, not duplicated.
        s.write_notes(run.id, 1, &[("verdict.kind", "contention")]).unwrap();
        let n = s.notes(run.id).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(
            (n[1].step_idx, n[1].name.as_str(), n[1].text.as_str()),
            (1, "verdict.kind", "contention")
        );
        let rec = serde_json::to_value(s.export(&run.id.to_string()).unwrap()).unwrap();
        assert!(rec["steps"][0].get("notes").is_none(), "a step without notes has no key");
        assert_eq!(rec["steps"][1]["notes"]["verdict.evidence"], "CPU 97 % busy");
    }

    #[test]
    fn a_number_that_names_no_run_is_an_error_not_a_uuid_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path().join("r.db")).unwrap();
        let run = s.begin_run(&new_run()).unwrap();
        // One uuid in forty starts with eight digits.
        s.conn
            .execute("UPDATE runs SET uuid = '54150286-1234-4abc-8def-0123456789ab' WHERE id = ?1", [run.id])
            .unwrap();
        assert!(matches!(s.run("54150286"), Err(StoreError::NoSuchRun(_))));
        assert!(matches!(s.run("5415"), Err(StoreError::NoSuchRun(_))));
        assert!(matches!(s.run(""), Err(StoreError::NoSuchRun(_))));
        // The short form printed for it is not all digits, and finds it.
        let back = s.run(&run.id.to_string()).unwrap();
        assert_eq!(back.short(), "54150286-1234");
        assert_eq!(s.run(back.short()).unwrap().id, run.id);
        assert_eq!(s.run("54150286-").unwrap().id, run.id);
    }

    #[test]
    fn like_wildcards_in_a_key_match_only_themselves() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path().join("r.db")).unwrap();
        s.begin_run(&new_run()).unwrap();
        let b = s.begin_run(&new_run()).unwrap();
        for key in ["%", "_", "%%", "____", "a%", "\\", "%-%"] {
            assert!(matches!(s.run(key), Err(StoreError::NoSuchRun(_))), "{key}");
        }
        // A real prefix with its case changed still finds its run.
        s.conn
            .execute("UPDATE runs SET uuid = 'abcdef12-0000-4000-8000-000000000000' WHERE id = ?1", [b.id])
            .unwrap();
        assert_eq!(s.run("ABCDE").unwrap().id, b.id);
        assert_eq!(s.run("abcdef12").unwrap().short(), "abcdef12");
    }

    #[test]
    fn a_name_given_twice_is_refused_and_nothing_of_the_step_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path().join("r.db")).unwrap();
        let run = s.begin_run(&new_run()).unwrap();
        let h = LatencyHistogram::new();
        let mut twice = StepReport::default();
        twice.latency("lat", &h);
        twice.histograms.push(("lat".into(), h.clone()));
        let e = s.write_step(run.id, 0, "a", &serde_json::json!({}), "a", "b", &twice).unwrap_err();
        assert!(matches!(&e, StoreError::Duplicate { what: "histogram", name, .. } if name == "lat"), "{e}");
        let mut clash = StepReport::default();
        clash.figure("tps", 1.0, Unit::PerS);
        clash.figure("tps", 2.0, Unit::PerS);
        let e = s.write_step(run.id, 0, "a", &serde_json::json!({}), "a", "b", &clash).unwrap_err();
        assert_eq!(e.to_string(), "step 0: two figures named 'tps'; each name is stored once");
        assert!(s.steps(run.id).unwrap().is_empty());
        assert!(s.metrics(run.id).unwrap().is_empty());
        // Once each: every histogram is stored once, with its clamped count.
        let mut once = StepReport::default();
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_secs(7200));
        once.latency("lat", &h);
        once.latency("txn.a.lat", &LatencyHistogram::new());
        s.write_step(run.id, 0, "a", &serde_json::json!({}), "a", "b", &once).unwrap();
        let names: Vec<_> = s.histograms(run.id).unwrap().into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["lat", "txn.a.lat"]);
        let m = s.metrics(run.id).unwrap();
        assert_eq!(m.iter().find(|m| m.name == "lat.clamped").unwrap().value, 1.0);
    }

    #[test]
    fn unknown_run_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path().join("r.db")).unwrap();
        let e = s.run("42").unwrap_err().to_string();
        assert!(e.contains("no run '42'"), "{e}");
    }

    #[test]
    fn running_run_of_a_dead_process_reopens_as_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let mut s = Store::open(&path).unwrap();
        let run = s.begin_run(&new_run()).unwrap();
        // Pretend the run belongs to a process that no longer exists.
        s.conn.execute("UPDATE runs SET pid = 2147483000 WHERE id = ?1", [run.id]).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.run(&run.id.to_string()).unwrap().status, Status::Interrupted);
    }

    #[test]
    fn running_run_of_a_live_process_stays_running() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let mut s = Store::open(&path).unwrap();
        let run = s.begin_run(&new_run()).unwrap();
        let s2 = Store::open(&path).unwrap();
        assert_eq!(s2.run(&run.id.to_string()).unwrap().status, Status::Running);
    }

    #[test]
    fn deleting_runs_takes_all_their_rows_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path().join("r.db")).unwrap();
        let a = s.begin_run(&new_run()).unwrap();
        s.write_notes(a.id, 0, &[("verdict.kind", "cpu")]).unwrap();
        s.finish_run(a.id, Status::Complete).unwrap();
        let b = s.begin_run(&new_run()).unwrap();
        // b is running (this process is alive): deleting it, or a list with
        // it or an unknown run in it, deletes nothing.
        assert!(matches!(
            s.delete_runs(&[a.id.to_string(), b.id.to_string()]),
            Err(StoreError::StillRunning(_))
        ));
        assert!(matches!(s.delete_runs(&[a.id.to_string(), "999".into()]), Err(StoreError::NoSuchRun(_))));
        assert_eq!(s.runs(&RunFilter::default()).unwrap().len(), 2);
        let gone = s.delete_runs(&[a.id.to_string(), a.id.to_string()]).unwrap();
        assert_eq!(gone.iter().map(|r| r.id).collect::<Vec<_>>(), [a.id]);
        assert!(matches!(s.run(&a.id.to_string()), Err(StoreError::NoSuchRun(_))));
        let left: i64 = s.conn.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 0, "the run's notes went with it");
        assert_eq!(s.runs(&RunFilter::default()).unwrap().len(), 1);
    }

    #[test]
    fn reading_an_older_store_leaves_its_schema_as_it_was() {
        // A version-1 store, as an older storbench still running a plan on
        // it has it: reading must not migrate it under that storbench.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        drop(c);
        let s = Store::open_read(&path).unwrap();
        assert!(s.runs(&RunFilter::default()).unwrap().is_empty());
        assert!(s.notes(1).unwrap().is_empty(), "a version-1 store has no notes: read as none");
        drop(s);
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, 1, "open_read migrated the store");
        drop(c);
        // Opening it to write migrates it, as before.
        drop(Store::open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, MIGRATIONS.len() as i64);
    }

    #[test]
    fn refuses_a_store_from_a_newer_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        drop(Store::open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 999).unwrap();
        drop(c);
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.contains("schema version 999"), "{e}");
    }
}
