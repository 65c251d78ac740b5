//! diskspd command lines as a storbench profile: `storbench io --diskspd
//! "-b8K -d60 -o8 -t8 -r -w30 -Sh -L" [--target PATH]` runs what a SQL
//! Server user already runs on Windows. One command line is one profile
//! (diskspd's defaults for what it leaves out: 64 KiB sequential reads,
//! 2 outstanding I/Os, 1 thread, 10 s, 5 s warm-up, caching on).
//!
//! Options that cannot be run faithfully are refused naming the option;
//! the mapping table is in docs/io.md. Nothing here prints.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::fio_job::Import;
use crate::profile::{Pattern, Profile};

/// A diskspd size: a number with `K`, `M`, `G` or `T` (powers of 1024, as
/// diskspd reads them) or none for bytes.
pub fn diskspd_size(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("'{s}' is not a size: use e.g. 8K, 64K, 1M, 10G"))?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("'{s}' is not a size: use e.g. 8K, 64K, 1M, 10G")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("'{s}' is too large"))
}

/// Options diskspd takes that change only its output (`-L`: storbench
/// always measures latency; `-R`: output format; `-v`: verbose; `-n`: no
/// CPU affinity, which storbench never sets).
fn ignored(tok: &str) -> bool {
    tok == "-L" || tok == "-n" || tok == "-v" || tok.starts_with("-R")
}

/// The mutable state of one parse: what the tokens set.
struct State {
    p: Profile,
    size: Option<u64>,
    target: Option<PathBuf>,
    write_through: bool,
    random: Option<bool>,
    throughput: Option<(u64, bool)>,
}

/// Maps a diskspd command line (as one string, the way it is typed).
pub fn parse(cmdline: &str) -> Result<Import, String> {
    let mut st = State {
        p: Profile::new("diskspd"),
        size: None,
        target: None,
        write_through: false,
        random: None,
        throughput: None,
    };
    st.p.bs = 64 << 10;
    st.p.pattern = Pattern::Sequential;
    st.p.qd = 2;
    st.p.duration = Duration::from_secs(10);
    st.p.rampup = Duration::from_secs(5);
    st.p.direct = false;
    st.p.source = "diskspd command line";
    for tok in cmdline.split_whitespace() {
        let tok = tok.trim_matches('"');
        if ignored(tok) {
            continue;
        }
        token(&mut st, tok).map_err(|why| format!("--diskspd: '{tok}': {why}"))?;
    }
    let mut p = st.p;
    p.pattern = if st.random == Some(true) { Pattern::Random } else { Pattern::Sequential };
    if let Some((n, iops)) = st.throughput {
        let per_thread = if iops { n as f64 } else { n as f64 * 1000.0 / p.bs as f64 };
        p.rate = Some(per_thread * f64::from(p.threads));
    }
    let mut notes = Vec::new();
    if st.write_through && p.writes() {
        notes.push(
            "diskspd's write-through (-Sh/-Sw) is not applied: writes are direct but not O_DSYNC, so a device with a volatile write cache may acknowledge them from it"
                .to_string(),
        );
    }
    p.name = format!(
        "diskspd-{}-{}-w{}",
        if p.pattern == Pattern::Random { "random" } else { "seq" },
        storbench_metrics::units::format_size(p.bs),
        100 - p.read_pct
    );
    Ok(Import {
        profiles: vec![p],
        target: st.target,
        size: st.size,
        engine: None,
        notes,
        origin: json!({ "diskspd": cmdline }),
    })
}

/// Applies one token.
fn token(st: &mut State, tok: &str) -> Result<(), String> {
    let p = &mut st.p;
    let Some(opt) = tok.strip_prefix('-') else {
        if st.target.is_some() {
            return Err("a second target: storbench runs one target at a time".into());
        }
        if tok.starts_with('#') {
            return Err("physical disk numbers are Windows's: give the Linux device or file".into());
        }
        st.target = Some(PathBuf::from(tok));
        return Ok(());
    };
    let (letter, arg) = opt.split_at(opt.chars().next().map_or(0, char::len_utf8));
    let int = |max: u32| match arg.parse::<u32>() {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        _ => Err(format!("'{arg}': use a whole number from 1 to {max}")),
    };
    let secs =
        || arg.parse::<u64>().map(Duration::from_secs).map_err(|_| format!("'{arg}': use whole seconds"));
    match letter {
        "b" => p.bs = diskspd_size(arg)?,
        "d" => p.duration = secs()?,
        "W" => p.rampup = secs()?,
        "C" if secs()?.is_zero() => {}
        "o" => p.qd = int(4096)?,
        "t" => p.threads = int(1024)?,
        "c" => st.size = Some(diskspd_size(arg)?),
        "f" => p.span = Some(diskspd_size(arg)?),
        "w" => match arg.parse::<u8>() {
            Ok(w) if w <= 100 => p.read_pct = 100 - w,
            _ => return Err(format!("'{arg}': the write share is 0 to 100 (percent)")),
        },
        "r" | "s" if st.random.is_some() => return Err("give one of -r (random) and -s (sequential)".into()),
        "r" => {
            st.random = Some(true);
            if !arg.is_empty() {
                p.align = diskspd_size(arg)?;
            }
        }
        "s" if arg.is_empty() => st.random = Some(false),
        "S" | "h" => {
            let arg = if letter == "h" || arg.is_empty() { if letter == "h" { "h" } else { "u" } } else { arg };
            for c in arg.chars() {
                match c {
                    'u' => p.direct = true,
                    'h' => {
                        p.direct = true;
                        st.write_through = true;
                    }
                    'w' => st.write_through = true,
                    'b' => p.direct = false,
                    _ => return Err("-S takes b, h, u or w (memory-mapped and remote-cache modes are not supported)".into()),
                }
            }
        }
        "g" => {
            let (n, iops) = match arg.strip_suffix('i') {
                Some(n) => (n, true),
                None => (arg, false),
            };
            let n = n.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| format!("'{arg}': use bytes per ms, or N i for IOPS"))?;
            st.throughput = Some((n, iops));
        }
        _ => return Err(
            "storbench cannot run this option faithfully; it maps -b -c -d -f -g -o -r -s -S -t -w -W (and ignores -L -n -R -v): see docs/io.md"
                .into(),
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sqlserver_line_maps_to_one_profile() {
        let imp = parse("-b8K -d60 -o8 -t8 -r -w30 -Sh -L -c20G D:\\sql\\test.dat").unwrap();
        let p = &imp.profiles[0];
        assert_eq!(p.name, "diskspd-random-8k-w30");
        assert_eq!((p.bs, p.qd, p.threads, p.read_pct), (8192, 8, 8, 70));
        assert_eq!((p.pattern, p.direct, p.random_map), (Pattern::Random, true, false));
        assert_eq!((p.duration, p.rampup), (Duration::from_secs(60), Duration::from_secs(5)));
        assert_eq!(imp.size, Some(20 << 30));
        assert_eq!(imp.target, Some(PathBuf::from("D:\\sql\\test.dat")));
        assert!(imp.notes[0].contains("write-through"), "-Sh with writes says what is not applied");
        assert_eq!(imp.origin["diskspd"], "-b8K -d60 -o8 -t8 -r -w30 -Sh -L -c20G D:\\sql\\test.dat");
    }

    #[test]
    fn diskspds_defaults_and_other_options() {
        let p = &parse("").unwrap().profiles[0];
        assert_eq!((p.bs, p.qd, p.threads, p.pattern, p.read_pct), (65536, 2, 1, Pattern::Sequential, 100));
        assert_eq!(
            (p.direct, p.duration, p.rampup),
            (false, Duration::from_secs(10), Duration::from_secs(5))
        );
        let imp = parse("-b64K -s -Su -W0 -f1G -t2 -g1000").unwrap();
        let p = &imp.profiles[0];
        assert_eq!((p.direct, p.rampup, p.span), (true, Duration::ZERO, Some(1 << 30)));
        // 1000 bytes/ms per thread at 64 KiB, two threads.
        assert_eq!(p.rate, Some(1000.0 * 1000.0 / 65536.0 * 2.0));
        assert!(imp.notes.is_empty(), "reads are not affected by write-through");
        assert_eq!(parse("-r4K -b8K -g500i -t4").unwrap().profiles[0].align, 4096);
        assert_eq!(parse("-g500i -t4").unwrap().profiles[0].rate, Some(2000.0));
        assert_eq!(diskspd_size("1M"), Ok(1 << 20));
    }

    #[test]
    fn what_cannot_be_run_is_refused_naming_the_option() {
        for (line, want) in [
            ("-b8K -Zr", "--diskspd: '-Zr': storbench cannot run this option faithfully"),
            ("-Sm", "--diskspd: '-Sm': -S takes b, h, u or w"),
            ("-w130", "--diskspd: '-w130': '130': the write share is 0 to 100"),
            ("-r -s", "--diskspd: '-s': give one of -r"),
            ("-si", "--diskspd: '-si': storbench cannot run"),
            ("-o0", "--diskspd: '-o0': '0': use a whole number from 1"),
            ("-C5", "--diskspd: '-C5': storbench cannot run"),
            ("-bbig", "--diskspd: '-bbig': 'big' is not a size"),
            ("a.dat b.dat", "--diskspd: 'b.dat': a second target"),
            ("#1", "--diskspd: '#1': physical disk numbers"),
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.starts_with(want), "{line}: {e}");
        }
    }
}
