//! A flash drive (SATA or NVMe): a request takes the NAND time on one of
//! `units` parallel units (channels × dies) and its transfer over the one
//! host interface, whichever ends later. Writes are acknowledged from the
//! controller's cache (program time is hidden, REFERENCE: 200-1,000 µs
//! programs behind ~20-50 µs acknowledgements); past `cliff_after` bytes
//! written, garbage collection shows and writes take `cliff_write` (the
//! steady-state "write cliff" MQSim models). A consumer drive's volatile
//! cache is drained by a flush; a drive with power-loss protection has none.

use std::time::Duration;

use super::{cache_from, xfer, Builtin, Kind, ModelError, Op, Param, Params, Req, State, VolatileCache};

const COMMON_DOC_CLIFF: &str =
    "bytes written before garbage collection slows writes (0: never, a fresh drive); MQSim (FAST'18) reproduces such cliffs";

const WRITE_RATE_DOC: &str = "0: writes cross the one interface with the reads, at interface_rate (SATA is half duplex). A rate: writes cross their own direction at it, apart from the reads (PCIe, SAS and a VM's virtio disk are full duplex), for a drive whose writes move at another rate than its reads: a datasheet's sequential write figure (e.g. 1,700 against 3,100 MB/s read), or a host cache that takes writes faster than the device reads";

const WRITE_UNITS_DOC: &str = "writes in progress at once, when fewer than `units` (0: as many as units): datasheets rate random writes apart from reads (e.g. 39,500 read vs 23,000 write IOPS), the program and garbage-collection work behind the cache";

pub(crate) const SATA_SSD: Builtin = Builtin {
    name: "sata-ssd",
    about: "a consumer SATA SSD: ~90 µs reads, 8 parallel units, 550 MB/s interface, volatile write cache",
    params: &[
        Param { key: "read", default: "90us", kind: Kind::Dur, doc: "NAND read plus controller for one page (TLC reads 50-100 µs); 4k QD1 reads on SATA drives measure 80-100 µs" },
        Param { key: "write", default: "40us", kind: Kind::Dur, doc: "a write acknowledged from the controller's cache" },
        Param { key: "units", default: "8", kind: Kind::Int, doc: "requests served at once (channels × dies the firmware keeps busy): 8 / 90 µs ≈ 90k IOPS, the datasheet QD32 figure" },
        Param { key: "write_units", default: "0", kind: Kind::Int, doc: WRITE_UNITS_DOC },
        Param { key: "channel_rate", default: "400MB/s", kind: Kind::Rate, doc: "NAND channel transfer rate (ONFI 3)" },
        Param { key: "interface_rate", default: "550MB/s", kind: Kind::Rate, doc: "SATA 6 Gb/s as drives deliver it" },
        Param { key: "write_rate", default: "0", kind: Kind::RateOr0, doc: WRITE_RATE_DOC },
        Param { key: "flush", default: "0.5ms", kind: Kind::Dur, doc: "a flush writes the cache's dirty pages to NAND (one program time)" },
        Param { key: "write_cache", default: "true", kind: Kind::Bool, doc: "volatile write cache (consumer drives have no power-loss protection)" },
        Param { key: "cache_size", default: "64M", kind: Kind::Size, doc: "dirty bytes the cache holds before it writes back" },
        Param { key: "lie_on_flush", default: "false", kind: Kind::Bool, doc: "acknowledge flushes without draining the cache" },
        Param { key: "cliff_after", default: "0", kind: Kind::Size, doc: COMMON_DOC_CLIFF },
        Param { key: "cliff_write", default: "1ms", kind: Kind::Dur, doc: "write time once past the cliff (steady state with garbage collection)" },
    ],
};

pub(crate) const NVME: Builtin = Builtin {
    name: "nvme",
    about: "a datacenter NVMe SSD: ~70 µs reads, 64 parallel units, 3.5 GB/s, power-loss protected",
    params: &[
        Param {
            key: "read",
            default: "70us",
            kind: Kind::Dur,
            doc: "NAND read plus controller (TLC 50-100 µs); NVMe 4k QD1 reads measure 70-90 µs",
        },
        Param {
            key: "write",
            default: "15us",
            kind: Kind::Dur,
            doc: "a write acknowledged from the protected cache",
        },
        Param {
            key: "units",
            default: "64",
            kind: Kind::Int,
            doc: "requests served at once: 64 / 70 µs ≈ 900k IOPS, above what the interface carries at 4k",
        },
        Param { key: "write_units", default: "0", kind: Kind::Int, doc: WRITE_UNITS_DOC },
        Param {
            key: "channel_rate",
            default: "800MB/s",
            kind: Kind::Rate,
            doc: "NAND channel transfer rate (ONFI 4)",
        },
        Param {
            key: "interface_rate",
            default: "3500MB/s",
            kind: Kind::Rate,
            doc: "PCIe 3.0 ×4 as drives deliver it",
        },
        Param { key: "write_rate", default: "0", kind: Kind::RateOr0, doc: WRITE_RATE_DOC },
        Param {
            key: "flush",
            default: "10us",
            kind: Kind::Dur,
            doc: "a flush on a drive with power-loss protection only orders the queue",
        },
        Param {
            key: "write_cache",
            default: "false",
            kind: Kind::Bool,
            doc: "volatile write cache: off, the cache is power-loss protected",
        },
        Param {
            key: "cache_size",
            default: "256M",
            kind: Kind::Size,
            doc: "dirty bytes held if write_cache is turned on",
        },
        Param {
            key: "lie_on_flush",
            default: "false",
            kind: Kind::Bool,
            doc: "acknowledge flushes without draining the cache",
        },
        Param { key: "cliff_after", default: "0", kind: Kind::Size, doc: COMMON_DOC_CLIFF },
        Param {
            key: "cliff_write",
            default: "0.5ms",
            kind: Kind::Dur,
            doc: "write time once past the cliff",
        },
    ],
};

/// A flash drive model.
#[derive(Clone, Debug)]
pub struct Ssd {
    /// NAND read time per request.
    pub read: Duration,
    /// Acknowledged write time.
    pub write: Duration,
    /// Parallel units.
    pub units: usize,
    /// Writes in progress at once (fewer than `units`; 0: no separate limit).
    pub write_units: usize,
    /// Per-unit transfer rate, bytes/s.
    pub channel_rate: f64,
    /// Host interface, bytes/s, shared by all units.
    pub interface_rate: f64,
    /// Writes' own direction, bytes/s (0: they share the interface).
    pub write_rate: f64,
    /// Flush time when the cache holds dirty data.
    pub flush: Duration,
    /// Volatile cache.
    pub cache: Option<VolatileCache>,
    /// Bytes written before the cliff (0: none).
    pub cliff_after: u64,
    /// Write time past the cliff.
    pub cliff_write: Duration,
}

impl Ssd {
    pub(crate) fn from_params(p: &Params) -> Result<Ssd, ModelError> {
        let units = p.int("units");
        if !(1..=1024).contains(&units) {
            return Err(p.bad("units", "give 1 to 1024"));
        }
        let write_units = p.int("write_units");
        if !(0..=1024).contains(&write_units) {
            return Err(p.bad("write_units", "give 0 (as many as units) to 1024"));
        }
        Ok(Ssd {
            read: p.dur("read"),
            write: p.dur("write"),
            units: units as usize,
            write_units: write_units as usize,
            channel_rate: p.rate("channel_rate"),
            interface_rate: p.rate("interface_rate"),
            write_rate: p.rate_or_0("write_rate"),
            flush: p.dur("flush"),
            cache: cache_from(p)?,
            cliff_after: p.size("cliff_after"),
            cliff_write: p.dur("cliff_write"),
        })
    }

    pub(crate) fn service_time(&self, r: &Req, st: &mut State, start_ns: u64) -> Duration {
        let nand = match r.op {
            Op::Read if st.all_dirty(r.offset, r.len) => Duration::ZERO,
            Op::Read => self.read + xfer(r.len, self.channel_rate),
            Op::Write => {
                st.written += r.len;
                let mut d = if self.cliff_after > 0 && st.written > self.cliff_after {
                    self.cliff_write
                } else {
                    self.write
                };
                if let Some(c) = self.cache {
                    st.mark_dirty(r.offset, r.len);
                    if st.dirty_bytes() > c.capacity {
                        // Writing back a full cache: one program round.
                        st.dirty.clear();
                        d += self.flush;
                    }
                }
                if self.write_units > 0 && self.write_units < self.units {
                    // Fewer write lanes than units: a write waits for one.
                    let end = st.use_write_lane(self.write_units, start_ns, d);
                    d = Duration::from_nanos(end - start_ns);
                }
                d
            }
            Op::Flush => match self.cache {
                Some(c) if c.lie_on_flush => Duration::ZERO,
                Some(_) if st.dirty.is_empty() => Duration::ZERO,
                _ => {
                    st.dirty.clear();
                    self.flush
                }
            },
            Op::Discard => self.write,
        };
        let end = match r.op {
            Op::Write if self.write_rate > 0.0 => st.use_write_link(start_ns, xfer(r.len, self.write_rate)),
            Op::Read | Op::Write => st.use_link(start_ns, xfer(r.len, self.interface_rate)),
            _ => return nand,
        };
        nand.max(Duration::from_nanos(end - start_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Model, Spec};
    use super::*;

    fn ssd(base: &str, sets: &[&str]) -> Ssd {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        match Spec::parse(base, &sets).unwrap().build(1 << 30).unwrap() {
            Model::Ssd(s) => s,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_read_is_nand_time_plus_channel_transfer() {
        let s = ssd("sata-ssd", &[]);
        let mut st = State::default();
        let d = s.service_time(&Req { op: Op::Read, offset: 0, len: 4096 }, &mut st, 0);
        assert_eq!(d, Duration::from_micros(90) + xfer(4096, 400e6));
    }

    #[test]
    fn the_interface_bounds_bandwidth_across_units() {
        let s = ssd("sata-ssd", &[]);
        let mut st = State::default();
        // Eight 1 MiB reads started together: the interface serialises them.
        let last = (0..8)
            .map(|i| s.service_time(&Req { op: Op::Read, offset: i << 20, len: 1 << 20 }, &mut st, 0))
            .max();
        let expect = xfer(8 << 20, 550e6).as_nanos() as i128;
        assert!((last.unwrap().as_nanos() as i128 - expect).abs() <= 8, "{last:?}");
    }

    #[test]
    fn writes_with_their_own_rate_cross_apart_from_reads() {
        // Shared (write_rate=0): 4 MiB of reads then 4 MiB of writes, all
        // started together, take 8 MiB of the interface.
        let shared = ssd("sata-ssd", &["write_cache=false"]);
        let mut st = State::default();
        let mut last = Duration::ZERO;
        for (i, op) in [Op::Read, Op::Write].into_iter().enumerate() {
            for k in 0..4u64 {
                let r = Req { op, offset: ((i as u64) * 4 + k) << 20, len: 1 << 20 };
                last = last.max(shared.service_time(&r, &mut st, 0));
            }
        }
        let near = |d: Duration, want: Duration| (d.as_nanos() as i128 - want.as_nanos() as i128).abs() <= 8;
        assert!(near(last, xfer(8 << 20, 550e6)), "{last:?}");
        // Apart: the reads take 4 MiB of the interface, the writes 4 MiB at
        // their own rate, at the same time.
        let apart = ssd("sata-ssd", &["write_cache=false", "write_rate=2GB/s"]);
        let mut st = State::default();
        let (mut reads, mut writes) = (Duration::ZERO, Duration::ZERO);
        for k in 0..4u64 {
            reads = reads.max(apart.service_time(
                &Req { op: Op::Read, offset: k << 20, len: 1 << 20 },
                &mut st,
                0,
            ));
            let w = Req { op: Op::Write, offset: (4 + k) << 20, len: 1 << 20 };
            writes = writes.max(apart.service_time(&w, &mut st, 0));
        }
        assert!(near(reads, xfer(4 << 20, 550e6)), "{reads:?}");
        assert!(near(writes, xfer(4 << 20, 2e9)), "{writes:?}");
    }

    #[test]
    fn fewer_write_units_queue_writes_but_not_reads() {
        let s = ssd("sata-ssd", &["write_units=2", "write_cache=false", "interface_rate=100GB/s"]);
        let mut st = State::default();
        let w = |st: &mut State| s.service_time(&Req { op: Op::Write, offset: 0, len: 4096 }, st, 0);
        // Two lanes: the third write started together waits one write time.
        let ends: Vec<Duration> = (0..3).map(|_| w(&mut st)).collect();
        assert_eq!(ends, [Duration::from_micros(40), Duration::from_micros(40), Duration::from_micros(80)]);
        // A read does not take a write lane.
        let r = s.service_time(&Req { op: Op::Read, offset: 0, len: 4096 }, &mut st, 0);
        assert_eq!(r, Duration::from_micros(90) + xfer(4096, 400e6));
        // write_units 0 (the default): no separate limit.
        let s = ssd("sata-ssd", &["write_cache=false", "interface_rate=100GB/s"]);
        let mut st = State::default();
        let w3: Vec<Duration> = (0..3)
            .map(|_| s.service_time(&Req { op: Op::Write, offset: 0, len: 4096 }, &mut st, 0))
            .collect();
        assert!(w3.iter().all(|d| *d == Duration::from_micros(40)), "{w3:?}");
    }

    #[test]
    fn the_write_cliff_slows_writes_once_passed() {
        let s = ssd("nvme", &["cliff_after=8k"]);
        let mut st = State::default();
        let w = |st: &mut State| s.service_time(&Req { op: Op::Write, offset: 0, len: 4096 }, st, 1 << 40);
        assert_eq!(w(&mut st), Duration::from_micros(15));
        assert_eq!(w(&mut st), Duration::from_micros(15));
        assert_eq!(w(&mut st), Duration::from_micros(500));
    }

    #[test]
    fn a_flush_costs_a_program_only_with_dirty_data() {
        let s = ssd("sata-ssd", &[]);
        let mut st = State::default();
        let f = |st: &mut State| s.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, st, 0);
        assert_eq!(f(&mut st), Duration::ZERO);
        s.service_time(&Req { op: Op::Write, offset: 0, len: 4096 }, &mut st, 0);
        assert_eq!(f(&mut st), Duration::from_micros(500));
        assert!(st.dirty.is_empty());
        // NVMe with power-loss protection: no volatile cache, flush orders only.
        let n = ssd("nvme", &[]);
        assert_eq!(n.cache, None);
        assert_eq!(
            n.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, &mut State::default(), 0),
            Duration::from_micros(10)
        );
    }
}
