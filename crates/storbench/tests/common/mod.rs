//! Helpers the binary's integration tests share (each test file is its own
//! crate and includes this module).

use std::process::Command;

/// One value (or rows, `|`-separated) from `sql` on database `db` of the
/// local PostgreSQL, as user root over TCP.
pub fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-qAt", "-h", "127.0.0.1", "-U", "root", "-d", db, "-c", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
