//! TLS for `https://` receivers: rustls with the ring provider, trusting
//! Mozilla's roots (compiled in from `webpki-roots`, so a container with
//! no CA bundle behaves like a laptop) plus the CAs of `--notify-ca-file`
//! (private CAs, tests).
//!
//! **The certificate is always verified**, against the URL's host (a DNS
//! name, sent as SNI, or an IP address, checked against the certificate's
//! IP SANs), and there is no switch to turn that off: a receiver whose
//! certificate is untrusted, expired or for another name gets no byte of
//! the notification. The handshake fails, the attempt fails with it, the
//! outbox row stays owed and is retried with its usual backoff, and the
//! reason rustls gives is logged for each attempt (see
//! [`super::post`]), so a receiver fixed by a valid certificate gets the
//! notification on the next attempt.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::client::Conn;

const CA_FLAG: &str = "--notify-ca-file";

/// The client side of every `https://` post: Mozilla's roots and those
/// of `ca_file` (PEM, one or more certificates). A file that cannot be
/// read, holds no certificate, or holds one rustls cannot use as a root
/// is an error that names `--notify-ca-file`.
pub fn connector(ca_file: Option<&Path>) -> Result<TlsConnector, String> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        for (i, cert) in crate::pem::certificates(path, CA_FLAG)?
            .into_iter()
            .enumerate()
        {
            roots
                .add(cert)
                .map_err(|e| format!("{CA_FLAG} {}: certificate {}: {e}", path.display(), i + 1))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("notify TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Our client speaks HTTP/1.1 only; saying so keeps a receiver that
    // would pick h2 by ALPN from doing so.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Why a connection could not be had.
#[derive(Debug)]
pub enum OpenError {
    /// No TCP connection (refused, unreachable, …).
    Connect(io::Error),
    /// The TLS handshake failed: most often the certificate, with
    /// rustls's reason ("invalid peer certificate: UnknownIssuer").
    Handshake(io::Error),
}

/// Connects to `connect_to` (`host:port`), verifies the receiver's
/// certificate for `name`, and speaks HTTP/1.1 over it, sending `host`
/// as the Host header.
pub async fn open(
    connector: &TlsConnector,
    connect_to: &str,
    name: ServerName<'static>,
    host: &str,
) -> Result<Conn, OpenError> {
    let tcp = TcpStream::connect(connect_to)
        .await
        .map_err(OpenError::Connect)?;
    tcp.set_nodelay(true).map_err(OpenError::Connect)?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(OpenError::Handshake)?;
    Conn::over(tls, host).await.map_err(OpenError::Connect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roots_are_there_without_a_ca_file() {
        assert!(connector(None).is_ok());
        assert!(webpki_roots::TLS_SERVER_ROOTS.len() > 100);
    }

    #[test]
    fn a_bad_ca_file_names_the_flag() {
        let dir = tempfile::tempdir().expect("temp dir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").expect("write");
        let garbled = dir.path().join("garbled.pem");
        std::fs::write(
            &garbled,
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let missing = dir.path().join("missing.pem");
        for path in [&empty, &garbled, &missing] {
            let e = connector(Some(path)).err().expect("refused");
            assert!(e.starts_with("--notify-ca-file "), "{e}");
        }
    }
}
