//! Device models: data (a table of named parameters a user can copy into a
//! TOML file and edit) plus one function, [`Model::service_time`], that says
//! how long a request occupies the device given its state. A model never
//! sleeps and never touches data: the daemon schedules, the model prices.
//!
//! Every built-in model is a base kind (`hdd`, `ssd`, `net`, `constant`) with
//! defaults; `--set key=value` and a user's TOML file override them through
//! the same path ([`Spec`]), so a user model is exactly "a base plus
//! overrides". The parameters and their sources are in docs/media.md.

mod array;
mod constant;
mod hdd;
mod net;
mod ssd;
mod tier;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use array::{
    parse_battery, parse_destage, parse_link, Array, ArrayCommand, ArrayOptions, ArraySnapshot, ArraySpec,
    ArrayStatus, ControllerSpec, Destage, LinkSpec, MemberCounts, MemberIo, Plan, LAYOUTS,
};
pub use constant::Constant;
pub use hdd::Hdd;
pub use net::Net;
pub use ssd::Ssd;
pub use tier::{hot_shares, TierCounts, TierOptions, TierSnapshot, TierSpec, Tiered, HOT_PERCENTS};

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// Make every acknowledged write durable (a cache flush; what fsync
    /// reaching the device becomes).
    Flush,
    /// Discard (trim) a range.
    Discard,
}

impl Op {
    /// All ops, in the order counters list them.
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Flush, Op::Discard];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
        }
    }

    /// Index into per-op tables (0 read, 1 write, 2 flush, 3 discard: also
    /// the trace format's op code).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One request as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Req {
    /// What.
    pub op: Op,
    /// Byte offset on the medium.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// A model error: a bad name, key or value (the message says which and
/// what is allowed).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

/// The kind of a parameter's value, for parsing and for `media models`
/// (`--json` gives it in a word: `duration`, `rate`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Kind {
    /// A duration: `8.5ms`, `90us`, `0`.
    #[serde(rename = "duration")]
    Dur,
    /// A transfer rate: `210MB/s`, `1.2GB/s` (decimal units, as datasheets).
    #[serde(rename = "rate")]
    Rate,
    /// A transfer rate, or `0` for none of its own (see the parameter).
    #[serde(rename = "rate or 0")]
    RateOr0,
    /// A size: `64M`, `4k` (binary units).
    #[serde(rename = "size")]
    Size,
    /// A whole number.
    #[serde(rename = "integer")]
    Int,
    /// `true` or `false`.
    #[serde(rename = "bool")]
    Bool,
    /// The name of another model (a network model's backing device).
    #[serde(rename = "model")]
    Name,
}

/// One parameter of a built-in model: key, default as written, kind, what
/// it means and where the default comes from.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Param {
    /// The key (`--set KEY=...`, a TOML key).
    pub key: &'static str,
    /// The default, written as a user would.
    pub default: &'static str,
    /// How the value reads.
    pub kind: Kind,
    /// Meaning and source.
    pub doc: &'static str,
}

/// A built-in model: name, base kind, one line, parameters (as
/// `media models --json` gives them).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Builtin {
    /// The name users give (`--model hdd`).
    pub name: &'static str,
    /// One line.
    pub about: &'static str,
    /// Its parameters with their defaults.
    pub params: &'static [Param],
}

/// The built-in models.
pub fn builtins() -> &'static [Builtin] {
    &[hdd::HDD, hdd::HDD_15K, ssd::SATA_SSD, ssd::NVME, net::GBE_NAS, net::FC_SAN, constant::CONSTANT]
}

fn builtin(name: &str) -> Option<&'static Builtin> {
    builtins().iter().find(|b| b.name == name)
}

fn names() -> String {
    builtins().iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
}

/// The tables a model file may carry beside `base` and the parameters
/// (written by `media calibrate` and `media validate`; not parameters).
pub const META_TABLES: [&str; 5] = ["calibration", "sources", "fit_error", "cells", "validation"];

/// What a medium's model is: a built-in base plus overrides, as the user
/// wrote them. Serialised into the registry and handed to the daemon, so
/// both build the same model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// The built-in model it starts from.
    pub base: String,
    /// Overrides, key to value as written.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// A cache tier in front of it (`media create --cache …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<TierSpec>,
    /// An array of members of another model (`media create --array …`):
    /// then `base` is `array` and `set` is empty, or `base` is a network
    /// model (`gbe-nas`, `fc-san`) with its `set`, whose backing is the
    /// array (an iSCSI NAS exporting its RAID 0: `--model gbe-nas --array
    /// raid0 …`, or a model file with an `[array]` table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<ArraySpec>,
}

impl Spec {
    /// A spec from `--model NAME|FILE.toml` and `--set key=value` pairs
    /// (later ones win; `--set` wins over the file). Validates by building.
    pub fn parse(model: &str, sets: &[String]) -> Result<Spec, ModelError> {
        let mut spec = if model.ends_with(".toml") || model.contains('/') {
            Spec::from_file(Path::new(model))?
        } else if builtin(model).is_some() {
            Spec { base: model.to_string(), ..Spec::default() }
        } else {
            return Err(ModelError(format!(
                "--model {model}: use one of {} or a TOML file (./my-device.toml)",
                names()
            )));
        };
        for s in sets {
            let (k, v) = s.split_once('=').ok_or_else(|| {
                ModelError(format!("--set {s}: write KEY=VALUE (storbench media models lists the keys)"))
            })?;
            spec.set.insert(k.trim().to_string(), v.trim().to_string());
        }
        spec.build(1 << 30)?;
        Ok(spec)
    }

    /// A user's model file: `base = "hdd"` and parameter overrides.
    pub fn from_file(path: &Path) -> Result<Spec, ModelError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelError(format!("--model {}: {e}", path.display())))?;
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            // One line: the parser's message and its line, not its
            // multi-line diagram of the source.
            let line = e.span().map(|r| text[..r.start.min(text.len())].matches('\n').count() + 1);
            let at = line.map(|l| format!(" line {l}:")).unwrap_or_default();
            ModelError(format!(
                "--model {}:{at} not valid TOML: {}",
                path.display(),
                e.message().trim().replace('\n', "; ")
            ))
        })?;
        let mut base = None;
        let mut set = BTreeMap::new();
        let mut array = None;
        for (k, v) in table {
            // What a fitted model file carries beside its parameters (its
            // provenance, sources and error tables: crate::table).
            if META_TABLES.contains(&k.as_str()) && matches!(v, toml::Value::Table(_) | toml::Value::Array(_))
            {
                continue;
            }
            if let (toml::Value::Table(t), "array") = (&v, k.as_str()) {
                array = Some(array_table(path, t)?);
                continue;
            }
            if let toml::Value::Table(_) = v {
                return Err(ModelError(format!(
                    "--model {}: [{k}]: unknown table; a model file holds base, parameters, [array] behind a network model and the tables {}",
                    path.display(),
                    META_TABLES.join(", ")
                )));
            }
            let s = match &v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(ModelError(format!(
                        "--model {}: {k} = {other}: give a string, number or boolean",
                        path.display()
                    )))
                }
            };
            if k == "base" {
                base = Some(s);
            } else {
                set.insert(k, s);
            }
        }
        let base = base.ok_or_else(|| {
            ModelError(format!(
                "--model {}: needs base = \"NAME\" (one of {}) naming the model it starts from",
                path.display(),
                names()
            ))
        })?;
        if builtin(&base).is_none() {
            return Err(ModelError(format!(
                "--model {}: base = \"{base}\": use one of {}",
                path.display(),
                names()
            )));
        }
        if array.is_some() && !is_network(&base) {
            return Err(ModelError(format!(
                "--model {}: [array] with base = \"{base}\": an array stands behind a network model ({})",
                path.display(),
                NETWORKS.join(", ")
            )));
        }
        Ok(Spec { base, set, cache: None, array })
    }

    /// Builds the model for a medium of `capacity` bytes.
    pub fn build(&self, capacity: u64) -> Result<Model, ModelError> {
        let m = match &self.array {
            Some(a) => {
                let array = Model::Array(Box::new(Array::new(a, capacity)?));
                if self.base == "array" {
                    array
                } else {
                    self.network_before(array)?
                }
            }
            None => {
                let b = builtin(&self.base)
                    .ok_or_else(|| ModelError(format!("model {}: use one of {}", self.base, names())))?;
                let p = Params::new(b, &self.set)?;
                match b.name {
                    "hdd" | "hdd-15k" => Model::Hdd(Hdd::from_params(&p, capacity)?),
                    "sata-ssd" | "nvme" => Model::Ssd(Ssd::from_params(&p)?),
                    "gbe-nas" | "fc-san" => Model::Net(Box::new(Net::from_params(&p, capacity)?)),
                    "constant" => Model::Constant(Constant::from_params(&p)?),
                    _ => unreachable!("every builtin has a kind"),
                }
            }
        };
        match &self.cache {
            Some(t) => Ok(Model::Tiered(Box::new(Tiered::new(t, m, capacity)?))),
            None => Ok(m),
        }
    }

    /// The network model `base` (its round trip and link, as `set` has
    /// them) in front of `array`, which takes the place of its `backing`.
    fn network_before(&self, array: Model) -> Result<Model, ModelError> {
        let b = builtin(&self.base).filter(|b| is_network(b.name)).ok_or_else(|| {
            ModelError(format!(
                "--model {} --array: only a network model ({}) stands in front of an array; give --array alone",
                self.base,
                NETWORKS.join(", ")
            ))
        })?;
        if let Some(k) = self.set.keys().find(|k| *k == "backing" || k.starts_with("backing.")) {
            return Err(ModelError(format!(
                "--set {k}: the array is {}'s backing; set its members with --member and --member-set",
                self.base
            )));
        }
        let p = Params::new(b, &self.set)?;
        Ok(Model::Net(Box::new(Net::in_front_of(&p, array))))
    }

    /// A short label: `hdd`, `hdd (rpm=5400)`, `gbe-nas before raid0 of
    /// 6 × hdd, 64k chunk`.
    pub fn label(&self) -> String {
        let own = if self.set.is_empty() {
            self.base.clone()
        } else {
            let s: Vec<String> = self.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} ({})", self.base, s.join(", "))
        };
        let base = match &self.array {
            Some(a) if self.base == "array" => a.label(),
            Some(a) => format!("{own} before {}", a.label()),
            None => own,
        };
        match &self.cache {
            Some(t) => format!("{base} + {}", t.label()),
            None => base,
        }
    }
}

/// The network models: the ones with a `backing`, which may be an array.
const NETWORKS: [&str; 2] = ["gbe-nas", "fc-san"];

/// Whether `name` is a network model.
pub(crate) fn is_network(name: &str) -> bool {
    NETWORKS.contains(&name)
}

/// A model file's `[array]` table: the array behind its network model,
/// with the keys a plan's medium takes (`layout`, `disks`, `chunk`,
/// `groups`, `member`, `member_set`, `member_link`, `controller_cache`,
/// `cache_battery`, `controller_destage`).
fn array_table(path: &Path, t: &toml::Table) -> Result<ArraySpec, ModelError> {
    let bad = |k: &str, why: &str| ModelError(format!("--model {}: [array] {k}: {why}", path.display()));
    let text = |k: &str| -> Result<Option<&str>, ModelError> {
        t.get(k).map(|v| v.as_str().ok_or_else(|| bad(k, "give a string"))).transpose()
    };
    let count = |k: &str| -> Result<Option<usize>, ModelError> {
        t.get(k)
            .map(|v| {
                v.as_integer()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| bad(k, "give a whole number"))
            })
            .transpose()
    };
    const KEYS: [&str; 10] = [
        "layout",
        "disks",
        "chunk",
        "groups",
        "member",
        "member_set",
        "member_link",
        "controller_cache",
        "cache_battery",
        "controller_destage",
    ];
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(k, &format!("unknown key; use {}", KEYS.join(", "))));
    }
    let member_sets: Vec<String> = match t.get("member_set") {
        None => Vec::new(),
        Some(toml::Value::Table(m)) => m
            .iter()
            .map(|(k, v)| match v {
                toml::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect(),
        Some(_) => return Err(bad("member_set", "give a table: member_set = { rpm = 5400 }")),
    };
    // A value a parser refuses is named with its key as the file writes it.
    fn parsed<T>(
        text: Option<&str>,
        k: &str,
        parse: fn(&str) -> Result<T, String>,
        bad: &dyn Fn(&str, &str) -> ModelError,
    ) -> Result<Option<T>, ModelError> {
        text.map(|v| parse(v).map_err(|e| bad(k, &e))).transpose()
    }
    let size = storbench_metrics::units::parse_size;
    let o = ArrayOptions {
        layout: text("layout")?.ok_or_else(|| bad("layout", &format!("give one of {LAYOUTS}")))?,
        disks: count("disks")?,
        chunk: parsed(text("chunk")?, "chunk", size, &bad)?,
        groups: count("groups")?,
        member: text("member")?,
        member_sets: &member_sets,
        link: text("member_link")?,
        cache: parsed(text("controller_cache")?, "controller_cache", size, &bad)?,
        battery: parsed(text("cache_battery")?, "cache_battery", array::parse_battery, &bad)?,
        destage: parsed(text("controller_destage")?, "controller_destage", array::parse_destage, &bad)?,
    };
    ArraySpec::from_options(&o).map_err(|e| ModelError(format!("--model {}: [array]: {e}", path.display())))
}

/// A built-in's parameters with overrides applied, read with typed getters.
pub(crate) struct Params {
    name: &'static str,
    values: BTreeMap<String, String>,
    /// Overrides for a nested model (`backing.rpm=5400`), prefix removed.
    nested: BTreeMap<String, String>,
}

impl Params {
    fn new(b: &'static Builtin, set: &BTreeMap<String, String>) -> Result<Params, ModelError> {
        let mut values: BTreeMap<String, String> =
            b.params.iter().map(|p| (p.key.to_string(), p.default.to_string())).collect();
        let mut nested = BTreeMap::new();
        for (k, v) in set {
            if let Some(inner) = k.strip_prefix("backing.") {
                if !values.contains_key("backing") {
                    return Err(ModelError(format!("--set {k}: model {} has no backing device", b.name)));
                }
                nested.insert(inner.to_string(), v.clone());
                continue;
            }
            let Some(p) = b.params.iter().find(|p| p.key == k) else {
                let keys: Vec<&str> = b.params.iter().map(|p| p.key).collect();
                return Err(ModelError(format!(
                    "--set {k}={v}: model {} has no parameter {k}; its parameters are {}",
                    b.name,
                    keys.join(", ")
                )));
            };
            check(p.kind, v).map_err(|why| ModelError(format!("--set {k}={v}: {why}")))?;
            values.insert(k.clone(), v.clone());
        }
        Ok(Params { name: b.name, values, nested })
    }

    fn raw(&self, key: &str) -> &str {
        self.values.get(key).map(String::as_str).unwrap_or_else(|| panic!("{} has {key}", self.name))
    }

    pub(crate) fn dur(&self, key: &str) -> Duration {
        parse_dur(self.raw(key)).expect("checked")
    }

    /// Bytes per second.
    pub(crate) fn rate(&self, key: &str) -> f64 {
        parse_rate(self.raw(key)).expect("checked")
    }

    /// Bytes per second, or 0 (a [`Kind::RateOr0`] given as `0`).
    pub(crate) fn rate_or_0(&self, key: &str) -> f64 {
        match self.raw(key).trim() {
            "0" => 0.0,
            v => parse_rate(v).expect("checked"),
        }
    }

    pub(crate) fn size(&self, key: &str) -> u64 {
        storbench_metrics::units::parse_size(self.raw(key)).expect("checked")
    }

    pub(crate) fn int(&self, key: &str) -> u64 {
        self.raw(key).parse().expect("checked")
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        self.raw(key) == "true"
    }

    /// The nested model a network model stands in front of.
    pub(crate) fn backing(&self, capacity: u64) -> Result<Model, ModelError> {
        let base = self.raw("backing").to_string();
        if is_network(&base) {
            return Err(ModelError(format!(
                "backing={base}: a network model's backing is a device (hdd, sata-ssd, nvme, constant)"
            )));
        }
        Spec { base, set: self.nested.clone(), cache: None, array: None }.build(capacity)
    }

    /// An error about this model's parameter.
    pub(crate) fn bad(&self, key: &str, why: &str) -> ModelError {
        ModelError(format!("model {}: {key}={}: {why}", self.name, self.raw(key)))
    }
}

fn check(kind: Kind, v: &str) -> Result<(), String> {
    match kind {
        Kind::Dur => parse_dur(v).map(|_| ()),
        Kind::Rate => parse_rate(v).map(|_| ()),
        Kind::RateOr0 if v.trim() == "0" => Ok(()),
        Kind::RateOr0 => parse_rate(v).map(|_| ()).map_err(|e| format!("{e}, or 0")),
        Kind::Size => storbench_metrics::units::parse_size(v).map(|_| ()),
        Kind::Int => v.parse::<u64>().map(|_| ()).map_err(|_| "give a whole number".into()),
        Kind::Bool => match v {
            "true" | "false" => Ok(()),
            _ => Err("give true or false".into()),
        },
        Kind::Name => builtin(v).map(|_| ()).ok_or_else(|| format!("use one of {}", names())),
    }
}

/// Parses a duration with a unit: `ns`, `us` (or `µs`), `ms`, `s`; `0` alone.
pub fn parse_dur(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a duration: use e.g. 8.5ms, 90us, 1s or 0");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let ns = match unit.trim() {
        "ns" => n,
        "us" | "µs" => n * 1e3,
        "ms" => n * 1e6,
        "s" => n * 1e9,
        "" if n == 0.0 => 0.0,
        _ => return Err(bad()),
    };
    if !ns.is_finite() || !(0.0..=1e13).contains(&ns) {
        return Err(bad());
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Parses a rate in bytes per second: `210MB/s`, `1.2GB/s`, `500kB/s`
/// (decimal units, as datasheets and link speeds are quoted).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a rate: use e.g. 210MB/s, 1.2GB/s");
    let body = t.strip_suffix("/s").ok_or_else(bad)?;
    let split = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (num, unit) = body.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult = match unit.trim() {
        "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return Err(bad()),
    };
    let v = n * mult;
    if !v.is_finite() || v <= 0.0 {
        return Err(bad());
    }
    Ok(v)
}

/// Time to move `len` bytes at `rate` bytes per second.
pub(crate) fn xfer(len: u64, rate: f64) -> Duration {
    Duration::from_nanos((len as f64 / rate * 1e9).round() as u64)
}

/// Granularity of the write-cache bookkeeping (the filesystems above write
/// whole 4 KiB blocks; a partial block counts as a whole one).
pub const CACHE_BLOCK: u64 = 4096;

/// What a model remembers between requests. One struct for all kinds: each
/// uses the fields it needs.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Where the head is (byte offset), for seek distances.
    pub head: u64,
    /// Where the last transfer ended (a request starting here is sequential).
    pub last_end: Option<u64>,
    /// When the last media transfer ended (ns on the daemon's clock): a
    /// disk write continuing it after a pause waits for its sector to come
    /// round again.
    pub last_end_ns: u64,
    /// Blocks (of [`CACHE_BLOCK`]) in the volatile write cache.
    pub dirty: BTreeSet<u64>,
    /// Bytes written since the model started (for an SSD's write cliff).
    pub written: u64,
    /// When a shared link (an SSD's host interface, a network link) is free
    /// again, in ns on the daemon's clock.
    pub link_free_ns: u64,
    /// When an SSD's write direction is free again, where writes have
    /// their own (`write_rate`), in ns.
    pub write_link_free_ns: u64,
    /// When a network model's link is free again (ns).
    pub net_free_ns: u64,
    /// When each of an SSD's write lanes (`write_units`) is free again (ns).
    pub write_lanes: Vec<u64>,
}

impl State {
    /// Bytes in the volatile write cache.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty.len() as u64 * CACHE_BLOCK
    }

    pub(crate) fn mark_dirty(&mut self, offset: u64, len: u64) {
        for b in blocks(offset, len) {
            self.dirty.insert(b);
        }
    }

    pub(crate) fn all_dirty(&self, offset: u64, len: u64) -> bool {
        !self.dirty.is_empty() && blocks(offset, len).all(|b| self.dirty.contains(&b))
    }

    /// Occupies the shared link for `d` from `start_ns`; returns when the
    /// transfer ends.
    /// Takes the first of `lanes` write lanes free at or after `start_ns`
    /// for `d`; returns when the write ends.
    pub(crate) fn use_write_lane(&mut self, lanes: usize, start_ns: u64, d: Duration) -> u64 {
        if self.write_lanes.len() != lanes {
            self.write_lanes = vec![0; lanes];
        }
        let lane = self.write_lanes.iter_mut().min_by_key(|f| **f).expect("lanes >= 1");
        let end = (*lane).max(start_ns) + d.as_nanos() as u64;
        *lane = end;
        end
    }

    pub(crate) fn use_link(&mut self, start_ns: u64, d: Duration) -> u64 {
        occupy(&mut self.link_free_ns, start_ns, d)
    }

    /// As [`State::use_link`], for writes' own direction.
    pub(crate) fn use_write_link(&mut self, start_ns: u64, d: Duration) -> u64 {
        occupy(&mut self.write_link_free_ns, start_ns, d)
    }
}

/// A link free again at `*free_ns` carries a transfer of `d` from
/// `start_ns` or when free, whichever is later: its end, now the link's.
fn occupy(free_ns: &mut u64, start_ns: u64, d: Duration) -> u64 {
    *free_ns = (*free_ns).max(start_ns) + d.as_nanos() as u64;
    *free_ns
}

/// The cache blocks a range touches.
pub fn blocks(offset: u64, len: u64) -> impl Iterator<Item = u64> {
    let first = offset / CACHE_BLOCK;
    let last = if len == 0 { first } else { (offset + len - 1) / CACHE_BLOCK };
    first..=last
}

/// A built model.
#[derive(Clone, Debug)]
pub enum Model {
    /// A hard disk.
    Hdd(Hdd),
    /// A flash drive (SATA or NVMe).
    Ssd(Ssd),
    /// Network storage in front of a device model.
    Net(Box<Net>),
    /// Fixed service times (for testing the daemon, and the floor).
    Constant(Constant),
    /// A cache device in front of a backing device.
    Tiered(Box<Tiered>),
    /// A RAID array of member models.
    Array(Box<Array>),
}

impl Model {
    /// How many requests the device serves at once (a disk's one actuator,
    /// an SSD's channels × dies).
    pub fn units(&self) -> usize {
        match self {
            Model::Hdd(_) => 1,
            Model::Ssd(s) => s.units,
            Model::Net(n) => n.backing.units(),
            Model::Constant(c) => c.units,
            Model::Tiered(t) => t.dev.units(),
            Model::Array(_) => array::ARRAY_QUEUE,
        }
    }

    /// The cache tier, if the medium has one.
    pub fn tier(&self) -> Option<&Tiered> {
        match self {
            Model::Tiered(t) => Some(t),
            _ => None,
        }
    }

    /// The array, if the medium is one (behind a cache tier or a network
    /// too).
    pub fn array(&self) -> Option<&Array> {
        match self {
            Model::Array(a) => Some(a),
            Model::Tiered(t) => t.backing.array(),
            Model::Net(n) => n.backing.array(),
            _ => None,
        }
    }

    /// Picks which of the queued requests a free unit serves next (the
    /// queue is in arrival order; the daemon passes at most the device's
    /// command-queue depth of them). FIFO except where the model reorders
    /// (a disk with NCQ: shortest positioning time first).
    pub fn pick(&self, queue: &[Req], st: &State, start_ns: u64) -> usize {
        match self {
            Model::Hdd(h) => h.pick(queue, st, start_ns),
            Model::Net(n) => n.backing.pick(queue, st, start_ns),
            _ => 0,
        }
    }

    /// How many queued requests the device considers when it picks.
    pub fn queue_window(&self) -> usize {
        match self {
            Model::Hdd(h) => h.ncq_depth,
            Model::Net(n) => n.backing.queue_window(),
            _ => 1,
        }
    }

    /// When a request that left the host at `arrival_ns` reaches the
    /// device (ns on the daemon's clock), updating the state: `arrival_ns`
    /// for a local device, later behind a network (half its round trip and
    /// its payload on the link). The request queues for a unit from then.
    pub fn approach(&self, req: &Req, st: &mut State, arrival_ns: u64) -> u64 {
        match self {
            Model::Net(n) => n.approach(req, st, arrival_ns),
            _ => arrival_ns,
        }
    }

    /// Latency after the device is done that occupies no unit (a network's
    /// way back); zero for a local device.
    pub fn back(&self, _req: &Req) -> Duration {
        match self {
            Model::Net(n) => n.back(),
            _ => Duration::ZERO,
        }
    }

    /// What one request costs on an idle, fresh device: its approach, its
    /// service time and its way back (what `media create` compares with
    /// the daemon's floor).
    pub fn idle_latency(&self, req: &Req) -> Duration {
        match self {
            // A fresh tier is cold: a miss (without touching its state).
            Model::Tiered(t) => t.backing.idle_latency(req),
            Model::Array(a) => a.idle_latency(req),
            // The trip there, the array's own idle latency (on a fresh copy
            // of it), the trip back.
            Model::Net(n) if matches!(n.backing, Model::Array(_)) => {
                let at = n.approach(req, &mut State::default(), 0);
                Duration::from_nanos(at) + n.backing.idle_latency(req) + n.back()
            }
            // A device, or a network in front of one: its service starts when
            // the trip there ends (a disk's rotation depends on that instant).
            _ => {
                let mut st = State::default();
                let at = self.approach(req, &mut st, 0);
                Duration::from_nanos(at) + self.service_time(req, &mut st, at) + self.back(req)
            }
        }
    }

    /// How long the request occupies one unit when it starts at `start_ns`
    /// (ns on the daemon's clock), updating the state. The one function
    /// that is the model (a network's round trip is outside it:
    /// [`Model::approach`], [`Model::back`]).
    pub fn service_time(&self, req: &Req, st: &mut State, start_ns: u64) -> Duration {
        match self {
            Model::Hdd(h) => h.service_time(req, st, start_ns),
            Model::Ssd(s) => s.service_time(req, st, start_ns),
            Model::Net(n) => n.service_time(req, st, start_ns),
            Model::Constant(c) => c.service_time(req, st, start_ns),
            Model::Tiered(t) => t.service_time(req, start_ns),
            Model::Array(a) => a.service_time(req, start_ns),
        }
    }

    /// The device's volatile write cache: its capacity in bytes and whether
    /// it ignores flushes (`lie_on_flush`). `None`: writes are durable when
    /// acknowledged.
    pub fn volatile_cache(&self) -> Option<VolatileCache> {
        match self {
            Model::Hdd(h) => h.cache,
            Model::Ssd(s) => s.cache,
            Model::Net(n) => n.backing.volatile_cache(),
            Model::Constant(c) => c.cache,
            // The flash tier is non-volatile, and what it destages is
            // modelled for its time only.
            Model::Tiered(_) => None,
            Model::Array(a) => a.volatile_cache(),
        }
    }
}

/// A volatile write cache's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolatileCache {
    /// Bytes it holds before it must destage.
    pub capacity: u64,
    /// Acknowledges a flush without draining (some consumer drives do).
    pub lie_on_flush: bool,
}

pub(crate) fn cache_from(p: &Params) -> Result<Option<VolatileCache>, ModelError> {
    if !p.flag("write_cache") {
        return Ok(None);
    }
    let capacity = p.size("cache_size");
    if capacity < CACHE_BLOCK {
        return Err(p.bad("cache_size", "a write cache holds at least 4k"));
    }
    Ok(Some(VolatileCache { capacity, lie_on_flush: p.flag("lie_on_flush") }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_with_units() {
        assert_eq!(parse_dur("8.5ms").unwrap(), Duration::from_micros(8500));
        assert_eq!(parse_dur("90us").unwrap(), Duration::from_micros(90));
        assert_eq!(parse_dur("0").unwrap(), Duration::ZERO);
        assert!(parse_dur("5").unwrap_err().contains("'5' is not a duration"));
        assert_eq!(parse_rate("210MB/s").unwrap(), 210e6);
        assert_eq!(parse_rate("1.2GB/s").unwrap(), 1.2e9);
        assert!(parse_rate("210MB").is_err());
    }

    #[test]
    fn every_builtin_builds_with_its_defaults() {
        for b in builtins() {
            let m = Spec { base: b.name.into(), ..Spec::default() }.build(8 << 30).unwrap();
            assert!(m.units() >= 1, "{}", b.name);
        }
    }

    #[test]
    fn sets_are_checked_against_the_model() {
        let e = Spec::parse("hdd", &["rpm=fast".into()]).unwrap_err().0;
        assert!(e.contains("--set rpm=fast"), "{e}");
        let e = Spec::parse("hdd", &["rtt=1ms".into()]).unwrap_err().0;
        assert!(e.contains("has no parameter rtt"), "{e}");
        let e = Spec::parse("floppy", &[]).unwrap_err().0;
        assert!(e.contains("--model floppy: use one of hdd"), "{e}");
        let s = Spec::parse("gbe-nas", &["rtt=0.5ms".into(), "backing.rpm=5400".into()]).unwrap();
        assert_eq!(s.set["rtt"], "0.5ms");
        let e = Spec::parse("hdd", &["backing.rpm=5400".into()]).unwrap_err().0;
        assert!(e.contains("no backing device"), "{e}");
    }

    #[test]
    fn a_user_file_is_a_base_plus_overrides() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("mine.toml");
        std::fs::write(&f, "base = \"hdd\"\nrpm = 5400\nwrite_cache = false\n").unwrap();
        let s = Spec::parse(f.to_str().unwrap(), &["avg_seek=12ms".into()]).unwrap();
        assert_eq!(s.base, "hdd");
        assert_eq!(s.set["rpm"], "5400");
        assert_eq!(s.set["avg_seek"], "12ms");
        let Model::Hdd(h) = s.build(8 << 30).unwrap() else { panic!("hdd") };
        assert_eq!(h.rev, Duration::from_nanos(11_111_111));
        assert_eq!(h.cache, None);
        std::fs::write(&f, "rpm = 5400\n").unwrap();
        assert!(Spec::parse(f.to_str().unwrap(), &[]).unwrap_err().0.contains("needs base"));
    }

    #[test]
    fn a_network_model_file_may_put_an_array_behind_its_link() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("nas.toml");
        let nas = "base = \"gbe-nas\"\nrtt = \"0.4ms\"\n\n[array]\nlayout = \"raid0\"\ndisks = 6\n\
                   member = \"constant\"\nmember_set = { read = \"10ms\", units = 1 }\n";
        std::fs::write(&f, nas).unwrap();
        let s = Spec::parse(f.to_str().unwrap(), &["link_rate=65.536MB/s".into()]).unwrap();
        assert_eq!(s.array.as_ref().unwrap().disks, 6);
        assert!(
            s.label().starts_with("gbe-nas (link_rate=65.536MB/s, rtt=0.4ms) before raid0 of 6"),
            "{}",
            s.label()
        );
        let m = s.build(1 << 30).unwrap();
        let Model::Net(n) = &m else { panic!("a network in front: {m:?}") };
        assert_eq!(n.backing.units(), array::ARRAY_QUEUE);
        assert!(m.array().is_some());
        // Idle: the round trip, 4 KiB on the link (62.5 µs), one member's read.
        let r = Req { op: Op::Read, offset: 0, len: 4096 };
        assert_eq!(m.idle_latency(&r), Duration::from_nanos(400_000 + 62_500 + 10_000_000));
        // ... and idle_latency left the array's own timelines alone.
        assert_eq!(m.array().unwrap().take(0).members[0].reads, 0);
        let bad = |text: &str, sets: &[&str], want: &str| {
            std::fs::write(&f, text).unwrap();
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            let e = Spec::parse(f.to_str().unwrap(), &sets).unwrap_err().0;
            assert!(e.contains(want), "{text}: wanted '{want}' in {e}");
        };
        bad(&nas.replace("gbe-nas", "hdd"), &[], "an array stands behind a network model");
        bad(nas, &["backing.rpm=5400"], "the array is gbe-nas's backing");
        bad(&nas.replace("disks = 6", "disks = 6\nstripe = 1"), &[], "[array] stripe: unknown key");
        bad(&nas.replace("raid0", "raid5").replace("disks = 6", "disks = 2"), &[], "--array raid5 --disks 2");
        let e = Spec { base: "hdd".into(), ..s }.build(1 << 30).unwrap_err().0;
        assert!(e.contains("only a network model (gbe-nas, fc-san)"), "{e}");
    }
}
