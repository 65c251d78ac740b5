//! The daemon's own view, once a second: requests, bytes, mean and maximum
//! queue depth, and per op the latency (queue + service), queue time and
//! service time (mean, p50, p99), appended as one JSON line per second to
//! the medium's counters file. A run reads the lines of its window
//! ([`read`]) and stores them beside the host's device figures.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::model::{Op, TierSnapshot};
use crate::sched::{Completion, Sched};

/// One op's figures in one second.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpLine {
    /// Requests completed.
    pub n: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Latency (arrival to reply), µs.
    pub lat_mean_us: f64,
    /// Median latency, µs.
    pub lat_p50_us: f64,
    /// 99th percentile latency, µs.
    pub lat_p99_us: f64,
    /// Mean time queued for a unit once at the device (a network model's
    /// trip and link wait are not in it: they are in `svc_*`), µs.
    pub queue_mean_us: f64,
    /// 99th percentile queue time, µs.
    pub queue_p99_us: f64,
    /// Mean service time: the model's time for the request other than
    /// the wait for a unit (the device's time; for a network model also
    /// its round trip and its payload's time and wait on the link), µs.
    /// Queue plus service is the latency the model asked for.
    pub svc_mean_us: f64,
    /// 99th percentile service time, µs.
    pub svc_p99_us: f64,
}

/// One second of the daemon's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// End of the interval, ms since the Unix epoch.
    pub t_ms: u64,
    /// Length of the interval, ms.
    pub interval_ms: u64,
    /// Mean requests outstanding (queued or in service).
    pub qd_avg: f64,
    /// Most requests outstanding at once.
    pub qd_max: u64,
    /// Replies later than their deadline by more than 200 µs.
    pub late: u64,
    /// Requests failed (after a power cut).
    pub errors: u64,
    /// Per op: read, write, flush, discard (only those seen).
    pub ops: std::collections::BTreeMap<String, OpLine>,
    /// The cache tier's second, on a medium with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<TierSnapshot>,
    /// The array's second (state, per-member counts), on an array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<crate::model::ArraySnapshot>,
    /// The time scale in effect at the end of the second (1: as modelled;
    /// [`crate::sched::Sched::set_scale`]); left out when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Takes the scheduler's figures into a line.
pub(crate) fn line<C: Completion>(s: &Sched<C>, last_ns: &mut u64) -> Line {
    let (st, now) = s.take_stats();
    let mut ops = std::collections::BTreeMap::new();
    for op in Op::ALL {
        let o = &st.ops[op.index()];
        if o.count == 0 {
            continue;
        }
        ops.insert(
            op.as_str().to_string(),
            OpLine {
                n: o.count,
                bytes: o.bytes,
                lat_mean_us: o.latency.mean_us(),
                lat_p50_us: o.latency.quantile_us(0.5),
                lat_p99_us: o.latency.quantile_us(0.99),
                queue_mean_us: o.queue.mean_us(),
                queue_p99_us: o.queue.quantile_us(0.99),
                svc_mean_us: o.service.mean_us(),
                svc_p99_us: o.service.quantile_us(0.99),
            },
        );
    }
    let l = Line {
        t_ms: unix_ms(),
        interval_ms: (now - *last_ns) / 1_000_000,
        qd_avg: st.qd_avg(now),
        qd_max: st.qd_max,
        late: st.late,
        errors: st.errors,
        ops,
        // Their own timelines run on the model's clock (a time scale).
        cache: s.model().tier().map(|t| t.take(s.model_ns())),
        array: s.model().array().map(|a| a.take(s.model_ns())),
        scale: s.scale(),
    };
    *last_ns = now;
    l
}

/// Appends a line to the counters file every second until `stop`.
pub(crate) fn run<C: Completion>(s: &Sched<C>, path: &Path, stop: &AtomicBool) {
    let mut last = s.now_ns();
    while !stop.load(Ordering::Relaxed) {
        let to_next = 1000 - unix_ms() % 1000;
        std::thread::sleep(Duration::from_millis(to_next.max(1)));
        let l = line(s, &mut last);
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{}", serde_json::to_string(&l).expect("serialises"));
        }
    }
}

/// The lines of a counters file whose interval ends within `[from_ms,
/// to_ms]` (a missing file has none; a torn last line is skipped).
pub fn read(path: &Path, from_ms: u64, to_ms: u64) -> Vec<Line> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .filter(|l| l.t_ms >= from_ms && l.t_ms <= to_ms)
        .collect()
}

/// A step's view from a medium's daemon: per-second samples from the
/// step's start (`emu.MEDIUM.qd`, `emu.MEDIUM.OP.iops`,
/// `emu.MEDIUM.OP.lat.p99`, ...) and figures over the measured window
/// (`[measure_from_ms, end_ms]`, Unix ms): per op IOPS, the mean latency,
/// queue and service times weighted by requests, and the highest
/// per-second p99 latency (`lat.p99max`); the mean queue depth and the late
/// replies. A second belongs to the window as the system monitor's do: it
/// ends more than half a second after the window begins and at most half a
/// second after it ends.
pub fn step_report(
    medium: &str,
    lines: &[Line],
    step_start_ms: u64,
    measure_from_ms: u64,
    end_ms: u64,
) -> storbench_metrics::StepReport {
    use storbench_metrics::Unit;
    let mut r = storbench_metrics::StepReport::default();
    let in_step = |l: &&Line| l.t_ms > step_start_ms + 500 && l.t_ms <= end_ms + 500;
    for l in lines.iter().filter(in_step) {
        let t = l.t_ms - step_start_ms;
        r.sample(t, format!("emu.{medium}.qd"), l.qd_avg);
        for (op, o) in &l.ops {
            let secs = (l.interval_ms.max(1)) as f64 / 1000.0;
            r.sample(t, format!("emu.{medium}.{op}.iops"), o.n as f64 / secs);
            r.sample(t, format!("emu.{medium}.{op}.lat.mean"), o.lat_mean_us);
            r.sample(t, format!("emu.{medium}.{op}.lat.p99"), o.lat_p99_us);
        }
        if let Some(c) = &l.cache {
            let secs = (l.interval_ms.max(1)) as f64 / 1000.0;
            let p = format!("emu.{medium}.cache");
            if c.accesses() > 0 {
                r.sample(t, format!("{p}.hit_ratio"), c.hits() as f64 / c.accesses() as f64);
            }
            if c.counts.read_hits + c.counts.read_misses > 0 {
                let ratio = c.counts.read_hits as f64 / (c.counts.read_hits + c.counts.read_misses) as f64;
                r.sample(t, format!("{p}.read.hit_ratio"), ratio);
            }
            if c.counts.write_hits + c.counts.write_misses > 0 {
                let ratio = c.counts.write_hits as f64 / (c.counts.write_hits + c.counts.write_misses) as f64;
                r.sample(t, format!("{p}.write.hit_ratio"), ratio);
            }
            r.sample(t, format!("{p}.hits"), c.hits() as f64 / secs);
            r.sample(t, format!("{p}.misses"), (c.accesses() - c.hits()) as f64 / secs);
            r.sample(t, format!("{p}.dirty.bytes"), (c.dirty * c.line) as f64);
            r.sample(t, format!("{p}.resident.bytes"), (c.resident * c.line) as f64);
            r.sample(t, format!("{p}.destage.mbps"), (c.counts.destaged * c.line) as f64 / 1e6 / secs);
        }
    }
    for l in lines.iter().filter(in_step) {
        if let Some(a) = &l.array {
            array_samples(&mut r, medium, l.t_ms - step_start_ms, l.interval_ms, a);
        }
    }
    let step_lines: Vec<&Line> = lines.iter().filter(in_step).collect();
    let window: Vec<&Line> =
        lines.iter().filter(|l| l.t_ms > measure_from_ms + 500 && l.t_ms <= end_ms + 500).collect();
    if window.is_empty() {
        return r;
    }
    let secs: f64 = window.iter().map(|l| l.interval_ms as f64 / 1000.0).sum::<f64>().max(1e-3);
    r.figure(
        format!("emu.{medium}.qd"),
        window.iter().map(|l| l.qd_avg).sum::<f64>() / window.len() as f64,
        Unit::Count,
    );
    r.figure(format!("emu.{medium}.late"), window.iter().map(|l| l.late).sum::<u64>() as f64, Unit::Count);
    // A step under a time scale says so (the mean over its seconds); a
    // step as modelled carries no such figure.
    if window.iter().any(|l| l.scale != 1.0) {
        let mean = window.iter().map(|l| l.scale).sum::<f64>() / window.len() as f64;
        r.figure(format!("emu.{medium}.scale"), mean, Unit::Ratio);
    }
    for op in Op::ALL {
        let ops: Vec<&OpLine> = window.iter().filter_map(|l| l.ops.get(op.as_str())).collect();
        let n: u64 = ops.iter().map(|o| o.n).sum();
        if n == 0 {
            continue;
        }
        let weighted = |f: fn(&OpLine) -> f64| ops.iter().map(|o| f(o) * o.n as f64).sum::<f64>() / n as f64;
        let p = format!("emu.{medium}.{}", op.as_str());
        r.figure(format!("{p}.iops"), n as f64 / secs, Unit::PerS);
        r.figure(format!("{p}.lat.mean"), weighted(|o| o.lat_mean_us), Unit::Us);
        r.figure(format!("{p}.queue.mean"), weighted(|o| o.queue_mean_us), Unit::Us);
        r.figure(format!("{p}.svc.mean"), weighted(|o| o.svc_mean_us), Unit::Us);
        r.figure(format!("{p}.lat.p99max"), ops.iter().map(|o| o.lat_p99_us).fold(0.0, f64::max), Unit::Us);
    }
    cache_figures(&mut r, medium, &step_lines, &window, step_start_ms, secs);
    array_figures(&mut r, medium, &window, secs);
    r
}

/// One member's second: reads and writes per second, busy (the share of
/// its units' time in service, 0 to 1) and queue (mean requests at it,
/// waiting or in service: Little's law over the second).
fn member_rates(m: &crate::model::MemberCounts, interval_ms: u64) -> [(&'static str, f64); 4] {
    let ns = (interval_ms.max(1) * 1_000_000) as f64;
    [
        ("reads", m.reads as f64 * 1e9 / ns),
        ("writes", m.writes as f64 * 1e9 / ns),
        ("busy", m.busy_ns as f64 / ns / m.units.max(1) as f64),
        ("queue", (m.busy_ns + m.wait_ns) as f64 / ns),
    ]
}

/// An array's per-second samples: `emu.M.member.N.{reads,writes,busy,queue}`,
/// `emu.M.array.failed` (members down) and `emu.M.array.rebuild.progress`.
fn array_samples(
    r: &mut storbench_metrics::StepReport,
    medium: &str,
    t: u64,
    interval_ms: u64,
    a: &crate::model::ArraySnapshot,
) {
    for (i, m) in a.members.iter().enumerate() {
        for (k, v) in member_rates(m, interval_ms) {
            r.sample(t, format!("emu.{medium}.member.{i}.{k}"), v);
        }
    }
    r.sample(t, format!("emu.{medium}.array.failed"), a.status.failed.len() as f64);
    if a.status.rebuild_rate > 0 {
        r.sample(t, format!("emu.{medium}.array.rebuild.progress"), a.status.progress());
    }
}

/// An array's figures over the window: per member reads/s, writes/s, busy
/// and queue, and the busiest member's busy (`emu.M.member.busy.max`) beside
/// the mean (`.busy.mean`): a hot member or a parity bottleneck shows as
/// their gap.
fn array_figures(r: &mut storbench_metrics::StepReport, medium: &str, window: &[&Line], secs: f64) {
    use storbench_metrics::Unit;
    let arrays: Vec<&crate::model::ArraySnapshot> = window.iter().filter_map(|l| l.array.as_ref()).collect();
    let Some(first) = arrays.first() else { return };
    let n = first.members.len();
    let mut busy = Vec::with_capacity(n);
    for i in 0..n {
        let get = |f: fn(&crate::model::MemberCounts) -> u64| {
            arrays.iter().filter_map(|a| a.members.get(i)).map(f).sum::<u64>() as f64
        };
        let units = first.members[i].units.max(1) as f64;
        let p = format!("emu.{medium}.member.{i}");
        r.figure(format!("{p}.reads"), get(|m| m.reads) / secs, Unit::PerS);
        r.figure(format!("{p}.writes"), get(|m| m.writes) / secs, Unit::PerS);
        let b = get(|m| m.busy_ns) / (secs * 1e9) / units;
        r.figure(format!("{p}.busy"), b, Unit::Ratio);
        r.figure(format!("{p}.queue"), (get(|m| m.busy_ns) + get(|m| m.wait_ns)) / (secs * 1e9), Unit::Count);
        busy.push(b);
    }
    if n > 0 {
        r.figure(
            format!("emu.{medium}.member.busy.max"),
            busy.iter().copied().fold(0.0, f64::max),
            Unit::Ratio,
        );
        r.figure(format!("emu.{medium}.member.busy.mean"), busy.iter().sum::<f64>() / n as f64, Unit::Ratio);
    }
    if let Some(last) = arrays.last() {
        r.figure(format!("emu.{medium}.array.failed"), last.status.failed.len() as f64, Unit::Count);
    }
}

/// A cache tier's figures over the window: hit ratios (line accesses, as
/// `cache mrc` counts them), mean dirty bytes, destage rate, resident bytes
/// and the hottest lines' shares at the window's end, and the warm-up (see
/// [`warmup_s`]) over the whole step.
fn cache_figures(
    r: &mut storbench_metrics::StepReport,
    medium: &str,
    step: &[&Line],
    window: &[&Line],
    step_start_ms: u64,
    secs: f64,
) {
    use storbench_metrics::Unit;
    let cs: Vec<&TierSnapshot> = window.iter().filter_map(|l| l.cache.as_ref()).collect();
    let Some(last) = cs.last() else { return };
    let p = format!("emu.{medium}.cache");
    let sum = |f: fn(&TierSnapshot) -> u64| cs.iter().map(|c| f(c)).sum::<u64>();
    let ratio = |hits: u64, all: u64| (all > 0).then(|| hits as f64 / all as f64);
    let (rh, rm, wh, wm) = (
        sum(|c| c.counts.read_hits),
        sum(|c| c.counts.read_misses),
        sum(|c| c.counts.write_hits),
        sum(|c| c.counts.write_misses),
    );
    r.figure(format!("{p}.accesses"), (rh + rm + wh + wm) as f64, Unit::Count);
    for (name, v) in [
        ("hit_ratio", ratio(rh + wh, rh + rm + wh + wm)),
        ("read.hit_ratio", ratio(rh, rh + rm)),
        ("write.hit_ratio", ratio(wh, wh + wm)),
    ] {
        if let Some(v) = v {
            r.figure(format!("{p}.{name}"), v, Unit::Ratio);
        }
    }
    let line = last.line as f64;
    r.figure(
        format!("{p}.dirty.bytes"),
        cs.iter().map(|c| c.dirty as f64 * line).sum::<f64>() / cs.len() as f64,
        Unit::Bytes,
    );
    r.figure(format!("{p}.resident.bytes"), last.resident as f64 * line, Unit::Bytes);
    r.figure(format!("{p}.size.bytes"), last.lines as f64 * line, Unit::Bytes);
    r.figure(format!("{p}.destage.mbps"), sum(|c| c.counts.destaged) as f64 * line / 1e6 / secs, Unit::MBps);
    for (i, pct) in crate::model::HOT_PERCENTS.iter().enumerate() {
        r.figure(format!("{p}.hot.top{pct}"), last.hot[i], Unit::Ratio);
    }
    let per_second: Vec<(f64, u64, u64)> = step
        .iter()
        .filter_map(|l| {
            l.cache.as_ref().map(|c| ((l.t_ms - step_start_ms) as f64 / 1000.0, c.hits(), c.accesses()))
        })
        .collect();
    if let Some(w) = warmup_s(&per_second) {
        r.figure(format!("{p}.warmup.s"), w, Unit::S);
    }
}

/// Warm-up: the time (s from the step's start) at which the hit ratio of
/// the trailing five seconds first reaches 90 % of the final hit ratio,
/// the final being the same trailing ratio at the step's last second (so
/// a step always reaches it, at its end at the latest). `per_second` is
/// (end of the second, hits, accesses). None when the step saw no accesses.
pub fn warmup_s(per_second: &[(f64, u64, u64)]) -> Option<f64> {
    let n = per_second.len();
    if n == 0 {
        return None;
    }
    let tail = &per_second[n.saturating_sub(5)..];
    let (h, a) = tail.iter().fold((0u64, 0u64), |(h, a), x| (h + x.1, a + x.2));
    if a == 0 {
        return None;
    }
    let final_ratio = h as f64 / a as f64;
    for i in 0..n {
        let from = i.saturating_sub(4);
        let (h, a) = per_second[from..=i].iter().fold((0u64, 0u64), |(h, a), x| (h + x.1, a + x.2));
        if a > 0 && h as f64 / a as f64 >= 0.9 * final_ratio {
            return Some(per_second[i].0);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t_ms: u64, n: u64, lat: f64) -> Line {
        let mut ops = std::collections::BTreeMap::new();
        ops.insert(
            "read".to_string(),
            OpLine {
                n,
                bytes: n * 4096,
                lat_mean_us: lat,
                lat_p99_us: lat * 2.0,
                svc_mean_us: lat,
                ..OpLine::default()
            },
        );
        Line {
            t_ms,
            interval_ms: 1000,
            qd_avg: 1.0,
            qd_max: 1,
            late: 0,
            errors: 0,
            ops,
            cache: None,
            array: None,
            scale: 1.0,
        }
    }

    #[test]
    fn a_step_takes_the_seconds_of_its_window_weighted_by_requests() {
        // Step from 10,000 ms, measured from 11,000 to 14,000.
        let lines: Vec<Line> =
            (10..=16).map(|s| line(s * 1000, if s == 13 { 300 } else { 100 }, s as f64)).collect();
        let r = step_report("d", &lines, 10_000, 11_000, 14_000);
        let fig = |n: &str| r.figures.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}")).value;
        // Seconds ending at 12, 13, 14 s are in the window.
        assert_eq!(fig("emu.d.read.iops"), 500.0 / 3.0);
        assert_eq!(fig("emu.d.read.lat.mean"), (12.0 * 100.0 + 13.0 * 300.0 + 14.0 * 100.0) / 500.0);
        assert_eq!(fig("emu.d.read.lat.p99max"), 28.0);
        // Samples from the step's start: seconds ending at 11 to 14 s.
        assert_eq!(r.samples.iter().filter(|s| s.name == "emu.d.qd").count(), 4);
    }

    #[test]
    fn an_arrays_seconds_give_per_member_figures() {
        let mut lines: Vec<Line> = (10..=14).map(|s| line(s * 1000, 100, 1.0)).collect();
        for l in lines.iter_mut() {
            let m = |reads, busy_ns| crate::model::MemberCounts {
                reads,
                writes: 10,
                busy_ns,
                wait_ns: 500_000_000,
                units: 1,
                ..Default::default()
            };
            l.array = Some(crate::model::ArraySnapshot {
                members: vec![m(100, 900_000_000), m(50, 300_000_000)],
                ..Default::default()
            });
        }
        let r = step_report("a", &lines, 10_000, 10_000, 14_000);
        let fig = |n: &str| r.figures.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}")).value;
        assert_eq!(fig("emu.a.member.0.reads"), 100.0);
        assert_eq!(fig("emu.a.member.1.writes"), 10.0);
        assert!((fig("emu.a.member.0.busy") - 0.9).abs() < 1e-9);
        assert!((fig("emu.a.member.0.queue") - 1.4).abs() < 1e-9);
        assert!((fig("emu.a.member.busy.max") - 0.9).abs() < 1e-9);
        assert!((fig("emu.a.member.busy.mean") - 0.6).abs() < 1e-9);
        assert_eq!(r.samples.iter().filter(|s| s.name == "emu.a.member.1.reads").count(), 4);
    }

    #[test]
    fn warm_up_is_when_the_trailing_hit_ratio_reaches_nine_tenths_of_the_final() {
        // Hit ratio climbing 0.0, 0.1, ... to 0.8 and staying there.
        let per: Vec<(f64, u64, u64)> =
            (1..=20).map(|s| (s as f64, (s.min(9) as u64 - 1) * 10, 100)).collect();
        // Final (last 5 s): 0.8; trailing 5 s reaches 0.72 when the
        // seconds' ratios are 0.6..0.8: at 11 s (0.6,0.7,0.8,0.8,0.8 = 0.74).
        assert_eq!(warmup_s(&per), Some(11.0));
        assert_eq!(warmup_s(&[(1.0, 0, 0)]), None);
    }

    #[test]
    fn a_cache_tiers_seconds_give_hit_ratios_and_its_state() {
        let mut lines: Vec<Line> = (10..=14).map(|s| line(s * 1000, 100, 1.0)).collect();
        for (i, l) in lines.iter_mut().enumerate() {
            l.cache = Some(TierSnapshot {
                counts: crate::model::TierCounts {
                    read_hits: 30 + i as u64 * 10,
                    read_misses: 70 - i as u64 * 10,
                    write_hits: 5,
                    write_misses: 5,
                    destaged: 16,
                },
                dirty: 10,
                resident: 100,
                lines: 1000,
                line: 65536,
                footprint: 200,
                hot: [0.1, 0.3, 0.5, 0.7],
            });
        }
        let r = step_report("d", &lines, 10_000, 10_000, 14_000);
        let fig = |n: &str| r.figures.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}")).value;
        // Seconds ending 11..14: read hits 40+50+60+70 of 400.
        assert_eq!(fig("emu.d.cache.read.hit_ratio"), 220.0 / 400.0);
        assert_eq!(fig("emu.d.cache.hit_ratio"), 240.0 / 440.0);
        assert_eq!(fig("emu.d.cache.accesses"), 440.0);
        assert_eq!(fig("emu.d.cache.dirty.bytes"), 10.0 * 65536.0);
        assert_eq!(fig("emu.d.cache.destage.mbps"), 16.0 * 65536.0 / 1e6);
        assert_eq!(fig("emu.d.cache.hot.top20"), 0.7);
        // Trailing ratios 0.41, 0.45, 0.50, 0.55 against 0.9 × 0.55: at 13 s.
        assert_eq!(fig("emu.d.cache.warmup.s"), 3.0);
        assert_eq!(r.samples.iter().filter(|s| s.name == "emu.d.cache.hit_ratio").count(), 4);
    }
}
