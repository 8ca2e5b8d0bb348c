//! `--otlp ENDPOINT`: a capture's views sent to an OTLP profiles receiver
//! (an OpenTelemetry Collector), over gRPC or HTTP/protobuf: once when
//! they are written, as one export ([`crate::format::otlp`] builds it), or
//! streamed an interval at a time with `--otlp-interval` ([`stream`]).
//! TLS unless `--otlp-insecure`, with the system's CA certificates;
//! headers from `--otlp-header`; sending is [`sender`]'s thread, with
//! backoff and a bounded queue. The files on disk are the capture's
//! whatever the receiver does; one line at the end says what it got.

use std::time::Duration;

use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::Endpoint;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;

use crate::cli::OtlpArgs;
use crate::procs::cgroup;
use crate::format::otlp::{self, Origin};

use super::CliError;
use sender::{Sender, Tally};

pub mod sender;
pub mod stream;

/// How long the end waits for what is still to be sent (a receiver that
/// is not there is tried about four times in it).
const GRACE: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    Http,
}

/// Where to send, checked before the capture starts.
#[derive(Clone, Debug)]
pub struct Target {
    url: String,
    tls: bool,
    protocol: Protocol,
    headers: Vec<(String, String)>,
    service: Option<String>,
    /// This host's name, read once.
    host: String,
    /// `--otlp-interval`: streamed.
    pub interval: Option<Duration>,
}

/// The target `--otlp` names; `None` without it.
pub fn target(args: &OtlpArgs) -> Result<Option<Target>, CliError> {
    let Some(endpoint) = args.otlp.as_deref() else { return Ok(None) };
    let (url, tls) = match (endpoint.split_once("://"), args.otlp_insecure) {
        (None, false) => (format!("https://{endpoint}"), true),
        (None, true) => (format!("http://{endpoint}"), false),
        (Some(("https", _)), false) => (endpoint.to_string(), true),
        (Some(("http", _)), true) => (endpoint.to_string(), false),
        (Some(("http", _)), false) => {
            return Err(CliError::usage(format!(
                "--otlp {endpoint} is plain text: add --otlp-insecure to send without TLS, or give https://"
            )))
        }
        (Some(("https", _)), true) => {
            return Err(CliError::usage(format!("--otlp {endpoint} asks for TLS and --otlp-insecure for none: choose one")))
        }
        (Some((scheme, _)), _) => {
            return Err(CliError::usage(format!("--otlp: unknown scheme {scheme}://; give HOST:PORT, https:// or http://")))
        }
    };
    Endpoint::from_shared(url.clone()).map_err(|e| CliError::usage(format!("--otlp {endpoint}: {e}")))?;
    let mut headers = Vec::new();
    for h in &args.otlp_headers {
        let bad = || CliError::usage(format!("--otlp-header {h:?}: give KEY=VALUE, the key lowercase ASCII"));
        let (k, v) = h.split_once('=').ok_or_else(bad)?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
        // What gRPC metadata takes, HTTP headers take too.
        MetadataKey::<tonic::metadata::Ascii>::from_bytes(k.as_bytes()).map_err(|_| bad())?;
        MetadataValue::<tonic::metadata::Ascii>::try_from(v.as_str()).map_err(|_| bad())?;
        headers.push((k, v));
    }
    let protocol = match args.otlp_protocol.as_str() {
        "http/protobuf" => Protocol::Http,
        _ => Protocol::Grpc,
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    Ok(Some(Target { url, tls, protocol, headers, service: args.service.clone(), host, interval: args.otlp_interval }))
}

impl Target {
    /// The export of `request`: who sends (this host, the service when one
    /// was given) and, for each process still running, what its cgroup
    /// says: its container, its Kubernetes pod, its systemd unit (the
    /// service's name when `--service` gives none).
    fn finish(&self, request: otlp::Request) -> ExportProfilesServiceRequest {
        let mut origin = Origin {
            host: self.host.clone(),
            service: self.service.clone(),
            ..Default::default()
        };
        for pid in request.pids() {
            let Some(path) = cgroup::of_process(pid) else { continue };
            let mut more = Vec::new();
            if let Some(id) = cgroup::container_id(&path) {
                more.push(("container.id", id.to_string()));
            }
            if let Some(uid) = cgroup::pod_uid(&path) {
                more.push(("k8s.pod.uid", uid));
            }
            if let Some(unit) = path.rsplit('/').next().and_then(|l| l.strip_suffix(".service")) {
                more.push(("service.name", unit.to_string()));
            }
            origin.of_process.insert(pid, more);
        }
        request.finish(&origin)
    }
}

/// Sends the views of `export` to `target` and says how it went: one
/// line either way.
pub fn send(target: &Target, export: otlp::Request) {
    let sender = Sender::start(target, false);
    sender.push(target.finish(export));
    say_tally(target, &sender.finish(GRACE));
}

/// The end's line: what the receiver got, and what it did not, with why.
fn say_tally(target: &Target, t: &Tally) {
    let url = &target.url;
    let why = t.last_error.as_deref().unwrap_or("no answer");
    if t.made == 1 && t.sent == 0 {
        super::summary::say(format_args!(
            "OTLP: not sent to {url} ({why}, {} tries); the files written hold the same profiles",
            t.failures
        ));
        return;
    }
    let mut line = format!("OTLP: sent {} of {} exports ({} profiles) to {url}", t.sent, t.made, t.profiles);
    if t.dropped() > 0 {
        let parts: Vec<String> = [
            (t.overflowed, "dropped from the full queue while the receiver was unreachable or slow"),
            (t.refused, "refused by the receiver"),
            (t.unsent, "still unsent at the end"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        line.push_str(&format!("; {} lost: {} (last error: {why})", t.dropped(), parts.join(", ")));
    }
    super::summary::say(format_args!("{line}"));
}
