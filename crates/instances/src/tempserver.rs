//! Temporary servers (a restore's server on a copy of a backup) are
//! recorded while they run, so one whose storbench was killed (SIGKILL: no
//! guard ran, and the server, in its own process group, lives on) is found
//! and stopped by the next storbench that sweeps. One small JSON file per
//! storbench process, `restore/PID-N-K` (its K-th server) under the state directory, written
//! before the server is launched (so no window leaves a server unrecorded)
//! and removed once it is stopped. [`sweep`] stops the server of every
//! record whose storbench is gone and removes its data directory and the
//! directories recorded with it. It never signals a process whose command
//! line does not name the recorded program and data directory, and touches
//! the data directory only while it is the one the restore made (same
//! device and inode). Nothing here prints.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::InstanceError;
use storbench_proc::state_dir;

/// How long a temporary server may take from its launch to accepting
/// connections, its crash recovery or WAL replay included (a large
/// backup's can take minutes); the same for every engine.
pub const START_TIMEOUT: Duration = Duration::from_secs(600);

/// The error of a server that accepted no connection within `timeout`:
/// one line, the same shape for every engine, naming the server, its data
/// directory and its log's last word; a target failure (exit 4: the server
/// could not be started).
pub fn did_not_start(program: &str, data: &Path, timeout: Duration, last: &str) -> InstanceError {
    let last = if last.is_empty() { "its log says nothing" } else { last };
    InstanceError::Failed(format!(
        "{program} on {} accepted no connection within {} s: {last}",
        data.display(),
        timeout.as_secs()
    ))
}

/// A temporary server as recorded.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// The storbench process that started it.
    pub owner: u32,
    /// That process's start (clock ticks after boot, `/proc/PID/stat`), so
    /// a pid the kernel gave to another process is not taken for it.
    pub owner_start: u64,
    /// The server's program as its process is named (`mariadbd`, `postgres`).
    pub program: String,
    /// The server's pid once it is known; without it the server is found
    /// by its command line.
    pub pid: Option<u32>,
    /// The server's data directory (a copy the restore made).
    pub data: PathBuf,
    /// That directory's identity (device, inode) once the restore made it:
    /// the sweep touches the directory, and servers on it, only while the
    /// path is still that directory (not one a user made there since).
    #[serde(default)]
    pub data_id: Option<(u64, u64)>,
    /// Other directories made for it: its run directory, a work copy.
    pub dirs: Vec<PathBuf>,
}

/// This process's record on disk, removed when dropped (by then its server
/// is stopped).
pub struct Registration {
    path: PathBuf,
    rec: Record,
}

fn dir() -> PathBuf {
    state_dir().join("restore")
}

impl Registration {
    /// Records that this process is about to make `data` and `dirs` and
    /// launch `program` on `data`.
    pub fn new(program: &str, data: &Path, dirs: &[PathBuf]) -> Result<Registration, InstanceError> {
        let me = std::process::id();
        let rec = Record {
            owner: me,
            owner_start: storbench_proc::start_time(me).unwrap_or(0),
            program: program.to_string(),
            pid: None,
            data: data.to_path_buf(),
            data_id: None,
            dirs: dirs.to_vec(),
        };
        // One file per server: a process may run several at once (crash
        // points recovered by parallel jobs), each removed on its own drop.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let r = Registration { path: dir().join(format!("PID-{me}-{n}")), rec };
        r.write()?;
        Ok(r)
    }

    /// Records the server's pid, once it is launched.
    pub fn set_pid(&mut self, pid: u32) -> Result<(), InstanceError> {
        self.rec.pid = Some(pid);
        self.write()
    }

    /// Records the identity of the data directory, just made (empty) by
    /// this process: before anything is copied into it or served from it.
    pub fn set_data_made(&mut self) -> Result<(), InstanceError> {
        self.rec.data_id = Some(identity(&self.rec.data).ok_or_else(|| {
            InstanceError::Failed(format!("{}: not a directory this restore made", self.rec.data.display()))
        })?);
        self.write()
    }

    /// Whether this process made the data directory ([`Registration::set_data_made`]).
    pub fn made_data(&self) -> bool {
        self.rec.data_id.is_some()
    }

    /// Written whole or not at all (a temporary file, then renamed).
    fn write(&self) -> Result<(), InstanceError> {
        let d = dir();
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = d.join(format!(".{name}.tmp"));
        let text = serde_json::to_string_pretty(&self.rec).expect("a record serialises");
        std::fs::create_dir_all(&d)
            .and_then(|_| std::fs::write(&tmp, text))
            .and_then(|_| std::fs::rename(&tmp, &self.path))
            .map_err(|e| InstanceError::Failed(format!("writing {}: {e}", self.path.display())))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Stops the server of every record whose storbench is gone (PostgreSQL
/// by SIGQUIT, an immediate shutdown; mariadbd by SIGKILL: the data goes
/// anyway; SIGKILL for anything still there after 30 s), removes its data
/// directory and the other directories recorded with it, and the record.
/// Returns the records swept. A server that would not stop keeps its
/// record and directories for the next sweep.
pub fn sweep() -> Vec<Record> {
    sweep_in(&dir())
}

fn sweep_in(dir: &Path) -> Vec<Record> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut swept = Vec::new();
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().starts_with("PID-") {
            continue;
        }
        let Some(rec) = std::fs::read_to_string(e.path()).ok().and_then(|t| serde_json::from_str(&t).ok())
        else {
            continue;
        };
        let rec: Record = rec;
        if alive(rec.owner, rec.owner_start) {
            continue;
        }
        // The data directory is the restore's own only while the path is
        // still the directory it made; otherwise (never made, or made again
        // since by someone else) neither it nor a server on it is touched.
        let ours = rec.data_id.is_some() && identity(&rec.data) == rec.data_id;
        if ours && !stop(&rec) {
            continue;
        }
        let data = ours.then_some(&rec.data);
        for d in data.into_iter().chain(&rec.dirs) {
            let _ = std::fs::remove_dir_all(d);
        }
        let _ = std::fs::remove_file(e.path());
        swept.push(rec);
    }
    swept
}

/// A directory's (device, inode), not following a link.
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
}

/// The process runs, and is the one that started at `start` when that is
/// known.
fn alive(pid: u32, start: u64) -> bool {
    storbench_proc::alive(pid) && (start == 0 || storbench_proc::start_time(pid) == Some(start))
}

/// The process is the record's server: its program, started on its data
/// directory (`-D DIR` or `--datadir=DIR`).
fn serves(pid: u32, rec: &Record) -> bool {
    let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<String> = cmd.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    serves_args(&args, rec)
}

fn serves_args(args: &[String], rec: &Record) -> bool {
    let want = rec.data.to_string_lossy();
    let prog = args.first().and_then(|a| Path::new(a).file_name()).map(|n| n.to_string_lossy().into_owned());
    prog.as_deref() == Some(rec.program.as_str())
        && args.iter().any(|a| *a == want || a.ends_with(&format!("={want}")))
}

/// The record's server processes: its pid, or when that was not recorded
/// yet (killed between the launch and the record), by command line.
fn servers(rec: &Record) -> Vec<u32> {
    if let Some(p) = rec.pid.filter(|p| serves(*p, rec)) {
        return vec![p];
    }
    storbench_proc::find(|p| serves_args(&p.cmdline, rec))
}

/// Stops the record's server; true once none runs.
fn stop(rec: &Record) -> bool {
    use storbench_proc::{Sig, Step};
    let first = if rec.program == "postgres" { Sig::SIGQUIT } else { Sig::SIGKILL };
    let steps = [Step::new(first, Duration::from_secs(30)), Step::new(Sig::SIGKILL, Duration::from_secs(5))];
    // Each by its identity (pid and start), so a reused pid is never signalled.
    let who: Vec<storbench_proc::Identity> =
        servers(rec).into_iter().filter_map(storbench_proc::Identity::of).collect();
    // Every one is stopped, even after one that would not.
    who.into_iter().filter(|w| storbench_proc::stop(*w, &rec.program, &steps).is_err()).count() == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_server_that_did_not_start_is_one_line_and_a_failure() {
        let e = did_not_start("postgres", Path::new("/d"), START_TIMEOUT, "");
        assert!(matches!(&e, InstanceError::Failed(_)));
        assert_eq!(e.to_string(), "postgres on /d accepted no connection within 600 s: its log says nothing");
    }

    #[test]
    fn this_process_is_alive_and_another_start_time_is_not_it() {
        let me = std::process::id();
        let start = storbench_proc::start_time(me).expect("a start time");
        assert!(alive(me, start) && alive(me, 0));
        assert!(!alive(me, start + 1), "a reused pid is another process");
    }

    /// A record whose storbench is gone: its copy is removed only while the
    /// path is still the directory the restore made; a directory made
    /// there since (a user's) stays, and so does one never recorded as made.
    #[test]
    fn the_sweep_removes_only_the_copy_the_restore_made() {
        let t = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let owner = gone.id();
        gone.wait().unwrap();
        let records = t.path().join("restore");
        std::fs::create_dir(&records).unwrap();
        // Each case: a record of a data directory and a work directory,
        // with the identity `id_of` gives for that data directory.
        let case = |name: &str, id_of: &dyn Fn(&Path) -> Option<(u64, u64)>| {
            let data = t.path().join(name);
            let work = t.path().join(format!(".{name}.work"));
            for d in [&data, &work] {
                std::fs::create_dir(d).unwrap();
            }
            let rec = Record {
                owner,
                program: "postgres".into(),
                data: data.clone(),
                data_id: id_of(&data),
                dirs: vec![work.clone()],
                ..Record::default()
            };
            std::fs::write(records.join(format!("PID-{name}")), serde_json::to_string(&rec).unwrap())
                .unwrap();
            (data, work)
        };
        let other = identity(t.path()).unwrap();
        let (made, made_work) = case("made", &identity);
        let (remade, remade_work) = case("remade", &|_| Some(other));
        let (never, never_work) = case("never-made", &|_| None);
        assert_eq!(sweep_in(&records).len(), 3);
        assert!(!made.exists() && !made_work.exists(), "the restore's own copy stays");
        assert!(remade.exists(), "a directory made again at the path was removed");
        assert!(never.exists(), "a directory the restore never recorded as made was removed");
        assert!(!remade_work.exists() && !never_work.exists(), "storbench's own directories stay");
        assert_eq!(std::fs::read_dir(&records).unwrap().count(), 0, "records left");
    }

    #[test]
    fn a_process_serves_a_record_only_with_its_program_and_data_directory() {
        // A shell waiting on its input (a builtin: no child to leave behind).
        let mut c = std::process::Command::new("sh")
            .args(["-c", "read x; true", "sh", "--datadir=/nonexistent/sb-x"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let rec = |program: &str, data: &str| Record {
            program: program.into(),
            data: data.into(),
            ..Record::default()
        };
        let pid = c.id();
        // Its command line is readable once its exec is done.
        let t0 = Instant::now();
        while std::fs::read(format!("/proc/{pid}/cmdline")).map_or(true, |b| b.is_empty()) {
            assert!(t0.elapsed() < Duration::from_secs(5), "sh did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(serves(pid, &rec("sh", "/nonexistent/sb-x")));
        assert!(!serves(pid, &rec("sh", "/nonexistent/sb-y")));
        assert!(!serves(pid, &rec("mariadbd", "/nonexistent/sb-x")));
        assert_eq!(servers(&rec("sh", "/nonexistent/sb-x")), [pid]);
        let _ = c.kill();
        let _ = c.wait();
    }
}
