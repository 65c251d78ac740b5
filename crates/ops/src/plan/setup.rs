//! A plan's environment: where its targets and databases are, the media
//! and managed instances it made (each through a child `storbench`), and
//! their release and teardown. It fills a cell's placeholders; it does not
//! run the cell's commands (see `cell.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use storbench_plan::{db_placeholder, target_placeholder, Cell, MediaDef, Plan};

use super::PlanError;

type Result<T> = std::result::Result<T, PlanError>;

/// Each workload of a cell (its own, then its neighbours'): its name and
/// its command lines (build and init commands, then the measured one),
/// placeholders filled.
pub type Parts = Vec<(String, Vec<Vec<String>>)>;

/// How the cells' commands are run.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--shard i/N`, passed to each cell's measured command.
    pub shard: Option<String>,
    /// Whether this process runs the cells' build and init commands. Shards
    /// share the database under test and none may rebuild it under the
    /// others (nor start before it is built): a sharded plan runs on a
    /// database built beforehand (docs/cluster.md).
    pub build: bool,
    /// `--metrics-addr`, passed to each cell's measured command.
    pub metrics: Option<String>,
}

/// What the plan created, for teardown, and where targets and databases are.
pub struct Setup<'a> {
    pub(super) plan: &'a Plan,
    exe: PathBuf,
    results: PathBuf,
    made_media: Vec<String>,
    made_pg: Vec<String>,
    /// The directories made for each managed instance on its targets,
    /// removed (when empty) with it.
    inst_dirs: BTreeMap<String, Vec<PathBuf>>,
    paths: BTreeMap<String, PathBuf>,
    dbs: BTreeMap<String, String>,
    pub(super) opts: Options,
}

impl<'a> Setup<'a> {
    /// The environment of `plan`'s cells: child verbs run `exe` and record
    /// into the results store at `results`. Nothing is made until a cell
    /// needs it.
    pub fn new(plan: &'a Plan, exe: PathBuf, results: PathBuf, opts: Options) -> Setup<'a> {
        Setup {
            plan,
            exe,
            results,
            made_media: Vec::new(),
            made_pg: Vec::new(),
            inst_dirs: BTreeMap::new(),
            paths: BTreeMap::new(),
            dbs: BTreeMap::new(),
            opts,
        }
    }

    /// The plan.
    pub fn plan(&self) -> &'a Plan {
        self.plan
    }

    /// A child `storbench` recording into the plan's results store, quiet,
    /// its stdout discarded, with none of the plan's tags inherited.
    pub(super) fn child(&self) -> Command {
        let mut c = Command::new(&self.exe);
        // What a child prints on stdout (a medium made, a server up) is not
        // the plan's result; its errors still reach stderr.
        c.arg("--results").arg(&self.results).arg("--quiet").stdout(Stdio::null());
        for k in [
            "STORBENCH_PLAN",
            "STORBENCH_CELL",
            "STORBENCH_CELL_DIGEST",
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
    pub(super) fn cold_cache(&self, cell: &Cell) -> Result<()> {
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
            .map_err(|e| PlanError::io("running storbench media cache reset", e))?;
        if !st.success() {
            return Err(PlanError::Failed(format!(
                "emptying the cache of medium '{name}' (target '{target}') failed"
            )));
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
                .map_err(|e| PlanError::io(format!("creating target '{name}' at {}", p.display()), e))?;
            p
        } else {
            let m = def.media.expect("validated: path or media");
            self.create_medium(name, &m)?
        };
        self.paths.insert(name.to_string(), path.clone());
        Ok(path)
    }

    /// `storbench media create` for target `name`; its mount point.
    fn create_medium(&mut self, name: &str, m: &MediaDef) -> Result<PathBuf> {
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
        let st = c.status().map_err(|e| PlanError::io("running storbench media create", e))?;
        if !st.success() {
            return Err(PlanError::Failed(format!("creating medium '{mname}' for target '{name}' failed")));
        }
        self.made_media.push(mname.clone());
        media_mount(&mname)
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

    /// The directory `sub` of instance `inst` on `target`: the instance
    /// gets its own directory on each of its targets (`pg up` makes the
    /// data, WAL and temp directories in it, and refuses a place whose
    /// parent does not exist).
    fn place(&mut self, inst: &str, target: &str, sub: &str) -> Result<PathBuf> {
        let dir = self.target_path(target)?.join(inst);
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir)
                .map_err(|e| PlanError::Failed(format!("creating {}: {e}", dir.display())))?;
            self.inst_dirs.entry(inst.to_string()).or_default().push(dir.clone());
        }
        Ok(dir.join(sub))
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
        let data_path = self.place(&inst, &data, "data")?;
        let wal_path = wal.as_deref().map(|w| self.place(&inst, w, "wal")).transpose()?;
        let temp_path = temp.as_deref().map(|t| self.place(&inst, t, "temp")).transpose()?;
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
                self.place(&inst, &pair[1], &pair[0][10..])?.display().to_string()
            } else {
                pair[1].clone()
            };
            c.args([&pair[0], &v]);
        }
        let st = c.status().map_err(|e| PlanError::io("running storbench pg up", e))?;
        if !st.success() {
            return Err(PlanError::Failed(format!("starting managed PostgreSQL '{inst}' failed")));
        }
        self.made_pg.push(inst.clone());
        let url = format!("managed:{inst}");
        self.dbs.insert(inst, url.clone());
        Ok(url)
    }

    /// Stops managed instances no later cell needs (frees memory and the
    /// medium for the next cells).
    pub fn release(&mut self, later: &[Cell]) {
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
    pub fn prepare(&mut self, cell: &Cell) -> Result<Parts> {
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
    pub fn teardown(&mut self) -> Result<()> {
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
            Err(PlanError::Failed(format!("could not undo: {}", errors.join(", "))))
        }
    }
}

impl Drop for Setup<'_> {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The mount point of a medium the plan created.
pub fn media_mount(name: &str) -> Result<PathBuf> {
    let m = storbench_media::get(name)
        .map_err(|e| PlanError::Failed(e.to_string()))?
        .ok_or_else(|| PlanError::Failed(format!("medium '{name}' was not created")))?;
    m.mount_point
        .ok_or_else(|| PlanError::Failed(format!("medium '{name}' has no filesystem (fs = \"none\")")))
}
