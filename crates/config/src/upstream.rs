//! The `[[upstream]]` part of `gateway.toml`: transports (Streamable HTTP with one URL or a pool of
//! `[[upstream.endpoint]]`s, or a stdio command), prefixes, deadlines and limits, and the upstream's
//! own credentials (static headers whose secrets come from the environment or a file, per-caller
//! headers, or `[upstream.oauth]` client credentials).

use super::*;

pub(super) fn upstream(
    at: &Locator,
    u: UpstreamSection,
    sep: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<UpstreamConfig, ConfigError> {
    let (id, prefix) = identity(at, &u, sep)?;
    let transport = match (&u.url, &u.command, &u.openapi) {
        (_, _, Some(raw)) => super::openapi::transport(at, &u, raw, &id, base)?,
        _ if u.base_url.is_some() || u.operations.is_some() => {
            return Err(at.err(
                &u.id,
                "upstream.base_url",
                format!("upstream '{id}': base_url and [upstream.operations] belong to an openapi upstream"),
                "add openapi = \"<its description>\", or remove them",
            ));
        }
        (url, command, None) => match (url, command) {
            (_, None) if !u.endpoints.is_empty() || u.url.is_some() => http_transport(at, &u, &id)?,
            (None, Some(cmd)) => stdio_transport(at, &u, cmd, &id, base, env)?,
            (Some(_), Some(_)) => {
                return Err(at.err(&u.id, "upstream", format!("upstream '{id}' has both url and command"), "keep exactly one of them"));
            }
            (_, None) => {
                return Err(at.err(
                    &u.id,
                    "upstream",
                    format!("upstream '{id}' has neither url nor command"),
                    "add url = \"http://…\", command = [\"program\", \"arg\"] or openapi = \"<description>\"",
                ));
            }
        },
    };
    let (headers, caller_headers) = credentials(at, &u, &id, base, env)?;
    let oauth = match &u.oauth {
        None => None,
        Some(o) => Some(oauth(at, o, &id, &transport, base, env)?),
    };
    if !caller_headers.is_empty() && matches!(transport, TransportConfig::Stdio { .. }) {
        return Err(at.err(
            &u.id,
            "upstream.caller_headers",
            format!("upstream '{id}' is a command: caller_headers apply only to url, endpoint and openapi upstreams"),
            "remove them",
        ));
    }
    let user_auth = match &u.user_auth {
        Some(ua) => Some(super::identity::user_auth(at, ua, &u.id, &transport, oauth.is_some(), base, env)?),
        None => None,
    };
    if let (Some(_), TransportConfig::OpenApi(o)) = (&user_auth, &transport)
        && o.base_url.is_none()
    {
        return Err(at.err(
            &u.id,
            "upstream.base_url",
            format!("upstream '{id}': each caller's credential is for one API, named by base_url"),
            "add base_url = \"https://…\"",
        ));
    }
    let instances = super::sandbox::instances(at, u.id.get_ref(), u.instances.as_ref(), u.max_instances, u.instance_idle.as_ref())?;
    if instances != super::sandbox::Instances::Shared && !matches!(&transport, TransportConfig::Stdio { sandbox: Some(_), .. }) {
        return Err(at.err(
            &u.id,
            "upstream.instances",
            format!("upstream '{id}': each caller's process runs in a sandbox and folder of its own"),
            "add [upstream.sandbox] (its `{instance_dir}` is each caller's own folder)",
        ));
    }
    Ok(UpstreamConfig {
        timeout: at.duration(u.timeout.as_ref(), "upstream.timeout", Duration::from_secs(30))?,
        rename: renames(at, &u)?,
        id,
        prefix,
        transport,
        headers,
        oauth,
        caller_headers,
        max_pages: u.max_pages.unwrap_or(100).max(1),
        max_message_bytes: u.max_message_bytes.unwrap_or(16 * 1024 * 1024),
        tls: super::tls::upstream(at, u.tls.as_ref(), base)?,
        era: u.era,
        user_auth,
        validate_arguments: u.validate_arguments.unwrap_or(true),
        pin: u.pin.as_ref().map(|p| super::pins::pin_mode(at, p, "upstream.pin")).transpose()?,
        instances,
    })
}

/// The upstream's id and prefix, checked against the name rules.
fn identity(at: &Locator, u: &UpstreamSection, sep: &str) -> Result<(String, String), ConfigError> {
    let id = u.id.get_ref().clone();
    if !valid_id(&id) {
        return Err(at.err(
            &u.id,
            "upstream.id",
            format!("'{id}' is not a valid id"),
            "use lowercase letters, digits and '-', e.g. \"github\"",
        ));
    }
    if id.contains(sep) {
        return Err(at.err(
            &u.id,
            "upstream.id",
            format!("'{id}' contains the name separator '{sep}'"),
            "pick an id without it, so that prefixed names split unambiguously",
        ));
    }
    let prefix = match &u.prefix {
        None => id.clone(),
        Some(p) => {
            let v = p.get_ref();
            if !v.is_empty() && (!v.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) || v.contains(sep)) {
                return Err(at.err(
                    p,
                    "upstream.prefix",
                    format!("'{v}' is not a valid prefix"),
                    &format!("use A-Z a-z 0-9 _ . - without the separator '{sep}', or \"\" for no prefix"),
                ));
            }
            v.clone()
        }
    };
    Ok((id, prefix))
}

/// A url upstream: one `url`, or a pool of `[[upstream.endpoint]]`s with at most one default.
fn http_transport(at: &Locator, u: &UpstreamSection, id: &str) -> Result<TransportConfig, ConfigError> {
    if u.url.is_some() && !u.endpoints.is_empty() {
        return Err(at.err(
            &u.id,
            "upstream.endpoint",
            format!("upstream '{id}' has both url and [[upstream.endpoint]]"),
            "keep one of them",
        ));
    }
    let endpoints = match &u.url {
        Some(url) => vec![EndpointConfig { url: parse_url(at, url, "upstream.url")?, when: Vec::new() }],
        None => u.endpoints.iter().map(|e| endpoint(at, e)).collect::<Result<Vec<_>, _>>()?,
    };
    if endpoints.iter().filter(|e| e.when.is_empty()).count() > 1 {
        return Err(at.err(
            &u.id,
            "upstream.endpoint",
            format!("upstream '{id}' has more than one endpoint without `when`"),
            "keep one default endpoint",
        ));
    }
    if u.sandbox.is_some() || u.instances.is_some() {
        return Err(at.err(
            &u.id,
            "upstream.sandbox",
            format!("upstream '{id}' has a url: sandbox and instances apply only to command upstreams"),
            "remove them",
        ));
    }
    if !u.env.is_empty() || u.cwd.is_some() {
        return Err(at.err(
            &u.id,
            "upstream.env/cwd",
            format!("upstream '{id}' has a url: env and cwd apply only to command upstreams"),
            "remove env/cwd",
        ));
    }
    Ok(TransportConfig::Http { endpoints })
}

/// A command upstream: its program and arguments, working directory and environment.
fn stdio_transport(
    at: &Locator,
    u: &UpstreamSection,
    cmd: &Spanned<Vec<String>>,
    id: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TransportConfig, ConfigError> {
    if !u.endpoints.is_empty() {
        return Err(at.err(
            cmd,
            "upstream.command",
            format!("upstream '{id}' has both a command and [[upstream.endpoint]]"),
            "keep one of them",
        ));
    }
    if cmd.get_ref().is_empty() || cmd.get_ref()[0].trim().is_empty() {
        return Err(at.err(
            cmd,
            "upstream.command",
            "the command is empty".into(),
            "write the program and its arguments, e.g. [\"python3\", \"server.py\"]",
        ));
    }
    if !u.headers.is_empty() {
        return Err(at.err(
            &u.id,
            "upstream.headers",
            format!("upstream '{id}' is a command: headers apply only to url, endpoint and openapi upstreams"),
            "pass credentials to a command upstream through env",
        ));
    }
    let cwd = u.cwd.as_ref().map(|c| if Path::new(c).is_absolute() { PathBuf::from(c) } else { base.join(c) });
    let mut vars = BTreeMap::new();
    for (name, value) in &u.env {
        let text = match value {
            EnvValue::Literal(s) => s.clone(),
            EnvValue::From(src) => super::headers::secret(at, &format!("upstream '{id}' env {name}"), src, base, env)?,
        };
        vars.insert(name.clone(), text);
    }
    let sandbox = super::sandbox::resolve(at, id, u.sandbox.as_ref(), base, cwd.as_ref(), vec![base.to_path_buf()])?.map(Box::new);
    Ok(TransportConfig::Stdio { command: cmd.get_ref().clone(), env: vars, cwd, sandbox })
}

/// The upstream's own headers and the headers per caller, with their secrets read.
type Headers = Vec<(http::HeaderName, http::HeaderValue)>;

fn credentials(
    at: &Locator,
    u: &UpstreamSection,
    id: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Headers, Vec<(String, Headers)>), ConfigError> {
    let mut headers = Vec::new();
    for (name, src) in &u.headers {
        headers.push(super::headers::header(at, id, name, src, base, env)?);
    }
    let mut caller_headers = Vec::new();
    for (caller, set) in &u.caller_headers {
        let mut list = Vec::new();
        for (name, src) in set {
            list.push(super::headers::header(at, id, name, src, base, env)?);
        }
        caller_headers.push((caller.clone(), list));
    }
    Ok((headers, caller_headers))
}

/// A token endpoint the gateway sends a credential to: https, or http to loopback only.
fn credential_url(at: &Locator, raw: &Spanned<String>, key: &str, what: &str) -> Result<http::Uri, ConfigError> {
    let url = parse_url(at, raw, key)?;
    let loopback = url.host().is_some_and(|h| h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()));
    if url.scheme_str() != Some("https") && !loopback {
        return Err(at.err(raw, key, format!("{what} are only sent over https"), "use an https URL (http is allowed for loopback only)"));
    }
    Ok(url)
}

/// `[upstream.oauth]`: client credentials, sent over https only (http to loopback).
fn oauth(
    at: &Locator,
    o: &file::OAuthSection,
    id: &str,
    transport: &TransportConfig,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<OAuthConfig, ConfigError> {
    if matches!(transport, TransportConfig::Stdio { .. }) {
        return Err(at.err(
            &o.client_id,
            "upstream.oauth",
            format!("upstream '{id}' is a command: oauth applies only to url and openapi upstreams"),
            "remove it",
        ));
    }
    if matches!(transport, TransportConfig::OpenApi(_)) && o.token_url.is_none() {
        return Err(at.err(
            &o.client_id,
            "upstream.oauth.token_url",
            format!("upstream '{id}' is a REST API: its authorization server is not discovered"),
            "add token_url = \"https://…/token\"",
        ));
    }
    let token_url = match &o.token_url {
        None => None,
        Some(raw) => Some(credential_url(at, raw, "upstream.oauth.token_url", "client secrets")?),
    };
    let grant = grant(at, o, id, base, env)?;
    if matches!(grant, super::OAuthGrant::IdJag { .. })
        && let Some(raw) = &o.token_url
    {
        return Err(at.err(
            raw,
            "upstream.oauth.token_url",
            "the ID-JAG's audience is the authorization server's issuer, which only discovery tells".into(),
            "remove token_url: the upstream's metadata names its authorization server",
        ));
    }
    let client_auth = match o.client_auth.as_ref().map(|m| (m, m.get_ref().as_str())) {
        None if o.client_secret.is_none() && grant != super::OAuthGrant::ClientCredentials => super::ClientAuthMethod::None,
        None | Some((_, "client_secret_basic")) => super::ClientAuthMethod::Basic,
        Some((_, "client_secret_post")) => super::ClientAuthMethod::Post,
        Some((_, "private_key_jwt")) => super::ClientAuthMethod::PrivateKeyJwt,
        Some((m, other)) => {
            return Err(at.err(
                m,
                "upstream.oauth.client_auth",
                format!("{other:?} is not a client authentication method the gateway uses"),
                "use client_secret_basic, client_secret_post or private_key_jwt",
            ));
        }
    };
    let client_secret = match (client_auth, &o.client_secret) {
        (super::ClientAuthMethod::None, _) => String::new(),
        (_, None) => {
            return Err(at.err(
                &o.client_id,
                "upstream.oauth.client_secret",
                format!("upstream '{id}': the client_credentials grant authenticates the gateway with a secret or a key"),
                "add client_secret = { env = \"VAR\" } or { file = \"path\" }",
            ));
        }
        // A private key (PEM, several lines) is read as it is.
        (super::ClientAuthMethod::PrivateKeyJwt, Some(src)) => {
            super::headers::secret(at, &format!("upstream '{id}' oauth client_secret"), src, base, env)?
        }
        (_, Some(src)) => {
            let (_, secret) = super::headers::header(at, id, "client_secret", src, base, env)?;
            secret.to_str().map_err(|_| ConfigError(format!("{}: upstream '{id}' oauth client_secret: not text", at.file)))?.to_string()
        }
    };
    let resource = o.resource.clone().or_else(|| match transport {
        TransportConfig::Http { endpoints } => endpoints.first().map(|e| e.url.to_string()),
        TransportConfig::OpenApi(o) => o.base_url.as_ref().map(|u| u.to_string()),
        TransportConfig::Stdio { .. } => None,
    });
    Ok(OAuthConfig {
        token_url,
        client_id: o.client_id.get_ref().clone(),
        client_auth,
        client_secret,
        scope: o.scope.clone(),
        resource,
        grant,
    })
}

/// `[upstream.oauth] grant` and what each grant needs.
fn grant(
    at: &Locator,
    o: &file::OAuthSection,
    id: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<super::OAuthGrant, ConfigError> {
    let kind = o.grant.as_ref().map(|g| g.get_ref().as_str()).unwrap_or("client_credentials");
    let assertion = || -> Result<super::Assertion, ConfigError> {
        let Some(src) = &o.assertion else {
            return Err(at.err(
                &o.client_id,
                "upstream.oauth.assertion",
                format!("upstream '{id}': grant {kind:?} presents an assertion"),
                "add assertion = { file = \"/var/run/secrets/tokens/mcp\" } (read again at each token request) or { env = \"VAR\" }",
            ));
        };
        match (&src.env, &src.file) {
            (None, Some(f)) => {
                let p = if Path::new(f).is_absolute() { PathBuf::from(f) } else { base.join(f) };
                std::fs::metadata(&p)
                    .map_err(|e| ConfigError(format!("{}: upstream '{id}' oauth assertion: cannot read {}: {e}", at.file, p.display())))?;
                Ok(super::Assertion::File(p))
            }
            _ => Ok(super::Assertion::Value(super::headers::secret(at, &format!("upstream '{id}' oauth assertion"), src, base, env)?)),
        }
    };
    let unused = |key: &str, present: bool| -> Result<(), ConfigError> {
        if present {
            return Err(at.err(
                &o.client_id,
                &format!("upstream.oauth.{key}"),
                format!("{key} belongs to grant = \"id_jag\""),
                "remove it",
            ));
        }
        Ok(())
    };
    if kind != "id_jag" {
        unused("idp_token_url", o.idp_token_url.is_some())?;
        unused("idp_client_id", o.idp_client_id.is_some())?;
        unused("idp_client_secret", o.idp_client_secret.is_some())?;
    }
    match kind {
        "client_credentials" => {
            if o.assertion.is_some() {
                return Err(at.err(
                    &o.client_id,
                    "upstream.oauth.assertion",
                    "client_credentials presents no assertion".into(),
                    "set grant = \"jwt_bearer\" (a workload JWT) or \"id_jag\", or remove assertion",
                ));
            }
            Ok(super::OAuthGrant::ClientCredentials)
        }
        "jwt_bearer" => Ok(super::OAuthGrant::JwtBearer { assertion: assertion()? }),
        "id_jag" => {
            let Some(url) = &o.idp_token_url else {
                return Err(at.err(
                    &o.client_id,
                    "upstream.oauth.idp_token_url",
                    "the identity assertion is exchanged at the enterprise identity provider's token endpoint".into(),
                    "add idp_token_url and idp_client_id",
                ));
            };
            credential_url(at, url, "upstream.oauth.idp_token_url", "identity assertions")?;
            let Some(client_id) = o.idp_client_id.clone() else {
                return Err(at.err(
                    url,
                    "upstream.oauth.idp_client_id",
                    "the identity provider knows the gateway as a client".into(),
                    "add idp_client_id",
                ));
            };
            let client_secret = match &o.idp_client_secret {
                Some(src) => Some(super::headers::secret(at, &format!("upstream '{id}' oauth idp_client_secret"), src, base, env)?),
                None => None,
            };
            Ok(super::OAuthGrant::IdJag {
                assertion: assertion()?,
                idp: super::IdpClient { token_url: url.get_ref().clone(), client_id, client_secret },
            })
        }
        other => {
            let span = o.grant.as_ref().map_or(&o.client_id, |g| g);
            Err(at.err(
                span,
                "upstream.oauth.grant",
                format!("{other:?} is not a grant the gateway uses"),
                "use client_credentials, jwt_bearer or id_jag",
            ))
        }
    }
}

/// The upstream's `rename` table, each new name checked against the tool-name rules.
fn renames(at: &Locator, u: &UpstreamSection) -> Result<Vec<(String, String)>, ConfigError> {
    let mut rename = Vec::new();
    for (from, to) in &u.rename {
        if let Some(problem) = crate::catalog::names::tool_name_problem(to.get_ref()) {
            return Err(at.err(
                to,
                "upstream.rename",
                format!("'{}' cannot be served: {problem}", to.get_ref()),
                "pick a name of 1-128 characters of A-Z a-z 0-9 _ . -",
            ));
        }
        rename.push((from.clone(), to.get_ref().clone()));
    }
    Ok(rename)
}

fn parse_url(at: &Locator, url: &Spanned<String>, key: &str) -> Result<http::Uri, ConfigError> {
    let parsed: http::Uri = url
        .get_ref()
        .parse()
        .map_err(|e| at.err(url, key, format!("'{}' is not a URL ({e})", url.get_ref()), "write e.g. \"http://127.0.0.1:3000/mcp\""))?;
    if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
        return Err(at.err(
            url,
            key,
            format!("'{}' is not an http(s) URL with a host", url.get_ref()),
            "write e.g. \"https://mcp.example.com/mcp\"",
        ));
    }
    Ok(parsed)
}

fn endpoint(at: &Locator, e: &file::EndpointSection) -> Result<EndpointConfig, ConfigError> {
    let url = parse_url(at, &e.url, "upstream.endpoint.url")?;
    let mut when = Vec::new();
    if let Some(w) = &e.when {
        for (name, value) in w.get_ref() {
            let value = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(at.err(
                        w,
                        "upstream.endpoint.when",
                        format!("'{name}' has a {} value", other.type_str()),
                        "use a string, an integer or a boolean",
                    ));
                }
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)) {
                return Err(at.err(
                    w,
                    "upstream.endpoint.when",
                    format!("'{name}' is not an x-mcp-header name"),
                    "use the name the tool's schema gives in x-mcp-header, e.g. Region",
                ));
            }
            when.push((name.to_ascii_lowercase(), value));
        }
    }
    Ok(EndpointConfig { url, when })
}
