//! `storbench media create | list | destroy`: loop-device media with a
//! chosen filesystem and allocation unit, optionally capped to an emulated
//! class. Emulated classes are caps on IOPS and bandwidth, not latency models.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use storbench_media::{class, CreateOptions, MediaError};
use storbench_metrics::units::{format_size, parse_size};

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench media`.
#[derive(Debug, Args)]
pub struct MediaArgs {
    #[command(subcommand)]
    pub verb: MediaVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum MediaVerb {
    /// Make a medium: sparse file, loop device (direct I/O), filesystem, mount, caps.
    Create {
        /// Its name.
        name: String,
        /// Size (sparse).
        #[arg(long)]
        size: String,
        /// Filesystem: ext4, xfs, btrfs, or none (the raw loop device).
        #[arg(long, default_value = "ext4")]
        fs: String,
        /// Filesystem block size (allocation unit): 1k, 2k, 4k, 8k, 16k, 64k.
        #[arg(long)]
        block_size: Option<String>,
        /// Emulated class: hdd, sata-ssd, nvme, gbe-nas, fc-san, custom:RIOPS,WIOPS,RBPS,WBPS.
        #[arg(long)]
        emulate: Option<String>,
        /// Directory for the backing file (default: the state directory).
        #[arg(long)]
        backing: Option<PathBuf>,
    },
    /// List media: device, size, filesystem, block size, emulation, mount point, state.
    List,
    /// Unmount, remove throttle rules, detach and delete a medium (or --all).
    Destroy {
        /// The medium.
        #[arg(required_unless_present = "all")]
        name: Option<String>,
        /// Every medium, including stale ones.
        #[arg(long)]
        all: bool,
    },
    /// What the emulated classes cap.
    Classes,
}

fn media_err(e: MediaError) -> anyhow::Error {
    match e {
        MediaError::Usage(m) => usage(m),
        MediaError::Failed(m) => anyhow::anyhow!(m),
    }
}

/// Runs `storbench media`.
pub fn run(g: &Global, a: MediaArgs) -> Result<ExitCode> {
    match a.verb {
        MediaVerb::Create { name, size, fs, block_size, emulate, backing } => {
            let size = parse_size(&size).map_err(|e| usage(format!("--size {size}: {e}")))?;
            let block_size = block_size
                .as_deref()
                .map(|b| parse_size(b).map_err(|e| usage(format!("--block-size {b}: {e}"))))
                .transpose()?;
            let o = CreateOptions { size, fs, block_size, emulate, backing };
            let m = storbench_media::create(&name, &o).map_err(media_err)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&m)?);
            } else if !g.quiet {
                eprintln!(
                    "medium {}: {} on {}, {} {}{}{}",
                    m.name,
                    format_size(m.size),
                    m.device,
                    m.fs,
                    if m.block_size > 0 { format!("{}-byte blocks", m.block_size) } else { String::new() },
                    m.mount_point
                        .as_ref()
                        .map(|p| format!(", mounted at {}", p.display()))
                        .unwrap_or_default(),
                    m.emulate
                        .as_ref()
                        .map(|e| format!(", emulating {e} (caps, not a latency model)"))
                        .unwrap_or_default(),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::List => {
            let all = storbench_media::list().map_err(media_err)?;
            if g.json {
                let v: Vec<_> = all
                    .iter()
                    .map(|(m, s)| {
                        let mut v = serde_json::to_value(m).expect("serialises");
                        v["state"] = serde_json::json!(s.as_str());
                        v
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(ExitCode::SUCCESS);
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec!["name", "device", "size", "fs", "block", "emulation", "mount point", "state"]);
            for (m, s) in &all {
                t.add_row(vec![
                    m.name.clone(),
                    m.device.clone(),
                    format_size(m.size),
                    m.fs.clone(),
                    if m.block_size > 0 { format_size(m.block_size) } else { "-".into() },
                    m.emulate.clone().unwrap_or_else(|| "-".into()),
                    m.mount_point.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into()),
                    s.as_str().to_string(),
                ]);
            }
            println!("{t}");
            if all.iter().any(|(_, s)| *s != storbench_media::State::Ready) {
                eprintln!("storbench: some media are stale; `storbench media destroy NAME` cleans them");
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Destroy { name, all } => {
            let names: Vec<String> = if all {
                storbench_media::list().map_err(media_err)?.into_iter().map(|(m, _)| m.name).collect()
            } else {
                vec![name.expect("required unless --all")]
            };
            if !all {
                storbench_media::check_support(false).map_err(media_err)?;
            }
            for n in names {
                storbench_media::destroy(&n).map_err(media_err)?;
                if !g.quiet {
                    eprintln!("medium {n}: destroyed");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Classes => {
            for (c, what) in class::CLASSES {
                println!("{c:<30} {what}");
            }
            println!("\nCaps set with the blkio throttle on the medium's loop device. They bound IOPS and bandwidth;\nthey do not model latency, seek time or a write cache.");
            Ok(ExitCode::SUCCESS)
        }
    }
}
