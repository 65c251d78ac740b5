//! `storbench k8s render PLAN.toml --shards N`: the Kubernetes manifests
//! that run a plan as N shards and merge them (crates/cluster's k8s module:
//! typed k8s-openapi objects as YAML on stdout). The plan is parsed first, so
//! a bad plan is refused with its line before anything is written.
//!
//! Passwords in the plan's database URLs never reach stdout or the
//! ConfigMap: they are taken out of the plan text the ConfigMap carries and
//! written as a Secret to `--secret-file` (created 0600), which the pods read
//! as `PGPASSWORD`/`MYSQL_PWD`.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_cluster::k8s::{render, Placement, Quantity, RenderSpec};
use storbench_cluster::StartAt;
use storbench_db::{DbUrl, Engine};

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
    /// CPU request of each shard pod (a Kubernetes quantity: 2, 500m).
    #[arg(long, default_value = "1", value_parser = storbench_cluster::k8s::parse_quantity)]
    pub cpu: Quantity,
    /// Memory request of each shard pod (a Kubernetes quantity: 1Gi, 512Mi).
    #[arg(long, default_value = "1Gi", value_parser = storbench_cluster::k8s::parse_quantity)]
    pub memory: Quantity,
    /// Size of the results claim and of each target claim (a Kubernetes quantity: 10Gi).
    #[arg(long, default_value = "10Gi", value_parser = storbench_cluster::k8s::parse_quantity)]
    pub storage: Quantity,
    /// Where to write the Secret holding the plan's database passwords
    /// (created 0600; `kubectl apply -f` it beside the manifests). Needed
    /// when a URL in the plan carries a password: it never goes to stdout.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// The pods' common start (default: two minutes from now).
    #[command(flatten)]
    pub start: crate::cli::StartFlags,
    /// Have each shard pod serve live metrics on this PORT (of HOST:PORT,
    /// e.g. :9184), with a container port and Prometheus scrape annotations.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// The plan's text with every database URL's password taken out, and the
/// passwords by the variable the pods read them from. Two different
/// passwords for one engine cannot share that variable: bad input.
fn take_passwords(def: &storbench_plan::PlanDef, text: &str) -> Result<(String, BTreeMap<String, String>)> {
    let mut text = text.to_string();
    let mut env: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (name, db) in &def.dbs {
        let Some(raw) = db.get_ref().url.as_deref() else { continue };
        let Ok(url) = DbUrl::parse(raw) else { continue };
        let (stripped, Some(password)) = url.split_password() else { continue };
        let var = match url.engine() {
            Engine::Postgres => "PGPASSWORD",
            Engine::Mysql => "MYSQL_PWD",
            _ => continue,
        };
        if let Some((other, pw)) = env.get(var) {
            if *pw != password {
                return Err(usage(format!(
                    "db '{other}' and db '{name}' carry different {var} passwords: the pods read one {var}; use one password per engine"
                )));
            }
        }
        env.insert(var.to_string(), (name.clone(), password));
        text = text.replace(raw, &stripped);
    }
    Ok((text, env.into_iter().map(|(k, (_, pw))| (k, pw)).collect()))
}

/// Writes `text` to `path` readable by its owner only.
fn write_private(path: &Path, text: &str) -> Result<()> {
    let err = |e: std::io::Error| usage(format!("--secret-file '{}': {e}", path.display()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    // An existing file keeps its mode on open: narrow it before writing.
    f.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)?;
    Ok(())
}

/// Runs `storbench k8s`.
/// When the pods begin if neither `--start-at` nor `--start-in` is given:
/// time to apply the manifests and pull the image.
const DEFAULT_START_IN: chrono::Duration = chrono::Duration::minutes(2);

/// Runs `storbench k8s`. The pods' common instant is `--start-at`/
/// `--start-in`, default two minutes on.
pub fn run(a: K8sArgs) -> Result<ExitCode> {
    let K8sVerb::Render(a) = a.verb;
    let text =
        std::fs::read_to_string(&a.plan).map_err(|e| usage(format!("plan '{}': {e}", a.plan.display())))?;
    let (def, _cells) = storbench_plan::parse(&a.plan.display().to_string(), &text, false)
        .map_err(|e| usage(e.to_string()))?;
    let start = match crate::shard::start_of(&a.start)? {
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
    // `--metrics-addr HOST:PORT`: the pods serve on PORT of every address
    // of theirs (a pod's own host name is not known here).
    let metrics_port = match a.metrics_addr.as_deref() {
        None => None,
        Some(addr) => Some(addr.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).filter(|p| *p > 0).ok_or_else(
            || usage(format!("--metrics-addr '{addr}': give HOST:PORT with a port 1-65535 (the shard pods serve 0.0.0.0:PORT)")),
        )?),
    };
    let (plan_text, secret_env) = take_passwords(&def, &text)?;
    // What ships in the ConfigMap must parse and carry no password, however
    // the URL was written (a TOML escape would defeat the text replace).
    let (shipped, _) = storbench_plan::parse(&a.plan.display().to_string(), &plan_text, false)
        .map_err(|e| usage(format!("{}: taking the passwords out: {e}", a.plan.display())))?;
    if let Some(name) = shipped.dbs.iter().find_map(|(name, db)| {
        let url = DbUrl::parse(db.get_ref().url.as_deref()?).ok()?;
        url.split_password().1.map(|_| name.clone())
    }) {
        return Err(usage(format!(
            "db '{name}': its URL's password could not be taken out of the plan text (write the URL without escapes)"
        )));
    }
    if !secret_env.is_empty() && a.secret_file.is_none() {
        return Err(usage(format!(
            "{}: a database URL carries a password: give --secret-file FILE (the Secret is written there, 0600, never to stdout)",
            a.plan.display()
        )));
    }
    let rendered = render(&RenderSpec {
        plan_name: def.name.clone(),
        plan_text,
        secret_env,
        shards: a.shards,
        image: a.image,
        namespace: a.namespace,
        targets,
        start_at: start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        cpu: a.cpu,
        memory: a.memory,
        storage: a.storage,
        metrics_port,
    })
    .map_err(|e| usage(e.to_string()))?;
    if let (Some(secret), Some(path)) = (&rendered.secret, &a.secret_file) {
        write_private(path, secret)?;
        eprintln!(
            "storbench: Secret {} written to {} (kubectl apply -f it too)",
            rendered.secret_name,
            path.display()
        );
    }
    print!("{}", rendered.manifests);
    Ok(ExitCode::SUCCESS)
}
