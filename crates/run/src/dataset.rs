//! A workload's data verbs through the workload contract
//! ([`storbench_workloads::Dataset`]), the same for every workload: a
//! build (or init) recorded as a run of one step, the schema a run or a
//! check needs, and a drop. Each workload says only its words and options;
//! the refusals, the recording and the progress are written once here.
//! Nothing here prints: progress and lines go through the [`Screen`].

use std::process::ExitCode;

use anyhow::{anyhow, Result};
use serde_json::json;
use storbench_db::Connection;
use storbench_workloads::dataset::{build_kind, missing};
use storbench_workloads::{BuildError, Dataset};

use crate::dbarg::{self, Db};
use crate::error::usage;
use crate::oltp::{self, Screen};
use crate::record::{Outcome, RecordOptions, Recorder};

/// Builds `d` in `db` as a recorded run of one step, its progress on a bar
/// of `screen`'s. An existing schema is refused unless `replace`, which
/// drops it (and what a stopped build left) first; another workload's
/// tables of the same names are refused either way.
pub fn build<D: Dataset>(
    g: RecordOptions,
    screen: &dyn Screen,
    d: &D,
    db: &Db,
    opts: D::Options,
    replace: bool,
) -> Result<ExitCode> {
    oltp::make_sqlite_dir(db)?;
    let mut conn = db.open()?;
    if let Some(info) = d.inspect(conn.as_mut()).map_err(|e| db.usage_error(e))? {
        if !replace {
            return Err(usage(d.refuse_existing(&db.shown, &info)));
        }
    }
    if let Some((t, other)) = d.foreign_table(conn.as_mut()).map_err(|e| db.usage_error(e))? {
        let title = d.title();
        return Err(usage(format!(
            "{} holds a table '{t}' that is not {title}'s ({other}'s?): build {title} in another database",
            db.shown
        )));
    }
    if replace {
        d.drop(conn.as_mut()).map_err(|e| db.usage_error(e))?;
    }
    let env = json!({ "db": dbarg::db_env(db, conn.as_mut()) });
    let targets: Vec<_> = dbarg::data_dir(db, conn.as_mut()).into_iter().collect();
    std::mem::drop(conn);
    let mut config = json!({ "db": db.shown });
    if let Some(m) = d.build_config(&opts).as_object() {
        config.as_object_mut().expect("an object").extend(m.clone());
    }
    let rec = Recorder::begin(g, &build_kind(d), d.build_label(&opts), config, env, &targets)?;
    let quiet = rec.quiet();
    oltp::build_step(screen, rec, d.build_verb(), d.build_params(&opts), || {
        let bar = screen.bar(quiet, d.bar(&opts));
        let res = d.build(&db.connector(), &opts, crate::interrupt::flag(), &|p| bar.show(p));
        bar.finish();
        match res {
            Ok(b) => Ok((b.report, b.line)),
            Err(BuildError::Interrupted) => {
                screen.step_line(&format!(
                    "{} {}: interrupted; the half-loaded schema stays until `--replace` or `storbench {} drop`",
                    d.name(),
                    d.build_verb(),
                    d.name()
                ));
                Err(Outcome::Interrupted)
            }
            Err(BuildError::Db(e)) => Err(Outcome::Failed(anyhow!("building in {}: {e}", db.shown))),
        }
    })
}

/// The schema of `d` in `db`'s connection `conn`, or the one-line refusal
/// (exit 2) naming the command that builds it.
pub fn built<D: Dataset>(d: &D, db: &Db, conn: &mut dyn Connection) -> Result<D::Info> {
    match d.inspect(conn).map_err(|e| db.usage_error(e))? {
        Some(info) => Ok(info),
        None => Err(usage(missing(d, &db.shown))),
    }
}

/// Runs `d`'s checks on the schema `info` (from [`built`]) in `db`; the
/// results in order.
pub fn check<D: Dataset>(
    d: &D,
    db: &Db,
    conn: &mut dyn Connection,
    info: &D::Info,
    opts: D::CheckOptions,
) -> Result<Vec<D::Check>> {
    d.check(conn, info, opts).map_err(|e| anyhow!("checking {}: {e}", db.shown))
}

/// Drops `d`'s schema from `db`.
pub fn drop<D: Dataset>(d: &D, db: &Db) -> Result<()> {
    let mut conn = db.open()?;
    d.drop(conn.as_mut()).map_err(|e| anyhow!("dropping the {} schema in {}: {e}", d.title(), db.shown))
}
