//! Plan files: a study as a matrix of runs, in TOML.
//!
//! A plan names its **targets** (existing directories, or media the plan
//! creates), its **databases** (a URL, or a managed PostgreSQL placed on
//! targets), its **workloads** (`io`, `tpcb`, `tpcc` with the flags of the
//! matching `storbench` command) and the **axes** to vary. Every string
//! value may use `{target}` (the path of the cell's target), `{db}` (the URL
//! of the cell's database) and `{AXIS}` for any other axis. The matrix is
//! axes × workloads × repeats; each cell becomes one `storbench` command
//! line. This crate parses, validates and expands, and [`exec`] runs the
//! cells through a runner the binary hands in (which does the work).
//! Errors name the file, the line and the key.

#![deny(missing_docs)]

pub mod exec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use storbench_metrics::units::{parse_duration, parse_list};
use toml::Spanned;

/// A plan error: the file, the line (when known) and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {msg}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct PlanError {
    /// The plan file.
    pub file: String,
    /// 1-based line of the offending key, when known.
    pub line: Option<usize>,
    /// What is wrong, and a hint.
    pub msg: String,
}

/// A storage target.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDef {
    /// An existing (or to-be-created) directory.
    pub path: Option<String>,
    /// A medium the plan creates (and destroys when it ends).
    pub media: Option<MediaDef>,
}

/// A medium to create: the flags of `storbench media create`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaDef {
    /// Size, e.g. `4G`.
    pub size: String,
    /// Filesystem: ext4, xfs, btrfs or none.
    #[serde(default)]
    pub fs: Option<String>,
    /// Filesystem block size (allocation unit).
    #[serde(default)]
    pub block_size: Option<String>,
    /// Emulated class: hdd, sata-ssd, nvme, gbe-nas, fc-san, custom:….
    #[serde(default)]
    pub emulate: Option<String>,
    /// Device model (per I/O): a built-in name or a TOML file; exclusive with `emulate`.
    #[serde(default)]
    pub model: Option<String>,
    /// Model parameter overrides, key to value (`--set KEY=VALUE`).
    #[serde(default)]
    pub set: std::collections::BTreeMap<String, String>,
    /// A cache tier of this size in front of the model (`--cache`).
    #[serde(default)]
    pub cache: Option<String>,
    /// The cache device's model (`--cache-model`, default nvme).
    #[serde(default)]
    pub cache_model: Option<String>,
    /// Replacement policy (`--cache-policy`, default s3fifo).
    #[serde(default)]
    pub cache_policy: Option<String>,
    /// `back` or `through` (`--cache-write`, default back).
    #[serde(default)]
    pub cache_write: Option<String>,
    /// Cache line (`--cache-line`, default 64k).
    #[serde(default)]
    pub cache_line: Option<String>,
    /// `none` or `sequential` (`--cache-warm`, default none).
    #[serde(default)]
    pub cache_warm: Option<String>,
    /// Empty the cache tier after each cell's builds, before its measured
    /// workloads (`media cache reset`): every cell starts from a cold cache.
    #[serde(default)]
    pub cold: bool,
    /// Write the modelled medium's I/O trace here (`--trace`; relative to
    /// the directory the plan runs in; `{plan}` is the plan's name).
    #[serde(default)]
    pub trace: Option<String>,
    /// An array of modelled members (`--array`: raid0, raid1, raid10,
    /// raid5, raid6, raid50, raid60); exclusive with `model` and `emulate`.
    #[serde(default)]
    pub array: Option<String>,
    /// Members (`--disks`).
    #[serde(default)]
    pub disks: Option<usize>,
    /// Stripe unit (`--chunk`, default 64k).
    #[serde(default)]
    pub chunk: Option<String>,
    /// Parity groups of raid50/raid60 (`--groups`, default 2).
    #[serde(default)]
    pub groups: Option<usize>,
    /// The members' model (`--member`): a built-in or a TOML file (relative
    /// to the directory the plan runs in).
    #[serde(default)]
    pub member: Option<String>,
    /// Member parameter overrides (`--member-set KEY=VALUE`).
    #[serde(default)]
    pub member_set: std::collections::BTreeMap<String, String>,
    /// A link before each member (`--member-link up=…,down=…,bw=…`).
    #[serde(default)]
    pub member_link: Option<String>,
    /// A controller write cache (`--controller-cache SIZE`).
    #[serde(default)]
    pub controller_cache: Option<String>,
    /// Its battery, on or off (`--cache-battery`).
    #[serde(default)]
    pub cache_battery: Option<String>,
    /// Its destage policy, idle or full (`--controller-destage`).
    #[serde(default)]
    pub controller_destage: Option<String>,
}

impl MediaDef {
    /// The `media create` flags of the cache tier and the trace, in order.
    pub fn tier_flags(&self, plan: &str) -> Vec<String> {
        let mut v = Vec::new();
        for (flag, val) in [
            ("--cache", &self.cache),
            ("--cache-model", &self.cache_model),
            ("--cache-policy", &self.cache_policy),
            ("--cache-write", &self.cache_write),
            ("--cache-line", &self.cache_line),
            ("--cache-warm", &self.cache_warm),
        ] {
            if let Some(x) = val {
                v.push(flag.to_string());
                v.push(x.clone());
            }
        }
        if let Some(t) = &self.trace {
            v.push("--trace".into());
            v.push(t.replace("{plan}", plan));
        }
        v
    }

    /// The `media create` flags of an array, in order (none without `array`).
    pub fn array_flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        let Some(layout) = &self.array else { return v };
        v.extend(["--array".to_string(), layout.clone()]);
        let disks = self.disks.map(|d| d.to_string());
        let groups = self.groups.map(|g| g.to_string());
        for (flag, val) in [
            ("--disks", &disks),
            ("--chunk", &self.chunk),
            ("--groups", &groups),
            ("--member", &self.member),
            ("--member-link", &self.member_link),
            ("--controller-cache", &self.controller_cache),
            ("--cache-battery", &self.cache_battery),
            ("--controller-destage", &self.controller_destage),
        ] {
            if let Some(x) = val {
                v.extend([flag.to_string(), x.clone()]);
            }
        }
        for (k, x) in &self.member_set {
            v.extend(["--member-set".to_string(), format!("{k}={x}")]);
        }
        v
    }

    /// Whether any cache-tier key or a trace is set (they need `model`).
    pub fn wants_model(&self) -> bool {
        self.cache.is_some() || self.has_tier_keys() || self.trace.is_some()
    }

    /// Whether a key that only a cache tier takes is set.
    pub fn has_tier_keys(&self) -> bool {
        self.cold
            || [&self.cache_model, &self.cache_policy, &self.cache_write, &self.cache_line, &self.cache_warm]
                .iter()
                .any(|k| k.is_some())
    }
}

/// A database.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbDef {
    /// A URL (may use `{target}`).
    pub url: Option<String>,
    /// A managed PostgreSQL instance the plan starts.
    pub managed: Option<ManagedDef>,
}

/// A managed PostgreSQL: where its data, WAL and temp files live.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagedDef {
    /// Target name (or `{target}`) for the data directory.
    pub data: Spanned<String>,
    /// Target name (or `{target}`) for the WAL.
    #[serde(default)]
    pub wal: Option<Spanned<String>>,
    /// Target name (or `{target}`) for temp files.
    #[serde(default)]
    pub temp: Option<Spanned<String>>,
    /// Server settings, passed as `pg up -c KEY=VALUE` (`set` in io means a
    /// profile set, so the managed server's key is `conf`).
    #[serde(default)]
    pub conf: BTreeMap<String, toml::Value>,
    /// The server's memory group, page cache included (`pg up
    /// --memory-limit`): a database larger than it is read from the storage.
    #[serde(default)]
    pub memory_limit: Option<String>,
    /// Streaming standbys (`pg up --standby N`).
    #[serde(default)]
    pub standbys: Option<u32>,
    /// `pg up --sync` (may use `{axis}`).
    #[serde(default)]
    pub sync: Option<Spanned<toml::Value>>,
    /// `pg up --sync-names` (may use `{axis}`).
    #[serde(default)]
    pub sync_names: Option<Spanned<toml::Value>>,
    /// `pg up --link` (may use `{axis}`), e.g. `"rtt={rtt}"`.
    #[serde(default)]
    pub link: Option<Spanned<toml::Value>>,
    /// The standbys' data target: a target name, or `{axis}` whose values
    /// are target names.
    #[serde(default)]
    pub standby_data: Option<Spanned<toml::Value>>,
    /// The standbys' WAL target (as `standby_data`).
    #[serde(default)]
    pub standby_wal: Option<Spanned<toml::Value>>,
}

impl ManagedDef {
    /// The `pg up` replication flags for a cell's axis values, placeholders
    /// filled: `[--standby, N, --sync, on, --link, rtt=1ms, ...]`
    /// (`--standby-data`/`--standby-wal` carry target names).
    pub fn replication_flags(&self, axes: &BTreeMap<String, String>) -> Vec<String> {
        let fill = |v: &Option<Spanned<toml::Value>>| {
            v.as_ref().map(|v| {
                let s = v.get_ref().as_str().map(str::to_string).unwrap_or_else(|| v.get_ref().to_string());
                axes.iter().fold(s, |acc, (k, x)| acc.replace(&format!("{{{k}}}"), x))
            })
        };
        let mut out = Vec::new();
        if let Some(n) = self.standbys.filter(|n| *n > 0) {
            out.extend(["--standby".to_string(), n.to_string()]);
        }
        for (flag, v) in [
            ("--sync", &self.sync),
            ("--sync-names", &self.sync_names),
            ("--link", &self.link),
            ("--standby-data", &self.standby_data),
            ("--standby-wal", &self.standby_wal),
        ] {
            if let Some(v) = fill(v) {
                out.extend([flag.to_string(), v]);
            }
        }
        out
    }
}

/// A workload entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDef {
    /// `io`, `tpcb`, `tpcc` or `tpch`.
    pub kind: Spanned<String>,
    /// Name used in cell ids (default: the kind).
    #[serde(default)]
    pub name: Option<String>,
    /// Flags of `tpcb init` / `tpcc build` run before each cell.
    #[serde(default)]
    pub init: BTreeMap<String, Spanned<toml::Value>>,
    /// Flags of `io` / `tpcb run` / `tpcc run`.
    #[serde(default)]
    pub run: BTreeMap<String, Spanned<toml::Value>>,
    /// Workloads with the same `together` group run in one cell, side by
    /// side, their first steps started at one instant (a noisy neighbour).
    #[serde(default)]
    pub together: Option<Spanned<String>>,
    /// Inside a `together` group: start this workload again every this long
    /// (`"100s"`), measured from the group's common start, `times` times in
    /// all, while the group's other workloads run (S4's backup every 100 s).
    #[serde(default)]
    pub every: Option<Spanned<String>>,
    /// How many times in all a workload with `every` runs.
    #[serde(default)]
    pub times: Option<Spanned<i64>>,
    /// Run flags of this workload's quick form, over `[quick] set` (e.g.
    /// fewer TPC-B clients, to stay within the quick form's scale).
    #[serde(default)]
    pub quick: BTreeMap<String, Spanned<toml::Value>>,
}

/// The quick form of a plan (`storbench run --quick`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickDef {
    /// Repeats in the quick form.
    #[serde(default)]
    pub repeats: Option<u32>,
    /// Axes replaced in the quick form.
    #[serde(default)]
    pub axes: BTreeMap<String, Spanned<Vec<String>>>,
    /// Run flags set in every workload (replacing its own).
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
    /// Init flags replaced in the workloads that have them (`scale`,
    /// `warehouses`).
    #[serde(default)]
    pub init: BTreeMap<String, toml::Value>,
}

/// A plan file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanDef {
    /// The plan's name (tags its runs).
    pub name: String,
    /// What the plan reproduces.
    #[serde(default)]
    pub description: String,
    /// Repeats of every cell.
    #[serde(default = "one")]
    pub repeats: u32,
    /// Destroy created media and managed databases when the plan ends.
    #[serde(default = "yes")]
    pub cleanup: bool,
    /// Also run each workload of a `together` group alone, in its own cell
    /// before the group's, so the report can say what the neighbours cost.
    #[serde(default)]
    pub alone: bool,
    /// Named targets.
    #[serde(default, rename = "target")]
    pub targets: BTreeMap<String, Spanned<TargetDef>>,
    /// Named databases.
    #[serde(default, rename = "db")]
    pub dbs: BTreeMap<String, Spanned<DbDef>>,
    /// Axes: name → values.
    #[serde(default)]
    pub axes: BTreeMap<String, Spanned<Vec<String>>>,
    /// Workloads, run in order within each combination of axes.
    #[serde(rename = "workload")]
    pub workloads: Vec<WorkloadDef>,
    /// The quick form.
    #[serde(default)]
    pub quick: Option<QuickDef>,
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}

/// One cell: a command line to run and its identity.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Stable id within the plan, e.g. `target=hdd/tpcb#r1`.
    pub id: String,
    /// The axis values (the run's label), e.g. `target=hdd`.
    pub label: String,
    /// Axis values by axis name.
    pub axes: BTreeMap<String, String>,
    /// The workload's name.
    pub workload: String,
    /// The repeat, from 1.
    pub repeat: u32,
    /// Commands run before the measured one (`tpcb init ...`), as argv.
    pub before: Vec<Vec<String>>,
    /// The measured command, as argv (without the program name).
    pub command: Vec<String>,
    /// Targets this cell uses (names).
    pub targets: Vec<String>,
    /// Database this cell uses (name), if any.
    pub db: Option<String>,
    /// Estimated duration.
    pub estimate: Duration,
    /// The workloads that run beside this one, started at the same instant
    /// (a `together` group); empty for a workload that runs on its own.
    pub neighbours: Vec<Part>,
    /// The `together` group this cell runs (all of it, or, with `alone`,
    /// one member on its own: then `neighbours` is empty).
    pub together: Option<String>,
    /// The workloads of a `together` cell that run again and again (`every`,
    /// `times`), by name; empty elsewhere (alone, a workload runs once).
    pub cycles: BTreeMap<String, Cycles>,
    /// A fingerprint of what the cell runs: its commands and the plan's
    /// definitions of its database and of the targets it or its database
    /// names, as written (layout and comments aside). Its runs record it, so
    /// a resumed plan keeps a completed cell only while this is unchanged.
    pub digest: String,
}

/// A workload repeated inside a `together` cell: cycle k (from 1) begins
/// at the group's start plus (k-1) × `every`, or as soon as cycle k-1 has
/// ended when it ran longer; no cycle begins once the group's other
/// workloads have all ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cycles {
    /// From one cycle's start to the next's.
    pub every: Duration,
    /// Cycles in all.
    pub times: u32,
}

/// The placeholder a repeated workload's flags may hold: the cycle's
/// number, from 1 (1 when the workload runs once), so each cycle's backup
/// has a path of its own.
pub const CYCLE_PLACEHOLDER: &str = "{cycle}";

/// A workload of a cell as [`Cell::parts`] gives it: its name, the
/// commands run before it, and its measured command.
pub type PartRef<'a> = (&'a str, &'a [Vec<String>], &'a [String]);

/// A workload's commands in one combination: name, before, measured
/// command, estimate.
type Commands = (String, Vec<Vec<String>>, Vec<String>, Duration);

/// One workload of a `together` cell beside the cell's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// The workload's name.
    pub workload: String,
    /// Its commands run before the measured ones.
    pub before: Vec<Vec<String>>,
    /// Its measured command.
    pub command: Vec<String>,
}

impl Cell {
    /// Every workload of the cell, its own first: (name, before, command).
    pub fn parts(&self) -> Vec<PartRef<'_>> {
        let mut v = vec![(self.workload.as_str(), self.before.as_slice(), self.command.as_slice())];
        v.extend(
            self.neighbours.iter().map(|p| (p.workload.as_str(), p.before.as_slice(), p.command.as_slice())),
        );
        v
    }

    /// The tags a workload's run carries beside the cell's axes: which
    /// workload it is and what ran beside it (`alone`, or the others'
    /// names joined by `+`); none for a cell outside a `together` group.
    pub fn neighbour_axes(&self, workload: &str) -> Vec<(String, String)> {
        if self.together.is_none() {
            return Vec::new();
        }
        let others: Vec<&str> = self.parts().into_iter().map(|p| p.0).filter(|w| *w != workload).collect();
        let with = if others.is_empty() { "alone".to_string() } else { others.join("+") };
        vec![("workload".into(), workload.to_string()), ("with".into(), with)]
    }
}

/// A validated plan, expanded into cells.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The file it came from.
    pub file: PathBuf,
    /// The definition.
    pub def: PlanDef,
    /// The cells in the order they run.
    pub cells: Vec<Cell>,
}

impl Plan {
    /// What in the plan would measure something other than its storage,
    /// each in one line with the reason and the remedy (`storbench run`
    /// prints them before it starts). Today: a TPC-B workload whose
    /// clients outnumber its scale's branches, where the clients queue on
    /// the branch rows' locks and the step measures lock waits (pgbench
    /// warns of the same).
    ///
    /// And a cache study whose database is not held below the host's
    /// memory: with a medium's cache tier (`cache = …`) and a database
    /// workload without `memory_limit` (its own, or its managed server's),
    /// the host's page cache keeps the database once read, the tier sees
    /// few reads, and the steps measure the host's memory, not the cache.
    pub fn warnings(&self) -> Vec<String> {
        warnings(&self.def)
    }
}

/// See [`Plan::warnings`].
pub fn warnings(def: &PlanDef) -> Vec<String> {
    // The largest of a value as the command reads it: a number, or a list
    // (`1,10,100`, `1..8`, `fib:21`).
    let int = |v: &toml::Value| match v {
        toml::Value::Integer(i) => Some(*i),
        toml::Value::String(s) => parse_list(s).ok()?.into_iter().max().map(i64::from),
        _ => None,
    };
    let mut out = Vec::new();
    for w in def.workloads.iter().filter(|w| w.kind.get_ref() == "tpcb") {
        let name = w.name.clone().unwrap_or_else(|| "tpcb".into());
        let scale = w.init.get("scale").and_then(|v| int(v.get_ref())).unwrap_or(1);
        let clients = w.run.get("clients").and_then(|v| int(v.get_ref())).unwrap_or(1);
        if clients > scale {
            out.push(format!(
                "workload '{name}': {clients} clients on scale {scale}: TPC-B's clients outnumber its {scale} branch row(s) and queue on their locks, so the steps above {scale} clients measure lock waits, not storage (pgbench warns the same); make init's scale at least {clients}"
            ));
        }
    }
    let cached: Vec<&str> = def
        .targets
        .iter()
        .filter(|(_, t)| t.get_ref().media.as_ref().is_some_and(|m| m.cache.is_some()))
        .map(|(n, _)| n.as_str())
        .collect();
    let server_limited =
        def.dbs.values().any(|d| d.get_ref().managed.as_ref().is_some_and(|m| m.memory_limit.is_some()));
    if !cached.is_empty() && !server_limited {
        for w in
            def.workloads.iter().filter(|w| ["tpcc", "tpcb", "tpch"].contains(&w.kind.get_ref().as_str()))
        {
            if !w.run.contains_key("memory_limit") {
                let name = w.name.clone().unwrap_or_else(|| w.kind.get_ref().clone());
                out.push(format!(
                    "workload '{name}': no memory_limit on a cache study (target(s) {} have a cache tier): the host's page cache keeps the database once read, so the tier sees few reads and the steps measure the host's memory, not the cache; give run.memory_limit (or the managed server's) below the database's size",
                    cached.join(", ")
                ));
            }
        }
    }
    out
}

struct Src<'a> {
    file: String,
    text: &'a str,
}

impl Src<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].bytes().filter(|&b| b == b'\n').count() + 1
    }

    fn err_at<T>(
        &self,
        span: Option<std::ops::Range<usize>>,
        msg: impl Into<String>,
    ) -> Result<T, PlanError> {
        Err(PlanError { file: self.file.clone(), line: span.map(|s| self.line_of(s.start)), msg: msg.into() })
    }

    /// The line of `key = ` inside `[section]` (best effort, for keys that
    /// carry no span).
    fn find_key(&self, section: &str, key: &str) -> Option<usize> {
        let mut in_section = section.is_empty();
        for (i, l) in self.text.lines().enumerate() {
            let t = l.trim();
            if t.starts_with('[') {
                in_section = t.trim_matches(|c| c == '[' || c == ']') == section;
                continue;
            }
            if in_section && t.split('=').next().map(str::trim) == Some(key) {
                return Some(i + 1);
            }
        }
        None
    }
}

/// The workload kinds a plan can run, and the flags each takes. Checked
/// here so a plan fails before anything runs; the command validates values.
pub const KINDS: &[&str] = &["io", "tpcb", "tpcc", "tpch", "backup"];

/// Reads, validates and expands a plan. `quick` selects its quick form.
pub fn load(path: &Path, quick: bool) -> Result<Plan, PlanError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| PlanError {
        file: file.clone(),
        line: None,
        msg: format!("cannot read the plan: {e}"),
    })?;
    parse(&file, &text, quick).map(|(def, cells)| Plan { file: path.to_path_buf(), def, cells })
}

/// Parses and expands plan text (see [`load`]).
pub fn parse(file: &str, text: &str, quick: bool) -> Result<(PlanDef, Vec<Cell>), PlanError> {
    let src = Src { file: file.to_string(), text };
    let mut def: PlanDef = toml::from_str(text).map_err(|e| PlanError {
        file: file.to_string(),
        line: e.span().map(|s| src.line_of(s.start)),
        msg: match e.span().and_then(|s| key_before(text, s.start)) {
            Some(key) => format!("{key}: {}", e.message().trim()),
            None => e.message().trim().to_string(),
        },
    })?;
    if def.name.trim().is_empty() || !def.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return src.err_at(
            src.find_key("", "name").map(|l| line_span(text, l)),
            format!("name '{}': use letters, digits, '-', '_' or '.'", def.name),
        );
    }
    if quick {
        apply_quick(&src, &mut def)?;
    }
    if def.repeats == 0 {
        return src.err_at(
            src.find_key("", "repeats").map(|l| line_span(text, l)),
            "repeats 0: must be at least 1",
        );
    }
    if def.workloads.is_empty() {
        return src.err_at(
            None,
            "no [[workload]]: a plan runs at least one (kind = \"io\", \"tpcb\", \"tpcc\" or \"tpch\")",
        );
    }
    check_targets_and_dbs(&src, &def)?;
    check_axes_and_workloads(&src, &def)?;
    let mut cells = expand(&def);
    // The text parsed as a plan above, so it parses as a table.
    let raw: toml::Table = toml::from_str(text).unwrap_or_default();
    for c in &mut cells {
        c.digest = cell_digest(&raw, c);
    }
    Ok((def, cells))
}

/// [`Cell::digest`]: FNV-1a over the cell's commands, its database's
/// definition with the cell's axis values put in (`data = "{target}"`), and
/// the definitions of the targets the commands or that definition name. A
/// change detector, not a seal: a target added to the plan, or a comment,
/// leaves the other cells' digests as they were.
fn cell_digest(raw: &toml::Table, cell: &Cell) -> String {
    let section = |kind: &str| raw.get(kind).and_then(toml::Value::as_table);
    let written = cell.db.as_ref().and_then(|d| section("db")?.get(d)).map(toml::Value::to_string);
    let db = written.clone().map(|s| cell.axes.iter().fold(s, |s, (k, v)| s.replace(&format!("{{{k}}}"), v)));
    // A target the database names: by an axis placeholder (`{target}` in
    // `data` or in a URL) or by name (`wal = "ssd"`).
    let named = |name: &str| {
        let by_axis = cell
            .axes
            .iter()
            .any(|(k, v)| v == name && written.as_ref().is_some_and(|w| w.contains(&format!("{{{k}}}"))));
        by_axis || db.as_ref().is_some_and(|d| d.contains(&format!("\"{name}\"")))
    };
    let mut text = String::new();
    for (name, def) in section("target").into_iter().flatten() {
        if cell.targets.contains(name) || named(name) {
            text.push_str(&format!("target {name} = {def}\n"));
        }
    }
    if let Some(d) = db {
        text.push_str(&format!("db = {d}\n"));
    }
    for (w, before, command) in cell.parts() {
        text.push_str(&format!("{w}: {before:?} {command:?}\n"));
    }
    let h = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

/// Puts a plan's quick form (its [quick] table) over the plan.
fn apply_quick(src: &Src<'_>, def: &mut PlanDef) -> Result<(), PlanError> {
    let Some(q) = def.quick.clone() else {
        return src.err_at(None, "this plan has no [quick] form");
    };
    if let Some(r) = q.repeats {
        def.repeats = r;
    }
    for (k, v) in q.axes {
        def.axes.insert(k, v);
    }
    for w in &mut def.workloads {
        for (k, v) in &q.init {
            if let Some(old) = w.init.get_mut(k) {
                *old = Spanned::new(old.span(), v.clone());
            }
        }
        for (k, v) in &q.set {
            // `tpch run` and `backup` have no ramp-up or duration (they
            // run to their end): a quick form only shortens the flags
            // such a workload names itself.
            if matches!(w.kind.get_ref().as_str(), "tpch" | "backup") && !w.run.contains_key(k) {
                continue;
            }
            let span = w.run.get(k).map(|o| o.span()).unwrap_or_else(|| w.kind.span());
            w.run.insert(k.clone(), Spanned::new(span, v.clone()));
        }
        for (k, v) in std::mem::take(&mut w.quick) {
            w.run.insert(k, v);
        }
    }
    Ok(())
}

/// Each target is a path or a medium; each db a URL or a managed instance
/// placed on targets of the plan, its replication keys on standbys.
fn check_targets_and_dbs(src: &Src<'_>, def: &PlanDef) -> Result<(), PlanError> {
    for (name, t) in &def.targets {
        let d = t.get_ref();
        if d.path.is_some() == d.media.is_some() {
            return src.err_at(
                Some(t.span()),
                format!(
                    "target '{name}': give exactly one of path = \"DIR\" or media = {{ size = \"4G\", ... }}"
                ),
            );
        }
    }
    for (name, d) in &def.dbs {
        let dd = d.get_ref();
        if dd.url.is_some() == dd.managed.is_some() {
            return src.err_at(
                Some(d.span()),
                format!(
                    "db '{name}': give exactly one of url = \"...\" or managed = {{ data = \"TARGET\" }}"
                ),
            );
        }
        if let Some(m) = &dd.managed {
            for place in [Some(&m.data), m.wal.as_ref(), m.temp.as_ref()].into_iter().flatten() {
                let v = place.get_ref();
                if v != "{target}" && !def.targets.contains_key(v) {
                    return src.err_at(
                        Some(place.span()),
                        format!("db '{name}': target '{v}' is not defined in this plan (define [target.{v}], or use \"{{target}}\")"),
                    );
                }
                if v == "{target}" && !def.axes.contains_key("target") {
                    return src.err_at(
                        Some(place.span()),
                        format!("db '{name}': \"{{target}}\" needs a 'target' axis"),
                    );
                }
            }
        }
    }
    for (name, d) in &def.dbs {
        let Some(m) = &d.get_ref().managed else { continue };
        for (key, v) in [
            ("sync", &m.sync),
            ("sync_names", &m.sync_names),
            ("link", &m.link),
            ("standby_data", &m.standby_data),
            ("standby_wal", &m.standby_wal),
        ] {
            let Some(v) = v else { continue };
            if m.standbys.unwrap_or(0) == 0 && key != "sync" {
                return src.err_at(Some(v.span()), format!("db '{name}': {key} needs standbys = N"));
            }
            check_value(src, def, key, v)?;
            // A placement without placeholders names a target of the plan;
            // one with them is checked when the cell fills it.
            if let (true, Some(t)) = (key.starts_with("standby_"), v.get_ref().as_str()) {
                if placeholders(t).is_empty() && !def.targets.contains_key(t) {
                    return src.err_at(
                        Some(v.span()),
                        format!("db '{name}': {key} = \"{t}\" is not a target of this plan"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Axes name defined values; workloads are known kinds, grouped sensibly,
/// with flag values that hold.
fn check_axes_and_workloads(src: &Src<'_>, def: &PlanDef) -> Result<(), PlanError> {
    for (axis, values) in &def.axes {
        if values.get_ref().is_empty() {
            return src.err_at(Some(values.span()), format!("axis '{axis}' has no values"));
        }
        let known = match axis.as_str() {
            "target" => Some(&def.targets.keys().cloned().collect::<Vec<_>>()),
            "db" => Some(&def.dbs.keys().cloned().collect::<Vec<_>>()),
            _ => None,
        };
        if let Some(known) = known {
            for v in values.get_ref() {
                if !known.contains(v) {
                    return src.err_at(
                        Some(values.span()),
                        format!(
                            "axis '{axis}': '{v}' is not defined in this plan (known: {})",
                            list_or_none(known)
                        ),
                    );
                }
            }
        }
    }
    for w in &def.workloads {
        if !KINDS.contains(&w.kind.get_ref().as_str()) {
            return src.err_at(
                Some(w.kind.span()),
                format!("unknown workload kind '{}': use {}", w.kind.get_ref(), KINDS.join(", ")),
            );
        }
        if matches!(w.kind.get_ref().as_str(), "io" | "backup") && !w.init.is_empty() {
            return src
                .err_at(Some(w.kind.span()), format!("an {} workload has no init flags", w.kind.get_ref()));
        }
        if let Some(g) = &w.together {
            let members = def
                .workloads
                .iter()
                .filter(|x| x.together.as_ref().map(|t| t.get_ref()) == Some(g.get_ref()));
            let names: Vec<String> =
                members.map(|x| x.name.clone().unwrap_or_else(|| x.kind.get_ref().clone())).collect();
            if names.len() < 2 {
                return src.err_at(
                    Some(g.span()),
                    format!("together = \"{}\": a group needs at least two workloads", g.get_ref()),
                );
            }
            if (1..names.len()).any(|i| names[..i].contains(&names[i])) {
                return src.err_at(
                    Some(g.span()),
                    format!(
                        "together = \"{}\": two workloads named alike ({}); give each a name = \"...\"",
                        g.get_ref(),
                        names.join(", ")
                    ),
                );
            }
        }
        check_cycles(src, def, w)?;
        for (k, v) in w.run.iter().chain(w.init.iter()) {
            check_value(src, def, k, v)?;
        }
    }
    Ok(())
}

/// `every` and `times`: both or neither, only inside a `together` group
/// beside a workload that runs once, a positive duration and count; a
/// repeated backup's `to` holds `{cycle}`; `{cycle}` only where it is filled.
fn check_cycles(src: &Src<'_>, def: &PlanDef, w: &WorkloadDef) -> Result<(), PlanError> {
    let name = w.name.clone().unwrap_or_else(|| w.kind.get_ref().clone());
    fn uses_cycle(m: &BTreeMap<String, Spanned<toml::Value>>) -> Option<(&String, &Spanned<toml::Value>)> {
        m.iter().find(|(_, v)| v.get_ref().to_string().contains(CYCLE_PLACEHOLDER))
    }
    let (every, times) = match (&w.every, &w.times) {
        (None, None) => {
            if let Some((k, v)) = uses_cycle(&w.run).or_else(|| uses_cycle(&w.init)) {
                return src.err_at(
                    Some(v.span()),
                    format!("workload '{name}': {k} uses {{cycle}}, which only a workload with every and times has"),
                );
            }
            return Ok(());
        }
        (Some(e), None) => {
            return src.err_at(
                Some(e.span()),
                format!("workload '{name}': every needs times = N (how many cycles in all)"),
            )
        }
        (None, Some(t)) => {
            return src.err_at(
                Some(t.span()),
                format!("workload '{name}': times needs every = \"DURATION\" (e.g. \"100s\")"),
            )
        }
        (Some(e), Some(t)) => (e, t),
    };
    let Some(group) = &w.together else {
        return src.err_at(
            Some(every.span()),
            format!("workload '{name}': every and times repeat a workload beside others; put it in a together group"),
        );
    };
    match parse_duration(every.get_ref()) {
        Ok(d) if d > Duration::ZERO => {}
        Ok(_) => {
            return src.err_at(
                Some(every.span()),
                format!("every = \"{}\": must be longer than 0 s, e.g. \"100s\"", every.get_ref()),
            )
        }
        Err(e) => return src.err_at(Some(every.span()), format!("every = \"{}\": {e}", every.get_ref())),
    }
    if !(1..=100_000).contains(times.get_ref()) {
        return src.err_at(
            Some(times.span()),
            format!("times = {}: the number of cycles, from 1 to 100000", times.get_ref()),
        );
    }
    let once = def
        .workloads
        .iter()
        .filter(|x| x.together.as_ref().map(|t| t.get_ref()) == Some(group.get_ref()))
        .any(|x| x.every.is_none());
    if !once {
        return src.err_at(
            Some(every.span()),
            format!(
                "together = \"{}\": every workload repeats; one must run once (the cycles run while it does)",
                group.get_ref()
            ),
        );
    }
    if w.kind.get_ref() == "backup" {
        let to = w.run.get("to").map(|v| v.get_ref().to_string()).unwrap_or_default();
        if !to.contains(CYCLE_PLACEHOLDER) {
            return src.err_at(
                Some(every.span()),
                format!("workload '{name}': a repeated backup needs a path of its own per cycle: put {{cycle}} in to (e.g. to = \"{{target}}/bk-{{cell}}-{{cycle}}\")"),
            );
        }
    }
    Ok(())
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn line_span(text: &str, line: usize) -> std::ops::Range<usize> {
    let start: usize = text.lines().take(line - 1).map(|l| l.len() + 1).sum();
    start..start
}

/// The key whose value starts at `offset`: the name before the last `=`
/// on that line before it (`repeats = "three"`, `run = { duration = x }`),
/// so a type error names the key, not only the line.
fn key_before(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset)?;
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let lhs = line[..line.rfind('=')?].trim_end();
    let start =
        lhs.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).map_or(0, |i| i + 1);
    Some(&lhs[start..]).filter(|k| !k.is_empty()).map(str::to_string)
}

/// Flags whose value is a duration. In a plan it is a string with its unit:
/// a bare number (`duration = 5`) is refused, not read as seconds, since
/// TOML gives no unit to read and 5 may have meant minutes.
/// Every flag a plan may give whose value is a duration (and their
/// aliases): a bare number there is refused, never read as seconds. Keep in
/// step with the commands' duration flags (io, tpcc/tpcb/tpch, durability,
/// pg, media calibrate/validate). `latency_limit` is not here: a bare number
/// is milliseconds there, as in pgbench.
const DURATION_KEYS: &[&str] = &[
    "duration",
    "runtime",
    "rampup",
    "ramp_time",
    "reconnect_for",
    "timeout",
    "idle",
    "burst",
    "progress",
    "cut_after",
    "kill_after",
    "wait",
    "cell_time",
    "db_time",
    "sensitivity_duration",
];

/// A duration flag's value: a string that reads as a duration (or holds a
/// placeholder, checked once the cell's axes fill it).
fn check_duration(src: &Src<'_>, key: &str, v: &Spanned<toml::Value>) -> Result<(), PlanError> {
    match v.get_ref() {
        toml::Value::String(s) if !placeholders(s).is_empty() => Ok(()),
        toml::Value::String(s) => match parse_duration(s) {
            Ok(_) => Ok(()),
            Err(e) => src.err_at(Some(v.span()), format!("{key} = \"{s}\": {e}")),
        },
        other => src.err_at(
            Some(v.span()),
            format!("{key} = {other}: a duration is a string with its unit, e.g. \"30s\", \"500ms\", \"2m\""),
        ),
    }
}

/// Checks a flag value's placeholders refer to axes that exist.
fn check_value(src: &Src<'_>, def: &PlanDef, key: &str, v: &Spanned<toml::Value>) -> Result<(), PlanError> {
    if DURATION_KEYS.contains(&key.replace('-', "_").as_str()) {
        check_duration(src, key, v)?;
    }
    match v.get_ref() {
        toml::Value::String(s) => {
            for ph in placeholders(s) {
                let ok = match ph.as_str() {
                    // A token unique to each cell, e.g. for a backup's path;
                    // a repeated workload's cycle (check_cycles).
                    "cell" | "cycle" => true,
                    "target" => def.axes.contains_key("target") || def.targets.len() == 1,
                    "db" => def.axes.contains_key("db") || def.dbs.len() == 1,
                    other => def.axes.contains_key(other),
                };
                if !ok {
                    return src.err_at(
                        Some(v.span()),
                        format!(
                            "{key} = \"{s}\": {{{ph}}} names no axis (axes: {})",
                            list_or_none(&def.axes.keys().cloned().collect::<Vec<_>>())
                        ),
                    );
                }
            }
            Ok(())
        }
        toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => Ok(()),
        // Floats too: `sensitivity = [0.5, 2]`.
        toml::Value::Array(a) if a.iter().all(|x| x.is_integer() || x.is_float() || x.is_str()) => Ok(()),
        _ => src.err_at(Some(v.span()), format!("{key}: use a string, number, boolean or a list of them")),
    }
}

fn placeholders(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let Some(j) = rest[i..].find('}') else { break };
        out.push(rest[i + 1..i + j].to_string());
        rest = &rest[i + j + 1..];
    }
    out
}

/// Every combination of the axes, in file order of the values.
fn combinations(axes: &BTreeMap<String, Spanned<Vec<String>>>) -> Vec<BTreeMap<String, String>> {
    let mut out = vec![BTreeMap::new()];
    for (name, values) in axes {
        out = out
            .into_iter()
            .flat_map(|c| {
                values.get_ref().iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(name.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    out
}

/// Where a target's files go when the plan runs; media are mounted under
/// the state directory, which the binary fills in.
pub fn target_placeholder(name: &str) -> String {
    format!("@target:{name}@")
}

/// Where a database's URL goes; the binary fills it in.
pub fn db_placeholder(name: &str) -> String {
    format!("@db:{name}@")
}

fn substitute(s: &str, axes: &BTreeMap<String, String>, def: &PlanDef) -> String {
    let mut out = s.to_string();
    let target = axes
        .get("target")
        .cloned()
        .or_else(|| (def.targets.len() == 1).then(|| def.targets.keys().next().cloned()).flatten());
    let db = axes
        .get("db")
        .cloned()
        .or_else(|| (def.dbs.len() == 1).then(|| def.dbs.keys().next().cloned()).flatten());
    if let Some(t) = target {
        out = out.replace("{target}", &target_placeholder(&t));
    }
    if let Some(d) = db {
        out = out.replace("{db}", &db_placeholder(&d));
    }
    for (k, v) in axes {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

fn flags(
    map: &BTreeMap<String, Spanned<toml::Value>>,
    axes: &BTreeMap<String, String>,
    def: &PlanDef,
) -> Vec<String> {
    let mut argv = Vec::new();
    for (k, v) in map {
        let flag = format!("--{}", k.replace('_', "-"));
        match v.get_ref() {
            toml::Value::Boolean(true) => argv.push(flag),
            toml::Value::Boolean(false) => {}
            toml::Value::String(s) => argv.extend([flag, substitute(s, axes, def)]),
            toml::Value::Array(a) => argv.extend([
                flag,
                a.iter()
                    .map(|x| x.as_str().map(|s| substitute(s, axes, def)).unwrap_or_else(|| x.to_string()))
                    .collect::<Vec<_>>()
                    .join(","),
            ]),
            other => argv.extend([flag, other.to_string()]),
        }
    }
    argv
}

/// How long a workload's run takes, from its flags: steps × (ramp-up +
/// duration). An io workload's profiles, and their default durations, come
/// from the io crate's own set and profile definitions, so a set that gains
/// a profile is estimated right without a second list here.
fn estimate(run: &BTreeMap<String, Spanned<toml::Value>>, kind: &str) -> Duration {
    let get = |k: &str| run.get(k).and_then(|v| v.get_ref().as_str().map(str::to_string));
    let flag_dur = |k: &str| get(k).and_then(|s| parse_duration(&s).ok());
    let dur = |k: &str, dflt: Duration| flag_dur(k).unwrap_or(dflt);
    let steps = |k: &str| {
        get(k)
            .or_else(|| run.get(k).map(|v| v.get_ref().to_string()))
            .and_then(|s| parse_list(&s).ok())
            .map(|l| l.len() as u32)
            .unwrap_or(1)
    };
    let sensitivity = |step: Duration| {
        let factors = run.get("sensitivity").map_or(0, |v| match v.get_ref() {
            toml::Value::Array(a) => a.len(),
            other => other.as_str().unwrap_or("").split(',').count(),
        }) as u32;
        let each = flag_dur("sensitivity_duration").map_or(step, |d| dur("rampup", Duration::ZERO) + d);
        each * factors
    };
    match kind {
        // A power test at SF 1 on this class of machine: about a minute of
        // queries and a second per step for the system monitor.
        "tpch" => Duration::from_secs(120),
        // A backup runs to its end; a small database's takes under a minute.
        "backup" => Duration::from_secs(60),
        // Storage sensitivity re-runs the last step once per factor.
        "tpcc" => {
            let step = dur("rampup", Duration::from_secs(30)) + dur("duration", Duration::from_secs(120));
            step * steps("users") + sensitivity(step)
        }
        "tpcb" => {
            let step = dur("rampup", Duration::ZERO) + dur("duration", Duration::from_secs(60));
            step * steps("clients") + sensitivity(step)
        }
        _ => {
            let each: Vec<Duration> = io_profiles(get("set").as_deref(), get("profile").as_deref())
                .iter()
                .map(|(rampup, duration)| {
                    flag_dur("rampup").unwrap_or(*rampup) + flag_dur("duration").unwrap_or(*duration)
                })
                .collect();
            // The sensitivity re-runs the last profile.
            each.iter().sum::<Duration>() + each.last().map_or(Duration::ZERO, |&d| sensitivity(d))
        }
    }
}

/// (ramp-up, duration) of each profile an io workload runs: a built-in set,
/// named profiles, or one profile made from flags (as `storbench io` makes it).
fn io_profiles(set: Option<&str>, names: Option<&str>) -> Vec<(Duration, Duration)> {
    use storbench_io::profile;
    let profiles: Vec<storbench_io::Profile> = match (set, names) {
        (Some(s), _) => profile::set(s).unwrap_or_default(),
        (None, Some(n)) => n.split(',').filter_map(|x| profile::named(x.trim())).collect(),
        (None, None) => {
            let mut p = storbench_io::Profile::new("custom");
            p.rampup = Duration::from_secs(2);
            vec![p]
        }
    };
    if profiles.is_empty() {
        // An unknown name: the command refuses it when the cell runs.
        return vec![(Duration::ZERO, Duration::ZERO)];
    }
    profiles.iter().map(|p| (p.rampup, p.duration)).collect()
}

/// A workload's commands in one combination: (name, before, command,
/// estimate). `token` fills `{cell}`: unique to the cell and workload.
fn commands(w: &WorkloadDef, combo: &BTreeMap<String, String>, def: &PlanDef, token: &str) -> Commands {
    let kind = w.kind.get_ref().as_str();
    let wname = w.name.clone().unwrap_or_else(|| kind.to_string());
    let mut combo = combo.clone();
    combo.insert("cell".into(), format!("{token}-{wname}"));
    let mut before = Vec::new();
    let mut command = Vec::new();
    match kind {
        "io" | "backup" => {
            command.push(kind.to_string());
            command.extend(flags(&w.run, &combo, def));
        }
        "tpcb" | "tpcc" | "tpch" => {
            let init_verb = if kind == "tpcb" { "init" } else { "build" };
            // The database flag is shared by init and run.
            let mut init = w.init.clone();
            if let Some(db) = w.run.get("db") {
                init.entry("db".into()).or_insert_with(|| db.clone());
            }
            if !w.init.is_empty() {
                // Both refuse existing tables without --replace.
                let mut b = vec![kind.to_string(), init_verb.to_string(), "--replace".to_string()];
                b.extend(flags(&init, &combo, def));
                before.push(b);
            }
            command.extend([kind.to_string(), "run".to_string()]);
            command.extend(flags(&w.run, &combo, def));
        }
        _ => unreachable!("kinds are validated"),
    }
    let est =
        estimate(&w.run, kind) + if before.is_empty() { Duration::ZERO } else { Duration::from_secs(10) };
    (wname, before, command, est)
}

/// The cells of one combination and repeat, in order: each workload on its
/// own, and each `together` group as one cell (after its members alone,
/// with `alone = true`), where its first member appears.
fn expand(def: &PlanDef) -> Vec<Cell> {
    let mut cells = Vec::new();
    for combo in combinations(&def.axes) {
        let label = if combo.is_empty() {
            "all".to_string()
        } else {
            combo.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
        };
        let token_of = |r: u32| {
            let t: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
            format!("{t}-r{r}")
        };
        for r in 1..=def.repeats {
            let token = token_of(r);
            let mut done_groups: Vec<&str> = Vec::new();
            for w in &def.workloads {
                let group = w.together.as_ref().map(|g| g.get_ref().as_str());
                let members: Vec<&WorkloadDef> = match group {
                    None => vec![w],
                    Some(g) if done_groups.contains(&g) => continue,
                    Some(g) => {
                        done_groups.push(g);
                        def.workloads
                            .iter()
                            .filter(|x| x.together.as_ref().map(|t| t.get_ref().as_str()) == Some(g))
                            .collect()
                    }
                };
                // `{cell}` differs between a workload's cell alone and its
                // group's, so a backup's path is each cell's own.
                let parts_with = |suffix: &str| -> Vec<_> {
                    members.iter().map(|m| commands(m, &combo, def, &format!("{token}{suffix}"))).collect()
                };
                let parts = parts_with("");
                let mut make = |parts: &[Commands], id_name: String, cycles: BTreeMap<String, Cycles>| {
                    let (wname, before, command, est) = parts[0].clone();
                    let mut targets: Vec<String> = Vec::new();
                    let mut db = None;
                    let all = parts.iter().flat_map(|p| p.1.iter().flatten().chain(p.2.iter()));
                    for a in all {
                        for t in def.targets.keys() {
                            if a.contains(&target_placeholder(t)) && !targets.contains(t) {
                                targets.push(t.clone());
                            }
                        }
                        for d in def.dbs.keys() {
                            if a.contains(&db_placeholder(d)) {
                                db = Some(d.clone());
                            }
                        }
                    }
                    // Cycles run while the workloads that run once do: the
                    // last may begin just before they end.
                    let once = parts.iter().filter(|p| !cycles.contains_key(&p.0)).map(|p| p.3).max();
                    let estimate = parts
                        .iter()
                        .map(|p| match cycles.get(&p.0) {
                            Some(c) => (c.every * (c.times - 1)).min(once.unwrap_or_default()) + p.3,
                            None => p.3,
                        })
                        .max()
                        .unwrap_or(est);
                    cells.push(Cell {
                        id: format!("{label}/{id_name}#r{r}"),
                        label: label.clone(),
                        axes: combo.clone(),
                        workload: wname,
                        repeat: r,
                        before,
                        command,
                        targets,
                        db,
                        estimate,
                        neighbours: parts[1..]
                            .iter()
                            .map(|p| Part {
                                workload: p.0.clone(),
                                before: p.1.clone(),
                                command: p.2.clone(),
                            })
                            .collect(),
                        together: group.map(str::to_string),
                        cycles,
                        digest: String::new(),
                    });
                };
                if group.is_some() && def.alone {
                    for p in &parts_with("-alone") {
                        make(std::slice::from_ref(p), format!("{}-alone", p.0), BTreeMap::new());
                    }
                }
                let id_name = parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join("+");
                let cycles = members
                    .iter()
                    .zip(&parts)
                    .filter_map(|(m, p)| {
                        let every = parse_duration(m.every.as_ref()?.get_ref()).ok()?;
                        let times = u32::try_from(*m.times.as_ref()?.get_ref()).ok()?;
                        Some((p.0.clone(), Cycles { every, times }))
                    })
                    .collect();
                make(&parts, id_name, cycles);
            }
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
name = "t"
repeats = 2

[target.a]
path = "/tmp/a"
[target.b]
media = { size = "1G", fs = "xfs", block_size = "4k", emulate = "hdd" }

[db.lite]
url = "sqlite:{target}/b.db"

[axes]
target = ["a", "b"]

[[workload]]
kind = "tpcb"
init = { scale = 1 }
run = { db = "{db}", clients = "1,4", duration = "10s" }

[[workload]]
kind = "io"
run = { target = "{target}/io.dat", set = "quick", duration = "2s", buffered = true }

[quick]
repeats = 1
axes = { target = ["a"] }
set = { duration = "1s" }
"#;

    /// A resumed plan keeps a completed cell only while its digest holds:
    /// it must follow what the cell runs on and runs, and nothing else.
    #[test]
    fn a_cells_digest_follows_its_own_targets_database_and_commands_only() {
        let digests = |text: &str| -> BTreeMap<String, String> {
            parse("p.toml", text, false).unwrap().1.into_iter().map(|c| (c.id, c.digest)).collect()
        };
        let base = digests(PLAN);
        assert_eq!(base.len(), 8);
        assert!(base.values().all(|d| d.len() == 16), "{base:?}");
        // What changed, by cell: `which` says which cells should.
        let changed = |text: String, which: &dyn Fn(&str) -> bool| {
            let new = digests(&text);
            for (id, d) in &base {
                assert_eq!(new[id] != *d, which(id), "{id}: {d} → {}", new[id]);
            }
        };
        // Target b's medium: b's cells, the TPC-B ones through the
        // database's `{target}` as well as the io ones naming it.
        changed(PLAN.replace("emulate = \"hdd\"", "emulate = \"nvme\""), &|id| id.contains("target=b"));
        // The database's definition: every cell that uses it.
        changed(PLAN.replace("/b.db", "/c.db"), &|id| id.contains("tpcb"));
        // A workload's commands: its cells.
        changed(PLAN.replace("clients = \"1,4\"", "clients = \"1,2\""), &|id| id.contains("tpcb"));
        // A comment, or a target no cell uses: none.
        changed(PLAN.replace("[target.a]", "# the host's disk\n[target.a]"), &|_| false);
        changed(PLAN.replace("[db.lite]", "[target.c]\npath = \"/tmp/c\"\n[db.lite]"), &|_| false);
    }

    #[test]
    fn a_cache_study_without_a_memory_limit_is_warned_about() {
        let plan = r#"
name = "c"
[target.cached]
media = { size = "1G", model = "hdd", cache = "128M", cache_model = "nvme" }
[target.plain]
media = { size = "1G", model = "hdd" }
[axes]
target = ["cached", "plain"]
[[workload]]
kind = "tpcc"
init = { warehouses = 1 }
run = { db = "sqlite:{target}/t.db", duration = "1s" }
"#;
        let (def, _) = parse("p.toml", plan, false).unwrap();
        let w = warnings(&def);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("workload 'tpcc': no memory_limit") && w[0].contains("target(s) cached"),
            "{}",
            w[0]
        );
        let limited = plan.replace("duration = \"1s\" }", "duration = \"1s\", memory_limit = \"64M\" }");
        let (def, _) = parse("p.toml", &limited, false).unwrap();
        assert!(warnings(&def).is_empty(), "{:?}", warnings(&def));
        let uncached = plan.replace(", cache = \"128M\", cache_model = \"nvme\"", "");
        let (def, _) = parse("p.toml", &uncached, false).unwrap();
        assert!(warnings(&def).is_empty(), "{:?}", warnings(&def));
    }

    #[test]
    fn tpcb_clients_above_the_scale_are_warned_about() {
        let (def, _) = parse("p.toml", PLAN, false).unwrap();
        let w = warnings(&def);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("4 clients on scale 1") && w[0].contains("at least 4"), "{}", w[0]);
        let ok = PLAN.replace("init = { scale = 1 }", "init = { scale = 4 }");
        let (def, _) = parse("p.toml", &ok, false).unwrap();
        assert!(warnings(&def).is_empty());
        // Lists as the command reads them: a range and Fibonacci steps.
        for (clients, top) in [("1..6", 6), ("fib:8", 8)] {
            let l = ok.replace("clients = \"1,4\"", &format!("clients = \"{clients}\""));
            let (def, _) = parse("p.toml", &l, false).unwrap();
            assert!(
                warnings(&def)[0].contains(&format!("{top} clients on scale 4")),
                "{clients}: {:?}",
                warnings(&def)
            );
        }
        // The quick form is checked as it runs; a workload's own quick
        // flags go over [quick] set.
        let quick =
            ok.replace("set = { duration = \"1s\" }", "set = { duration = \"1s\", clients = \"1,10\" }");
        let (def, _) = parse("p.toml", &quick, true).unwrap();
        assert!(warnings(&def)[0].contains("10 clients on scale 4"), "{:?}", warnings(&def));
        let own =
            quick.replace("duration = \"10s\" }", "duration = \"10s\" }\nquick = { clients = \"1,2\" }");
        let (def, cells) = parse("p.toml", &own, true).unwrap();
        assert!(warnings(&def).is_empty(), "{:?}", warnings(&def));
        assert!(cells.iter().any(|c| c.command.windows(2).any(|a| a == ["--clients", "1,2"])));
    }

    #[test]
    fn expands_axes_repeats_and_workloads() {
        let (_, cells) = parse("p.toml", PLAN, false).unwrap();
        assert_eq!(cells.len(), 2 * 2 * 2);
        let c = &cells[0];
        assert_eq!(c.id, "target=a/tpcb#r1");
        assert_eq!(c.label, "target=a");
        assert_eq!(c.before[0], ["tpcb", "init", "--replace", "--db", "@db:lite@", "--scale", "1"]);
        assert_eq!(c.command, ["tpcb", "run", "--clients", "1,4", "--db", "@db:lite@", "--duration", "10s"]);
        assert_eq!(c.db.as_deref(), Some("lite"));
        assert_eq!(c.estimate, Duration::from_secs(20 + 10));
        let io = &cells[1];
        assert_eq!(
            io.command,
            ["io", "--buffered", "--duration", "2s", "--set", "quick", "--target", "@target:a@/io.dat"]
        );
        assert_eq!(io.targets, ["a"]);
        assert_eq!(cells[2].id, "target=a/tpcb#r2");
        assert_eq!(cells[4].label, "target=b");
    }

    #[test]
    fn a_sensitivity_key_passes_its_factors_and_adds_their_reruns_to_the_estimate() {
        let with = PLAN.replace("duration = \"10s\" }", "duration = \"10s\", sensitivity = [0.5, 2] }");
        let (_, cells) = parse("p.toml", &with, false).unwrap();
        let c = &cells[0];
        assert!(c.command.windows(2).any(|a| a == ["--sensitivity", "0.5,2"]), "{:?}", c.command);
        // Two steps and two re-runs of 10 s, after the init's 10 s.
        assert_eq!(c.estimate, Duration::from_secs(10 + 4 * 10));
        let short = with
            .replace("sensitivity = [0.5, 2] }", "sensitivity = [0.5, 2], sensitivity_duration = \"3s\" }");
        let (_, cells) = parse("p.toml", &short, false).unwrap();
        assert!(cells[0].command.windows(2).any(|a| a == ["--sensitivity-duration", "3s"]));
        assert_eq!(cells[0].estimate, Duration::from_secs(10 + 2 * 10 + 2 * 3));
        // A bare number is no duration.
        let bare =
            with.replace("sensitivity = [0.5, 2] }", "sensitivity = [0.5, 2], sensitivity_duration = 3 }");
        assert!(parse("p.toml", &bare, false).is_err());
    }

    fn io_estimate(run: &str) -> Duration {
        let text =
            format!("name = \"e\"\n[[workload]]\nkind = \"io\"\nrun = {{ target = \"/tmp/x\", {run} }}\n");
        parse("e.toml", &text, false).unwrap().1[0].estimate
    }

    #[test]
    fn io_estimates_count_the_sets_own_profiles_and_durations() {
        // db-shapes has 8 profiles (a list kept here said 7), each 2 s ramp-up + 20 s.
        let n = storbench_io::profile::set("db-shapes").unwrap().len() as u32;
        assert_eq!(n, 8);
        assert_eq!(io_estimate("set = \"db-shapes\""), Duration::from_secs(22) * 8);
        assert_eq!(io_estimate("set = \"db-shapes\", duration = \"5s\""), Duration::from_secs(7) * 8);
        assert_eq!(
            io_estimate("set = \"sqlserver-six\", duration = \"5s\", rampup = \"0s\""),
            Duration::from_secs(30)
        );
        // The quick set's own 12 s + 2 s; named profiles (found in the first
        // set that has them, as `storbench io --profile` finds them); one
        // profile from flags.
        assert_eq!(io_estimate("set = \"quick\""), Duration::from_secs(14) * 4);
        assert_eq!(io_estimate("profile = \"read-random-8k,log-write-8k\""), Duration::from_secs(22 + 22));
        assert_eq!(io_estimate("bs = \"8k\", duration = \"10s\""), Duration::from_secs(12));
    }

    #[test]
    fn a_together_group_is_one_cell_after_its_members_alone() {
        let text = r#"
name = "n"
alone = true
[target.a]
path = "/tmp/a"
[db.pg]
url = "postgres://x@h:5432/d"
[[workload]]
kind = "tpcc"
init = { warehouses = 1 }
run = { db = "{db}", users = "4", duration = "30s", rampup = "5s" }
together = "g"
[[workload]]
kind = "io"
name = "seqw"
run = { target = "{target}/n.dat", rw = "write", bs = "64k", rate_mbps = 50, duration = "40s" }
together = "g"
[[workload]]
kind = "backup"
run = { db = "{db}", to = "{target}/bk-{cell}" }
"#;
        let (_, cells) = parse("n.toml", text, false).unwrap();
        let ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["all/tpcc-alone#r1", "all/seqw-alone#r1", "all/tpcc+seqw#r1", "all/backup#r1"]);
        let both = &cells[2];
        assert_eq!((both.workload.as_str(), both.neighbours.len()), ("tpcc", 1));
        assert_eq!(both.neighbours[0].command[..3], ["io".to_string(), "--bs".into(), "64k".into()]);
        assert_eq!(both.estimate, Duration::from_secs(5 + 30 + 10), "the longest part: TPC-C and its build");
        assert_eq!(both.targets, ["a"]);
        assert_eq!(both.db.as_deref(), Some("pg"));
        let tags = |c: &Cell, w: &str| c.neighbour_axes(w);
        assert_eq!(
            tags(both, "seqw"),
            [("workload".to_string(), "seqw".to_string()), ("with".into(), "tpcc".into())]
        );
        assert_eq!(tags(&cells[0], "tpcc")[1], ("with".to_string(), "alone".to_string()));
        assert!(tags(&cells[3], "backup").is_empty(), "outside a group: no tags");
        assert!(
            cells[3].command.contains(&"@target:a@/bk-all-r1-backup".to_string()),
            "{:?}",
            cells[3].command
        );

        let lonely = text.replace(
            "rate_mbps = 50, duration = \"40s\" }\ntogether = \"g\"",
            "rate_mbps = 50, duration = \"40s\" }\ntogether = \"h\"",
        );
        let e = parse("n.toml", &lonely, false).unwrap_err().to_string();
        assert!(e.contains("together = \"g\": a group needs at least two workloads"), "{e}");
        let twins = text.replace("name = \"seqw\"\n", "name = \"tpcc\"\n");
        let e = parse("n.toml", &twins, false).unwrap_err().to_string();
        assert!(e.contains("two workloads named alike (tpcc, tpcc)"), "{e}");
    }

    #[test]
    fn quick_form_replaces_axes_repeats_and_flags() {
        let (_, cells) = parse("p.toml", PLAN, true).unwrap();
        assert_eq!(cells.len(), 2);
        assert!(cells[0].command.windows(2).any(|w| w == ["--duration", "1s"]));
    }

    #[test]
    fn a_tpch_workload_builds_with_replace_then_runs() {
        let plan = PLAN.replace(
            "kind = \"io\"\nrun = { target = \"{target}/io.dat\", set = \"quick\", duration = \"2s\", buffered = true }",
            "kind = \"tpch\"\ninit = { scale = 0.01 }\nrun = { db = \"{db}\", test = \"power\" }",
        );
        let (_, cells) = parse("p.toml", &plan, false).unwrap();
        let c = &cells[1];
        assert_eq!(c.id, "target=a/tpch#r1");
        assert_eq!(c.before[0], ["tpch", "build", "--replace", "--db", "@db:lite@", "--scale", "0.01"]);
        assert_eq!(c.command, ["tpch", "run", "--db", "@db:lite@", "--test", "power"]);
    }

    #[test]
    fn a_replicated_managed_db_fills_its_flags_from_the_cell_and_checks_them() {
        let rep = PLAN.replace(
            "url = \"sqlite:{target}/b.db\"",
            "managed = { data = \"a\", standbys = 1, sync = \"{sync}\", link = \"rtt={rtt}\", standby_wal = \"{target}\" }",
        )
        .replace("target = [\"a\", \"b\"]", "target = [\"a\", \"b\"]\nsync = [\"on\"]\nrtt = [\"1ms\"]");
        let (def, cells) = parse("p.toml", &rep, false).unwrap();
        let m = def.dbs["lite"].get_ref().managed.clone().unwrap();
        assert_eq!(
            m.replication_flags(&cells[4].axes),
            ["--standby", "1", "--sync", "on", "--link", "rtt=1ms", "--standby-wal", "b"]
        );
        let bad = rep.replace("{sync}", "{level}");
        assert!(err(&bad).contains("sync = \"{level}\": {level} names no axis"), "{}", err(&bad));
        let no_standby = rep.replace("standbys = 1, ", "");
        assert!(err(&no_standby).contains("db 'lite': link needs standbys = N"), "{}", err(&no_standby));
        let bad_target = rep.replace("standby_wal = \"{target}\"", "standby_wal = \"zz\"");
        assert!(err(&bad_target).contains("standby_wal = \"zz\" is not a target"), "{}", err(&bad_target));
    }

    fn err(text: &str) -> String {
        parse("p.toml", text, false).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let bad_target = PLAN.replace("target = [\"a\", \"b\"]", "target = [\"a\", \"zz\"]");
        let e = err(&bad_target);
        assert!(e.starts_with("p.toml:14:"), "{e}");
        assert!(e.contains("'zz' is not defined") && e.contains("known: a, b"), "{e}");

        let e = err(&PLAN.replace("kind = \"io\"", "kind = \"fio\""));
        assert!(e.contains("p.toml:22:") && e.contains("unknown workload kind 'fio'"), "{e}");

        let e = err(&PLAN.replace("target = [\"a\", \"b\"]", "target = []"));
        assert!(e.contains("axis 'target' has no values"), "{e}");

        let e = err(&PLAN.replace("repeats = 2", "repeats = 2\ncolour = 1"));
        assert!(e.contains("p.toml:4") && e.contains("colour"), "{e}");

        let e = err(&PLAN.replace("clients = \"1,4\"", "clients = \"{users}\""));
        assert!(e.contains("{users} names no axis"), "{e}");

        let managed = PLAN.replace("url = \"sqlite:{target}/b.db\"", "managed = { data = \"nowhere\" }");
        let e = err(&managed);
        assert!(e.contains("target 'nowhere' is not defined"), "{e}");

        let e = parse(
            "p.toml",
            &PLAN.replace(
                "[quick]\nrepeats = 1\naxes = { target = [\"a\"] }\nset = { duration = \"1s\" }\n",
                "",
            ),
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no [quick] form"), "{e}");
    }

    /// Regression (issue 24): `duration = 5` ran a 5 s cell, and
    /// `repeats = "three"` named the line but not the key.
    #[test]
    fn a_number_for_a_duration_and_a_word_for_repeats_name_their_key_and_line() {
        let e = err(&PLAN.replace("duration = \"10s\"", "duration = 5"));
        assert!(
            e.starts_with("p.toml:19:") && e.contains("duration = 5: a duration is a string with its unit"),
            "{e}"
        );
        let e = err(&PLAN.replace("duration = \"10s\"", "duration = \"ten\""));
        assert!(e.contains("p.toml:19:") && e.contains("duration = \"ten\": 'ten' is not a duration"), "{e}");
        let e = err(&PLAN.replace("repeats = 2", "repeats = \"three\""));
        assert!(e.starts_with("p.toml:3:") && e.contains("repeats: invalid type: string \"three\""), "{e}");
        let quick = PLAN.replace("set = { duration = \"1s\" }", "set = { rampup = 1 }");
        let e = parse("p.toml", &quick, true).unwrap_err().to_string();
        assert!(e.contains("rampup = 1: a duration is a string"), "{e}");
        // Every duration flag, not only the step's own (the review's list).
        for key in ["cut_after", "idle", "kill_after", "cell_time", "progress"] {
            let quick = PLAN.replace("set = { duration = \"1s\" }", &format!("set = {{ {key} = 5 }}"));
            let e = parse("p.toml", &quick, true).unwrap_err().to_string();
            assert!(e.contains(&format!("{key} = 5: a duration is a string")), "{key}: {e}");
        }
    }

    const CYCLED: &str = r#"
name = "c"
[target.a]
path = "/tmp/a"
[db.pg]
url = "postgres://x@h:5432/d"
[[workload]]
kind = "tpcc"
run = { db = "{db}", users = "4", duration = "300s", rampup = "0s" }
together = "g"
[[workload]]
kind = "backup"
run = { db = "{db}", to = "{target}/bk-{cell}-{cycle}" }
together = "g"
every = "100s"
times = 10
"#;

    #[test]
    fn a_repeated_workload_carries_its_cycles_and_the_estimate_stops_with_the_others() {
        let (_, cells) = parse("c.toml", CYCLED, false).unwrap();
        assert_eq!(cells.len(), 1);
        let c = &cells[0];
        assert_eq!(c.cycles.len(), 1);
        assert_eq!(c.cycles["backup"], Cycles { every: Duration::from_secs(100), times: 10 });
        assert!(c.neighbours[0].command.iter().any(|a| a.ends_with("-backup-{cycle}")), "{:?}", c.neighbours);
        // TPC-C's 300 s, and a last cycle (a backup: 60 s) begun at most then.
        assert_eq!(c.estimate, Duration::from_secs(300 + 60));
        // Alone, it runs once.
        let (_, cells) =
            parse("c.toml", &CYCLED.replace("name = \"c\"", "name = \"c\"\nalone = true"), false).unwrap();
        assert_eq!(cells.len(), 3);
        assert!(cells[0].cycles.is_empty() && cells[1].cycles.is_empty() && cells[2].cycles.len() == 1);
    }

    #[test]
    fn every_and_times_are_refused_where_they_cannot_work() {
        let cases = [
            ("times = 10\n", "", "every needs times = N"),
            ("every = \"100s\"\n", "", "times needs every = \"DURATION\""),
            ("every = \"100s\"", "every = \"soon\"", "every = \"soon\": 'soon' is not a duration"),
            ("every = \"100s\"", "every = \"0s\"", "every = \"0s\": must be longer than 0 s"),
            ("times = 10", "times = 0", "times = 0: the number of cycles, from 1 to 100000"),
            ("bk-{cell}-{cycle}", "bk-{cell}", "a repeated backup needs a path of its own per cycle"),
            ("together = \"g\"\n", "", "put it in a together group"),
            (
                "rampup = \"0s\" }\ntogether = \"g\"",
                "rampup = \"0s\" }\ntogether = \"g\"\nevery = \"5s\"\ntimes = 2",
                "every workload repeats; one must run once",
            ),
            ("times = 10\n", "", "every needs times"),
        ];
        for (from, to, want) in cases {
            assert!(CYCLED.contains(from), "{from}");
            let e = err(&CYCLED.replace(from, to));
            assert!(e.starts_with("p.toml:") && e.contains(want), "{from} -> {to}: {e}");
        }
        // {cycle} in a workload that runs once.
        let once = CYCLED.replace("duration = \"300s\"", "duration = \"300s\", label = \"x{cycle}\"");
        assert!(err(&once).contains("workload 'tpcc': label uses {cycle}"), "{}", err(&once));
    }
}
