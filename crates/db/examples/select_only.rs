//! pgbench's select-only script (`-S`) through storbench's own client: N
//! threads, each with one connection, each running `SELECT abalance FROM
//! pgbench_accounts WHERE aid = $1` (prepared) on uniformly random accounts
//! for a fixed time, printing the transactions per second. It exists so
//! that `bench/pg-tls.sh` can set a round-trip-bound load beside
//! `pgbench -S` where a round trip is most of the cost (what TLS changes).
//! Not a workload: no ramp-up, no histogram, no record.
//!
//!   cargo run --release -p storbench-db --example select_only -- URL CLIENTS SECONDS

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storbench_db::{connect, DbUrl, Stmt, Value};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, clients, seconds] = args.as_slice() else {
        eprintln!("usage: select_only URL CLIENTS SECONDS");
        std::process::exit(2);
    };
    let url = DbUrl::parse(url).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let clients: usize = clients.parse().expect("CLIENTS is a number");
    let seconds: u64 = seconds.parse().expect("SECONDS is a number");
    let mut first = connect(&url).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let accounts = first
        .query_one(&Stmt::new("SELECT count(*) FROM pgbench_accounts"), &[])
        .and_then(|r| r.int(0))
        .expect("pgbench_accounts (run storbench tpcb init or pgbench -i first)");
    drop(first);
    let stmt = Stmt::new("SELECT abalance FROM pgbench_accounts WHERE aid = $1");
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(std::sync::Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (url, stmt, stop, done, ready) =
                (url.clone(), stmt.clone(), stop.clone(), done.clone(), ready.clone());
            std::thread::spawn(move || {
                let mut c = connect(&url).expect("connect");
                // xorshift: cheap, and each thread its own sequence.
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
                let mut n = 0u64;
                ready.wait();
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let aid = (x % accounts as u64) as i64 + 1;
                    c.query(&stmt, &[Value::Int(aid)]).expect("select");
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    ready.wait();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("client thread");
    }
    let elapsed = t0.elapsed().as_secs_f64();
    println!("tps {:.1}", done.load(Ordering::Relaxed) as f64 / elapsed);
}
