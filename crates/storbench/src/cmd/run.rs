//! `storbench run PLAN.toml`: a study's matrix, unattended.
//!
//! The plan is validated whole before anything runs (every cell's command
//! line is parsed by the same parser the commands use). Each cell then runs
//! as a child `storbench` process tagged with the plan and cell, so a cell
//! is exactly the run a user would get by typing its command, and a crash
//! in one cell cannot take the plan down. Completed cells are skipped on a
//! rerun (`--fresh` redoes them); a failed cell is recorded and the plan
//! goes on (`--stop-on-error` stops). Media and managed databases the plan
//! created are torn down at the end, on error and on Ctrl-C.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Parser};
use serde_json::json;
use storbench_metrics::units::format_duration;
use storbench_plan::{db_placeholder, exec, target_placeholder, Cell, Plan};
use storbench_results::{NewRun, Status, Store};

use crate::cli::{Cli, Global};
use crate::error::{usage, EXIT_INTERRUPTED};
use crate::live::Live;

/// Options of `storbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan file.
    pub plan: PathBuf,
    /// Run the plan's quick form (its [quick] table).
    #[arg(long)]
    pub quick: bool,
    /// Print the expanded matrix and an estimate of its duration; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Redo cells already completed by an earlier run of this plan.
    #[arg(long)]
    pub fresh: bool,
    /// Stop at the first failed cell.
    #[arg(long)]
    pub stop_on_error: bool,
    /// Where to write the HTML report when the plan ends (default: PLAN-NAME-report.html).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Do not write a report at the end.
    #[arg(long)]
    pub no_report: bool,
}

/// Runs `storbench run`.
pub fn run(g: &Global, a: RunArgs) -> Result<ExitCode> {
    let sharding = g.sharding();
    let plan = storbench_plan::load(&a.plan, a.quick).map_err(|e| usage(e.to_string()))?;
    let name = plan.def.name.clone();
    validate_cells(&plan)?;
    validate_targets(&plan)?;
    // What would measure something other than storage: said before a
    // dry run too, so a plan is fixed before it takes an afternoon.
    for w in plan.warnings() {
        eprintln!("storbench: warning: plan {name}: {w}");
    }
    let total: Duration = plan.cells.iter().map(|c| c.estimate).sum();
    if a.dry_run {
        print_matrix(&plan, total);
        return Ok(ExitCode::SUCCESS);
    }
    let store = Store::open(&g.results)?;
    let exe = std::env::current_exe().context("finding the storbench executable")?;
    let mut env = Setup {
        plan: &plan,
        exe,
        results: g.results.clone(),
        made_media: Vec::new(),
        made_pg: Vec::new(),
        inst_dirs: BTreeMap::new(),
        paths: BTreeMap::new(),
        dbs: BTreeMap::new(),
        shard: g.shard.clone().filter(|_| sharding.given),
        build: !sharding.split(),
        metrics: g.metrics_addr.clone(),
    };
    // The common start instant gates the first measured command only: the
    // cells after it begin when this shard is done with the one before.
    let start_at = sharding.start_rfc3339();
    let bar = Live::bar(g.quiet, plan.cells.len() as u64, "cell {pos}/{len} {bar:30} {msg} (eta {eta})");
    let started = Instant::now();
    let opts = exec::Options { fresh: a.fresh, stop_on_error: a.stop_on_error };
    let mut cells =
        Cells { g, store: &store, env: &mut env, bar: &bar, start_at, cell_started: String::new() };
    let sum = exec::execute(&plan, opts, &mut cells)?;
    let (done, skipped, failed, interrupted) = (sum.done, sum.skipped, sum.failed, sum.interrupted);
    bar.finish();
    let teardown = env.teardown();
    eprintln!(
        "plan {name}: {done} cell(s) run, {skipped} already complete, {} failed{} in {}",
        failed.len(),
        if interrupted { ", interrupted" } else { "" },
        format_duration(Duration::from_secs(started.elapsed().as_secs()))
    );
    if let Err(e) = teardown {
        eprintln!("storbench: warning: cleaning up after plan {name}: {e:#}");
    }
    if !interrupted && !a.no_report && done + skipped > 0 {
        let html = a.report.clone().unwrap_or_else(|| PathBuf::from(format!("{name}-report.html")));
        print_report(&store, &name, &html);
    }
    Ok(ExitCode::from(if interrupted {
        EXIT_INTERRUPTED
    } else if failed.is_empty() {
        0
    } else {
        crate::error::EXIT_FAILED
    }))
}

/// The binary's side of a plan's execution: targets and databases
/// prepared, each cell a child `storbench`, failures recorded, progress on
/// the bar.
struct Cells<'a, 'p> {
    g: &'a Global,
    store: &'a Store,
    env: &'a mut Setup<'p>,
    bar: &'a Live,
    /// The common start instant: it gates the first measured command only;
    /// the cells after it begin when this shard is done with the one before.
    start_at: Option<String>,
    /// When the cell in hand started (a failed cell's run begins then).
    cell_started: String,
}

impl exec::CellRunner for Cells<'_, '_> {
    type Error = anyhow::Error;

    fn completed(&mut self, cell: &Cell) -> Result<bool> {
        Ok(self.store.completed_cell(&self.env.plan.def.name, &cell.id)?.is_some())
    }

    fn run(&mut self, cell: &Cell) -> std::result::Result<i32, String> {
        self.cell_started = storbench_results::now_rfc3339();
        let env = &mut *self.env;
        let start_at = &mut self.start_at;
        env.prepare(cell)
            .and_then(|argv| run_cell(env, cell, &argv, start_at.take()))
            .map_err(|e| format!("{e:#}"))
    }

    fn record_failure(&mut self, cell: &Cell, why: &str) -> Result<()> {
        record_failure(self.g, &self.env.plan.def.name, cell, why, &self.cell_started)
    }

    fn release(&mut self, later: &[Cell]) {
        self.env.release(later);
    }

    fn interrupted(&self) -> bool {
        crate::interrupt::requested()
    }

    fn event(&mut self, e: exec::Event<'_>) {
        let (n, of, id) = (e.index + 1, e.of, &e.cell.id);
        match e.what {
            exec::What::Next => {
                self.bar.pos(e.index as u64);
                self.bar.set(id.clone());
            }
            exec::What::Complete if !self.g.quiet => {
                self.bar.println(format!("cell {n}/{of} {id}: complete"))
            }
            exec::What::Complete => {}
            exec::What::Failed(exec::Failure::Exit(code)) => {
                self.bar.println(format!("cell {n}/{of} {id}: FAILED (exit code {code})"))
            }
            exec::What::Failed(exec::Failure::Error(why)) => {
                self.bar.println(format!("cell {n}/{of} {id}: FAILED: {why}"))
            }
        }
    }
}

/// `--dry-run`: the expanded matrix and its estimated duration.
fn print_matrix(plan: &storbench_plan::Plan, total: Duration) {
    println!(
        "plan {} ({}): {} cells, about {} (plus setup)",
        plan.def.name,
        plan.file.display(),
        plan.cells.len(),
        format_duration(total)
    );
    for (i, c) in plan.cells.iter().enumerate() {
        println!(
            "{:>4}  {:<40} ~{:>6}  storbench {}",
            i + 1,
            c.id,
            format_duration(c.estimate),
            shown(plan, c)
        );
    }
}

/// Writes the plan's report and prints its summary (a warning if it fails:
/// the cells' runs are recorded either way).
fn print_report(store: &Store, name: &str, html: &std::path::Path) {
    match end_report(store, name, html) {
        Ok(summary) => {
            println!("{summary}");
            eprintln!("report: {}", html.display());
        }
        Err(e) => eprintln!("storbench: warning: the report of plan {name} could not be written: {e:#}"),
    }
}

/// The report a plan ends with: the HTML file, written whole, and the short
/// summary for the terminal (findings, main tables, the configurations
/// compared in a line; the full environment stays in the HTML and in
/// `results show`).
fn end_report(store: &Store, name: &str, html: &Path) -> Result<String> {
    let report = storbench_report::Report::load(store, &[name.to_string()])?;
    crate::cmd::report::write_whole(html, &report.to_html()?)?;
    Ok(report.to_summary())
}

/// The cell's command as a user would type it (placeholders shown by name).
fn shown(plan: &Plan, c: &Cell) -> String {
    let mut out = c
        .parts()
        .into_iter()
        .map(|(_, before, command)| {
            let mut s: Vec<String> = before.iter().map(|b| b.join(" ") + " && storbench").collect();
            s.push(command.join(" "));
            s.join(" ")
        })
        .collect::<Vec<_>>()
        .join("  &  storbench ");
    for t in plan.def.targets.keys() {
        out = out.replace(&target_placeholder(t), &format!("<{t}>"));
    }
    for d in plan.def.dbs.keys() {
        out = out.replace(&db_placeholder(d), &format!("<db {d}>"));
    }
    out
}

/// Every cell's command lines parse as the commands themselves would parse
/// them: unknown flags and bad flag values fail before anything runs.
fn validate_cells(plan: &Plan) -> Result<()> {
    for c in &plan.cells {
        let parts = c.parts();
        let argvs = parts.iter().flat_map(|(_, before, command)| {
            before.iter().map(Vec::as_slice).chain(std::iter::once(*command))
        });
        for argv in argvs {
            let filled: Vec<String> = argv
                .iter()
                .map(|a| {
                    let mut a = a.clone();
                    for t in plan.def.targets.keys() {
                        a = a.replace(&target_placeholder(t), "/tmp");
                    }
                    for d in plan.def.dbs.keys() {
                        a = a.replace(&db_placeholder(d), "sqlite:/tmp/x.db");
                    }
                    a
                })
                .collect();
            let mut full = vec!["storbench".to_string()];
            full.extend(filled);
            if let Err(e) = Cli::try_parse_from(&full) {
                let msg = e.to_string();
                let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid").trim();
                let first = first.trim_start_matches("error: ");
                return Err(usage(format!(
                    "{}: workload '{}' (`storbench {}`): {first}",
                    plan.file.display(),
                    c.workload,
                    argv[..argv.len().min(2)].join(" ")
                )));
            }
        }
    }
    Ok(())
}

/// Path targets must exist or be creatable; media need root.
fn validate_targets(plan: &Plan) -> Result<()> {
    for (name, t) in &plan.def.targets {
        let t = t.get_ref();
        if let Some(p) = &t.path {
            let p = Path::new(p);
            let parent_ok =
                p.exists() || p.parent().map(|d| d.as_os_str().is_empty() || d.exists()).unwrap_or(false);
            if !parent_ok {
                return Err(usage(format!(
                    "{}: target '{name}': {} does not exist (and neither does its parent)",
                    plan.file.display(),
                    p.display()
                )));
            }
        }
        if t.media.is_some() {
            // The same check `storbench media create` makes (root, loop
            // support, and the throttle when a class is emulated).
            let throttled = t.media.as_ref().and_then(|m| m.emulate.as_deref()).is_some_and(|c| c != "nvme");
            storbench_media::check_support(throttled).map_err(|e| {
                usage(format!("{}: target '{name}' is a medium the plan creates: {e}", plan.file.display()))
            })?;
            if let Some(m) = t.media.as_ref().filter(|m| m.array.is_some()) {
                let bad = |e: String| usage(format!("{}: target '{name}': {e}", plan.file.display()));
                if m.model.is_some() || m.emulate.is_some() {
                    return Err(bad("give array or model or emulate, one of them".into()));
                }
                let sets: Vec<String> = m.member_set.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let o = storbench_emu::ArrayOptions {
                    layout: m.array.as_deref().expect("filtered"),
                    disks: m.disks,
                    chunk: m.chunk.as_deref(),
                    groups: m.groups,
                    member: m.member.as_deref(),
                    member_sets: &sets,
                    link: m.member_link.as_deref(),
                    cache: m.controller_cache.as_deref(),
                    battery: m.cache_battery.as_deref(),
                    destage: m.controller_destage.as_deref(),
                };
                storbench_emu::ArraySpec::from_options(&o).map_err(|e| bad(e.to_string()))?;
                storbench_media::emu::check_support().map_err(|e| {
                    usage(format!("{}: target '{name}' is a modelled medium: {e}", plan.file.display()))
                })?;
            }
            if let Some(m) =
                t.media.as_ref().filter(|m| m.model.is_some() || !m.set.is_empty() || m.wants_model())
            {
                let model = m.model.as_deref().ok_or_else(|| {
                    usage(format!(
                        "{}: target '{name}': set = {{ ... }}, cache and trace need model = \"NAME\"",
                        plan.file.display()
                    ))
                })?;
                if m.emulate.is_some() {
                    return Err(usage(format!(
                        "{}: target '{name}': give emulate or model, not both (caps, or a per-I/O device model)",
                        plan.file.display()
                    )));
                }
                let sets: Vec<String> = m.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let mut spec = storbench_emu::Spec::parse(model, &sets)
                    .map_err(|e| usage(format!("{}: target '{name}': {e}", plan.file.display())))?;
                let bad = |e: String| usage(format!("{}: target '{name}': {e}", plan.file.display()));
                if let Some(o) = tier_options(m) {
                    spec.cache =
                        Some(storbench_emu::TierSpec::from_options(&o).map_err(|e| bad(e.to_string()))?);
                    let size = storbench_metrics::units::parse_size(&m.size)
                        .map_err(|e| bad(format!("size = \"{}\": {e}", m.size)))?;
                    spec.build(size).map_err(|e| bad(e.to_string()))?;
                } else if m.has_tier_keys() {
                    return Err(bad("cache_model, cache_policy, cache_write, cache_line, cache_warm and cold need cache = \"SIZE\"".into()));
                }
                storbench_media::emu::check_support().map_err(|e| {
                    usage(format!("{}: target '{name}' is a modelled medium: {e}", plan.file.display()))
                })?;
            }
        }
    }
    Ok(())
}

/// What the plan created, for teardown, and where targets and databases are.
struct Setup<'a> {
    plan: &'a Plan,
    exe: PathBuf,
    results: PathBuf,
    made_media: Vec<String>,
    made_pg: Vec<String>,
    /// The directories made for each managed instance on its targets,
    /// removed (when empty) with it.
    inst_dirs: BTreeMap<String, Vec<PathBuf>>,
    paths: BTreeMap<String, PathBuf>,
    dbs: BTreeMap<String, String>,
    /// `--shard i/N`, passed to each cell's measured command.
    shard: Option<String>,
    /// Whether this process runs the cells' build and init commands. Shards
    /// share the database under test and none may rebuild it under the
    /// others (nor start before it is built): a sharded plan runs on a
    /// database built beforehand (docs/cluster.md).
    build: bool,
    /// `--metrics-addr`, passed to each cell's measured command.
    metrics: Option<String>,
}

impl Setup<'_> {
    fn child(&self) -> Command {
        let mut c = Command::new(&self.exe);
        // What a child prints on stdout (a medium made, a server up) is not
        // the plan's result; its errors still reach stderr.
        c.arg("--results").arg(&self.results).arg("--quiet").stdout(Stdio::null());
        for k in [
            "STORBENCH_PLAN",
            "STORBENCH_CELL",
            "STORBENCH_AXES",
            "STORBENCH_SHARD",
            "STORBENCH_START_AT",
            "STORBENCH_METRICS_ADDR",
        ] {
            c.env_remove(k);
        }
        c
    }

    /// Empties the cell's target's cache tier when the plan says `cold`.
    fn cold_cache(&self, cell: &Cell) -> Result<()> {
        let Some(target) = cell.axes.get("target") else { return Ok(()) };
        let cold = self
            .plan
            .def
            .targets
            .get(target)
            .and_then(|t| t.get_ref().media.as_ref())
            .is_some_and(|m| m.cold);
        if !cold {
            return Ok(());
        }
        let name = self.media_name(target);
        let st = self
            .child()
            .args(["media", "cache", "reset", &name])
            .status()
            .context("running storbench media cache reset")?;
        if !st.success() {
            return Err(anyhow!("emptying the cache of medium '{name}' (target '{target}') failed"));
        }
        Ok(())
    }

    fn media_name(&self, target: &str) -> String {
        format!("{}-{target}", self.plan.def.name)
    }

    /// The directory of a target, creating its medium on first use.
    fn target_path(&mut self, name: &str) -> Result<PathBuf> {
        if let Some(p) = self.paths.get(name) {
            return Ok(p.clone());
        }
        let def = self.plan.def.targets[name].get_ref().clone();
        let path = if let Some(p) = def.path {
            let p = PathBuf::from(p);
            std::fs::create_dir_all(&p)
                .with_context(|| format!("creating target '{name}' at {}", p.display()))?;
            p
        } else {
            let m = def.media.expect("validated: path or media");
            let mname = self.media_name(name);
            let mut c = self.child();
            c.args(["media", "create", &mname, "--size", &m.size]);
            if let Some(fs) = &m.fs {
                c.args(["--fs", fs]);
            }
            if let Some(bs) = &m.block_size {
                c.args(["--block-size", bs]);
            }
            if let Some(e) = &m.emulate {
                c.args(["--emulate", e]);
            }
            if let Some(model) = &m.model {
                c.args(["--model", model]);
            }
            for (k, v) in &m.set {
                c.arg("--set").arg(format!("{k}={v}"));
            }
            c.args(m.tier_flags(&self.plan.def.name));
            c.args(m.array_flags());
            let st = c.status().context("running storbench media create")?;
            if !st.success() {
                return Err(anyhow!("creating medium '{mname}' for target '{name}' failed"));
            }
            self.made_media.push(mname.clone());
            media_mount(&mname)?
        };
        self.paths.insert(name.to_string(), path.clone());
        Ok(path)
    }

    /// The managed instance a cell's database needs, if any: its name and
    /// where its data, WAL and temp files go (target names).
    fn instance(&self, name: &str, cell: &Cell) -> Option<(String, String, Option<String>, Option<String>)> {
        let m = self.plan.def.dbs[name].get_ref().managed.clone()?;
        let target = cell.axes.get("target").cloned().unwrap_or_default();
        let place = |s: &str| if s == "{target}" { target.clone() } else { s.to_string() };
        let data = place(m.data.get_ref());
        let wal = m.wal.as_ref().map(|w| place(w.get_ref()));
        let temp = m.temp.as_ref().map(|t| place(t.get_ref()));
        let mut inst = format!("{}-{name}-{data}", self.plan.def.name);
        // A replicated instance differs by its sync level, link and standby
        // placement too: each combination is an instance of its own.
        for v in m.replication_flags(&cell.axes).iter().skip(1).step_by(2) {
            inst.push('-');
            inst.extend(v.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_'));
        }
        Some((inst, data, wal, temp))
    }

    /// The URL of a database, starting a managed instance on first use.
    fn db_url(&mut self, name: &str, cell: &Cell) -> Result<String> {
        let def = self.plan.def.dbs[name].get_ref().clone();
        if let Some(url) = def.url {
            return Ok(url);
        }
        let m = def.managed.expect("validated: url or managed");
        let (inst, data, wal, temp) = self.instance(name, cell).expect("managed");
        if let Some(u) = self.dbs.get(&inst) {
            return Ok(u.clone());
        }
        // Each instance gets its own directory on each of its targets
        // (`pg up` makes the data, WAL and temp directories in it, and
        // refuses a place whose parent does not exist).
        let place = |this: &mut Self, target: &str, sub: &str| -> Result<PathBuf> {
            let dir = this.target_path(target)?.join(&inst);
            if !dir.is_dir() {
                std::fs::create_dir_all(&dir).map_err(|e| anyhow!("creating {}: {e}", dir.display()))?;
                this.inst_dirs.entry(inst.clone()).or_default().push(dir.clone());
            }
            Ok(dir.join(sub))
        };
        let data_path = place(self, &data, "data")?;
        let wal_path = wal.as_deref().map(|w| place(self, w, "wal")).transpose()?;
        let temp_path = temp.as_deref().map(|t| place(self, t, "temp")).transpose()?;
        let mut c = self.child();
        c.args(["pg", "up", &inst, "--data"]).arg(&data_path);
        if let Some(w) = &wal_path {
            c.arg("--wal").arg(w);
        }
        if let Some(t) = &temp_path {
            c.arg("--temp").arg(t);
        }
        for (k, v) in &m.conf {
            let v = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            c.args(["-c", &format!("{k}={v}")]);
        }
        if let Some(limit) = &m.memory_limit {
            c.args(["--memory-limit", limit]);
        }
        let repl = m.replication_flags(&cell.axes);
        for pair in repl.chunks(2) {
            let v = if pair[0].starts_with("--standby-") {
                place(self, &pair[1], &pair[0][10..])?.display().to_string()
            } else {
                pair[1].clone()
            };
            c.args([&pair[0], &v]);
        }
        let st = c.status().context("running storbench pg up")?;
        if !st.success() {
            return Err(anyhow!("starting managed PostgreSQL '{inst}' failed"));
        }
        self.made_pg.push(inst.clone());
        let url = format!("managed:{inst}");
        self.dbs.insert(inst, url.clone());
        Ok(url)
    }

    /// Stops managed instances no later cell needs (frees memory and the
    /// medium for the next cells).
    fn release(&mut self, later: &[Cell]) {
        let needed: Vec<String> = later
            .iter()
            .filter_map(|c| c.db.as_ref().and_then(|d| self.instance(d, c)).map(|i| i.0))
            .collect();
        let done: Vec<String> = self.made_pg.iter().filter(|i| !needed.contains(i)).cloned().collect();
        for inst in done {
            if self.destroy_instance(&inst) {
                self.made_pg.retain(|i| *i != inst);
                self.dbs.remove(&inst);
            }
        }
    }

    /// `pg down --destroy` for an instance the plan made, then the
    /// directories made for it, when empty. True when it is gone.
    fn destroy_instance(&mut self, inst: &str) -> bool {
        let st = Command::new(&self.exe).args(["--quiet", "pg", "down", inst, "--destroy"]).status();
        let gone = st.map(|s| s.success()).unwrap_or(false);
        if gone {
            for dir in self.inst_dirs.remove(inst).unwrap_or_default() {
                let _ = std::fs::remove_dir(dir);
            }
        }
        gone
    }

    /// Fills the cell's placeholders, creating what it needs.
    /// Each workload of the cell (its own, then its neighbours'): its name
    /// and its commands, placeholders filled.
    fn prepare(&mut self, cell: &Cell) -> Result<Vec<(String, Vec<Vec<String>>)>> {
        let mut fills: Vec<(String, String)> = Vec::new();
        for t in &cell.targets {
            let p = self.target_path(t)?;
            fills.push((target_placeholder(t), p.display().to_string()));
        }
        if let Some(d) = &cell.db {
            let url = self.db_url(d, cell)?;
            // A URL may itself name the cell's target.
            let url = match cell.axes.get("target") {
                Some(t) if url.contains("{target}") => {
                    let p = self.target_path(t)?;
                    url.replace("{target}", &p.display().to_string())
                }
                _ => url,
            };
            fills.push((db_placeholder(d), url));
        }
        let fill = |argv: &[String]| -> Vec<String> {
            argv.iter()
                .map(|a| fills.iter().fold(a.clone(), |acc, (from, to)| acc.replace(from, to)))
                .collect()
        };
        Ok(cell
            .parts()
            .into_iter()
            .map(|(w, before, command)| {
                let mut argv: Vec<Vec<String>> = before.iter().map(|b| fill(b)).collect();
                argv.push(fill(command));
                (w.to_string(), argv)
            })
            .collect())
    }

    /// Destroys what the plan created, when the plan asks for cleanup.
    fn teardown(&mut self) -> Result<()> {
        if !self.plan.def.cleanup {
            return Ok(());
        }
        let mut errors = Vec::new();
        let made: Vec<String> = self.made_pg.drain(..).rev().collect();
        for inst in made {
            if !self.destroy_instance(&inst) {
                errors.push(format!("pg down {inst}"));
            }
        }
        for m in self.made_media.drain(..).rev() {
            let st = Command::new(&self.exe).args(["--quiet", "media", "destroy", &m]).status();
            if !st.map(|s| s.success()).unwrap_or(false) {
                errors.push(format!("media destroy {m}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("could not undo: {}", errors.join(", ")))
        }
    }
}

impl Drop for Setup<'_> {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The mount point of a medium the plan created.
fn media_mount(name: &str) -> Result<PathBuf> {
    let m = storbench_media::get(name)
        .map_err(|e| anyhow!("{e}"))?
        .ok_or_else(|| anyhow!("medium '{name}' was not created"))?;
    m.mount_point.ok_or_else(|| anyhow!("medium '{name}' has no filesystem (fs = \"none\")"))
}

/// A plan medium's cache tier options, if it has `cache` (the defaults are
/// `TierSpec::from_options`'s, as for `media create`).
fn tier_options(m: &storbench_plan::MediaDef) -> Option<storbench_emu::TierOptions<'_>> {
    Some(storbench_emu::TierOptions {
        size: m.cache.as_deref()?,
        model: m.cache_model.as_deref(),
        line: m.cache_line.as_deref(),
        policy: m.cache_policy.as_deref(),
        write: m.cache_write.as_deref(),
        warm: m.cache_warm.as_deref(),
    })
}

/// Why a child ended without an exit code: the signal, and for a SIGKILL
/// under `--memory-limit` the likely cause.
fn killed(st: &std::process::ExitStatus, argv: &[String]) -> String {
    use std::os::unix::process::ExitStatusExt;
    match st.signal() {
        Some(libc::SIGKILL) if argv.iter().any(|a| a == "--memory-limit") => {
            "was killed (SIGKILL: under --memory-limit most likely the memory group's OOM killer, as dmesg says; raise the limit)".to_string()
        }
        Some(sig) => format!("was killed (signal {sig})"),
        None => "was killed".to_string(),
    }
}

/// How long before their common start a `together` cell's workloads are
/// started: time for each to connect, open and set up before the instant.
const TOGETHER_LEAD: Duration = Duration::from_secs(5);

/// Runs a cell's commands; returns the measured commands' exit code (the
/// first that is not 0). The measured command begins its first step at
/// `start_at` when given; the workloads of a `together` cell are started
/// side by side and begin at one instant, `start_at` or a few seconds on.
fn run_cell(
    env: &Setup<'_>,
    cell: &Cell,
    parts: &[(String, Vec<Vec<String>>)],
    start_at: Option<String>,
) -> Result<i32> {
    for (_, argv) in parts {
        let before = &argv[..argv.len() - 1];
        for b in before.iter().filter(|_| env.build) {
            let mut c = env.child();
            c.args(b)
                .env("STORBENCH_PLAN", &env.plan.def.name)
                .env("STORBENCH_CELL", format!("{}:{}", cell.id, b[..2.min(b.len())].join("-")))
                .env("STORBENCH_AXES", serde_json::to_string(&cell.axes)?)
                .stdout(Stdio::null());
            let st = c.status().with_context(|| format!("running storbench {}", b.join(" ")))?;
            match st.code() {
                Some(0) => {}
                Some(code) => return Ok(code),
                None => return Err(anyhow!("storbench {} {}", b.join(" "), killed(&st, b))),
            }
        }
    }
    env.cold_cache(cell)?;
    let start_at = if parts.len() > 1 {
        start_at.or_else(|| {
            let t = chrono::Utc::now() + chrono::Duration::from_std(TOGETHER_LEAD).unwrap_or_default();
            Some(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        })
    } else {
        start_at
    };
    let mut children = Vec::new();
    for (w, argv) in parts {
        let command = &argv[argv.len() - 1];
        let tags = cell.neighbour_axes(w);
        let mut axes = cell.axes.clone();
        axes.extend(tags.iter().cloned());
        let label = match tags.iter().find(|t| t.0 == "with") {
            Some((_, with)) if with == "alone" => format!("{} {w} alone", cell.label),
            Some((_, with)) => format!("{} {w} with {with}", cell.label),
            None => cell.label.clone(),
        };
        let mut c = env.child();
        c.args(command)
            .arg("--label")
            .arg(&label)
            .env("STORBENCH_PLAN", &env.plan.def.name)
            .env("STORBENCH_CELL", &cell.id)
            .env("STORBENCH_AXES", serde_json::to_string(&axes)?)
            .stdout(Stdio::null());
        for (k, v) in [
            ("STORBENCH_SHARD", &env.shard),
            ("STORBENCH_METRICS_ADDR", &env.metrics),
            ("STORBENCH_START_AT", &start_at),
        ] {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        let child = c.spawn().with_context(|| format!("running storbench {}", command.join(" ")))?;
        children.push((command, child));
    }
    // Every child is waited for before any verdict, so none is left running.
    let ended: Vec<_> = children.into_iter().map(|(argv, mut child)| (argv, child.wait())).collect();
    let mut codes = Vec::new();
    for (argv, st) in ended {
        let what = argv.join(" ");
        let st = st.with_context(|| format!("waiting for storbench {what}"))?;
        codes.push(st.code().ok_or_else(|| anyhow!("storbench {what} {}", killed(&st, argv)))?);
    }
    // An interrupt outranks a failure; otherwise the first failure's code.
    let interrupted = i32::from(EXIT_INTERRUPTED);
    Ok(if codes.contains(&interrupted) {
        interrupted
    } else {
        codes.into_iter().find(|&c| c != 0).unwrap_or(0)
    })
}

/// A cell that failed before its command could record a run still leaves a
/// trace: a `failed` run tagged with the plan and cell, saying why.
fn record_failure(g: &Global, plan: &str, cell: &Cell, why: &str, since: &str) -> Result<()> {
    let mut store = Store::open(&g.results)?;
    // The command recorded its own run when it got that far.
    let recorded = store
        .runs(&storbench_results::RunFilter { plan: Some(plan.to_string()), ..Default::default() })?
        .into_iter()
        .any(|r| r.cell.as_deref() == Some(&cell.id) && r.started_at.as_str() >= since);
    if recorded {
        return Ok(());
    }
    let kind = cell.command.first().cloned().unwrap_or_default();
    let run = store.begin_run(&NewRun {
        kind,
        label: cell.label.clone(),
        config: json!({ "command": cell.command, "axes": cell.axes, "error": why }),
        env: crate::record::base_env(json!({})),
        plan: Some(plan.to_string()),
        cell: Some(cell.id.clone()),
    })?;
    store.finish_run(run.id, Status::Failed)?;
    Ok(())
}
