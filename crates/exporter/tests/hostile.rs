//! The metrics endpoint under hostile clients on 127.0.0.1 (issue 24): a
//! huge request head is refused with memory bounded, a client trickling a
//! byte at a time neither blocks a concurrent scrape nor lives past the head
//! timeout, and a crowd of idle connections does not queue a scrape. Every
//! loop here is bounded in bytes or time; nothing leaves loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use storbench_exporter::{Exporter, LiveValues, HEAD_TIMEOUT, MAX_HEAD};

fn exporter() -> Exporter {
    let e = Exporter::start("127.0.0.1:0", "ab12cd34", "0/1").unwrap();
    e.step("users=1");
    e.update(&LiveValues { tps: Some(42.0), ..Default::default() });
    e
}

/// One scrape that must finish within `limit`; its status line and body.
fn scrape(addr: SocketAddr, limit: Duration) -> (String, String) {
    let t = Instant::now();
    let mut c = TcpStream::connect_timeout(&addr, limit).expect("connect");
    c.set_read_timeout(Some(limit)).unwrap();
    c.set_write_timeout(Some(limit)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).expect("scrape answered in time");
    assert!(t.elapsed() < limit, "scrape took {:?}", t.elapsed());
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_huge_request_line_is_refused_and_memory_stays_bounded() {
    let e = exporter();
    let before = rss_kib();
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    // A request line with no newline; the old loop buffered all of it.
    c.write_all(b"GET /").unwrap();
    let chunk = vec![b'A'; 64 * 1024];
    let cap: usize = 256 << 20;
    let mut sent = 0usize;
    while sent < cap {
        match c.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    // The server stopped reading after its limit: what got through is the
    // limit plus the kernel's socket buffers, never the 256 MiB offered.
    assert!(sent < 32 << 20, "the server kept reading: {sent} bytes accepted (limit {MAX_HEAD})");
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 32 * 1024, "memory grew by {grown} KiB");
    // And the endpoint still serves.
    let (status, body) = scrape(e.addr(), Duration::from_secs(2));
    assert!(status.contains(" 200"), "{status}");
    assert!(body.contains("storbench_tps"), "{body}");
}

#[test]
fn a_huge_header_gets_431() {
    let e = exporter();
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let big = "b".repeat(MAX_HEAD * 2);
    // Small enough to sit in the socket buffers, so the answer is read
    // before any reset.
    let _ = write!(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
}

#[test]
fn a_slowloris_client_blocks_no_scrape_and_is_dropped() {
    let e = exporter();
    let addr = e.addr();
    let slow = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
        let t = Instant::now();
        // One byte every 200 ms until the server hangs up, at most 15 s.
        while t.elapsed() < Duration::from_secs(15) {
            if c.write_all(b"a").is_err() {
                break;
            }
            // A closed peer shows as EOF on a read (the write may still
            // land in the buffer once).
            c.set_nonblocking(true).unwrap();
            let mut b = [0u8; 256];
            match c.read(&mut b) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            c.set_nonblocking(false).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
        t.elapsed()
    });
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let (status, _) = scrape(addr, Duration::from_secs(2));
        assert!(status.contains(" 200"), "{status}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let lived = slow.join().unwrap();
    assert!(
        lived < HEAD_TIMEOUT + Duration::from_secs(3),
        "a client trickling its head was served {lived:?} (head timeout {HEAD_TIMEOUT:?})"
    );
}

#[test]
fn two_hundred_idle_connections_do_not_queue_a_scrape() {
    let e = exporter();
    let idle: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(e.addr()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        let (status, body) = scrape(e.addr(), Duration::from_secs(2));
        assert!(status.contains(" 200"), "{status}");
        assert!(body.contains("storbench_tps"), "{body}");
    }
    drop(idle);
}
