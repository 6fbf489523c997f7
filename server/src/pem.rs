//! Certificates read from a PEM file named by a flag: the CAs of
//! `--notify-ca-file` and the chain of `--tls-cert` are read the same way,
//! with the same errors, each naming its flag and the file.

use std::path::Path;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;

/// The certificates of the PEM file at `path`, in file order (other
/// blocks, such as a key, are skipped). A file that cannot be read, is
/// not PEM, or holds no certificate is an error starting with `flag`.
pub fn certificates(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| format!("{flag} {shown}: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag} {shown}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{flag} {shown}: no certificate in it (expected PEM \
             \"-----BEGIN CERTIFICATE-----\" blocks)"
        ));
    }
    Ok(certs)
}
