//! A real TLS webhook receiver on 127.0.0.1 for the notify tests: a test
//! CA and leaf certificates made with rcgen, served with tokio-rustls and
//! hyper. The certificate it presents can be switched while it runs, as
//! an operator fixing a receiver would.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A certificate authority made for one test.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert: rcgen::Certificate,
}

/// A receiver's certificate (with its CA's) and key.
pub struct Leaf {
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

/// How long a leaf is valid.
#[derive(Clone, Copy, PartialEq)]
pub enum Validity {
    /// rcgen's default, 1975 to 4096.
    Current,
    /// All of 2020.
    Expired,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            issuer: Issuer::new(params, key),
            cert,
        }
    }

    /// The CA certificate as PEM, for `--notify-ca-file`.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A server certificate for `names` (DNS names or IP addresses, as
    /// subject alternative names) signed by this CA.
    pub fn leaf(&self, names: &[&str], validity: Validity) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "taskwire test receiver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        if validity == Validity::Expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            chain: vec![cert.der().clone(), self.cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        }
    }
}

fn server_config(leaf: &Leaf) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            leaf.chain.clone(),
            PrivateKeyDer::Pkcs8(leaf.key.clone_key()),
        )
        .unwrap();
    Arc::new(config)
}

/// One request that reached the receiver's HTTP layer (so after a
/// completed handshake).
#[derive(Debug, Clone)]
pub struct Post {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The receiver: answers 200 to every request it gets over TLS.
pub struct TlsReceiver {
    pub port: u16,
    presenting: Arc<Mutex<Arc<ServerConfig>>>,
    /// TCP connections accepted (one per attempt).
    connections: Arc<AtomicUsize>,
    /// Requests read in full.
    posts: Arc<Mutex<Vec<Post>>>,
}

impl TlsReceiver {
    pub async fn start(leaf: &Leaf) -> TlsReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let receiver = TlsReceiver {
            port,
            presenting: Arc::new(Mutex::new(server_config(leaf))),
            connections: Arc::default(),
            posts: Arc::default(),
        };
        let (presenting, connections, posts) = (
            Arc::clone(&receiver.presenting),
            Arc::clone(&receiver.connections),
            Arc::clone(&receiver.posts),
        );
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let acceptor = TlsAcceptor::from(Arc::clone(&presenting.lock().unwrap()));
                let posts = Arc::clone(&posts);
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let posts = Arc::clone(&posts);
                            async move {
                                let (parts, body) = hyper::Request::into_parts(req);
                                let body = body.collect().await?.to_bytes();
                                posts.lock().unwrap().push(Post {
                                    path: parts.uri.path().to_string(),
                                    headers: parts.headers,
                                    body,
                                });
                                Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::new())))
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        receiver
    }

    /// Presents `leaf` from the next connection on.
    pub fn present(&self, leaf: &Leaf) {
        *self.presenting.lock().unwrap() = server_config(leaf);
    }

    /// `https://{host}:{port}{path}`.
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port)
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }
}
