//! Recording a run: the one path every command that measures goes through.
//!
//! Call [`Recorder::begin`] only after every input is validated (bad input
//! never leaves a run behind). Each step is written whole when it ends
//! ([`Recorder::write_step`]), with the system monitor's samples for the same
//! seconds merged in, and the step's verdict (what limited it, judged by
//! `storbench_report::verdict` from the run as the store now holds it) written
//! beside it. [`Recorder::finish`] sets the final status, says the run
//! record with `--json`, and gives the exit code. What is said goes through
//! the [`Voice`] in the [`RecordOptions`]: nothing here prints.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use storbench_metrics::StepReport;
use storbench_report::verdict::Verdict;
use storbench_results::{NewRun, RunRow, Status, Store};
use storbench_sysmon::Monitor;

use crate::error::{usage, EXIT_INTERRUPTED};
use crate::shard::Sharding;
use storbench_exporter::{Exporter, LiveValues};

/// Where a recording says things: the front end's terminal, a log.
#[derive(Clone, Copy)]
pub struct Voice {
    /// The run record with `--json` (stdout).
    pub out: fn(&str),
    /// A note (stderr, after `storbench: `).
    pub note: fn(&str),
    /// The error that ended a run, as the front end reports errors.
    pub error: fn(&anyhow::Error),
}

/// The build that records: version, commit, build date (every run's
/// environment holds them, so runs of different builds are told apart).
#[derive(Clone, Copy)]
pub struct Build {
    /// The package version.
    pub version: &'static str,
    /// The commit it was built from.
    pub commit: &'static str,
    /// The build date.
    pub date: &'static str,
}

/// What a run is recorded with: the store, output choices, the run and
/// record options of the command (or cell) that runs it.
#[derive(Clone)]
pub struct RecordOptions {
    /// The results store (SQLite file).
    pub results: PathBuf,
    /// Say the run record as JSON when it ends.
    pub json: bool,
    /// No live progress line.
    pub quiet: bool,
    /// `--memory-limit`, recorded in the config.
    pub memory_limit: Option<String>,
    /// `--metrics-addr`: serve live metrics at HOST:PORT.
    pub metrics_addr: Option<String>,
    /// `--label`.
    pub label: Option<String>,
    /// A plan cell's axes (JSON), recorded in the config.
    pub axes: Option<String>,
    /// The plan a cell belongs to.
    pub plan: Option<String>,
    /// The plan cell.
    pub cell: Option<String>,
    /// The plan cell's digest (what it runs), recorded in the config so a
    /// resumed plan can tell a cell whose definition changed.
    pub cell_digest: Option<String>,
    /// This process's shard and start instant.
    pub sharding: Sharding,
    /// The build that records.
    pub build: Build,
    /// Where what is said goes.
    pub voice: Voice,
}

/// How a run ended.
pub enum Outcome {
    /// Every step ran.
    Complete,
    /// The user stopped it; completed steps are kept.
    Interrupted,
    /// An error ended it; completed steps are kept.
    Failed(anyhow::Error),
}

impl From<storbench_ops::error::OpsError> for Outcome {
    fn from(e: storbench_ops::error::OpsError) -> Outcome {
        Outcome::Failed(crate::error::ops_err(e))
    }
}

/// When a step started and when its measured part (after ramp-up) began.
#[derive(Clone, Debug)]
pub struct StepClock {
    /// Monotonic start of the step (ramp-up included).
    pub start: Instant,
    /// Monotonic start of the measured window (end of ramp-up).
    pub measure_from: Instant,
}

/// An open run in the results store.
pub struct Recorder {
    store: Store,
    run: RunRow,
    next_idx: i64,
    json: bool,
    quiet: bool,
    monitor: Monitor,
    repl: Option<storbench_ops::repl::ReplProbe>,
    /// Modelled media behind the targets: name and daemon counters file.
    emu: Vec<(String, PathBuf)>,
    /// Live metrics (`--metrics-addr`), served while the run records.
    exporter: Option<Exporter>,
    /// Where what is said goes.
    voice: Voice,
    /// The paths the run measures: a failure is checked against the
    /// modelled media behind them.
    targets: Vec<PathBuf>,
    /// The verdict of each step written so far, as stored.
    verdicts: Vec<Verdict>,
    /// The database's own wait events, when sampled.
    waits: Option<storbench_db::waits::WaitSampler>,
    /// The database server's own CPU, when it runs on this host.
    server_cpu: Option<storbench_sysmon::server::ServerCpu>,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The modelled media the targets live on, with their daemons' counters.
fn emu_counters(targets: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for t in targets {
        if let Some(m) = storbench_media::describe_path(t) {
            if let (Some(name), Some(c)) = (m["name"].as_str(), m["counters"].as_str()) {
                if !out.iter().any(|(n, _)| n == name) {
                    out.push((name.to_string(), PathBuf::from(c)));
                }
            }
        }
    }
    out
}

/// Environment facts every run records, merged under `extra`'s keys.
pub fn base_env(extra: Value, build: &Build) -> Value {
    let mut env = storbench_sysmon::host_env();
    env["storbench_version"] = json!(build.version);
    // Runs of different builds told apart.
    env["storbench_commit"] = json!(build.commit);
    env["storbench_built"] = json!(build.date);
    if let (Some(e), Value::Object(x)) = (env.as_object_mut(), extra) {
        e.extend(x);
    }
    env
}

impl Recorder {
    /// Opens the store and records the start of a run. `targets` are the
    /// paths whose devices the system monitor watches.
    pub fn begin(
        g: impl Into<RecordOptions>,
        kind: &str,
        default_label: String,
        config: Value,
        env: Value,
        targets: &[PathBuf],
    ) -> Result<Recorder> {
        let g: RecordOptions = g.into();
        let sharding = g.sharding;
        sharding.check_kind(kind)?;
        let mut config = config;
        sharding.record(&mut config);
        if let Some(m) = &g.memory_limit {
            config["memory_limit"] = serde_json::json!(m);
        }
        // Bind the metrics address before anything is written: a port in
        // use is bad input, and no run is left behind for it.
        let exporter = g
            .metrics_addr
            .as_deref()
            .map(|addr| Exporter::start(addr, "", &sharding.shard.to_string()))
            .transpose()
            .map_err(|e| usage(e.to_string()))?;
        let mut store = Store::open(&g.results)?;
        let env = base_env(env, &g.build);
        // The replication sampler, for a run on a managed primary with
        // standbys; a step lasts its ramp-up plus duration.
        let repl = env["db"]["managed"]["name"].as_str().and_then(|name| {
            let step_len = config["duration_s"]
                .as_f64()
                .map(|d| std::time::Duration::from_secs_f64(d + config["rampup_s"].as_f64().unwrap_or(0.0)));
            let note = g.voice.note;
            let notes = Box::new(move |n: storbench_ops::repl::ReplNote| note(&n.to_string()));
            storbench_ops::repl::ReplProbe::start(name, step_len, crate::interrupt::flag(), notes)
        });
        if let Some(axes) = g.axes.as_deref().and_then(|a| serde_json::from_str::<Value>(a).ok()) {
            config["axes"] = axes;
        }
        if let Some(d) = &g.cell_digest {
            config["cell_digest"] = Value::from(d.as_str());
        }
        let run = store.begin_run(&NewRun {
            kind: kind.to_string(),
            label: g.label.clone().unwrap_or(default_label),
            config,
            env,
            plan: g.plan.clone(),
            cell: g.cell.clone(),
        })?;
        if let Some(x) = &exporter {
            x.run(run.short());
        }
        sharding.arm();
        Ok(Recorder {
            store,
            run,
            next_idx: 0,
            json: g.json,
            quiet: g.quiet,
            monitor: Monitor::start(targets),
            emu: emu_counters(targets),
            repl,
            exporter,
            voice: g.voice,
            targets: targets.to_vec(),
            verdicts: Vec::new(),
            waits: None,
            server_cpu: None,
        })
    }

    /// Samples the database's wait events through `conn` (a connection
    /// of the sampler's own) from now on, for every step written after;
    /// where the server keeps none, says why once on stderr and samples
    /// nothing.
    pub fn sample_waits(&mut self, conn: Box<dyn storbench_db::Connection>) {
        match storbench_db::waits::WaitSource::open(conn) {
            Ok(src) => self.waits = Some(storbench_db::waits::WaitSampler::start(src)),
            Err(why) => (self.voice.note)(&format!("no wait events: {why}")),
        }
    }

    /// Watches the database server's own CPU from now on (the verdict's
    /// "server N %"), when the server `conn` talks to runs on this host.
    pub fn watch_server(&mut self, conn: &mut dyn storbench_db::Connection) {
        self.server_cpu = storbench_db::waits::server_pid(conn)
            .and_then(storbench_sysmon::server::ServerCpu::for_server_process);
    }

    /// A step begins: live metrics carry its label from now on.
    pub fn live_step(&self, label: &str) {
        if let Some(x) = &self.exporter {
            x.step(label);
        }
    }

    /// Publishes one tick's live values, with the system monitor's last
    /// second (CPU shares, each watched device's rates), to `--metrics-addr`;
    /// `values` is called only when metrics are served.
    pub fn publish(&self, values: impl FnOnce() -> LiveValues) {
        let Some(x) = &self.exporter else { return };
        let mut v = values();
        if let Some(s) = self.monitor.latest() {
            let c = &s.cpu;
            for (n, val) in [
                ("user", c.user),
                ("system", c.system),
                ("iowait", c.iowait),
                ("idle", c.idle),
                ("steal", c.steal),
            ] {
                v.system.push((format!("cpu.{n}"), val));
            }
            for (dev, d) in &s.disks {
                for (n, val) in storbench_sysmon::disk_fields(d) {
                    v.system.push((format!("dev.{dev}.{n}"), val));
                }
            }
        }
        x.update(&v);
    }

    /// Starts timing a step.
    pub fn clock(&self) -> StepClock {
        let now = Instant::now();
        if let Some(r) = &self.repl {
            r.step_started(now);
        }
        StepClock { start: now, measure_from: now }
    }

    /// Writes a finished step, with the monitor's figures for its measured
    /// window and its samples from the step's start; returns the step's
    /// figures (the workload's and the monitor's) for display.
    pub fn write_step(
        &mut self,
        clock: StepClock,
        label: &str,
        params: Value,
        mut report: StepReport,
    ) -> Result<StepReport> {
        let end = Instant::now();
        let sys = self.monitor.window(clock.start, clock.measure_from, end);
        report.figures.extend(sys.figures);
        report.samples.extend(sys.samples);
        report.histograms.extend(sys.histograms);
        if !self.emu.is_empty() {
            // The daemon's second ending at `end` is written just after it.
            std::thread::sleep(std::time::Duration::from_millis(600));
            let ms = |t: Instant| unix_ms().saturating_sub(t.elapsed().as_millis() as u64);
            let (start, from, to) = (ms(clock.start), ms(clock.measure_from), ms(end));
            for (name, path) in &self.emu {
                let lines = storbench_emu::counters::read(path, start, to + 1000);
                let e = storbench_emu::counters::step_report(name, &lines, start, from, to);
                report.figures.extend(e.figures);
                report.samples.extend(e.samples);
                let env = envelope(name, &report.figures);
                report.figures.extend(env);
                report.figures.extend(what_if(name));
            }
        }
        if let Some(r) = &self.repl {
            let w = r.window(clock.start, clock.measure_from, end);
            report.figures.extend(w.figures);
            report.samples.extend(w.samples);
        }
        if let Some(c) = &self.server_cpu {
            let c = c.window(clock.start, clock.measure_from, end);
            report.figures.extend(c.figures);
            report.samples.extend(c.samples);
        }
        if let Some(w) = &self.waits {
            let w = w.window(clock.start, clock.measure_from, end);
            report.figures.extend(w.figures);
            report.samples.extend(w.samples);
        }
        let finished = storbench_results::now_rfc3339();
        // The step's wall-clock start is its clock's (the runner's, once
        // every worker was ready, and after a common start instant), not
        // when this clock was made.
        let since_start = chrono::Duration::from_std(clock.start.elapsed()).unwrap_or_default();
        let started_at =
            (chrono::Utc::now() - since_start).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        self.store
            .write_step(self.run.id, self.next_idx, label, &params, &started_at, &finished, &report)
            .with_context(|| format!("saving step '{label}'"))?;
        self.judge(self.next_idx).with_context(|| format!("saving the verdict of step '{label}'"))?;
        self.next_idx += 1;
        Ok(StepReport { figures: report.figures, ..StepReport::default() })
    }

    /// Judges step `idx` from the run as the store holds it (so the stored
    /// verdict is the one `storbench_report::verdict::judge` recomputes
    /// from the store) and writes it beside the step's figures. A setup
    /// step (a build, an init) gets none.
    fn judge(&mut self, idx: i64) -> Result<()> {
        let run = self.store.run(&self.run.id.to_string())?;
        let data = storbench_report::RunData::load(&self.store, run)?;
        let Some(v) = storbench_report::verdict::judge_step(&data, idx) else {
            return Ok(());
        };
        let notes = v.notes();
        let notes: Vec<(&str, &str)> = notes.iter().map(|(k, t)| (*k, t.as_str())).collect();
        self.store.write_notes(self.run.id, idx, &notes)?;
        self.verdicts.push(v);
        Ok(())
    }

    /// Says a note through the recording's voice.
    pub fn note(&self, msg: &str) {
        (self.voice.note)(msg)
    }

    /// Whether `--quiet` hides the live line.
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    /// The index the last step written got (`None`: none yet).
    pub fn last_idx(&self) -> Option<i64> {
        self.next_idx.checked_sub(1).filter(|i| *i >= 0)
    }

    /// The storage sensitivity of step `idx` from its re-runs as the store
    /// holds them (`storbench_report::sensitivity::measure`, so what is
    /// recorded is what the store gives again), written as its note.
    pub fn write_sensitivity(
        &mut self,
        idx: i64,
    ) -> Result<Option<storbench_report::sensitivity::Sensitivity>> {
        let run = self.store.run(&self.run.id.to_string())?;
        let data = storbench_report::RunData::load(&self.store, run)?;
        let Some(s) = storbench_report::sensitivity::measure(&data).into_iter().find(|s| s.step_idx == idx)
        else {
            return Ok(None);
        };
        let notes = s.notes();
        let notes: Vec<(&str, &str)> = notes.iter().map(|(k, t)| (*k, t.as_str())).collect();
        self.store.write_notes(self.run.id, idx, &notes)?;
        Ok(Some(s))
    }

    /// The verdicts of the steps written so far, in order.
    pub fn verdicts(&self) -> &[Verdict] {
        &self.verdicts
    }

    /// The store the run records in, and the run's id: for reading back
    /// what it recorded so far (the latency story under its summary).
    pub fn recorded(&self) -> (&Store, i64) {
        (&self.store, self.run.id)
    }

    /// Ends the run: sets its status, says the record with `--json`, and
    /// returns the exit code (0; 130 interrupted; for a failure, the error's
    /// code: 1, or 3 when the database could not be reached, 4 when the
    /// target failed).
    pub fn finish(mut self, outcome: Outcome) -> Result<ExitCode> {
        // A device that vanished under a run is most often a modelled
        // medium's daemon that died: say so, with its log, before the
        // symptom (an I/O error, a lost database).
        let outcome = match outcome {
            Outcome::Failed(e) => {
                let dead = storbench_media::emu::dead_daemons(&self.targets);
                // A dead daemon is a failed target (exit 4) whatever the
                // symptom was.
                Outcome::Failed(if dead.is_empty() {
                    e
                } else {
                    e.context(crate::error::TargetError(dead.join("; ")))
                })
            }
            o => o,
        };
        let (status, code, err) = match outcome {
            Outcome::Complete => (Status::Complete, 0, None),
            Outcome::Interrupted => (Status::Interrupted, EXIT_INTERRUPTED, None),
            Outcome::Failed(e) => (Status::Failed, crate::error::exit_code(&e), Some(e)),
        };
        self.store.finish_run(self.run.id, status)?;
        if self.json {
            let rec = self.store.export(&self.run.id.to_string())?;
            (self.voice.out)(&serde_json::to_string_pretty(&rec)?);
        }
        if let Some(e) = &err {
            (self.voice.error)(e);
        }
        if !self.quiet || status != Status::Complete {
            (self.voice.note)(&format!(
                "run {} ({}) {} with {} step(s), saved in {}",
                self.run.id,
                self.run.short(),
                status.as_str(),
                self.next_idx,
                self.store.path().display()
            ));
        }
        Ok(ExitCode::from(code))
    }
}

/// The system figures shown beside a workload's: CPU iowait and the slowest
/// device's average read and write latency over the measured window.
pub fn system_columns(figures: &StepReport) -> [String; 3] {
    let worst = |suffix: &str| {
        figures
            .figures
            .iter()
            .filter(|f| f.name.starts_with("dev.") && f.name.ends_with(suffix))
            .map(|f| f.value)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .map(|v| format!("{v:.2}"))
            .unwrap_or_else(|| "-".into())
    };
    [
        figures.get("cpu.iowait").map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
        worst(".r_await"),
        worst(".w_await"),
    ]
}

/// A size as a figure name's suffix: `512M`, `2G`, `64K`.
fn size_label(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b => format!("{}K", b >> 10),
    }
}

/// What a traced medium's cache tier would give at other sizes: the
/// miss-ratio curves of its trace so far (LRU by stack distance and the
/// tier's own policy by simulation, at a quarter, half, one, two and four
/// times the cache's size, the tier's line), as figures
/// `emu.NAME.cache.mrc.POLICY.hit_ratio.SIZE`. Nothing for a medium without
/// a cache or a trace. Long traces (over 4 million requests) are sampled
/// (SHARDS at 5 %).
fn what_if(name: &str) -> Vec<storbench_metrics::Figure> {
    use storbench_cache::mrc::{self, MrcConfig, Sampling};
    let Ok(Some(m)) = storbench_media::get(name) else { return Vec::new() };
    let (Some(tier), Some(trace)) =
        (m.model.as_ref().and_then(|s| s.cache.clone()), m.daemon.as_ref().and_then(|d| d.trace.clone()))
    else {
        return Vec::new();
    };
    let Ok(policy) = tier.policy.parse::<storbench_cache::PolicyKind>() else { return Vec::new() };
    let records =
        std::fs::metadata(&trace).map(|x| x.len() / storbench_cache::trace::RECORD_SIZE as u64).unwrap_or(0);
    let mut policies = vec![storbench_cache::PolicyKind::Lru];
    if policy != storbench_cache::PolicyKind::Lru {
        policies.push(policy);
    }
    let sizes: Vec<u64> = [tier.size / 4, tier.size / 2, tier.size, tier.size * 2, tier.size * 4]
        .into_iter()
        .filter(|&x| x >= tier.line)
        .collect();
    let cfg = MrcConfig {
        line: tier.line,
        sizes: sizes.clone(),
        policies,
        sampling: if records > 4_000_000 { Sampling::Rate(0.05) } else { Sampling::Exact },
        target: None,
    };
    let Ok((_, recs)) = storbench_cache::trace::open(&trace, None) else { return Vec::new() };
    let lines = storbench_cache::Lines::new(recs, tier.line);
    let Ok(r) = mrc::analyze(lines, &cfg, 1, &mut |_| true) else { return Vec::new() };
    let mut out = Vec::new();
    for c in &r.curves {
        for (size, miss) in sizes.iter().zip(&c.miss_ratio) {
            out.push(storbench_metrics::Figure::new(
                format!("emu.{name}.cache.mrc.{}.hit_ratio.{}", c.policy, size_label(*size)),
                1.0 - miss,
                storbench_metrics::Unit::Ratio,
            ));
        }
    }
    out
}

/// The emulator's floor on a modelled medium (measured when it was made,
/// absorbed by its daemon) and whether the step fell outside the
/// emulator's envelope: some op's mean model time under a few floors, or
/// the IOPS above most of its ceiling (`storbench_ops::calibrate::Envelope`).
/// `emu.NAME.floor` and `emu.NAME.floor_64k` (µs: a 4 KiB and a 64 KiB
/// read's round trip), `emu.NAME.lead` and `emu.NAME.lead_far` (µs: a
/// timed reply's wake-ups absorbed besides, after a 200 µs and a 1 ms
/// wait) and `emu.NAME.outside_envelope` (1 or 0).
fn envelope(name: &str, figures: &[storbench_metrics::Figure]) -> Vec<storbench_metrics::Figure> {
    use storbench_metrics::{Figure, Unit};
    let Ok(Some(m)) = storbench_media::get(name) else { return Vec::new() };
    let Some(f) = m.daemon.and_then(|d| d.floor) else { return Vec::new() };
    let get = |k: String| figures.iter().find(|x| x.name == k).map(|x| x.value).filter(|v| *v > 0.0);
    let svc = ["read", "write", "flush"]
        .iter()
        .filter_map(|op| get(format!("emu.{name}.{op}.svc.mean")))
        .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.min(v))));
    let iops = ["read", "write"].iter().filter_map(|op| get(format!("emu.{name}.{op}.iops"))).sum::<f64>();
    let env = storbench_ops::calibrate::Envelope {
        floor_us: f.qd1_p50_us,
        timed_extra_us: f.timed_extra_us,
        ceiling_iops: f.qd16_iops,
        ceiling_write_mb_s: f.write_mb_s,
    };
    let model = storbench_emu::fit::Figures { lat_mean_us: svc, iops: Some(iops), ..Default::default() };
    vec![
        Figure::new(format!("emu.{name}.floor"), f.qd1_p50_us, Unit::Us),
        Figure::new(format!("emu.{name}.floor_64k"), f.qd1_p50_64k_us.unwrap_or(f.qd1_p50_us), Unit::Us),
        Figure::new(format!("emu.{name}.lead"), f.timed_lead_us, Unit::Us),
        Figure::new(format!("emu.{name}.lead_far"), f.timed_lead_far_us.unwrap_or(f.timed_lead_us), Unit::Us),
        Figure::new(
            format!("emu.{name}.outside_envelope"),
            env.outside(&model, None).is_some() as u8 as f64,
            Unit::Count,
        ),
    ]
}
