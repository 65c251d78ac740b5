//! A temporary PostgreSQL on a data directory storbench does not manage (a
//! restored base backup), started for a while and stopped.

use super::*;

/// A server storbench starts for a while on a data directory it does not
/// manage (a restored base backup), and stops again. What it needs is given
/// on the server's command line, so the directory's own configuration is
/// left as it was (a Debian cluster's backup has none: its files live in
/// /etc): its own free port on 127.0.0.1, its Unix socket, log and access
/// rules in `run_dir`, `archive_mode` off (a copy must not archive into its
/// source's archive). The rules admit the Unix socket only (`trust`: any
/// role), and `run_dir` is the server user's, mode 0700: only that user and
/// root can connect; TCP is refused for every role. Not in the registry:
/// stopped by [`Temporary::stop`] or when dropped.
pub struct Temporary {
    inst: Instance,
    live: bool,
    started_in: Duration,
}

impl Temporary {
    /// Gives `data` to the server's user (`postgres` when run as root) with
    /// mode 0700, starts a server on it and waits until it accepts
    /// connections (after its recovery: a base backup replays its WAL).
    pub fn start(data: &Path, run_dir: &Path) -> Result<Temporary, InstanceError> {
        Temporary::start_with(data, run_dir, &[], true)
    }

    /// As [`Temporary::start`], with `settings` (`name`, `value`) given on
    /// the server's command line after storbench's own (they override the
    /// directory's configuration), and with `tcp` false no TCP socket at
    /// all: only the Unix socket in `run_dir`, so servers started at once
    /// in different run directories can never collide on a port (the
    /// port then only names the socket file).
    pub fn start_with(
        data: &Path,
        run_dir: &Path,
        settings: &[(&str, &str)],
        tcp: bool,
    ) -> Result<Temporary, InstanceError> {
        use std::os::unix::fs::PermissionsExt;
        if let Some((k, v)) = settings.iter().find(|(k, v)| {
            !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        }) {
            return Err(InstanceError::Usage(format!(
                "temporary server setting '{k}={v}': a name of letters, digits and _, a value of those and . -"
            )));
        }
        let bindir = bindir_for(data)?;
        let user = server_user();
        for p in [data, run_dir] {
            if p.to_string_lossy().contains(['\'', '\\', ',']) {
                return Err(InstanceError::Usage(format!(
                    "{}: a path with ', \\ or , cannot be given to the server",
                    p.display()
                )));
            }
            if !reachable(p, &user) {
                return Err(InstanceError::Usage(format!(
                    "{}: the server's user '{user}' cannot reach it; make its parents traversable (chmod o+x) or use a medium",
                    p.display()
                )));
            }
        }
        std::fs::write(run_dir.join("pg_hba.conf"), "# storbench: a temporary server\nlocal all all trust\n")
            .and_then(|_| std::fs::write(run_dir.join("pg_ident.conf"), ""))
            .and_then(|_| {
                std::fs::write(
                    run_dir.join("postgresql.conf"),
                    format!("include_if_exists '{}'\n", data.join("postgresql.conf").display()),
                )
            })
            .map_err(|e| InstanceError::Failed(format!("writing into {}: {e}", run_dir.display())))?;
        chown(run_dir, &user)?;
        chown(data, &user)?;
        for p in [data, run_dir] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| InstanceError::Failed(format!("chmod 700 {}: {e}", p.display())))?;
        }
        let mut inst = Instance {
            name: format!("temporary server on {}", data.display()),
            bindir,
            data: data.to_path_buf(),
            port: free_port()
                .ok_or_else(|| InstanceError::Failed("no free port from 5433 to 5998".into()))?,
            socket_dir: run_dir.to_path_buf(),
            os_user: user,
            ..Instance::default()
        };
        let what = format!("starting PostgreSQL on {}", data.display());
        // A port another process takes between the pick and the start is
        // picked again, as for a new managed instance.
        let mut started_in = Duration::ZERO;
        on_a_free_port(&mut inst, true, |i, _| {
            let r = |k: &str, p: &Path| format!("-c '{k}={}'", p.display());
            let opts = [
                r("config_file", &run_dir.join("postgresql.conf")),
                r("hba_file", &run_dir.join("pg_hba.conf")),
                r("ident_file", &run_dir.join("pg_ident.conf")),
                r("unix_socket_directories", run_dir),
                format!("-c port={}", i.port),
                format!("-c listen_addresses={}", if tcp { "127.0.0.1" } else { "''" }),
                "-c archive_mode=off -c logging_collector=off".into(),
            ]
            .into_iter()
            .chain(settings.iter().map(|(k, v)| format!("-c {k}={v}")))
            .collect::<Vec<_>>()
            .join(" ");
            match start_with(i, Some(&opts), &what, crate::tempserver::START_TIMEOUT) {
                Ok(d) => {
                    started_in = d;
                    Ok(())
                }
                Err(e) => {
                    // pg_ctl gave up: a server it started must not stay.
                    let _ = Temporary { inst: i.clone(), live: true, started_in }.stop();
                    Err(e)
                }
            }
        })?;
        Ok(Temporary { inst, live: true, started_in })
    }

    /// The TCP port (the Unix socket's name carries it too).
    pub fn port(&self) -> u16 {
        self.inst.port
    }

    /// The server's programs' directory (its `pg_amcheck`, `pg_ctl`).
    pub fn bindir(&self) -> &Path {
        &self.inst.bindir
    }

    /// The Unix socket's directory.
    pub fn socket_dir(&self) -> &Path {
        &self.inst.socket_dir
    }

    /// From the server's launch (`pg_ctl start`, after the copy was given
    /// to its user and its configuration written) to its first accepted
    /// connection: its start and recovery alone.
    pub fn start_time(&self) -> Duration {
        self.started_in
    }

    /// The postmaster's process id (`postmaster.pid`'s first line).
    pub fn pid(&self) -> Option<u32> {
        postmaster_pid(&self.inst.data)
    }

    /// Stops the server cleanly (a fast shutdown: a shutdown checkpoint, so
    /// the directory starts again without recovery); one that will not stop
    /// in 120 s is stopped immediately (then killed) and the error returned.
    pub fn stop(&mut self) -> Result<(), InstanceError> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let Some(pm) = find_postmaster(&self.inst.data) else { return Ok(()) };
        let data = &self.inst.data;
        match stop_postmaster(pm, "temporary", data, Duration::from_secs(120))? {
            Sig::SIGINT => Ok(()),
            how => Err(InstanceError::Failed(format!(
                "stopping PostgreSQL on {}: no clean shutdown within 120 s; stopped by {}",
                data.display(),
                how.as_str()
            ))),
        }
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
