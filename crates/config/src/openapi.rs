//! `[[upstream]] openapi = "…"`: a REST API described by OpenAPI, served as tools. Where the
//! description comes from (a file beside the configuration or an `http(s)` URL), the `base_url`
//! calls go to, and `[upstream.operations]`: which operations become tools (by method, tag, path
//! glob and name glob; `GET` alone by default, since a description rarely says which writes are
//! safe to hand a model).

use super::file::UpstreamSection;
use super::{ConfigError, Locator};
use std::path::{Path, PathBuf};

pub use mcpgate_model::openapi::Selection;

/// Where the description is read from.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenApiSource {
    File(PathBuf),
    Url(http::Uri),
}

impl std::fmt::Display for OpenApiSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenApiSource::File(p) => write!(f, "{}", p.display()),
            OpenApiSource::Url(u) => write!(f, "{u}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenApiConfig {
    pub source: OpenApiSource,
    /// Where calls go; `None`: the description's own server URL, where it may be trusted (see
    /// `upstream::openapi`).
    pub base_url: Option<http::Uri>,
    pub select: Selection,
}

const METHODS: [&str; 7] = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"];

/// The OpenAPI transport of upstream `id`, whose `openapi` key is `raw`.
pub(super) fn transport(
    at: &Locator,
    u: &UpstreamSection,
    raw: &toml::Spanned<String>,
    id: &str,
    base: &Path,
) -> Result<super::TransportConfig, ConfigError> {
    if u.command.is_some() || u.url.is_some() || !u.endpoints.is_empty() {
        return Err(at.err(raw, "upstream.openapi", format!("upstream '{id}' has openapi and url or command"), "keep exactly one of them"));
    }
    if u.sandbox.is_some() || u.instances.is_some() || !u.env.is_empty() || u.cwd.is_some() {
        return Err(at.err(
            raw,
            "upstream.openapi",
            format!("upstream '{id}' is a REST API: env, cwd, sandbox and instances apply only to command upstreams"),
            "remove them",
        ));
    }
    let text = raw.get_ref().trim();
    let source = if text.starts_with("http://") || text.starts_with("https://") {
        let uri: http::Uri = text
            .parse()
            .map_err(|e| at.err(raw, "upstream.openapi", format!("{text:?} is not a URL: {e}"), "use https://host/path/openapi.json"))?;
        OpenApiSource::Url(uri)
    } else if text.contains("://") {
        return Err(at.err(
            raw,
            "upstream.openapi",
            format!("{text:?}: only http(s) URLs and files are read"),
            "use a file path or an https:// URL",
        ));
    } else {
        let p = Path::new(text);
        OpenApiSource::File(if p.is_absolute() { p.to_path_buf() } else { base.join(p) })
    };
    let base_url = match &u.base_url {
        None => None,
        Some(b) => {
            let uri: http::Uri = b
                .get_ref()
                .parse()
                .map_err(|e| at.err(b, "upstream.base_url", format!("not a URL: {e}"), "use https://api.example.com/v1"))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(at.err(b, "upstream.base_url", "base_url is an absolute http(s) URL".into(), "use https://api.example.com/v1"));
            }
            if uri.query().is_some() {
                return Err(at.err(b, "upstream.base_url", "base_url has a query".into(), "remove it; operations add their own"));
            }
            Some(uri)
        }
    };
    let ops = u.operations.as_ref();
    let mut select = Selection::default();
    if let Some(o) = ops {
        if let Some(methods) = &o.methods {
            let mut upper = Vec::new();
            for m in methods {
                let m = m.to_ascii_uppercase();
                if !METHODS.contains(&m.as_str()) {
                    return Err(at.err(
                        raw,
                        "upstream.operations.methods",
                        format!("{m:?} is not a method operations are selected by"),
                        &format!("use some of {METHODS:?}"),
                    ));
                }
                upper.push(m);
            }
            select.methods = upper;
        }
        select.include_tags = o.include_tags.clone();
        select.exclude_tags = o.exclude_tags.clone();
        select.include_paths = o.include_paths.clone();
        select.exclude_paths = o.exclude_paths.clone();
        select.include = o.include.clone();
        select.exclude = o.exclude.clone();
    }
    Ok(super::TransportConfig::OpenApi(Box::new(OpenApiConfig { source, base_url, select })))
}
