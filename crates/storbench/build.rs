//! Stamps the binary with the commit it was built from and the build date,
//! for `--version` and every run's environment, so runs of different builds
//! can be told apart. Outside a git checkout (a source tarball) the commit
//! reads "unknown"; `SOURCE_DATE_EPOCH` sets the date for reproducible builds.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // The commit, not whether the tree had edits: that changes without
    // anything cargo could watch.
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .map(|secs| {
            let out = Command::new("date").args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%d"]).output();
            out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
        })
        .or_else(|| {
            let out = Command::new("date").args(["-u", "+%Y-%m-%d"]).output().ok()?;
            Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=STORBENCH_COMMIT={commit}");
    println!("cargo:rustc-env=STORBENCH_BUILD_DATE={date}");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit or checkout moves HEAD or the branch it names.
    // (A worktree keeps its HEAD in its own git dir, its branches in the
    // common one.)
    if let (Some(dir), Some(common)) =
        (git(&["rev-parse", "--git-dir"]), git(&["rev-parse", "--git-common-dir"]))
    {
        println!("cargo:rerun-if-changed={}", std::path::Path::new(&dir).join("HEAD").display());
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let loose = std::path::Path::new(&common).join(&head);
            // A packed ref has no file of its own; packed-refs then moves.
            let watch =
                if loose.exists() { loose } else { std::path::Path::new(&common).join("packed-refs") };
            println!("cargo:rerun-if-changed={}", watch.display());
        }
    }
}
