//! The state database (`[state]`): replicas sharing a real PostgreSQL 15 (the Debian package,
//! started here on a loopback port with a password, the URL given through the environment) and
//! a real Redis: a consent taken through one replica connects the caller on the other, usage
//! counts from both add up, a pin approved on one applies on the other, and a Redis `FLUSHALL`
//! loses no token and no count. While PostgreSQL is down, calls keep flowing, a new consent is
//! refused with a clear message, and the counts reach the database once it is back. A replica
//! killed with `kill -9` loses nothing it committed, on PostgreSQL and on the embedded SQLite.

use crate::cluster::Redis;
use crate::harness::*;
use crate::identity_cluster::{call_as, consent, link_in};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CALC: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n";
const PASSWORD: &str = "s3cret/with:odd@chars";
pub const PG_ENV: &str = "MCPGATE_TEST_POSTGRES_URL";

/// The folder of PostgreSQL's programs (`initdb`, `postgres`, `pg_ctl`).
fn pg_bin() -> PathBuf {
    let from_env = std::env::var("MCPGATE_POSTGRES_BIN").ok().map(PathBuf::from).filter(|p| p.join("initdb").exists());
    from_env
        .or_else(|| {
            let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
                .filter(|p| p.join("initdb").exists())
                .collect();
            found.sort();
            found.pop()
        })
        .unwrap_or_else(|| {
            panic!("PostgreSQL is missing: run scripts/install-test-deps.sh (scripts/test runs it; on Debian it installs the postgresql package)")
        })
}

/// Who runs PostgreSQL: it refuses root, so as root the `postgres` user the package made.
fn pg_user() -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let root = Command::new("id").arg("-u").output().ok().is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return None;
    }
    Some((id("-u").expect("a postgres user (the Debian package makes one)"), id("-g").expect("its group")))
}

/// A PostgreSQL server of its own, on a loopback port, its data in a temporary folder.
pub struct Postgres {
    proc: Option<Proc>,
    port: u16,
    data: PathBuf,
    user: Option<(u32, u32)>,
    _dir: tempfile::TempDir,
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().expect("tempdir");
        let user = pg_user();
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("password file");
        if let Some((uid, gid)) = user {
            for p in [dir.path(), pwfile.as_path()] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid)).expect("chown to postgres");
            }
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(pg_bin().join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "mcpgate", "-E", "UTF8", "--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()));
        if let Some((uid, gid)) = user {
            initdb.uid(uid).gid(gid);
        }
        let out = initdb.output().expect("run initdb");
        assert!(out.status.success(), "initdb: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let mut pg = Postgres { proc: None, port: free_port(), data, user, _dir: dir };
        pg.up();
        pg
    }

    /// Starts the server (again) and waits until it takes connections.
    pub fn up(&mut self) {
        let mut cmd = Command::new(pg_bin().join("postgres"));
        cmd.arg("-D")
            .arg(&self.data)
            .args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c"])
            .arg(format!("unix_socket_directories={}", self.data.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        let mut child = cmd.spawn().expect("start postgres");
        let stderr = collect_stderr(&mut child, None);
        self.proc = Some(Proc { child, stderr });
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ready = Command::new(pg_bin().join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("postgres did not start:\n{}", self.proc.as_ref().map(Proc::log).unwrap_or_default());
    }

    /// Stops the server (a fast shutdown: connections are cut).
    pub fn down(&mut self) {
        let mut stop = Command::new(pg_bin().join("pg_ctl"));
        stop.arg("-D").arg(&self.data).args(["stop", "-m", "fast", "-w"]).stdout(Stdio::null());
        if let Some((uid, gid)) = self.user {
            stop.uid(uid).gid(gid);
        }
        let _ = stop.status();
        if let Some(mut p) = self.proc.take() {
            let _ = p.child.wait();
        }
    }

    /// Runs `sql` on the database (psql, as the gateway's user).
    pub fn sql(&self, sql: &str) {
        let out =
            Command::new(pg_bin().join("psql")).arg(self.url()).args(["-v", "ON_ERROR_STOP=1", "-c", sql]).output().expect("run psql");
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The URL with its password, as the environment gives it to the gateway.
    pub fn url(&self) -> String {
        let pw: String = form_urlencoded::byte_serialize(PASSWORD.as_bytes()).collect();
        format!("postgres://mcpgate:{pw}@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.down();
    }
}

/// `mcpgate usage --json` on a gateway's configuration, with `env`.
fn usage_report(config: &Path, env: &[(&str, &str)]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["usage", "--json", "--since", "24h", "-c"])
        .arg(config)
        .envs(env.iter().copied())
        .output()
        .expect("run mcpgate usage");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("usage JSON")
}

/// The calls of `caller` to `tool` with outcome `ok` in a report.
fn ok_calls(report: &Value, caller: &str, tool: &str) -> u64 {
    report["lines"]
        .as_array()
        .map(|ls| {
            ls.iter().filter(|l| l["caller"] == caller && l["tool"] == tool).map(|l| l["outcomes"]["ok"].as_u64().unwrap_or(0)).sum::<u64>()
        })
        .unwrap_or(0)
}

async fn adds(url: &str, key: &str, n: usize) {
    for _ in 0..n {
        let r = rpc_with(
            url,
            "tools/call",
            json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 } }),
            &[("authorization", &format!("Bearer {key}"))],
        )
        .await;
        assert_eq!(r.message()["result"]["content"][0]["text"], "3", "{}", r.message());
    }
}

/// A person following a consent link while the database is down: signed in, then refused when
/// the authorization is to start (it must be kept where the browser's return will find it). What
/// the page said.
async fn refused_consent(link: &str, key: &str) -> String {
    let origin = link.split("/oauth/").next().unwrap_or_default().to_string();
    let field = |html: &str, name: &str| {
        let at = html.find(&format!("name=\"{name}\" value=\"")).map(|i| i + name.len() + 15).unwrap_or(0);
        html[at..].split('"').next().unwrap_or_default().to_string()
    };
    let cookie_of = |r: &Resp| {
        r.headers.get("set-cookie").and_then(|v| v.to_str().ok()).and_then(|c| c.split(';').next()).unwrap_or_default().to_string()
    };
    let form = "application/x-www-form-urlencoded";
    let page = get(link).await.expect("the sign-in page");
    let html = String::from_utf8_lossy(&page.body).to_string();
    let nonce = cookie_of(&page);
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant", &field(&html, "grant"))
        .append_pair("csrf", &field(&html, "csrf"))
        .append_pair("key", key)
        .finish();
    let signed = post_raw(&format!("{origin}/oauth/signin"), &[("Content-Type", form), ("Cookie", &nonce)], body).await;
    assert_eq!(signed.status, 303, "{}", String::from_utf8_lossy(&signed.body));
    let cookie = format!("{nonce}; {}", cookie_of(&signed));
    let page = crate::identity_cluster::get_with(link, &[("Cookie", &cookie)]).await;
    let html = String::from_utf8_lossy(&page.body).to_string();
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant", &field(&html, "grant"))
        .append_pair("csrf", &field(&html, "csrf"))
        .finish();
    let posted = post_raw(&format!("{origin}/oauth/connect"), &[("Content-Type", form), ("Cookie", &cookie)], body).await;
    assert!(posted.status >= 400, "refused: {} {}", posted.status, String::from_utf8_lossy(&posted.body));
    String::from_utf8_lossy(&posted.body).to_string()
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    panic!("{what}: not within 15 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_share_tokens_counts_and_pins_in_postgresql_and_a_redis_flush_loses_nothing() {
    let mut pg = Postgres::start();
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut idp = Command::new(python());
    idp.arg(repo().join("tests/py/idp.py")).arg("0").arg(dir.path().join("token-requests"));
    let (_idp, issuer) = crate::identity::listening(idp, "the identity provider");
    let (_rs, rs_url) = crate::identity::protected_server(&issuer, &dir.path().join("seen"));
    let public = free_port();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[state]\npostgres_env = \"{PG_ENV}\"\n\n[cluster]\nredis = \"{}\"\n\n\
         [usage]\nflush_interval = \"200ms\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\nadmin = true\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [identity]\npublic_url = \"http://127.0.0.1:{public}\"\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n[upstream.user_auth]\n\n{CALC}",
        redis.url(),
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
    );
    let key = "6e".repeat(32);
    let pg_url = pg.url();
    let env = [("MCPGATE_TOKEN_KEY", key.as_str()), (PG_ENV, pg_url.as_str())];
    let b = gateway_on_port(&config, public, &env);
    let a = gateway_with_env(&config, &env);
    assert!(!a.proc.log().contains(PASSWORD), "the password is never logged");

    // Alice consents through replica a's link; the redirect comes back to replica b.
    let first = call_as(&a.url, "alice-key", "files__connect").await;
    let page = consent(&link_in(&text_of(&first)), "alice-key", &b.base).await;
    assert!(page.contains("Connected files"), "{page}");
    // Connected on both replicas: the tokens are in the database they share.
    for gw in [&a, &b] {
        wait_for("alice connected on both replicas", async || {
            call_as(&gw.url, "alice-key", "files__whoami").await["result"]["content"][0]["text"] == "you are alice"
        })
        .await;
    }

    // Counts from both replicas add up.
    adds(&a.url, "alice-key", 3).await;
    adds(&b.url, "alice-key", 4).await;
    wait_for("7 counted calls", async || ok_calls(&usage_report(&a.config_path, &env), "alice", "calc__add") == 7).await;

    // Redis forgets everything: no token and no count is lost.
    redis.flushall();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for gw in [&a, &b] {
        let who = call_as(&gw.url, "alice-key", "files__whoami").await;
        assert_eq!(who["result"]["content"][0]["text"], "you are alice", "{who}");
    }
    assert_eq!(ok_calls(&usage_report(&b.config_path, &env), "alice", "calc__add"), 7);

    // PostgreSQL goes down: calls keep flowing (tokens are read from memory), a new consent is
    // refused with the reason, and the counts wait for the database.
    pg.down();
    adds(&a.url, "alice-key", 2).await;
    let who = call_as(&b.url, "alice-key", "files__whoami").await;
    assert_eq!(who["result"]["content"][0]["text"], "you are alice", "{who}");
    let bob = call_as(&b.url, "bob-key", "files__connect").await;
    let link = link_in(&text_of(&bob));
    let said = refused_consent(&link, "bob-key").await;
    assert!(said.contains("could not be kept") && said.contains("unreachable"), "refused while the database is down: {said}");
    pg.up();
    wait_for("the counts made while the database was down", async || {
        ok_calls(&usage_report(&a.config_path, &env), "alice", "calc__add") == 9
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pin_approved_on_one_replica_applies_on_the_other() {
    let pg = Postgres::start();
    let (_up, url) = py_script_http("tests/py/changing_server.py", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[state]\npostgres_env = \"{PG_ENV}\"\n\n[console]\nenabled = true\n\n\
         [pins]\nmode = \"enforce\"\n\n[[upstream]]\nid = \"chg\"\nurl = \"{url}\"\n"
    );
    let pg_url = pg.url();
    let env = [(PG_ENV, pg_url.as_str())];
    let a = gateway_with_env(&config, &env);
    let b = gateway_with_env(&config, &env);
    for gw in [&a, &b] {
        assert!(!tool_names(&gw.url).await.contains(&"chg__base".to_string()), "nothing is approved yet");
    }
    let key = console_key(&a);
    let state: Value = get_as(&format!("{}/console/api/state", a.base), &key).await.json();
    let held = state["held"].as_array().and_then(|h| h.iter().find(|t| t["tool"] == "base")).cloned().expect("base is held");
    let approved = post_raw(
        &format!("{}/console/api/pins/approve", a.base),
        &[("Content-Type", "application/json"), ("Authorization", &format!("Bearer {key}"))],
        json!({ "upstream": "chg", "tool": "base", "fingerprint": held["fingerprint"] }).to_string(),
    )
    .await;
    assert_eq!(approved.status, 200, "{}", String::from_utf8_lossy(&approved.body));
    // Replica b has no lock file of its own: the approval reaches it through the database.
    assert!(!b.config_path.with_file_name("mcpgate-pins.json").exists());
    wait_for("the approval applied on replica b", async || tool_names(&b.url).await.contains(&"chg__base".to_string())).await;
    // And a replica started later.
    let c = gateway_with_env(&config, &env);
    assert!(tool_names(&c.url).await.contains(&"chg__base".to_string()));
}

/// Calls, a flush, then `kill -9` while more calls are in flight: what was committed is there
/// when a new process opens the same state.
async fn killed_during_writes_loses_nothing_committed(config: &str, env: &[(&str, &str)]) -> (Gateway, PathBuf) {
    let mut a = gateway_with_env(config, env);
    adds(&a.url, "alice-key", 5).await;
    let path = a.config_path.clone();
    wait_for("5 counted calls", async || ok_calls(&usage_report(&path, env), "alice", "calc__add") >= 5).await;
    let (url, stop) = (a.url.clone(), std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let flag = stop.clone();
    let writer = tokio::spawn(async move {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = rpc_with(
                &url,
                "tools/call",
                json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 } }),
                &[("authorization", "Bearer alice-key")],
            )
            .await;
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    // SIGKILL: no shutdown, no final flush.
    a.proc.kill();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = writer.await;
    let after = ok_calls(&usage_report(&path, env), "alice", "calc__add");
    assert!(after >= 5, "the committed counts are kept: {after}");
    (a, path)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_during_writes_loses_nothing_committed_on_postgresql_and_sqlite() {
    let pg = Postgres::start();
    let callers = format!(
        "[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n",
        crate::callers::hash("alice-key")
    );
    let pg_url = pg.url();
    let env = [(PG_ENV, pg_url.as_str())];
    let on_pg = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[state]\npostgres_env = \"{PG_ENV}\"\n\n[usage]\nflush_interval = \"100ms\"\n\n{callers}{CALC}"
    );
    let (_gone, path) = killed_during_writes_loses_nothing_committed(&on_pg, &env).await;
    // Another replica on the same database keeps counting from there.
    let before = ok_calls(&usage_report(&path, &env), "alice", "calc__add");
    let c = gateway_with_env(&on_pg, &env);
    adds(&c.url, "alice-key", 2).await;
    wait_for("the new replica's counts added", async || ok_calls(&usage_report(&c.config_path, &env), "alice", "calc__add") == before + 2)
        .await;

    // The embedded SQLite file (kept outside the gateway's folder, so a new process finds it): the
    // same, and the gateway started again on it counts on.
    let folder = tempfile::tempdir().expect("tempdir");
    let sqlite = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[state]\npath = {:?}\n\n[usage]\nflush_interval = \"100ms\"\n\n{callers}{CALC}",
        folder.path().join("state.db")
    );
    let (_gone, path) = killed_during_writes_loses_nothing_committed(&sqlite, &[]).await;
    let before = ok_calls(&usage_report(&path, &[]), "alice", "calc__add");
    let again = gateway(&sqlite);
    adds(&again.url, "alice-key", 2).await;
    wait_for("counted on after the restart", async || ok_calls(&usage_report(&again.config_path, &[]), "alice", "calc__add") == before + 2)
        .await;
}

/// `mcpgate migrate` on the files an earlier release kept (the JSON vault and usage store, as
/// their file backends still write them): carried over once, the files kept, safe to run again;
/// then `mcpgate tokens list -c` and `mcpgate usage` read the database offline.
#[tokio::test(flavor = "multi_thread")]
async fn migrate_carries_the_old_files_over_once_and_the_database_reads_offline() {
    use mcpgate::identity::vault::{TokenSet, Vault, VaultKey};
    let dir = tempfile::tempdir().expect("tempdir");
    let key_hex = "7a".repeat(32);
    // The files: a vault with one connected account, a usage store with 4 calls.
    let sealer = std::sync::Arc::new(mcpgate_model::token::Sealer::load(Some(key_hex.clone()), &[]).expect("the token key"));
    let vault = Vault::open(sealer, dir.path().join("mcpgate-vault.json")).expect("the old vault");
    let account = VaultKey { caller: "alice".into(), upstream: "files".into(), issuer: "https://as.example.com".into() };
    let tokens = TokenSet {
        access_token: "at-never-printed".into(),
        refresh_token: Some("rt-never-printed".into()),
        expires_at: Some(mcpgate::identity::vault::now() + 3600),
        scope: Some("read".into()),
        issued_at: mcpgate::identity::vault::now(),
        client: None,
        dpop: None,
    };
    vault.put(&account, &tokens).expect("kept in the old file");
    let usage_cfg = mcpgate_config::usage::UsageConfig {
        store: dir.path().join("mcpgate-usage.json"),
        ..mcpgate_config::usage::UsageConfig::default()
    };
    let old = mcpgate::usage::Usage::open(&usage_cfg, None, None);
    for _ in 0..4 {
        old.record(mcpgate::usage::RowRef { caller: "alice", tool: "calc__add", upstream: "calc", endpoint: "-", outcome: "ok" }, 3);
    }
    old.flush().await;
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[identity]\npublic_url = \"http://127.0.0.1:8811\"\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.user_auth]\n",
    )
    .expect("config");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
            .args(args)
            .arg("-c")
            .arg(&config)
            .env("MCPGATE_TOKEN_KEY", &key_hex)
            .output()
            .expect("run mcpgate");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{args:?}: {text}");
        text
    };
    let first = run(&["migrate"]);
    assert!(first.contains("1 connected account(s)") && first.contains("1 entries from"), "{first}");
    assert!(first.contains("1 hours from"), "{first}");
    let second = run(&["migrate"]);
    assert!(second.contains("1 connected account(s)"), "nothing carried twice: {second}");
    assert!(
        second.matches("nothing carried over this time").count() == 2 && !second.contains("carried over: 1"),
        "the second run says it carried nothing over: {second}"
    );
    assert!(dir.path().join("mcpgate-vault.json").exists() && dir.path().join("mcpgate-usage.json").exists(), "the old files are kept");
    let listed = run(&["tokens", "list"]);
    assert!(listed.contains("alice") && listed.contains("files") && listed.contains("read"), "{listed}");
    assert!(!listed.contains("never-printed"), "{listed}");
    // Without the token key the accounts cannot be read: a failure that says so, not "none".
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["tokens", "list", "-c"])
        .arg(&config)
        .env_remove("MCPGATE_TOKEN_KEY")
        .output()
        .expect("run mcpgate");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && !text.contains("no connected accounts"), "{text}");
    assert!(text.contains("keeps 1 connected account(s)") && text.contains("MCPGATE_TOKEN_KEY"), "{text}");
    assert_eq!(ok_calls(&usage_report(&config, &[]), "alice", "calc__add"), 4, "counted once, however often migrate ran");
}
