//! The HTTP clients fgbpf makes (OTLP export over HTTP, debuginfod): their
//! TLS roots, the system's certificates, built in one place.

/// ureq's TLS settings: with `tls`, trusting the certificates the system
/// trusts (`rustls-native-certs`); without, ureq's defaults, for plain
/// HTTP.
pub fn tls_config(tls: bool) -> ureq::tls::TlsConfig {
    let mut config = ureq::tls::TlsConfig::builder();
    if tls {
        let found = rustls_native_certs::load_native_certs();
        let certs: Vec<ureq::tls::Certificate<'static>> =
            found.certs.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect();
        config = config.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
    }
    config.build()
}
