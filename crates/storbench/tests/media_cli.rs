//! `storbench media` and `storbench pg` on real loop devices, filesystems,
//! blkio throttle rules and PostgreSQL servers. Every test has its own state
//! directory and a guard that destroys what it made, even when it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common;
use common::State;

fn majmin(dev: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/block/{}/dev", dev.trim_start_matches("/dev/")))
        .unwrap()
        .trim()
        .into()
}

fn throttled(mm: &str) -> bool {
    ["read_iops_device", "write_iops_device", "read_bps_device", "write_bps_device"].iter().any(|f| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/blkio/blkio.throttle.{f}"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().next() == Some(mm))
    })
}

fn loop_holds(backing: &Path) -> bool {
    let out = Command::new("losetup").arg("-j").arg(backing).output().unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

fn mounted(p: &Path) -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == p.to_str())
}

#[test]
fn each_filesystem_at_two_block_sizes_runs_io_and_leaves_nothing() {
    let s = State::new();
    for (fs, bs, size) in [
        ("ext4", "1k", "128M"),
        ("ext4", "4k", "128M"),
        ("xfs", "4k", "320M"),
        ("xfs", "64k", "320M"),
        ("btrfs", "4k", "256M"),
    ] {
        let name = format!("{fs}-{bs}");
        s.ok(&[
            "media",
            "create",
            &name,
            "--size",
            size,
            "--fs",
            fs,
            "--block-size",
            bs,
            "--emulate",
            "fc-san",
        ]);
        let m = s.media().into_iter().find(|m| m["name"] == name.as_str()).unwrap();
        assert_eq!(m["state"], "ready");
        let (dev, backing) =
            (m["device"].as_str().unwrap().to_string(), PathBuf::from(m["backing_file"].as_str().unwrap()));
        let mp = PathBuf::from(m["mount_point"].as_str().unwrap());
        let mm = majmin(&dev);
        assert!(mounted(&mp) && loop_holds(&backing) && throttled(&mm), "{name} is set up");
        let out = Command::new("stat").args(["-f", "-c", "%S"]).arg(&mp).output().unwrap();
        let want = storbench_bs(bs);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want.to_string(),
            "{name}: the filesystem's block size"
        );

        let target = mp.join("t.dat");
        let rec: Value = serde_json::from_str(&s.ok(&[
            "--json",
            "io",
            "--target",
            target.to_str().unwrap(),
            "--size",
            "32M",
            "--bs",
            "8k",
            "--rw",
            "randrw",
            "--duration",
            "1s",
            "--rampup",
            "0s",
        ]))
        .unwrap();
        assert!(rec["steps"][0]["metrics"]["io.iops"]["value"].as_f64().unwrap() > 0.0);
        assert_eq!(rec["run"]["env"]["medium"]["name"], name.as_str(), "the run records its medium");
        assert_eq!(rec["run"]["env"]["target"]["fs_type"], fs);
        let dev_name = dev.trim_start_matches("/dev/");
        // The monitor watched the medium's own device: its per-second samples
        // and its summary figures are in the step.
        let prefix = format!("dev.{dev_name}.");
        let sampled = rec["steps"][0]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"].as_str().is_some_and(|n| n.starts_with(&prefix)));
        let figures = rec["steps"][0]["metrics"].as_object().unwrap();
        assert!(
            sampled && figures.contains_key(&format!("{prefix}w_iops")),
            "the monitor watched {dev_name}: {:?}",
            figures.keys().collect::<Vec<_>>()
        );

        s.ok(&["media", "destroy", &name]);
        assert!(!mounted(&mp), "{name}: still mounted");
        assert!(!loop_holds(&backing), "{name}: loop device left");
        assert!(!throttled(&mm), "{name}: throttle rule left");
        assert!(!backing.exists(), "{name}: backing file left");
        assert!(!mp.exists(), "{name}: mount point left");
    }
    assert!(s.media().is_empty());
}

fn storbench_bs(bs: &str) -> u64 {
    bs.trim_end_matches('k').parse::<u64>().unwrap() * 1024
}

#[test]
fn a_refused_block_size_or_class_is_one_line_and_leaves_nothing() {
    let s = State::new();
    let before = Command::new("losetup").arg("-a").output().unwrap().stdout;
    for (args, want) in [
        (vec!["media", "create", "e8", "--size", "128M", "--fs", "ext4", "--block-size", "8k"], "page size"),
        (vec!["media", "create", "x", "--size", "128M", "--fs", "zfs"], "--fs zfs"),
        (vec!["media", "create", "x", "--size", "128M", "--emulate", "floppy"], "--emulate floppy"),
        (vec!["media", "create", "x", "--size", "64M", "--fs", "xfs"], "xfs"),
        (vec!["media", "create", "bad name", "--size", "64M"], "medium name"),
        (vec!["media", "destroy", "nothing"], "no medium named 'nothing'"),
    ] {
        let out = s.sb().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want} in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert!(s.media().is_empty());
    let after = Command::new("losetup").arg("-a").output().unwrap().stdout;
    let count = |b: &[u8]| {
        String::from_utf8_lossy(b).lines().filter(|l| l.contains(s.dir.path().to_str().unwrap())).count()
    };
    assert_eq!(count(&after), count(&before), "a failed create left a loop device");
}

#[test]
fn the_hdd_class_holds_its_cap_within_ten_percent() {
    let s = State::new();
    s.ok(&["media", "create", "slow", "--size", "256M", "--fs", "none", "--emulate", "hdd"]);
    let dev = s.media()[0]["device"].as_str().unwrap().to_string();
    let rec: Value = serde_json::from_str(&s.ok(&[
        "--json",
        "io",
        "--target",
        &dev,
        "--bs",
        "8k",
        "--rw",
        "randread",
        "--qd",
        "8",
        "--duration",
        "5s",
        "--rampup",
        "1s",
    ]))
    .unwrap();
    let iops = rec["steps"][0]["metrics"]["io.iops"]["value"].as_f64().unwrap();
    assert!((135.0..=165.0).contains(&iops), "hdd caps reads at 150 IOPS; measured {iops}");
    assert_eq!(rec["run"]["env"]["medium"]["emulate"], "hdd");
}

#[test]
fn a_managed_postgres_keeps_its_wal_on_the_wal_medium() {
    let s = State::new();
    s.ok(&["media", "create", "pgdata", "--size", "512M", "--fs", "ext4"]);
    s.ok(&["media", "create", "pgwal", "--size", "320M", "--fs", "xfs", "--block-size", "4k"]);
    s.ok(&["pg", "up", "t1", "--data", "pgdata", "--wal", "pgwal", "-c", "shared_buffers=32MB"]);
    let media = s.media();
    let wal_mp =
        PathBuf::from(media.iter().find(|m| m["name"] == "pgwal").unwrap()["mount_point"].as_str().unwrap());
    s.ok(&["tpcb", "init", "--db", "managed:t1", "--scale", "1"]);
    let rec: Value =
        serde_json::from_str(&s.ok(&["--json", "tpcb", "run", "--db", "managed:t1", "--duration", "2s"]))
            .unwrap();
    assert!(rec["steps"][0]["metrics"]["tps"]["value"].as_f64().unwrap() > 0.0);
    let placement = &rec["run"]["env"]["db"]["managed"]["placement"];
    assert_eq!(placement["wal"]["medium"]["name"], "pgwal", "{placement}");
    assert_eq!(placement["data"]["medium"]["name"], "pgdata");

    let status: Value = serde_json::from_str(&s.ok(&["--json", "pg", "status", "t1"])).unwrap();
    assert_eq!(status["settings"], serde_json::json!([["shared_buffers", "32MB"]]));
    let text = s.ok(&["pg", "status", "t1"]);
    assert!(text.contains("(medium pgwal)") && text.contains("settings: shared_buffers=32MB"), "{text}");
    let data = PathBuf::from(status["placement"]["data"]["path"].as_str().unwrap());
    let link = std::fs::read_link(data.join("pg_wal")).expect("pg_wal is a link to the WAL medium");
    assert!(link.starts_with(&wal_mp), "pg_wal -> {}", link.display());
    let segments =
        std::fs::read_dir(&link).unwrap().filter(|e| e.as_ref().unwrap().file_name().len() == 24).count();
    assert!(segments >= 1, "WAL segments live on the WAL medium");

    s.ok(&["pg", "down", "t1", "--destroy"]);
    assert!(!data.exists() && !link.exists());
    s.ok(&["media", "destroy", "--all"]);
}

#[test]
fn a_server_stopped_mid_run_fails_the_run_and_keeps_earlier_steps() {
    let s = State::new();
    let dir = s.dir.path().join("pgdata");
    s.ok(&["pg", "up", "t2", "--data", dir.to_str().unwrap()]);
    s.ok(&["tpcb", "init", "--db", "managed:t2"]);
    let child = s
        .sb()
        .args([
            "tpcb",
            "run",
            "--db",
            "managed:t2",
            "--clients",
            "1,2,3,4",
            "--duration",
            "2s",
            "--reconnect-for",
            "2s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    s.ok(&["pg", "down", "t2"]);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Stopped mid-step (lost, not back in time) or between steps (cannot connect).
    assert!(err.contains("lost") || err.contains("connect"), "{err}");
    let list: Value = serde_json::from_str(&s.ok(&["--json", "results", "list"])).unwrap();
    let run = list.as_array().unwrap().iter().find(|r| r["kind"] == "tpcb").unwrap().clone();
    assert_eq!(run["status"], "failed");
    let rec: Value =
        serde_json::from_str(&s.ok(&["results", "export", &run["id"].to_string(), "--json"])).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "the step completed before the server stopped is kept");
    assert_eq!(steps[0]["params"]["partial"], false);
    assert!(steps[0]["metrics"]["tps"]["value"].as_f64().unwrap() > 0.0);
    s.ok(&["pg", "down", "t2", "--destroy"]);
}

/// A setting of the managed server on `port`, as it runs.
fn show(port: u64, setting: &str) -> String {
    common::managed_psql(port, &format!("SHOW {setting}"))
}

#[test]
fn pg_up_on_an_existing_instance_with_other_settings_names_them_and_changes_nothing() {
    let s = State::new();
    let dir = s.dir.path().join("pgdata");
    let up = s.ok(&["pg", "up", "t3", "--data", dir.to_str().unwrap(), "-c", "shared_buffers=32MB"]);
    assert!(up.starts_with("managed PostgreSQL t3 ") && up.contains("use --db managed:t3"), "{up}");
    let status: Value = serde_json::from_str(&s.ok(&["--json", "pg", "status", "t3"])).unwrap();
    let port = status["port"].as_u64().unwrap();
    assert_eq!(show(port, "shared_buffers"), "32MB", "-c reaches the server");

    let out = s.sb().args(["pg", "up", "t3", "-c", "shared_buffers=64MB", "--port", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("-c shared_buffers=64MB (it has shared_buffers=32MB)"), "{err}");
    assert!(err.contains(&format!("--port 1 (it has {port})")), "{err}");
    assert_eq!(show(port, "shared_buffers"), "32MB", "the running server is untouched");

    let down: Value = serde_json::from_str(&s.ok(&["--json", "pg", "down", "t3"])).unwrap();
    assert_eq!(down, serde_json::json!({"stopped": ["t3"]}));
    let out = s.sb().args(["pg", "up", "t3", "--data", "/elsewhere/pgdata"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--data /elsewhere/pgdata (it has "), "{err}");
    // The same flags, or none, start it as it is.
    s.ok(&["pg", "up", "t3", "--data", dir.to_str().unwrap(), "-c", "shared_buffers=32MB"]);
    assert_eq!(show(port, "shared_buffers"), "32MB");
    s.ok(&["pg", "down", "t3"]);
    s.ok(&["pg", "up", "t3"]);
    assert_eq!(show(port, "shared_buffers"), "32MB");
    let gone: Value = serde_json::from_str(&s.ok(&["--json", "pg", "down", "t3", "--destroy"])).unwrap();
    assert_eq!(gone, serde_json::json!({"removed": ["t3"]}));
    assert!(!dir.exists());
}

#[test]
fn media_results_go_to_stdout_and_quiet_keeps_them() {
    let s = State::new();
    // `s.sb()` passes --quiet: the medium made is a result, not progress.
    let out = s.sb().args(["media", "create", "q", "--size", "64M", "--fs", "none"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("medium q: 64m on /dev/loop"), "{text}");
    assert!(out.stderr.is_empty());
    let classes: Value = serde_json::from_str(&s.ok(&["--json", "media", "classes"])).unwrap();
    assert!(classes.as_array().unwrap().iter().any(|c| c["class"] == "hdd"));
    assert!(s.ok(&["media", "classes"]).contains("hdd"));
    let gone: Value = serde_json::from_str(&s.ok(&["--json", "media", "destroy", "q"])).unwrap();
    assert_eq!(gone, serde_json::json!({"destroyed": ["q"]}));
    assert!(s.media().is_empty());
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

/// The postmaster's pid, from its data directory's pid file.
fn postmaster(data: &Path) -> i32 {
    std::fs::read_to_string(data.join("postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn process_runs(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !matches!(s.rsplit_once(") ").map(|x| &x.1[..1]), Some("Z" | "X")))
}

/// PostgreSQL's shared memory segments a process has mapped.
fn shm_of(pid: i32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut v: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/dev/shm/PostgreSQL."))
        .map(String::from)
        .collect();
    v.dedup();
    v
}

#[test]
fn a_managed_instance_admits_tcp_only_with_its_password_and_never_shows_it() {
    let s = State::new();
    let dir = s.dir.path().join("pgdata");
    let up = s.sb().args(["pg", "up", "sec", "--data", dir.to_str().unwrap()]).output().unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let status: Value = serde_json::from_str(&s.ok(&["--json", "pg", "status", "sec"])).unwrap();
    let port = status["port"].as_u64().unwrap();
    let sock = PathBuf::from(status["socket_dir"].as_str().unwrap());
    assert_eq!(mode(&sock), 0o700, "the socket's directory is its user's alone");
    let pwfile = sock.join("password");
    assert_eq!(mode(&pwfile), 0o600);
    let password = std::fs::read_to_string(&pwfile).unwrap().trim().to_string();
    assert!(password.len() >= 32, "a generated password");
    let hba = std::fs::read_to_string(dir.join("pg_hba.conf")).unwrap();
    for l in hba.lines().filter(|l| l.starts_with("host")) {
        assert!(!l.contains("trust"), "TCP is trusted: {l}");
    }
    // Without the password, TCP is refused (-w: never prompt).
    let out = Command::new("psql")
        .args([
            "-X",
            "-w",
            "-At",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "root",
            "-d",
            "storbench",
        ])
        .args(["-c", "SELECT 1"])
        .env_remove("PGPASSWORD")
        .env("PGPASSFILE", "/nonexistent")
        .output()
        .unwrap();
    assert!(!out.status.success(), "connected without a password");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("password"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // managed:NAME reads it and works; no output, record or store shows it.
    let mut seen = Vec::new();
    for args in [
        vec!["tpcb", "init", "--db", "managed:sec", "--scale", "1"],
        vec!["--json", "tpcb", "run", "--db", "managed:sec", "--duration", "1s"],
        vec!["--json", "pg", "status", "sec"],
        vec!["--json", "pg", "list"],
        vec!["pg", "status", "sec"],
        vec!["--json", "results", "list"],
        vec!["tpcb", "run", "--db", "managed:sec/nosuchdb", "--duration", "1s"],
    ] {
        let out = s.sb().args(&args).output().unwrap();
        seen.push(String::from_utf8_lossy(&out.stdout).into_owned());
        seen.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    seen.push(String::from_utf8_lossy(&up.stdout).into_owned());
    seen.push(String::from_utf8_lossy(&up.stderr).into_owned());
    seen.push(String::from_utf8_lossy(&std::fs::read(s.dir.path().join("r.db")).unwrap()).into_owned());
    assert!(seen[1].is_empty() || !seen[1].contains("error"), "tpcb init: {}", seen[1]);
    assert!(seen[2].contains("\"tps\""), "managed:NAME works: {}", seen[3]);
    for text in &seen {
        assert!(!text.contains(&password), "the password was shown or stored: {text}");
    }
    s.ok(&["pg", "down", "sec", "--destroy"]);
    assert!(!sock.exists() && !dir.exists());
}

#[test]
fn a_medium_s_image_and_trace_are_its_owner_s_alone() {
    let s = State::new();
    s.ok(&["media", "create", "img", "--size", "32M", "--fs", "none"]);
    let m = s.media().into_iter().find(|m| m["name"] == "img").unwrap();
    assert_eq!(mode(Path::new(m["backing_file"].as_str().unwrap())), 0o600);
    let trace = s.dir.path().join("t.trace");
    let out = s
        .sb()
        .args(["media", "create", "tr", "--size", "32M", "--fs", "none", "--model", "constant", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    if out.status.success() {
        let m = s.media().into_iter().find(|m| m["name"] == "tr").unwrap();
        assert_eq!(mode(Path::new(m["backing_file"].as_str().unwrap())), 0o600);
        assert_eq!(mode(&trace), 0o600, "the trace");
    } else {
        // No FUSE here: the model's part is the emulator tests' to skip.
        eprintln!("modelled medium not made: {}", String::from_utf8_lossy(&out.stderr));
    }
    s.ok(&["media", "destroy", "--all"]);
}

#[test]
fn a_server_that_ignores_fast_and_immediate_shutdown_is_killed_checked_and_its_shared_memory_removed() {
    let s = State::new();
    let dir = s.dir.path().join("pgdata");
    s.ok(&["pg", "up", "stuck", "--data", dir.to_str().unwrap()]);
    let pm = postmaster(&dir);
    let segs = shm_of(pm);
    assert!(!segs.is_empty(), "the server maps its control segment");
    // A stopped process takes no signal but SIGKILL: as a server hung in
    // I/O on a full medium would.
    nix_kill(pm, "STOP");
    let t0 = std::time::Instant::now();
    let out = s.sb().args(["pg", "down", "stuck", "--destroy", "--wait", "1s"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert!(!process_runs(pm), "the postmaster outlived pg down");
    for seg in &segs {
        assert!(!Path::new(seg).exists(), "{seg} left behind");
    }
    assert!(!dir.exists());
}

fn nix_kill(pid: i32, sig: &str) {
    assert!(Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status().unwrap().success());
}

#[test]
fn pg_down_finds_a_server_whose_data_directory_is_gone_and_never_says_removed_while_it_runs() {
    let s = State::new();
    let dir = s.dir.path().join("pgdata");
    s.ok(&["pg", "up", "gone", "--data", dir.to_str().unwrap()]);
    let pm = postmaster(&dir);
    // The pid file is no longer where it was (a medium unmounted under the
    // server, a directory moved): the server is found by its command line.
    let moved = s.dir.path().join("moved");
    std::fs::rename(&dir, &moved).unwrap();
    let out = s.sb().args(["--json", "pg", "down", "gone", "--destroy", "--wait", "5s"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!process_runs(pm), "pg down said removed while the postmaster runs");
    let _ = std::fs::remove_dir_all(&moved);
}

#[test]
fn media_destroy_refuses_a_medium_a_server_uses_and_touches_nothing() {
    let s = State::new();
    s.ok(&["media", "create", "busy", "--size", "256M", "--fs", "ext4"]);
    s.ok(&["pg", "up", "onbusy", "--data", "busy"]);
    let m = s.media().into_iter().find(|m| m["name"] == "busy").unwrap();
    let mp = PathBuf::from(m["mount_point"].as_str().unwrap());
    let out = s.sb().args(["media", "destroy", "busy"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("in use by pid") && err.contains("nothing was destroyed"), "{err}");
    assert!(!err.contains("destroyed\n") || err.contains("nothing"), "{err}");
    assert!(mounted(&mp), "unmounted under the server");
    assert_eq!(s.media().into_iter().find(|m| m["name"] == "busy").unwrap()["state"], "ready");
    // The server still answers.
    s.ok(&["tpcb", "init", "--db", "managed:onbusy", "--scale", "1"]);
    s.ok(&["pg", "down", "onbusy", "--destroy"]);
    s.ok(&["media", "destroy", "busy"]);
    assert!(!mounted(&mp) && s.media().is_empty());
}

#[test]
fn a_missing_or_mistyped_place_is_one_line_exit_2_and_leaves_nothing() {
    let s = State::new();
    let data = s.dir.path().join("pgdata");
    let d = data.to_str().unwrap();
    for (args, want) in [
        (vec!["pg", "up", "bad", "--data", "/nonexistent/sb/data"], "/nonexistent/sb"),
        (vec!["pg", "up", "bad", "--data", d, "--wal", "/nonexistent/sb/wal"], "/nonexistent/sb"),
        (vec!["pg", "up", "bad", "--data", "nosuchmedium"], "'nosuchmedium' is neither a medium"),
        (vec!["pg", "up", "bad", "--data", d, "--temp", "nosuchmedium"], "nosuchmedium"),
        (
            vec!["media", "create", "m", "--size", "32M", "--fs", "none", "--backing", "/nonexistent/sb"],
            "--backing",
        ),
    ] {
        let out = s.sb().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want} in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let list: Value = serde_json::from_str(&s.ok(&["--json", "pg", "list"])).unwrap();
    assert_eq!(list, serde_json::json!([]));
    assert!(s.media().is_empty());
    assert!(!data.exists(), "a refused pg up made its data directory");
    assert!(!s.dir.path().join("nosuchmedium").exists());
    assert!(!Path::new("/nonexistent").exists());
}

#[test]
fn a_server_that_will_not_start_says_its_own_reason() {
    let s = State::new();
    let dir = s.dir.path().join("pgdata");
    s.ok(&["pg", "up", "nostart", "--data", dir.to_str().unwrap()]);
    s.ok(&["pg", "down", "nostart"]);
    std::fs::remove_file(dir.join("global/pg_control")).unwrap();
    let out = s.sb().args(["pg", "up", "nostart"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("pg_control"), "the server's reason is shown: {err}");
    s.ok(&["pg", "down", "nostart", "--destroy"]);
}

/// With nothing made, the lists say so in words instead of an empty table.
#[test]
fn empty_lists_say_there_is_nothing_and_how_to_make_one() {
    let s = State::new();
    let media = s.ok(&["media", "list"]);
    assert_eq!(media.trim(), "no media (storbench media create NAME --size 4G ... makes one)");
    let pg = s.ok(&["pg", "list"]);
    assert_eq!(pg.trim(), "no managed instances (storbench pg up NAME --data DIR starts one)");
    let json: Value = serde_json::from_str(&s.ok(&["--json", "media", "list"])).unwrap();
    assert_eq!(json, serde_json::json!([]), "JSON stays a list");
}

/// Ctrl-C twice on a plan that made a medium: the second stops the running
/// cell at once (it is a child in the terminal's process group), and the
/// plan still tears down the medium it made; the run is kept, interrupted.
#[test]
fn a_second_ctrl_c_stops_the_cell_at_once_and_the_plan_still_tears_down_its_medium() {
    use std::os::unix::process::CommandExt;
    let s = State::new();
    std::fs::write(
        s.path("p.toml"),
        r#"
name = "twice"
[target.m]
media = { size = "128M", fs = "ext4" }
[[workload]]
kind = "io"
run = { target = "{target}/io.dat", size = "16M", rw = "randread", bs = "4k", duration = "60s", rampup = "0s" }
"#,
    )
    .unwrap();
    let mut child = s.sb().args(["run", "p.toml", "--no-report"]).process_group(0).spawn().unwrap();
    // Into the step: the medium made and the I/O running.
    let t0 = std::time::Instant::now();
    while s.media().is_empty() && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(s.media().len(), 1, "the plan made its medium");
    // SAFETY: signalling our own child's process group, as a terminal's Ctrl-C does.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(s.media().is_empty(), "the plan tore down its medium: {:?}", s.media());
    let list: serde_json::Value = serde_json::from_str(&s.ok(&["--json", "results", "list"])).unwrap();
    let io = list.as_array().unwrap().iter().find(|r| r["kind"] == "io").expect("the io run is kept").clone();
    assert_eq!(io["status"], "interrupted", "{io}");
}
