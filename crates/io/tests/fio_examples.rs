//! The fio import on real job files: fio's own examples (copied from fio's
//! repository, GPL-2.0, see fio-examples/README.md) and a few written for
//! storbench. Each maps to the profiles fio would run, or is refused with
//! one line naming the file, the line, the job and the option.

use std::path::{Path, PathBuf};
use std::time::Duration;

use storbench_io::fio_job::{import_file, Import};
use storbench_io::{Distribution, Pattern};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fio-examples").join(name)
}

fn ok(name: &str) -> Import {
    import_file(&example(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn refused(name: &str) -> String {
    match import_file(&example(name)) {
        Err(e) => e.split_once("fio-examples/").map_or(e.clone(), |(_, rest)| rest.to_string()),
        Ok(i) => panic!("{name} was mapped: {:?}", i.profiles),
    }
}

#[test]
fn fios_time_based_examples_map_to_one_profile_each() {
    let r = ok("fio-rand-read.fio");
    let p = &r.profiles[0];
    assert_eq!(r.profiles.len(), 1);
    assert_eq!(p.name, "fio-rand-read", "the name option names the profile");
    assert_eq!((p.pattern, p.read_pct, p.bs, p.qd, p.threads), (Pattern::Random, 100, 4096, 16, 1));
    assert_eq!((p.direct, p.random_map, p.duration), (false, true, Duration::from_secs(900)));
    assert_eq!((r.size, r.engine), (Some(10 << 30), Some("io_uring")));
    assert_eq!(r.target.as_deref(), Some(Path::new("fio-rand-read")));
    // The origin keeps the job file's text, for the run's config.
    assert!(r.origin["fio_job"]["text"].as_str().unwrap().contains("iodepth=16"));

    let rw = &ok("fio-rand-RW.fio").profiles[0];
    assert_eq!((rw.pattern, rw.read_pct, rw.threads), (Pattern::Random, 60, 4));
    let seq = ok("fio-seq-RW.fio");
    assert_eq!(
        (seq.profiles[0].pattern, seq.profiles[0].read_pct, seq.profiles[0].bs),
        (Pattern::Sequential, 60, 256 << 10)
    );
    assert!(seq.notes[0].contains("own stripe"), "{:?}", seq.notes);
    let w = &ok("fio-seq-write.fio").profiles[0];
    assert_eq!((w.pattern, w.read_pct, w.bs, w.direct), (Pattern::Sequential, 0, 256 << 10, false));
    assert!(ok("fio-seq-read.fio").profiles[0].direct);
}

#[test]
fn fios_other_examples_are_refused_naming_the_option() {
    for (file, want) in [
        ("ssd-test.fio", "ssd-test.fio:19: job [seq-read]: runtime=60: fio ends this job after size="),
        ("tiobench-example.fio", "tiobench-example.fio:8: job [f1]: timeout=60: fio ends this job"),
        ("null.fio", "null.fio: job [null]: no runtime with time_based"),
        ("aio-read.fio", "aio-read.fio: job [file1]: no runtime with time_based"),
        ("jesd219.fio", "jesd219.fio:16: job [JESD219]: bssplit=512/4:"),
        ("iometer-file-access-server.fio", "iometer-file-access-server.fio:6: job [iometer]: bssplit="),
        (
            "basic-verify.fio",
            "basic-verify.fio:9: job [write-and-verify]: verify=crc32c: storbench cannot run",
        ),
        (
            "fixed-rate-submission.fio",
            "fixed-rate-submission.fio:9: job [fixed-rate-submit]: io_submit_mode=offload",
        ),
        ("latency-profile.fio", "latency-profile.fio:14: job [device]: latency_target=500000"),
        (
            "backwards-read.fio",
            "backwards-read.fio:6: job [backwards-read]: rw=read:-8k: 'read:-8k' is not an I/O pattern",
        ),
    ] {
        let e = refused(file);
        assert!(e.starts_with(want), "{file}: {e}");
        assert!(!e.contains('\n'), "{file}: one line");
    }
}

#[test]
fn several_jobs_run_in_order_with_the_globals_before_them() {
    let r = ok("own/ssd-test-timed.fio");
    let names: Vec<&str> = r.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["seq-read", "rand-read", "seq-write", "rand-write"]);
    let shape: Vec<(Pattern, u8)> = r.profiles.iter().map(|p| (p.pattern, p.read_pct)).collect();
    assert_eq!(
        shape,
        [(Pattern::Sequential, 100), (Pattern::Random, 100), (Pattern::Sequential, 0), (Pattern::Random, 0)]
    );
    for p in &r.profiles {
        assert_eq!((p.bs, p.qd, p.direct), (4096, 4, true));
        assert_eq!((p.duration, p.rampup), (Duration::from_secs(60), Duration::from_secs(5)));
    }
    assert_eq!(r.target.as_deref(), Some(Path::new("/mount-point-of-ssd/ssd.test.file")));
}

#[test]
fn kb_base_sync_zipf_and_rates_map_as_fio_reads_them() {
    let r = ok("own/db-log-and-data.fio");
    let [log, data, thr] = &r.profiles[..] else { panic!("{:?}", r.profiles) };
    // kb_base=1000: k is 1000, KiB 1024.
    assert_eq!((log.bs, data.bs, thr.bs), (8000, 8192, 16384));
    assert_eq!(r.size, Some(2_000_000_000), "the file is the largest job's size");
    assert_eq!((log.span, thr.span), (None, Some(1_000_000_000)), "a smaller job uses the file's start");
    assert_eq!((log.fsync_every, log.fdatasync, log.direct), (1, true, false));
    assert_eq!((data.read_pct, data.threads, data.qd), (70, 4, 8));
    assert_eq!(data.dist, Distribution::Zipf { theta: 1.2 });
    assert!(!data.random_map, "fio drops the random map for zipf");
    // rate=,1600k caps writes at 1.6 MB/s per job, and each of 2 jobs is one.
    assert_eq!(thr.rate, Some(1_600_000.0 / 16384.0 * 2.0));
    assert_eq!(r.target.as_deref(), Some(Path::new("/srv/db/io.dat")));
}

#[test]
fn jobs_that_fio_runs_together_are_refused() {
    let e = refused("own/together.fio");
    assert_eq!(
        e,
        "own/together.fio:8: job [writer] runs alongside [reader] in fio (no stonewall before it), and storbench runs profiles one after another: add stonewall to [writer]"
    );
}

#[test]
fn the_benchmarks_job_file_maps_to_its_four_jobs() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/data/io-vs-fio.fio");
    let r = import_file(&f).unwrap();
    let names: Vec<&str> = r.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["randread-4k-qd32", "randrw70-8k-qd8x4", "log-8k-fdatasync", "read-seq-128k-qd8"]);
    assert!(r.profiles.iter().all(|p| p.direct && !p.random_map && p.duration == Duration::from_secs(5)));
    assert_eq!((r.profiles[1].threads, r.profiles[1].read_pct, r.profiles[2].fsync_every), (4, 70, 1));
}
