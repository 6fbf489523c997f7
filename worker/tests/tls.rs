//! An `https://` server: the worker verifies it against a private CA
//! given with `root_certificates_pem`, and runs a task through it. The
//! reference server speaks plain HTTP, so a TLS front (tokio-rustls, a
//! leaf certificate made with rcgen) forwards to it, as a load balancer
//! would.

#![cfg(feature = "tls")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{spawn, Server, SECRET, TENANT};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;
use taskwire_worker::{Done, Worker};
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A test CA (its PEM) and a `localhost` leaf it signed, as a rustls
/// server configuration.
fn ca_and_server_config() -> (String, Arc<ServerConfig>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "taskwire test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf_cert.der().clone(), ca_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    (ca_cert.pem(), Arc::new(config))
}

/// A TLS front on a free port that forwards every connection to `backend`;
/// its port.
async fn tls_front(config: Arc<ServerConfig>, backend: String) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (acceptor, backend) = (acceptor.clone(), backend.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                if let Ok(mut plain) = tokio::net::TcpStream::connect(&backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_a_task_through_an_https_server_it_verifies() {
    let server = Server::start(&[]);
    let (ca_pem, config) = ca_and_server_config();
    let port = tls_front(config, server.addr.clone()).await;
    let worker = Worker::builder(format!("https://localhost:{port}"), TENANT, SECRET)
        .root_certificates_pem(ca_pem.into_bytes())
        .lease_ms(3_000)
        .wait_ms(1_000)
        .build()
        .unwrap();
    worker
        .handle("summary", |job| async move {
            job.progress(50, Some("over TLS")).await?;
            Ok(Done::result("blob://tls", "sha256:t"))
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server.create("summary", json!(null), json!({})).await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["resultRef"], "blob://tls");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[test]
fn a_root_certificate_that_is_not_pem_names_the_field() {
    let e = Worker::builder("https://localhost:1", TENANT, SECRET)
        .root_certificates_pem(b"not a certificate".to_vec())
        .build()
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.field(), "rootCertificates", "{e}");
}
