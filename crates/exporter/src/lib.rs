//! Live metrics for Prometheus (`--metrics-addr 127.0.0.1:9184`): the last
//! second's TPM/NOPM/TPS/IOPS, latency as a histogram and the monitor's
//! CPU/device figures, labelled by run, step and shard, served in the text
//! exposition format (OpenMetrics, which Prometheus scrapes) by the official
//! `prometheus-client` crate.
//!
//! Latency is a classic Prometheus histogram, `storbench_latency_seconds`
//! (`_bucket{le=…}`, `_sum`, `_count`, counters over the step), on the fixed
//! bounds [`LIVE_BOUNDS_S`], not quantile gauges: quantiles cannot be
//! averaged or summed across shards or over time, buckets can
//! (`histogram_quantile(0.99, sum by (le) (rate(storbench_latency_seconds_bucket[1m])))`).
//!
//! The HTTP side is hyper's HTTP/1 server on a one-thread tokio runtime of
//! its own, never a hand-written loop: a peer is hostile until proven
//! otherwise (issue 24: a 512 MiB request line grew the process by 500 MB, a
//! client sending a byte a second blocked every scrape, 130 idle connections
//! filled the queue). The bounds, each enforced by hyper or tokio:
//! - a request's head is at most [`MAX_HEAD`] bytes (hyper's read buffer
//!   limit; past it the connection is answered 431 and closed), so memory
//!   per connection is bounded;
//! - the head must arrive within [`HEAD_TIMEOUT`] (hyper's header read
//!   timeout), and a whole connection lives at most [`CONN_TIMEOUT`], so a
//!   slow client only holds its own task;
//! - connections are served concurrently, at most [`MAX_CONNECTIONS`] at
//!   once (a connection past it is closed at once), so idle peers cannot
//!   queue a scrape behind them and cannot exhaust file descriptors;
//! - one request per connection (no keep-alive): a scraper sends one GET.
//!
//! Whoever sees the per-second ticks calls [`Exporter::update`]; the values
//! stay until the next update, and a step change ([`Exporter::step`]) drops
//! the previous step's series so a dashboard never shows a stale step.
//!
//! A single run serves it as well as a shard, so it is a crate of its own
//! (on `metrics` only), not part of `cluster`. It never prints.

#![deny(missing_docs)]

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{oneshot, Semaphore};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use storbench_metrics::{LiveLatency, LIVE_BOUNDS_S};

/// The largest request head (request line and headers) read, in bytes:
/// hyper's read buffer limit (its floor is 8 KiB). A scraper's GET is a few
/// hundred bytes.
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may live, answer included.
pub const CONN_TIMEOUT: Duration = Duration::from_secs(15);
/// Connections served at once; one past it is closed on accept. Well under
/// the default 1024 open files, well over what a few scrapers need.
pub const MAX_CONNECTIONS: usize = 256;

/// Errors from the exporter.
#[derive(Debug, thiserror::Error)]
pub enum ExporterError {
    /// The address could not be parsed or bound.
    #[error("--metrics-addr '{addr}': {source} (use HOST:PORT, e.g. 127.0.0.1:9184)")]
    Bind {
        /// The address given.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The identity every series carries.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    run: String,
    step: String,
    shard: String,
}

/// A series with one more label: the figure's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Named {
    run: String,
    step: String,
    shard: String,
    name: String,
}

type G = Gauge<f64, AtomicU64>;

/// One tick's values: what the live line shows, as numbers. A `None` is
/// not exported (an I/O run has no TPM).
#[derive(Clone, Debug, Default)]
pub struct LiveValues {
    /// Transactions per minute.
    pub tpm: Option<f64>,
    /// New orders per minute.
    pub nopm: Option<f64>,
    /// Transactions per second.
    pub tps: Option<f64>,
    /// I/O operations per second.
    pub iops: Option<f64>,
    /// MB/s.
    pub mbps: Option<f64>,
    /// The last interval's latencies (added to the step's histogram): of
    /// every I/O (io) or every transaction (tpcc, tpcb).
    pub latency: Option<LiveLatency>,
    /// The monitor's figures: (name, value), e.g. ("cpu.iowait", 3.5), ("dev.nvme0n1.util", 71.0).
    pub system: Vec<(String, f64)>,
}

struct Gauges {
    tpm: Family<Labels, G>,
    nopm: Family<Labels, G>,
    tps: Family<Labels, G>,
    iops: Family<Labels, G>,
    mbps: Family<Labels, G>,
    latency: Family<Labels, Buckets>,
    system: Family<Named, G>,
}

struct Shared {
    registry: Registry,
    gauges: Gauges,
    labels: Mutex<Labels>,
}

/// A running exporter; stops serving when dropped.
pub struct Exporter {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Binds `addr` (port 0 picks a free one; see [`Exporter::addr`]) and
    /// serves `/metrics` from a thread, for run `run` (its short uuid) as
    /// shard `shard` (`0/1` when not sharded).
    pub fn start(addr: &str, run: &str, shard: &str) -> Result<Exporter, ExporterError> {
        let bind_err = |source| ExporterError::Bind { addr: addr.to_string(), source };
        let listener = TcpListener::bind(addr).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        let mut registry = Registry::with_prefix("storbench");
        let gauges = Gauges {
            tpm: Family::default(),
            nopm: Family::default(),
            tps: Family::default(),
            iops: Family::default(),
            mbps: Family::default(),
            latency: Family::default(),
            system: Family::default(),
        };
        registry.register("tpm", "Transactions per minute, last second", gauges.tpm.clone());
        registry.register("nopm", "New orders per minute, last second", gauges.nopm.clone());
        registry.register("tps", "Transactions per second, last second", gauges.tps.clone());
        registry.register("iops", "I/O operations per second, last second", gauges.iops.clone());
        registry.register("mbps", "I/O megabytes per second, last second", gauges.mbps.clone());
        registry.register(
            "latency_seconds",
            "Latency of each I/O (io) or transaction (tpcc, tpcb) in the step, seconds",
            gauges.latency.clone(),
        );
        registry.register(
            "system",
            "The monitor's CPU and device figures (label name = figure, e.g. cpu.iowait)",
            gauges.system.clone(),
        );
        let shared = Arc::new(Shared {
            registry,
            gauges,
            labels: Mutex::new(Labels { run: run.into(), step: String::new(), shard: shard.into() }),
        });
        listener.set_nonblocking(true).map_err(bind_err)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(bind_err)?;
        let (stop, stopped) = oneshot::channel();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("metrics-http".into())
                .spawn(move || runtime.block_on(serve(listener, shared, stopped)))
                .map_err(bind_err)?
        };
        Ok(Exporter { shared, addr: local, stop: Some(stop), thread: Some(thread) })
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Names the run (its short uuid) once it is recorded: the exporter is
    /// bound first, so a bad address leaves no run behind.
    pub fn run(&self, run: &str) {
        self.shared.labels.lock().expect("labels").run = run.to_string();
    }

    /// A new step begins: later values carry its label; the previous step's
    /// series are dropped.
    pub fn step(&self, step: &str) {
        let g = &self.shared.gauges;
        for f in [&g.tpm, &g.nopm, &g.tps, &g.iops, &g.mbps] {
            f.clear();
        }
        g.latency.clear();
        g.system.clear();
        self.shared.labels.lock().expect("labels").step = step.to_string();
    }

    /// Sets the current values (called once per tick).
    pub fn update(&self, v: &LiveValues) {
        let l = self.shared.labels.lock().expect("labels").clone();
        let g = &self.shared.gauges;
        for (family, value) in
            [(&g.tpm, v.tpm), (&g.nopm, v.nopm), (&g.tps, v.tps), (&g.iops, v.iops), (&g.mbps, v.mbps)]
        {
            if let Some(x) = value {
                family.get_or_create(&l).set(x);
            }
        }
        let named = |name: &str| Named {
            run: l.run.clone(),
            step: l.step.clone(),
            shard: l.shard.clone(),
            name: name.into(),
        };
        if let Some(lat) = &v.latency {
            g.latency.get_or_create(&l).add(lat);
        }
        for (n, x) in &v.system {
            g.system.get_or_create(&named(n)).set(*x);
        }
    }

    /// The exposition text as a scrape gets it.
    pub fn render(&self) -> String {
        render(&self.shared)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn render(shared: &Shared) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &shared.registry);
    out
}

/// A histogram fed whole intervals' bucket counts (prometheus-client's own
/// `Histogram` takes one value at a time); encoded as a classic histogram.
#[derive(Clone, Debug, Default)]
struct Buckets(Arc<Mutex<LiveLatency>>);

impl Buckets {
    fn add(&self, l: &LiveLatency) {
        let mut g = self.0.lock().expect("buckets");
        for (a, b) in g.counts.iter_mut().zip(&l.counts) {
            *a += b;
        }
        g.sum_s += l.sum_s;
    }
}

impl TypedMetric for Buckets {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let g = self.0.lock().expect("buckets");
        let bounds = LIVE_BOUNDS_S.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(g.counts.iter().copied()).collect();
        encoder.encode_histogram::<NoLabelSet>(g.sum_s, g.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// Accepts until `stopped` fires; each connection is a task of its own
/// under the bounds in the module's header. Leaving drops the runtime's
/// tasks, so no connection outlives the exporter.
async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stopped: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let conn = tokio::select! {
            _ = &mut stopped => return,
            conn = listener.accept() => conn,
        };
        let stream = match conn {
            Ok((stream, _)) => stream,
            // Out of file descriptors or the like: let some close first
            // rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Full: closing this one keeps the ones being served going.
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(&req, &shared)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONN_TIMEOUT, conn).await;
            drop(slot);
        });
    }
}

fn answer(req: &Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let (status, ctype, body) = if req.method() == Method::GET && (path == "/metrics" || path == "/") {
        (StatusCode::OK, "application/openmetrics-text; version=1.0.0; charset=utf-8", render(shared))
    } else {
        (StatusCode::NOT_FOUND, "text/plain", "storbench serves GET /metrics\n".to_string())
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(ctype));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn scrape(addr: SocketAddr, path: &str) -> (String, String) {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        (head.to_string(), body.to_string())
    }

    /// The samples of a scrape: (metric name, labels text, value).
    fn parse(body: &str) -> Vec<(String, String, f64)> {
        assert!(body.ends_with("# EOF\n"), "OpenMetrics ends with # EOF: {body}");
        body.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                let (name, labels) = series.split_once('{').unwrap();
                (name.to_string(), labels.trim_end_matches('}').to_string(), value.parse().unwrap())
            })
            .collect()
    }

    /// An interval's latencies: (a latency in seconds, how many), and their sum.
    fn lat(values: &[(f64, u64)], sum_s: f64) -> LiveLatency {
        let mut l = LiveLatency { sum_s, ..LiveLatency::default() };
        for (v, n) in values {
            l.counts[storbench_metrics::live_bucket((v * 1e9) as u64)] += n;
        }
        l
    }

    #[test]
    fn scrape_returns_what_was_fed_labelled() {
        let e = Exporter::start("127.0.0.1:0", "ab12cd34", "1/3").unwrap();
        e.step("users=8");
        e.update(&LiveValues {
            tpm: Some(1200.0),
            nopm: Some(540.5),
            tps: Some(20.0),
            latency: Some(lat(&[(0.0005, 3), (2.0, 1)], 0.0042)),
            system: vec![("cpu.iowait".into(), 3.5)],
            ..Default::default()
        });
        // A second interval adds to the step's histogram.
        e.update(&LiveValues { latency: Some(lat(&[(0.0005, 2), (60.0, 1)], 60.001)), ..Default::default() });
        let (head, body) = scrape(e.addr(), "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let s = parse(&body);
        let labels = r#"run="ab12cd34",step="users=8",shard="1/3""#;
        let get = |n: &str, extra: &str| {
            let want =
                if extra.is_empty() { labels.to_string() } else { format!("{labels},name=\"{extra}\"") };
            s.iter().find(|(name, l, _)| name == n && *l == want).map(|x| x.2)
        };
        assert_eq!(get("storbench_tpm", ""), Some(1200.0));
        assert_eq!(get("storbench_nopm", ""), Some(540.5));
        assert_eq!(get("storbench_tps", ""), Some(20.0));
        // The histogram: cumulative buckets at every bound, +Inf, sum, count.
        let le = |b: &str| {
            let want = format!("le=\"{b}\",{labels}");
            s.iter()
                .find(|(name, l, _)| name == "storbench_latency_seconds_bucket" && *l == want)
                .map(|x| x.2)
        };
        assert_eq!(le("0.00025"), Some(0.0));
        assert_eq!(le("0.0005"), Some(5.0));
        assert_eq!(le("1.0"), Some(5.0));
        assert_eq!(le("2.5"), Some(6.0));
        assert_eq!(le("+Inf"), Some(7.0));
        let buckets = s.iter().filter(|x| x.0 == "storbench_latency_seconds_bucket").count();
        assert_eq!(buckets, LIVE_BOUNDS_S.len() + 1);
        assert_eq!(get("storbench_latency_seconds_count", ""), Some(7.0));
        assert!((get("storbench_latency_seconds_sum", "").unwrap() - 60.0052).abs() < 1e-9);
        assert!(body.contains("# TYPE storbench_latency_seconds histogram"), "{body}");
        assert_eq!(get("storbench_system", "cpu.iowait"), Some(3.5));
        assert_eq!(get("storbench_iops", ""), None, "not fed, not exported");

        // A new step drops the old step's series.
        e.step("users=16");
        e.update(&LiveValues { tpm: Some(2000.0), ..Default::default() });
        let s = parse(&scrape(e.addr(), "/metrics").1);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].1, r#"run="ab12cd34",step="users=16",shard="1/3""#);

        assert!(scrape(e.addr(), "/other").0.starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn a_taken_port_is_named() {
        let e = Exporter::start("127.0.0.1:0", "r", "0/1").unwrap();
        let addr = e.addr().to_string();
        let err = Exporter::start(&addr, "r", "0/1").err().unwrap().to_string();
        assert!(err.starts_with(&format!("--metrics-addr '{addr}'")), "{err}");
        let err = Exporter::start("nonsense", "r", "0/1").err().unwrap().to_string();
        assert!(err.contains("'nonsense'"), "{err}");
    }
}
