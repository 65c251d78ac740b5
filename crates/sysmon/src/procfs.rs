//! Parsers for the /proc files the monitor reads, as pure functions over
//! their text, and the per-interval rates derived from two readings.

use std::collections::BTreeMap;

/// The aggregate `cpu` line of /proc/stat, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq.
    pub system: u64,
    /// idle.
    pub idle: u64,
    /// iowait.
    pub iowait: u64,
    /// steal (time a hypervisor gave to others).
    pub steal: u64,
    /// Everything (guest time is already in user).
    pub total: u64,
}

/// Parses /proc/stat's first line.
pub fn parse_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    if v.len() < 8 {
        return None;
    }
    let (user, nice, system, idle, iowait, irq, softirq, steal) =
        (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    Some(CpuTimes {
        user: user + nice,
        system: system + irq + softirq,
        idle,
        iowait,
        steal,
        total: user + nice + system + idle + iowait + irq + softirq + steal,
    })
}

/// CPU shares over an interval, percent of all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuPct {
    /// User (and nice).
    pub user: f64,
    /// System (and interrupts).
    pub system: f64,
    /// Waiting for I/O with nothing else to run.
    pub iowait: f64,
    /// Idle.
    pub idle: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
}

/// The shares between two readings.
pub fn cpu_pct(a: &CpuTimes, b: &CpuTimes) -> CpuPct {
    let t = b.total.saturating_sub(a.total) as f64;
    if t == 0.0 {
        return CpuPct::default();
    }
    let pct = |x: u64, y: u64| y.saturating_sub(x) as f64 / t * 100.0;
    CpuPct {
        user: pct(a.user, b.user),
        system: pct(a.system, b.system),
        iowait: pct(a.iowait, b.iowait),
        idle: pct(a.idle, b.idle),
        steal: pct(a.steal, b.steal),
    }
}

/// One device's counters from /proc/diskstats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Reads completed.
    pub reads: u64,
    /// Sectors (512 bytes) read.
    pub read_sectors: u64,
    /// Milliseconds spent reading.
    pub read_ms: u64,
    /// Writes completed.
    pub writes: u64,
    /// Sectors written.
    pub write_sectors: u64,
    /// Milliseconds spent writing.
    pub write_ms: u64,
    /// I/Os in flight now.
    pub in_flight: u64,
    /// Milliseconds the device was busy.
    pub io_ms: u64,
    /// Weighted milliseconds (queue length × time).
    pub weighted_ms: u64,
}

/// Parses /proc/diskstats into counters by device name.
pub fn parse_diskstats(text: &str) -> BTreeMap<String, DiskStats> {
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 14 {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        out.insert(
            f[2].to_string(),
            DiskStats {
                reads: n(3),
                read_sectors: n(5),
                read_ms: n(6),
                writes: n(7),
                write_sectors: n(9),
                write_ms: n(10),
                in_flight: n(11),
                io_ms: n(12),
                weighted_ms: n(13),
            },
        );
    }
    out
}

/// A device's activity over an interval (iostat's figures).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiskRates {
    /// Reads per second.
    pub r_iops: f64,
    /// Writes per second.
    pub w_iops: f64,
    /// Read MB/s (10^6 bytes).
    pub r_mbps: f64,
    /// Write MB/s.
    pub w_mbps: f64,
    /// Average read latency, ms (0 without reads).
    pub r_await: f64,
    /// Average write latency, ms.
    pub w_await: f64,
    /// Average queue size.
    pub aqu_sz: f64,
    /// Busy share of the interval, %.
    pub util: f64,
}

/// The rates between two readings `secs` apart.
pub fn disk_rates(a: &DiskStats, b: &DiskStats, secs: f64) -> DiskRates {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let (r, w) = (d(a.reads, b.reads), d(a.writes, b.writes));
    let secs = secs.max(1e-3);
    DiskRates {
        r_iops: r / secs,
        w_iops: w / secs,
        r_mbps: d(a.read_sectors, b.read_sectors) * 512.0 / 1e6 / secs,
        w_mbps: d(a.write_sectors, b.write_sectors) * 512.0 / 1e6 / secs,
        r_await: if r > 0.0 { d(a.read_ms, b.read_ms) / r } else { 0.0 },
        w_await: if w > 0.0 { d(a.write_ms, b.write_ms) / w } else { 0.0 },
        aqu_sz: d(a.weighted_ms, b.weighted_ms) / (secs * 1000.0),
        util: (d(a.io_ms, b.io_ms) / (secs * 1000.0) * 100.0).min(100.0),
    }
}

/// /proc/pressure/io: total microseconds some and all tasks stalled on I/O.
pub fn parse_pressure(text: &str) -> Option<(u64, u64)> {
    let total = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))?
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some((total("some")?, total("full").unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn cpu_shares_from_recorded_proc_stat() {
        let a = parse_stat(&fixture("stat.0")).unwrap();
        let b = parse_stat(&fixture("stat.1")).unwrap();
        assert_eq!(
            a,
            CpuTimes {
                user: 223_783,
                system: 37_334 + 6152,
                idle: 736_016,
                iowait: 20_312,
                steal: 3617,
                total: 1_027_214
            }
        );
        let p = cpu_pct(&a, &b);
        // 200 ticks in the second (2 CPUs): 50 user, 20 system+irq, 100 idle, 30 iowait.
        assert_eq!((p.user, p.system, p.idle, p.iowait, p.steal), (25.0, 10.0, 50.0, 15.0, 0.0));
        assert!(parse_stat("intr 1 2 3").is_none());
    }

    #[test]
    fn device_rates_from_recorded_diskstats() {
        let a = parse_diskstats(&fixture("diskstats.0"));
        let b = parse_diskstats(&fixture("diskstats.1"));
        assert_eq!(a["vda"].reads, 120_000);
        let r = disk_rates(&a["vda"], &b["vda"], 1.0);
        // +500 reads of 8 KiB (8000 sectors) in 1000 ms of read time,
        // +250 writes of 16 sectors in 2500 ms, 900 ms busy, 3500 weighted ms.
        assert_eq!(r.r_iops, 500.0);
        assert_eq!(r.w_iops, 250.0);
        assert_eq!(r.r_mbps, 8000.0 * 512.0 / 1e6);
        assert_eq!(r.w_mbps, 4000.0 * 512.0 / 1e6);
        assert_eq!(r.r_await, 2.0);
        assert_eq!(r.w_await, 10.0);
        assert_eq!(r.aqu_sz, 3.5);
        assert_eq!(r.util, 90.0);
        let idle = disk_rates(&a["loop1"], &b["loop1"], 1.0);
        assert_eq!(idle, DiskRates::default());
    }

    #[test]
    fn pressure_totals() {
        assert_eq!(parse_pressure(&fixture("pressure.io")), Some((227_401_777, 119_063_174)));
        assert_eq!(parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"), Some((5, 0)));
        assert_eq!(parse_pressure(""), None);
    }
}
