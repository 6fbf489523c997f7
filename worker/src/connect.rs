//! Connections to the server: plain TCP for `http://`, and with the `tls`
//! feature (on by default) rustls for `https://`, trusting Mozilla's roots
//! (compiled in by `webpki-roots`, so a container without a CA bundle
//! verifies the same) plus any given with
//! [`crate::WorkerBuilder::root_certificates_pem`]. The same stack, with
//! the same `ring` provider, as the server's notify client
//! (server/src/notify/tls.rs).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::ConfigError;

#[cfg(feature = "tls")]
use tokio_rustls::{client::TlsStream, TlsConnector};

/// What the pooled client connects with.
#[derive(Clone)]
pub(crate) struct Connector {
    http: HttpConnector,
    #[cfg(feature = "tls")]
    tls: TlsConnector,
}

impl Connector {
    /// A connector trusting Mozilla's roots and those in `extra_pem`.
    pub(crate) fn new(http: HttpConnector, extra_pem: Option<&[u8]>) -> Result<Self, ConfigError> {
        let mut http = http;
        // `https://` URIs reach `call`, which wraps the TCP stream itself.
        http.enforce_http(false);
        #[cfg(feature = "tls")]
        return Ok(Connector {
            http,
            tls: tls_connector(extra_pem)?,
        });
        #[cfg(not(feature = "tls"))]
        {
            if extra_pem.is_some() {
                return Err(ConfigError::new(
                    "rootCertificates",
                    "this build has no TLS (the crate's `tls` feature is off)",
                ));
            }
            Ok(Connector { http })
        }
    }
}

#[cfg(feature = "tls")]
fn tls_connector(extra_pem: Option<&[u8]>) -> Result<TlsConnector, ConfigError> {
    use std::sync::Arc;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

    let field = "rootCertificates";
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(pem) = extra_pem {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ConfigError::new(field, format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(ConfigError::new(
                field,
                "no \"-----BEGIN CERTIFICATE-----\" block",
            ));
        }
        for (i, cert) in certs.into_iter().enumerate() {
            roots
                .add(cert)
                .map_err(|e| ConfigError::new(field, format!("certificate {}: {e}", i + 1)))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::new(field, format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The client speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// A connection, plain or TLS.
pub(crate) enum Stream {
    Plain(TokioIo<TcpStream>),
    #[cfg(feature = "tls")]
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

type Connecting = Pin<Box<dyn Future<Output = Result<Stream, io::Error>> + Send>>;

impl tower_service::Service<Uri> for Connector {
    type Response = Stream;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        self.http.poll_ready(cx).map_err(io::Error::other)
    }

    fn call(&mut self, uri: Uri) -> Connecting {
        let https = uri.scheme_str() == Some("https");
        let host = uri.host().unwrap_or_default().to_string();
        let tcp = self.http.call(uri);
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = tcp.await.map_err(io::Error::other)?;
            if !https {
                return Ok(Stream::Plain(tcp));
            }
            #[cfg(feature = "tls")]
            {
                use tokio_rustls::rustls::pki_types::ServerName;
                let name = ServerName::try_from(host)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let stream = tls.connect(name, tcp.into_inner()).await?;
                Ok(Stream::Tls(Box::new(TokioIo::new(stream))))
            }
            #[cfg(not(feature = "tls"))]
            {
                let _ = host;
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "https:// needs the crate's `tls` feature",
                ))
            }
        })
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
