//! `storbench media create | list | destroy | classes | models | powercut |
//! recover`: loop-device media with a chosen filesystem and allocation unit,
//! optionally capped to an emulated class (caps on IOPS and bandwidth, not
//! latency models) or served per I/O by a device model (`--model`, a
//! supervised daemon: the hidden `media serve`). What is made or shown goes
//! to stdout (JSON with `--json`); `destroy` says what it removed on stderr
//! (hidden by `--quiet`), or on stdout as JSON with `--json`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_media::{class, CreateOptions};
use storbench_metrics::units::{format_size, parse_size, Given};
use storbench_report::Table;

use crate::cli::Global;
use crate::error::{media_err, usage};

/// Options of `storbench media`.
#[derive(Debug, Args)]
pub struct MediaArgs {
    #[command(subcommand)]
    pub verb: MediaVerb,
}

/// Options of `storbench media create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Its name.
    name: String,
    /// Size (sparse).
    #[arg(long, value_parser = parse_size)]
    size: u64,
    /// Filesystem: ext4, xfs, btrfs, or none (the raw loop device).
    #[arg(long, default_value = "ext4")]
    fs: String,
    /// Filesystem block size (allocation unit): 1k, 2k, 4k, 8k, 16k, 64k.
    #[arg(long, value_parser = parse_size)]
    block_size: Option<u64>,
    /// Emulated class: hdd, sata-ssd, nvme, gbe-nas, fc-san, custom:RIOPS,WIOPS,RBPS,WBPS.
    #[arg(long, conflicts_with = "model")]
    emulate: Option<String>,
    /// Device model, per I/O: hdd, sata-ssd, nvme, gbe-nas, fc-san, constant, or a TOML file (see `media models`); with --array, a network model (gbe-nas, fc-san) in front of the array.
    #[arg(long)]
    model: Option<String>,
    /// Override a model parameter: KEY=VALUE (repeatable), e.g. rtt=0.5ms, rpm=5400, lie_on_flush=true.
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "model")]
    sets: Vec<String>,
    /// Write the modelled medium's I/O trace (storbench trace format v1) to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[command(flatten)]
    cache: Box<CacheTierArgs>,
    #[command(flatten)]
    array: Box<ArrayArgs>,
    /// Directory for the backing file (default: the state directory).
    #[arg(long)]
    backing: Option<PathBuf>,
    /// Record the modelled medium's write journal from its creation (every write and flush, for `durability --crash-points`).
    #[arg(long)]
    record: bool,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum MediaVerb {
    /// Make a medium: sparse file, loop device (direct I/O), filesystem, mount, caps.
    Create(Box<CreateArgs>),
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
    /// The built-in device models and their parameters (defaults and sources), and model files with their source and validated error.
    Models {
        /// Also list these model files (TOML; default: every *.toml under ./models).
        files: Vec<PathBuf>,
    },
    /// Fit a device model to measurements of a device (or to a table of published figures).
    Calibrate(Box<crate::cmd::calibrate::CalibrateArgs>),
    /// Emulate a model and compare it with the real device, cell by cell.
    Validate(Box<crate::cmd::calibrate::ValidateArgs>),
    /// Cut a modelled medium's power: its volatile write cache is lost and every later I/O fails.
    Powercut {
        /// The medium.
        name: String,
    },
    /// Bring a modelled medium back after a power cut or a crashed daemon, with exactly what was durable.
    Recover {
        /// The medium.
        name: String,
    },
    /// A modelled medium's cache tier: `media cache reset NAME` empties it.
    Cache {
        #[command(subcommand)]
        verb: CacheVerb,
    },
    /// Scale a modelled medium's device times: 0.5 makes it twice as fast, 2 half as fast, 1 as modelled.
    Scale {
        /// The medium.
        name: String,
        /// The factor on the device's service times, 0.01 to 100.
        #[arg(allow_negative_numbers = true, value_parser = scale_factor)]
        factor: f64,
    },
    /// Fail one disk of an array: reads of its chunks reconstruct from the others.
    Fail {
        /// The array.
        name: String,
        /// The disk, from 0.
        #[arg(long)]
        disk: usize,
    },
    /// Rebuild an array's failed disks at a rate, showing progress until healthy (Ctrl-C pauses it).
    Rebuild {
        /// The array.
        name: String,
        /// Rebuild rate in bytes per second of the disk's space: e.g. 200MB/s.
        #[arg(long, default_value = "200MB/s", value_parser = Given::parser(storbench_emu::model::parse_rate))]
        rate: Given<f64>,
        /// Start the rebuild and return (it goes on in the daemon).
        #[arg(long)]
        no_wait: bool,
    },
    /// Run a modelled medium's daemon (started by `media create`; not for direct use).
    #[command(hide = true)]
    Serve {
        /// The daemon's config (JSON).
        #[arg(long)]
        config: PathBuf,
    },
}

/// What `media cache` does.
#[derive(Debug, Subcommand)]
pub enum CacheVerb {
    /// Empty the cache tier (dirty lines are written back first): the next run starts cold.
    Reset {
        /// The medium.
        name: String,
    },
}

/// A cache tier in front of the model (`--cache SIZE` and its options;
/// the defaults are `TierSpec::from_options`'s, which plans share).
#[derive(Debug, Args)]
pub struct CacheTierArgs {
    /// A cache tier of this size in front of the model or the array (a flash cache): e.g. 2G.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub cache: Option<u64>,
    /// The cache device's model: nvme (default), sata-ssd, hdd or constant.
    #[arg(long, requires = "cache")]
    pub cache_model: Option<String>,
    /// Replacement policy: lru, clock, arc, 2q, s3fifo (default), sieve.
    #[arg(long, requires = "cache")]
    pub cache_policy: Option<String>,
    /// Writes: back (default: acknowledged from the cache, destaged later) or through (to both).
    #[arg(long, requires = "cache")]
    pub cache_write: Option<String>,
    /// Cache line: a power of two from 4k to 16M (default 64k).
    #[arg(long, requires = "cache", value_name = "SIZE", value_parser = parse_size)]
    pub cache_line: Option<u64>,
    /// Start empty (none, the default) or filled with the medium's first lines (sequential).
    #[arg(long, requires = "cache")]
    pub cache_warm: Option<String>,
}

/// A RAID array of modelled members (`--array LAYOUT --disks N …`): the
/// defaults are `ArraySpec::from_options`'s, which plans share.
#[derive(Debug, Args)]
pub struct ArrayArgs {
    /// An array instead of one device (or behind a network model: --model gbe-nas --set rtt=0.2ms --array raid0 …): raid0, raid1 (mirror), raid10, raid5, raid6, raid50, raid60.
    #[arg(long, conflicts_with = "emulate")]
    pub array: Option<String>,
    /// Members of the array.
    #[arg(long, requires = "array")]
    pub disks: Option<usize>,
    /// Stripe unit (chunk): a power of two from 4k to 16M (default 64k).
    #[arg(long, requires = "array", value_name = "SIZE", value_parser = parse_size)]
    pub chunk: Option<u64>,
    /// Parity groups of a raid50/raid60 (default 2).
    #[arg(long, requires = "array")]
    pub groups: Option<usize>,
    /// Every member's model: a built-in (sata-ssd, the default; hdd-15k, nvme, …) or a TOML file.
    #[arg(long, requires = "array")]
    pub member: Option<String>,
    /// Override a member model parameter: KEY=VALUE (repeatable).
    #[arg(long = "member-set", value_name = "KEY=VALUE", requires = "array")]
    pub member_sets: Vec<String>,
    /// A network link before each member: up=0.1ms,down=0.1ms,bw=25Gbit (a write lands on two hosts).
    #[arg(long, requires = "array")]
    pub member_link: Option<String>,
    /// A controller write cache of this size in front of the array: e.g. 1G.
    #[arg(long, requires = "array", value_name = "SIZE", value_parser = parse_size)]
    pub controller_cache: Option<u64>,
    /// The controller cache's battery: on (default; a flush returns at once) or off (a power cut loses it).
    #[arg(long, requires = "controller_cache", value_name = "on|off", value_parser = storbench_emu::parse_battery)]
    pub cache_battery: Option<bool>,
    /// When the controller cache destages: idle (default: whenever the members have time) or full (above half full).
    #[arg(long, requires = "controller_cache", value_name = "idle|full", value_parser = storbench_emu::parse_destage)]
    pub controller_destage: Option<storbench_emu::Destage>,
}

impl ArrayArgs {
    /// The medium's spec, if `--array` was given.
    pub fn spec(&self) -> Result<Option<storbench_emu::Spec>> {
        let Some(layout) = &self.array else { return Ok(None) };
        let o = storbench_emu::ArrayOptions {
            layout,
            disks: self.disks,
            chunk: self.chunk,
            groups: self.groups,
            member: self.member.as_deref(),
            member_sets: &self.member_sets,
            link: self.member_link.as_deref(),
            cache: self.controller_cache,
            battery: self.cache_battery,
            destage: self.controller_destage,
        };
        let a = storbench_emu::ArraySpec::from_options(&o).map_err(|e| usage(e.to_string()))?;
        Ok(Some(storbench_emu::Spec { base: "array".into(), array: Some(a), ..Default::default() }))
    }
}

impl CacheTierArgs {
    /// The tier, if `--cache` was given.
    pub fn spec(&self) -> Result<Option<storbench_emu::TierSpec>> {
        let Some(size) = self.cache else { return Ok(None) };
        let o = storbench_emu::TierOptions {
            size,
            model: self.cache_model.as_deref(),
            line: self.cache_line,
            policy: self.cache_policy.as_deref(),
            write: self.cache_write.as_deref(),
            warm: self.cache_warm.as_deref(),
        };
        Ok(Some(storbench_emu::TierSpec::from_options(&o)))
    }
}

/// Below this a model's idle 4 KiB read is under ten times the daemon's
/// floor, which is then more than a tenth of it: the loop device and FUSE
/// round trip add 40 µs to a QD1 read through /dev/fuse on a quiet host
/// (BENCHMARKS.md, 2026-11-24, release build, bench/emu-floor.sh), about
/// 20 µs in all through FUSE over io_uring (2026-11-25), more on a busy one.
const FLOOR_HINT: std::time::Duration = std::time::Duration::from_micros(300);

/// A 4 KiB read's latency on a fresh, idle model (no queue, nothing
/// cached; a network's round trip included).
fn idle_read_latency(spec: &storbench_emu::Spec, size: u64) -> Option<std::time::Duration> {
    let model = spec.build(size).ok()?;
    let req = storbench_emu::Req { op: storbench_emu::Op::Read, offset: size / 2, len: 4096 };
    Some(model.idle_latency(&req))
}

/// Runs `storbench media`.
pub fn run(g: &Global, a: MediaArgs) -> Result<ExitCode> {
    match a.verb {
        MediaVerb::Create(c) => create(g, *c),
        MediaVerb::List => list(g),
        MediaVerb::Destroy { name, all } => {
            let names: Vec<String> = if all {
                storbench_media::list().map_err(media_err)?.into_iter().map(|(m, _)| m.name).collect()
            } else {
                vec![name.expect("required unless --all")]
            };
            if !all {
                storbench_media::check_support(false).map_err(media_err)?;
            }
            let mut gone = Vec::new();
            for n in names {
                storbench_media::destroy(&n).map_err(media_err)?;
                if !g.quiet && !g.json {
                    eprintln!("medium {n}: destroyed");
                }
                gone.push(n);
            }
            if g.json {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "destroyed": gone }))?);
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Classes => {
            if g.json {
                let v: Vec<_> = class::CLASSES
                    .iter()
                    .map(|(c, what)| serde_json::json!({"class": c, "caps": what}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(ExitCode::SUCCESS);
            }
            for (c, what) in class::CLASSES {
                println!("{c:<30} {what}");
            }
            println!("\nCaps set with the blkio throttle on the medium's loop device. They bound IOPS and bandwidth;\nthey do not model latency, seek time or a write cache.");
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Calibrate(a) => crate::cmd::calibrate::calibrate(g, *a),
        MediaVerb::Validate(a) => crate::cmd::calibrate::validate(g, *a),
        MediaVerb::Models { files } => models(g, files),
        MediaVerb::Cache { verb: CacheVerb::Reset { name } } => {
            storbench_media::emu::cache_reset(&name).map_err(media_err)?;
            if !g.quiet && !g.json {
                eprintln!("medium {name}: cache emptied");
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Powercut { name } => {
            storbench_media::check_support(false).map_err(media_err)?;
            storbench_media::emu::powercut(&name).map_err(media_err)?;
            if !g.quiet {
                eprintln!("medium {name}: power cut (volatile cache lost; I/O fails until `storbench media recover {name}`)");
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Recover { name } => {
            storbench_media::check_support(false).map_err(media_err)?;
            let m = storbench_media::emu::recover(&name).map_err(media_err)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&m)?);
            } else if !g.quiet {
                eprintln!("medium {name}: recovered on {}", m.device);
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Scale { name, factor } => {
            storbench_media::check_support(false).map_err(media_err)?;
            let now = storbench_media::emu::set_scale(&name, factor).map_err(media_err)?;
            if g.json {
                println!("{}", serde_json::json!({ "name": name, "scale": now }));
            } else if !g.quiet {
                eprintln!("medium {name}: device times ×{now}");
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Fail { name, disk } => {
            storbench_media::check_support(false).map_err(media_err)?;
            let st = storbench_media::emu::array_command(&name, storbench_media::emu::ArrayVerb::Fail(disk))
                .map_err(media_err)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&st)?);
            } else if !g.quiet {
                eprintln!(
                    "medium {name}: disk {disk} failed; the array is {} (failed: {:?})",
                    st.state, st.failed
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        MediaVerb::Rebuild { name, rate, no_wait } => rebuild(g, &name, &rate, no_wait),
        MediaVerb::Serve { config } => {
            let text = std::fs::read_to_string(&config)
                .map_err(|e| usage(format!("--config {}: {e}", config.display())))?;
            let cfg: storbench_emu::daemon::DaemonConfig = serde_json::from_str(&text)
                .map_err(|e| usage(format!("--config {}: {e}", config.display())))?;
            storbench_emu::daemon::serve(&cfg).map_err(|e| match e {
                storbench_emu::EmuError::Usage(m) => usage(m),
                storbench_emu::EmuError::Failed(m) => anyhow::anyhow!(m),
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A factor on a medium's device times: a number in the range the
/// scheduler takes (`storbench_emu::sched::check_scale`).
fn scale_factor(s: &str) -> std::result::Result<f64, String> {
    let f: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number: use e.g. 0.5 or 2"))?;
    storbench_emu::sched::check_scale(f).map(|()| f)
}

/// `media create`: the flags checked and combined into one spec (a network
/// model in front of an array, a cache tier in front of either), then made.
fn create(g: &Global, c: CreateArgs) -> Result<ExitCode> {
    let CreateArgs { name, size, fs, block_size, emulate, model, sets, trace, cache, array, backing, record } =
        c;
    if let (Some(t), None, None) = (&trace, &model, &array.array) {
        return Err(usage(format!(
            "--trace {}: only a modelled medium is traced; give --model or --array",
            t.display()
        )));
    }
    let mut model = model
        .as_deref()
        .map(|m| storbench_emu::Spec::parse(m, &sets).map_err(|e| usage(e.to_string())))
        .transpose()?;
    if let Some(mut a) = array.spec()? {
        // `--model gbe-nas --array …`: the network in front of the array.
        if let Some(front) = model.take() {
            if front.array.is_some() {
                return Err(usage(format!(
                    "--array {}: the --model file has an [array] of its own; give one of them",
                    array.array.as_deref().unwrap_or_default()
                )));
            }
            a = storbench_emu::Spec { array: a.array, ..front };
        }
        a.build(size).map_err(|e| usage(e.to_string()))?;
        model = Some(a);
    }
    match (model.as_mut(), cache.spec()?) {
        (Some(spec), Some(tier)) => {
            spec.cache = Some(tier);
            spec.build(size).map_err(|e| usage(e.to_string()))?;
        }
        (None, Some(t)) => {
            let size = format_size(t.size);
            let why = "a cache tier goes in front of a modelled medium; give --model or --array";
            return Err(usage(format!("--cache {size}: {why}")));
        }
        _ => {}
    }
    let o = CreateOptions { size, fs, block_size, emulate, model, trace, backing, record };
    let m = storbench_media::create(&name, &o).map_err(media_err)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        println!(
            "medium {}: {} on {}, {} {}{}{}",
            m.name,
            format_size(m.size),
            m.device,
            m.fs,
            if m.block_size > 0 { format!("{}-byte blocks", m.block_size) } else { String::new() },
            m.mount_point.as_ref().map(|p| format!(", mounted at {}", p.display())).unwrap_or_default(),
            m.emulate
                .as_ref()
                .map(|e| format!(", emulating {e} (caps, not a latency model)"))
                .or_else(|| m.model.as_ref().map(|s| format!(", modelled per I/O as {}", s.label())))
                .unwrap_or_default(),
        );
        if let Some(lat) = m.model.as_ref().and_then(|s| idle_read_latency(s, m.size)) {
            let floor = m.daemon.as_ref().and_then(|d| d.floor.as_ref());
            let limit = floor
                .map(|f| std::time::Duration::from_nanos((f.qd1_p50_us * 1e3 * 3.0) as u64))
                .unwrap_or(FLOOR_HINT);
            if lat < limit {
                eprintln!(
                    "storbench: note: a 4k read on this model takes {} µs, under 3× the emulator's floor ({}); the daemon absorbs its floor, but a model time near or below it reads as the floor, and the host's scheduling weighs on it: compare such media with each other (docs/media.md, the envelope)",
                    lat.as_micros(),
                    floor
                        .map(|f| format!("{:.0} µs measured now at QD1", f.qd1_p50_us))
                        .unwrap_or_else(|| "not measured: about 20 µs through FUSE over io_uring".into())
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `media list`: every medium with its state (an array's, a time scale
/// other than 1), as a table or JSON.
fn list(g: &Global) -> Result<ExitCode> {
    for (m, _) in storbench_media::list().map_err(media_err)? {
        storbench_media::warn_orphaned_scale(&m);
    }
    let all = storbench_media::list().map_err(media_err)?;
    // The time scale in effect, on a modelled medium (1: as modelled).
    let scale = |m: &storbench_media::Medium| storbench_media::emu::scale_status(m).map(|s| s.scale);
    if g.json {
        let v: Vec<_> = all
            .iter()
            .map(|(m, s)| {
                let mut v = serde_json::to_value(m).expect("serialises");
                v["state"] = serde_json::json!(s.as_str());
                if let Some(a) = storbench_media::emu::array_status(m) {
                    v["array"] = serde_json::json!(a);
                }
                if let Some(f) = scale(m) {
                    v["scale"] = serde_json::json!(f);
                }
                v
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        println!("no media (storbench media create NAME --size 4G ... makes one)");
        return Ok(ExitCode::SUCCESS);
    }
    let mut t =
        Table::with_header(["name", "device", "size", "fs", "block", "emulation", "mount point", "state"]);
    for (m, s) in &all {
        t.add_row(vec![
            m.name.clone(),
            m.device.clone(),
            format_size(m.size),
            m.fs.clone(),
            if m.block_size > 0 { format_size(m.block_size) } else { "-".into() },
            m.emulate
                .clone()
                .or_else(|| {
                    m.model.as_ref().map(|s| match scale(m).filter(|f| *f != 1.0) {
                        Some(f) => format!("model {} ×{f}", s.label()),
                        None => format!("model {}", s.label()),
                    })
                })
                .unwrap_or_else(|| "-".into()),
            m.mount_point.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into()),
            match storbench_media::emu::array_status(m) {
                Some(a) if a.state != "healthy" => format!("{} (array {})", s.as_str(), a.state),
                _ => s.as_str().to_string(),
            },
        ]);
    }
    print!("{}", t.to_text());
    if all.iter().any(|(_, s)| *s != storbench_media::State::Ready) {
        eprintln!("storbench: some media are stale; `storbench media destroy NAME` cleans them");
    }
    Ok(ExitCode::SUCCESS)
}

/// `media models`: the built-in models and the model files, with sources.
fn models(g: &Global, files: Vec<PathBuf>) -> Result<ExitCode> {
    let files = crate::cmd::calibrate::model_files(files)?;
    if g.json {
        let mut v = serde_json::to_value(storbench_emu::model::builtins())?;
        if let Some(a) = v.as_array_mut() {
            for m in a.iter_mut() {
                m["source"] = serde_json::json!(crate::cmd::calibrate::BUILTIN_SOURCE);
                m["validated"] = serde_json::Value::Null;
            }
            for f in &files {
                a.push(crate::cmd::calibrate::model_file_json(f));
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    for b in storbench_emu::model::builtins() {
        println!("{}: {}", b.name, b.about);
        println!("  source: {}", crate::cmd::calibrate::BUILTIN_SOURCE);
        println!("  validated: not against a device (a class, not one drive: calibrate yours)");
        for p in b.params {
            println!("  {:<16} {:<10} {}", p.key, p.default, p.doc);
        }
        println!();
    }
    for f in &files {
        match crate::cmd::calibrate::model_file_summary(f) {
            Some(s) => println!("{s}\n"),
            None => println!("{}: not a model file (no base)\n", f.display()),
        }
    }
    println!("A model file is TOML: base = \"hdd\" plus any of its keys (e.g. rpm = 5400); --set KEY=VALUE overrides.\nNetwork models take their device's keys as backing.KEY. Sources and caveats: docs/media.md.");
    Ok(ExitCode::SUCCESS)
}

/// `media rebuild`: starts the rebuild and, unless `--no-wait`, shows its
/// progress until the array is healthy (Ctrl-C pauses it).
fn rebuild(g: &Global, name: &str, rate: &Given<f64>, no_wait: bool) -> Result<ExitCode> {
    use storbench_media::emu::{array_command, array_state, ArrayVerb};
    storbench_media::check_support(false).map_err(media_err)?;
    let st = array_command(name, ArrayVerb::Rebuild(rate.value as u64)).map_err(media_err)?;
    if !g.quiet && !g.json {
        eprintln!("medium {name}: rebuilding disk(s) {:?} at {}", st.failed, rate.text);
    }
    if no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    let mut last_pct = -1i64;
    loop {
        let st = array_state(name).map_err(media_err)?;
        if st.failed.is_empty() {
            if g.json {
                println!("{}", serde_json::to_string_pretty(&st)?);
            } else if !g.quiet {
                eprintln!("medium {name}: rebuilt; the array is healthy");
            }
            return Ok(ExitCode::SUCCESS);
        }
        if crate::interrupt::requested() {
            let st = array_command(name, ArrayVerb::Pause).map_err(media_err)?;
            eprintln!(
                "medium {name}: rebuild paused at {:.0} % (the array stays degraded; `storbench media rebuild {name}` resumes)",
                st.progress() * 100.0
            );
            return Ok(ExitCode::from(crate::error::EXIT_INTERRUPTED));
        }
        let pct = (st.progress() * 100.0) as i64;
        if !g.quiet && !g.json && pct / 10 != last_pct / 10 {
            eprintln!("medium {name}: rebuild {pct} %");
            last_pct = pct;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn verb(args: &[&str]) -> Result<MediaVerb, String> {
        let argv = ["storbench", "media"].iter().chain(args);
        match crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            crate::cli::Command::Media(m) => Ok(m.verb),
            _ => unreachable!(),
        }
    }

    #[test]
    fn sizes_factors_and_rates_are_typed_by_clap() {
        let Ok(MediaVerb::Create(c)) = verb(&["create", "m", "--size", "64M", "--block-size", "4k"]) else {
            panic!("create")
        };
        assert_eq!((c.size, c.block_size), (64 << 20, Some(4096)));
        let Ok(MediaVerb::Create(c)) =
            verb(&["create", "m", "--size", "1G", "--model", "hdd", "--cache", "64M"])
        else {
            panic!("create --cache")
        };
        assert_eq!(c.cache.spec().unwrap().map(|t| t.size), Some(64 << 20));
        let Ok(MediaVerb::Scale { factor, .. }) = verb(&["scale", "m", "0.5"]) else { panic!("scale") };
        assert_eq!(factor, 0.5);
        let Ok(MediaVerb::Rebuild { rate, .. }) = verb(&["rebuild", "m"]) else { panic!("rebuild") };
        assert_eq!((rate.value, rate.text.as_str()), (200e6, "200MB/s"));
        for (args, want) in [
            (&["create", "m", "--size", "lots"][..], "'lots' is not a size"),
            (&["create", "m", "--size", "1G", "--block-size", "4q"], "'4q' is not a size"),
            (
                &["create", "m", "--size", "1G", "--model", "hdd", "--cache", "lots"],
                "'lots' for '--cache <SIZE>'",
            ),
            (&["scale", "m", "fast"], "'fast' is not a number"),
            (&["scale", "m", "1000"], "a time scale must be"),
            (&["rebuild", "m", "--rate", "fast"], "'fast' is not a rate"),
        ] {
            let e = verb(args).err().unwrap();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
