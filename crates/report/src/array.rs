//! Arrays (`media create --array`): per configuration and step, what the
//! layout made of the host's I/O at the members (member reads and writes
//! per second, member I/Os per host I/O) and how evenly they were loaded
//! (mean and busiest member's busy share, the busiest member's number and
//! its queue), so a hot member or a parity bottleneck shows as the gap
//! between the mean and the busiest. From the daemon's figures
//! `emu.M.member.N.{reads,writes,busy,queue}` and `emu.M.array.failed`.

use crate::model::{Group, Section};
use crate::table::Table;

/// The array media a step has figures of (`emu.NAME.member.busy.max`).
fn array_media(g: &Group, step: &str) -> Vec<String> {
    let mut out: Vec<String> = g
        .runs
        .iter()
        .filter_map(|r| r.step(step))
        .flat_map(|s| {
            s.metrics
                .keys()
                .filter_map(|k| k.strip_prefix("emu.")?.strip_suffix(".member.busy.max").map(str::to_string))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// One step of one configuration on an array.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayRow {
    /// The configuration (group label).
    pub config: String,
    /// The step.
    pub step: String,
    /// The medium.
    pub medium: String,
    /// Members counted.
    pub members: usize,
    /// Member reads and writes per second, summed over the members.
    pub reads: f64,
    pub writes: f64,
    /// Member I/Os per host I/O, if the host's rate is known.
    pub per_io: Option<f64>,
    /// Mean busy share over the members, and the busiest member's.
    pub busy_mean: f64,
    pub busy_max: f64,
    /// The busiest member's number and its mean queue.
    pub hottest: usize,
    pub hottest_queue: Option<f64>,
    /// Failed members (mean over the window: 1 while one was failed).
    pub failed: Option<f64>,
}

/// Every step of a section whose medium was an array.
pub fn rows(s: &Section<'_>) -> Vec<ArrayRow> {
    let mut out = Vec::new();
    for g in &s.groups {
        for step in s.step_labels() {
            for medium in array_media(g, &step) {
                let med = |m: &str| {
                    let st = g.stat(&step, m);
                    (st.n() > 0).then(|| st.median())
                };
                let p = format!("emu.{medium}");
                let mut busy = Vec::new();
                let (mut reads, mut writes) = (0.0, 0.0);
                while let Some(b) = med(&format!("{p}.member.{}.busy", busy.len())) {
                    let i = busy.len();
                    reads += med(&format!("{p}.member.{i}.reads")).unwrap_or(0.0);
                    writes += med(&format!("{p}.member.{i}.writes")).unwrap_or(0.0);
                    busy.push(b);
                }
                if busy.is_empty() {
                    continue;
                }
                let hottest = (0..busy.len()).fold(0, |h, i| if busy[i] > busy[h] { i } else { h });
                let host = med(&format!("{p}.read.iops")).unwrap_or(0.0)
                    + med(&format!("{p}.write.iops")).unwrap_or(0.0);
                out.push(ArrayRow {
                    config: g.label.clone(),
                    step: step.clone(),
                    medium: medium.clone(),
                    members: busy.len(),
                    reads,
                    writes,
                    per_io: (host > 0.0).then(|| (reads + writes) / host),
                    busy_mean: busy.iter().sum::<f64>() / busy.len() as f64,
                    busy_max: busy[hottest],
                    hottest,
                    hottest_queue: med(&format!("{p}.member.{hottest}.queue")),
                    failed: med(&format!("{p}.array.failed")).filter(|f| *f > 0.0),
                });
            }
        }
    }
    out
}

fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// The members table of a section with arrays.
pub(crate) fn tables(s: &Section<'_>) -> Vec<Table> {
    let rows = rows(s);
    if rows.is_empty() {
        return Vec::new();
    }
    let header = [
        "configuration",
        "step",
        "array",
        "members",
        "member reads/s",
        "member writes/s",
        "member I/Os per I/O",
        "busy mean",
        "busy max",
        "busiest member (queue)",
        "failed",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let body = rows
        .iter()
        .map(|r| {
            vec![
                r.config.clone(),
                r.step.clone(),
                r.medium.clone(),
                r.members.to_string(),
                format!("{:.0}", r.reads),
                format!("{:.0}", r.writes),
                r.per_io.map(|x| format!("{x:.2}")).unwrap_or_else(|| "–".into()),
                pct(r.busy_mean),
                pct(r.busy_max),
                match r.hottest_queue {
                    Some(q) => format!("{} ({q:.1})", r.hottest),
                    None => r.hottest.to_string(),
                },
                r.failed.map(|f| format!("{f:.0}")).unwrap_or_else(|| "–".into()),
            ]
        })
        .collect();
    vec![Table {
        title: format!("{} — array members: what the layout did", s.title()),
        header,
        rows: body,
        notes: vec![
            "Member figures are the array's members summed (reads, writes) or spread (busy: the share of a member's units in service, mean and busiest); member I/Os per I/O is their sum over the host's reads and writes at the array. A busiest member far above the mean is a hot member or a parity bottleneck.".into(),
        ],
    }]
}
