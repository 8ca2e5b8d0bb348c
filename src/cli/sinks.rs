//! The options a capture shares with the commands that write or send its
//! views: where they go besides files (OTLP) and where symbols are looked
//! for.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse_interval;

/// Where the views go besides files: an OpenTelemetry Collector or any
/// OTLP profiles receiver.
#[derive(Debug, Args, Clone, Default)]
pub struct OtlpArgs {
    /// Also send the views to an OTLP profiles receiver over gRPC (an
    /// OpenTelemetry Collector with service.profilesSupport enabled):
    /// HOST:PORT or https://HOST:PORT, over TLS unless --otlp-insecure.
    /// Sent once, when the views are written, unless --otlp-interval.
    #[arg(long, value_name = "ENDPOINT")]
    pub otlp: Option<String>,

    /// Stream: send what each SECONDS of the capture recorded as it ends
    /// (1 to 3600), the rest at the end. A receiver that is down or slow
    /// costs the capture nothing: at most 8 intervals wait to be sent, the
    /// oldest dropped past that, and the end says how many.
    #[arg(long, value_name = "SECONDS", requires = "otlp", value_parser = parse_interval)]
    pub otlp_interval: Option<Duration>,

    /// grpc (the receiver's port 4317) or http/protobuf (4318: POSTs to
    /// ENDPOINT/v1development/profiles).
    #[arg(long, value_name = "PROTOCOL", default_value = "grpc", value_parser = ["grpc", "http/protobuf"], requires = "otlp")]
    pub otlp_protocol: String,

    /// Send to --otlp in plain text (http://HOST:PORT), without TLS.
    #[arg(long, requires = "otlp")]
    pub otlp_insecure: bool,

    /// A header sent with each export, e.g. for authentication
    /// (`authorization=Bearer TOKEN`); repeatable.
    #[arg(long = "otlp-header", value_name = "KEY=VALUE", requires = "otlp")]
    pub otlp_headers: Vec<String>,

    /// The service.name of what is sent (default: none).
    #[arg(long, value_name = "NAME", requires = "otlp")]
    pub service: Option<String>,
}

/// Where separate debug files are looked for beyond the usual places:
/// shared by every capture command.
#[derive(Debug, Args, Clone, Default)]
pub struct SymbolArgs {
    /// Also look for separate debug files in DIR (repeatable): by build ID
    /// as DIR/.build-id/xx/yyyy.debug, or by .gnu_debuglink name. The
    /// system directories /usr/lib/debug and /lib/debug, and those inside a
    /// container's root, are always searched.
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
}

#[cfg(test)]
mod symbol_args_tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        symbols: SymbolArgs,
    }

    #[test]
    fn debug_dir_repeats() {
        let w = Wrapper::try_parse_from(["x", "--debug-dir", "/a", "--debug-dir", "/b"]).unwrap();
        assert_eq!(
            w.symbols.debug_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        let w = Wrapper::try_parse_from(["x"]).unwrap();
        assert!(w.symbols.debug_dirs.is_empty());
    }
}
