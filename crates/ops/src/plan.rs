//! The work behind a plan's cells, for `storbench_plan::exec` to drive:
//! the targets a cell writes to (existing directories, or media made by a
//! child `storbench media create`), the databases it uses (a URL, or a
//! managed PostgreSQL started by a child `storbench pg up` on its targets),
//! the cold cache, the placeholders of its command lines filled in, and its
//! commands run as child `storbench` processes (a `together` group side by
//! side, from one instant). What the plan made is released when no later
//! cell needs it and torn down at the end, on error and on drop.
//!
//! Everything runs through the storbench executable the caller names, so a
//! cell is exactly the run a user would get by typing its command. Nothing
//! here prints, opens the results store or decides what runs next: the
//! caller keeps the store, the progress and the executor's verdicts; this
//! module returns exit codes and [`PlanError`]s.

mod cell;
mod setup;
mod validate;

pub use cell::killed;
pub use setup::{media_mount, Options, Parts, Setup};
pub use validate::{tier_options, validate_targets};

/// A plan's error: bad input found before anything runs, or a step of
/// preparing or running a cell that failed (the message says which).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Bad input: names the plan file, the target and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// A step failed: making a medium, starting a server, a killed child.
    #[error("{0}")]
    Failed(String),
    /// A file or process operation failed: what was being done, and why.
    #[error("{what}: {err}")]
    Io {
        /// What was being done (`running storbench pg up`).
        what: String,
        /// The system's error.
        err: std::io::Error,
    },
}

impl PlanError {
    /// An I/O error while doing `what`.
    pub(crate) fn io(what: impl Into<String>, err: std::io::Error) -> PlanError {
        PlanError::Io { what: what.into(), err }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    use storbench_plan::Plan;

    use super::*;

    fn plan(dir: &Path, text: &str) -> Plan {
        let file = dir.join("p.toml");
        let (def, cells) = storbench_plan::parse(&file.display().to_string(), text, false).unwrap();
        Plan { file, def, cells }
    }

    /// A stand-in for the storbench executable: logs each command line
    /// (with its cell tag) and exits with the code in the file `code`.
    fn fake_exe(dir: &Path) -> PathBuf {
        let exe = dir.join("sb");
        let (log, code) = (dir.join("log"), dir.join("code"));
        std::fs::write(&code, "0").unwrap();
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\necho \"$STORBENCH_CELL|$*\" >> '{}'\nexit $(cat '{}')\n",
                log.display(),
                code.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        exe
    }

    const PLAN: &str = "name = \"p\"\n[target.here]\npath = \"TMP/data\"\n[[workload]]\nkind = \"tpcb\"\n\
                        init = { scale = 1 }\nrun = { db = \"sqlite:{target}/b.db\", duration = \"1s\" }\n";

    #[test]
    fn a_cell_fills_its_target_and_runs_its_commands_as_children() {
        let d = tempfile::tempdir().unwrap();
        let p = plan(d.path(), &PLAN.replace("TMP", &d.path().display().to_string()));
        let cell = &p.cells[0];
        let exe = fake_exe(d.path());
        let results = d.path().join("r.db");
        let mut env = Setup::new(&p, exe, results.clone(), Options { build: true, ..Options::default() });
        let parts = env.prepare(cell).unwrap();
        let data = d.path().join("data");
        assert!(data.is_dir(), "a path target is created on first use");
        assert_eq!(parts.len(), 1);
        assert!(
            parts[0].1.iter().flatten().any(|a| a == &format!("sqlite:{}/b.db", data.display())),
            "{parts:?}"
        );
        assert_eq!(env.run_cell(cell, None).unwrap(), 0);
        let log = std::fs::read_to_string(d.path().join("log")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        let pre = format!("--results {} --quiet", results.display());
        assert_eq!(lines.len(), 2, "{log}");
        assert!(lines[0].starts_with(&format!("{}:tpcb-init|{pre} tpcb init", cell.id)), "{log}");
        assert!(lines[1].starts_with(&format!("{}|{pre} tpcb run", cell.id)), "{log}");
        assert!(lines[1].ends_with(&format!("--label {}", cell.label)), "{log}");
        env.teardown().unwrap();

        // Without the build (a shard), only the measured command runs; a
        // failing child's exit code is the cell's.
        std::fs::remove_file(d.path().join("log")).unwrap();
        std::fs::write(d.path().join("code"), "3").unwrap();
        let env = Setup::new(&p, d.path().join("sb"), results, Options::default());
        assert_eq!(env.run_parts(cell, &parts, None).unwrap(), 3);
        let log = std::fs::read_to_string(d.path().join("log")).unwrap();
        assert_eq!(log.lines().count(), 1, "{log}");
    }

    #[test]
    fn a_killed_child_says_how_and_a_missing_parent_is_bad_input() {
        let st = std::process::Command::new("sh").args(["-c", "kill -9 $$"]).status().unwrap();
        assert_eq!(killed(&st, &["tpcc".into()]), "was killed (signal 9)");
        assert!(killed(&st, &["--memory-limit".into()]).contains("the memory group's OOM killer"));

        let d = tempfile::tempdir().unwrap();
        let p = plan(d.path(), &PLAN.replace("TMP", "/nonexistent/dir"));
        let e = validate_targets(&p).unwrap_err();
        assert!(matches!(e, PlanError::Usage(_)));
        assert_eq!(
            e.to_string(),
            format!(
                "{}: target 'here': /nonexistent/dir/data does not exist (and neither does its parent)",
                p.file.display()
            )
        );
    }
}
