//! PEM files: certificate chains, private keys and root stores, with errors that name the file;
//! and the one rustls crypto provider (aws-lc-rs) every TLS configuration is built with.

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a TLS configuration could not be built: each names the file or setting at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{}: no certificate in it", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: no usable private key ({reason})", path.display())]
    NoKey { path: PathBuf, reason: String },
    #[error("{setting}: {reason}")]
    Rejected { setting: &'static str, reason: String },
}

fn unreadable(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::Unreadable { path: path.to_path_buf(), reason: e.to_string() }
}

/// The crypto provider of every TLS configuration (client and server).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The certificates of a PEM file.
pub fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> =
        CertificateDer::pem_file_iter(path).map_err(|e| unreadable(path, e))?.collect::<Result<_, _>>().map_err(|e| unreadable(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_path_buf() });
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::NoKey { path: path.to_path_buf(), reason: e.to_string() })
}

/// A root store holding the certificates of a PEM file.
pub fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for c in certs(path)? {
        store.add(c).map_err(|e| unreadable(path, e))?;
    }
    Ok(store)
}
