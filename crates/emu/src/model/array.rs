//! RAID arrays of modelled devices: a layout (raid0, raid1/mirror, raid10,
//! raid5, raid6, raid50, raid60) over members that are any device model,
//! each member with its own units and timeline, so the array's parallelism
//! is its members'. The array prices a request by the member I/O its layout
//! makes of it, booked on the members' timelines; the image stays one file
//! (data is not striped physically), so a degraded array still returns the
//! right bytes and only its timing changes.
//!
//! The arithmetic, written down so a test (and a reader) can recount it:
//! - the logical space is cut into stripe units across the array's legs
//!   (a disk for raid0, a mirror pair for raid10, a parity group for
//!   raid50/60; one leg for raid1, raid5, raid6): unit `k` goes to leg
//!   `k mod legs`. The unit is the chunk, except over parity groups, where
//!   it is the group's full stripe (chunk × data disks), as controllers
//!   build RAID 50 and 60;
//! - within a parity group of `m` members with `p` parity chunks per
//!   stripe, chunk `c` of the group is data chunk `c mod d` of stripe
//!   `c / d` (`d = m - p`); parity rotates left-symmetric (stripe `s` has P
//!   on member `m - 1 - s mod m`, Q after it, data after the parity);
//! - an I/O splits at chunk boundaries; each piece is one member request
//!   (mirror writes: one per copy; mirror reads: the copy whose unit frees
//!   first, alternating on ties);
//! - a write that covers a whole stripe writes its data and parity chunks
//!   without reading; a partial-stripe write reads before it writes, by the
//!   cheaper of read-modify-write (old data of the pieces and old parity)
//!   and reconstruct-write (the stripe's other data), read-modify-write on a
//!   tie, as Linux md chooses: a 4 KiB write on a RAID 5 of four or more is
//!   2 reads + 2 writes, its writes start once its reads are done;
//! - degraded (a member failed): a read of the failed member's chunk reads
//!   the same range from the stripe's surviving members (`d` of them) and
//!   reconstructs; a write whose data member failed computes parity from
//!   the others (reconstruct-write); a failed member is never written;
//! - rebuild: at `rate` bytes per second of the failed member's space, the
//!   array reads a step from the surviving members of its group (or its
//!   mirror) and writes it to the replacement, on the same timelines the
//!   workload uses, so each competes with the other; what is rebuilt reads
//!   normally;
//! - a controller write cache (`--controller-cache`) in front: writes are
//!   acknowledged from it and destaged to the layout (coalesced up to a
//!   stripe unit: a sequential stream becomes full-stripe writes) while the
//!   members have time (`idle`) or only once it is over half full (`full`);
//!   with a battery a flush returns at once, without one it destages all
//!   and flushes the members, and a power cut loses what it held.
//!
//! Members serve their requests in arrival order on their timelines (a
//! member disk's NCQ reordering is not modelled inside an array).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use storbench_metrics::units::format_size;

use super::{xfer, Model, ModelError, Op, Req, Spec, State, VolatileCache, CACHE_BLOCK};

/// The layouts, as `--array` takes them.
pub const LAYOUTS: &str = "raid0, raid1 (mirror), raid10, raid5, raid6, raid50, raid60";

/// A member's network link (`--member-link up=0.1ms,down=0.1ms,bw=25Gbit`):
/// each member request crosses it, as a write to a second host does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// One-way latency to the member, ns.
    pub up_ns: u64,
    /// One-way latency back, ns.
    pub down_ns: u64,
    /// Payload rate, bytes per second.
    pub bytes_per_s: u64,
}

/// A controller write cache (`--controller-cache SIZE --cache-battery on|off`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerSpec {
    /// Bytes.
    pub size: u64,
    /// Battery- (or flash-) backed: contents survive a power cut.
    pub battery: bool,
    /// `idle` (destage whenever dirty) or `full` (only above half full).
    pub destage: String,
    /// What a write acknowledged from the cache, or a read hit, costs, ns.
    pub latency_ns: u64,
}

/// An array as the user asked for it: stored in the medium's [`Spec`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// raid0, raid1, raid10, raid5, raid6, raid50, raid60.
    pub layout: String,
    /// Members.
    pub disks: usize,
    /// Stripe unit (chunk) in bytes.
    pub chunk: u64,
    /// Parity groups of raid50/raid60 (else 1).
    pub groups: usize,
    /// Every member's model (a file's contents are resolved into it).
    pub member: Box<Spec>,
    /// A network link in front of each member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkSpec>,
    /// A controller write cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerSpec>,
}

/// Array options as a user writes them (`media create --array …`, a plan's
/// `array` keys); `None` takes the default.
#[derive(Clone, Debug, Default)]
pub struct ArrayOptions<'a> {
    /// `--array`.
    pub layout: &'a str,
    /// `--disks`.
    pub disks: Option<usize>,
    /// `--chunk` (default 64k), bytes.
    pub chunk: Option<u64>,
    /// `--groups` (raid50/60; default 2).
    pub groups: Option<usize>,
    /// `--member` (default sata-ssd): a built-in name or a TOML file.
    pub member: Option<&'a str>,
    /// `--member-set KEY=VALUE`.
    pub member_sets: &'a [String],
    /// `--member-link up=…,down=…,bw=…`.
    pub link: Option<&'a str>,
    /// `--controller-cache SIZE`, bytes.
    pub cache: Option<u64>,
    /// `--cache-battery on|off` (default on): [`parse_battery`].
    pub battery: Option<bool>,
    /// `--controller-destage idle|full` (default idle).
    pub destage: Option<Destage>,
}

/// When a controller cache writes its dirty blocks to the members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destage {
    /// Whenever the members have time.
    Idle,
    /// Only above half full.
    Full,
}

impl Destage {
    /// As a model file and a medium's spec write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Destage::Idle => "idle",
            Destage::Full => "full",
        }
    }
}

/// `--controller-destage`'s parser (and a plan's `controller_destage`):
/// `idle` or `full`; the error names the value.
pub fn parse_destage(s: &str) -> Result<Destage, String> {
    match s.trim() {
        "idle" => Ok(Destage::Idle),
        "full" => Ok(Destage::Full),
        _ => Err(format!("'{s}': use idle or full")),
    }
}

/// `--cache-battery`'s parser (and a plan's `cache_battery`): `on` (also
/// `true`, `yes`) or `off` (`false`, `no`); the error names the value.
pub fn parse_battery(s: &str) -> Result<bool, String> {
    match s.trim() {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("'{s}': use on or off")),
    }
}

/// Parses `up=0.1ms,down=0.1ms,bw=25Gbit` (bw also as a rate: `3GB/s`).
pub fn parse_link(s: &str) -> Result<LinkSpec, ModelError> {
    let bad = |why: String| ModelError(format!("--member-link {s}: {why}"));
    let (mut up, mut down, mut bw) = (None, None, None);
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| bad("write up=0.1ms,down=0.1ms,bw=25Gbit".into()))?;
        match k.trim() {
            "up" => up = Some(super::parse_dur(v).map_err(bad)?),
            "down" => down = Some(super::parse_dur(v).map_err(bad)?),
            "bw" => {
                let v = v.trim();
                let rate = if let Some(n) = v.strip_suffix("Gbit") {
                    n.parse::<f64>()
                        .map(|n| n * 1e9 / 8.0)
                        .map_err(|_| bad(format!("bw={v}: not a number")))?
                } else if let Some(n) = v.strip_suffix("Mbit") {
                    n.parse::<f64>()
                        .map(|n| n * 1e6 / 8.0)
                        .map_err(|_| bad(format!("bw={v}: not a number")))?
                } else {
                    super::parse_rate(v).map_err(bad)?
                };
                if !(rate.is_finite() && rate >= 1.0) {
                    return Err(bad(format!("bw={v}: give a positive rate")));
                }
                bw = Some(rate as u64);
            }
            k => return Err(bad(format!("unknown key {k}: use up, down and bw"))),
        }
    }
    Ok(LinkSpec {
        up_ns: up.unwrap_or_default().as_nanos() as u64,
        down_ns: down.unwrap_or_default().as_nanos() as u64,
        bytes_per_s: bw.ok_or_else(|| bad("give bw= (e.g. bw=25Gbit or bw=3GB/s)".into()))?,
    })
}

impl ArraySpec {
    /// A spec from options as written, checked.
    pub fn from_options(o: &ArrayOptions<'_>) -> Result<ArraySpec, ModelError> {
        let layout = match o.layout {
            "mirror" | "raid1" => "raid1",
            l @ ("raid0" | "raid10" | "raid5" | "raid6" | "raid50" | "raid60") => l,
            l => return Err(ModelError(format!("--array {l}: use one of {LAYOUTS}"))),
        }
        .to_string();
        let disks = o.disks.ok_or_else(|| ModelError(format!("--array {layout}: give --disks N")))?;
        let chunk = o.chunk.unwrap_or(64 << 10);
        if !chunk.is_power_of_two() || !(4096..=(16 << 20)).contains(&chunk) {
            return Err(ModelError(format!(
                "--chunk {}: give a power of two from 4k to 16M (default 64k)",
                format_size(chunk)
            )));
        }
        let member_name = o.member.unwrap_or("sata-ssd");
        let member = Spec::parse(member_name, o.member_sets).map_err(|e| {
            ModelError(e.0.replacen("--model", "--member", 1).replacen("--set", "--member-set", 1))
        })?;
        let link = o.link.map(parse_link).transpose()?;
        let controller = match o.cache {
            None => {
                if o.battery.is_some() || o.destage.is_some() {
                    return Err(ModelError(
                        "--cache-battery and --controller-destage need --controller-cache SIZE".into(),
                    ));
                }
                None
            }
            Some(size) => {
                if size < 1 << 20 {
                    return Err(ModelError(format!(
                        "--controller-cache {}: give at least 1M (controllers carry 256M to 8G)",
                        format_size(size)
                    )));
                }
                Some(ControllerSpec {
                    size,
                    battery: o.battery.unwrap_or(true),
                    destage: o.destage.unwrap_or(Destage::Idle).as_str().to_string(),
                    latency_ns: CONTROLLER_LATENCY_NS,
                })
            }
        };
        let spec = ArraySpec { layout, disks, chunk, groups: 1, member: Box::new(member), link, controller };
        let groups = match spec.layout.as_str() {
            "raid50" | "raid60" => o.groups.unwrap_or(2),
            _ => {
                if let Some(g) = o.groups.filter(|&g| g != 1) {
                    return Err(ModelError(format!(
                        "--groups {g}: only raid50 and raid60 have groups of parity disks"
                    )));
                }
                1
            }
        };
        let spec = ArraySpec { groups, ..spec };
        spec.check()?;
        Ok(spec)
    }

    /// Checks the layout against the disk count and the chunk.
    pub fn check(&self) -> Result<(), ModelError> {
        let (n, l, g) = (self.disks, self.layout.as_str(), self.groups);
        let c = self.chunk;
        if !c.is_power_of_two() || !(4096..=(16 << 20)).contains(&c) {
            return Err(ModelError(format!("--chunk {c}: give a power of two from 4k to 16M (default 64k)")));
        }
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(ModelError(format!("--array {l} --disks {n}: {l} needs {what}")))
            }
        };
        match l {
            "raid0" => need((1..=256).contains(&n), "1 to 256 disks"),
            "raid1" => need((2..=8).contains(&n), "2 to 8 disks (copies)"),
            "raid10" => need(n >= 4 && n % 2 == 0 && n <= 256, "an even number of disks, at least 4"),
            "raid5" => need((3..=64).contains(&n), "at least 3 disks (2 data + parity), at most 64"),
            "raid6" => need((4..=64).contains(&n), "at least 4 disks (2 data + 2 parity), at most 64"),
            "raid50" | "raid60" => {
                let per = if l == "raid50" { 3 } else { 4 };
                if g < 2 || n % g != 0 || n / g < per {
                    return Err(ModelError(format!(
                        "--array {l} --disks {n} --groups {g}: {l} needs at least 2 groups of {per} or more disks, the same number in each"
                    )));
                }
                Ok(())
            }
            _ => Err(ModelError(format!("--array {l}: use one of {LAYOUTS}"))),
        }
    }

    /// `raid10 of 6 × sata-ssd, 64k chunk`.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} of {} × {}, {} chunk",
            self.layout,
            self.disks,
            self.member.label(),
            format_size(self.chunk)
        );
        if self.groups > 1 {
            s.push_str(&format!(", {} groups", self.groups));
        }
        if let Some(l) = &self.link {
            s.push_str(&format!(
                ", member link {} µs up {} µs down {} MB/s",
                l.up_ns / 1000,
                l.down_ns / 1000,
                l.bytes_per_s / 1_000_000
            ));
        }
        if let Some(c) = &self.controller {
            s.push_str(&format!(
                ", {} controller cache ({} battery, destage {})",
                format_size(c.size),
                if c.battery { "with" } else { "no" },
                c.destage
            ));
        }
        s
    }

    /// Failures the layout survives in one group or mirror (0 for raid0).
    fn redundancy(&self) -> usize {
        match self.layout.as_str() {
            "raid0" => 0,
            "raid1" => self.disks - 1,
            "raid10" | "raid5" | "raid50" => 1,
            _ => 2,
        }
    }

    /// Checks that disk `disk` may fail given the array's state: refuses a
    /// disk that does not exist, one already failed, a raid0, and a failure
    /// the layout does not survive (a second disk of a raid5, of a raid10's
    /// mirror, of a raid50's group).
    pub fn check_fail(&self, status: &ArrayStatus, disk: usize) -> Result<(), ModelError> {
        if disk >= self.disks {
            return Err(ModelError(format!("--disk {disk}: the array has disks 0 to {}", self.disks - 1)));
        }
        if self.redundancy() == 0 {
            return Err(ModelError(format!(
                "--disk {disk}: a {} has no redundancy; failing a disk loses the array",
                self.layout
            )));
        }
        if status.failed.contains(&disk) {
            return Err(ModelError(format!("--disk {disk}: disk {disk} has failed already")));
        }
        let g = geometry(self);
        let set = g.set_of(disk);
        let down = status.failed.iter().filter(|f| set.contains(f)).count();
        if down + 1 > self.redundancy() {
            return Err(ModelError(format!(
                "--disk {disk}: the {} survives {} failed disk{} per {}; disk{} {} failed already",
                self.layout,
                self.redundancy(),
                if self.redundancy() == 1 { "" } else { "s" },
                match self.layout.as_str() {
                    "raid10" | "raid1" => "mirror",
                    "raid50" | "raid60" => "group",
                    _ => "array",
                },
                if down == 1 { "" } else { "s" },
                status
                    .failed
                    .iter()
                    .filter(|f| set.contains(f))
                    .map(|f| f.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(())
    }
}

/// A controller's cache write or hit: not from a datasheet. A write-back
/// controller acknowledges from DRAM behind a PCIe transfer and its
/// firmware, tens of µs; 20 µs is taken and written down as an assumption.
pub const CONTROLLER_LATENCY_NS: u64 = 20_000;

/// The array's state as the daemon keeps it (and writes to
/// `STATE/emu/NAME.array`, so it survives a restart): failed disks and the
/// rebuild.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrayStatus {
    /// `healthy`, `degraded`, `rebuilding` or `rebuild paused`.
    pub state: String,
    /// Failed members (being rebuilt, if a rebuild runs).
    pub failed: Vec<usize>,
    /// The rebuild's rate, bytes per second of member space (0: none asked).
    pub rebuild_rate: u64,
    /// Member bytes rebuilt.
    pub rebuilt: u64,
    /// Bytes per member.
    pub member_size: u64,
    /// A rebuild was asked for and is paused (Ctrl-C of `media rebuild`).
    pub paused: bool,
    /// The last control command applied (its sequence number).
    pub applied: u64,
    /// The array's label, so a stale file of another medium is ignored.
    #[serde(default)]
    pub label: String,
    /// Why the last command was refused (empty: applied).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl ArrayStatus {
    /// Progress of the rebuild, 0 to 1.
    pub fn progress(&self) -> f64 {
        if self.member_size == 0 {
            0.0
        } else {
            (self.rebuilt as f64 / self.member_size as f64).min(1.0)
        }
    }

    fn named(mut self) -> ArrayStatus {
        self.state = if self.failed.is_empty() {
            "healthy"
        } else if self.rebuild_rate > 0 && self.paused {
            "rebuild paused"
        } else if self.rebuild_rate > 0 {
            "rebuilding"
        } else {
            "degraded"
        }
        .to_string();
        self
    }
}

/// A command to the daemon (`media fail`, `media rebuild`, Ctrl-C of it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum ArrayCommand {
    /// Fail a member.
    Fail {
        /// Which.
        disk: usize,
        /// Sequence number.
        seq: u64,
    },
    /// Rebuild the failed members at a rate (bytes/s).
    Rebuild {
        /// Bytes per second.
        rate: u64,
        /// Sequence number.
        seq: u64,
    },
    /// Pause the rebuild where it is.
    Pause {
        /// Sequence number.
        seq: u64,
    },
}

/// Per-member counts since the last take.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberCounts {
    /// Member reads.
    pub reads: u64,
    /// Member writes.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Unit time in service, ns (summed over the member's units).
    pub busy_ns: u64,
    /// Time waiting for a unit, ns (summed over requests).
    pub wait_ns: u64,
    /// The member's units (to turn busy into a share).
    pub units: u64,
}

/// One second of an array: its state and each member's counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArraySnapshot {
    /// The state.
    pub status: ArrayStatus,
    /// Per member, in disk order.
    pub members: Vec<MemberCounts>,
    /// Controller cache: dirty bytes now.
    #[serde(default)]
    pub cache_dirty: u64,
}

/// One leg of the stripe.
#[derive(Clone, Debug)]
enum Leg {
    Disk(usize),
    Mirror(Vec<usize>),
    Parity { members: Vec<usize>, p: usize },
}

#[derive(Clone, Debug)]
struct Geometry {
    legs: Vec<Leg>,
    /// Bytes of a leg's stripe unit.
    unit: u64,
    chunk: u64,
}

fn geometry(s: &ArraySpec) -> Geometry {
    let n = s.disks;
    let parity = |members: Vec<usize>, p| Leg::Parity { members, p };
    let (legs, unit) = match s.layout.as_str() {
        "raid0" => ((0..n).map(Leg::Disk).collect(), s.chunk),
        "raid1" => (vec![Leg::Mirror((0..n).collect())], s.chunk),
        "raid10" => ((0..n / 2).map(|i| Leg::Mirror(vec![2 * i, 2 * i + 1])).collect(), s.chunk),
        "raid5" => (vec![parity((0..n).collect(), 1)], s.chunk * (n as u64 - 1)),
        "raid6" => (vec![parity((0..n).collect(), 2)], s.chunk * (n as u64 - 2)),
        _ => {
            let p = if s.layout == "raid50" { 1 } else { 2 };
            let m = n / s.groups;
            let legs = (0..s.groups).map(|g| parity((g * m..(g + 1) * m).collect(), p)).collect();
            (legs, s.chunk * (m - p) as u64)
        }
    };
    Geometry { legs, unit, chunk: s.chunk }
}

impl Geometry {
    /// The members that share redundancy with `disk` (its mirror or group).
    fn set_of(&self, disk: usize) -> Vec<usize> {
        for l in &self.legs {
            match l {
                Leg::Disk(d) if *d == disk => return vec![*d],
                Leg::Mirror(ms) | Leg::Parity { members: ms, .. } if ms.contains(&disk) => return ms.clone(),
                _ => {}
            }
        }
        vec![disk]
    }

    /// Splits a logical range into (leg, leg offset, len) at unit boundaries.
    fn pieces(&self, offset: u64, len: u64) -> Vec<(usize, u64, u64)> {
        let mut out = Vec::new();
        let (mut at, end) = (offset, offset + len);
        let legs = self.legs.len() as u64;
        while at < end {
            let k = at / self.unit;
            let within = at % self.unit;
            let n = (self.unit - within).min(end - at);
            out.push(((k % legs) as usize, (k / legs) * self.unit + within, n));
            at += n;
        }
        out
    }
}

/// A member I/O: member, op, member offset, length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberIo {
    /// Which member.
    pub disk: usize,
    /// Read or write (or flush).
    pub op: Op,
    /// Offset on the member.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// What one array request becomes: reads first, then writes (a write that
/// reads waits for its reads).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Issued at once.
    pub first: Vec<MemberIo>,
    /// Issued when `first` is done.
    pub then: Vec<MemberIo>,
}

struct Member {
    model: Model,
    state: State,
    units: Vec<u64>,
    link_free: u64,
    counts: MemberCounts,
}

struct ArrayState {
    members: Vec<Member>,
    status: ArrayStatus,
    /// Mirror read tie-breaker.
    rr: usize,
    /// Next rebuild step may start (ns).
    rebuild_next: u64,
    /// Controller cache: dirty 4 KiB blocks of the logical space.
    dirty: BTreeSet<u64>,
    destage_free: u64,
    cursor: u64,
}

/// A built array.
#[derive(Clone)]
pub struct Array {
    /// Its spec.
    pub spec: ArraySpec,
    geo: Geometry,
    /// Bytes per member.
    pub member_size: u64,
    /// Member model (for the volatile cache shape).
    member: Model,
    state: Arc<Mutex<ArrayState>>,
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Array").field("spec", &self.spec).finish_non_exhaustive()
    }
}

/// Concurrency the array takes from the host (a controller's queue): above
/// the loop device's 128, so requests queue at the members, not before.
pub const ARRAY_QUEUE: usize = 256;

impl Array {
    /// An array of `capacity` bytes.
    pub fn new(spec: &ArraySpec, capacity: u64) -> Result<Array, ModelError> {
        spec.check()?;
        let geo = geometry(spec);
        let legs = geo.legs.len() as u64;
        let rows = capacity.div_ceil(geo.unit * legs).max(1);
        let member_size = match &geo.legs[0] {
            Leg::Parity { .. } => rows * spec.chunk,
            _ => rows * geo.unit,
        };
        let member = spec.member.build(member_size)?;
        let a = Array {
            spec: spec.clone(),
            geo,
            member_size,
            member: member.clone(),
            state: Arc::new(Mutex::new(ArrayState {
                members: Vec::new(),
                status: ArrayStatus::default(),
                rr: 0,
                rebuild_next: 0,
                dirty: BTreeSet::new(),
                destage_free: 0,
                cursor: 0,
            })),
        };
        *a.lock() = a.empty_state()?;
        Ok(a)
    }

    fn empty_state(&self) -> Result<ArrayState, ModelError> {
        let mut members = Vec::new();
        for _ in 0..self.spec.disks {
            let model = self.spec.member.build(self.member_size)?;
            let units = vec![0; model.units()];
            let counts = MemberCounts { units: units.len() as u64, ..MemberCounts::default() };
            members.push(Member { model, state: State::default(), units, link_free: 0, counts });
        }
        Ok(ArrayState {
            members,
            status: ArrayStatus {
                member_size: self.member_size,
                label: self.spec.label(),
                ..ArrayStatus::default()
            }
            .named(),
            rr: 0,
            rebuild_next: 0,
            dirty: BTreeSet::new(),
            destage_free: 0,
            cursor: 0,
        })
    }

    /// The same array with a state of its own (fresh, healthy).
    pub fn fresh(&self) -> Array {
        let mut a = self.clone();
        a.state = Arc::new(Mutex::new(self.empty_state().expect("built once")));
        a
    }

    fn lock(&self) -> MutexGuard<'_, ArrayState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The volatile cache a power cut can lose: the controller's without a
    /// battery; none with one; else the members' own (a flush reaches them).
    pub fn volatile_cache(&self) -> Option<VolatileCache> {
        match &self.spec.controller {
            Some(c) if c.battery => None,
            Some(c) => Some(VolatileCache { capacity: c.size, lie_on_flush: false }),
            None => self.member.volatile_cache(),
        }
    }

    /// Whether member `disk`'s range at `offset` is unavailable (failed and
    /// not yet rebuilt there).
    fn down(st: &ArrayStatus, disk: usize, offset: u64, len: u64) -> bool {
        st.failed.contains(&disk) && !(st.rebuild_rate > 0 && offset + len <= st.rebuilt)
    }

    /// What a request becomes at the members, given the array's state
    /// (`rr` breaks mirror ties: `pick(copies)` chooses a copy).
    fn plan(&self, req: &Req, status: &ArrayStatus, pick: &mut dyn FnMut(&[usize]) -> usize) -> Plan {
        let mut plan = Plan::default();
        let chunk = self.geo.chunk;
        for (leg, loff, len) in self.geo.pieces(req.offset, req.len) {
            match &self.geo.legs[leg] {
                Leg::Disk(d) => plan.first.push(MemberIo { disk: *d, op: req.op, offset: loff, len }),
                Leg::Mirror(ms) => {
                    let alive: Vec<usize> =
                        ms.iter().copied().filter(|&m| !Self::down(status, m, loff, len)).collect();
                    if req.op == Op::Read {
                        let d = pick(&alive);
                        plan.first.push(MemberIo { disk: d, op: Op::Read, offset: loff, len });
                    } else {
                        for d in alive {
                            plan.first.push(MemberIo { disk: d, op: req.op, offset: loff, len });
                        }
                    }
                }
                Leg::Parity { members, p } => {
                    self.plan_parity(req.op, members, *p, loff, len, chunk, status, &mut plan)
                }
            }
        }
        plan
    }

    /// A parity group's share of a request: its pieces grouped by stripe,
    /// each stripe planned as its operation makes it cost.
    #[allow(clippy::too_many_arguments)]
    fn plan_parity(
        &self,
        op: Op,
        members: &[usize],
        p: usize,
        loff: u64,
        len: u64,
        chunk: u64,
        status: &ArrayStatus,
        plan: &mut Plan,
    ) {
        let d = members.len() - p;
        // Pieces by stripe: (stripe, data index, offset in chunk, len).
        let mut pieces: Vec<(u64, usize, u64, u64)> = Vec::new();
        let (mut at, end) = (loff, loff + len);
        while at < end {
            let c = at / chunk;
            let within = at % chunk;
            let n = (chunk - within).min(end - at);
            pieces.push((c / d as u64, (c % d as u64) as usize, within, n));
            at += n;
        }
        for group in pieces.chunk_by(|a, b| a.0 == b.0) {
            let st = Stripe::new(members, p, chunk, group[0].0, status);
            match op {
                Op::Read => st.read(group, plan),
                Op::Write if group.iter().map(|g| g.3).sum::<u64>() == chunk * d as u64 => {
                    st.full_write(plan)
                }
                Op::Write => st.partial_write(group, plan),
                _ => {
                    for &(_, j, off, n) in group {
                        let dm = st.data_member(j);
                        if !st.down(dm, off, n) {
                            plan.first.push(MemberIo { disk: dm, op, offset: st.row() + off, len: n });
                        }
                    }
                }
            }
        }
    }

    /// What a request becomes at the members on the array as it is now
    /// (mirror reads alternate); for tests and `media` explanations.
    pub fn member_ios(&self, req: &Req) -> Plan {
        let g = self.lock();
        let status = g.status.clone();
        drop(g);
        let mut rr = 0usize;
        self.plan(req, &status, &mut |c: &[usize]| {
            rr += 1;
            c[(rr - 1) % c.len()]
        })
    }

    /// Books a member I/O no earlier than `at`; returns when it is done.
    fn book(&self, s: &mut ArrayState, io: &MemberIo, at: u64) -> u64 {
        let link = self.spec.link.clone();
        let mb = &mut s.members[io.disk];
        let mut t = at;
        if let Some(l) = &link {
            t += l.up_ns;
            if matches!(io.op, Op::Read | Op::Write) {
                let begin = mb.link_free.max(t);
                mb.link_free = begin + xfer(io.len, l.bytes_per_s as f64).as_nanos() as u64;
                t = mb.link_free;
            }
        }
        let (u, free) = mb.units.iter().copied().enumerate().min_by_key(|(_, f)| *f).expect("a unit");
        let start = free.max(t);
        let req = Req { op: io.op, offset: io.offset, len: io.len };
        let svc = mb.model.service_time(&req, &mut mb.state, start).as_nanos() as u64;
        mb.units[u] = start + svc;
        let c = &mut mb.counts;
        match io.op {
            Op::Read => {
                c.reads += 1;
                c.read_bytes += io.len;
            }
            Op::Write => {
                c.writes += 1;
                c.write_bytes += io.len;
            }
            _ => {}
        }
        c.busy_ns += svc;
        c.wait_ns += start - t;
        start + svc + link.map_or(0, |l| l.down_ns)
    }

    /// Books a plan from `at`; returns when it is done.
    fn run_plan(&self, s: &mut ArrayState, plan: &Plan, at: u64) -> u64 {
        let mut end = at;
        for io in &plan.first {
            end = end.max(self.book(s, io, at));
        }
        let then_at = end;
        for io in &plan.then {
            end = end.max(self.book(s, io, then_at));
        }
        end
    }

    /// Plans and books a request on the layout.
    fn layout_io(&self, s: &mut ArrayState, req: &Req, at: u64) -> u64 {
        let status = s.status.clone();
        // Mirror reads: the copy whose unit frees first; ties alternate.
        let plan = {
            let members = &s.members;
            let mut rr = s.rr;
            let p = self.plan(req, &status, &mut |copies: &[usize]| {
                let earliest = |d: usize| members[d].units.iter().copied().min().unwrap_or(0).max(at);
                let best = copies.iter().map(|&d| earliest(d)).min().expect("a copy alive");
                let tied: Vec<usize> = copies.iter().copied().filter(|&d| earliest(d) == best).collect();
                rr += 1;
                tied[rr % tied.len()]
            });
            s.rr = rr;
            p
        };
        self.run_plan(s, &plan, at)
    }

    /// The rebuild's steps and the controller's destage up to `now`.
    fn catch_up(&self, s: &mut ArrayState, now: u64) {
        self.rebuild_until(s, now);
        let Some(c) = self.spec.controller.clone() else { return };
        let threshold = if c.destage == "full" { c.size / 2 / CACHE_BLOCK } else { 0 };
        while s.destage_free < now && s.dirty.len() as u64 > threshold {
            let at = s.destage_free;
            s.destage_free = self.destage_one(s, at).max(at + 1);
        }
    }

    /// Writes one run of dirty blocks (contiguous, within one stripe unit
    /// window of the layout, from the cursor on) to the layout.
    fn destage_one(&self, s: &mut ArrayState, at: u64) -> u64 {
        let first = s.dirty.range(s.cursor..).next().or_else(|| s.dirty.iter().next()).copied();
        let Some(first) = first else { return at };
        let window = (self.geo.unit / CACHE_BLOCK).max(1);
        let wend = (first / window + 1) * window;
        let mut last = first;
        while last + 1 < wend && s.dirty.contains(&(last + 1)) {
            last += 1;
        }
        for b in first..=last {
            s.dirty.remove(&b);
        }
        s.cursor = last + 1;
        let req = Req { op: Op::Write, offset: first * CACHE_BLOCK, len: (last - first + 1) * CACHE_BLOCK };
        self.layout_io(s, &req, at)
    }

    fn rebuild_until(&self, s: &mut ArrayState, now: u64) {
        let st = &s.status;
        if st.failed.is_empty() || st.rebuild_rate == 0 || st.paused {
            return;
        }
        let step = (1u64 << 20).max(self.spec.chunk);
        let gap = (step as f64 / st.rebuild_rate as f64 * 1e9) as u64;
        while s.rebuild_next <= now && s.status.rebuilt < self.member_size {
            let at = s.rebuild_next;
            let off = s.status.rebuilt;
            let n = step.min(self.member_size - off);
            let failed = s.status.failed.clone();
            let mut end = at;
            let mut sources = BTreeSet::new();
            for &f in &failed {
                let set = self.geo.set_of(f);
                let need = match self.geo.legs.iter().find(|l| match l {
                    Leg::Mirror(ms) | Leg::Parity { members: ms, .. } => ms.contains(&f),
                    Leg::Disk(_) => false,
                }) {
                    Some(Leg::Parity { members, p }) => members.len() - p,
                    _ => 1,
                };
                for o in set.into_iter().filter(|o| !failed.contains(o)).take(need) {
                    sources.insert(o);
                }
            }
            for &o in &sources {
                end = end.max(self.book(s, &MemberIo { disk: o, op: Op::Read, offset: off, len: n }, at));
            }
            let wat = end;
            for &f in &failed {
                end = end.max(self.book(s, &MemberIo { disk: f, op: Op::Write, offset: off, len: n }, wat));
            }
            s.status.rebuilt = off + n;
            s.rebuild_next = (at + gap).max(end);
        }
        if s.status.rebuilt >= self.member_size {
            s.status.failed.clear();
            s.status.rebuild_rate = 0;
            s.status.rebuilt = 0;
            s.status.paused = false;
            s.status = std::mem::take(&mut s.status).named();
        }
    }

    /// How long the request occupies the array from `start_ns`.
    pub(crate) fn service_time(&self, req: &Req, start_ns: u64) -> Duration {
        let mut g = self.lock();
        let s = &mut *g;
        self.catch_up(s, start_ns);
        let end = match (&self.spec.controller, req.op) {
            (Some(c), Op::Write) => {
                let lat = c.latency_ns;
                let new: Vec<u64> =
                    super::blocks(req.offset, req.len).filter(|b| !s.dirty.contains(b)).collect();
                let cap = c.size / CACHE_BLOCK;
                let mut t = start_ns;
                // Full: the write waits while runs destage to make room.
                while s.dirty.len() as u64 + new.len() as u64 > cap && !s.dirty.is_empty() {
                    t = t.max(self.destage_one(s, start_ns));
                }
                if s.dirty.is_empty() {
                    s.destage_free = s.destage_free.max(start_ns);
                }
                s.dirty.extend(new);
                t.max(start_ns + lat)
            }
            (Some(c), Op::Read) if super::blocks(req.offset, req.len).all(|b| s.dirty.contains(&b)) => {
                start_ns + c.latency_ns
            }
            (Some(c), Op::Flush) if c.battery => start_ns + c.latency_ns,
            (ctrl, Op::Flush) => {
                let mut t = start_ns;
                if ctrl.is_some() {
                    while !s.dirty.is_empty() {
                        t = t.max(self.destage_one(s, start_ns));
                    }
                }
                let mut end = t;
                for d in 0..self.spec.disks {
                    if !s.status.failed.contains(&d) {
                        end =
                            end.max(self.book(s, &MemberIo { disk: d, op: Op::Flush, offset: 0, len: 0 }, t));
                    }
                }
                end
            }
            (_, Op::Discard) => start_ns,
            _ => self.layout_io(s, req, start_ns),
        };
        Duration::from_nanos(end.saturating_sub(start_ns))
    }

    /// [`Array::service_time`] for callers outside the crate (model-time
    /// studies such as `examples/s5_model.rs`).
    pub fn service_time_of(&self, req: &Req, start_ns: u64) -> Duration {
        self.service_time(req, start_ns)
    }

    /// A request's latency on a fresh, idle copy of the array.
    pub fn idle_latency(&self, req: &Req) -> Duration {
        self.fresh().service_time(req, 0)
    }

    /// The counts since the last take and the state (after the rebuild and
    /// destage up to `now_ns`).
    pub fn take(&self, now_ns: u64) -> ArraySnapshot {
        let mut g = self.lock();
        self.catch_up(&mut g, now_ns);
        let members = g
            .members
            .iter_mut()
            .map(|m| {
                let units = m.counts.units;
                std::mem::replace(&mut m.counts, MemberCounts { units, ..MemberCounts::default() })
            })
            .collect();
        ArraySnapshot { status: g.status.clone(), members, cache_dirty: g.dirty.len() as u64 * CACHE_BLOCK }
    }

    /// The state now (after the rebuild up to `now_ns`).
    pub fn status(&self, now_ns: u64) -> ArrayStatus {
        let mut g = self.lock();
        self.catch_up(&mut g, now_ns);
        g.status.clone()
    }

    /// Takes a saved state back (a restarted daemon); ignores one of
    /// another array (its label differs) or one that does not fit.
    pub fn restore(&self, saved: &ArrayStatus) {
        let mut g = self.lock();
        if saved.label != g.status.label || saved.failed.iter().any(|&f| f >= self.spec.disks) {
            return;
        }
        let mut st = saved.clone();
        st.member_size = self.member_size;
        g.status = st.named();
    }

    /// Applies a command at `now_ns` (checked as `media` checks it).
    pub fn control(&self, cmd: &ArrayCommand, now_ns: u64) -> Result<ArrayStatus, ModelError> {
        let mut g = self.lock();
        self.catch_up(&mut g, now_ns);
        let seq = match cmd {
            ArrayCommand::Fail { disk, seq } => {
                self.spec.check_fail(&g.status, *disk)?;
                if g.status.rebuild_rate > 0 {
                    // A second failure during a rebuild starts it over.
                    g.status.rebuilt = 0;
                }
                g.status.failed.push(*disk);
                g.status.failed.sort_unstable();
                *seq
            }
            ArrayCommand::Rebuild { rate, seq } => {
                if g.status.failed.is_empty() {
                    return Err(ModelError("the array is healthy: nothing to rebuild".into()));
                }
                if g.status.rebuild_rate == 0 {
                    g.status.rebuilt = 0;
                }
                g.status.rebuild_rate = (*rate).max(1);
                g.status.paused = false;
                g.rebuild_next = now_ns;
                *seq
            }
            ArrayCommand::Pause { seq } => {
                g.status.paused = g.status.rebuild_rate > 0;
                *seq
            }
        };
        g.status.applied = seq;
        g.status = std::mem::take(&mut g.status).named();
        Ok(g.status.clone())
    }
}

/// One stripe of a parity group (RAID 5/6): which member holds data chunk
/// `j` and which the parity (rotating left-symmetric), and what is down.
/// Pieces are (stripe, data index, offset in the chunk, length), as
/// `plan_parity` cuts them.
struct Stripe<'a> {
    members: &'a [usize],
    /// Parity chunks per stripe.
    p: usize,
    chunk: u64,
    /// The stripe's number.
    s: u64,
    /// The member index of the stripe's first parity chunk.
    parity_start: usize,
    status: &'a ArrayStatus,
}

impl<'a> Stripe<'a> {
    fn new(members: &'a [usize], p: usize, chunk: u64, s: u64, status: &'a ArrayStatus) -> Stripe<'a> {
        let m = members.len();
        Stripe { members, p, chunk, s, parity_start: (m - 1) - (s % m as u64) as usize, status }
    }

    /// The stripe's offset on each member.
    fn row(&self) -> u64 {
        self.s * self.chunk
    }

    fn data_disks(&self) -> usize {
        self.members.len() - self.p
    }

    fn data_member(&self, j: usize) -> usize {
        self.members[(self.parity_start + self.p + j) % self.members.len()]
    }

    fn parity_members(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.p).map(move |q| self.members[(self.parity_start + q) % self.members.len()])
    }

    /// Whether `disk` cannot serve this range of the stripe (failed, and
    /// not yet rebuilt past it).
    fn down(&self, disk: usize, off: u64, n: u64) -> bool {
        Array::down(self.status, disk, self.row() + off, n)
    }

    fn io(&self, disk: usize, op: Op, off: u64, len: u64) -> MemberIo {
        MemberIo { disk, op, offset: self.row() + off, len }
    }

    /// Each piece from its member, or, where that member is down,
    /// reconstructed from the same range of `d` surviving others.
    fn read(&self, pieces: &[(u64, usize, u64, u64)], plan: &mut Plan) {
        for &(_, j, off, n) in pieces {
            let dm = self.data_member(j);
            if !self.down(dm, off, n) {
                plan.first.push(self.io(dm, Op::Read, off, n));
                continue;
            }
            let others = self
                .members
                .iter()
                .copied()
                .filter(|&o| o != dm && !self.down(o, off, n))
                .take(self.data_disks());
            for o in others {
                plan.first.push(self.io(o, Op::Read, off, n));
            }
        }
    }

    /// A full stripe: data and parity written, no reads.
    fn full_write(&self, plan: &mut Plan) {
        for disk in (0..self.data_disks()).map(|j| self.data_member(j)).chain(self.parity_members()) {
            if !self.down(disk, 0, self.chunk) {
                plan.first.push(self.io(disk, Op::Write, 0, self.chunk));
            }
        }
    }

    /// A partial stripe: the reads first — read-modify-write (old data of
    /// each piece, old parity over R, the in-chunk range every piece lies
    /// in) or reconstruct-write (R from every data member no piece covers),
    /// whichever reads less and is possible — then the new data and parity.
    fn partial_write(&self, pieces: &[(u64, usize, u64, u64)], plan: &mut Plan) {
        let lo = pieces.iter().map(|g| g.2).min().expect("a piece");
        let hi = pieces.iter().map(|g| g.2 + g.3).max().expect("a piece");
        let r = hi - lo;
        let alive_parity: Vec<usize> = self.parity_members().filter(|&pm| !self.down(pm, lo, r)).collect();
        let touched_down = pieces.iter().any(|&(_, j, off, n)| self.down(self.data_member(j), off, n));
        let rmw: Option<Vec<MemberIo>> = (!touched_down).then(|| {
            if alive_parity.is_empty() {
                return Vec::new();
            }
            let old = pieces.iter().map(|&(_, j, off, n)| self.io(self.data_member(j), Op::Read, off, n));
            old.chain(alive_parity.iter().map(|&pm| self.io(pm, Op::Read, lo, r))).collect()
        });
        let rcw: Option<Vec<MemberIo>> = {
            let mut v = Vec::new();
            let mut ok = true;
            for j in 0..self.data_disks() {
                let dm = self.data_member(j);
                if pieces.iter().any(|&(_, gj, off, n)| gj == j && off <= lo && off + n >= hi) {
                    continue;
                }
                if self.down(dm, lo, r) {
                    if pieces.iter().any(|g| g.1 == j) {
                        continue; // its new data is what we write
                    }
                    ok = false;
                    break;
                }
                v.push(self.io(dm, Op::Read, lo, r));
            }
            ok.then_some(v)
        };
        let reads = match (rmw, rcw) {
            (Some(a), Some(b)) => {
                if b.len() < a.len() {
                    b
                } else {
                    a
                }
            }
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => self
                .members
                .iter()
                .filter(|&&o| !self.down(o, lo, r))
                .map(|&o| self.io(o, Op::Read, lo, r))
                .collect(),
        };
        plan.first.extend(reads);
        for &(_, j, off, n) in pieces {
            let dm = self.data_member(j);
            if !self.down(dm, off, n) {
                plan.then.push(self.io(dm, Op::Write, off, n));
            }
        }
        for pm in alive_parity {
            plan.then.push(self.io(pm, Op::Write, lo, r));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storbench_metrics::units::parse_size;

    fn spec(layout: &str, disks: usize, chunk: &str, member: &[&str]) -> ArraySpec {
        let sets: Vec<String> = member.iter().map(|s| s.to_string()).collect();
        ArraySpec::from_options(&ArrayOptions {
            layout,
            disks: Some(disks),
            chunk: Some(parse_size(chunk).unwrap()),
            member: Some("constant"),
            member_sets: &sets,
            ..ArrayOptions::default()
        })
        .unwrap()
    }

    fn arr(layout: &str, disks: usize, chunk: &str) -> Array {
        Array::new(&spec(layout, disks, chunk, &["read=1ms", "write=1ms", "units=1"]), 1 << 30).unwrap()
    }

    fn count(p: &Plan) -> (usize, usize) {
        let all = p.first.iter().chain(&p.then);
        let (mut r, mut w) = (0, 0);
        for io in all {
            match io.op {
                Op::Read => r += 1,
                Op::Write => w += 1,
                _ => {}
            }
        }
        (r, w)
    }

    fn w(offset: u64, len: u64) -> Req {
        Req { op: Op::Write, offset, len }
    }

    #[test]
    fn a_small_write_on_raid5_is_two_reads_then_two_writes() {
        let a = arr("raid5", 8, "256k");
        let p = a.member_ios(&w(3 << 20, 4096));
        assert_eq!(count(&p), (2, 2), "{p:?}");
        // The reads come first; the writes wait for them.
        assert!(p.first.iter().all(|io| io.op == Op::Read) && p.then.iter().all(|io| io.op == Op::Write));
        // Data and parity on different members, the same member offset.
        assert_ne!(p.then[0].disk, p.then[1].disk);
        assert_eq!(p.then[0].offset, p.then[1].offset);
        // The time: a read round then a write round, 2 ms on 1 ms members.
        assert_eq!(a.service_time(&w(3 << 20, 4096), 0), Duration::from_millis(2));
        // RAID 6: three and three.
        assert_eq!(count(&arr("raid6", 8, "64k").member_ios(&w(1 << 20, 4096))), (3, 3));
        // A 3-disk RAID 5 reconstructs instead (1 read of the other data chunk), as md does.
        assert_eq!(count(&arr("raid5", 3, "64k").member_ios(&w(0, 4096))), (1, 2));
    }

    #[test]
    fn a_full_stripe_write_reads_nothing() {
        let a = arr("raid5", 5, "64k");
        // Stripe 2: 4 data chunks of 64k from 512k.
        let p = a.member_ios(&w(512 << 10, 256 << 10));
        assert_eq!(count(&p), (0, 5), "{p:?}");
        let disks: BTreeSet<usize> = p.first.iter().map(|io| io.disk).collect();
        assert_eq!(disks.len(), 5);
        // Misaligned by 4k: two partial stripes, which read.
        let (r, _) = count(&a.member_ios(&w((512 << 10) + 4096, 256 << 10)));
        assert!(r > 0);
        // RAID 50 of 6 (two 2+1 groups, 64k chunk): a full stripe is 128k of one group.
        let a = arr("raid50", 6, "64k");
        assert_eq!(count(&a.member_ios(&w(128 << 10, 128 << 10))), (0, 3));
    }

    #[test]
    fn an_io_across_a_chunk_boundary_splits() {
        let a = arr("raid0", 4, "64k");
        let p = a.member_ios(&Req { op: Op::Read, offset: 60 << 10, len: 8 << 10 });
        assert_eq!(p.first.len(), 2);
        assert_eq!((p.first[0].disk, p.first[0].offset, p.first[0].len), (0, 60 << 10, 4096));
        assert_eq!((p.first[1].disk, p.first[1].offset, p.first[1].len), (1, 0, 4096));
        // Chunk 5 is disk 1's second chunk.
        let p = a.member_ios(&Req { op: Op::Read, offset: 5 * (64 << 10), len: 4096 });
        assert_eq!((p.first[0].disk, p.first[0].offset), (1, 64 << 10));
        // A 64 KiB read at a 32 KiB offset on a 64k stripe: two member I/Os.
        assert_eq!(a.member_ios(&Req { op: Op::Read, offset: 32 << 10, len: 64 << 10 }).first.len(), 2);
    }

    #[test]
    fn a_misaligned_64k_cluster_on_a_64k_stripe_doubles_member_ios() {
        // S5's reader: 64 KiB clusters on a 64 KiB stripe. Aligned, a
        // cluster is one chunk; behind the 31.5 KiB offset of an old MBR
        // partition (63 sectors), every cluster straddles two chunks.
        let a = arr("raid10", 10, "64k");
        let ios = |base: u64| -> usize {
            (0..100u64)
                .map(|i| {
                    a.member_ios(&Req { op: Op::Read, offset: base + i * 7 * (64 << 10), len: 64 << 10 })
                        .first
                        .len()
                })
                .sum()
        };
        assert_eq!(ios(0), 100);
        assert_eq!(ios(63 * 512), 200);
        // On a 256 KiB stripe, a quarter of the misaligned clusters straddle.
        let a = arr("raid10", 10, "256k");
        let n: usize = (0..400u64)
            .map(|i| {
                a.member_ios(&Req { op: Op::Read, offset: 63 * 512 + i * (64 << 10), len: 64 << 10 })
                    .first
                    .len()
            })
            .sum();
        assert_eq!(n, 500);
    }

    #[test]
    fn raid10_writes_both_copies_and_spreads_reads_over_them() {
        let a = arr("raid10", 4, "64k");
        let p = a.member_ios(&w(0, 4096));
        assert_eq!(count(&p), (0, 2));
        assert_eq!(p.first.iter().map(|io| io.disk).collect::<Vec<_>>(), vec![0, 1]);
        // 1,000 reads of the first chunk at the same instant: 500 per copy.
        for _ in 0..1000 {
            a.service_time(&Req { op: Op::Read, offset: 0, len: 4096 }, 0);
        }
        let snap = a.take(0);
        assert_eq!((snap.members[0].reads, snap.members[1].reads), (500, 500));
        assert_eq!(snap.members[2].reads + snap.members[3].reads, 0);
    }

    #[test]
    fn member_counters_count_the_layouts_ios() {
        let a = arr("raid5", 4, "64k");
        for i in 0..100u64 {
            a.service_time(&w(i * 7 * 4096 % (1 << 29), 4096), i * 10_000_000);
        }
        let s = a.take(2_000_000_000);
        let reads: u64 = s.members.iter().map(|m| m.reads).sum();
        let writes: u64 = s.members.iter().map(|m| m.writes).sum();
        assert_eq!((reads, writes), (200, 200));
        // Busy: 400 member I/Os of 1 ms.
        assert_eq!(s.members.iter().map(|m| m.busy_ns).sum::<u64>(), 400_000_000);
    }

    /// A closed loop of `qd` random 4 KiB reads on the model alone (no
    /// daemon): each completion issues the next at its completion time.
    fn closed_loop_iops(a: &Array, qd: usize, n: usize) -> f64 {
        let mut x = 12345u64;
        let mut rand = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<u64>> =
            (0..qd).map(|_| std::cmp::Reverse(0)).collect();
        let mut last = 0;
        for _ in 0..n {
            let std::cmp::Reverse(t) = heap.pop().unwrap();
            let off = (rand() % (1 << 18)) * 4096;
            let d = a.service_time(&Req { op: Op::Read, offset: off, len: 4096 }, t);
            last = last.max(t + d.as_nanos() as u64);
            heap.push(std::cmp::Reverse(t + d.as_nanos() as u64));
        }
        n as f64 / (last as f64 / 1e9)
    }

    #[test]
    fn n_members_serve_random_reads_at_n_times_one_member() {
        // A member: 1 ms per read, one at a time: 1,000 IOPS.
        for (layout, n) in [("raid0", 1), ("raid0", 4), ("raid0", 8), ("raid10", 6), ("raid5", 5)] {
            let a = arr(layout, n, "64k");
            let iops = closed_loop_iops(&a, 32 * n, 20_000);
            let want = 1000.0 * n as f64;
            assert!((iops / want - 1.0).abs() < 0.10, "{layout} of {n}: {iops} IOPS, want {want}");
        }
    }

    #[test]
    fn degraded_reads_reconstruct_from_the_survivors_and_rebuild_heals() {
        let a = arr("raid5", 4, "64k");
        let r = Req { op: Op::Read, offset: 0, len: 4096 };
        let victim = a.member_ios(&r).first[0].disk;
        a.control(&ArrayCommand::Fail { disk: victim, seq: 1 }, 0).unwrap();
        let p = a.member_ios(&r);
        assert_eq!(p.first.len(), 3, "{p:?}");
        assert!(p.first.iter().all(|io| io.disk != victim && io.op == Op::Read));
        // A second disk of a raid5: refused, naming the disk.
        let other = (victim + 1) % 4;
        let e = a.control(&ArrayCommand::Fail { disk: other, seq: 2 }, 0).unwrap_err().0;
        assert!(e.contains(&format!("--disk {other}")) && e.contains("survives 1"), "{e}");
        // Rebuild at 1 GB/s: the member's 384 MiB... take 0.4 s of model time.
        let st = a.control(&ArrayCommand::Rebuild { rate: 1_000_000_000, seq: 3 }, 0).unwrap();
        assert_eq!(st.state, "rebuilding");
        let mid = a.status(100_000_000);
        assert!(mid.progress() > 0.1 && mid.progress() < 0.5, "{mid:?}");
        // Rebuild reads the three survivors and writes the replacement.
        let s = a.take(100_000_000);
        assert!(s.members[victim].writes > 0 && s.members[victim].reads == 0);
        // Paused, it stays where it is; resumed, it finishes.
        a.control(&ArrayCommand::Pause { seq: 4 }, 100_000_000).unwrap();
        let p1 = a.status(200_000_000).rebuilt;
        assert_eq!(a.status(900_000_000).rebuilt, p1);
        assert_eq!(a.status(900_000_000).state, "rebuild paused");
        a.control(&ArrayCommand::Rebuild { rate: 1_000_000_000, seq: 5 }, 900_000_000).unwrap();
        let done = a.status(5_000_000_000);
        assert_eq!((done.state.as_str(), done.failed.len()), ("healthy", 0));
        assert_eq!(a.member_ios(&r).first.len(), 1);
    }

    #[test]
    fn mirrors_and_raid10_refuse_what_they_cannot_survive() {
        let a = arr("raid10", 4, "64k");
        a.control(&ArrayCommand::Fail { disk: 1, seq: 1 }, 0).unwrap();
        assert!(a.control(&ArrayCommand::Fail { disk: 0, seq: 2 }, 0).is_err());
        a.control(&ArrayCommand::Fail { disk: 2, seq: 3 }, 0).unwrap();
        // Reads of pair 0 go to disk 0 only.
        for i in 0..10 {
            a.service_time(&Req { op: Op::Read, offset: 0, len: 4096 }, i);
        }
        assert_eq!(a.take(0).members[0].reads, 10);
        let e = arr("raid0", 4, "64k").control(&ArrayCommand::Fail { disk: 0, seq: 1 }, 0).unwrap_err().0;
        assert!(e.contains("no redundancy"), "{e}");
    }

    #[test]
    fn raid50_and_raid60_survive_per_group_and_reconstruct_from_the_group() {
        // RAID 50 of 6: groups {0,1,2} and {3,4,5}; one failure in each.
        let a = arr("raid50", 6, "64k");
        a.control(&ArrayCommand::Fail { disk: 1, seq: 1 }, 0).unwrap();
        let e = a.control(&ArrayCommand::Fail { disk: 2, seq: 2 }, 0).unwrap_err().0;
        assert!(e.contains("--disk 2") && e.contains("per group") && e.contains("disk 1 failed"), "{e}");
        a.control(&ArrayCommand::Fail { disk: 4, seq: 3 }, 0).unwrap();
        // Every 4 KiB of the first 4 MiB: no member I/O goes to a failed
        // disk, and each piece stays in its own group.
        for i in 0..1024u64 {
            let r = Req { op: Op::Read, offset: i * 4096, len: 4096 };
            let p = a.member_ios(&r);
            assert!(p.first.iter().all(|io| io.disk != 1 && io.disk != 4), "{i}: {p:?}");
            let g: BTreeSet<usize> = p.first.iter().map(|io| io.disk / 3).collect();
            assert_eq!(g.len(), 1, "{i}: {p:?}");
            // A reconstructed chunk reads the group's 2 survivors.
            assert!(p.first.len() == 1 || p.first.len() == 2, "{i}: {p:?}");
        }
        // RAID 60 of 8: groups of 4 (2+2), two failures per group.
        let a = arr("raid60", 8, "64k");
        a.control(&ArrayCommand::Fail { disk: 0, seq: 1 }, 0).unwrap();
        a.control(&ArrayCommand::Fail { disk: 1, seq: 2 }, 0).unwrap();
        let e = a.control(&ArrayCommand::Fail { disk: 3, seq: 3 }, 0).unwrap_err().0;
        assert!(e.contains("survives 2 failed disks per group"), "{e}");
        a.control(&ArrayCommand::Fail { disk: 5, seq: 4 }, 0).unwrap();
        let (mut reconstructed, mut direct) = (0, 0);
        for i in 0..1024u64 {
            let p = a.member_ios(&Req { op: Op::Read, offset: i * 4096, len: 4096 });
            assert!(p.first.iter().all(|io| ![0, 1, 5].contains(&io.disk)), "{i}: {p:?}");
            match p.first.len() {
                1 => direct += 1,
                2 => reconstructed += 1,
                n => panic!("{i}: {n} member reads: {p:?}"),
            }
        }
        assert!(reconstructed > 0 && direct > 0, "{reconstructed} reconstructed, {direct} direct");
        // A rebuild of all three finishes healthy.
        a.control(&ArrayCommand::Rebuild { rate: 4_000_000_000, seq: 5 }, 0).unwrap();
        let done = a.status(60_000_000_000);
        assert_eq!((done.state.as_str(), done.failed.len()), ("healthy", 0), "{done:?}");
    }

    #[test]
    fn a_full_destage_policy_waits_for_half_the_cache() {
        let mut s = spec("raid0", 4, "64k", &["read=1ms", "write=1ms", "units=1"]);
        s.controller =
            Some(ControllerSpec { size: 1 << 20, battery: true, destage: "full".into(), latency_ns: 20_000 });
        let a = Array::new(&s, 1 << 30).unwrap();
        // 64 blocks (a quarter of 1 MiB): acknowledged, and still dirty a second later.
        for i in 0..64u64 {
            a.service_time(&w(i * 4096 * 3, 4096), 0);
        }
        let snap = a.take(1_000_000_000);
        assert_eq!(snap.cache_dirty, 64 * 4096);
        assert_eq!(snap.members.iter().map(|m| m.writes).sum::<u64>(), 0);
        // 128 more (192 of 256 blocks): destaged down to half, not below.
        for i in 64..192u64 {
            a.service_time(&w(i * 4096 * 3, 4096), 1_000_000_000);
        }
        let snap = a.take(3_000_000_000);
        assert_eq!(snap.cache_dirty, 128 * 4096);
        // `idle` drains it all.
        s.controller.as_mut().unwrap().destage = "idle".into();
        let a = Array::new(&s, 1 << 30).unwrap();
        for i in 0..64u64 {
            a.service_time(&w(i * 4096 * 3, 4096), 0);
        }
        assert_eq!(a.take(1_000_000_000).cache_dirty, 0);
    }

    #[test]
    fn bad_layouts_name_the_value() {
        let o = |layout, disks, chunk| {
            ArraySpec::from_options(&ArrayOptions {
                layout,
                disks: Some(disks),
                chunk: Some(parse_size(chunk).unwrap()),
                ..ArrayOptions::default()
            })
            .unwrap_err()
            .0
        };
        assert!(o("raid5", 2, "64k").contains("--array raid5 --disks 2"));
        assert!(o("raid0", 4, "48k").contains("--chunk 48k: give a power of two"));
        assert!(o("raid0", 4, "2k").contains("power of two from 4k"));
        assert!(o("raid7", 4, "64k").contains("--array raid7"));
        assert!(o("raid10", 5, "64k").contains("even"));
        let e = ArraySpec::from_options(&ArrayOptions {
            layout: "raid0",
            disks: Some(2),
            member: Some("floppy"),
            ..ArrayOptions::default()
        })
        .unwrap_err()
        .0;
        assert!(e.starts_with("--member floppy"), "{e}");
    }

    #[test]
    fn a_controller_cache_acknowledges_and_coalesces_into_full_stripes() {
        let mut s = spec("raid5", 5, "64k", &["read=1ms", "write=1ms", "units=1"]);
        s.controller = Some(ControllerSpec {
            size: 64 << 20,
            battery: true,
            destage: "idle".into(),
            latency_ns: CONTROLLER_LATENCY_NS,
        });
        let a = Array::new(&s, 1 << 30).unwrap();
        // A sequential 1 MiB written 4 KiB at a time, all at t=0: acknowledged at 20 µs.
        for i in 0..256u64 {
            assert_eq!(a.service_time(&w(i * 4096, 4096), 0), Duration::from_micros(20));
        }
        // Destaged while the members are idle: 4 full stripes, no reads.
        let snap = a.take(1_000_000_000);
        assert_eq!(snap.cache_dirty, 0);
        let reads: u64 = snap.members.iter().map(|m| m.reads).sum();
        let writes: u64 = snap.members.iter().map(|m| m.writes).sum();
        assert_eq!((reads, writes), (0, 20));
        // With a battery, a flush costs the controller's latency; without
        // one the cache is volatile (a power cut loses it) and a flush destages.
        assert_eq!(
            a.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, 2_000_000_000),
            Duration::from_micros(20)
        );
        assert_eq!(a.volatile_cache(), None);
        s.controller.as_mut().unwrap().battery = false;
        let a = Array::new(&s, 1 << 30).unwrap();
        assert_eq!(a.volatile_cache().map(|c| c.capacity), Some(64 << 20));
        a.service_time(&w(0, 4096), 0);
        let f = a.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, 0);
        assert!(f >= Duration::from_millis(2), "{f:?}");
    }

    #[test]
    fn a_member_link_adds_its_trips_and_mirror_writes_land_on_both() {
        let mut s = spec("raid1", 2, "64k", &["read=100us", "write=100us"]);
        s.link = Some(parse_link("up=0.1ms,down=0.1ms,bw=25Gbit").unwrap());
        assert_eq!(s.link.as_ref().unwrap().bytes_per_s, 3_125_000_000);
        let a = Array::new(&s, 1 << 30).unwrap();
        let d = a.service_time(&w(0, 4096), 0);
        // 100 µs up + 4096 B at 3.125 GB/s (1.3 µs) + 100 µs + 100 µs down.
        assert_eq!(d.as_nanos(), 100_000 + 1_311 + 100_000 + 100_000);
        let snap = a.take(0);
        assert_eq!((snap.members[0].writes, snap.members[1].writes), (1, 1));
        assert!(parse_link("up=1ms").unwrap_err().0.contains("bw="));
    }
}
