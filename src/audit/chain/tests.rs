#![cfg(test)] // test-only module: unwrap/expect below are on test data
//! The chain written by the real export (rotations, a restart, checkpoints) and what `verify`
//! says of it untouched and after each kind of tampering.

use super::*;
use crate::audit::CallRecord;
use crate::audit::export::Export;
use std::time::Duration;

fn record(i: usize) -> CallRecord {
    CallRecord {
        ts_ms: i as u64,
        caller: "alice".into(),
        endpoint: "/mcp".into(),
        method: "tools/call".into(),
        item: format!("calc__add{i}"),
        presented: None,
        upstream: "calc".into(),
        outcome: "ok".into(),
        rule: None,
        guard: None,
        reason: None,
        duration_ms: 1,
    }
}

/// An export of `n` records in two runs (a restart between), rotating at 4 KiB, signed.
fn written(dir: &Path, n: usize) -> (Vec<PathBuf>, String) {
    let key = dir.join("audit-signing.pk8");
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
    std::fs::write(&key, pkcs8.as_ref()).unwrap();
    let path = dir.join("audit.jsonl");
    let cfg = crate::config::usage::AuditConfig {
        file: Some(path.clone()),
        max_file_bytes: 4096,
        keep_files: 20,
        signing_key_file: Some(key.clone()),
        checkpoint_every: 7,
        ..Default::default()
    };
    for run in 0..2 {
        let export = Export::start(&cfg).unwrap();
        for i in (run * n / 2)..((run + 1) * n / 2) {
            export.write(&record(i), None);
        }
        assert!(export.close(Duration::from_secs(10)));
    }
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains("audit.jsonl")).collect();
    files = in_order(&files);
    (files, Signer::load(&key).unwrap().public_key())
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p).unwrap().lines().map(String::from).collect()
}

fn rewrite(p: &Path, lines: &[String]) {
    std::fs::write(p, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

#[test]
fn an_untouched_export_verifies_across_rotations_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (files, key) = written(dir.path(), 120);
    assert!(files.len() >= 3, "rotated: {files:?}");
    let v = verify(&files, Some(&key)).expect("verifies");
    assert_eq!((v.records, v.first_seq, v.last_seq), (120, 1, 120));
    assert!(v.checkpoints >= 17, "every 7 records and at each rotation: {v:?}");
    // A verifier holding another key refuses the checkpoints.
    let other = Signer {
        pair: Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap().as_ref()).unwrap(),
    };
    assert!(verify(&files, Some(&other.public_key())).unwrap_err().contains("signature"));
    // Older files rotated away: the rest still verifies, from where it starts.
    let v = verify(&files[1..], Some(&key)).expect("a suffix verifies");
    assert!(v.first_seq > 1);
}

#[test]
fn an_edited_a_removed_and_a_swapped_line_are_each_found() {
    let dir = tempfile::tempdir().unwrap();
    let (files, key) = written(dir.path(), 60);
    let target = files[0].clone();
    let original = lines(&target);
    let records: Vec<usize> = original.iter().enumerate().filter(|(_, l)| !l.contains("\"checkpoint\"")).map(|(i, _)| i).collect();
    let (a, b) = (records[2], records[3]);

    let mut edited = original.clone();
    edited[a] = edited[a].replace("\"outcome\":\"ok\"", "\"outcome\":\"denied\"");
    rewrite(&target, &edited);
    let e = verify(&files, Some(&key)).unwrap_err();
    assert!(e.contains("was edited") && e.contains(&format!(":{}", b + 1)), "{e}");

    let mut removed = original.clone();
    removed.remove(a);
    rewrite(&target, &removed);
    assert!(verify(&files, Some(&key)).unwrap_err().contains("missing: removed"));

    let mut swapped = original.clone();
    swapped.swap(a, b);
    rewrite(&target, &swapped);
    assert!(verify(&files, Some(&key)).unwrap_err().contains("swapped"));

    // The whole chain recomputed after an edit still fails: the checkpoints are signed.
    let mut forged = original.clone();
    let mut prev: Option<String> = None;
    for line in forged.iter_mut() {
        if line.contains("\"checkpoint\"") {
            continue;
        }
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(p) = &prev {
            v["prev"] = p.clone().into();
        }
        if v["item"] == "calc__add2" {
            v["outcome"] = "denied".into();
        }
        *line = v.to_string();
        prev = Some(sha256_hex(line));
    }
    rewrite(&target, &forged);
    let e = verify(&files[..1], Some(&key)).unwrap_err();
    assert!(e.contains("checkpoint"), "{e}");

    rewrite(&target, &original);
    assert!(verify(&files, Some(&key)).is_ok());
}
