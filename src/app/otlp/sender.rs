//! The thread that sends OTLP exports, so that a receiver that is down,
//! slow or refusing never holds the capture up: exports wait in a bounded
//! queue (at most [`QUEUED`] exports and [`QUEUED_BYTES`]; past that the
//! oldest is dropped), a failure that may pass (the receiver unreachable,
//! `UNAVAILABLE`, HTTP 429/502/503/504) is tried again with backoff, one
//! that will not (a refusal) drops its export; every export is counted
//! sent, dropped or refused, and the end says so in one line. Two
//! transports: gRPC (tonic, on a single-threaded tokio runtime) and
//! HTTP/protobuf (ureq).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use prost::Message;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::{Protocol, Target};
use crate::app::summary::say;

/// Exports waiting to be sent, at most.
pub const QUEUED: usize = 8;
/// Their encoded bytes, at most (the newest is kept even past it).
pub const QUEUED_BYTES: usize = 64 << 20;
/// One export's wait for the receiver, at most.
const EXPORT: Duration = Duration::from_secs(10);
const CONNECT: Duration = Duration::from_secs(5);
/// Waits between tries of a failing receiver: doubled from the first to
/// the last, reset by a success.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_LAST: Duration = Duration::from_secs(5);

/// What became of the exports handed over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub made: u64,
    pub sent: u64,
    /// Profiles in the exports sent.
    pub profiles: u64,
    /// Dropped from a full queue (the receiver unreachable or slower than
    /// the capture).
    pub overflowed: u64,
    /// Refused by the receiver (or partly: its rejected profiles).
    pub refused: u64,
    /// Still waiting when the capture ended and the last tries ran out.
    pub unsent: u64,
    /// Failed tries.
    pub failures: u64,
    pub last_error: Option<String>,
}

impl Tally {
    pub fn dropped(&self) -> u64 {
        self.overflowed + self.refused + self.unsent
    }
}

struct Queue {
    items: VecDeque<(ExportProfilesServiceRequest, usize)>,
    bytes: usize,
    /// Set at the end: tries stop then.
    deadline: Option<Instant>,
    tally: Tally,
    /// Whether the one warning was said (or is not to be).
    warned: bool,
}

impl Queue {
    /// Queues an export, dropping the oldest past the bounds; whether any
    /// was dropped.
    fn push(&mut self, request: ExportProfilesServiceRequest, bytes: usize) -> bool {
        self.items.push_back((request, bytes));
        self.bytes += bytes;
        let mut dropped = false;
        while self.items.len() > QUEUED || (self.bytes > QUEUED_BYTES && self.items.len() > 1) {
            if let Some((_, b)) = self.items.pop_front() {
                self.bytes -= b;
                self.tally.overflowed += 1;
                dropped = true;
            }
        }
        dropped
    }
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

/// A running sender.
pub struct Sender {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
    url: String,
}

impl Sender {
    /// Starts the thread. `warn`: say once, at the first failure, that the
    /// receiver fails and what is kept meanwhile (a stream; a single export
    /// says it at the end).
    pub fn start(target: &Target, warn: bool) -> Sender {
        let shared: Shared = Arc::new((
            Mutex::new(Queue { items: VecDeque::new(), bytes: 0, deadline: None, tally: Tally::default(), warned: !warn }),
            Condvar::new(),
        ));
        let (t, s) = (target.clone(), shared.clone());
        let thread = std::thread::Builder::new().name("fgbpf-otlp".into()).spawn(move || run(&t, &s)).ok();
        if thread.is_none() {
            let mut q = lock(&shared);
            q.tally.last_error = Some("could not start the sending thread".into());
            q.deadline = Some(Instant::now());
        }
        Sender { shared, thread, url: target.url.clone() }
    }

    /// Hands an export over; the oldest waiting go past the queue's bounds.
    pub fn push(&self, request: ExportProfilesServiceRequest) {
        let bytes = request.encoded_len();
        let mut q = lock(&self.shared);
        q.tally.made += 1;
        if self.thread.is_none() {
            q.tally.unsent += 1;
            return;
        }
        if q.push(request, bytes) && !std::mem::replace(&mut q.warned, true) {
            say(format_args!(
                "OTLP: {} takes exports more slowly than the capture makes them: the oldest waiting is dropped, at most {QUEUED} wait (what is dropped is counted at the end)",
                self.url
            ));
        }
        self.shared.1.notify_all();
    }

    /// Lets what waits be sent for up to `grace`, then stops; what it did.
    pub fn finish(mut self, grace: Duration) -> Tally {
        {
            let mut q = lock(&self.shared);
            q.deadline = Some(Instant::now() + grace);
            self.shared.1.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let q = lock(&self.shared);
        q.tally.clone()
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Queue> {
    // A panic on the sending thread leaves the tally as it was.
    shared.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// A failed try: whether trying again may help, and why.
struct Failure {
    again: bool,
    why: String,
}

fn run(target: &Target, shared: &Shared) {
    let mut transport = Transport::new(target);
    let mut backoff = BACKOFF_FIRST;
    loop {
        let (request, bytes, deadline) = {
            let mut q = lock(shared);
            loop {
                if let Some(d) = q.deadline {
                    if Instant::now() >= d || q.items.is_empty() {
                        q.tally.unsent += q.items.len() as u64;
                        q.items.clear();
                        return;
                    }
                }
                if let Some((r, b)) = q.items.pop_front() {
                    q.bytes -= b;
                    break (r, b, q.deadline);
                }
                q = shared.1.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        // At the end, a try lasts no longer than what is left of the grace.
        let timeout = deadline.map_or(EXPORT, |d| d.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(200), EXPORT));
        let profiles = request.resource_profiles.iter().flat_map(|r| &r.scope_profiles).map(|s| s.profiles.len() as u64).sum::<u64>();
        let result = transport.export(&request, timeout);
        let mut q = lock(shared);
        let failure = match result {
            Ok(0) => {
                q.tally.sent += 1;
                q.tally.profiles += profiles;
                backoff = BACKOFF_FIRST;
                continue;
            }
            Ok(rejected) => {
                Failure { again: false, why: format!("the receiver rejected {rejected} of {profiles} profiles") }
            }
            Err(f) => f,
        };
        q.tally.failures += 1;
        q.tally.last_error = Some(failure.why.clone());
        if !std::mem::replace(&mut q.warned, true) {
            say(format_args!(
                "OTLP: {} failed ({}); {}",
                target.url,
                failure.why,
                match failure.again {
                    true => format!("trying again with backoff, the newest {QUEUED} intervals kept meanwhile (what is dropped is counted at the end)"),
                    false => "that interval is dropped; the others are still sent (what is dropped is counted at the end)".to_string(),
                }
            ));
        }
        if !failure.again {
            q.tally.refused += 1;
            continue;
        }
        // The export waits at the head for the next try, unless newer ones
        // filled the queue meanwhile.
        if q.items.len() < QUEUED {
            q.items.push_front((request, bytes));
            q.bytes += bytes;
        } else {
            q.tally.overflowed += 1;
        }
        transport.reset();
        let wait = backoff;
        backoff = (backoff * 2).min(BACKOFF_LAST);
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if q.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let left = until.saturating_duration_since(Instant::now());
            q = shared.1.wait_timeout(q, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// How exports travel.
enum Transport {
    Grpc { runtime: Option<tokio::runtime::Runtime>, client: Option<ProfilesServiceClient<Channel>>, target: Box<Target> },
    Http { agent: ureq::Agent, url: String, headers: Vec<(String, String)> },
}

impl Transport {
    fn new(target: &Target) -> Transport {
        match target.protocol {
            Protocol::Grpc => Transport::Grpc {
                runtime: tokio::runtime::Builder::new_current_thread().enable_all().build().ok(),
                client: None,
                target: Box::new(target.clone()),
            },
            Protocol::Http => {
                let agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_connect(Some(CONNECT))
                    .tls_config(crate::net::tls_config(target.tls))
                    .build()
                    .new_agent();
                let base = target.url.trim_end_matches('/');
                let url = format!("{base}/v1development/profiles");
                let headers = target.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                Transport::Http { agent, url, headers }
            }
        }
    }

    /// Forgets the connection after a failure: the next try makes a new one.
    fn reset(&mut self) {
        if let Transport::Grpc { client, .. } = self {
            *client = None;
        }
    }

    /// Sends one export; the number of profiles the receiver rejected.
    fn export(&mut self, request: &ExportProfilesServiceRequest, timeout: Duration) -> Result<i64, Failure> {
        match self {
            Transport::Grpc { runtime, client, target } => {
                let Some(runtime) = runtime.as_ref() else {
                    return Err(Failure { again: false, why: "no runtime to send with".into() });
                };
                runtime.block_on(grpc_export(client, target, request.clone(), timeout))
            }
            Transport::Http { agent, url, headers } => http_export(agent, url, headers, request, timeout),
        }
    }
}

async fn grpc_export(
    client: &mut Option<ProfilesServiceClient<Channel>>,
    target: &Target,
    request: ExportProfilesServiceRequest,
    timeout: Duration,
) -> Result<i64, Failure> {
    if client.is_none() {
        let mut endpoint = Endpoint::from_shared(target.url.clone())
            .map_err(|e| Failure { again: false, why: e.to_string() })?
            .connect_timeout(CONNECT);
        if target.tls {
            endpoint = endpoint
                .tls_config(ClientTlsConfig::new().with_native_roots())
                .map_err(|e| Failure { again: false, why: e.to_string() })?;
        }
        let channel = endpoint.connect().await.map_err(|e| Failure { again: true, why: format!("connecting: {e}") })?;
        *client = Some(ProfilesServiceClient::new(channel));
    }
    let Some(c) = client.as_mut() else { unreachable!("made above") };
    let mut req = tonic::Request::new(request);
    req.set_timeout(timeout);
    for (k, v) in &target.headers {
        if let (Ok(k), Ok(v)) = (k.parse::<tonic::metadata::MetadataKey<_>>(), v.parse()) {
            req.metadata_mut().insert(k, v);
        }
    }
    match c.export(req).await {
        Ok(answer) => Ok(rejected(&answer.into_inner())),
        Err(s) => {
            use tonic::Code::*;
            // OTLP's retryable codes; and the connection failing under an
            // export (tonic's Unknown carrying the transport's error, where
            // a receiver's own Unknown has none).
            let lost = s.code() == Unknown && std::error::Error::source(&s).is_some();
            let again = lost
                || matches!(s.code(), Cancelled | DeadlineExceeded | Aborted | OutOfRange | Unavailable | DataLoss | ResourceExhausted);
            Err(Failure { again, why: format!("{}: {}", s.code(), s.message()) })
        }
    }
}

fn rejected(answer: &ExportProfilesServiceResponse) -> i64 {
    answer.partial_success.as_ref().map_or(0, |p| p.rejected_profiles.max(0))
}

fn http_export(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    request: &ExportProfilesServiceRequest,
    timeout: Duration,
) -> Result<i64, Failure> {
    let body = request.encode_to_vec();
    let mut post = agent.post(url).config().timeout_global(Some(timeout)).build().header("Content-Type", "application/x-protobuf");
    for (k, v) in headers {
        post = post.header(k.as_str(), v.as_str());
    }
    let mut answer = post.send(&body[..]).map_err(|e| Failure { again: true, why: e.to_string() })?;
    let status = answer.status().as_u16();
    // A refusal's body is a google.rpc.Status; its size is bounded here.
    let bytes = answer.body_mut().with_config().limit(1 << 20).read_to_vec().unwrap_or_default();
    match status {
        200..=299 => Ok(ExportProfilesServiceResponse::decode(&bytes[..]).map_or(0, |a| rejected(&a))),
        429 | 502 | 503 | 504 => Err(Failure { again: true, why: format!("HTTP {status}") }),
        _ => Err(Failure { again: false, why: format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).trim()) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_keeps_the_newest_and_counts_what_it_drops() {
        let mut q = Queue { items: VecDeque::new(), bytes: 0, deadline: None, tally: Tally::default(), warned: false };
        let dropped: Vec<bool> = (0..20).map(|_| q.push(ExportProfilesServiceRequest::default(), 10)).collect();
        assert_eq!(q.items.len(), QUEUED);
        assert_eq!(q.bytes, 10 * QUEUED);
        assert_eq!(q.tally.overflowed, 20 - QUEUED as u64);
        assert_eq!(dropped.iter().position(|&d| d), Some(QUEUED));
        // Bytes bound it too, keeping the newest whatever its size.
        q.push(ExportProfilesServiceRequest::default(), QUEUED_BYTES + 1);
        assert_eq!((q.items.len(), q.bytes), (1, QUEUED_BYTES + 1));
        q.tally.made = 30;
        q.tally.sent = 3;
        assert_eq!(q.tally.dropped(), 20 - QUEUED as u64 + QUEUED as u64);
    }
}
