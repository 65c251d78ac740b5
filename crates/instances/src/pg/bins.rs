//! Finding PostgreSQL's server binaries: `pg_config`, the Debian layout
//! (`/usr/lib/postgresql/MAJOR/bin`), PATH; and those of a data directory's
//! major version.

use super::*;

/// Finds the server binaries: `pg_config --bindir`, the Debian layout
/// (`/usr/lib/postgresql/*/bin`, newest first), then PATH.
pub fn find_bindir() -> Result<PathBuf, InstanceError> {
    if let Ok(o) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if o.status.success() && d.join("initdb").exists() {
            return Ok(d);
        }
    }
    if let Some(d) = debian_bindirs().into_iter().find(|d| d.join("initdb").exists()) {
        return Ok(d);
    }
    for d in std::env::var("PATH").unwrap_or_default().split(':') {
        if Path::new(d).join("initdb").exists() && Path::new(d).join("pg_ctl").exists() {
            return Ok(PathBuf::from(d));
        }
    }
    Err(InstanceError::Usage(
        "no PostgreSQL server binaries found (pg_config, /usr/lib/postgresql/*/bin or initdb on PATH): install the postgresql package".into(),
    ))
}

/// The Debian layout's bin directories, `/usr/lib/postgresql/MAJOR/bin`,
/// newest major first (client tools alone may be there, without a server).
pub fn debian_bindirs() -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.is_dir())
        .collect();
    versions.sort();
    versions.into_iter().rev().map(|(_, d)| d).collect()
}

/// The server binaries for a data directory: those of its major version
/// (`PG_VERSION`), from the Debian layout or [`find_bindir`]'s; a version
/// with no binaries here is named with the package that has them.
pub fn bindir_for(data: &Path) -> Result<PathBuf, InstanceError> {
    let text = std::fs::read_to_string(data.join("PG_VERSION")).map_err(|e| {
        InstanceError::Usage(format!("{}: no PG_VERSION ({e}): not a data directory", data.display()))
    })?;
    let major = text.trim().to_string();
    let debian = PathBuf::from(format!("/usr/lib/postgresql/{major}/bin"));
    if debian.join("postgres").is_file() && debian.join("pg_ctl").is_file() {
        return Ok(debian);
    }
    let found = find_bindir().ok().filter(|d| {
        Command::new(d.join("postgres")).arg("--version").output().is_ok_and(|o| {
            let v = String::from_utf8_lossy(&o.stdout).split_whitespace().last().unwrap_or("").to_string();
            v.split('.').next() == Some(major.as_str())
        })
    });
    found.ok_or_else(|| {
        InstanceError::Usage(format!(
            "{} is a PostgreSQL {major} data directory and there are no PostgreSQL {major} server binaries here: install the Debian package postgresql-{major}",
            data.display()
        ))
    })
}
