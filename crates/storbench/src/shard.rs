//! The sharding options as the command line gives them: `--shard i/N`
//! and `--start-at`/`--start-in`, read into `storbench_run::shard`.

use anyhow::Result;
use storbench_cluster::StartAt;
pub use storbench_run::shard::Sharding;

use crate::cli::{RunFlags, StartFlags};

/// The instant `--start-at`/`--start-in` name, read now; a bad value is a
/// usage error naming it.
pub fn start_of(s: &StartFlags) -> Result<StartAt> {
    storbench_run::shard::start_of(s.start_at, s.start_in)
}

/// This process's shard and start instant from a command's run options.
pub fn of(r: &RunFlags) -> Result<Sharding> {
    Sharding::of(r.shard, r.start.start_at, r.start.start_in)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;
    use storbench_cluster::Shard;
    use storbench_io::Profile;

    fn global(args: &[&str]) -> RunFlags {
        let mut v = vec!["storbench", "io"];
        v.extend_from_slice(args);
        crate::cli::Cli::try_parse_from(v).expect("parses").command.take_flags().0
    }

    #[test]
    fn shard_options_parse_record_and_refuse() {
        let s = of(&global(&["--shard", "1/3", "--start-in", "5s"])).unwrap();
        assert_eq!(s.shard, Shard { index: 1, count: 3 });
        let mut c = json!({});
        s.record(&mut c);
        assert_eq!(c["shard"], "1/3");
        assert!(c["start_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(s.part_of(10, "users").unwrap(), 4..7);
        let e = s.part_of(1, "users").unwrap_err().to_string();
        assert!(e.contains("1 users over 3 shards leaves shard 1 with none"), "{e}");
        assert!(s.check_kind("tpcc").is_ok());
        let e = s.check_kind("tpch").unwrap_err().to_string();
        assert!(e.starts_with("--shard 1/3: a tpch run does not split"), "{e}");

        let whole = of(&global(&[])).unwrap();
        assert!(!whole.split() && whole.check_kind("tpch").is_ok());
        let mut c = json!({});
        whole.record(&mut c);
        assert_eq!(c, json!({}), "an unsharded run records nothing");

        // I/O: 8 threads over 3 shards are 3, 3, 2; the span splits on
        // blocks, with the rate in proportion to the threads.
        let mut p = Profile::new("p");
        (p.threads, p.bs, p.rate) = (8, 8192, Some(800.0));
        let size = 100 * 8192 + 10;
        s.io_profile(&mut p, size, false).unwrap();
        assert_eq!((p.threads, p.offset, p.span, p.rate), (3, 34 * 8192, Some(33 * 8192), Some(300.0)));
        let mut q = Profile::new("q");
        q.threads = 8;
        s.io_profile(&mut q, size, true).unwrap();
        assert_eq!((q.threads, q.offset, q.span), (3, 0, None), "--shared-span keeps the whole span");
        let mut tiny = Profile::new("tiny");
        tiny.threads = 3;
        let e = s.io_profile(&mut tiny, 8192, false).unwrap_err().to_string();
        assert!(e.contains("less than one block each"), "{e}");

        // `--shard` is typed as clap reads the line: refused there.
        for bad in ["3/3", "1", "x/2"] {
            let e = crate::cli::Cli::try_parse_from(["storbench", "io", "--shard", bad]).unwrap_err();
            assert!(e.to_string().contains(&format!("'{bad}' is not a shard: use i/N")), "{e}");
        }
        let e = of(&global(&["--start-at", "2001-01-01T00:00:00Z"])).unwrap_err().to_string();
        assert!(e.contains("is in the past"), "{e}");
        // `--start-at` is an instant as clap reads the line: refused there.
        let e = crate::cli::Cli::try_parse_from(["storbench", "io", "--start-at", "tomorrow"]).unwrap_err();
        assert!(e.to_string().contains("--start-at 'tomorrow': use an RFC 3339 instant"), "{e}");
        // `--start-in` is a duration as clap reads the line: refused there.
        let e = crate::cli::Cli::try_parse_from(["storbench", "io", "--start-in", "soon"]).unwrap_err();
        assert!(e.to_string().contains("'soon' is not a duration"), "{e}");
    }
}
