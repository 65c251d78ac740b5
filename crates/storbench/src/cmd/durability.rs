//! `storbench durability`: does the stack keep what it acknowledged? Clients
//! insert numbered rows into a managed PostgreSQL whose files are on a
//! modelled medium, each remembering the last row whose commit was
//! acknowledged; mid-run the medium's power is cut (`media powercut`: the
//! model's volatile cache is lost, every later I/O fails). The medium is
//! then recovered with exactly what was durable, the server restarted (its
//! own crash recovery runs) and every acknowledged row looked for. Zero
//! missing is the pass (exit 0); missing rows are counted per client and
//! fail the check (exit 1). The diskchecker.pl idea, on one machine. The
//! check itself is `storbench_ops::durability`; this verb validates its
//! flags and says what it found. With `--crash-points` (or
//! `--crash-point K`) it checks every crash point of a recorded run instead
//! ([`crate::cmd::crashpoints`]).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use storbench_metrics::units::{parse_duration, parse_positive_duration, Given};

use storbench_emu::crash::CacheMode;
use storbench_ops::crash::{Selection, Workload};

use crate::cli::Global;
use crate::cmd::failover::ops_err;
use crate::error::usage;

/// Options of `storbench durability`.
#[derive(Debug, Args)]
pub struct DurabilityArgs {
    /// The managed PostgreSQL instance (`managed:NAME` or NAME), or with --crash-points `sqlite:PATH` (a file on the medium) or `mysql://…/DB` (MariaDB: storbench runs its own mariadbd with its data directory on the medium, `MOUNT/storbench-mariadb`; the URL names the database); its data and WAL should be on the medium.
    #[arg(long)]
    pub db: String,
    /// The modelled medium whose power is cut (made with `media create --model`).
    #[arg(long)]
    pub medium: String,
    /// Clients committing rows at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub clients: u32,
    /// How long the clients commit before the power is cut (with --crash-points: how long each setting's run is).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub cut_after: Duration,
    /// Crash points of a recorded run to check instead of one power cut: N (spread evenly over the run) or `all`. The medium must record (`media create --record`).
    #[arg(long, value_name = "N|all", conflicts_with = "crash_point", value_parser = Given::parser(str::parse::<Selection>))]
    pub crash_points: Option<Given<Selection>>,
    /// Check only crash point K of each cell (the index a matrix names, to reproduce it).
    #[arg(long, value_name = "K")]
    pub crash_point: Option<usize>,
    /// With crash points: a setting and its values, `KEY=V1,V2` (repeatable; the cells are every combination). SQLite: a PRAGMA (`synchronous=full,normal`); PostgreSQL: a server setting (`synchronous_commit=on,off`); MariaDB: a server option, given at the server's start for the run and for every crash image's (`innodb_flush_log_at_trx_commit=1,2,0`, `innodb_doublewrite=ON,OFF`).
    #[arg(long = "settings", value_name = "KEY=V1,V2")]
    pub settings: Vec<String>,
    /// With crash points: the device cache modes to read the run under, `honest`, `lying`, `none` (comma-separated), or `medium` (what the medium's model has).
    #[arg(long, default_value = "medium", value_parser = Given::parser(parse_cache))]
    pub cache: Given<CacheChoice>,
    /// With crash points: check the medium's last recorded run of each setting again instead of running the workload (with --crash-point K, reproduces point K exactly).
    #[arg(long)]
    pub last_run: bool,
    /// With crash points: what the clients run, `rows` (numbered rows, one commit each) or `tpcc` (TPC-C on a schema built with `tpcc build`, PostgreSQL or SQLite; on MariaDB storbench builds scale 1 on its own server the first time; lost = acknowledged New-Orders missing, inconsistent = `tpcc check` failing).
    #[arg(long, default_value = "rows", value_name = "rows|tpcc", value_parser = workload_parser())]
    pub workload: Workload,
    /// With crash points: where crash images are made (host disk; default: beside the medium's backing file).
    #[arg(long)]
    pub scratch: Option<std::path::PathBuf>,
    /// With crash points: only the points that tear one write of the database's data pages (PostgreSQL's relation files, not its WAL; SQLite's database file; InnoDB's ibdata1 and .ibd files, not its redo log), one per flush interval holding one. With `full_page_writes=off` and `pg up --data-checksums`, or `innodb_doublewrite=OFF` (and `innodb_max_dirty_pages_pct=0`, so a short run writes pages), a torn page must be found.
    #[arg(long)]
    pub torn_pages: bool,
    /// With crash points on PostgreSQL: issue a CHECKPOINT this often during each run, so data pages are written within it (e.g. `500ms`).
    #[arg(long, value_name = "DURATION", value_parser = Given::parser(parse_positive_duration))]
    pub checkpoint_every: Option<Given<Duration>>,
    /// With crash points: points recovered at once, each worker with its own checkpoint image, loop device, mount and temporary server (default: the CPUs, at most 4; 1 recovers them one after another). Scratch space: 2 × the medium's size per job.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: Option<u32>,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// `--cache`: the cache modes to read a run under, or the medium's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheChoice {
    /// `medium`: the mode the medium's model has.
    Medium,
    /// `honest,lying,none`: these, in order.
    Modes(Vec<CacheMode>),
}

/// Parses `--cache` (clap's value parser): `medium`, or cache modes
/// separated by commas; the error names the bad mode and what is allowed.
pub fn parse_cache(s: &str) -> Result<CacheChoice, String> {
    if s.trim() == "medium" {
        return Ok(CacheChoice::Medium);
    }
    s.split(',')
        .map(|m| {
            CacheMode::parse(m.trim()).ok_or_else(|| {
                format!(
                    "'{}' is not a cache mode: use honest, lying, none (comma-separated) or medium",
                    m.trim()
                )
            })
        })
        .collect::<Result<_, _>>()
        .map(CacheChoice::Modes)
}

/// `--workload`'s parser: one of the workloads' names (clap names the bad
/// value and lists them).
fn workload_parser() -> impl clap::builder::TypedValueParser<Value = Workload> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([Workload::Rows, Workload::Tpcc].map(Workload::name))
        .map(|s| Workload::parse(&s).unwrap_or_default())
}

/// Runs the check.
pub fn run(g: &Global, a: DurabilityArgs) -> Result<ExitCode> {
    // Validate everything first.
    if a.torn_pages || a.checkpoint_every.is_some() || a.jobs.is_some() {
        let flag = match (a.torn_pages, a.checkpoint_every.is_some()) {
            (true, _) => "--torn-pages",
            (_, true) => "--checkpoint-every",
            _ => "--jobs",
        };
        return Err(usage(format!(
            "{flag}: only with --crash-points (one power cut has no crash points to choose)"
        )));
    }
    if a.workload != Workload::Rows {
        return Err(usage(format!(
            "--workload {}: only with --crash-points (one power cut runs numbered rows)",
            a.workload.name()
        )));
    }
    let name = a.db.strip_prefix("managed:").unwrap_or(&a.db).to_string();
    let inst = storbench_instances::pg::get(&name).map_err(|e| anyhow!("{e}"))?.ok_or_else(|| {
        usage(format!("--db {}: no managed instance named '{name}' (storbench pg list)", a.db))
    })?;
    let medium = storbench_media::get(&a.medium)
        .map_err(|e| anyhow!("{e}"))?
        .ok_or_else(|| usage(format!("--medium {}: no such medium (storbench media list)", a.medium)))?;
    if medium.model.is_none() {
        return Err(usage(format!(
            "--medium {}: not a modelled medium; a power cut needs one made with --model",
            a.medium
        )));
    }
    let cut_after = a.cut_after;
    if !storbench_instances::pg::running(&inst) {
        return Err(usage(format!(
            "--db {}: managed instance '{name}' is not running (storbench pg up {name})",
            a.db
        )));
    }
    let d = storbench_ops::durability::check(&inst, &a.medium, a.clients, cut_after).map_err(ops_err)?;
    let (total_acked, total_missing) = (d.acknowledged(), d.missing());
    let per_client: Vec<serde_json::Value> = d
        .clients
        .iter()
        .map(|c| {
            serde_json::json!({ "client": c.client, "acknowledged": c.acknowledged, "found": c.found, "missing": c.missing() })
        })
        .collect();
    let model = medium.model.as_ref().map(|s| s.label()).unwrap_or_default();
    let record = serde_json::json!({
        "medium": a.medium, "model": model, "db": format!("managed:{name}"),
        "clients": a.clients, "cut_after_s": cut_after.as_secs_f64(),
        "acknowledged": total_acked, "missing": total_missing,
        "acknowledged_at_cut": d.acknowledged_at_cut,
        "clients_stopped_ms": d.clients_stopped.as_millis() as u64,
        "per_client": per_client, "pass": total_missing == 0,
    });
    if g.json {
        println!("{}", serde_json::to_string_pretty(&record)?);
    }
    // The result: on stdout (stderr with --json), whatever --quiet says.
    crate::oltp::result(
        g,
        format!(
            "durability on {} ({model}): {total_acked} commits acknowledged by {} clients before the power cut; {total_missing} missing after recovery: {}",
            a.medium,
            a.clients,
            if total_missing == 0 { "pass" } else { "FAIL" }
        ),
    );
    Ok(if total_missing == 0 { ExitCode::SUCCESS } else { ExitCode::from(crate::error::EXIT_FAILED) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<DurabilityArgs, String> {
        let argv = ["storbench", "durability", "--db", "x", "--medium", "m"].iter().chain(args);
        match crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            crate::cli::Command::Durability(a) => Ok(a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn crash_points_cache_and_workload_are_typed_by_clap() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.crash_points, a.cache.value, a.workload), (None, CacheChoice::Medium, Workload::Rows));
        let a = parse(&["--crash-points", "all", "--cache", "honest, lying", "--workload", "tpcc"]).unwrap();
        assert_eq!(a.crash_points.map(|s| s.value), Some(Selection::All));
        let modes = vec![storbench_emu::crash::CacheMode::Honest, storbench_emu::crash::CacheMode::Lying];
        assert_eq!(
            (a.cache.value, a.cache.text.as_str(), a.workload),
            (CacheChoice::Modes(modes), "honest, lying", Workload::Tpcc)
        );
        let a = parse(&["--crash-points", "12"]).unwrap();
        assert_eq!(
            a.crash_points.map(|s| (s.value, s.text)),
            Some((Selection::Sample(12), "12".to_string()))
        );
    }

    #[test]
    fn durations_and_clients_are_typed_by_clap() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            (a.cut_after, a.clients, a.checkpoint_every, a.jobs),
            (Duration::from_secs(5), 4, None, None)
        );
        assert_eq!(parse(&["--jobs", "3"]).unwrap().jobs, Some(3));
        let a = parse(&["--cut-after", "1.5s", "--checkpoint-every", "500ms", "--clients", "64"]).unwrap();
        assert_eq!(a.cut_after, Duration::from_millis(1500));
        let every = a.checkpoint_every.unwrap();
        assert_eq!((every.value, every.text.as_str()), (Duration::from_millis(500), "500ms"));
        for (args, want) in [
            (&["--cut-after", "soon"][..], "'soon' is not a duration"),
            (&["--checkpoint-every", "0s"], "'0s' must be more than zero"),
            (&["--clients", "0"], "'0' for '--clients"),
            (&["--clients", "65"], "'65' for '--clients"),
            (
                &["--crash-points", "0"],
                "'0' for '--crash-points <N|all>': '0' is not a number of crash points",
            ),
            (&["--crash-points", "some"], "'some' is not a number of crash points: give 1 or more, or 'all'"),
            (&["--cache", "honest,maybe"], "'maybe' is not a cache mode: use honest, lying, none"),
            (&["--workload", "tpc-c"], "'tpc-c' for '--workload <rows|tpcc>'"),
            (&["--jobs", "0"], "'0' for '--jobs"),
            (&["--jobs", "65"], "'65' for '--jobs"),
            (&["--jobs", "two"], "'two' for '--jobs"),
        ] {
            let e = parse(args).err().unwrap();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
