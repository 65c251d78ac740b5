//! `storbench restore` of a physical backup (a mariadb-backup directory or
//! a plain pg_basebackup) into a new data directory, checked by a temporary
//! server on the copy: the work is `storbench_ops::backup::physical`'s;
//! this verb checks the flags through it, says what a sweep of an earlier
//! restore's leftovers stopped, records the run and says what was done.
//! Ctrl-C raises the flag the restore polls, which stops its server.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use storbench_ops::backup::{physical, Kind};

use super::{backup_err, database, restored, RestoreArgs};
use crate::cli::Global;
use crate::dbarg::Db;
use crate::record::{Outcome, Recorder};

/// Runs `storbench restore` for a physical backup.
pub(super) fn restore(g: &Global, a: RestoreArgs, kind: Kind, from: &Path) -> Result<ExitCode> {
    // Everything is validated before anything is created.
    let checked = physical::check(kind, from, &a.to, a.jobs, a.database.as_deref()).map_err(backup_err)?;
    let compare = a.compare.as_deref().map(Db::parse).transpose()?;
    let mut plan = checked.plan(compare.as_ref().map(database)).map_err(backup_err)?;
    let (from, to) = (plan.from().to_path_buf(), plan.to().to_path_buf());
    let (from_parent, to_parent) = (plan.from_parent(), plan.to_parent().to_path_buf());
    let config = json!({
        "from": from, "to": to, "jobs": a.jobs, "kind": format!("{kind:?}"), "database": a.database,
        "compare": compare.as_ref().map(|c| &c.shown),
    });
    let env = json!({
        "backup_bytes": plan.backup_bytes(),
        "from_dir": storbench_sysmon::path_env(&from_parent),
        "to_dir": storbench_sysmon::path_env(&to_parent),
        "server": { "engine": plan.server_engine(), "version": plan.version() },
    });
    // A temporary server a killed storbench left running (and the copy it
    // ran on) goes before this one starts (its work copy would be in this
    // one's way); after every check, so bad input changes nothing.
    for s in physical::sweep() {
        if !g.quiet {
            eprintln!(
                "storbench: stopped the temporary {} on {} left by storbench {} (killed), and removed that copy",
                s.program,
                s.data.display(),
                s.owner
            );
        }
    }
    // Recorded before anything is made, so a storbench killed from here on
    // leaves nothing the next restore's sweep does not remove.
    plan.register().map_err(backup_err)?;
    let mut rec = Recorder::begin(
        g,
        "restore",
        format!("restore {} into {}", from.display(), to.display()),
        config,
        env,
        &[from_parent, to_parent],
    )?;
    let clock = rec.clock();
    let done = match plan.run(crate::interrupt::flag()) {
        Ok(d) => d,
        Err(e) => {
            if crate::interrupt::requested() {
                return rec.finish(Outcome::Interrupted);
            }
            return rec.finish(Outcome::Failed(backup_err(e).context(format!(
                "restore of {} into {}",
                from.display(),
                to.display()
            ))));
        }
    };
    let r = done.report;
    rec.write_step(clock, "restore", json!({ "jobs": a.jobs }), r.clone())?;
    if crate::interrupt::requested() {
        return rec.finish(Outcome::Interrupted);
    }
    if let Err(e) = done.verdict {
        return rec.finish(Outcome::Failed(backup_err(e)));
    }
    restored(g, &from.display().to_string(), &to.display().to_string(), &r);
    rec.finish(Outcome::Complete)
}
