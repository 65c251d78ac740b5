//! Arrays of modelled members (`media create --array`) end to end: the real
//! daemon under a real loop device. Bad layouts and commands exit 2 with one
//! line; the member counters count what the layout makes of a workload; a
//! degraded array returns every block written before the failure; a rebuild
//! finishes healthy, and Ctrl-C during one leaves it paused and consistent;
//! a controller cache without a battery loses its contents at a power cut;
//! a flash cache's misses cross a network to an array behind it.
//! Every test has its own state directory and destroys what it made.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::State;

/// What these tests ask of their place beyond the shared one.
trait Media {
    fn medium(&self, name: &str) -> Value;
}

impl Media for State {
    fn medium(&self, name: &str) -> Value {
        self.media().into_iter().find(|m| m["name"] == name).unwrap()
    }
}

/// An aligned 4 KiB buffer for O_DIRECT, filled with a block's pattern.
struct Block(Vec<u8>, usize);

impl Block {
    fn new() -> Block {
        let raw = vec![0u8; 8192];
        let at = raw.as_ptr().align_offset(4096);
        Block(raw, at)
    }
    fn buf(&mut self) -> &mut [u8] {
        &mut self.0[self.1..self.1 + 4096]
    }
}

fn pattern(i: u64, b: &mut [u8]) {
    for (k, x) in b.iter_mut().enumerate() {
        *x = (i.wrapping_mul(2654435761).wrapping_add(k as u64 * 7) % 251) as u8;
    }
}

/// Block `i`'s offset: spread over 64 MiB, across chunks and members.
fn offset(i: u64) -> u64 {
    (i * 37 % 16384) * 4096
}

fn write_blocks(dev: &str, n: u64) {
    let f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(dev).unwrap();
    let mut b = Block::new();
    for i in 0..n {
        pattern(i, b.buf());
        f.write_all_at(b.buf(), offset(i)).unwrap();
    }
    f.sync_all().unwrap();
}

/// How many of the first `n` blocks read back as written.
fn blocks_intact(dev: &str, n: u64) -> u64 {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(dev).unwrap();
    let (mut b, mut want) = (Block::new(), [0u8; 4096]);
    let mut ok = 0;
    for i in 0..n {
        f.read_exact_at(b.buf(), offset(i)).unwrap();
        pattern(i, &mut want);
        ok += (b.buf() == want.as_slice()) as u64;
    }
    ok
}

/// Sums a member's counter over the counters file's lines from `from_ms` on.
fn member_sum(counters: &str, from_ms: u64, member: usize, key: &str) -> u64 {
    std::fs::read_to_string(counters)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["t_ms"].as_u64().unwrap() >= from_ms)
        .filter_map(|l| l["array"]["members"][member][key].as_u64())
        .sum()
}

/// The end of the first second without I/O in the counters file from now
/// on (plus 1 ms: lines from it on count only what comes after).
fn quiet_since(counters: &str) -> u64 {
    let start = unix_ms();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let idle = std::fs::read_to_string(counters)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["t_ms"].as_u64().unwrap() > start)
            .find(|l| l["ops"].as_object().is_some_and(|o| o.is_empty()));
        if let Some(l) = idle {
            return l["t_ms"].as_u64().unwrap() + 1;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{counters}: no second without I/O in 15 s");
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// S1's NAS's shape: a 16 MiB nvme cache tier before a RAID 0 of six
/// members of 5 ms reads, one unit each, 64 KiB chunks.
const CACHED_RAID0: [&str; 16] = [
    "--array",
    "raid0",
    "--disks",
    "6",
    "--chunk",
    "64k",
    "--member",
    "constant",
    "--member-set",
    "read=5ms",
    "--member-set",
    "units=1",
    "--cache",
    "16M",
    "--cache-model",
    "nvme",
];

const FAST: [&str; 6] = ["--member", "constant", "--member-set", "read=200us", "--member-set", "write=200us"];

fn create(s: &State, name: &str, layout: &[&str]) -> String {
    let mut args = vec!["media", "create", name, "--size", "256M", "--fs", "none"];
    args.extend_from_slice(layout);
    s.ok(&args);
    s.medium(name)["device"].as_str().unwrap().to_string()
}

#[test]
fn bad_layouts_and_commands_exit_2_naming_the_value() {
    let s = State::new();
    let cases: &[(&[&str], &str)] = &[
        (&["--array", "raid5", "--disks", "2"], "--array raid5 --disks 2"),
        (&["--array", "raid0", "--disks", "4", "--chunk", "48k"], "--chunk 48k"),
        (&["--array", "raid0", "--disks", "4", "--chunk", "2k"], "--chunk 2k"),
        (&["--array", "raid0", "--disks", "4", "--chunk", "lots"], "'lots'"),
        (
            &["--array", "raid0", "--disks", "2", "--controller-cache", "1G", "--cache-battery", "maybe"],
            "'maybe': use on or off",
        ),
        (
            &[
                "--array",
                "raid0",
                "--disks",
                "2",
                "--controller-cache",
                "1G",
                "--controller-destage",
                "never",
            ],
            "'never': use idle or full",
        ),
        (&["--array", "raid0", "--disks", "4", "--member", "floppy"], "--member floppy"),
        (&["--array", "raid7", "--disks", "4"], "--array raid7"),
        (&["--array", "raid50", "--disks", "5"], "--groups 2"),
        (&["--array", "raid1", "--disks", "2", "--member-link", "up=1ms"], "bw="),
        (&["--model", "hdd", "--array", "raid0", "--disks", "2"], "only a network model (gbe-nas, fc-san)"),
        (
            &["--model", "gbe-nas", "--set", "backing=nvme", "--array", "raid0", "--disks", "2"],
            "--set backing: the array is gbe-nas's backing",
        ),
        (&["--trace", "t.sbtrace"], "--trace t.sbtrace: only a modelled medium is traced"),
        (&["--cache", "16M"], "--cache 16m: a cache tier goes in front of a modelled medium"),
        (&["--record"], "--record journals what a model's daemon sees"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["media", "create", "x", "--size", "64M", "--fs", "none"];
        args.extend_from_slice(extra);
        let out = s.sb().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    // `fail` on a medium that is not an array, and on a second disk of a raid5.
    s.ok(&["media", "create", "single", "--size", "64M", "--fs", "none", "--model", "constant"]);
    let mut r5 = vec!["--array", "raid5", "--disks", "4"];
    r5.extend_from_slice(&FAST);
    create(&s, "r5", &r5);
    s.ok(&["media", "fail", "r5", "--disk", "1"]);
    let cases: &[(&[&str], &str)] = &[
        (&["media", "fail", "single", "--disk", "0"], "medium 'single' is not an array"),
        (&["media", "fail", "r5", "--disk", "2"], "--disk 2: the raid5 survives 1 failed disk"),
        (&["media", "fail", "r5", "--disk", "4"], "--disk 4: the array has disks 0 to 3"),
        (&["media", "rebuild", "single"], "not an array"),
        (&["media", "rebuild", "r5", "--rate", "fast"], "'fast' for '--rate <RATE>': 'fast' is not a rate"),
    ];
    for (args, want) in cases {
        let out = s.sb().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    assert_eq!(s.medium("r5")["array"]["failed"], serde_json::json!([1]));
}

#[test]
fn member_counters_count_the_layouts_member_ios() {
    let s = State::new();
    let mut r5 = vec!["--array", "raid5", "--disks", "4", "--chunk", "64k"];
    r5.extend_from_slice(&FAST);
    let dev = create(&s, "r5", &r5);
    let rec: Value = serde_json::from_str(&s.ok(&[
        "--json",
        "io",
        "--target",
        &dev,
        "--bs",
        "4k",
        "--rw",
        "randwrite",
        "--qd",
        "8",
        "--duration",
        "3s",
        "--rampup",
        "0s",
    ]))
    .unwrap();
    let m = &rec["steps"][0]["metrics"];
    let fig = |k: &str| m[k]["value"].as_f64().unwrap_or_else(|| panic!("{k} in {m}"));
    let writes = fig("emu.r5.write.iops");
    let (mut mr, mut mw) = (0.0, 0.0);
    for i in 0..4 {
        mr += fig(&format!("emu.r5.member.{i}.reads"));
        mw += fig(&format!("emu.r5.member.{i}.writes"));
    }
    // A 4 KiB write on a RAID 5: 2 member reads and 2 member writes.
    assert!((mr / writes - 2.0).abs() < 0.1, "member reads {mr}/s for {writes} writes/s");
    assert!((mw / writes - 2.0).abs() < 0.1, "member writes {mw}/s for {writes} writes/s");
    assert!(fig("emu.r5.member.busy.max") > 0.0);
    s.ok(&["media", "destroy", "r5"]);
    // RAID 10: reads spread over both copies of each pair.
    let mut r10 = vec!["--array", "raid10", "--disks", "4"];
    r10.extend_from_slice(&FAST);
    let dev = create(&s, "r10", &r10);
    let rec: Value = serde_json::from_str(&s.ok(&[
        "--json",
        "io",
        "--target",
        &dev,
        "--bs",
        "4k",
        "--rw",
        "randread",
        "--qd",
        "8",
        "--duration",
        "3s",
        "--rampup",
        "0s",
    ]))
    .unwrap();
    let m = &rec["steps"][0]["metrics"];
    let r = |i: usize| m[format!("emu.r10.member.{i}.reads")]["value"].as_f64().unwrap();
    for (a, b) in [(0, 1), (2, 3)] {
        assert!(r(a) > 0.0 && (r(a) / r(b) - 1.0).abs() < 0.25, "copies {a}, {b}: {} vs {}", r(a), r(b));
    }
}

#[test]
fn a_degraded_array_returns_every_block_and_a_rebuild_heals_it() {
    let s = State::new();
    let mut r5 = vec!["--array", "raid5", "--disks", "4", "--chunk", "64k"];
    r5.extend_from_slice(&FAST);
    let dev = create(&s, "d", &r5);
    let counters = s.medium("d")["daemon"]["counters"].as_str().unwrap().to_string();
    write_blocks(&dev, 512);
    s.ok(&["media", "fail", "d", "--disk", "2"]);
    assert_eq!(s.medium("d")["array"]["state"], "degraded");
    let from = unix_ms() + 1000;
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(blocks_intact(&dev, 512), 512);
    std::thread::sleep(Duration::from_millis(1200));
    // The failed member served nothing; its chunks were read from the three others.
    assert_eq!(member_sum(&counters, from, 2, "reads"), 0);
    let others: u64 = [0, 1, 3].iter().map(|&i| member_sum(&counters, from, i, "reads")).sum();
    assert!(others > 512, "{others} member reads for 512 blocks, a quarter of them reconstructed");
    // Ctrl-C during a slow rebuild: paused, degraded, data intact; resumed, healthy.
    let child = s
        .sb()
        .args(["media", "rebuild", "d", "--rate", "20MB/s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: interrupting the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("rebuild paused at"), "{err}");
    let a = s.medium("d")["array"].clone();
    assert_eq!(a["state"], "rebuild paused", "{a}");
    let done = a["rebuilt"].as_u64().unwrap();
    assert!(done > 0 && done < a["member_size"].as_u64().unwrap(), "{a}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.medium("d")["array"]["rebuilt"].as_u64().unwrap(), done, "paused means paused");
    assert_eq!(blocks_intact(&dev, 512), 512);
    let t0 = Instant::now();
    s.ok(&["media", "rebuild", "d", "--rate", "2GB/s"]);
    assert!(t0.elapsed() < Duration::from_secs(10));
    let a = s.medium("d")["array"].clone();
    assert_eq!((a["state"].as_str(), a["failed"].as_array().unwrap().len()), (Some("healthy"), 0), "{a}");
    assert_eq!(blocks_intact(&dev, 512), 512);
    s.ok(&["media", "destroy", "d"]);
}

#[test]
fn a_controller_cache_without_a_battery_loses_its_contents_at_a_power_cut() {
    let s = State::new();
    for (battery, survives) in [("on", true), ("off", false)] {
        let name = format!("c-{battery}");
        let mut args = vec![
            "--array",
            "raid1",
            "--disks",
            "2",
            "--controller-cache",
            "64M",
            "--cache-battery",
            battery,
            "--member",
            "constant",
        ];
        args.extend_from_slice(&["--member-set", "write=1ms"]);
        let dev = create(&s, &name, &args);
        // Written without a flush, then the power cut at once (before the
        // controller's one-to-two-second background write-back).
        let f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&dev).unwrap();
        let mut b = Block::new();
        for i in 0..32 {
            pattern(i, b.buf());
            f.write_all_at(b.buf(), offset(i)).unwrap();
        }
        drop(f);
        s.ok(&["media", "powercut", &name]);
        s.ok(&["media", "recover", &name]);
        let dev = s.medium(&name)["device"].as_str().unwrap().to_string();
        let intact = blocks_intact(&dev, 32);
        if survives {
            assert_eq!(intact, 32, "battery {battery}");
        } else {
            assert!(intact < 32, "battery {battery}: {intact} of 32 blocks survived a power cut");
        }
        s.ok(&["media", "destroy", &name]);
    }
}

#[test]
fn a_flash_cache_in_front_of_an_array_misses_to_all_its_members_at_once() {
    // S1's NAS: a cache tier before a 6-disk RAID 0. Members of 5 ms reads,
    // one unit each (200 IOPS apiece); a 16 MiB cache before 256 MiB, so
    // random reads mostly miss. The misses queue at the members they land
    // on, not behind each other: 12 at a time reach about 12/17 of 6 × 200
    // (the closed-loop share), where one timeline would give 200.
    let s = State::new();
    let layout = CACHED_RAID0;
    let dev = create(&s, "fc", &layout);
    assert_eq!(s.medium("fc")["array"]["state"], "healthy", "{}", s.medium("fc"));
    let rec: Value = serde_json::from_str(&s.ok(&[
        "--json",
        "io",
        "--target",
        &dev,
        "--bs",
        "4k",
        "--rw",
        "randread",
        "--qd",
        "12",
        "--duration",
        "3s",
        "--rampup",
        "0s",
    ]))
    .unwrap();
    let m = &rec["steps"][0]["metrics"];
    let fig = |k: &str| m[k]["value"].as_f64().unwrap_or_else(|| panic!("{k} in {m}"));
    let iops = fig("emu.fc.read.iops");
    assert!(iops > 500.0, "{iops} reads/s: the misses did not overlap at the members");
    assert!(fig("emu.fc.cache.read.hit_ratio") < 0.3);
    for i in 0..6 {
        assert!(fig(&format!("emu.fc.member.{i}.reads")) > 40.0, "member {i} in {m}");
    }
    s.ok(&["media", "destroy", "fc"]);
}

#[test]
fn a_miss_through_a_cache_and_a_network_to_an_array_costs_the_trip_the_link_and_one_member() {
    // S1 whole: the flash cache, the iSCSI hop, the NAS's RAID 0 of six.
    // A 0.4 ms round trip, a link that moves a 64 KiB line in 1 ms, members
    // of 5 ms reads. 60 reads of 4 KiB, each in a line of its own (64 KiB
    // apart), one at a time: every one misses and costs, in the model's
    // time, 0.2 ms there + 1 ms of payload + 5 ms at one member + 0.2 ms
    // back = 6.4 ms (without the link 5 ms, without its payload 5.4 ms,
    // without the round trip 6 ms); the lines fall on the six members in
    // turn, ten each.
    let s = State::new();
    let layout = [
        &["--model", "gbe-nas", "--set", "rtt=0.4ms", "--set", "link_rate=65.536MB/s"][..],
        &CACHED_RAID0[..],
    ]
    .concat();
    let dev = create(&s, "nas", &layout);
    let m = s.medium("nas");
    assert_eq!(m["array"]["state"], "healthy", "the array is seen through the network: {m}");
    let counters = m["daemon"]["counters"].as_str().unwrap().to_string();
    // Count from the end of a second without I/O: what probed the new
    // device (udev's blkid) is before it.
    let from = quiet_since(&counters);
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&dev).unwrap();
    let mut b = Block::new();
    for k in 0..60u64 {
        f.read_exact_at(b.buf(), k << 16).unwrap();
    }
    drop(f);
    // The daemon writes its second's line within about a second.
    std::thread::sleep(Duration::from_millis(2200));
    let reads: Vec<Value> = std::fs::read_to_string(&counters)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["t_ms"].as_u64().unwrap() >= from)
        .filter_map(|l| l["ops"].get("read").cloned())
        .collect();
    assert_eq!(reads.iter().map(|r| r["n"].as_u64().unwrap()).sum::<u64>(), 60, "{reads:?}");
    for r in &reads {
        let svc = r["svc_mean_us"].as_f64().unwrap();
        assert!((svc - 6_400.0).abs() < 64.0, "a miss's model time {svc} µs, not 6,400: {r}");
    }
    for i in 0..6 {
        assert_eq!(member_sum(&counters, from, i, "reads"), 10, "member {i}");
    }
    s.ok(&["media", "destroy", "nas"]);
}
