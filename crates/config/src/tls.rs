//! The `[server.tls]` and `[upstream.tls]` parts of `gateway.toml`: PEM file paths, relative to
//! the config file, checked to exist at load time (their contents are read by the listener and
//! the upstream client, which report a bad certificate clearly at start).

use super::file::TlsSection;
use super::{ConfigError, ListenerTls, Locator, UpstreamTls};
use std::path::{Path, PathBuf};
use toml::Spanned;

fn path(at: &Locator, v: &Spanned<String>, key: &str, base: &Path) -> Result<PathBuf, ConfigError> {
    let p = if Path::new(v.get_ref()).is_absolute() { PathBuf::from(v.get_ref()) } else { base.join(v.get_ref()) };
    if !p.is_file() {
        return Err(at.err(v, key, format!("'{}' is not a readable file", p.display()), "give the path of a PEM file"));
    }
    Ok(p)
}

fn refuse(at: &Locator, key: &str, why: &str) -> ConfigError {
    ConfigError(format!("{}: {key}: {why}", at.file))
}

pub(super) fn listener(at: &Locator, s: Option<&TlsSection>, base: &Path) -> Result<Option<ListenerTls>, ConfigError> {
    let Some(s) = s else { return Ok(None) };
    if s.ca.is_some() {
        return Err(refuse(at, "server.tls.ca", "not a listener setting; use client_ca to require client certificates"));
    }
    let (Some(cert), Some(key)) = (&s.cert, &s.key) else {
        return Err(refuse(at, "server.tls", "needs both cert and key (PEM files)"));
    };
    Ok(Some(ListenerTls {
        cert: path(at, cert, "server.tls.cert", base)?,
        key: path(at, key, "server.tls.key", base)?,
        client_ca: s.client_ca.as_ref().map(|c| path(at, c, "server.tls.client_ca", base)).transpose()?,
    }))
}

pub(super) fn upstream(at: &Locator, s: Option<&TlsSection>, base: &Path) -> Result<Option<UpstreamTls>, ConfigError> {
    let Some(s) = s else { return Ok(None) };
    if s.client_ca.is_some() {
        return Err(refuse(at, "upstream.tls.client_ca", "not an upstream setting; use ca for the upstream's CA"));
    }
    let cert = match (&s.cert, &s.key) {
        (Some(c), Some(k)) => Some((path(at, c, "upstream.tls.cert", base)?, path(at, k, "upstream.tls.key", base)?)),
        (None, None) => None,
        _ => return Err(refuse(at, "upstream.tls", "a client certificate needs both cert and key")),
    };
    Ok(Some(UpstreamTls { ca: s.ca.as_ref().map(|c| path(at, c, "upstream.tls.ca", base)).transpose()?, cert }))
}
