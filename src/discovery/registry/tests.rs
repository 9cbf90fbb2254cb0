use super::*;

fn config(text: &str) -> Config {
    Config::parse(text, std::path::Path::new("gateway.toml"), None, &|_| None).expect("config")
}

const GATEWAY: &str = "[discovery]\npublisher = \"com.example\"\nname = \"gateway\"\n\n\
    [[discovery.icons]]\nsrc = \"https://example.com/icon.png\"\nmime_type = \"image/png\"\nsizes = [\"48x48\"]\n\n\
    [[discovery.icons]]\nsrc = \"https://example.com/icon.gif\"\nmime_type = \"image/gif\"\n\n\
    [[upstream]]\nid = \"secretive\"\nurl = \"http://10.1.2.3:9/mcp\"\n\n\
    [[endpoint]]\npath = \"/eng\"\ntitle = \"Engineering\"\ninclude = [\"secretive__*\"]\n\n\
    [[endpoint]]\npath = \"/ops\"\ninclude = [\"secretive__*\"]\n";

fn view(path: &str, tools: &[&str]) -> View {
    View { path: path.into(), tools: tools.iter().map(|t| t.to_string()).collect(), ..View::default() }
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn names(list: &Value) -> Vec<&str> {
    list["servers"].as_array().map(|s| s.iter().filter_map(|e| e["server"]["name"].as_str()).collect()).unwrap_or_default()
}

#[test]
fn routes_take_encoded_and_plain_names() {
    assert_eq!(route("/v0.1/servers"), Some(Route::List));
    assert_eq!(route("/v0.1/servers/com.example%2Fgateway/versions"), Some(Route::Versions("com.example/gateway".into())));
    assert_eq!(
        route("/v0.1/servers/com.example%2fgateway/versions/latest"),
        Some(Route::Version("com.example/gateway".into(), "latest".into()))
    );
    assert_eq!(
        route("/v0.1/servers/com.example/versions/versions/1.0.0%2Bbuild"),
        Some(Route::Version("com.example/versions".into(), "1.0.0+build".into()))
    );
    assert_eq!(route("/v0.1/servers/com.example%2Fgateway"), None);
    assert_eq!(route("/v0.1/servers/x/versions/"), None);
    assert!(owns("/v0.1/servers") && owns("/v0.1/servers/x") && !owns("/v0.1/serversx") && !owns("/v0.1"));
}

#[test]
fn queries_are_read_or_refused() {
    let q = Query::parse(Some("limit=500&search=Eng&version=latest&updated_since=2025-08-07T13%3A15%3A04.280Z&other=1")).expect("query");
    assert_eq!((q.limit, q.search.as_deref(), q.version.as_deref()), (MAX_LIMIT, Some("Eng"), Some("latest")));
    assert_eq!(q.updated_since, Some(at(1_754_572_504) + Duration::from_millis(280)));
    assert_eq!(Query::parse(None).expect("no query").limit, DEFAULT_LIMIT);
    for bad in ["limit=0", "limit=-1", "limit=ten", "updated_since=yesterday", "updated_since=2025-08-07"] {
        let e = Query::parse(Some(bad)).expect_err(bad);
        assert_eq!(e.status(), http::StatusCode::BAD_REQUEST, "{bad}: {e}");
    }
    assert_eq!(rfc3339("2025-08-07T15:15:04+02:00"), Some(at(1_754_572_504)));
    assert_eq!(rfc3339("2025-08-07t11:15:04-02:00"), Some(at(1_754_572_504)));
    assert_eq!(rfc3339("2025-08-07T13:15:04+00:00"), Some(at(1_754_572_504)));
    assert_eq!(rfc3339("2025-08-07T13:15:04+25:00"), None);
    assert_eq!(rfc3339("2025-08-07T13:15:0é+02:00"), None);
}

#[test]
fn a_server_is_its_card_with_the_callers_view_and_no_upstream() {
    let cfg = config(GATEWAY);
    let reg = Registry { cfg: &cfg, base: "https://gw.example.com", loaded_at: at(1_700_000_000) };
    let s = reg.server(&view("/eng", &["secretive__a", "secretive__b"])).expect("an endpoint");
    let card = card::card(&cfg, "https://gw.example.com", "/eng").expect("its card");
    for key in ["name", "title", "description", "version", "remotes"] {
        assert_eq!(s["server"][key], card[key], "{key}");
    }
    assert!(s["server"].get("$schema").is_none(), "a card's schema is not a server.json's");
    assert_eq!(s["server"]["icons"].as_array().map(Vec::len), Some(1), "the registry takes no GIF: {s}");
    let official = &s["_meta"][OFFICIAL];
    assert_eq!((official["status"].as_str(), official["isLatest"].as_bool()), (Some("active"), Some(true)));
    assert_eq!(official["updatedAt"], "2023-11-14T22:13:20.000Z");
    assert_eq!(s["_meta"][VIEW]["tools"], 2);
    assert_eq!(s["_meta"][VIEW]["toolNames"], json!(["secretive__a", "secretive__b"]));
    let text = s.to_string();
    assert!(!text.contains("10.1.2.3") && !text.contains("http://10"), "{text}");
    assert!(reg.server(&view("/nope", &[])).is_none());

    let mut many = view("/mcp", &[]);
    many.tools = (0..MAX_NAMES + 5).map(|i| format!("t{i}")).collect();
    let meta = &reg.server(&many).expect("the root")["_meta"][VIEW];
    assert_eq!((meta["tools"].as_u64(), meta["toolNames"].as_array().map(Vec::len)), (Some(MAX_NAMES as u64 + 5), Some(MAX_NAMES)));
    assert_eq!(meta["toolNamesTruncated"], true);
}

#[test]
fn a_caller_sees_the_endpoints_it_may_use_by_name() {
    let cfg = config(GATEWAY);
    let reg = Registry { cfg: &cfg, base: "http://127.0.0.1:1", loaded_at: at(1_700_000_000) };
    let sealer = Sealer::random().expect("a key");
    let all = Query::parse(None).expect("query");
    // A restricted caller who may use nothing at the root and at /ops sees /eng alone.
    let views = [view("/mcp", &[]), view("/eng", &["secretive__a"]), view("/ops", &[])];
    assert_eq!(names(&reg.list(&views, &all, &sealer).expect("list")), ["com.example/eng"]);
    // One who may use anything sees every endpoint, by name, even while they serve nothing.
    let open: Vec<View> = views.iter().map(|v| View { unrestricted: true, ..v.clone() }).collect();
    let list = reg.list(&open, &all, &sealer).expect("list");
    assert_eq!(names(&list), ["com.example/eng", "com.example/gateway", "com.example/ops"]);
    assert_eq!(list["metadata"], json!({ "count": 3 }), "no cursor on the last page");

    let searched = Query { search: Some("EN".into()), ..all.clone() };
    assert_eq!(names(&reg.list(&open, &searched, &sealer).expect("search")), ["com.example/eng"]);
    let future = Query { updated_since: Some(at(1_800_000_000)), ..all.clone() };
    assert_eq!(names(&reg.list(&open, &future, &sealer).expect("updated since")), Vec::<&str>::new());
    let past = Query { updated_since: Some(at(1_600_000_000)), ..all.clone() };
    assert_eq!(names(&reg.list(&open, &past, &sealer).expect("updated since")).len(), 3);
    let other = Query { version: Some("0.0.0-not".into()), ..all.clone() };
    assert!(names(&reg.list(&open, &other, &sealer).expect("version")).is_empty());
    let exact = Query { version: Some(env!("CARGO_PKG_VERSION").into()), ..all.clone() };
    assert_eq!(names(&reg.list(&open, &exact, &sealer).expect("version")).len(), 3);

    assert_eq!(reg.version(&open, "com.example/gateway", "latest").expect("latest")["server"]["name"], "com.example/gateway");
    assert!(reg.version(&open, "com.example/gateway", env!("CARGO_PKG_VERSION")).is_ok());
    for (name, version) in [("com.example/gateway", "9.9.9"), ("com.example/nope", "latest"), ("com.example/ops", "latest")] {
        let e = reg.version(&views, name, version).expect_err(name);
        assert_eq!((e.status(), e.body()), (http::StatusCode::NOT_FOUND, json!({ "error": "Server not found" })));
    }
    assert_eq!(reg.versions(&views, "com.example/eng").expect("versions")["metadata"]["count"], 1);
    assert!(reg.versions(&views, "com.example/ops").is_err(), "hidden like a missing one");
}

#[test]
fn pages_follow_sealed_cursors() {
    let cfg = config(GATEWAY);
    let reg = Registry { cfg: &cfg, base: "http://127.0.0.1:1", loaded_at: at(1_700_000_000) };
    let sealer = Sealer::random().expect("a key");
    let views: Vec<View> = ["/mcp", "/eng", "/ops"].iter().map(|p| View { unrestricted: true, ..view(p, &[]) }).collect();
    let mut q = Query { limit: 2, ..Query::parse(None).expect("query") };
    let first = reg.list(&views, &q, &sealer).expect("page 1");
    assert_eq!(names(&first), ["com.example/eng", "com.example/gateway"]);
    assert_eq!(first["metadata"]["count"], 2);
    let cursor = first["metadata"]["nextCursor"].as_str().expect("a cursor").to_string();
    assert!(!cursor.contains("gateway"), "opaque: {cursor}");
    q.cursor = Some(cursor.clone());
    let second = reg.list(&views, &q, &sealer).expect("page 2");
    assert_eq!(names(&second), ["com.example/ops"]);
    assert!(second["metadata"].get("nextCursor").is_none());
    for bad in ["nope", &format!("{cursor}x")] {
        q.cursor = Some(bad.to_string());
        let e = reg.list(&views, &q, &sealer).expect_err(bad);
        assert_eq!(e.status(), http::StatusCode::BAD_REQUEST);
    }
    q.cursor = Some(cursor);
    assert!(reg.list(&views, &q, &Sealer::random().expect("another key")).is_err(), "another gateway's cursor");
}
