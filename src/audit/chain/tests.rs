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
        program: None,
        duration_ms: 1,
    }
}

/// The export's settings in `dir`: rotating at 4 KiB, signed every 7 records.
fn settings(dir: &Path) -> mcpgate_config::usage::AuditConfig {
    let key = dir.join("audit-signing.pk8");
    if !key.exists() {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
        std::fs::write(&key, pkcs8.as_ref()).unwrap();
    }
    mcpgate_config::usage::AuditConfig {
        file: Some(dir.join("audit.jsonl")),
        max_file_bytes: 4096,
        keep_files: 20,
        signing_key_file: Some(key),
        checkpoint_every: 7,
        ..Default::default()
    }
}

/// One run of the export writing records `from..to`.
fn run(dir: &Path, from: usize, to: usize) {
    let export = Export::start(&settings(dir)).unwrap();
    for i in from..to {
        export.write(&record(i), None);
    }
    assert!(export.close(Duration::from_secs(10)));
}

/// The export's files in `dir`, oldest first, and the checkpoints' public key.
fn files_of(dir: &Path) -> (Vec<PathBuf>, String) {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("audit.jsonl")))
        .collect();
    (in_order(&files), Signer::load(&dir.join("audit-signing.pk8")).unwrap().public_key())
}

/// An export of `n` records in two runs (a restart between), rotating at 4 KiB, signed.
fn written(dir: &Path, n: usize) -> (Vec<PathBuf>, String) {
    run(dir, 0, n / 2);
    run(dir, n / 2, n);
    files_of(dir)
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
    assert!(verify(&files, Some(&other.public_key())).unwrap_err().to_string().contains("signature"));
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
    let e = verify(&files, Some(&key)).unwrap_err().to_string();
    assert!(e.contains("was edited") && e.contains(&format!(":{}", b + 1)), "{e}");

    let mut removed = original.clone();
    removed.remove(a);
    rewrite(&target, &removed);
    assert!(verify(&files, Some(&key)).unwrap_err().to_string().contains("missing: removed"));

    let mut swapped = original.clone();
    swapped.swap(a, b);
    rewrite(&target, &swapped);
    assert!(verify(&files, Some(&key)).unwrap_err().to_string().contains("swapped"));

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
    let e = verify(&files[..1], Some(&key)).unwrap_err().to_string();
    assert!(e.contains("checkpoint"), "{e}");

    rewrite(&target, &original);
    assert!(verify(&files, Some(&key)).is_ok());
}

/// Records cut from the head of the oldest file, up to a checkpoint: the checkpoint left at the
/// top names a record that is gone, and verify says the oldest records were removed.
#[test]
fn the_oldest_records_cut_away_are_found_by_the_checkpoint_left_at_the_top() {
    let dir = tempfile::tempdir().unwrap();
    let (files, key) = written(dir.path(), 60);
    let original = lines(&files[0]);
    let first_checkpoint = original.iter().position(|l| l.contains("\"checkpoint\"")).unwrap();
    rewrite(&files[0], &original[first_checkpoint..]);
    for key in [Some(key.as_str()), None] {
        let e = verify(&files, key).unwrap_err().to_string();
        assert!(e.contains("the oldest records, up to record 7, were removed") && e.contains(":1:"), "{e}");
    }
    // Cut just past that checkpoint, the rest is a chain that starts later, as after a rotation:
    // what verify cannot tell apart (see docs/usage.md), it says where the files start.
    rewrite(&files[0], &original[first_checkpoint + 1..]);
    assert_eq!(verify(&files, Some(&key)).map(|v| v.first_seq).map_err(|e| e.to_string()), Ok(8));
}

/// A chain recomputed with every checkpoint dropped holds together, but not for a verifier that
/// pins the key: with --public-key, no signed checkpoint is a failure.
#[test]
fn a_chain_without_a_signed_checkpoint_fails_when_the_key_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let (files, key) = written(dir.path(), 40);
    let mut prev = GENESIS.to_string();
    let mut rechained = Vec::new();
    for file in &files {
        for line in lines(file).iter().filter(|l| !l.contains("\"checkpoint\"")) {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            v["prev"] = prev.clone().into();
            if v["item"] == "calc__add3" {
                v["outcome"] = "denied".into();
            }
            let l = v.to_string();
            prev = sha256_hex(&l);
            rechained.push(l);
        }
    }
    let forged = dir.path().join("forged").join("audit.jsonl");
    std::fs::create_dir_all(forged.parent().unwrap()).unwrap();
    rewrite(&forged, &rechained);
    let e = verify(std::slice::from_ref(&forged), Some(&key)).unwrap_err().to_string();
    assert!(e.contains("no signed checkpoint in 40 records"), "{e}");
    let v = verify(std::slice::from_ref(&forged), None).expect("without a key it only holds together");
    assert_eq!((v.records, v.checkpoints), (40, 0));
    // The untouched export: signed, and says how many records no signature covers yet.
    let v = verify(&files, Some(&key)).unwrap();
    assert!(v.checkpoints > 0 && v.unsigned == 0, "closed with a checkpoint: {v:?}");
}

/// A line a crash cut short is said to be one: the last line is an error of its own (not
/// "edited"); once the gateway wrote on after it, the chain continues across it and verify
/// reports it.
#[test]
fn a_line_cut_short_by_a_crash_is_told_apart_from_an_edit() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 0, 10);
    let live = dir.path().join("audit.jsonl");
    let text = std::fs::read_to_string(&live).unwrap();
    let mut records: Vec<&str> = text.lines().filter(|l| !l.contains("\"checkpoint\"")).collect();
    // The last record, half written, as a crash leaves it (no newline).
    let last = records.pop().unwrap();
    let torn = format!("{}\n{}", records.join("\n"), &last[..last.len() / 2]);
    std::fs::write(&live, &torn).unwrap();
    let (files, key) = files_of(dir.path());
    let e = verify(&files, Some(&key)).unwrap_err().to_string();
    assert!(e.contains(":10: the last record is incomplete (a crash while writing?)"), "{e}");
    // A restart resumes after the last whole record, on a line of its own.
    run(dir.path(), 10, 20);
    let (files, key) = files_of(dir.path());
    let v = verify(&files, Some(&key)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.incomplete.len(), 1, "{v:?}");
    assert!(v.incomplete[0].ends_with(":10"), "{v:?}");
    assert_eq!((v.first_seq, v.last_seq), (1, 19), "the torn record's number is used again");
    // An edit is still an edit.
    let mut edited = lines(&live);
    let record = edited.iter().position(|l| l.contains("\"outcome\":\"ok\"")).unwrap();
    edited[record] = edited[record].replace("\"outcome\":\"ok\"", "\"outcome\":\"ok\"}x");
    rewrite(&live, &edited);
    assert!(verify(&files, Some(&key)).unwrap_err().to_string().contains("edited"));
}

/// `--public-key` takes the raw 32-byte Ed25519 public key in standard base64, as checkpoints
/// name it; anything else is refused saying so, not taken for a forged checkpoint.
#[test]
fn a_pinned_key_is_the_raw_public_key_in_base64() {
    let dir = tempfile::tempdir().unwrap();
    let (_, key) = written(dir.path(), 3);
    assert_eq!(key.len(), 44);
    assert_eq!(pinned_key(&format!(" {key}\n")).map_err(|e| e.to_string()), Ok(key.clone()));
    let spki = B64.encode([&[0x30u8, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00][..], &[7u8; 32][..]].concat());
    assert!(
        pinned_key(&spki).is_err_and(|e| e.to_string().contains("44 bytes") && e.to_string().contains("raw 32-byte Ed25519 public key"))
    );
    assert!(pinned_key("not a key!").is_err_and(|e| e.to_string().contains("not base64")));
}
