//! Block I/O traces: storbench's own binary format (`SBTRACE1`, written by the
//! emulator's `--trace`), blkparse's default text output, and CSV, read as
//! streams of [`Record`]s; and [`Lines`], which splits each request into the
//! cache lines it touches. Nothing here loads a whole trace into memory.
//!
//! The formats, exactly (docs/cache.md repeats this for users):
//! - `sbtrace`: a 16-byte header (`SBTRACE1`, u32 record size = 32, u32 flags
//!   = 0), then 32-byte little-endian records: t_ns u64, offset u64, len u32,
//!   lat_ns u32, op u8 (0 read, 1 write, 2 flush, 3 discard), 7 zero bytes.
//! - `blkparse`: the default output of `blkparse -i DEV` (`8,0 3 1 0.000000000
//!   4162 Q WS 3417048 + 8 [proc]`): device, cpu, sequence, seconds, pid,
//!   action, RWBS, sector + 512-byte sectors. One action is counted per
//!   request: the first of Q, D or C that appears in the trace (Q in a full
//!   trace, D in one taken with `-a issue`), so a request is not counted three
//!   times. RWBS with D is a discard, else W a write, R a read, F a flush;
//!   other events (plugs, merges, messages) and the summary are skipped.
//! - `csv`: either 4 columns `timestamp,offset,size,op` (op `R`/`W`/`F`/`D`,
//!   `read`/`write`/`flush`/`discard` or `0`-`3`; an integer timestamp is ns,
//!   a decimal one seconds) or the 7 columns of the MSR Cambridge traces
//!   (`Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, times in
//!   100 ns ticks). A first line that does not start with a number is a header.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::str::FromStr;

/// The magic at the start of an `sbtrace` file.
pub const MAGIC: &[u8; 8] = b"SBTRACE1";
/// Bytes per `sbtrace` record.
pub const RECORD_SIZE: usize = 32;

/// What a request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A read.
    Read,
    /// A write.
    Write,
    /// A cache flush (no data).
    Flush,
    /// A discard / trim.
    Discard,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Read => 0,
            Op::Write => 1,
            Op::Flush => 2,
            Op::Discard => 3,
        }
    }

    fn from_code(c: u8) -> Option<Op> {
        Some(match c {
            0 => Op::Read,
            1 => Op::Write,
            2 => Op::Flush,
            3 => Op::Discard,
            _ => return None,
        })
    }
}

/// One request of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Submission time in ns since the trace started.
    pub t_ns: u64,
    /// Byte offset on the medium.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// Completion latency in ns (0 where the format has none).
    pub lat_ns: u32,
    /// What the request did.
    pub op: Op,
}

/// A trace that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The trace file.
        path: String,
        /// What failed.
        source: io::Error,
    },
    /// A record or line is malformed; `at` is its 1-based line or record
    /// number, `path` the trace file (empty until [`open`] names it).
    #[error("{}{what} {at}: {msg}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Bad {
        /// The trace file.
        path: String,
        /// `line` or `record`.
        what: &'static str,
        /// Its 1-based number.
        at: u64,
        /// What is wrong and what is allowed.
        msg: String,
    },
}

impl TraceError {
    fn io(source: io::Error) -> TraceError {
        TraceError::Io { path: String::new(), source }
    }

    fn with_path(self, p: &Path) -> TraceError {
        match self {
            TraceError::Io { path, source } if path.is_empty() => {
                TraceError::Io { path: p.display().to_string(), source }
            }
            TraceError::Bad { path, what, at, msg } if path.is_empty() => {
                TraceError::Bad { path: p.display().to_string(), what, at, msg }
            }
            e => e,
        }
    }
}

/// The trace formats `cache mrc` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// storbench's binary format (see the module docs).
    SbTrace,
    /// `blkparse` default text output.
    Blkparse,
    /// `timestamp,offset,size,op` or MSR Cambridge CSV.
    Csv,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "sbtrace" => Ok(Format::SbTrace),
            "blkparse" => Ok(Format::Blkparse),
            "csv" => Ok(Format::Csv),
            _ => Err(format!("'{s}' is not a trace format: use sbtrace, blkparse or csv")),
        }
    }
}

impl Format {
    /// The name `--format` takes: `sbtrace`, `blkparse` or `csv`.
    pub fn name(self) -> &'static str {
        match self {
            Format::SbTrace => "sbtrace",
            Format::Blkparse => "blkparse",
            Format::Csv => "csv",
        }
    }

    /// Guesses the format from the first bytes of a file: the `SBTRACE1`
    /// magic, else a first data line with commas is CSV, else blkparse.
    pub fn detect(head: &[u8]) -> Format {
        if head.starts_with(MAGIC) {
            return Format::SbTrace;
        }
        let text = String::from_utf8_lossy(head);
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        // blkparse lines also hold a comma ("8,0"), but in a field of many.
        if first.contains(',') && first.split_whitespace().count() < 7 {
            Format::Csv
        } else {
            Format::Blkparse
        }
    }
}

/// A stream of records from any of the formats.
pub type RecordIter = Box<dyn Iterator<Item = Result<Record, TraceError>> + Send>;

/// Opens a trace file; `format` None detects it from the first bytes.
pub fn open(path: &Path, format: Option<Format>) -> Result<(Format, RecordIter), TraceError> {
    let f = File::open(path).map_err(|e| TraceError::io(e).with_path(path))?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let head = r.fill_buf().map_err(|e| TraceError::io(e).with_path(path))?.to_vec();
    let format = format.unwrap_or_else(|| Format::detect(&head[..head.len().min(4096)]));
    let p = path.to_path_buf();
    let it: RecordIter = match format {
        Format::SbTrace => {
            let rd = SbTraceReader::new(r).map_err(|e| e.with_path(path))?;
            Box::new(rd.map(move |x| x.map_err(|e| e.with_path(&p))))
        }
        Format::Blkparse => Box::new(BlkparseReader::new(r).map(move |x| x.map_err(|e| e.with_path(&p)))),
        Format::Csv => Box::new(CsvReader::new(r).map(move |x| x.map_err(|e| e.with_path(&p)))),
    };
    Ok((format, it))
}

/// Writes `sbtrace` files: the header on creation, then one record per call.
pub struct TraceWriter<W: Write> {
    w: W,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header.
    pub fn new(mut w: W) -> io::Result<TraceWriter<W>> {
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&(RECORD_SIZE as u32).to_le_bytes());
        w.write_all(&h)?;
        Ok(TraceWriter { w })
    }

    /// Appends one record.
    pub fn write(&mut self, r: &Record) -> io::Result<()> {
        let mut b = [0u8; RECORD_SIZE];
        b[0..8].copy_from_slice(&r.t_ns.to_le_bytes());
        b[8..16].copy_from_slice(&r.offset.to_le_bytes());
        b[16..20].copy_from_slice(&r.len.to_le_bytes());
        b[20..24].copy_from_slice(&r.lat_ns.to_le_bytes());
        b[24] = r.op.code();
        self.w.write_all(&b)
    }

    /// Flushes what is buffered, keeping the writer open (the emulator
    /// flushes once a second so a live trace can be read while it runs).
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Reads `sbtrace` records.
pub struct SbTraceReader<R: Read> {
    r: R,
    n: u64,
    done: bool,
}

impl<R: Read> SbTraceReader<R> {
    /// Reads and checks the header.
    pub fn new(mut r: R) -> Result<SbTraceReader<R>, TraceError> {
        let mut h = [0u8; 16];
        r.read_exact(&mut h).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => {
                bad("record", 0, "the file is shorter than the 16-byte header".into())
            }
            _ => TraceError::io(e),
        })?;
        if &h[..8] != MAGIC {
            return Err(bad("record", 0, "no SBTRACE1 magic: not an sbtrace file".into()));
        }
        let size = u32::from_le_bytes(h[8..12].try_into().unwrap());
        if size as usize != RECORD_SIZE {
            return Err(bad("record", 0, format!("record size {size} in the header: only 32 is known")));
        }
        Ok(SbTraceReader { r, n: 0, done: false })
    }
}

impl<R: Read> Iterator for SbTraceReader<R> {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut b = [0u8; RECORD_SIZE];
        let mut got = 0;
        while got < RECORD_SIZE {
            match self.r.read(&mut b[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError::io(e)));
                }
            }
        }
        self.n += 1;
        if got == 0 {
            self.done = true;
            return None;
        }
        if got < RECORD_SIZE {
            self.done = true;
            return Some(Err(bad("record", self.n, format!("truncated: {got} of 32 bytes"))));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let Some(op) = Op::from_code(b[24]) else {
            self.done = true;
            return Some(Err(bad(
                "record",
                self.n,
                format!("op {} is not 0-3 (read, write, flush, discard)", b[24]),
            )));
        };
        Some(Ok(Record { t_ns: u64_at(0), offset: u64_at(8), len: u32_at(16), lat_ns: u32_at(20), op }))
    }
}

fn bad(what: &'static str, at: u64, msg: String) -> TraceError {
    TraceError::Bad { path: String::new(), what, at, msg }
}

/// Reads lines of a text trace, reusing one buffer.
struct TextLines<R: BufRead> {
    r: R,
    buf: String,
    n: u64,
}

impl<R: BufRead> TextLines<R> {
    fn next_line(&mut self) -> Option<Result<(), TraceError>> {
        self.buf.clear();
        match self.r.read_line(&mut self.buf) {
            Ok(0) => None,
            Ok(_) => {
                self.n += 1;
                Some(Ok(()))
            }
            Err(e) => Some(Err(TraceError::io(e))),
        }
    }
}

/// Reads blkparse's default text output (see the module docs).
pub struct BlkparseReader<R: BufRead> {
    lines: TextLines<R>,
    action: Option<char>,
}

impl<R: BufRead> BlkparseReader<R> {
    /// Wraps a reader.
    pub fn new(r: R) -> BlkparseReader<R> {
        BlkparseReader { lines: TextLines { r, buf: String::new(), n: 0 }, action: None }
    }

    fn parse(&mut self) -> Result<Option<Record>, TraceError> {
        let n = self.lines.n;
        let f: Vec<&str> = self.lines.buf.split_whitespace().collect();
        // An event line starts with "maj,min"; anything else (summaries) is skipped.
        let is_dev = f.first().is_some_and(|d| {
            d.split_once(',').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().all(|c| c.is_ascii_digit())
                    && b.bytes().all(|c| c.is_ascii_digit())
            })
        });
        if !is_dev || f.len() < 7 {
            return Ok(None);
        }
        let act = f[5];
        let a = match act {
            "Q" | "D" | "C" => act.chars().next().unwrap(),
            _ => return Ok(None),
        };
        match self.action {
            None => self.action = Some(a),
            Some(x) if x != a => return Ok(None),
            _ => {}
        }
        let rwbs = f[6];
        let op = if rwbs.contains('D') {
            Op::Discard
        } else if rwbs.contains('W') {
            Op::Write
        } else if rwbs.contains('R') {
            Op::Read
        } else if rwbs.contains('F') {
            Op::Flush
        } else {
            return Ok(None);
        };
        let t: f64 = f[3].parse().map_err(|_| bad("line", n, format!("time '{}' is not seconds", f[3])))?;
        // "sector + blocks"; a flush may carry no sector at all.
        let (sector, blocks) = if f.len() >= 10 && f[8] == "+" {
            let s: u64 =
                f[7].parse().map_err(|_| bad("line", n, format!("sector '{}' is not a number", f[7])))?;
            let b: u64 = f[9]
                .parse()
                .map_err(|_| bad("line", n, format!("size '{}' is not a number of sectors", f[9])))?;
            (s, b)
        } else {
            (0, 0)
        };
        let len = u32::try_from(blocks * 512)
            .map_err(|_| bad("line", n, format!("size {blocks} sectors is more than 4 GiB")))?;
        Ok(Some(Record { t_ns: (t * 1e9).round() as u64, offset: sector * 512, len, lat_ns: 0, op }))
    }
}

impl<R: BufRead> Iterator for BlkparseReader<R> {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Err(e) = self.lines.next_line()? {
                return Some(Err(e));
            }
            match self.parse() {
                Ok(None) => continue,
                Ok(Some(r)) => return Some(Ok(r)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Reads CSV traces (see the module docs).
pub struct CsvReader<R: BufRead> {
    lines: TextLines<R>,
    msr_t0: Option<u64>,
}

impl<R: BufRead> CsvReader<R> {
    /// Wraps a reader.
    pub fn new(r: R) -> CsvReader<R> {
        CsvReader { lines: TextLines { r, buf: String::new(), n: 0 }, msr_t0: None }
    }

    fn parse(&mut self) -> Result<Option<Record>, TraceError> {
        let n = self.lines.n;
        let line = self.lines.buf.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(None);
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if n == 1 && !f[0].starts_with(|c: char| c.is_ascii_digit()) {
            return Ok(None); // a header
        }
        let num = |s: &str, what: &str| -> Result<u64, TraceError> {
            s.parse().map_err(|_| bad("line", n, format!("{what} '{s}' is not a whole number")))
        };
        let len_of = |s: &str| -> Result<u32, TraceError> {
            let v = num(s, "size")?;
            u32::try_from(v).map_err(|_| bad("line", n, format!("size {v} is more than 4 GiB")))
        };
        match f.len() {
            4 => {
                let t_ns = if f[0].contains('.') {
                    let s: f64 = f[0]
                        .parse()
                        .map_err(|_| bad("line", n, format!("timestamp '{}' is not a number", f[0])))?;
                    (s * 1e9).round() as u64
                } else {
                    num(f[0], "timestamp")?
                };
                let op = match f[3].to_ascii_lowercase().as_str() {
                    "r" | "read" | "0" => Op::Read,
                    "w" | "write" | "1" => Op::Write,
                    "f" | "flush" | "2" => Op::Flush,
                    "d" | "discard" | "trim" | "3" => Op::Discard,
                    o => {
                        return Err(bad(
                            "line",
                            n,
                            format!("op '{o}' is not R, W, F, D (read, write, flush, discard)"),
                        ))
                    }
                };
                Ok(Some(Record { t_ns, offset: num(f[1], "offset")?, len: len_of(f[2])?, lat_ns: 0, op }))
            }
            7 => {
                let ticks = num(f[0], "timestamp")?;
                let t0 = *self.msr_t0.get_or_insert(ticks);
                let op = match f[3].to_ascii_lowercase().as_str() {
                    "read" => Op::Read,
                    "write" => Op::Write,
                    o => return Err(bad("line", n, format!("type '{o}' is not Read or Write"))),
                };
                let lat = num(f[6], "response time")?.saturating_mul(100);
                Ok(Some(Record {
                    t_ns: ticks.saturating_sub(t0).saturating_mul(100),
                    offset: num(f[4], "offset")?,
                    len: len_of(f[5])?,
                    lat_ns: u32::try_from(lat).unwrap_or(u32::MAX),
                    op,
                }))
            }
            k => Err(bad(
                "line",
                n,
                format!("{k} columns: use timestamp,offset,size,op or the 7 MSR Cambridge columns"),
            )),
        }
    }
}

impl<R: BufRead> Iterator for CsvReader<R> {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Err(e) = self.lines.next_line()? {
                return Some(Err(e));
            }
            match self.parse() {
                Ok(None) => continue,
                Ok(Some(r)) => return Some(Ok(r)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// One cache-line access: the line number (offset / line size) and whether
/// it was a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineAccess {
    /// Offset / line size.
    pub line: u64,
    /// A write (else a read).
    pub write: bool,
}

/// Splits reads and writes into the cache lines they touch (a request that
/// spans lines touches each, in order); flushes, discards and empty requests
/// are not accesses and are counted apart.
pub struct Lines<I> {
    inner: I,
    line: u64,
    cur: u64,
    last: u64,
    write: bool,
    pending: bool,
    /// Requests read so far (all ops).
    pub requests: u64,
    /// Flushes, discards and zero-length requests skipped.
    pub skipped: u64,
}

impl<I: Iterator<Item = Result<Record, TraceError>>> Lines<I> {
    /// Splits `inner` into lines of `line` bytes (> 0).
    pub fn new(inner: I, line: u64) -> Lines<I> {
        assert!(line > 0, "line size must be positive");
        Lines { inner, line, cur: 0, last: 0, write: false, pending: false, requests: 0, skipped: 0 }
    }
}

impl<I: Iterator<Item = Result<Record, TraceError>>> Iterator for Lines<I> {
    type Item = Result<LineAccess, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.pending {
                let line = self.cur;
                self.pending = self.cur < self.last;
                self.cur += 1;
                return Some(Ok(LineAccess { line, write: self.write }));
            }
            let r = match self.inner.next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            self.requests += 1;
            if r.len == 0 || !matches!(r.op, Op::Read | Op::Write) {
                self.skipped += 1;
                continue;
            }
            self.cur = r.offset / self.line;
            self.last = (r.offset + r.len as u64 - 1) / self.line;
            self.write = r.op == Op::Write;
            self.pending = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t: u64, off: u64, len: u32, op: Op) -> Record {
        Record { t_ns: t, offset: off, len, lat_ns: 7, op }
    }

    #[test]
    fn sbtrace_round_trips_every_field() {
        let recs =
            vec![rec(0, 0, 4096, Op::Read), rec(5, 1 << 40, 65536, Op::Write), rec(9, 0, 0, Op::Flush), {
                let mut r = rec(u64::MAX, 123, u32::MAX, Op::Discard);
                r.lat_ns = u32::MAX;
                r
            }];
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len(), 16 + 32 * recs.len());
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(&bytes[8..16], &[32, 0, 0, 0, 0, 0, 0, 0]);
        let back: Vec<Record> = SbTraceReader::new(&bytes[..]).unwrap().map(Result::unwrap).collect();
        assert_eq!(back, recs);
    }

    #[test]
    fn sbtrace_refuses_a_truncated_record_and_a_bad_op() {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        w.write(&rec(0, 0, 1, Op::Read)).unwrap();
        let mut bytes = w.finish().unwrap();
        bytes.extend_from_slice(&[0u8; 10]);
        let out: Vec<_> = SbTraceReader::new(&bytes[..]).unwrap().collect();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].as_ref().unwrap_err().to_string(), "record 2: truncated: 10 of 32 bytes");
        bytes.truncate(16 + 32);
        bytes[16 + 24] = 9;
        let e = SbTraceReader::new(&bytes[..]).unwrap().next().unwrap().unwrap_err();
        assert!(e.to_string().contains("op 9 is not 0-3"), "{e}");
        assert!(SbTraceReader::new(&b"SBTRACE2\x20\0\0\0\0\0\0\0"[..]).is_err());
    }

    #[test]
    fn blkparse_counts_one_action_per_request() {
        let text = "\
  8,0    3        1     0.000000000  4162  Q  WS 3417048 + 8 [kworker/u8:2]
  8,0    3        2     0.000001000  4162  G  WS 3417048 + 8 [kworker/u8:2]
  8,0    3        3     0.000002000  4162  D  WS 3417048 + 8 [kworker/u8:2]
  8,0    0        4     0.000500000     0  C  WS 3417048 + 8 [0]
  8,0    1        5     1.250000000  4170  Q   R 16 + 16 [dd]
  8,0    1        6     1.250000000  4170  Q  FWS [fsync]
  8,0    1        7     1.300000000  4170  Q   D 2048 + 2048 [fstrim]
  8,0    1        8     1.400000000  4170  P   N [dd]
CPU0 (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           1,        4KiB
";
        let recs: Vec<Record> = BlkparseReader::new(text.as_bytes()).map(Result::unwrap).collect();
        assert_eq!(
            recs,
            vec![
                Record { t_ns: 0, offset: 3417048 * 512, len: 4096, lat_ns: 0, op: Op::Write },
                Record { t_ns: 1_250_000_000, offset: 8192, len: 8192, lat_ns: 0, op: Op::Read },
                Record { t_ns: 1_250_000_000, offset: 0, len: 0, lat_ns: 0, op: Op::Write },
                Record { t_ns: 1_300_000_000, offset: 2048 * 512, len: 1 << 20, lat_ns: 0, op: Op::Discard },
            ]
        );
        // A trace of issues only counts D events.
        let d = "  8,0  3  3  0.5  4162  D  R 8 + 8 [x]\n";
        assert_eq!(BlkparseReader::new(d.as_bytes()).count(), 1);
        let e = BlkparseReader::new("8,0 3 3 0.5 1 D R x + 8 [x]\n".as_bytes()).next().unwrap().unwrap_err();
        assert_eq!(e.to_string(), "line 1: sector 'x' is not a number");
    }

    #[test]
    fn csv_reads_both_forms_and_names_a_bad_value() {
        let text = "timestamp,offset,size,op\n100,4096,8192,R\n0.5,0,512,write\n7,0,0,F\n";
        let recs: Vec<Record> = CsvReader::new(text.as_bytes()).map(Result::unwrap).collect();
        assert_eq!(
            recs,
            vec![
                Record { t_ns: 100, offset: 4096, len: 8192, lat_ns: 0, op: Op::Read },
                Record { t_ns: 500_000_000, offset: 0, len: 512, lat_ns: 0, op: Op::Write },
                Record { t_ns: 7, offset: 0, len: 0, lat_ns: 0, op: Op::Flush },
            ]
        );
        let msr =
            "128166372003061629,wdev,0,Write,1324086272,4096,1627\n128166372003061639,wdev,0,Read,0,512,10\n";
        let recs: Vec<Record> = CsvReader::new(msr.as_bytes()).map(Result::unwrap).collect();
        assert_eq!(
            recs[0],
            Record { t_ns: 0, offset: 1324086272, len: 4096, lat_ns: 162_700, op: Op::Write }
        );
        assert_eq!(recs[1].t_ns, 1000);
        assert_eq!(recs[1].op, Op::Read);
        let e = CsvReader::new("1,2,3,X\n".as_bytes()).next().unwrap().unwrap_err();
        assert_eq!(e.to_string(), "line 1: op 'x' is not R, W, F, D (read, write, flush, discard)");
        let e = CsvReader::new("1,2\n".as_bytes()).next().unwrap().unwrap_err();
        assert!(e.to_string().starts_with("line 1: 2 columns"), "{e}");
    }

    #[test]
    fn detect_tells_the_formats_apart() {
        assert_eq!(Format::detect(b"SBTRACE1\x20\0\0\0"), Format::SbTrace);
        assert_eq!(Format::detect(b"timestamp,offset,size,op\n"), Format::Csv);
        assert_eq!(Format::detect(b"1,2,3,R\n"), Format::Csv);
        assert_eq!(
            Format::detect(b"  8,0    3        1     0.000000000  4162  Q  WS 1 + 8 [k]\n"),
            Format::Blkparse
        );
    }

    #[test]
    fn a_request_spanning_lines_touches_each() {
        let recs = vec![
            Ok(rec(0, 65535, 2, Op::Read)),                 // lines 0 and 1
            Ok(rec(0, 0, 0, Op::Read)),                     // nothing
            Ok(rec(0, 0, 0, Op::Flush)),                    // nothing
            Ok(rec(0, 131072, 65536, Op::Write)),           // line 2 only
            Ok(rec(0, 65536 * 3, 65536 * 3 + 1, Op::Read)), // lines 3..=6
        ];
        let mut it = Lines::new(recs.into_iter(), 65536);
        let got: Vec<(u64, bool)> = it.by_ref().map(|a| a.unwrap()).map(|a| (a.line, a.write)).collect();
        assert_eq!(
            got,
            vec![(0, false), (1, false), (2, true), (3, false), (4, false), (5, false), (6, false)]
        );
        assert_eq!((it.requests, it.skipped), (5, 2));
    }
}
