//! The S5 study's six diskspd profiles on the array models alone, in model
//! time (no daemon, no host: what the emulated arrays would give with no
//! envelope). Each profile runs 8 threads × 8 outstanding I/Os as a closed
//! loop over a file at a given offset on the volume: random I/Os uniform
//! over the file, aligned to the block; sequential I/Os from each thread's
//! eighth of the file, as `storbench io` lays them out. Prints IOPS, MB/s
//! and member I/Os per I/O for each volume.
//!
//!   cargo run --release -p storbench-emu --example s5_model -- MEMBER.toml [FILE_OFFSET ...]
//!
//! FILE_OFFSET (bytes, default 0) is where the test file starts on the
//! volume: a filesystem puts it at a multiple of its allocation unit; an old
//! MBR partition adds 31.5 KiB (32256).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use storbench_emu::model::{Array, ArrayOptions, ArraySpec, Op, Req};

const FILE: u64 = 512 << 20;

struct Profile {
    name: &'static str,
    bs: u64,
    random: bool,
    read: bool,
}

const SIX: [Profile; 6] = [
    Profile { name: "read-random-8k", bs: 8 << 10, random: true, read: true },
    Profile { name: "read-random-64k", bs: 64 << 10, random: true, read: true },
    Profile { name: "write-random-8k", bs: 8 << 10, random: true, read: false },
    Profile { name: "read-seq-64k", bs: 64 << 10, random: false, read: true },
    Profile { name: "write-seq-8k", bs: 8 << 10, random: false, read: false },
    Profile { name: "read-seq-256k", bs: 256 << 10, random: false, read: true },
];

/// (IOPS, member I/Os per I/O) of a profile on a fresh copy of the array.
fn run(a: &Array, p: &Profile, base: u64) -> (f64, f64) {
    let a = a.fresh();
    let (threads, depth, n) = (8u64, 8u64, 40_000u64);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next: Vec<u64> = (0..threads).map(|t| t * (FILE / threads)).collect();
    let mut heap: BinaryHeap<Reverse<(u64, u64)>> =
        (0..threads).flat_map(|t| (0..depth).map(move |_| Reverse((0, t)))).collect();
    let mut last = 0;
    for _ in 0..n {
        let Reverse((t0, th)) = heap.pop().expect("loop");
        let off = if p.random {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 20) % (FILE / p.bs) * p.bs
        } else {
            let o = next[th as usize];
            let end = (th + 1) * (FILE / threads);
            next[th as usize] = if o + p.bs >= end { th * (FILE / threads) } else { o + p.bs };
            o
        };
        let op = if p.read { Op::Read } else { Op::Write };
        let d = a.service_time_of(&Req { op, offset: base + off, len: p.bs }, t0);
        let done = t0 + d.as_nanos() as u64;
        last = last.max(done);
        heap.push(Reverse((done, th)));
    }
    let snap = a.take(last);
    let ios: u64 = snap.members.iter().map(|m| m.reads + m.writes).sum();
    (n as f64 / (last as f64 / 1e9), ios as f64 / n as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let member = args.first().cloned().unwrap_or_else(|| "models/hgst-ssd800mhb.toml".into());
    let offsets: Vec<u64> =
        if args.len() > 1 { args[1..].iter().map(|s| s.parse().expect("bytes")).collect() } else { vec![0] };
    let volumes: [(&str, &str, usize, Option<u64>); 6] = [
        ("r10-4", "raid10", 4, None),
        ("r10-6", "raid10", 6, None),
        ("r10-10", "raid10", 10, None),
        ("r0-4hw", "raid0", 4, Some(1 << 30)),
        ("r0-4sw", "raid0", 4, None),
        ("r50-6", "raid50", 6, None),
    ];
    println!("volume,stripe,file_offset,profile,iops,mbps,member_ios_per_io");
    for (name, layout, disks, cache) in volumes {
        for chunk in ["64k", "256k"] {
            let spec = ArraySpec::from_options(&ArrayOptions {
                layout,
                disks: Some(disks),
                chunk: Some(storbench_metrics::units::parse_size(chunk).unwrap()),
                member: Some(member.as_str()),
                cache,
                ..ArrayOptions::default()
            })
            .unwrap_or_else(|e| panic!("{e}"));
            let a = Array::new(&spec, 16 << 30).unwrap_or_else(|e| panic!("{e}"));
            for &base in &offsets {
                for p in &SIX {
                    let (iops, per) = run(&a, p, base);
                    println!(
                        "{name},{chunk},{base},{},{iops:.0},{:.0},{per:.2}",
                        p.name,
                        iops * p.bs as f64 / 1e6
                    );
                }
            }
        }
    }
}
