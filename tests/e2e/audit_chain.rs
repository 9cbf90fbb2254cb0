//! The audit export as a tamper-evident chain, end to end: a gateway with `[audit]` rotating at a
//! few KiB and a checkpoint key writes its records across two runs; `mcpgate audit verify` passes
//! on the untouched files (every rotation, the restart), and fails, naming the line, on an edited,
//! a deleted and a swapped line. The key `--public-key` takes is the one the documented `openssl`
//! command derives from the signing key.

use crate::harness::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const CALC: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n";

pub(crate) fn verify(files: &[PathBuf], key: Option<&str>) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpgate"));
    cmd.args(["audit", "verify"]).args(files);
    if let Some(k) = key {
        cmd.args(["--public-key", k]);
    }
    let out = cmd.output().expect("run mcpgate audit verify");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string())
}

async fn stop(gw: Gateway) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let mut proc = gw.proc;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while proc.child.try_wait().ok().flatten().is_none() {
        assert!(std::time::Instant::now() < deadline, "the gateway did not exit");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p).expect("read").lines().map(String::from).collect()
}

fn rewrite(p: &Path, lines: &[String]) {
    std::fs::write(p, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write");
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_verify_passes_on_the_files_written_and_finds_each_kind_of_tampering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("audit.pk8");
    let pkcs8 = aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).expect("key");
    std::fs::write(&key, pkcs8.as_ref()).expect("write the key");
    let public = {
        use aws_lc_rs::signature::KeyPair;
        let pair = aws_lc_rs::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("pair");
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pair.public_key().as_ref())
    };
    let audit = dir.path().join("audit.jsonl");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[audit]\nfile = {:?}\nmax_file_size = \"4KB\"\nkeep_files = 50\n\
         signing_key_file = {:?}\ncheckpoint_every = 5\n\n{CALC}",
        audit.display().to_string(),
        key.display().to_string()
    );
    for run in 0..2 {
        let gw = gateway(&config);
        for i in 0..25 {
            let r = call(&gw.url, "calc__add", json!({ "a": i, "b": run })).await;
            assert!(r["result"].is_object(), "{r}");
        }
        stop(gw).await;
    }
    let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("audit.jsonl")))
        .collect();
    assert!(files.len() >= 3, "the export rotated: {files:?}");
    let (code, out) = verify(&files, Some(&public));
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("ok: 50 records (1 to 50)"), "{out}");

    // The oldest rotated file (verify orders the files itself).
    let oldest = files
        .iter()
        .max_by_key(|p| p.extension().and_then(|e| e.to_str()).and_then(|e| e.parse::<u32>().ok()).unwrap_or(0))
        .expect("a file")
        .clone();
    let original = lines(&oldest);
    let records: Vec<usize> = original.iter().enumerate().filter(|(_, l)| !l.contains("\"checkpoint\"")).map(|(i, _)| i).collect();
    let (a, b) = (records[1], records[2]);
    type Tamper = Box<dyn Fn(&mut Vec<String>)>;
    let cases: [(&str, Tamper); 3] = [
        ("edited", Box::new(move |l: &mut Vec<String>| l[a] = l[a].replace("\"outcome\":\"ok\"", "\"outcome\":\"denied\""))),
        (
            "removed",
            Box::new(move |l: &mut Vec<String>| {
                l.remove(a);
            }),
        ),
        ("swapped", Box::new(move |l: &mut Vec<String>| l.swap(a, b))),
    ];
    for (kind, tamper) in cases {
        let mut changed = original.clone();
        tamper(&mut changed);
        rewrite(&oldest, &changed);
        let (code, out) = verify(&files, Some(&public));
        assert_eq!(code, 1, "{kind}: {out}");
        assert!(out.starts_with("broken: ") && out.contains(kind) && out.contains(&*oldest.display().to_string()), "{kind}: {out}");
    }
    rewrite(&oldest, &original);
    assert_eq!(verify(&files, None).0, 0, "restored, it verifies again");
}

/// docs/usage.md and docs/cli.md say which key `--public-key` takes and how to get it from the
/// signing key: the command they quote gives the key the gateway's checkpoints name, and a DER
/// public key is refused with the form that is taken (exit 2), not read as a forged checkpoint.
#[test]
fn the_documented_public_key_command_gives_the_key_verify_takes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let made = Command::new("openssl").args(["genpkey", "-algorithm", "ed25519", "-out", "audit.pem"]).current_dir(dir.path()).status();
    assert!(made.is_ok_and(|s| s.success()), "openssl genpkey");
    let usage = std::fs::read_to_string(repo().join("docs/usage.md")).expect("docs/usage.md");
    let start = usage.find("`openssl pkey -in audit.pem").expect("docs/usage.md quotes the command") + 1;
    let command = &usage[start..start + usage[start..].find('`').expect("the command's end")];
    let cli = std::fs::read_to_string(repo().join("docs/cli.md")).expect("docs/cli.md");
    assert!(cli.contains(&command.replace('|', "\\|")), "docs/cli.md quotes the same command: {command}");
    let out = Command::new("sh").args(["-c", command]).current_dir(dir.path()).output().expect("run the command");
    let derived = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let named = mcpgate::audit::chain::Signer::load(&dir.path().join("audit.pem")).expect("the signing key").public_key();
    assert_eq!(derived, named, "the documented command gives the key the checkpoints name");
    assert_eq!(mcpgate::audit::chain::pinned_key(&derived).map_err(|e| e.to_string()), Ok(named));
    let pem = Command::new("openssl").args(["pkey", "-in", "audit.pem", "-pubout"]).current_dir(dir.path()).output().expect("openssl");
    // The PEM's body: the DER public key (44 bytes) in base64, the likeliest mix-up.
    let der: String = String::from_utf8_lossy(&pem.stdout).lines().filter(|l| !l.starts_with("-----")).collect();
    std::fs::write(dir.path().join("audit.jsonl"), "").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["audit", "verify", "audit.jsonl", "--public-key", &der])
        .current_dir(dir.path())
        .output()
        .expect("run mcpgate audit verify");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("44 bytes once decoded") && err.contains("raw 32-byte Ed25519 public key in standard base64"), "{err}");
}
