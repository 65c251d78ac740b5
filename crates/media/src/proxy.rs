//! The link between a standby and its primary: a userspace TCP delay proxy
//! (this kernel has no netem). Each direction holds what it read as
//! timestamped chunks in a queue and a writer releases each at its due time:
//! serialisation at the bandwidth cap (when one is set), then the one-way
//! delay (rtt/2) plus optional jitter, never reordering. The reader never
//! sleeps, so a delay does not throttle throughput below the bandwidth cap.
//! [`floor`] measures what the proxy itself adds at zero delay; a configured
//! round trip below that floor is refused. Nothing here prints.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::MediaError;

/// A link's shape, as `--link rtt=1ms,bw=1gbit,jitter=0.1ms` gives it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Link {
    /// Round-trip time added, in µs (each direction gets half).
    pub rtt_us: u64,
    /// Bandwidth cap in bits per second, per direction.
    pub bw_bps: Option<u64>,
    /// Jitter in µs: each chunk's delay is the one-way delay plus a uniform
    /// draw from [0, jitter) (kept in order, so it never reorders).
    pub jitter_us: u64,
}

impl Link {
    /// Parses `rtt=1ms[,bw=1gbit][,jitter=0.1ms]`; names the bad part and
    /// what is allowed.
    pub fn parse(s: &str) -> Result<Link, MediaError> {
        let bad = |m: String| MediaError::Usage(format!("--link {s}: {m}"));
        let mut l = Link::default();
        let mut rtt = false;
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("'{part}' is not KEY=VALUE (keys: rtt, bw, jitter)")))?;
            let dur = |v: &str| {
                storbench_metrics::units::parse_duration(v)
                    .map(|d| d.as_micros() as u64)
                    .map_err(|e| bad(e.to_string()))
            };
            match k.trim() {
                "rtt" => {
                    l.rtt_us = dur(v)?;
                    rtt = true;
                }
                "jitter" => l.jitter_us = dur(v)?,
                "bw" => l.bw_bps = Some(parse_bandwidth(v).map_err(bad)?),
                other => return Err(bad(format!("unknown key '{other}' (keys: rtt, bw, jitter)"))),
            }
        }
        if !rtt {
            return Err(bad("needs rtt=DURATION, e.g. rtt=1ms".into()));
        }
        Ok(l)
    }

    /// The form `parse` reads.
    pub fn to_arg(&self) -> String {
        let mut s = format!("rtt={}ms", self.rtt_us as f64 / 1000.0);
        if let Some(b) = self.bw_bps {
            s.push_str(&format!(",bw={b}bit"));
        }
        if self.jitter_us > 0 {
            s.push_str(&format!(",jitter={}ms", self.jitter_us as f64 / 1000.0));
        }
        s
    }
}

/// Reads `1gbit`, `100mbit`, `10kbit`, `500bit` (decimal, as links are
/// sold) into bits per second.
fn parse_bandwidth(v: &str) -> Result<u64, String> {
    let t = v.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "gbit" | "gbps" => 1e9,
        "mbit" | "mbps" => 1e6,
        "kbit" | "kbps" => 1e3,
        "bit" | "bps" => 1.0,
        _ => return Err(format!("'{v}' is not a bandwidth: use e.g. 1gbit, 100mbit, 10kbit")),
    };
    let n: f64 = num.parse().map_err(|_| format!("'{v}' is not a bandwidth: use e.g. 1gbit"))?;
    let b = n * mult;
    if !b.is_finite() || b < 1000.0 {
        return Err(format!("'{v}': a bandwidth of at least 1kbit"));
    }
    Ok(b as u64)
}

/// One direction's release schedule: when the link is free again and the
/// last chunk's due time (so jitter never reorders).
struct Schedule {
    link: Link,
    link_free: Instant,
    last_due: Instant,
    rng: u64,
}

impl Schedule {
    fn new(link: Link) -> Schedule {
        let now = Instant::now();
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let seed = (clock ^ ((std::process::id() as u64) << 32)) | 1;
        Schedule { link, link_free: now, last_due: now, rng: seed }
    }

    /// When a chunk of `len` bytes read at `now` is due at the other end.
    fn due(&mut self, now: Instant, len: usize) -> Instant {
        let mut sent = now;
        if let Some(bw) = self.link.bw_bps {
            let tx = Duration::from_nanos((len as u128 * 8 * 1_000_000_000 / bw as u128) as u64);
            sent = self.link_free.max(now) + tx;
            self.link_free = sent;
        }
        let mut delay = Duration::from_micros(self.link.rtt_us) / 2;
        if self.link.jitter_us > 0 {
            // xorshift64: enough for jitter, no dependency.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            delay += Duration::from_micros(self.rng % self.link.jitter_us);
        }
        let due = (sent + delay).max(self.last_due);
        self.last_due = due;
        due
    }
}

/// Copies `from` to `to` through a queue released at due times: this
/// thread reads and stamps, a writer thread waits for each chunk's time.
fn pipe(mut from: TcpStream, mut to: TcpStream, link: Link) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::spawn(move || {
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if chunk.is_empty() {
                break;
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
    let mut sched = Schedule::new(link);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => {
                // The end travels the link too, after what was sent before it.
                let _ = tx.send((sched.due(Instant::now(), 0), Vec::new()));
                break;
            }
            Ok(n) => {
                let due = sched.due(Instant::now(), n);
                if tx.send((due, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    let _ = writer.join();
    let _ = from.shutdown(Shutdown::Both);
}

/// Serves `listener` forever: each connection is joined to `upstream`
/// through the link, both directions delayed.
pub fn serve(listener: TcpListener, upstream: SocketAddr, link: Link) -> std::io::Result<()> {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let link = link.clone();
        std::thread::spawn(move || {
            let Ok(server) = TcpStream::connect(upstream) else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { return };
            let l2 = link.clone();
            let up = std::thread::spawn(move || pipe(client, server, link));
            pipe(s2, c2, l2);
            let _ = up.join();
        });
    }
    Ok(())
}

/// Starts [`serve`] on a free port of 127.0.0.1 in a thread of this
/// process; returns the port.
pub fn spawn_local(upstream: SocketAddr, link: Link) -> std::io::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let port = l.local_addr()?.port();
    std::thread::spawn(move || serve(l, upstream, link));
    Ok(port)
}

/// An echo server on a free port of 127.0.0.1 (for pings), in a thread.
pub fn echo_server() -> std::io::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let _ = c.set_nodelay(true);
                let mut b = [0u8; 4096];
                while let Ok(n) = c.read(&mut b) {
                    if n == 0 || c.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// Round trips of one byte to an echo at `addr`: every one's time, sorted.
pub fn ping(addr: SocketAddr, count: usize) -> std::io::Result<Vec<Duration>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut out = Vec::with_capacity(count);
    let mut b = [0u8; 1];
    for _ in 0..count {
        let t = Instant::now();
        s.write_all(b"p")?;
        s.read_exact(&mut b)?;
        out.push(t.elapsed());
    }
    out.sort();
    Ok(out)
}

/// The proxy's own added round-trip latency at zero delay, in µs: median
/// ping through a zero-delay proxy minus the median direct ping, both to
/// an echo server in this process (pings alternate in small batches so a
/// busy machine weighs on both alike).
pub fn floor() -> Result<u64, MediaError> {
    let io = |e: std::io::Error| MediaError::Failed(format!("measuring the proxy's floor: {e}"));
    let echo = echo_server().map_err(io)?;
    let port = spawn_local(echo, Link::default()).map_err(io)?;
    let via: SocketAddr = ([127, 0, 0, 1], port).into();
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        direct.extend(ping(echo, 20).map_err(io)?);
        through.extend(ping(via, 20).map_err(io)?);
    }
    direct.sort();
    through.sort();
    let med = |v: &[Duration]| v[v.len() / 2];
    Ok(med(&through).saturating_sub(med(&direct)).as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_reads_its_parts_and_names_a_bad_one() {
        let l = Link::parse("rtt=1ms,bw=1gbit,jitter=0.1ms").unwrap();
        assert_eq!(l, Link { rtt_us: 1000, bw_bps: Some(1_000_000_000), jitter_us: 100 });
        assert_eq!(Link::parse(&l.to_arg()).unwrap(), l);
        assert_eq!(Link::parse("rtt=0.2ms").unwrap().rtt_us, 200);
        let e = Link::parse("rtt=1ms,bw=fast").unwrap_err().to_string();
        assert_eq!(e, "--link rtt=1ms,bw=fast: 'fast' is not a bandwidth: use e.g. 1gbit, 100mbit, 10kbit");
        let e = Link::parse("bw=1gbit").unwrap_err().to_string();
        assert!(e.contains("needs rtt="), "{e}");
        let e = Link::parse("rtt=1ms,loss=1").unwrap_err().to_string();
        assert!(e.contains("unknown key 'loss'"), "{e}");
    }

    #[test]
    fn the_schedule_serialises_at_the_cap_then_delays_and_never_reorders() {
        let link = Link { rtt_us: 2000, bw_bps: Some(8_000_000), jitter_us: 500 };
        let mut s = Schedule::new(link);
        let t0 = Instant::now();
        // 1000 bytes at 8 Mbit/s take exactly 1 ms on the wire.
        let a = s.due(t0, 1000);
        assert!(a >= t0 + Duration::from_millis(2) && a < t0 + Duration::from_micros(2500), "{:?}", a - t0);
        let b = s.due(t0, 1000);
        assert!(b >= t0 + Duration::from_millis(3) && b >= a);
        for _ in 0..100 {
            let c = s.due(t0, 0);
            assert!(c >= b);
        }
    }

    #[test]
    fn a_ping_through_the_proxy_takes_at_least_the_rtt_asked() {
        let echo = echo_server().unwrap();
        let port = spawn_local(echo, Link { rtt_us: 4000, ..Link::default() }).unwrap();
        let times = ping(([127, 0, 0, 1], port).into(), 20).unwrap();
        assert!(times[0] >= Duration::from_millis(4), "fastest {:?}", times[0]);
        // Generous: a busy 2-core machine may stall a thread for tens of ms.
        assert!(times[times.len() / 2] < Duration::from_millis(200), "median {:?}", times[10]);
    }
}
