//! Another user's files and reach: giving a directory to the user a server
//! runs as, and asking whether that user can get to a directory at all.

use std::path::Path;
use std::process::Command;

use crate::ProcError;

/// Gives `p` and everything under it to `user` and its login group
/// (`chown -R user:`), when run as root and `user` is not root; else
/// nothing to do.
pub fn chown(p: &Path, user: &str) -> Result<(), ProcError> {
    if crate::is_root() && user != "root" {
        let out = Command::new("chown")
            .args(["-R", &format!("{user}:")])
            .arg(p)
            .output()
            .map_err(|e| ProcError::Failed(format!("giving {} to {user}: {e}", p.display())))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(ProcError::Failed(format!(
                "giving {} to {user}: {}",
                p.display(),
                err.lines().next().unwrap_or("failed").trim()
            )));
        }
    }
    Ok(())
}

/// Can `user` reach (traverse to) `dir`: can it enter `dir`'s parent? Run
/// as another user only as root; otherwise true.
pub fn reachable(dir: &Path, user: &str) -> bool {
    if !crate::is_root() || user == "root" {
        return true;
    }
    let parent = dir.parent().unwrap_or(dir);
    Command::new("runuser")
        .args(["-u", user, "--", "test", "-x"])
        .arg(parent)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
