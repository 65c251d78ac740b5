//! The figure side of the workload contract: the figures a workload shows
//! (its [`Description`]: name, headline figures with who counted them and
//! per-second series, which `report` reads; and the columns of a step's
//! line and summary, which the binary reads), the
//! figures it derives from a finished step (TPC-C's client NOPM, TPC-B's
//! `tps.client` as pgbench counts it), and the figures of a build or init
//! step, computed once for every workload. Nothing here prints or touches a
//! database.

use std::collections::BTreeMap;
use std::time::Duration;

use storbench_metrics::{Figure, StepReport, Unit};

/// A headline figure of a workload: its base name (a source is a dotted
/// suffix of it: `nopm.districts`), what people call it, and who counted
/// the figure stored under its bare name (DESIGN.md's definitions).
#[derive(Clone, Copy, Debug)]
pub struct FigureSpec {
    /// Base metric name (`tps`, `nopm`, `power.geomean`).
    pub base: &'static str,
    /// What people call it (`TPS`, `NOPM`, `QphH@Size`).
    pub label: &'static str,
    /// Who counted it when the run's environment does not say.
    pub source: &'static str,
}

/// How a kind of run a workload records reads in a report: its name in a
/// sentence, its headline figures and its per-second series. Each workload
/// exports one for its runs and one for its build (`tpcb::RUN`,
/// `tpcb::INIT`); [`crate::catalog::DESCRIPTIONS`] lists them all, and `report` reads them
/// instead of keeping a table of its own.
#[derive(Clone, Copy, Debug)]
pub struct Description {
    /// The run kind (`tpcc`, `tpcb-init`).
    pub kind: &'static str,
    /// Its name in a sentence (`TPC-C`, `TPC-B init`).
    pub title: &'static str,
    /// Headline figures, headline first (a finding's headline is the first).
    pub figures: &'static [FigureSpec],
    /// Base names of the per-second series the runner counts on the client
    /// (`tps`; `tpm`, `nopm`); none for a build.
    pub series: &'static [&'static str],
    /// A setup run (a build or an init): its timings, no load levels.
    pub setup: bool,
}

impl Description {
    /// A workload's runs: not setup, no series unless given.
    pub const fn run(kind: &'static str, title: &'static str, figures: &'static [FigureSpec]) -> Description {
        Description { kind, title, figures, series: &[], setup: false }
    }

    /// A workload's build (or init) runs.
    pub const fn setup(
        kind: &'static str,
        title: &'static str,
        figures: &'static [FigureSpec],
    ) -> Description {
        Description { kind, title, figures, series: &[], setup: true }
    }
}

/// A figure shown in a step's line and the run's summary: (figure, heading).
pub type Column = (&'static str, &'static str);

/// What a build (or init) measured, in the terms every workload shares.
#[derive(Clone, Debug)]
pub struct BuildFigures<'a> {
    /// Rows loaded over all tables.
    pub rows: u64,
    /// Seconds of the row load alone: `rows.per_s` divides by these.
    pub load_seconds: f64,
    /// The workload's timed phases under its own figure names (seconds).
    pub phases: &'a [(&'static str, f64)],
    /// Rows per table, recorded as `rows.TABLE` when given.
    pub per_table: Option<&'a BTreeMap<String, u64>>,
}

/// The build step's figures: `rows`; `rows.per_s`, the load's own rate —
/// rows over the load's seconds, not the whole build's (keys, indexes,
/// procedures and statistics have their own phase figures, and the whole
/// build's rate is `rows` over `build.seconds` where a workload records
/// it); each phase; and rows per table.
pub fn build_report(b: &BuildFigures<'_>) -> StepReport {
    let mut r = StepReport::default();
    r.figure("rows", b.rows as f64, Unit::Count);
    for (name, secs) in b.phases {
        r.figure(*name, *secs, Unit::S);
    }
    r.figure("rows.per_s", load_rate(b.rows, b.load_seconds), Unit::PerS);
    for (t, n) in b.per_table.into_iter().flatten() {
        r.figure(format!("rows.{t}"), *n as f64, Unit::Count);
    }
    r
}

/// Rows per second of a load of `rows` in `seconds` (a zero-length load
/// counts as a nanosecond, not a division by zero).
pub fn load_rate(rows: u64, seconds: f64) -> f64 {
    rows as f64 / seconds.max(1e-9)
}

/// The terminal's account of a build's seconds, the same for every
/// workload: "N rows in T s (load L s at R rows/s, keys and indexes K s,
/// statistics A s)", the rate being [`load_rate`]'s (the load alone).
pub fn build_summary(rows: u64, seconds: f64, load: f64, index: f64, analyze: f64) -> String {
    format!(
        "{rows} rows in {seconds:.1} s (load {load:.1} s at {:.0} rows/s, keys and indexes {index:.1} s, statistics {analyze:.1} s)",
        load_rate(rows, load)
    )
}

/// The probe key saying the server publishes its counters late (PostgreSQL:
/// a busy backend's counts at most once a second, when it goes idle).
pub const PUBLISHED_LATE: &str = "published_late";

/// A window at least this long holds server counts that are published late
/// well enough to show: each edge may miss up to a second of each user's
/// commits (PGSTAT_MIN_INTERVAL), 10 % or less of a 10 s window.
pub const SERVER_WINDOW_OK: Duration = Duration::from_secs(10);

/// Under this, late-published server counts are left out, not shown: a 1 s
/// window read 0 TPS from PostgreSQL while its clients committed hundreds.
pub const SERVER_WINDOW_MIN: Duration = Duration::from_secs(2);

/// The figure that flags a server count over a window too short for it:
/// the window's seconds.
pub const SHORT_SERVER_WINDOW: &str = "flag.server_window";

/// The figure that flags a server count that went back between the
/// window's edges (the server restarted, as when the kernel kills a backend
/// for memory and the postmaster resets, or its statistics were reset):
/// the step keeps no server rate, and this says why (value 1).
pub const SERVER_RESET: &str = "flag.server_reset";

/// The figures a workload flag concerns, by name without `flag.`: the
/// short-window and reset flags concern only the server's own counts, not
/// the step's other figures. `None` for a flag that concerns the whole
/// step (or that the workloads do not raise).
pub fn flag_concerns(name: &str) -> Option<&'static [&'static str]> {
    let ours = |flag: &str| Some(name) == flag.strip_prefix("flag.");
    (ours(SHORT_SERVER_WINDOW) || ours(SERVER_RESET)).then_some(&["tps.server", "tpm.server"][..])
}

/// A workload flag as people read it (name without `flag.`, its value), or
/// `None` when the workloads do not raise it.
pub fn flag_words(name: &str, value: f64) -> Option<String> {
    if Some(name) == SERVER_RESET.strip_prefix("flag.") {
        return Some(
            "server count left out: it went back within the step (the server restarted, or its statistics \
             were reset)"
                .to_string(),
        );
    }
    (Some(name) == SHORT_SERVER_WINDOW.strip_prefix("flag.")).then(|| {
        format!(
            "server count over a {value:.0} s window, under {} s: the server publishes its counts up to a \
             second late, so it is left out under {} s and rough under {} s",
            SERVER_WINDOW_OK.as_secs(),
            SERVER_WINDOW_MIN.as_secs(),
            SERVER_WINDOW_OK.as_secs()
        )
    })
}

/// Pushes a server-counted rate (`count` over the window, per second or per
/// minute by `unit`), judged by the window: when the server publishes its
/// counts late (`late`), a window under [`SERVER_WINDOW_MIN`] gives no
/// figure and one under [`SERVER_WINDOW_OK`] a flagged one; both carry
/// [`SHORT_SERVER_WINDOW`] so the step says why. A negative `count` (the
/// counter went back: a restart or a statistics reset within the window)
/// gives no figure and [`SERVER_RESET`], never a rate of zero or less.
pub fn server_rate(out: &mut Vec<Figure>, name: &str, unit: Unit, count: f64, window: Duration, late: bool) {
    let secs = window.as_secs_f64();
    if secs <= 0.0 {
        return;
    }
    if count < 0.0 {
        if !out.iter().any(|f| f.name == SERVER_RESET) {
            out.push(Figure::new(SERVER_RESET, 1.0, Unit::Count));
        }
        return;
    }
    if late && window < SERVER_WINDOW_OK && !out.iter().any(|f| f.name == SHORT_SERVER_WINDOW) {
        out.push(Figure::new(SHORT_SERVER_WINDOW, secs, Unit::S));
    }
    if late && window < SERVER_WINDOW_MIN {
        return;
    }
    let per = if unit == Unit::PerMin { secs / 60.0 } else { secs };
    out.push(Figure::new(name, count / per, unit));
}

/// Keeps a server's commit and log-flush counts in a probe, where it
/// counts flushes (see [`storbench_db::Counters::log_flushes`]).
pub fn probe_log_flushes(p: &mut crate::runner::Probe, c: &storbench_db::Counters) {
    if let Some(n) = c.log_flushes {
        p.insert("log.flushes".into(), n as f64);
        p.insert("log.xact_all".into(), c.xact_all as f64);
    }
}

/// Group commit, from the server's own counts between two probes:
/// `log.flush.per_s` (commit-log flushes a second, server-wide) and
/// `log.commits_per_flush` (the server's commits and rollbacks over its
/// flushes; read-only transactions count too, so on a mixed load it is an
/// upper bound). Published late like the other server counts (see
/// [`server_rate`]); absent without flushes in the window.
pub fn log_flush_figures(
    out: &mut Vec<Figure>,
    before: &crate::runner::Probe,
    after: &crate::runner::Probe,
    window: Duration,
) {
    let delta = |k: &str| Some(after.get(k)? - before.get(k)?);
    let (Some(flushes), Some(xact)) = (delta("log.flushes"), delta("log.xact_all")) else { return };
    let secs = window.as_secs_f64();
    // A counter that went back (the server's statistics reset between the
    // probes) leaves no figure rather than a negative one.
    if flushes <= 0.0 || xact < 0.0 || secs <= 0.0 {
        return;
    }
    out.push(Figure::new("log.flush.per_s", flushes / secs, Unit::PerS));
    out.push(Figure::new("log.commits_per_flush", xact / flushes, Unit::Ratio));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits per flush from the probes' deltas; a counter that went back
    /// (a statistics reset between the probes) gives no figure, not a
    /// negative one.
    #[test]
    fn commits_per_flush_is_the_deltas_ratio_and_absent_after_a_reset() {
        let probe = |flushes: f64, xact: f64| {
            crate::runner::Probe::from([
                ("log.flushes".to_string(), flushes),
                ("log.xact_all".to_string(), xact),
            ])
        };
        let mut out = Vec::new();
        log_flush_figures(&mut out, &probe(10.0, 100.0), &probe(30.0, 160.0), Duration::from_secs(2));
        let get = |out: &[Figure], n: &str| out.iter().find(|f| f.name == n).map(|f| f.value);
        assert_eq!(get(&out, "log.commits_per_flush"), Some(3.0));
        assert_eq!(get(&out, "log.flush.per_s"), Some(10.0));
        let mut out = Vec::new();
        log_flush_figures(&mut out, &probe(10.0, 5000.0), &probe(30.0, 160.0), Duration::from_secs(2));
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn the_short_window_flag_concerns_the_server_count_in_words() {
        let mut f = Vec::new();
        server_rate(&mut f, "tps.server", Unit::PerS, 40.0, Duration::from_secs(4), true);
        let flag = f.iter().find(|f| f.name == SHORT_SERVER_WINDOW).unwrap();
        let name = flag.name.strip_prefix("flag.").unwrap();
        assert_eq!(flag_concerns(name), Some(&["tps.server", "tpm.server"][..]));
        let words = flag_words(name, flag.value).unwrap();
        assert!(words.starts_with("server count over a 4 s window, under 10 s"), "{words}");
        assert_eq!(flag_concerns("steal"), None);
        assert_eq!(flag_words("steal", 12.0), None);
    }

    #[test]
    fn rows_per_s_is_the_loads_rate_not_the_whole_builds() {
        let tables: BTreeMap<String, u64> = [("a".to_string(), 600u64), ("b".into(), 400)].into();
        let r = build_report(&BuildFigures {
            rows: 1000,
            load_seconds: 2.0,
            phases: &[("build.seconds", 10.0), ("build.load_seconds", 2.0)],
            per_table: Some(&tables),
        });
        assert_eq!(r.get("rows.per_s"), Some(500.0));
        assert_eq!(r.get("build.seconds"), Some(10.0));
        assert_eq!(r.get("rows.a"), Some(600.0));
        assert_eq!(r.get("rows"), Some(1000.0));
        assert_eq!(load_rate(5, 0.0), 5e9);
    }

    /// Regression (issue 24): server TPS on 1 s PostgreSQL steps read 0,
    /// and 883 against 1,330 on a 3 s step, shown as plain numbers.
    #[test]
    fn server_counts_published_late_are_left_out_or_flagged_on_short_windows() {
        let get = |f: &[Figure], n: &str| f.iter().find(|x| x.name == n).map(|x| x.value);
        let mut f = Vec::new();
        server_rate(&mut f, "tps.server", Unit::PerS, 0.0, Duration::from_secs(1), true);
        assert_eq!((get(&f, "tps.server"), get(&f, SHORT_SERVER_WINDOW)), (None, Some(1.0)));
        let mut f = Vec::new();
        server_rate(&mut f, "tpm.server", Unit::PerMin, 300.0, Duration::from_secs(3), true);
        assert_eq!((get(&f, "tpm.server"), get(&f, SHORT_SERVER_WINDOW)), (Some(6000.0), Some(3.0)));
        let mut f = Vec::new();
        server_rate(&mut f, "tps.server", Unit::PerS, 300.0, Duration::from_secs(10), true);
        assert_eq!((get(&f, "tps.server"), get(&f, SHORT_SERVER_WINDOW)), (Some(30.0), None));
        // Counts published as they happen (MySQL) hold on any window.
        let mut f = Vec::new();
        server_rate(&mut f, "tps.server", Unit::PerS, 3.0, Duration::from_secs(1), false);
        assert_eq!((get(&f, "tps.server"), get(&f, SHORT_SERVER_WINDOW)), (Some(3.0), None));
    }

    /// Regression (S4's full run, 2026-11-28): the kernel killed a backend
    /// for memory at 21 users, the postmaster reset, its counters started
    /// again from zero, and the step read "TPM server 0" (TPC-B's would
    /// have been negative).
    #[test]
    fn a_server_count_that_went_back_leaves_no_rate_and_flags_the_step() {
        let get = |f: &[Figure], n: &str| f.iter().find(|x| x.name == n).map(|x| x.value);
        let mut f = Vec::new();
        server_rate(&mut f, "tpm.server", Unit::PerMin, -41_000.0, Duration::from_secs(60), true);
        assert_eq!((get(&f, "tpm.server"), get(&f, SERVER_RESET)), (None, Some(1.0)));
        let name = SERVER_RESET.strip_prefix("flag.").unwrap();
        assert_eq!(flag_concerns(name), Some(&["tps.server", "tpm.server"][..]));
        assert!(flag_words(name, 1.0).unwrap().contains("went back"));
        // A count of zero over a whole window is a figure, not a reset.
        let mut f = Vec::new();
        server_rate(&mut f, "tps.server", Unit::PerS, 0.0, Duration::from_secs(30), true);
        assert_eq!((get(&f, "tps.server"), get(&f, SERVER_RESET)), (Some(0.0), None));
    }
}
