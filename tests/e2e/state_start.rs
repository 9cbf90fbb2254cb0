//! Nothing kept is silently reset: a state database that is there but cannot be read stops the
//! gateway's start with the reason and what to do (restore a backup, or `--fresh-state`), instead
//! of serving on empty state that would give back spent quotas and forget accounts and
//! approvals. The same for PostgreSQL that cannot be reached, and for a schema that lost a table.

use crate::harness::*;
use crate::state_db::{PG_ENV, Postgres};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `mcpgate run` on `config` with `args` and `env`: its exit code and what it wrote, or
/// `None` when it was still running (serving) after 20 s.
fn start(config: &str, args: &[&str], env: &[(&str, &str)]) -> Option<(i32, String)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config).expect("config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpgate"));
    cmd.arg("run").arg("-c").arg(&path).args(args).envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start mcpgate");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().expect("output");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            return Some((status.code().unwrap_or(-1), text));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn a_state_file_that_cannot_be_read_stops_the_start_until_told_to_begin_anew() {
    let folder = tempfile::tempdir().expect("tempdir");
    let db = folder.path().join("state.db");
    std::fs::write(&db, "this is not a database, it was overwritten by mistake\n".repeat(100)).expect("garbage");
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[state]\npath = {db:?}\n");
    let (code, out) = start(&config, &[], &[]).expect("the gateway stopped instead of serving on empty state");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("not a database") && out.contains("backup") && out.contains("--fresh-state"), "{out}");
    assert!(std::fs::read(&db).expect("kept").starts_with(b"this is not"), "the file is left as it was");

    // Told to begin anew: the file is moved aside, an empty database is begun, the gateway serves.
    let gw = std::thread::spawn({
        let config = config.clone();
        move || start(&config, &["--fresh-state"], &[])
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let aside = loop {
        let found = std::fs::read_dir(folder.path())
            .expect("folder")
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().contains("unreadable"));
        if let Some(found) = found {
            break found.path();
        }
        assert!(Instant::now() < deadline, "nothing moved aside");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(std::fs::read(&aside).expect("aside").starts_with(b"this is not"));
    assert!(gw.join().expect("thread").is_none(), "with --fresh-state the gateway serves");
}

#[test]
fn postgresql_out_of_reach_or_with_a_damaged_schema_stops_the_start() {
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[state]\npostgres_env = \"{PG_ENV}\"\ntimeout = \"2s\"\n");
    let nowhere = format!("postgres://mcpgate:x@127.0.0.1:{}/postgres", free_port());
    let (code, out) = start(&config, &[], &[(PG_ENV, nowhere.as_str())]).expect("stopped");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("state database") && !out.contains(":x@"), "the reason, without the password: {out}");

    let pg = Postgres::start();
    let url = pg.url();
    let env = [(PG_ENV, url.as_str())];
    drop(gateway_with_env(&config, &env));
    pg.sql("DROP TABLE quota_count");
    let (code, out) = start(&config, &[], &env).expect("stopped");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("quota_count cannot be read") && out.contains("backup"), "{out}");
}
