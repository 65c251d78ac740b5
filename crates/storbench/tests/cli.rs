//! The binary's integration tests, one test binary (`cargo test --test cli`,
//! a file's tests with `cargo test --test cli crash_cli::`). Each file below is
//! a module: one link instead of one per file, the shared helpers compiled
//! once, and the harness runs every file's tests from one queue, so a slow
//! test no longer holds its file's binary open while the other files wait.
//! A new test file must be listed here (Cargo's autotests are off for this
//! crate, so an unlisted file would not run: `tests_are_all_listed` checks).

mod common;

mod backup_cli;
mod cache_cli;
mod calibrate_cli;
mod cluster_cli;
mod compare_cli;
mod crash_cli;
mod emu_array;
mod emu_cli;
mod exit_codes;
mod io_cli;
mod io_import_cli;
mod media_cli;
mod models_cli;
mod oltp_cli;
mod plan_cli;
mod repl_cli;
mod report_cli;
mod results_cli;
mod sensitivity_cli;
mod tpch_cli;
mod verdict_cli;
mod waits_cli;

/// Every `tests/*.rs` file is a module above: with autotests off, a file left
/// out would compile nowhere and its tests would silently never run.
#[test]
fn tests_are_all_listed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let listed = include_str!("cli.rs");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".rs").filter(|s| *s != "cli") {
            let line = format!("\nmod {stem};\n");
            assert!(listed.contains(&line), "tests/{name} is not listed in tests/cli.rs");
        }
    }
}
