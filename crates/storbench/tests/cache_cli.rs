//! `storbench cache mrc` driven as a user would: traces written here in each
//! format (sbtrace through the cache crate's writer, blkparse text, CSV) with
//! answers known in closed form, each output form, and bad input (one line,
//! exit 2, nothing written).

use std::path::Path;

use assert_cmd::Command;
use storbench_cache::trace::{Op, Record, TraceWriter};

fn sb() -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.env_remove("STORBENCH_RESULTS").arg("--quiet");
    c
}

/// A loop over `k` lines of 64 KiB, `rounds` times, as 4 KiB reads at the
/// start of each line, every fourth request a write.
fn loop_trace(path: &Path, k: u64, rounds: u64) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = TraceWriter::new(std::io::BufWriter::new(f)).unwrap();
    let mut t = 0;
    for _ in 0..rounds {
        for i in 0..k {
            t += 1000;
            let op = if t % 4000 == 0 { Op::Write } else { Op::Read };
            w.write(&Record { t_ns: t, offset: i * 65536, len: 4096, lat_ns: 50_000, op }).unwrap();
        }
    }
    w.write(&Record { t_ns: t + 1, offset: 0, len: 0, lat_ns: 0, op: Op::Flush }).unwrap();
    w.finish().unwrap();
}

/// Loop over k = 100 lines, 10 rounds: LRU misses everything below 100
/// lines and only the 100 cold misses at 100 (0.1).
#[test]
fn a_loop_trace_gives_the_closed_form_curve_as_csv() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("loop.sbtrace");
    loop_trace(&p, 100, 10);
    let out = sb()
        .args(["cache", "mrc"])
        .arg(&p)
        .args(["--sizes", "6336k,6400k,12800k", "--csv"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "size_bytes,lru\n6488064,1.000000\n6553600,0.100000\n13107200,0.100000\n"
    );
}

#[test]
fn json_reports_the_trace_the_policies_and_the_target_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("loop.sbtrace");
    loop_trace(&p, 100, 10);
    let out = sb()
        .args(["--json", "cache", "mrc"])
        .arg(&p)
        .args(["--policy", "lru,s3fifo,clock,2q", "--sizes", "1m..8m", "--target", "0.9"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["trace"]["format"], "sbtrace");
    assert_eq!(v["trace"]["requests"], 1001);
    assert_eq!(v["trace"]["skipped"], 1);
    assert_eq!(v["accesses"], 1000);
    assert_eq!(v["footprint_lines"], 100);
    assert_eq!(v["method"], "exact");
    assert_eq!(v["sizes"], serde_json::json!([1 << 20, 2 << 20, 4 << 20, 8 << 20]));
    let c = &v["curves"];
    assert_eq!(c[0]["policy"], "lru");
    // 100 lines of 64 KiB = 6400 KiB reach exactly 0.9.
    assert_eq!(c[0]["size_for_target"], 100 * 65536);
    assert_eq!(c[0]["miss_ratio"], serde_json::json!([1.0, 1.0, 1.0, 0.1]));
    assert_eq!(c[1]["policy"], "s3fifo");
    assert_eq!(c[1]["method"], "simulation");
    // CLOCK on a loop larger than the cache is FIFO: every access misses.
    assert_eq!(c[2]["miss_ratio"], serde_json::json!([1.0, 1.0, 1.0, 0.1]));
    assert_eq!(c[2]["size_for_target"], 8 << 20);
    assert_eq!(c[3]["policy"], "2q");
}

#[test]
fn blkparse_and_csv_traces_read_the_same_as_sbtrace() {
    let dir = tempfile::tempdir().unwrap();
    // Two lines of 64 KiB = 128 sectors, read twice, as blkparse prints them
    // (Q and C for each request; only Q counts) and as CSV.
    let mut blk = String::new();
    let mut csv = String::from("timestamp,offset,size,op\n");
    for (i, sector) in [0u64, 128, 0, 128].iter().enumerate() {
        blk.push_str(&format!("  8,16   1  {}  0.{:09}  99  Q   R {sector} + 128 [fio]\n", 2 * i, i * 1000));
        blk.push_str(&format!(
            "  8,16   1  {}  0.{:09}  0  C   R {sector} + 128 [0]\n",
            2 * i + 1,
            i * 1000 + 500
        ));
        csv.push_str(&format!("{},{},65536,R\n", i * 1000, sector * 512));
    }
    blk.push_str("CPU1 (8,16):\n Reads Queued:           4,      256KiB\n");
    std::fs::write(dir.path().join("t.blk"), blk).unwrap();
    std::fs::write(dir.path().join("t.csv"), csv).unwrap();
    for f in ["t.blk", "t.csv"] {
        let out = sb()
            .args(["cache", "mrc"])
            .arg(dir.path().join(f))
            .args(["--sizes", "64k,128k", "--csv"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "size_bytes,lru\n65536,1.000000\n131072,0.500000\n",
            "{f}"
        );
    }
    let text =
        sb().args(["cache", "mrc"]).arg(dir.path().join("t.blk")).args(["--sizes", "128k"]).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.starts_with("trace: 4 requests (blkparse)"), "{text}");
}

#[test]
fn html_writes_a_page_with_the_curve() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("loop.sbtrace");
    loop_trace(&p, 64, 5);
    let h = dir.path().join("mrc.html");
    sb().args(["cache", "mrc"]).arg(&p).args(["--policy", "lru,arc", "--html"]).arg(&h).assert().success();
    let page = std::fs::read_to_string(&h).unwrap();
    assert!(
        page.contains("<svg") && page.contains("lru (stack-distance)") && page.contains("arc (simulation)")
    );
    assert!(!dir.path().join("mrc.html.tmp").exists());
}

/// Bad input: one line on stderr naming the value and what is allowed, exit
/// 2, and no HTML file written.
#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("loop.sbtrace");
    loop_trace(&p, 10, 2);
    let bad_csv = dir.path().join("bad.csv");
    std::fs::write(&bad_csv, "0,0,4096,R\n1,4096,lots,R\n").unwrap();
    let h = dir.path().join("never.html");
    let cases: Vec<(Vec<&str>, &Path, &str)> = vec![
        (
            vec!["--policy", "lru,mru"],
            &p,
            "'mru' is not a cache policy: use lru, clock, arc, 2q, s3fifo or sieve",
        ),
        (vec!["--sample", "2"], &p, "'2' for '--sample <SAMPLE>': use a rate in (0, 1]"),
        (vec!["--sample-max", "0"], &p, "'0' for '--sample-max <LINES>'"),
        (vec!["--sizes", "4k..1m"], &p, "4k is smaller than one cache line (64k)"),
        (vec!["--line", "big"], &p, "'big' is not a size"),
        (vec!["--line", "0"], &p, "'0' for '--line <LINE>': give a power of two from 4k to 16M"),
        // One rule with `media create --cache-line` (issue 24).
        (vec!["--line", "3k"], &p, "'3k' for '--line <LINE>': give a power of two from 4k to 16M"),
        (vec!["--target", "90"], &p, "'90' for '--target <TARGET>': use a hit ratio in (0, 1]"),
        (vec!["--format", "xml"], &p, "'xml' is not a trace format: use sbtrace, blkparse or csv"),
        // The file is named (issue 24).
        (vec![], &bad_csv, "bad.csv: line 2: size 'lots' is not a whole number"),
        (vec![], Path::new("/nonexistent/trace"), "/nonexistent/trace: no such trace file"),
    ];
    for (args, trace, want) in cases {
        let out = sb().args(["cache", "mrc"]).arg(trace).args(&args).arg("--html").arg(&h).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!h.exists(), "{args:?} wrote the HTML file");
    }
}
