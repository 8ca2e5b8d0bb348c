//! `--otlp ENDPOINT`: a capture's views sent to an OTLP profiles receiver
//! (an OpenTelemetry Collector) over gRPC when they are written, as one
//! export ([`crate::format::otlp`] builds it). TLS unless
//! `--otlp-insecure`, with the system's CA certificates; headers from
//! `--otlp-header`; a few tries with backoff, then one warning: the files
//! on disk are the capture's whatever the receiver does.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::{ClientTlsConfig, Endpoint};

use crate::cli::OtlpArgs;
use crate::format::otlp::{self, Origin};

use super::CliError;

/// Tries of one export, and the waits between them.
const BACKOFF: [Duration; 3] = [Duration::from_millis(500), Duration::from_secs(1), Duration::from_secs(2)];
/// Connecting, and one export, at most.
const CONNECT: Duration = Duration::from_secs(5);
const EXPORT: Duration = Duration::from_secs(15);

/// Where to send, checked before the capture starts.
#[derive(Clone, Debug)]
pub struct Target {
    url: String,
    tls: bool,
    headers: Vec<(MetadataKey<tonic::metadata::Ascii>, MetadataValue<tonic::metadata::Ascii>)>,
    service: Option<String>,
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
        let key = MetadataKey::from_bytes(k.trim().to_ascii_lowercase().as_bytes()).map_err(|_| bad())?;
        let value = MetadataValue::try_from(v.trim()).map_err(|_| bad())?;
        headers.push((key, value));
    }
    Ok(Some(Target { url, tls, headers, service: args.service.clone() }))
}

/// Sends the views of `export` to `target` and says how it went: one
/// line either way.
pub fn send(target: &Target, export: otlp::Request) {
    let origin = Origin {
        host: std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default(),
        service: target.service.clone(),
        ..Default::default()
    };
    let request = export.finish(&origin);
    let profiles: usize = request.resource_profiles.iter().flat_map(|r| &r.scope_profiles).map(|s| s.profiles.len()).sum();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            super::summary::say(format_args!("OTLP: not sent to {}: no runtime to send with ({e})", target.url));
            return;
        }
    };
    let mut last = String::new();
    for (i, wait) in BACKOFF.iter().enumerate() {
        match runtime.block_on(export_once(target, request.clone())) {
            Ok(()) => {
                super::summary::say(format_args!(
                    "OTLP: sent {profiles} profiles of {} processes to {}",
                    request.resource_profiles.len(),
                    target.url
                ));
                return;
            }
            Err(e) => last = e,
        }
        if i + 1 < BACKOFF.len() {
            std::thread::sleep(*wait);
        }
    }
    super::summary::say(format_args!(
        "OTLP: not sent to {} after {} tries ({last}); the files written hold the same profiles",
        target.url,
        BACKOFF.len()
    ));
}

async fn export_once(target: &Target, request: ExportProfilesServiceRequest) -> Result<(), String> {
    let mut endpoint = Endpoint::from_shared(target.url.clone())
        .map_err(|e| e.to_string())?
        .connect_timeout(CONNECT)
        .timeout(EXPORT);
    if target.tls {
        endpoint = endpoint.tls_config(ClientTlsConfig::new().with_native_roots()).map_err(|e| e.to_string())?;
    }
    let channel = endpoint.connect().await.map_err(|e| format!("connecting: {e}"))?;
    let mut client = ProfilesServiceClient::new(channel);
    let mut req = tonic::Request::new(request);
    for (k, v) in &target.headers {
        req.metadata_mut().insert(k.clone(), v.clone());
    }
    let answer = client.export(req).await.map_err(|s| format!("{}: {}", s.code(), s.message()))?;
    match answer.into_inner().partial_success {
        Some(p) if p.rejected_profiles > 0 => {
            Err(format!("the receiver rejected {} profiles: {}", p.rejected_profiles, p.error_message))
        }
        _ => Ok(()),
    }
}
