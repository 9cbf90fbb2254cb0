#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("gateway.toml"), None, &|k| (k == "CALC_TOKEN").then(|| "s3cret".to_string()))
}

#[test]
fn accepts_the_minimal_shape_exactly_as_written() {
    let cfg = parse(
        r#"
[server]
listen = "127.0.0.1:8811"
path = "/mcp"

[[upstream]]
id = "calc"
url = "http://127.0.0.1:3201/mcp"

[[upstream]]
id = "files"
command = ["python3", "server.py", "--transport", "stdio"]
prefix = ""
"#,
    )
    .unwrap();
    assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:8811");
    assert_eq!(cfg.upstreams.len(), 2);
    assert_eq!(cfg.upstreams[0].prefix, "calc");
    assert_eq!(cfg.upstreams[1].prefix, "");
    assert_eq!(cfg.upstreams[1].transport.kind(), "stdio");
    assert_eq!(cfg.catalog.names.separator, "__");
    assert_eq!(cfg.server.max_body_bytes, 4 * 1024 * 1024);
}

#[test]
fn errors_name_file_line_key_and_fix() {
    let e = parse("[[upstream]]\nid = \"Calc\"\nurl = \"http://x/mcp\"\n").unwrap_err().0;
    assert!(e.starts_with("gateway.toml:2: upstream.id"), "{e}");
    assert!(e.contains("Fix:"), "{e}");
    let e = parse("[server]\nlisten = \"127.0.0.1:1\"\nbogus = 1\n").unwrap_err().0;
    assert!(e.starts_with("gateway.toml:3"), "{e}");
    assert!(e.contains("bogus"), "{e}");
    let e = parse("[catalog]\nseparator = \"-\"\n[[upstream]]\nid = \"a-b\"\nurl = \"http://x/mcp\"\n").unwrap_err().0;
    assert!(e.contains("separator"), "{e}");
    let e = parse("[[upstream]]\nid = \"a\"\n").unwrap_err().0;
    assert!(e.contains("neither url nor command"), "{e}");
    let e = parse("[[upstream]]\nid = \"a\"\nurl = \"ftp://x\"\n").unwrap_err().0;
    assert!(e.contains("http(s)"), "{e}");
    let e = parse("[[upstream]]\nid = \"a\"\nurl = \"http://x/\"\n[[upstream]]\nid = \"a\"\nurl = \"http://y/\"\n").unwrap_err().0;
    assert!(e.contains("used twice"), "{e}");
    let e = parse("[[upstream]]\nid = \"a\"\nurl = \"http://x/\"\ntimeout = \"soon\"\n").unwrap_err().0;
    assert!(e.starts_with("gateway.toml:4: upstream.timeout"), "{e}");
}

#[test]
fn header_secrets_come_from_env_and_are_sensitive() {
    let cfg = parse(
        "[[upstream]]\nid = \"calc\"\nurl = \"http://x/mcp\"\n[upstream.headers]\nAuthorization = { env = \
        \"CALC_TOKEN\", prefix = \"Bearer \" }\n",
    )
    .unwrap();
    let (name, value) = &cfg.upstreams[0].headers[0];
    assert_eq!(name.as_str(), "authorization");
    assert_eq!(value.to_str().unwrap(), "Bearer s3cret");
    assert!(value.is_sensitive());
    assert!(!format!("{cfg:?}").contains("s3cret"));
    let e =
        parse("[[upstream]]\nid = \"calc\"\nurl = \"http://x/mcp\"\n[upstream.headers]\nX-Key = { env = \"MISSING\" }\n").unwrap_err().0;
    assert!(e.contains("MISSING is not set"), "{e}");
    let e = parse("[[upstream]]\nid = \"calc\"\nurl = \"http://x/mcp\"\n[upstream.headers]\nX-Key = \"literal\"\n").unwrap_err().0;
    assert!(e.starts_with("gateway.toml:5") && e.contains("secrets may not be written") && !e.contains("literal"), "{e}");
}

#[test]
fn listen_override_wins() {
    let cfg = Config::parse("", Path::new("g.toml"), Some("127.0.0.1:9999"), &|_| None).unwrap();
    assert_eq!(cfg.server.listen.port(), 9999);
    assert!(Config::parse("", Path::new("g.toml"), Some("nope"), &|_| None).is_err());
}

#[test]
fn accepts_the_minimal_auth_shape_exactly_as_written() {
    let key = "ab".repeat(32);
    let cfg = parse(&format!(
        "[auth]\nmode = \"api_key\"            # \"none\" | \"api_key\" | \"jwt\"\n\n[[caller]]\nid = \"alice\"\nkey_sha256 = \
            \"{key}\"\nallow = [\"calc__*\"]\ndeny = [\"calc__delete_*\"]\n"
    ))
    .unwrap();
    assert_eq!(cfg.auth.mode, auth::AuthMode::ApiKey);
    assert_eq!(cfg.callers[0].id, "alice");
    assert_eq!(cfg.callers[0].allow, ["calc__*"]);
    assert_eq!(cfg.callers[0].key_sha256.unwrap()[0], 0xab);
}

#[test]
fn auth_errors_are_explained() {
    let e = parse("[server]\nlisten = \"0.0.0.0:8811\"\n").unwrap_err().0;
    assert!(e.contains("without authentication"), "{e}");
    assert!(parse("[server]\nlisten = \"0.0.0.0:8811\"\n[auth]\nallow_unauthenticated_public = true\n").is_ok());
    let e = parse("[auth]\nmode = \"api_key\"\n[[caller]]\nid = \"a\"\nallow = [\"*\"]\n").unwrap_err().0;
    assert!(e.contains("key_sha256"), "{e}");
    let e = parse("[[caller]]\nid = \"a\"\nkey_sha256 = \"xx\"\n").unwrap_err().0;
    assert!(e.contains("key_sha256") || e.contains("auth.mode"), "{e}");
    let e = parse("[auth]\nmode = \"jwt\"\njwks_file = \"k.json\"\n").unwrap_err().0;
    assert!(e.contains("auth.issuer"), "{e}");
    let e = parse("[auth]\nmode = \"jwt\"\nissuer = \"https://i\"\njwks_file = \"k.json\"\n").unwrap_err().0;
    assert!(e.contains("audience"), "{e}");
    let e = parse("[auth]\nmode = \"magic\"\n").unwrap_err().0;
    assert!(e.starts_with("gateway.toml:2: auth.mode"), "{e}");
    let e = parse("[[upstream]]\nid = \"calc\"\nurl = \"http://x/mcp\"\n[upstream.headers]\nMcp-Method = { env = \"CALC_TOKEN\" }\n")
        .unwrap_err()
        .0;
    assert!(e.contains("sets this header itself"), "{e}");
}

#[test]
fn oauth_client_credentials_are_checked() {
    let ok = parse(
        "[[upstream]]\nid = \"gh\"\nurl = \"https://api.example.com/mcp\"\n[upstream.oauth]\ntoken_url = \
        \"https://auth.example.com/token\"\nclient_id = \"gw\"\nclient_secret = { env = \"CALC_TOKEN\" }\n",
    )
    .unwrap();
    let o = ok.upstreams[0].oauth.as_ref().expect("oauth");
    assert_eq!(o.resource.as_deref(), Some("https://api.example.com/mcp"), "the resource defaults to the upstream URL");
    assert!(!format!("{o:?}").contains("s3cret"), "the secret is not in Debug output");
    let e = parse(
        "[[upstream]]\nid = \"gh\"\nurl = \"https://api.example.com/mcp\"\n[upstream.oauth]\ntoken_url = \
        \"http://auth.example.com/token\"\nclient_id = \"gw\"\nclient_secret = { env = \"CALC_TOKEN\" }\n",
    )
    .unwrap_err()
    .0;
    assert!(e.contains("https"), "{e}");
    let e = parse(
        "[[upstream]]\nid = \"gh\"\ncommand = [\"x\"]\n[upstream.oauth]\ntoken_url = \"https://a/t\"\nclient_id = \
        \"gw\"\nclient_secret = { env = \"CALC_TOKEN\" }\n",
    )
    .unwrap_err()
    .0;
    assert!(e.contains("only to url and openapi upstreams"), "{e}");
    let discovered = parse(
        "[[upstream]]\nid = \"gh\"\nurl = \"https://api.example.com/mcp\"\n[upstream.oauth]\nclient_id = \"gw\"\n\
        client_auth = \"private_key_jwt\"\nclient_secret = { env = \"CALC_TOKEN\" }\n",
    )
    .expect("a token URL is discovered when left out");
    let o = discovered.upstreams[0].oauth.as_ref().expect("oauth");
    assert_eq!((o.token_url.as_ref(), o.client_auth), (None, super::ClientAuthMethod::PrivateKeyJwt));
    let e = parse(
        "[[upstream]]\nid = \"gh\"\nurl = \"https://api.example.com/mcp\"\n[upstream.oauth]\nclient_id = \"gw\"\n\
        client_auth = \"tls_client_auth\"\nclient_secret = { env = \"CALC_TOKEN\" }\n",
    )
    .unwrap_err()
    .0;
    assert!(e.contains("client_secret_basic, client_secret_post or private_key_jwt"), "{e}");
}

#[test]
fn jwks_must_come_over_https_except_from_loopback() {
    let jwt =
        |url: &str| parse(&format!("[auth]\nmode = \"jwt\"\nissuer = \"https://i\"\naudience = [\"https://gw\"]\njwks_url = \"{url}\"\n"));
    assert!(jwt("https://issuer.example.com/jwks.json").is_ok(), "{:?}", jwt("https://issuer.example.com/jwks.json").err());
    assert!(jwt("http://127.0.0.1:8080/jwks.json").is_ok());
    assert!(jwt("http://localhost/jwks.json").is_ok());
    let e = jwt("http://issuer.example.com/jwks.json").unwrap_err().0;
    assert!(e.contains("forge") && e.contains("https"), "{e}");
}

#[test]
fn readiness_follows_the_configured_rule() {
    let cfg = parse("[server]\nready_when = \"all\"\n").unwrap();
    assert_eq!(cfg.server.ready_when, ReadyWhen::All);
    assert_eq!(parse("").unwrap().server.ready_when, ReadyWhen::Any);
    assert!(parse("[server]\nready_when = \"most\"\n").is_err());
}

#[test]
fn endpoints_are_checked_at_load() {
    let up = "[[upstream]]\nid = \"calc\"\nurl = \"http://127.0.0.1:3201/mcp\"\n";
    let ok = parse(&format!(
        "{up}[[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"calc__*\"]\n[[endpoint.tool]]\nname = \"calc__add\"\nrename = \
            \"plus\"\nfixed = {{ b = 1 }}\n"
    ))
    .unwrap();
    assert_eq!(ok.endpoints[0].path, "/mcp/dev");
    assert_eq!(ok.endpoints[0].tools[0].rename.as_deref(), Some("plus"));
    assert_eq!(ok.endpoints[0].tools[0].fixed["b"], 1);
    for (bad, says) in [
        ("[[endpoint]]\npath = \"/mcp\"\ninclude = [\"*\"]\n", "already served"),
        ("[[endpoint]]\npath = \"/metrics\"\ninclude = [\"*\"]\n", "already served"),
        ("[[endpoint]]\npath = \"/mcp/server-card\"\ninclude = [\"*\"]\n", "already served"),
        ("[[endpoint]]\npath = \"dev\"\ninclude = [\"*\"]\n", "is not a path"),
        ("[[endpoint]]\npath = \"/a\"\ninclude = [\"*\"]\n[[endpoint]]\npath = \"/a\"\ninclude = [\"*\"]\n", "already served"),
        ("[[endpoint]]\npath = \"/a\"\n", "selects nothing"),
        (
            "[[endpoint]]\npath = \"/a\"\ninclude = [\"*\"]\n[[endpoint.tool]]\nname = \"calc__add\"\nrename = \"has space\"\n",
            "cannot be served",
        ),
        (
            "[[endpoint]]\npath = \"/a\"\ninclude = [\"*\"]\n[[endpoint.tool]]\nname = \"x\"\nrename = \
                \"y\"\n[[endpoint.tool]]\nname = \"z\"\nrename = \"y\"\n",
            "renamed 'y'",
        ),
    ] {
        let e = parse(&format!("{up}{bad}")).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn per_user_identity_needs_a_public_url_and_an_http_upstream() {
    let up = "[[upstream]]\nid = \"linear\"\nurl = \"https://mcp.linear.app/mcp\"\n[upstream.user_auth]\n";
    let e = parse(up).unwrap_err().0;
    assert!(e.contains("[identity] public_url"), "{e}");
    let c = parse(&format!(
        "[identity]\npublic_url = \"https://gw.example.com/\"\n{up}client_id = \"gw\"\nissuer = \"https://linear.app\"\nclient_secret = {{ env = \"CALC_TOKEN\" }}\nscopes = [\"read\"]\n"
    ))
    .expect("a complete section");
    let ua = c.upstreams[0].user_auth.clone().expect("user_auth");
    assert_eq!(
        (ua.client_id.as_deref(), ua.issuer.as_deref(), ua.scopes),
        (Some("gw"), Some("https://linear.app"), Some(vec!["read".to_string()]))
    );
    assert_eq!(c.identity.as_ref().map(|i| i.public_url.as_str()), Some("https://gw.example.com"), "no trailing slash");
    let id = identity::IdentityConfig {
        public_url: "https://gw.example.com".into(),
        vault: "v".into(),
        allow_loopback: false,
        client_metadata_url: None,
    };
    assert_eq!(id.redirect_uri(), "https://gw.example.com/oauth/callback");
    assert_eq!(id.client_metadata_url(), "https://gw.example.com/oauth/client.json");
    let ua = identity::UserAuthConfig {
        client_id: Some("gw".into()),
        issuer: None,
        client_secret: Some("s3cret".into()),
        secret_in_body: false,
        scopes: None,
        exchange: false,
        api_key: None,
        id_jag: None,
    };
    assert!(!format!("{ua:?}").contains("s3cret"), "the secret is not in Debug output");
    for (config, expect) in [
        (format!("[identity]\npublic_url = \"http://gw.example.com\"\n{up}"), "https"),
        (format!("[identity]\npublic_url = \"https://gw.example.com/?x=1\"\n{up}"), "no query"),
        ("[identity]\npublic_url = \"https://gw\"\n[[upstream]]\nid = \"a\"\ncommand = [\"x\"]\n[upstream.user_auth]\n".to_string(), "only to url and openapi upstreams"),
        (format!("[identity]\npublic_url = \"https://gw\"\n{up}client_secret = {{ env = \"CALC_TOKEN\" }}\n"), "needs its client_id"),
        (format!("[identity]\npublic_url = \"https://gw\"\n{up}client_id = \"c\"\nissuer = \"https://as\"\nclient_auth = \"private_key_jwt\"\n"), "client_secret_basic or client_secret_post"),
        (format!("[identity]\npublic_url = \"https://gw\"\n{up}client_id = \"c\"\nissuer = \"https://as\"\nclient_auth = \"client_secret_post\"\n"), "needs a client_secret"),
        (format!("[identity]\npublic_url = \"https://gw\"\n{up}scopes = [\"a b\"]\n"), "space"),
        (format!("[identity]\npublic_url = \"https://gw\"\n{up}client_id = \"gw\"\n"), "issuer"),
        (
            "[identity]\npublic_url = \"https://gw\"\n[[upstream]]\nid = \"a\"\nurl = \"https://a.example/mcp\"\n[upstream.user_auth]\n[upstream.oauth]\ntoken_url = \"https://a.example/t\"\nclient_id = \"x\"\nclient_secret = { env = \"CALC_TOKEN\" }\n".to_string(),
            "keep one of them",
        ),
    ] {
        let e = parse(&config).unwrap_err().0;
        assert!(e.contains(expect), "{config}\n{e}");
    }
    assert!(parse(&format!("[identity]\npublic_url = \"http://127.0.0.1:8811\"\n{up}")).is_ok(), "http on loopback (development)");
    // Token exchange needs JWT callers and a client at their identity provider, not consent pages.
    let exchange = "[[upstream]]\nid = \"files\"\nurl = \"https://files.example.com/mcp\"\n[upstream.user_auth]\nexchange = true\n";
    let e = parse(exchange).unwrap_err().0;
    assert!(e.contains("client_id, issuer"), "{e}");
    let with_client = format!("{exchange}client_id = \"gw\"\nissuer = \"https://idp.example.com\"\n");
    let e = parse(&with_client).unwrap_err().0;
    assert!(e.contains("mode = \"jwt\""), "{e}");
    let jwt = "[auth]\nmode = \"jwt\"\nissuer = \"https://idp.example.com\"\naudience = [\"https://gw\"]\njwks_url = \"https://idp.example.com/jwks\"\n";
    let c = parse(&format!("{jwt}{with_client}")).unwrap_or_else(|e| panic!("{}", e.0));
    assert!(c.identity.is_none() && c.upstreams[0].user_auth.as_ref().is_some_and(|a| a.exchange), "no [identity] is needed");
}

#[test]
fn each_callers_api_key_is_described_by_its_header() {
    let up = "[identity]\npublic_url = \"https://gw.example.com\"\n[[upstream]]\nid = \"crm\"\nurl = \"https://crm.example.com/mcp\"\n[upstream.user_auth]\nkind = \"api_key\"\n";
    let c = parse(up).expect("a key in Authorization");
    let key = c.upstreams[0].user_auth.clone().and_then(|u| u.api_key).expect("api_key");
    assert_eq!((key.header.as_str(), key.prefix.as_str()), ("authorization", "Bearer "));
    let c = parse(&format!("{up}header = \"X-Api-Key\"\nhelp = \"Create one at https://crm.example.com/keys\"\n")).expect("own header");
    let key = c.upstreams[0].user_auth.clone().and_then(|u| u.api_key).expect("api_key");
    assert_eq!((key.header.as_str(), key.prefix.as_str()), ("x-api-key", ""));
    for (extra, says) in [
        ("header = \"Mcp-Session-Id\"\n", "cannot carry a key"),
        ("header = \"bad header\"\n", "cannot carry a key"),
        ("client_id = \"gw\"\nissuer = \"https://as\"\n", "no OAuth client"),
        ("exchange = true\n", "user_auth.exchange"),
    ] {
        let e = parse(&format!("{up}{extra}")).unwrap_err().0;
        assert!(e.contains(says), "{extra}: {e}");
    }
    let jag = "[[upstream]]\nid = \"docs\"\nurl = \"https://docs.example.com/mcp\"\n[upstream.user_auth]\nclient_id = \"gw\"\nissuer = \"https://idp.example.com\"\n[upstream.user_auth.id_jag]\nclient_id = \"gw-at-docs\"\nclient_secret = { env = \"CALC_TOKEN\" }\n";
    assert!(parse(jag).unwrap_err().0.contains("exchanging the caller's JWT"), "an ID-JAG needs exchange");
    let jwt = "[auth]\nmode = \"jwt\"\nissuer = \"https://idp.example.com\"\naudience = [\"https://gw\"]\njwks_url = \"https://idp.example.com/jwks\"\n";
    let with = format!("{jwt}{}", jag.replace("[upstream.user_auth.id_jag]", "exchange = true\n[upstream.user_auth.id_jag]"));
    let ua = parse(&with).expect("enterprise-managed per caller").upstreams[0].user_auth.clone().expect("user_auth");
    assert_eq!(ua.id_jag, Some(("gw-at-docs".to_string(), Some("s3cret".to_string()))));
    let oauth_with_header = up.replace("kind = \"api_key\"\n", "header = \"X-Api-Key\"\n");
    assert!(parse(&oauth_with_header).unwrap_err().0.contains("describe an API key"));
    assert!(parse(&up.replace("api_key", "saml")).unwrap_err().0.contains("oauth or api_key"));
}

#[test]
fn assertion_grants_need_their_assertion_and_identity_provider() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jwt = dir.path().join("workload.jwt");
    std::fs::write(&jwt, "a.b.c").expect("write");
    let up = "[[upstream]]\nid = \"svc\"\nurl = \"https://svc.example.com/mcp\"\n[upstream.oauth]\nclient_id = \"gw\"\n";
    let wif = format!("{up}grant = \"jwt_bearer\"\nassertion = {{ file = {:?} }}\n", jwt.display().to_string());
    let c = parse(&wif).expect("workload identity");
    let o = c.upstreams[0].oauth.clone().expect("oauth");
    assert_eq!(o.client_auth, super::ClientAuthMethod::None, "no secret: a public client");
    assert_eq!(o.grant, super::OAuthGrant::JwtBearer { assertion: super::Assertion::File(jwt.clone()) });
    let jag = format!(
        "{up}grant = \"id_jag\"\nassertion = {{ file = {:?} }}\nclient_secret = {{ env = \"CALC_TOKEN\" }}\nidp_token_url = \"https://idp.example.com/token\"\nidp_client_id = \"gw-at-idp\"\n",
        jwt.display().to_string()
    );
    let o = parse(&jag).expect("enterprise-managed").upstreams[0].oauth.clone().expect("oauth");
    assert!(matches!(&o.grant, super::OAuthGrant::IdJag { idp, .. } if idp.client_id == "gw-at-idp"));
    assert_eq!(o.client_auth, super::ClientAuthMethod::Basic);
    for (config, says) in [
        (format!("{up}grant = \"jwt_bearer\"\n"), "presents an assertion"),
        (format!("{up}grant = \"id_jag\"\nassertion = {{ file = {:?} }}\n", jwt.display().to_string()), "idp_token_url"),
        (format!("{up}grant = \"jwt_bearer\"\nassertion = {{ file = \"/nonexistent/jwt\" }}\n"), "cannot read"),
        (format!("{up}client_secret = {{ env = \"CALC_TOKEN\" }}\nidp_client_id = \"x\"\n"), "belongs to grant"),
        (format!("{up}\n"), "client_credentials grant authenticates"),
        (format!("{up}grant = \"password\"\n"), "not a grant"),
        (format!("{jag}token_url = \"https://as.example.com/token\"\n"), "only discovery tells"),
        (
            format!(
                "{up}grant = \"id_jag\"\nassertion = {{ file = {:?} }}\nidp_token_url = \"http://idp.example.com/token\"\nidp_client_id = \"x\"\n",
                jwt.display().to_string()
            ),
            "https",
        ),
    ] {
        let e = parse(&config).unwrap_err().0;
        assert!(e.contains(says), "{config}\n{e}");
    }
}

#[test]
fn a_sandbox_says_what_a_command_may_reach() {
    let up = "[[upstream]]\nid = \"notes\"\ncommand = [\"node\", \"server.js\"]\n";
    let c =
        parse(&format!("{up}[upstream.sandbox]\nwrite = [\"/srv/notes\"]\nnetwork = [5432, 443]\nmemory = \"1GiB\"\n")).expect("sandbox");
    let TransportConfig::Stdio { sandbox: Some(s), .. } = &c.upstreams[0].transport else { panic!("a sandbox") };
    assert_eq!(s.network, super::sandbox::Network::Ports(vec![5432, 443]));
    assert_eq!((s.memory_bytes, s.processes, s.open_files), (1 << 30, 256, 1024));
    assert_eq!(s.write, vec![std::path::PathBuf::from("/srv/notes")]);
    assert!(s.private.ends_with(".mcpgate-sandbox/notes"));
    let c = parse(&format!("{up}[upstream.sandbox]\nenabled = false\n")).expect("off");
    assert!(matches!(&c.upstreams[0].transport, TransportConfig::Stdio { sandbox: None, .. }));
    for (extra, says) in [
        ("[upstream.sandbox]\nnetwork = \"lan\"\n", "not a network setting"),
        ("[upstream.sandbox]\nnetwork = [70000]\n", "not a TCP port"),
        ("[upstream.sandbox]\nmemory = \"1KiB\"\n", "at least 16MiB"),
        ("[upstream.sandbox]\nread = [\".\"]\n", "would show the gateway's"),
        ("[upstream.sandbox]\nimage = \"x\"\nnetwork = [443]\n", "cannot be limited to ports"),
        ("[upstream.sandbox]\nimage = \"x\"\nruntime = \"lxc\"\n", "docker or podman"),
        ("instances = \"per_caller\"\n", "a sandbox and folder of its own"),
        ("instances = \"per_caller\"\ninstance_idle = \"soon\"\n[upstream.sandbox]\n", "instance_idle"),
        ("max_instances = 3\n", "bound instances"),
    ] {
        let e = parse(&format!("{up}{extra}")).unwrap_err().0;
        assert!(e.contains(says), "{extra}: {e}");
    }
    let c = parse(&format!("{up}instances = \"per_caller\"\nmax_instances = 3\n[upstream.sandbox]\n")).expect("per caller");
    assert!(matches!(c.upstreams[0].instances, super::sandbox::Instances::PerCaller { max: 3, .. }));
    let e = parse("[[upstream]]\nid = \"web\"\nurl = \"https://x.example/mcp\"\n[upstream.sandbox]\n").unwrap_err().0;
    assert!(e.contains("only to command upstreams"), "{e}");
    // An image that starts with '-' would be read by the runtime as one of its own flags
    // (`--privileged`): refused where it is written.
    let e = parse(&format!("{up}[upstream.sandbox]\nimage = \"--privileged\"\n")).unwrap_err().0;
    assert!(e.contains(":5:") && e.contains("upstream.sandbox.image") && e.contains("Fix:"), "{e}");
}

#[test]
fn openapi_upstreams_are_read_and_their_mistakes_explained() {
    let cfg = parse(
        "[[upstream]]\nid = \"pets\"\nopenapi = \"apis/pets.yaml\"\nbase_url = \"https://api.example.com/v1\"\n\
         headers = { Authorization = { env = \"CALC_TOKEN\" } }\n[upstream.operations]\nmethods = [\"get\", \"post\"]\nexclude_tags = [\"admin\"]\n",
    )
    .unwrap();
    let TransportConfig::OpenApi(o) = &cfg.upstreams[0].transport else { panic!("an openapi transport") };
    assert_eq!(o.source, openapi::OpenApiSource::File(PathBuf::from("apis/pets.yaml")));
    assert_eq!(o.base_url.as_ref().map(|u| u.to_string()).as_deref(), Some("https://api.example.com/v1"));
    assert_eq!(o.select.methods, ["GET", "POST"]);
    assert_eq!(o.select.exclude_tags, ["admin"]);
    assert_eq!(cfg.upstreams[0].transport.kind(), "openapi");
    let fetched = parse("[[upstream]]\nid = \"pets\"\nopenapi = \"https://api.example.com/openapi.json\"\n").unwrap();
    assert!(matches!(&fetched.upstreams[0].transport, TransportConfig::OpenApi(o) if matches!(o.source, openapi::OpenApiSource::Url(_))));
    for (text, says) in [
        ("openapi = \"a.yaml\"\nurl = \"http://127.0.0.1:1/mcp\"\n", "openapi and url or command"),
        ("url = \"http://127.0.0.1:1/mcp\"\nbase_url = \"https://x\"\n", "belong to an openapi upstream"),
        ("openapi = \"a.yaml\"\nbase_url = \"ftp://x\"\n", "absolute http(s) URL"),
        ("openapi = \"a.yaml\"\nbase_url = \"https://x/?k=1\"\n", "has a query"),
        ("openapi = \"file:///etc/passwd\"\n", "only http(s) URLs and files"),
        ("openapi = \"a.yaml\"\n[upstream.operations]\nmethods = [\"TRACE\"]\n", "not a method"),
        ("openapi = \"a.yaml\"\ncommand = [\"x\"]\n", "openapi and url or command"),
        ("openapi = \"a.yaml\"\n[upstream.oauth]\nclient_id = \"c\"\nclient_secret = { env = \"CALC_TOKEN\" }\n", "token_url"),
        ("openapi = \"a.yaml\"\n[upstream.user_auth]\nkind = \"api_key\"\n", "named by base_url"),
    ] {
        let err = parse(&format!("[[upstream]]\nid = \"pets\"\n{text}")).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
}

/// docs/configuration.md's `headers` and `caller_headers` rows and docs/auth-and-policy.md say
/// which upstreams take them: `url`, `endpoint` and `openapi` ones do, a command does not.
#[test]
fn headers_and_caller_headers_go_with_url_endpoint_and_openapi_upstreams_as_documented() {
    let caller =
        format!("[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n", "0".repeat(64));
    let credentials = "headers = { X-Key = { env = \"CALC_TOKEN\" } }\n[upstream.caller_headers.alice]\nX-Key = { env = \"CALC_TOKEN\" }\n";
    let transports = [
        ("url", "url = \"http://127.0.0.1:3201/mcp\"\n", ""),
        ("endpoint", "", "[[upstream.endpoint]]\nurl = \"http://127.0.0.1:3201/mcp\"\n"),
        ("openapi", "openapi = \"api.yaml\"\nbase_url = \"http://127.0.0.1:3201\"\n", ""),
    ];
    for (kind, transport, tables) in transports {
        let text = format!("{caller}[[upstream]]\nid = \"a\"\n{transport}{credentials}{tables}");
        let cfg = parse(&text).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!((cfg.upstreams[0].headers.len(), cfg.upstreams[0].caller_headers.len()), (1, 1), "{kind}");
    }
    let command = format!("{caller}[[upstream]]\nid = \"a\"\ncommand = [\"srv\"]\n{credentials}");
    assert!(parse(&command).is_err_and(|e| e.to_string().contains("url, endpoint and openapi upstreams")));
    let reference = include_str!("../../../docs/configuration.md");
    for key in ["headers", "caller_headers"] {
        let row = reference.lines().find(|l| l.starts_with(&format!("| `{key}` |"))).unwrap_or_default();
        assert!(row.contains("Only allowed with `url`, `endpoint` or `openapi`"), "docs/configuration.md, {key}: {row}");
    }
    let guide = include_str!("../../../docs/auth-and-policy.md");
    assert!(guide.contains("`url` upstreams (and pools) and `openapi` upstreams take `caller_headers`"), "docs/auth-and-policy.md");
}
