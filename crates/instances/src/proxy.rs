//! The link between a standby and its primary: a userspace TCP delay proxy
//! (this kernel has no netem). Each direction holds what it read as
//! timestamped chunks in a queue and a writer releases each at its due time:
//! serialisation at that direction's bandwidth cap (when one is set), then
//! its one-way delay (rtt/2, or `up`/`down` as given) plus optional jitter,
//! never reordering. `up` is standby → primary (replies and
//! acknowledgements), `down` primary → standby (the WAL stream). The reader never
//! sleeps, so a delay does not throttle throughput below the bandwidth cap.
//! [`floor`] measures what the proxy itself adds at zero delay; a configured
//! round trip below that floor is refused. Nothing here prints.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::InstanceError;

/// A link's shape, as `--link rtt=1ms,bw=1gbit,jitter=0.1ms` or
/// `--link up=0.2ms,down=0.8ms,down_bw=100mbit` gives it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Link {
    /// Round-trip time added, in µs: the two one-way delays together.
    pub rtt_us: u64,
    /// Bandwidth cap in bits per second, each direction (a direction's
    /// own cap, when given, wins).
    pub bw_bps: Option<u64>,
    /// Jitter in µs: each chunk's delay is the one-way delay plus a uniform
    /// draw from [0, jitter) (kept in order, so it never reorders).
    pub jitter_us: u64,
    /// One-way delay standby → primary in µs, when not half the round
    /// trip (the other way is `rtt_us` less this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_us: Option<u64>,
    /// Bandwidth cap standby → primary, bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_bw_bps: Option<u64>,
    /// Bandwidth cap primary → standby (the WAL stream), bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_bw_bps: Option<u64>,
}

/// A direction through the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Standby → primary: replies, write/flush/apply acknowledgements.
    Up,
    /// Primary → standby: the WAL stream.
    Down,
}

const KEYS: &str = "rtt, up, down, bw, up_bw, down_bw, jitter";

impl Link {
    /// Parses `rtt=1ms` or `up=0.2ms,down=0.8ms` (one-way delays; one of
    /// them alone leaves the other 0), then `[,bw=1gbit]` (each direction)
    /// or `[,up_bw=..][,down_bw=..]`, `[,jitter=0.1ms]`; names the bad part
    /// and what is allowed.
    pub fn parse(s: &str) -> Result<Link, InstanceError> {
        let bad = |m: String| InstanceError::Usage(format!("--link {s}: {m}"));
        let mut l = Link::default();
        let (mut rtt, mut up, mut down) = (None, None, None);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("'{part}' is not KEY=VALUE (keys: {KEYS})")))?;
            let dur = |v: &str| {
                storbench_metrics::units::parse_duration(v)
                    .map(|d| d.as_micros() as u64)
                    .map_err(|e| bad(e.to_string()))
            };
            let bw = |v: &str| parse_bandwidth(v).map(Some).map_err(bad);
            match k.trim() {
                "rtt" => rtt = Some(dur(v)?),
                "up" => up = Some(dur(v)?),
                "down" => down = Some(dur(v)?),
                "jitter" => l.jitter_us = dur(v)?,
                "bw" => l.bw_bps = bw(v)?,
                "up_bw" => l.up_bw_bps = bw(v)?,
                "down_bw" => l.down_bw_bps = bw(v)?,
                other => return Err(bad(format!("unknown key '{other}' (keys: {KEYS})"))),
            }
        }
        match (rtt, up, down) {
            (Some(r), None, None) => l.rtt_us = r,
            (None, None, None) => {
                return Err(bad("needs rtt=DURATION (e.g. rtt=1ms) or up=/down= one-way delays".into()))
            }
            (None, u, d) => {
                let (u, d) = (u.unwrap_or(0), d.unwrap_or(0));
                l.rtt_us = u + d;
                l.up_us = Some(u);
            }
            (Some(_), _, _) => {
                return Err(bad("give rtt= (half each way) or up=/down= (one-way delays), not both".into()))
            }
        }
        Ok(l)
    }

    /// The form `parse` reads.
    pub fn to_arg(&self) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        let mut s = match self.up_us {
            None => format!("rtt={}ms", ms(self.rtt_us)),
            Some(up) => format!("up={}ms,down={}ms", ms(up), ms(self.rtt_us.saturating_sub(up))),
        };
        for (key, b) in [("bw", self.bw_bps), ("up_bw", self.up_bw_bps), ("down_bw", self.down_bw_bps)] {
            if let Some(b) = b {
                s.push_str(&format!(",{key}={b}bit"));
            }
        }
        if self.jitter_us > 0 {
            s.push_str(&format!(",jitter={}ms", ms(self.jitter_us)));
        }
        s
    }

    /// One direction's one-way delay and bandwidth cap.
    pub fn one_way(&self, d: Direction) -> (Duration, Option<u64>) {
        let delay = match (self.up_us, d) {
            (None, _) => Duration::from_micros(self.rtt_us) / 2,
            (Some(up), Direction::Up) => Duration::from_micros(up),
            (Some(up), Direction::Down) => Duration::from_micros(self.rtt_us.saturating_sub(up)),
        };
        let bw = match d {
            Direction::Up => self.up_bw_bps,
            Direction::Down => self.down_bw_bps,
        };
        (delay, bw.or(self.bw_bps))
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

/// One direction's release schedule: its delay and cap, when the link is
/// free again and the last chunk's due time (so jitter never reorders).
struct Schedule {
    delay: Duration,
    bw_bps: Option<u64>,
    jitter_us: u64,
    link_free: Instant,
    last_due: Instant,
    rng: u64,
}

impl Schedule {
    fn new(link: &Link, dir: Direction) -> Schedule {
        let now = Instant::now();
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let seed = (clock ^ ((std::process::id() as u64) << 32)) | 1;
        let (delay, bw_bps) = link.one_way(dir);
        Schedule { delay, bw_bps, jitter_us: link.jitter_us, link_free: now, last_due: now, rng: seed }
    }

    /// When a chunk of `len` bytes read at `now` is due at the other end.
    fn due(&mut self, now: Instant, len: usize) -> Instant {
        let mut sent = now;
        if let Some(bw) = self.bw_bps {
            let tx = Duration::from_nanos((len as u128 * 8 * 1_000_000_000 / bw as u128) as u64);
            sent = self.link_free.max(now) + tx;
            self.link_free = sent;
        }
        let mut delay = self.delay;
        if self.jitter_us > 0 {
            // xorshift64: enough for jitter, no dependency.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            delay += Duration::from_micros(self.rng % self.jitter_us);
        }
        let due = (sent + delay).max(self.last_due);
        self.last_due = due;
        due
    }
}

/// Copies `from` to `to` through a queue released at due times: this
/// thread reads and stamps, a writer thread waits for each chunk's time.
fn pipe(mut from: TcpStream, mut to: TcpStream, link: Link, dir: Direction) {
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
    let mut sched = Schedule::new(&link, dir);
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

/// Serves `listener` forever: each connection (a standby's) is joined to
/// `upstream` (the primary) through the link, each direction delayed as
/// the link says.
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
            let up = std::thread::spawn(move || pipe(client, server, link, Direction::Up));
            pipe(s2, c2, l2, Direction::Down);
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
/// busy machine weighs on both alike). On a busy machine the two medians
/// can cross, which would call a relay through two more sockets free; the
/// fastest ping of each, which the load touches least, bounds it from
/// below.
pub fn floor() -> Result<u64, InstanceError> {
    let io = |e: std::io::Error| InstanceError::Failed(format!("measuring the proxy's floor: {e}"));
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
    let typical = med(&through).saturating_sub(med(&direct));
    let least = through[0].saturating_sub(direct[0]);
    Ok(typical.max(least).as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_never_free_even_on_a_busy_machine() {
        // Two spinning threads keep both cores busy while it is measured:
        // the medians may cross, the relay still costs something.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let floors: Vec<u64> = (0..3).map(|_| floor().unwrap()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spin.into_iter().for_each(|t| t.join().unwrap());
        assert!(floors.iter().all(|&f| f >= 1), "{floors:?}");
    }

    #[test]
    fn a_link_reads_its_parts_and_names_a_bad_one() {
        let l = Link::parse("rtt=1ms,bw=1gbit,jitter=0.1ms").unwrap();
        assert_eq!(l, Link { rtt_us: 1000, bw_bps: Some(1_000_000_000), jitter_us: 100, ..Link::default() });
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
    fn each_direction_takes_its_own_delay_and_cap() {
        let l = Link::parse("up=0.2ms,down=0.8ms,bw=1gbit,down_bw=100mbit").unwrap();
        assert_eq!(
            l,
            Link {
                rtt_us: 1000,
                up_us: Some(200),
                bw_bps: Some(1_000_000_000),
                down_bw_bps: Some(100_000_000),
                ..Link::default()
            }
        );
        assert_eq!(Link::parse(&l.to_arg()).unwrap(), l);
        assert_eq!(l.one_way(Direction::Up), (Duration::from_micros(200), Some(1_000_000_000)));
        assert_eq!(l.one_way(Direction::Down), (Duration::from_micros(800), Some(100_000_000)));
        // rtt is half each way; one direction alone leaves the other at 0.
        let r = Link::parse("rtt=1ms,up_bw=10mbit").unwrap();
        assert_eq!(r.one_way(Direction::Up), (Duration::from_micros(500), Some(10_000_000)));
        assert_eq!(r.one_way(Direction::Down), (Duration::from_micros(500), None));
        let d = Link::parse("down=2ms").unwrap();
        assert_eq!((d.rtt_us, d.to_arg()), (2000, "up=0ms,down=2ms".to_string()));
        let e = Link::parse("rtt=1ms,up=0.5ms").unwrap_err().to_string();
        assert!(e.contains("not both"), "{e}");
        // A registry written before directions existed reads as before.
        let old: Link = serde_json::from_str(r#"{"rtt_us":1000,"bw_bps":null,"jitter_us":0}"#).unwrap();
        assert_eq!(old.one_way(Direction::Down), (Duration::from_micros(500), None));
    }

    #[test]
    fn a_byte_through_the_proxy_takes_each_direction_its_own_delay() {
        // The far end is ours, so each direction is timed on its own.
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let link = Link::parse("up=2ms,down=12ms").unwrap();
        let port = spawn_local(upstream.local_addr().unwrap(), link).unwrap();
        let mut standby = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut primary, _) = upstream.accept().unwrap();
        for s in [&standby, &primary] {
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        }
        let (mut up, mut down) = (Vec::new(), Vec::new());
        let mut b = [0u8; 1];
        for _ in 0..9 {
            let t = Instant::now();
            standby.write_all(b"u").unwrap();
            primary.read_exact(&mut b).unwrap();
            up.push(t.elapsed());
            let t = Instant::now();
            primary.write_all(b"d").unwrap();
            standby.read_exact(&mut b).unwrap();
            down.push(t.elapsed());
        }
        up.sort();
        down.sort();
        assert!(up[0] >= Duration::from_millis(2), "fastest up {:?}", up[0]);
        assert!(down[0] >= Duration::from_millis(12), "fastest down {:?}", down[0]);
        // Medians: a stalled thread on a busy machine moves one sample, not five.
        assert!(up[4] < down[4], "up {up:?}, down {down:?}");
    }

    #[test]
    fn the_schedule_serialises_at_the_cap_then_delays_and_never_reorders() {
        let link = Link { rtt_us: 2000, bw_bps: Some(8_000_000), jitter_us: 500, ..Link::default() };
        let mut s = Schedule::new(&link, Direction::Down);
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
