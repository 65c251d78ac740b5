//! What a run measured on, in one line, from what it recorded in its
//! environment: for an I/O run the filesystem, the device (and its bus, as
//! its kernel name tells it), direct or buffered I/O and the engine — "on
//! ext4 over /dev/vda (virtio), direct I/O, io_uring"; for a database run
//! the engine, its version and the settings that decide durability, then
//! where its data lives — "SQLite 3.45.1, WAL, synchronous=full; data in
//! /srv/db on ext4 over /dev/vda (virtio)"; and a medium made by `media
//! create` with its model, caps and cache. A report puts the line at the
//! top of each section. Only reads the run's recorded environment: a key a
//! run did not record is left out, never guessed.

use serde_json::Value;

use crate::model::{RunData, Section};

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// What a kernel device name says of its bus: `vda` → virtio.
fn bus(device: &str) -> Option<&'static str> {
    let name = device.trim_start_matches("/dev/");
    let starts = |p: &str| name.starts_with(p);
    Some(if starts("vd") {
        "virtio"
    } else if starts("nvme") {
        "NVMe"
    } else if starts("xvd") {
        "Xen"
    } else if starts("sd") {
        "SCSI/SATA"
    } else if starts("loop") {
        "loop device"
    } else if starts("md") {
        "md RAID"
    } else if starts("dm-") {
        "device mapper"
    } else if starts("mmcblk") {
        "MMC"
    } else {
        return None;
    })
}

/// "ext4 over /dev/vda (virtio)", or "the block device /dev/loop0 (loop device)".
fn fs_over(fs: Option<&str>, device: Option<&str>) -> Option<String> {
    let dev = device.map(|d| match bus(d) {
        Some(b) => format!("{d} ({b})"),
        None => d.to_string(),
    });
    match (fs, dev) {
        (Some("block"), Some(d)) => Some(format!("the block device {d}")),
        (Some(f), Some(d)) => Some(format!("{f} over {d}")),
        (Some(f), None) => Some(f.to_string()),
        (None, Some(d)) => Some(d),
        (None, None) => None,
    }
}

fn bytes(v: u64) -> String {
    const U: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in U {
        if v >= size {
            let x = v as f64 / size as f64;
            return if x.fract() == 0.0 { format!("{x:.0} {name}") } else { format!("{x:.1} {name}") };
        }
    }
    format!("{v} B")
}

/// A medium made by `media create`: "medium slow (model hdd; cache 2 GiB
/// s3fifo)" or "medium hdd (caps 150/150 IOPS, 150 MB/s)".
fn medium(m: &Value) -> Option<String> {
    let name = str_of(m, "name")?;
    let mut what = Vec::new();
    if let Some(model) = m.get("model").filter(|x| x.is_object()) {
        let mut t = format!("model {}", str_of(model, "base").unwrap_or("?"));
        if let Some(set) = model.get("set").and_then(Value::as_object).filter(|s| !s.is_empty()) {
            let kv: Vec<String> =
                set.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(&v.to_string()))).collect();
            t.push_str(&format!(" with {}", kv.join(", ")));
        }
        what.push(t);
        if let Some(c) = model.get("cache").filter(|x| x.is_object()) {
            let size = c.get("size").and_then(Value::as_u64).map(bytes).unwrap_or_default();
            let policy = str_of(c, "policy").unwrap_or("");
            let write = str_of(c, "write").map(|w| format!(", {w}")).unwrap_or_default();
            what.push(format!("cache {size} {policy}{write}").replace("  ", " ").trim().to_string());
        }
    } else if let Some(c) = m.get("caps").filter(|x| x.is_object()) {
        let n = |k: &str| c.get(k).and_then(Value::as_u64).unwrap_or(0);
        what.push(format!(
            "capped at {}/{} IOPS, {}/{} MB/s read/write",
            n("read_iops"),
            n("write_iops"),
            n("read_bps") / 1_000_000,
            n("write_bps") / 1_000_000
        ));
    } else if let Some(e) = str_of(m, "emulate") {
        what.push(format!("emulating {e}"));
    }
    Some(if what.is_empty() {
        format!("medium {name}")
    } else {
        format!("medium {name} ({})", what.join("; "))
    })
}

/// The engine's name as people write it.
fn engine_name(e: &str) -> &str {
    match e {
        "sqlite" => "SQLite",
        "postgres" => "PostgreSQL",
        "mysql" => "MySQL/MariaDB",
        other => other,
    }
}

/// The settings of `engine` that decide what a commit waits for, as
/// recorded (PostgreSQL records only its non-default ones: an absent
/// durability setting is its default, and said so).
fn durability(engine: &str, settings: &Value) -> Vec<String> {
    let get =
        |k: &str| settings.get(k).map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()));
    match engine {
        "sqlite" => {
            let mut out = Vec::new();
            if let Some(j) = get("journal_mode") {
                out.push(if j.eq_ignore_ascii_case("wal") {
                    "WAL".to_string()
                } else {
                    format!("journal_mode={j}")
                });
            }
            if let Some(s) = get("synchronous") {
                out.push(format!("synchronous={s}"));
            }
            out
        }
        "postgres" => {
            let mut out = vec![format!(
                "synchronous_commit={}",
                get("synchronous_commit").unwrap_or_else(|| "on".into())
            )];
            for k in ["fsync", "full_page_writes", "wal_sync_method", "synchronous_standby_names"] {
                if let Some(v) = get(k).filter(|v| !v.is_empty()) {
                    out.push(format!("{k}={v}"));
                }
            }
            // Recorded in 8 kB pages.
            if let Some(p) = get("shared_buffers").and_then(|v| v.parse::<u64>().ok()) {
                out.push(format!("shared_buffers={}", bytes(p * 8192)));
            }
            out
        }
        "mysql" => {
            let mut out = Vec::new();
            for k in
                ["innodb_flush_log_at_trx_commit", "sync_binlog", "innodb_flush_method", "innodb_doublewrite"]
            {
                if let Some(v) = get(k).filter(|v| !v.is_empty()) {
                    out.push(format!("{k}={v}"));
                }
            }
            if let Some(p) = get("innodb_buffer_pool_size").and_then(|v| v.parse::<u64>().ok()) {
                out.push(format!("innodb_buffer_pool_size={}", bytes(p)));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// A path without its `.` parts (`/home/u/./data` → `/home/u/data`), as
/// recorded paths joined to a working directory carry them.
fn clean(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|x| *x != ".").collect();
    let out = parts.join("/");
    if out.is_empty() {
        p.to_string()
    } else {
        out
    }
}

/// A database run's line: engine, version and durability; then its data.
fn database(db: &Value) -> Option<String> {
    let engine = str_of(db, "engine")?;
    let mut head = engine_name(engine).to_string();
    if let Some(v) = str_of(db, "version") {
        head.push(' ');
        head.push_str(v.split_whitespace().next().unwrap_or(v));
    }
    let mut parts = vec![head];
    parts.extend(durability(engine, db.get("settings").unwrap_or(&Value::Null)));
    if let Some(m) = db.get("managed").and_then(|m| str_of(m, "name")) {
        parts.push(format!("managed server {m}"));
    }
    let mut line = parts.join(", ");
    let fs = db.get("data_fs").unwrap_or(&Value::Null);
    let place = fs_over(str_of(fs, "fs_type"), str_of(fs, "device"));
    match (str_of(db, "data_dir").map(clean), place) {
        (Some(dir), Some(p)) => line.push_str(&format!("; data in {dir} on {p}")),
        (Some(dir), None) => line.push_str(&format!("; data in {dir}")),
        (None, _) => {
            if let Some(url) = str_of(db, "url") {
                line.push_str(&format!("; server at {url}, its storage not visible from here"));
            }
        }
    }
    if let Some(m) = db.get("medium").and_then(medium) {
        line.push_str(&format!(", {m}"));
    }
    Some(line)
}

/// An I/O run's line: "ext4 over /dev/vda (virtio), direct I/O, io_uring; target /mnt/t".
fn io(env: &Value) -> Option<String> {
    let t = env.get("target")?;
    let mut parts = Vec::new();
    if let Some(p) = fs_over(str_of(t, "fs_type"), str_of(t, "device")) {
        parts.push(p);
    }
    match env.get("direct_io").and_then(Value::as_bool) {
        Some(true) => parts.push("direct I/O".into()),
        Some(false) => parts.push("buffered I/O (page cache)".into()),
        None => {}
    }
    if let Some(e) = str_of(env, "engine") {
        parts.push(e.to_string());
    }
    if parts.is_empty() {
        return None;
    }
    let mut line = parts.join(", ");
    if let Some(p) = str_of(t, "path") {
        line.push_str(&format!("; target {}", clean(p)));
    }
    if let Some(m) = env.get("medium").and_then(medium) {
        line.push_str(&format!(", {m}"));
    }
    Some(line)
}

/// What run `r` measured on, if its environment says.
pub fn line(r: &RunData) -> Option<String> {
    let env = &r.run.env;
    match env.get("db").filter(|d| d.is_object()) {
        Some(db) => database(db),
        None => io(env),
    }
}

/// The storage lines of a section: one when every configuration measured
/// on the same (or says nothing different), else one per configuration
/// (`hdd: ext4 over …`), each from the configuration's first run.
pub(crate) fn section_lines(s: &Section<'_>) -> Vec<String> {
    let per: Vec<(String, String)> =
        s.groups.iter().filter_map(|g| Some((s.short_label(g), line(g.runs.first()?)?))).collect();
    let mut distinct: Vec<&String> = per.iter().map(|x| &x.1).collect();
    distinct.dedup();
    match distinct.len() {
        0 => Vec::new(),
        1 if per.len() == s.groups.len() || s.groups.len() == 1 => vec![distinct[0].clone()],
        _ => per.into_iter().map(|(g, l)| format!("{g}: {l}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_io_target_reads_as_its_filesystem_device_and_engine() {
        let env = json!({
            "target": {"path": "/mnt/t/f", "fs_type": "ext4", "device": "/dev/vda"},
            "direct_io": true, "engine": "io_uring",
        });
        assert_eq!(io(&env).unwrap(), "ext4 over /dev/vda (virtio), direct I/O, io_uring; target /mnt/t/f");
        let env = json!({
            "target": {"path": "/dev/loop3", "fs_type": "block", "device": "/dev/loop3"},
            "direct_io": false, "engine": "psync",
            "medium": {"name": "slow", "model": {"base": "hdd", "cache": {"size": 2147483648u64, "policy": "s3fifo", "write": "write-back"}}},
        });
        assert_eq!(
            io(&env).unwrap(),
            "the block device /dev/loop3 (loop device), buffered I/O (page cache), psync; target /dev/loop3, medium slow (model hdd; cache 2 GiB s3fifo, write-back)"
        );
    }

    #[test]
    fn a_database_reads_as_its_engine_durability_and_data() {
        let db = json!({
            "engine": "sqlite", "version": "3.45.1",
            "settings": {"journal_mode": "wal", "synchronous": "full"},
            "data_dir": "/srv/./db", "data_fs": {"fs_type": "xfs", "device": "/dev/nvme0n1p2"},
            "medium": {"name": "hdd", "caps": {"read_iops": 150, "write_iops": 150, "read_bps": 150000000u64, "write_bps": 150000000u64}},
        });
        assert_eq!(
            database(&db).unwrap(),
            "SQLite 3.45.1, WAL, synchronous=full; data in /srv/db on xfs over /dev/nvme0n1p2 (NVMe), medium hdd (capped at 150/150 IOPS, 150/150 MB/s read/write)"
        );
        let pg = json!({
            "engine": "postgres", "version": "15.8 (Debian 15.8-0+deb12u1)", "url": "postgres://root@db:5432/x",
            "settings": {"fsync": "off", "shared_buffers": "16384"},
        });
        assert_eq!(
            database(&pg).unwrap(),
            "PostgreSQL 15.8, synchronous_commit=on, fsync=off, shared_buffers=128 MiB; server at postgres://root@db:5432/x, its storage not visible from here"
        );
        assert_eq!(database(&json!({"url": "x"})), None, "no engine recorded: no line");
    }
}
