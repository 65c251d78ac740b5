//! Kubernetes manifests for a sharded plan (`storbench k8s render`), built
//! as typed `k8s-openapi` objects and serialised to YAML, never templated:
//! - a ConfigMap holding the plan file;
//! - a PersistentVolumeClaim (ReadWriteMany) for the results: each shard
//!   writes its own `shard-I.db`, the collector reads them all;
//! - an Indexed Job of N completions, all N pods at once (`parallelism` = N:
//!   they must run together), no retries (`backoffLimitPerIndex` 0: a
//!   retried shard would measure another window; the merge reports it
//!   missing instead, and the other shards run on).
//!   Each pod runs `storbench run /plan/plan.toml --shard $(JOB_COMPLETION_INDEX)/N
//!   --start-at T`, so shards started at different times begin together;
//! - I/O targets: a plan target with an absolute `path` is a hostPath of the
//!   node (the node's own storage is what is measured); a relative one lives
//!   on a ReadWriteMany claim of its own; a `media` target needs loop devices
//!   and mounts, so the pod is privileged;
//! - database passwords never in the ConfigMap: the plan shipped there has
//!   them taken out (the binary does it, `DbUrl::split_password`), and they
//!   go into a Secret rendered apart ([`Rendered::secret`], written to a
//!   0600 file, never to stdout); each shard pod reads them from it as
//!   `PGPASSWORD`/`MYSQL_PWD` through `secretKeyRef`, which the database
//!   drivers take for a URL without a password;
//! - a collector Job, created suspended, that runs `storbench merge` over
//!   every `shard-*.db` into `merged.db` once it is resumed (docs/cluster.md).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, HostPathVolumeSource,
    ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    PodSpec, PodTemplateSpec, ResourceRequirements, Secret, SecretKeySelector, SecurityContext, Volume,
    VolumeMount, VolumeResourceRequirements,
};
pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;

/// Errors from rendering.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// `--shards` out of range.
    #[error("--shards {0}: use 1 to 1000")]
    Shards(u32),
    /// YAML serialisation failed.
    #[error("rendering YAML: {0}")]
    Yaml(String),
}

/// Where a plan target lives in the pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// An absolute path on the node: a hostPath volume at the same path.
    Host(String),
    /// A path relative to the working directory: a claim of its own.
    Claim(String),
    /// A medium the plan makes (loop device, filesystem): privileged pod.
    Media,
}

/// What to render.
#[derive(Clone, Debug)]
pub struct RenderSpec {
    /// The plan's name (made a DNS label for object names).
    pub plan_name: String,
    /// The plan file's text, put in the ConfigMap as is: passwords already
    /// taken out (see `secret_env`).
    pub plan_text: String,
    /// The passwords the plan's URLs carried, by the environment variable
    /// the pods read them from (`PGPASSWORD`, `MYSQL_PWD`): rendered as a
    /// Secret of their own, never into the ConfigMap.
    pub secret_env: BTreeMap<String, String>,
    /// How many shards.
    pub shards: u32,
    /// Container image.
    pub image: String,
    /// Namespace of every object.
    pub namespace: String,
    /// The plan's targets by name.
    pub targets: Vec<(String, Placement)>,
    /// The common start instant, RFC 3339.
    pub start_at: String,
    /// CPU request per shard pod, e.g. `2` ([`parse_quantity`]).
    pub cpu: Quantity,
    /// Memory request per shard pod, e.g. `2Gi`.
    pub memory: Quantity,
    /// Size of the results claim and of each target claim, e.g. `10Gi`.
    pub storage: Quantity,
    /// Serve live metrics from each shard pod on this port
    /// (`--metrics-addr 0.0.0.0:PORT`), with a named container port and
    /// the `prometheus.io/*` scrape annotations on the pods.
    pub metrics_port: Option<u16>,
}

/// A resource quantity as Kubernetes reads one (a positive decimal number
/// with an optional suffix: `Ki` … `Ei`, `n` `u` `m` `k` `M` `G` `T` `P`
/// `E`, or an exponent `e3`): the API server would refuse anything else
/// when the manifests are applied, so it is refused here, naming the value.
pub fn parse_quantity(s: &str) -> Result<Quantity, String> {
    const SUFFIXES: [&str; 15] =
        ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"];
    let bad = || {
        format!("'{s}' is not a Kubernetes quantity: a positive number with an optional suffix (e.g. 500m, 2, 1Gi, 10G)")
    };
    let t = s.trim();
    let digits = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
        .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit()));
    let value: f64 = number.parse().map_err(|_| bad())?;
    if !(suffix.is_empty() || SUFFIXES.contains(&suffix) || exponent) || value <= 0.0 || number.ends_with('.')
    {
        return Err(bad());
    }
    Ok(Quantity(t.to_string()))
}

/// A DNS-1123 label from `s`: lower case, `-` for anything else, at most
/// `max` characters, never ending in `-`.
fn dns_label(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(max)
        .collect();
    while out.ends_with('-') {
        out.pop();
    }
    let out = out.trim_start_matches('-').to_string();
    if out.is_empty() {
        "plan".into()
    } else {
        out
    }
}

fn meta(name: &str, ns: &str, plan: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(ns.to_string()),
        labels: Some(BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), "storbench".to_string()),
            ("storbench/plan".to_string(), plan.to_string()),
        ])),
        ..Default::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
}

fn claim(name: &str, ns: &str, plan: &str, size: &Quantity) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(name, ns, plan),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteMany".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), size.clone())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn claim_volume(name: &str, claim: &str) -> Volume {
    Volume {
        name: name.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount { name: name.into(), mount_path: path.into(), ..Default::default() }
}

/// What [`render`] makes.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// Every manifest but the Secret, one multi-document YAML text: safe to
    /// print, to log and to keep in a repository.
    pub manifests: String,
    /// The Secret holding the passwords (when the plan had any), apart so
    /// that it is written only where the caller means it to be.
    pub secret: Option<String>,
    /// The Secret's name, as the pods refer to it.
    pub secret_name: String,
}

/// Renders the manifests.
pub fn render(spec: &RenderSpec) -> Result<Rendered, RenderError> {
    if spec.shards == 0 || spec.shards > 1000 {
        return Err(RenderError::Shards(spec.shards));
    }
    let plan = dns_label(&spec.plan_name, 40);
    let ns = spec.namespace.as_str();
    let n = spec.shards;
    let results_claim = format!("storbench-{plan}-results");
    let mut docs: Vec<String> = Vec::new();

    let config = ConfigMap {
        metadata: meta(&format!("storbench-{plan}-plan"), ns, &plan),
        data: Some(BTreeMap::from([("plan.toml".to_string(), spec.plan_text.clone())])),
        ..Default::default()
    };
    docs.push(yaml(&config)?);
    let secret_name = format!("storbench-{plan}-db");
    let secret = if spec.secret_env.is_empty() {
        None
    } else {
        Some(yaml(&Secret {
            metadata: meta(&secret_name, ns, &plan),
            type_: Some("Opaque".into()),
            data: Some(
                spec.secret_env.iter().map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec()))).collect(),
            ),
            ..Default::default()
        })?)
    };
    docs.push(yaml(&claim(&results_claim, ns, &plan, &spec.storage))?);
    let storage = target_storage(spec, &plan, &results_claim)?;
    docs.extend(storage.claims);
    let shard = shard_container(spec, &secret_name, storage.mounts, storage.privileged);
    let job = |name: &str, spec_: JobSpec| Job {
        metadata: meta(name, ns, &plan),
        spec: Some(spec_),
        ..Default::default()
    };
    let pod =
        |c: Container, volumes: Vec<Volume>, annotations: Option<BTreeMap<String, String>>| PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("storbench/plan".to_string(), plan.clone())])),
                annotations,
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![c],
                volumes: Some(volumes),
                restart_policy: Some("Never".into()),
                ..Default::default()
            }),
        };
    // Prometheus' pod discovery keys on these (the common convention).
    let scrape = spec.metrics_port.map(|port| {
        BTreeMap::from([
            ("prometheus.io/scrape".to_string(), "true".to_string()),
            ("prometheus.io/port".to_string(), port.to_string()),
            ("prometheus.io/path".to_string(), "/metrics".to_string()),
        ])
    });
    docs.push(yaml(&job(
        &format!("storbench-{plan}-shards"),
        JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(n as i32),
            parallelism: Some(n as i32),
            // Per index: a failed shard must not stop the others (a Job-wide
            // backoffLimit of 0 would kill them all).
            backoff_limit_per_index: Some(0),
            template: pod(shard, storage.volumes, scrape),
            ..Default::default()
        },
    ))?);
    docs.push(yaml(&job(
        &format!("storbench-{plan}-merge"),
        JobSpec {
            suspend: Some(true),
            backoff_limit: Some(0),
            template: pod(collector(spec, &plan), vec![claim_volume("results", &results_claim)], None),
            ..Default::default()
        },
    ))?);
    Ok(Rendered { manifests: docs.join("---\n"), secret, secret_name })
}

/// The shard pods' volumes and mounts: the plan, the results claim and
/// each target's storage (claims of their own rendered into `claims`).
struct Storage {
    claims: Vec<String>,
    volumes: Vec<Volume>,
    mounts: Vec<VolumeMount>,
    /// A target is a medium the plan makes: loop devices and mounts.
    privileged: bool,
}

fn target_storage(spec: &RenderSpec, plan: &str, results_claim: &str) -> Result<Storage, RenderError> {
    let mut st = Storage {
        claims: Vec::new(),
        volumes: vec![
            Volume {
                name: "plan".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: format!("storbench-{plan}-plan"),
                    ..Default::default()
                }),
                ..Default::default()
            },
            claim_volume("results", results_claim),
        ],
        mounts: vec![mount("plan", "/plan"), mount("results", "/results")],
        privileged: false,
    };
    for (i, (name, place)) in spec.targets.iter().enumerate() {
        let vol = format!("target-{i}");
        match place {
            Placement::Host(path) => {
                st.volumes.push(Volume {
                    name: vol.clone(),
                    host_path: Some(HostPathVolumeSource {
                        path: path.clone(),
                        type_: Some("DirectoryOrCreate".into()),
                    }),
                    ..Default::default()
                });
                st.mounts.push(mount(&vol, path));
            }
            Placement::Claim(path) => {
                let c = format!("storbench-{plan}-{}", dns_label(name, 20));
                st.claims.push(yaml(&claim(&c, &spec.namespace, plan, &spec.storage))?);
                st.volumes.push(claim_volume(&vol, &c));
                st.mounts.push(mount(&vol, &format!("/work/{}", path.trim_start_matches("./"))));
            }
            Placement::Media => st.privileged = true,
        }
    }
    Ok(st)
}

/// The container of each shard pod: `storbench run` of its shard, the
/// start instant, the results file by index, the passwords from the
/// Secret, and the metrics port when asked.
fn shard_container(
    spec: &RenderSpec,
    secret_name: &str,
    mounts: Vec<VolumeMount>,
    privileged: bool,
) -> Container {
    let n = spec.shards;
    let mut args = vec![
        "run".into(),
        "/plan/plan.toml".into(),
        "--shard".into(),
        format!("$(JOB_COMPLETION_INDEX)/{n}"),
        // One argument: a bare instant would be a YAML timestamp, not
        // the string a container argument must be.
        format!("--start-at={}", spec.start_at),
    ];
    if let Some(port) = spec.metrics_port {
        args.push(format!("--metrics-addr=0.0.0.0:{port}"));
    }
    let index = EnvVar {
        // Set from the annotation as Kubernetes' own example does, so the
        // variables below may refer to it.
        name: "JOB_COMPLETION_INDEX".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.annotations['batch.kubernetes.io/job-completion-index']".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let passwords = spec.secret_env.keys().map(|k| EnvVar {
        name: k.clone(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret_name.to_string(),
                key: k.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    Container {
        name: "shard".into(),
        image: Some(spec.image.clone()),
        working_dir: Some("/work".into()),
        command: Some(vec!["storbench".into()]),
        args: Some(args),
        env: Some(
            [index, env("STORBENCH_RESULTS", "/results/shard-$(JOB_COMPLETION_INDEX).db")]
                .into_iter()
                .chain(passwords)
                .collect(),
        ),
        ports: spec.metrics_port.map(|port| {
            vec![ContainerPort {
                name: Some("metrics".into()),
                container_port: i32::from(port),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]
        }),
        volume_mounts: Some(mounts),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), spec.cpu.clone()),
                ("memory".to_string(), spec.memory.clone()),
            ])),
            ..Default::default()
        }),
        security_context: privileged
            .then(|| SecurityContext { privileged: Some(true), ..Default::default() }),
        ..Default::default()
    }
}

/// The collector's container: `storbench merge` over the shards present
/// (the merge names the missing ones from the shard identities the runs
/// carry).
fn collector(spec: &RenderSpec, plan: &str) -> Container {
    Container {
        name: "merge".into(),
        image: Some(spec.image.clone()),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![format!(
            "set --; for f in /results/shard-*.db; do [ -e \"$f\" ] && set -- \"$@\" --from \"$f\"; done; \
             exec storbench merge --label {plan}-merged \"$@\""
        )]),
        env: Some(vec![env("STORBENCH_RESULTS", "/results/merged.db")]),
        volume_mounts: Some(vec![mount("results", "/results")]),
        ..Default::default()
    }
}

fn yaml<T: serde::Serialize>(v: &T) -> Result<String, RenderError> {
    serde_norway::to_string(v).map_err(|e| RenderError::Yaml(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(secret_env: BTreeMap<String, String>) -> RenderSpec {
        RenderSpec {
            plan_name: "p".into(),
            plan_text: "name = \"p\"\n".into(),
            secret_env,
            shards: 2,
            image: "i".into(),
            namespace: "ns".into(),
            targets: vec![],
            start_at: "2999-01-01T00:00:00Z".into(),
            cpu: Quantity("1".into()),
            memory: Quantity("1Gi".into()),
            storage: Quantity("1Gi".into()),
            metrics_port: None,
        }
    }

    #[test]
    fn a_metrics_port_is_served_by_every_shard_and_announced_for_scraping() {
        let r = render(&spec(BTreeMap::new())).unwrap();
        assert!(!r.manifests.contains("metrics-addr") && !r.manifests.contains("prometheus.io"));
        let r = render(&RenderSpec { metrics_port: Some(9184), ..spec(BTreeMap::new()) }).unwrap();
        let docs: Vec<serde_json::Value> =
            r.manifests.split("---\n").map(|d| serde_norway::from_str(d).unwrap()).collect();
        let shards = docs.iter().find(|d| d["metadata"]["name"] == "storbench-p-shards").unwrap();
        let pod = &shards["spec"]["template"];
        assert_eq!(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
        assert_eq!(pod["metadata"]["annotations"]["prometheus.io/port"], "9184");
        let c = &pod["spec"]["containers"][0];
        assert!(c["args"].as_array().unwrap().iter().any(|a| a == "--metrics-addr=0.0.0.0:9184"), "{c}");
        assert_eq!(c["ports"][0]["containerPort"], 9184);
        assert_eq!(c["ports"][0]["name"], "metrics");
        // The collector serves nothing.
        let merge = docs.iter().find(|d| d["metadata"]["name"] == "storbench-p-merge").unwrap();
        assert!(merge["spec"]["template"]["metadata"]["annotations"].is_null());
    }

    #[test]
    fn passwords_go_into_the_secret_only_and_the_pods_read_them_from_it() {
        let r = render(&spec(BTreeMap::from([("PGPASSWORD".to_string(), "hunter2".to_string())]))).unwrap();
        assert!(!r.manifests.contains("hunter2"));
        // base64 of "hunter2"
        assert!(!r.manifests.contains("aHVudGVyMg"), "{}", r.manifests);
        let secret = r.secret.unwrap();
        assert!(secret.contains("kind: Secret") && secret.contains("PGPASSWORD: aHVudGVyMg=="), "{secret}");
        assert!(r.manifests.contains("secretKeyRef:") && r.manifests.contains("name: storbench-p-db"));
        let r = render(&spec(BTreeMap::new())).unwrap();
        assert!(r.secret.is_none() && !r.manifests.contains("secretKeyRef"));
    }

    #[test]
    fn names_are_dns_labels() {
        assert_eq!(dns_label("s5_Allocation.Unit", 40), "s5-allocation-unit");
        assert_eq!(dns_label("--x--", 40), "x");
        assert_eq!(dns_label("_", 40), "plan");
        assert_eq!(dns_label("abcdef", 3), "abc");
    }

    #[test]
    fn quantities_are_what_the_api_server_takes() {
        for ok in ["1", "500m", "0.5", "1Gi", "10G", "2e3", "1.5Ki", " 2 "] {
            assert!(parse_quantity(ok).is_ok(), "{ok}");
        }
        for bad in ["", "0", "lots", "1GB", "1g", "-1", "1.", "e3", "1e", "Gi"] {
            let e = parse_quantity(bad).unwrap_err();
            assert!(e.starts_with(&format!("'{bad}' is not a Kubernetes quantity")), "{e}");
        }
    }
}
