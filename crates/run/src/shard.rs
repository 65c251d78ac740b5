//! The options that let one run span several load hosts, as every command
//! that records a run reads them: `--shard i/N` (this process's part of the
//! load), `--start-at`/`--start-in` (the wall-clock instant its first
//! measured step begins) and `--metrics-addr` (live Prometheus metrics).
//! How each workload splits its load is `storbench_cluster::shard`'s rule;
//! the split itself is done here, from the options as given.

use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use storbench_cluster::{parse_start, split_aligned, Shard, StartAt};
use storbench_io::Profile;

use crate::error::usage;

/// The kinds of run whose load splits over shards.
const SHARDABLE: &[&str] = &["io", "tpcb", "tpcc"];

/// The instant `--start-at`/`--start-in` name, read now; a bad value is a
/// usage error naming it.
pub fn start_of(start_at: Option<DateTime<Utc>>, start_in: Option<Duration>) -> Result<StartAt> {
    parse_start(start_at, start_in, Utc::now()).map_err(|e| usage(e.to_string()))
}

/// This process's shard and start instant.
#[derive(Clone, Copy, Debug)]
pub struct Sharding {
    /// Shard `i/N` (`0/1` when `--shard` is not given).
    pub shard: Shard,
    /// Whether `--shard` was given (then the run records it, even `0/1`).
    pub given: bool,
    /// When the first measured step begins.
    pub start: StartAt,
}

impl Sharding {
    /// Reads `--shard` and the start instant ([`start_of`]); a bad value
    /// is a usage error naming it.
    pub fn of(
        shard: Option<Shard>,
        start_at: Option<DateTime<Utc>>,
        start_in: Option<Duration>,
    ) -> Result<Sharding> {
        Ok(Sharding {
            shard: shard.unwrap_or(Shard::WHOLE),
            given: shard.is_some(),
            start: start_of(start_at, start_in)?,
        })
    }

    /// True when this process runs only part of the load.
    pub fn split(&self) -> bool {
        self.shard.count > 1
    }

    /// Refuses a split for a kind of run whose load does not divide.
    pub fn check_kind(&self, kind: &str) -> Result<()> {
        if self.split() && !SHARDABLE.contains(&kind) {
            return Err(usage(format!(
                "--shard {}: a {kind} run does not split over shards; shardable: {}",
                self.shard,
                SHARDABLE.join(", ")
            )));
        }
        Ok(())
    }

    /// What the run's config records: `"shard": "i/N"` (as `storbench merge`
    /// reads it) and the common start instant.
    pub fn record(&self, config: &mut Value) {
        if self.given {
            config["shard"] = json!(self.shard.to_string());
        }
        if let Some(t) = self.start_rfc3339() {
            config["start_at"] = json!(t);
        }
    }

    /// The common start instant as `--start-at` takes it, if one was given.
    pub fn start_rfc3339(&self) -> Option<String> {
        match self.start {
            StartAt::At(t) => Some(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            StartAt::Now => None,
        }
    }

    /// Arms the common start: the first step the runner starts waits for it.
    pub fn arm(&self) {
        if let StartAt::At(t) = self.start {
            let ms = t.timestamp_millis().max(0) as u64;
            storbench_runner::begin_next_step_at(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            );
        }
    }

    /// Makes `p` this shard's part of an I/O profile over a `size`-byte
    /// target: its share of the threads (and of a `--rate`), and its own
    /// block-aligned part of the span unless `overlap` (every shard then
    /// covers the whole span, as one process with all the threads would).
    pub fn io_profile(&self, p: &mut Profile, size: u64, overlap: bool) -> Result<()> {
        if !self.split() {
            return Ok(());
        }
        let threads = self.part_of(u64::from(p.threads), &format!("threads of profile {}", p.name))?;
        let share = (threads.end - threads.start) as f64 / f64::from(p.threads);
        p.rate = p.rate.map(|r| r * share);
        p.threads = (threads.end - threads.start) as u32;
        if !overlap {
            let span = p.span.unwrap_or(size).min(size);
            let align = p.alignment().max(1);
            let part = split_aligned(self.shard.index, self.shard.count, span, align);
            if part.end - part.start < p.bs {
                return Err(usage(format!(
                    "--shard {}: profile {}'s span of {span} bytes over {} shards leaves less than one block each; use a larger target or --shared-span",
                    self.shard, p.name, self.shard.count
                )));
            }
            p.offset = part.start;
            p.span = Some(part.end - part.start);
        }
        Ok(())
    }

    /// This shard's users or clients at each load level (the whole run's
    /// `levels`).
    pub fn levels(&self, levels: &[usize], what: &str) -> Result<Vec<usize>> {
        levels.iter().map(|&l| self.part_of(l as u64, what).map(|r| (r.end - r.start) as usize)).collect()
    }

    /// A seed for this shard's random sources: `seed` itself for shard 0
    /// (and an unsharded run), another stream for each other shard.
    pub fn seed(&self, seed: u64) -> u64 {
        seed ^ u64::from(self.shard.index).wrapping_mul(0xD1B5_4A32_D192_ED03)
    }

    /// This shard's share of `total` users, clients or threads, named by
    /// `what` for the error when a shard would get none.
    pub fn part_of(&self, total: u64, what: &str) -> Result<std::ops::Range<u64>> {
        let r = self.shard.part(total);
        if r.is_empty() {
            return Err(usage(format!(
                "--shard {}: {total} {what} over {} shards leaves shard {} with none; give at least {} {what}",
                self.shard, self.shard.count, self.shard.index, self.shard.count
            )));
        }
        Ok(r)
    }
}
