//! Emulated media classes: caps on IOPS and bandwidth, applied with the
//! blkio throttle. They bound throughput; they do not model latency, a
//! controller's write cache, or seek behaviour.

use serde::{Deserialize, Serialize};

/// Caps per direction; 0 means not capped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// Read I/Os per second.
    pub read_iops: u64,
    /// Write I/Os per second.
    pub write_iops: u64,
    /// Read bytes per second.
    pub read_bps: u64,
    /// Write bytes per second.
    pub write_bps: u64,
}

const MB: u64 = 1_000_000;

/// The classes and what each caps.
pub const CLASSES: &[(&str, &str)] = &[
    ("hdd", "150 read and 150 write IOPS, 150 MB/s (a 7200 rpm disk)"),
    ("sata-ssd", "90,000 read / 30,000 write IOPS, 500 MB/s"),
    ("nvme", "not capped (the host device as it is)"),
    ("gbe-nas", "5,000 IOPS, 110 MB/s (NAS over 1 GbE)"),
    ("fc-san", "50,000 IOPS, 800 MB/s (SAN over 8 Gb Fibre Channel)"),
    ("custom:RIOPS,WIOPS,RBPS,WBPS", "your own caps (0 = not capped; sizes like 200M)"),
];

/// The caps of a class, `None` for an uncapped one (nvme).
pub fn caps(class: &str) -> Result<Option<Caps>, String> {
    let c = |ri, wi, rb, wb| Some(Caps { read_iops: ri, write_iops: wi, read_bps: rb, write_bps: wb });
    Ok(match class {
        "hdd" => c(150, 150, 150 * MB, 150 * MB),
        "sata-ssd" => c(90_000, 30_000, 500 * MB, 500 * MB),
        "nvme" => None,
        "gbe-nas" => c(5_000, 5_000, 110 * MB, 110 * MB),
        "fc-san" => c(50_000, 50_000, 800 * MB, 800 * MB),
        other => {
            let bad = || {
                format!(
                    "--emulate {other}: use hdd, sata-ssd, nvme, gbe-nas, fc-san or custom:RIOPS,WIOPS,RBPS,WBPS (e.g. custom:500,500,100M,100M)"
                )
            };
            let spec = other.strip_prefix("custom:").ok_or_else(bad)?;
            let v: Vec<&str> = spec.split(',').collect();
            if v.len() != 4 {
                return Err(bad());
            }
            let num = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
            let size = |s: &str| {
                let s = s.trim();
                let (n, mult) = match s.char_indices().find(|(_, ch)| ch.is_ascii_alphabetic()) {
                    Some((i, _)) => (
                        &s[..i],
                        match &s[i..].to_ascii_uppercase()[..] {
                            "K" | "KB" => 1_000,
                            "M" | "MB" => MB,
                            "G" | "GB" => 1_000 * MB,
                            _ => return Err(bad()),
                        },
                    ),
                    None => (s, 1),
                };
                n.parse::<u64>().map(|n| n * mult).map_err(|_| bad())
            };
            let caps = Caps {
                read_iops: num(v[0])?,
                write_iops: num(v[1])?,
                read_bps: size(v[2])?,
                write_bps: size(v[3])?,
            };
            if caps == (Caps { read_iops: 0, write_iops: 0, read_bps: 0, write_bps: 0 }) {
                None
            } else {
                Some(caps)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_custom_caps() {
        assert_eq!(caps("hdd").unwrap().unwrap().read_iops, 150);
        assert_eq!(caps("nvme").unwrap(), None);
        assert_eq!(
            caps("custom:500,250,100M,2G").unwrap().unwrap(),
            Caps { read_iops: 500, write_iops: 250, read_bps: 100 * MB, write_bps: 2000 * MB }
        );
        assert!(caps("floppy").unwrap_err().contains("--emulate floppy"));
        assert!(caps("custom:1,2,3").is_err());
        assert!(caps("custom:1,2,3,4X").is_err());
    }
}
