//! `storbench k8s render PLAN.toml --shards N`: the Kubernetes manifests
//! that run a plan as N shards and merge them (crates/cluster's k8s module:
//! typed k8s-openapi objects as YAML on stdout). The plan is parsed first, so
//! a bad plan is refused with its line before anything is written.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_cluster::k8s::{render, Placement, RenderSpec};
use storbench_cluster::StartAt;

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
/// When the pods begin if neither `--start-at` nor `--start-in` is given:
/// time to apply the manifests and pull the image.
const DEFAULT_START_IN: chrono::Duration = chrono::Duration::minutes(2);

/// Runs `storbench k8s`. The pods' common instant is the global
/// `--start-at`/`--start-in` (read once by `main`), default two minutes on.
pub fn run(g: &Global, a: K8sArgs) -> Result<ExitCode> {
    let K8sVerb::Render(a) = a.verb;
    let text =
        std::fs::read_to_string(&a.plan).map_err(|e| usage(format!("plan '{}': {e}", a.plan.display())))?;
    let (def, _cells) = storbench_plan::parse(&a.plan.display().to_string(), &text, false)
        .map_err(|e| usage(e.to_string()))?;
    let start = match g.sharding().start {
        StartAt::At(t) => t,
        StartAt::Now => chrono::Utc::now() + DEFAULT_START_IN,
    };
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
