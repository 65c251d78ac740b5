//! `storbench pg up | down | status | list`: managed PostgreSQL instances
//! with data, WAL and temp files placed on chosen targets (media or
//! directories). `managed:NAME` is then a database URL everywhere.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use storbench_media::pg::{self, UpOptions};
use storbench_media::MediaError;

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench pg`.
#[derive(Debug, Args)]
pub struct PgArgs {
    #[command(subcommand)]
    pub verb: PgVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum PgVerb {
    /// Create (initdb) and start an instance, or start a stopped one.
    Up {
        /// Its name (use as managed:NAME).
        name: String,
        /// Data directory: a medium's name (a directory on it) or a path.
        #[arg(long)]
        data: Option<String>,
        /// WAL on another target: a medium's name or a path.
        #[arg(long)]
        wal: Option<String>,
        /// Temp files on another target (a tablespace for temp_tablespaces).
        #[arg(long)]
        temp: Option<String>,
        /// TCP port on 127.0.0.1 (default: the first free from 5433).
        #[arg(long)]
        port: Option<u16>,
        /// A server setting, key=value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        settings: Vec<String>,
    },
    /// Stop an instance cleanly.
    Down {
        /// The instance.
        #[arg(required_unless_present = "all")]
        name: Option<String>,
        /// Every instance.
        #[arg(long)]
        all: bool,
        /// Also remove its directories and forget it.
        #[arg(long)]
        destroy: bool,
    },
    /// An instance's settings and where its data, WAL and temp files live.
    Status {
        /// The instance.
        name: String,
    },
    /// Every managed instance.
    List,
}

fn err(e: MediaError) -> anyhow::Error {
    match e {
        MediaError::Usage(m) => usage(m),
        MediaError::Failed(m) => anyhow::anyhow!(m),
    }
}

/// A TARGET as a directory for `what` of instance `name`: a medium's name
/// gives `MOUNT/NAME-what`, a path is used as given.
fn place(target: &str, name: &str, what: &str) -> Result<std::path::PathBuf> {
    let dir = storbench_media::target_dir(target).map_err(err)?;
    Ok(if target.contains('/') { dir } else { dir.join(format!("pg-{name}-{what}")) })
}

/// Runs `storbench pg`.
pub fn run(g: &Global, a: PgArgs) -> Result<ExitCode> {
    match a.verb {
        PgVerb::Up { name, data, wal, temp, port, settings } => {
            let mut kv = Vec::new();
            for s in &settings {
                let (k, v) = s.split_once('=').ok_or_else(|| usage(format!("--set {s}: use KEY=VALUE")))?;
                kv.push((k.trim().to_string(), v.trim().to_string()));
            }
            let existing = pg::get(&name).map_err(err)?;
            let o = match (&existing, &data) {
                (Some(_), _) => UpOptions::default(),
                (None, None) => {
                    return Err(usage(format!("pg up {name}: a new instance needs --data TARGET")))
                }
                (None, Some(d)) => UpOptions {
                    data: place(d, &name, "data")?,
                    wal: wal.as_deref().map(|w| place(w, &name, "wal")).transpose()?,
                    temp: temp.as_deref().map(|t| place(t, &name, "temp")).transpose()?,
                    port,
                    settings: kv,
                },
            };
            let i = pg::up(&name, &o).map_err(err)?;
            if !g.quiet {
                eprintln!(
                    "managed PostgreSQL {} ({}) up on 127.0.0.1:{}: use --db managed:{}",
                    i.name, i.version, i.port, i.name
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PgVerb::Down { name, all, destroy } => {
            let names: Vec<String> = if all {
                pg::list().map_err(err)?.into_iter().map(|i| i.name).collect()
            } else {
                vec![name.expect("required unless --all")]
            };
            for n in names {
                pg::down(&n, destroy).map_err(err)?;
                if !g.quiet {
                    eprintln!(
                        "managed PostgreSQL {n}: {}",
                        if destroy { "stopped and removed" } else { "stopped" }
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PgVerb::Status { name } => {
            let i = pg::get(&name)
                .map_err(err)?
                .ok_or_else(|| usage(format!("no managed instance named '{name}' (storbench pg list)")))?;
            let v = serde_json::json!({
                "name": i.name, "version": i.version, "running": pg::running(&i), "port": i.port,
                "url": format!("managed:{} = postgres://root@127.0.0.1:{}/storbench", i.name, i.port),
                "settings": i.settings, "placement": pg::placement(&i), "socket_dir": i.socket_dir,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(ExitCode::SUCCESS)
        }
        PgVerb::List => {
            let all = pg::list().map_err(err)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&all)?);
                return Ok(ExitCode::SUCCESS);
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec!["name", "state", "port", "data", "wal", "temp"]);
            for i in &all {
                t.add_row(vec![
                    i.name.clone(),
                    if pg::running(i) { "running".into() } else { "stopped".to_string() },
                    i.port.to_string(),
                    i.data.display().to_string(),
                    i.wal.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(in data)".into()),
                    i.temp.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into()),
                ]);
            }
            println!("{t}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
