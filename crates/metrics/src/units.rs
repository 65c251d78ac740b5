//! Parsing of the value formats every storbench flag and plan file shares:
//! durations (`500ms`, `30s`, `2m`, `1h`), sizes (`8k`, `64KiB`, `1G`, `4096`)
//! and load lists (`1,2,4`, `fib:89`, `1..8`). Errors name the bad value and
//! what is allowed, so callers can pass them straight to the user.
//!
//! Every parser here has the shape `fn(&str) -> Result<T, String>`, which
//! is what clap takes as a `value_parser`: the binary's flags are typed by
//! them (a bad value is refused while the command line is read, exit 2,
//! before anything is made), and plan files read the same syntax through
//! the same functions. [`Given`] keeps the text beside the value where a
//! record or a message must echo what was written. Nothing here depends on
//! clap.

use std::time::Duration;

/// Parses a duration: an integer or decimal followed by `ms`, `s`, `m` or `h`
/// (a bare number means seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a duration: use e.g. 500ms, 30s, 2m or 1h");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" | "sec" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a duration more than zero (a measured time, an interval): as
/// [`parse_duration`], and `0s` is refused.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("'{s}' must be more than zero: use e.g. 500ms, 30s or 2m")),
        d => Ok(d),
    }
}

/// Parses a size in bytes: a number with an optional suffix. `k`, `m`, `g`,
/// `t` and their `KiB`/`K`/`KB` forms are powers of 1024, as fio reads them
/// for block sizes; `b` or no suffix means bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a size: use e.g. 4096, 8k, 64KiB, 1G");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let v = n * mult as f64;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 || v.fract() != 0.0 {
        return Err(bad());
    }
    Ok(v as u64)
}

/// Parses a comma-separated list of sizes (`64M,1G,2G`, or one size), in
/// the order given; each as [`parse_size`].
pub fn parse_size_list(s: &str) -> Result<Vec<u64>, String> {
    comma_list(s, "sizes: use e.g. 64M,1G,2G", parse_size)
}

/// Parses a comma-separated list of durations (`10s,30s,1m`, or one
/// duration), in the order given; each as [`parse_duration`].
pub fn parse_duration_list(s: &str) -> Result<Vec<Duration>, String> {
    comma_list(s, "durations: use e.g. 10s,30s,1m", parse_duration)
}

/// `one` over each comma-separated part of `s`; an empty list or part is
/// refused with `what` (`'' is not a list of {what}`), a bad part with the
/// part's own message.
fn comma_list<T>(s: &str, what: &str, one: fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',')
        .map(|part| match part.trim() {
            "" => Err(format!("'{s}' is not a list of {what}")),
            p => one(p),
        })
        .collect()
}

/// A value read from a flag or a plan, with its text as given: the code
/// uses `value`; a record or a message that echoes the user's words
/// (`memory_limit: "256M"`, `at 200MB/s`) uses `text`.
#[derive(Debug, Clone, PartialEq)]
pub struct Given<T> {
    /// The value parsed.
    pub value: T,
    /// The text it was parsed from, as written (untrimmed).
    pub text: String,
}

impl<T> Given<T> {
    /// A parser of `Given<T>` from a parser of `T` (a clap `value_parser`:
    /// `value_parser = Given::parser(parse_size)`).
    pub fn parser(
        parse: fn(&str) -> Result<T, String>,
    ) -> impl Fn(&str) -> Result<Given<T>, String> + Clone + Send + Sync + 'static
    where
        T: 'static,
    {
        move |s: &str| parse(s).map(|value| Given { value, text: s.to_string() })
    }
}

/// Formats bytes the way users write them: `8k`, `64k`, `1m`, `1g`, else bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, m) in [("t", 1u64 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)] {
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{unit}", bytes / m);
        }
    }
    bytes.to_string()
}

/// Parses clients or users per step ([`parse_list`]): each 1 to 10,000.
pub fn parse_load_levels(s: &str) -> Result<Vec<usize>, String> {
    let list = parse_list(s)?;
    if list.iter().any(|&c| c == 0 || c > 10_000) {
        return Err(format!("'{s}': each must be 1 to 10000"));
    }
    Ok(list.into_iter().map(|c| c as usize).collect())
}

/// Parses a list of load levels: `1,2,4`, a range `1..8`, or `fib:N` (the
/// Fibonacci-like sequence 1, 2, 3, 5, 8, ... up to N, as STUDIES.md S4 uses;
/// N itself is included even when it is not in the sequence). Values must be
/// positive; duplicates are kept out, order kept.
pub fn parse_list(s: &str) -> Result<Vec<u32>, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a list: use e.g. 1,2,4 or 1..8 or fib:89 (positive whole numbers)");
    let mut out: Vec<u32> = Vec::new();
    if let Some(max) = t.strip_prefix("fib:") {
        let max: u32 = max.trim().parse().map_err(|_| bad())?;
        if max == 0 {
            return Err(bad());
        }
        let (mut a, mut b) = (1u32, 2u32);
        while a <= max {
            out.push(a);
            let next = a.saturating_add(b);
            a = b;
            b = next;
        }
        if out.last() != Some(&max) {
            out.push(max);
        }
        return Ok(out);
    }
    for part in t.split(',') {
        let part = part.trim();
        if let Some((lo, hi)) = part.split_once("..") {
            let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
            if lo == 0 || hi < lo {
                return Err(bad());
            }
            out.extend(lo..=hi);
        } else {
            let v: u32 = part.parse().map_err(|_| bad())?;
            if v == 0 {
                return Err(bad());
            }
            out.push(v);
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(*v));
    Ok(out)
}

/// Formats a duration compactly: `500ms`, `30s`, `2m`, `1m30s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// Formats a figure for people, the one way every table, line and report
/// of storbench prints one: whole numbers from 100 up (a fourth digit of an
/// IOPS or TPS figure is noise), then three significant digits (`12.3`,
/// `5.02`, `0.444`); `–` for a value that is not a number.
pub fn format_figure(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        for bad in ["", "fast", "10x", "-1s", "s"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")) && e.contains("30s"), "{e}");
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn positive_durations_refuse_zero() {
        assert_eq!(parse_positive_duration("500ms").unwrap(), Duration::from_millis(500));
        let e = parse_positive_duration("0s").unwrap_err();
        assert!(e.contains("'0s'") && e.contains("more than zero"), "{e}");
        assert!(parse_positive_duration("soon").unwrap_err().contains("'soon' is not a duration"));
    }

    #[test]
    fn size_and_duration_lists() {
        assert_eq!(parse_size_list("64M,1G, 4k").unwrap(), vec![64 << 20, 1 << 30, 4096]);
        assert_eq!(parse_size_list("8k").unwrap(), vec![8192]);
        assert!(parse_size_list("8k,big").unwrap_err().contains("'big' is not a size"));
        for bad in ["", "8k,", ",8k", "8k,,1m"] {
            let e = parse_size_list(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}' is not a list of sizes")), "{bad}: {e}");
        }
        assert_eq!(
            parse_duration_list("10s,1m,500ms").unwrap(),
            vec![Duration::from_secs(10), Duration::from_secs(60), Duration::from_millis(500)]
        );
        assert!(parse_duration_list("1s,later").unwrap_err().contains("'later' is not a duration"));
        assert!(parse_duration_list("1s,").unwrap_err().contains("not a list of durations"));
    }

    #[test]
    fn given_keeps_the_text_beside_the_value() {
        let p = Given::parser(parse_size);
        assert_eq!(p("256M").unwrap(), Given { value: 256 << 20, text: "256M".into() });
        assert!(p("lots").unwrap_err().contains("'lots' is not a size"));
    }

    #[test]
    fn figures() {
        let f = format_figure;
        assert_eq!(
            [f(39745.67), f(613.3), f(74.0), f(12.34), f(5.024), f(0.4446)],
            ["39746", "613", "74", "12.3", "5.02", "0.445"]
        );
        assert_eq!([f(-0.0), f(f64::NAN), f(f64::INFINITY), f(-2.5)], ["0", "–", "–", "-2.50"]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("8k").unwrap(), 8192);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5m").unwrap(), 3 << 19);
        for bad in ["", "8q", "k", "-4k", "0.3"] {
            assert!(parse_size(bad).unwrap_err().contains("not a size"), "{bad}");
        }
        assert_eq!(format_size(8192), "8k");
        assert_eq!(format_size(1 << 30), "1g");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_list("fib:89").unwrap(), vec![1, 2, 3, 5, 8, 13, 21, 34, 55, 89]);
        assert_eq!(parse_list("fib:10").unwrap(), vec![1, 2, 3, 5, 8, 10]);
        assert_eq!(parse_list("1..4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_list("4,4,2").unwrap(), vec![4, 2]);
        assert_eq!(parse_load_levels("1..3,10000").unwrap(), vec![1, 2, 3, 10_000]);
        assert_eq!(parse_load_levels("5,10001").unwrap_err(), "'5,10001': each must be 1 to 10000");
        for bad in ["", "0", "a", "fib:0", "3..1", "1,,2"] {
            assert!(parse_list(bad).is_err(), "{bad}");
        }
    }
}
