//! Writers that remember what the server acknowledged (the idea of
//! diskchecker.pl): each client inserts numbered rows `(client, seq)`, one
//! commit each (autocommit), and keeps the last `seq` whose commit came
//! back, and when (CLOCK_MONOTONIC, the clock of a recording medium's
//! write journal: [`AckLog`]); afterwards every acknowledged row is looked
//! for. Used by the durability (power cut, crash points) and failover
//! (kill -9, promote) checks.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use storbench_db::{Connection, DbError, Stmt, Value};

/// The statement that (re)makes the checks' table.
pub fn create_table(table: &str) -> String {
    format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (client int NOT NULL, seq bigint NOT NULL, PRIMARY KEY (client, seq))"
    )
}

/// Clients inserting numbered rows, one thread each.
pub struct Writers {
    acked: Arc<Vec<AtomicI64>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Vec<u64>>>,
}

/// When each client's rows were acknowledged: `times[c][s - 1]` is the
/// CLOCK_MONOTONIC time (ns) at which row `seq = s` of client `c` came back
/// committed. Times rise with `seq`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AckLog {
    /// Per client, the acknowledgement time of each row in order.
    pub times: Vec<Vec<u64>>,
}

impl AckLog {
    /// Per client, the last `seq` acknowledged before `t_ns`.
    pub fn before(&self, t_ns: u64) -> Vec<i64> {
        self.times.iter().map(|t| t.partition_point(|&a| a < t_ns) as i64).collect()
    }

    /// Rows acknowledged, all clients.
    pub fn total(&self) -> i64 {
        self.times.iter().map(|t| t.len() as i64).sum()
    }
}

impl Writers {
    /// Starts one writer per connection, client ids 0, 1, ….
    pub fn start(table: &str, conns: Vec<Box<dyn Connection>>) -> Writers {
        let acked: Arc<Vec<AtomicI64>> = Arc::new(conns.iter().map(|_| AtomicI64::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = conns
            .into_iter()
            .enumerate()
            .map(|(id, mut c)| {
                let (acked, stop) = (acked.clone(), stop.clone());
                let ins = Stmt::new(format!("INSERT INTO {table} (client, seq) VALUES ($1, $2)"));
                std::thread::spawn(move || {
                    let mut times = Vec::new();
                    let mut seq = 1i64;
                    while !stop.load(Ordering::Relaxed) {
                        // An error is the server (or its storage) going
                        // away: this client stops, having counted only
                        // what the server acknowledged.
                        if c.execute(&ins, &[Value::Int(id as i64), Value::Int(seq)]).is_err() {
                            break;
                        }
                        times.push(storbench_emu::journal::monotonic_ns());
                        acked[id].store(seq, Ordering::SeqCst);
                        seq += 1;
                    }
                    times
                })
            })
            .collect();
        Writers { acked, stop, threads }
    }

    /// The last acknowledged `seq` of each client now.
    pub fn acked(&self) -> Vec<i64> {
        self.acked.iter().map(|a| a.load(Ordering::SeqCst)).collect()
    }

    /// Stops the writers and waits for them; the final counts.
    pub fn stop(self) -> Vec<i64> {
        self.stop_timed().times.iter().map(|t| t.len() as i64).collect()
    }

    /// Stops the writers and waits for them; when each row was acknowledged.
    pub fn stop_timed(self) -> AckLog {
        self.stop.store(true, Ordering::Relaxed);
        AckLog { times: self.threads.into_iter().map(|t| t.join().unwrap_or_default()).collect() }
    }
}

/// What was found of one client's acknowledged rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCount {
    /// The client id.
    pub client: u32,
    /// Rows whose commit was acknowledged.
    pub acknowledged: i64,
    /// Of those, rows found afterwards.
    pub found: i64,
}

impl ClientCount {
    /// Acknowledged rows that are missing.
    pub fn missing(&self) -> i64 {
        self.acknowledged - self.found
    }
}

/// Looks for every acknowledged row (`acked[i]` of client `i`) in `table`.
pub fn look_for(conn: &mut dyn Connection, table: &str, acked: &[i64]) -> Result<Vec<ClientCount>, DbError> {
    let count = Stmt::new(format!("SELECT count(*) FROM {table} WHERE client = $1 AND seq <= $2"));
    acked
        .iter()
        .enumerate()
        .map(|(c, &n)| {
            let found = conn.query_one(&count, &[Value::Int(c as i64), Value::Int(n)])?.int(0)?;
            Ok(ClientCount { client: c as u32, acknowledged: n, found })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledged_before_a_moment_counts_each_clients_rows_acked_earlier() {
        let log = AckLog { times: vec![vec![10, 20, 30], vec![], vec![5, 25]] };
        assert_eq!(log.before(0), vec![0, 0, 0]);
        assert_eq!(log.before(20), vec![1, 0, 1], "an ack at the moment itself does not count");
        assert_eq!(log.before(26), vec![2, 0, 2]);
        assert_eq!(log.before(u64::MAX), vec![3, 0, 2]);
        assert_eq!(log.total(), 5);
    }
}
