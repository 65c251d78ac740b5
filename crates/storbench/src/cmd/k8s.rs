//! `storbench k8s render PLAN.toml --shards N`: the Kubernetes manifests
//! that run a plan as N shards and merge them (crates/cluster's k8s module:
//! typed k8s-openapi objects as YAML on stdout). The plan is parsed first, so
//! a bad plan is refused with its line before anything is written.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_cluster::k8s::{render, Placement, RenderSpec};
use storbench_cluster::{parse_start, StartAt};

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench k8s`.
#[derive(Debug, Args)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub verb: K8sVerb,
}

/// The verbs of `storbench k8s`.
#[derive(Debug, Subcommand)]
pub enum K8sVerb {
    /// Write the manifests (YAML, stdout) that run PLAN as N shards and merge them.
    Render(RenderArgs),
}

/// Options of `storbench k8s render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The plan file.
    #[arg(value_name = "PLAN.toml")]
    pub plan: PathBuf,
    /// How many shards (pods of the Indexed Job).
    #[arg(long, value_name = "N")]
    pub shards: u32,
    /// Container image holding storbench (see the repo's Dockerfile).
    #[arg(long, value_name = "IMG", default_value = concat!("storbench:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// Namespace of every object.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The common start instant of the shards (RFC 3339).
    #[arg(long, value_name = "RFC3339", conflicts_with = "start_in")]
    pub start_at: Option<String>,
    /// Start this long after rendering (apply right away).
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub start_in: String,
    /// CPU request of each shard pod.
    #[arg(long, default_value = "1")]
    pub cpu: String,
    /// Memory request of each shard pod.
    #[arg(long, default_value = "1Gi")]
    pub memory: String,
    /// Size of the results claim and of each target claim.
    #[arg(long, default_value = "10Gi")]
    pub storage: String,
}

/// Runs `storbench k8s`.
pub fn run(_g: &Global, a: K8sArgs) -> Result<ExitCode> {
    let K8sVerb::Render(a) = a.verb;
    let text =
        std::fs::read_to_string(&a.plan).map_err(|e| usage(format!("plan '{}': {e}", a.plan.display())))?;
    let (def, _cells) = storbench_plan::parse(&a.plan.display().to_string(), &text, false)
        .map_err(|e| usage(e.to_string()))?;
    let start = match a.start_at.as_deref() {
        Some(at) => parse_start(Some(at), None, chrono_now()),
        None => parse_start(None, Some(&a.start_in), chrono_now()),
    }
    .map_err(|e| match e {
        storbench_cluster::ShardError::StartPassed(at, _) => {
            usage(format!("--start-at '{at}' is in the past: give a later instant, or --start-in"))
        }
        e => usage(e.to_string()),
    })?;
    let StartAt::At(start) = start else { unreachable!("a start was given") };
    let targets = def
        .targets
        .iter()
        .map(|(name, t)| {
            let t = t.get_ref();
            let place = match (&t.path, &t.media) {
                (_, Some(_)) => Placement::Media,
                (Some(p), None) if p.starts_with('/') => Placement::Host(p.clone()),
                (Some(p), None) => Placement::Claim(p.clone()),
                (None, None) => Placement::Media,
            };
            (name.clone(), place)
        })
        .collect();
    let yaml = render(&RenderSpec {
        plan_name: def.name.clone(),
        plan_text: text,
        shards: a.shards,
        image: a.image,
        namespace: a.namespace,
        targets,
        start_at: start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        cpu: a.cpu,
        memory: a.memory,
        storage: a.storage,
    })
    .map_err(|e| usage(e.to_string()))?;
    print!("{yaml}");
    Ok(ExitCode::SUCCESS)
}

fn chrono_now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}
