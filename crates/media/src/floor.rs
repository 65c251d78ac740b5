//! The emulator's own floor, measured when a modelled medium is made: a
//! throwaway daemon with a model that takes no time (`constant`, every time
//! 0) serves a small image under its own loop device, and direct 4 KiB
//! reads on that device time what the loop device, FUSE and the daemon add
//! to a request (the QD1 median; 64 KiB reads the same for a larger
//! request, which the daemon's copy makes longer) and the most they serve
//! (IOPS at QD16);
//! two more probes whose model takes 200 µs and 1 ms time how much later a
//! reply sent at a deadline arrives (the timer thread's wake-up and
//! hand-over, and the wake-ups of whoever slept meanwhile).
//! The medium's daemon then absorbs that round trip (it replies at the
//! arrival plus the model time less the floor, never before the arrival:
//! `storbench_emu::sched`), and the figures are kept with the medium, so
//! every run on it records them and `media validate` can tell cells outside
//! the emulator's envelope. `STORBENCH_EMU_FLOOR=off` skips the probe
//! (nothing absorbed); a number (µs) sets the floor without measuring.
//! This module holds the figures and times the reads; the probe daemons
//! are started and stopped by [`crate::emu`] (which this module never calls).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::MediaError;

/// What the emulator adds and serves on this machine, measured at creation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Floor {
    /// Median added to a 4 KiB direct read at QD1, µs (what is absorbed).
    pub qd1_p50_us: f64,
    /// Mean of the same, µs.
    pub qd1_mean_us: f64,
    /// 4 KiB direct reads per second at QD16 with a model that takes no
    /// time: the emulator's ceiling (0 when not measured).
    pub qd16_iops: f64,
    /// How it was obtained: `measured`, or `set by STORBENCH_EMU_FLOOR`.
    pub how: String,
    /// How much later than its model time a reply sent at a deadline
    /// arrives, once the round trip above is absorbed, µs (a probe with
    /// a model that takes [`TIMED_PROBE_US`]: the timer thread's wake-up
    /// and hand-over, which a model that takes no time never meets).
    /// 0: not measured (media made before it was).
    #[serde(default)]
    pub timed_extra_us: f64,
    /// MB/s of 256 KiB direct writes from 16 threads with a model that
    /// takes no time: the emulator's ceiling for large writes, which a
    /// 4 KiB read ceiling does not show (0: not measured).
    #[serde(default)]
    pub write_mb_s: f64,
    /// How much of a timed reply's lateness the daemon absorbs, µs: the
    /// timed probe's lower quartile beyond the zero-time probe's lower
    /// quartile. A reply that waits for the timer finds the loop device's
    /// worker and the application asleep and pays their wake-ups, which
    /// a reply sent at once does not; the lower quartile, not the median,
    /// so a probe on a busy host does not make every reply early. 0: not
    /// absorbed (media made before it was, or the floor set by hand).
    #[serde(default)]
    pub timed_lead_us: f64,
    /// The same at a far wait: a probe whose model takes
    /// [`TIMED_FAR_US`] (a vCPU asleep longer wakes slower on a virtual
    /// machine: 20-30 µs late after 100 µs, 40-70 after 400 µs, here).
    /// The lead between the two waits is linear; `None`: not measured
    /// (media made before it was), the one lead at every wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_lead_far_us: Option<f64>,
    /// Median added to a 64 KiB direct read at QD1, µs: the daemon copies
    /// a request's data through FUSE, so a larger one's round trip is
    /// longer, and absorbing the 4 KiB floor alone leaves a 64 KiB request
    /// slow. Linear between the two, by size. `None`: not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qd1_p50_64k_us: Option<f64>,
}

impl Floor {
    /// The round trip the daemon absorbs (of a 4 KiB request).
    pub fn absorbed(&self) -> Duration {
        Duration::from_nanos((self.qd1_p50_us * 1e3) as u64)
    }

    /// The round trip the daemon absorbs of a 64 KiB request.
    pub fn absorbed_64k(&self) -> Duration {
        Duration::from_nanos((self.qd1_p50_64k_us.unwrap_or(self.qd1_p50_us) * 1e3) as u64)
    }

    /// The part of a timed reply's lateness the daemon absorbs besides,
    /// by the reply's wait: the two probes' leads at their model times.
    pub fn lead(&self) -> storbench_emu::sched::Lead {
        let ns = |us: f64| (us * 1e3) as u64;
        let near = (ns(TIMED_PROBE_US), ns(self.timed_lead_us));
        let far = self.timed_lead_far_us.map_or(near, |far| (ns(TIMED_FAR_US), ns(far)));
        storbench_emu::sched::Lead { near, far }
    }
}

/// The size of the probe image a floor is measured on.
pub(crate) const PROBE_SIZE: u64 = 64 << 20;
/// The model time of the timed probe, µs: long enough that the reply
/// always waits for the timer thread.
pub const TIMED_PROBE_US: f64 = 200.0;
/// The model time of the far timed probe, µs: past the few hundred µs a
/// virtual machine's host polls a halted vCPU for before it sleeps.
pub const TIMED_FAR_US: f64 = 1000.0;
const BS: usize = 4096;

/// An aligned buffer for direct I/O of `.2` bytes.
struct Aligned(Vec<u8>, usize, usize);

impl Aligned {
    fn new() -> Aligned {
        Aligned::of(BS)
    }
    fn of(len: usize) -> Aligned {
        let v = vec![0u8; len + BS];
        let off = v.as_ptr().align_offset(BS);
        Aligned(v, off, len)
    }
    fn buf(&mut self) -> &mut [u8] {
        &mut self.0[self.1..self.1 + self.2]
    }
}

fn open_direct(dev: &str) -> Result<File, MediaError> {
    File::options()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .map_err(|e| MediaError::Failed(format!("opening {dev} to measure the emulator's floor: {e}")))
}

/// Times direct 4 KiB reads on a device: their QD1 times and QD16 IOPS.
pub(crate) fn time_reads(dev: &str) -> Result<(Qd1, f64), MediaError> {
    let qd1 = time_qd1(dev, 2300)?;
    Ok((qd1, qd16_iops(dev)))
}

/// Direct 4 KiB random reads at QD1, µs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Qd1 {
    pub p25: f64,
    pub p50: f64,
    pub mean: f64,
}

/// `n` direct 4 KiB random reads at QD1 (the first 300 not counted:
/// warm-up).
pub(crate) fn time_qd1(dev: &str, n: usize) -> Result<Qd1, MediaError> {
    time_qd1_of(dev, n, BS, 300)
}

/// As [`time_qd1`], reads of `bs` bytes, the first `warm` not counted.
pub(crate) fn time_qd1_of(dev: &str, n: usize, bs: usize, warm: usize) -> Result<Qd1, MediaError> {
    let f = open_direct(dev)?;
    let mut b = Aligned::of(bs);
    let blocks = PROBE_SIZE / bs as u64;
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % blocks) * bs as u64
    };
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f.read_at(b.buf(), next()).map_err(|e| MediaError::Failed(format!("reading {dev}: {e}")))?;
        if i >= warm {
            lat.push(t.elapsed().as_nanos() as f64 / 1e3);
        }
    }
    let mean = lat.iter().sum::<f64>() / lat.len() as f64;
    lat.sort_by(f64::total_cmp);
    Ok(Qd1 { p25: lat[lat.len() / 4], p50: lat[lat.len() / 2], mean })
}

/// MB/s of 256 KiB direct writes at random aligned offsets of the probe
/// image, from 16 threads for 400 ms.
pub(crate) fn write_mb_s(dev: &str) -> Result<f64, MediaError> {
    const WBS: usize = 256 << 10;
    let slots = PROBE_SIZE / WBS as u64;
    let window = Duration::from_millis(400);
    let done: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16u64)
            .map(|t| {
                s.spawn(move || -> u64 {
                    let Ok(f) = File::options().write(true).custom_flags(libc::O_DIRECT).open(dev) else {
                        return 0;
                    };
                    let v = vec![0x5au8; WBS * 2];
                    let off = v.as_ptr().align_offset(BS);
                    let buf = &v[off..off + WBS];
                    let mut x = 0x9E3779B97F4A7C15u64 ^ (t + 1);
                    let (t0, mut n) = (Instant::now(), 0u64);
                    while t0.elapsed() < window {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if f.write_at(buf, (x % slots) * WBS as u64).is_err() {
                            break;
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    Ok(done as f64 * WBS as f64 / window.as_secs_f64() / 1e6)
}

/// 4 KiB direct random reads per second from 16 threads for 400 ms.
fn qd16_iops(dev: &str) -> f64 {
    let blocks = PROBE_SIZE / BS as u64;
    let window = Duration::from_millis(400);
    let done: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16u64)
            .map(|t| {
                s.spawn(move || -> u64 {
                    let Ok(f) = open_direct(dev) else { return 0 };
                    let mut b = Aligned::new();
                    let mut x = 0x2545F4914F6CDD1Du64 ^ (t + 1);
                    let (t0, mut n) = (Instant::now(), 0u64);
                    while t0.elapsed() < window {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if f.read_at(b.buf(), (x % blocks) * BS as u64).is_err() {
                            break;
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    done as f64 / window.as_secs_f64()
}
