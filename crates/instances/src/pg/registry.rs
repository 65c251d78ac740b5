//! The registry of managed instances (`pg.json` in the state directory),
//! their private socket directories and passwords, and the URL
//! `managed:NAME` stands for.

use super::*;

/// A managed instance.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Instance {
    /// Its name.
    pub name: String,
    /// The server binaries' directory.
    pub bindir: PathBuf,
    /// The data directory.
    pub data: PathBuf,
    /// The WAL directory, when apart from the data.
    pub wal: Option<PathBuf>,
    /// The temp tablespace's directory, if any.
    pub temp: Option<PathBuf>,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// The Unix socket's directory.
    pub socket_dir: PathBuf,
    /// The OS user the server runs as.
    pub os_user: String,
    /// Server settings given with `-c KEY=VALUE`, in postgresql.conf.
    pub settings: Vec<(String, String)>,
    /// The server's version.
    pub version: String,
    /// For a standby: its primary's instance name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// For a standby: its name on the primary (`application_name`, `s1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_name: Option<String>,
    /// For a primary: its standbys' instance names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standbys: Vec<String>,
    /// For a primary: `synchronous_commit` as asked with `--sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<String>,
    /// For a primary: `synchronous_standby_names` as set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_names: Option<String>,
    /// For a standby behind a delay proxy: the proxy daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyDaemon>,
    /// The server runs in a cgroup-v1 memory group of this many bytes
    /// (page cache included), `storbench-pg-NAME` (`--memory-limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<u64>,
}

impl Instance {
    /// The name of the instance's memory group.
    pub(crate) fn memory_group(&self) -> String {
        format!("storbench-pg-{}", self.name)
    }
}

pub(crate) const REGISTRY: &str = "pg.json";

pub(crate) fn load() -> Result<Vec<Instance>, InstanceError> {
    Ok(load_json(REGISTRY)?)
}

pub(crate) fn save(all: &[Instance]) -> Result<(), InstanceError> {
    Ok(save_json(REGISTRY, all)?)
}

/// Every managed instance.
pub fn list() -> Result<Vec<Instance>, InstanceError> {
    load()
}

/// An instance by name.
pub fn get(name: &str) -> Result<Option<Instance>, InstanceError> {
    Ok(load()?.into_iter().find(|i| i.name == name))
}

/// What the caller knows of the medium a path is on (`media::describe_path`),
/// for [`placement`]: this crate does not know media.
pub type MediumOf<'a> = &'a dyn Fn(&Path) -> Option<serde_json::Value>;

/// The file holding an instance's password, beside its socket.
pub(crate) const PASSWORD_FILE: &str = "password";

/// The instance's password, if it has one (instances made before passwords
/// were used trust TCP and have none).
pub(crate) fn password(i: &Instance) -> Option<String> {
    let t = std::fs::read_to_string(i.socket_dir.join(PASSWORD_FILE)).ok()?;
    Some(t.trim().to_string()).filter(|p| !p.is_empty())
}

/// A new random password: 24 bytes from the kernel's generator, as hex
/// (nothing a URL or a pgpass line would need to escape).
pub(crate) fn new_password() -> Result<String, InstanceError> {
    use std::io::Read;
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| InstanceError::Failed(format!("reading /dev/urandom for a password: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Writes `text` into a new file `p` of mode 0600, owned by `user`.
pub(crate) fn write_private(p: &Path, text: &str, user: &str) -> Result<(), InstanceError> {
    let _ = std::fs::remove_file(p);
    private_file(p)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .map_err(|e| InstanceError::Failed(format!("writing {}: {e}", p.display())))?;
    Ok(chown(p, user)?)
}

/// Makes `p` (and its parents) a directory only `user` may enter (0700).
pub(crate) fn private_dir(p: &Path, user: &str) -> Result<(), InstanceError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(p)
        .map_err(|e| InstanceError::Failed(format!("creating {}: {e}", p.display())))?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| InstanceError::Failed(format!("chmod 700 {}: {e}", p.display())))?;
    Ok(chown(p, user)?)
}

/// The URL of database `db` on instance `i` over TCP, its password
/// included: give it to a driver only, never print it (show
/// `managed:NAME`).
pub fn url(i: &Instance, db: &str) -> String {
    match password(i) {
        Some(pw) => format!("postgres://root:{pw}@127.0.0.1:{}/{db}", i.port),
        None => format!("postgres://root@127.0.0.1:{}/{db}", i.port),
    }
}

/// The URL `managed:NAME` stands for (with its password: see [`url`]).
pub fn resolve(name: &str) -> Result<String, InstanceError> {
    let i = get(name)?.ok_or_else(|| {
        InstanceError::Usage(format!(
            "no managed instance named '{name}' (storbench pg up {name} --data TARGET)"
        ))
    })?;
    if !running(&i) {
        return Err(InstanceError::Usage(format!(
            "managed instance '{name}' is not running (storbench pg up {name})"
        )));
    }
    Ok(url(&i, "storbench"))
}

/// Adds or replaces these instances in the registry.
pub(crate) fn register(items: &[Instance]) -> Result<(), InstanceError> {
    let _lock = lock()?;
    let mut all = load()?;
    for it in items {
        match all.iter_mut().find(|x| x.name == it.name) {
            Some(x) => *x = it.clone(),
            None => all.push(it.clone()),
        }
    }
    save(&all)
}

/// Where an instance's data, WAL and temp files live, with the medium each
/// is on, for `status` and `env_json`.
pub fn placement(i: &Instance, medium_of: MediumOf) -> serde_json::Value {
    let place = |p: &Path| {
        serde_json::json!({
            "path": p, "medium": medium_of(p),
        })
    };
    let wal = i.wal.clone().unwrap_or_else(|| i.data.join("pg_wal"));
    serde_json::json!({
        "data": place(&i.data), "wal": place(&wal), "temp": i.temp.as_deref().map(place),
    })
}
