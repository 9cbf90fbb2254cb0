//! The audit export's hash chain (docs/usage.md, "A tamper-evident audit"): every record carries
//! its sequence number (`seq`) and the SHA-256 of the line before it (`prev`), across rotations
//! and restarts (the chain resumes from the newest line on disk), so an edited, removed,
//! inserted or reordered line breaks it where it happened. Signed checkpoints (Ed25519, the key
//! from `[audit] signing_key_file`) name a line's `seq` and hash, at each rotation and every
//! `checkpoint_every` records: a truncation before the last checkpoint is caught, and a chain
//! rewritten from some point on fails the signatures. `verify` is `mcpgate audit verify`; what it
//! cannot tell (whole files removed from the head or the tail, records after the last
//! checkpoint) is in docs/usage.md, "What verify proves".

use aws_lc_rs::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use std::path::{Path, PathBuf};

/// The `prev` of the very first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain is: the next record's number, and the hash of the last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub seq: u64,
    pub prev: String,
}

pub fn sha256_hex(line: &str) -> String {
    mcpgate_protocol::toolbox::sha256_hex(line.as_bytes())
}

impl Chain {
    /// Resumes from the newest record in `path` (or its newest rotated file), else starts anew.
    pub fn resume(path: &Path) -> Chain {
        for candidate in [path.to_path_buf(), numbered(path, 1)] {
            let Ok(text) = std::fs::read_to_string(&candidate) else { continue };
            if let Some((seq, line)) = text.lines().rev().find_map(|l| record_seq(l).map(|s| (s, l))) {
                return Chain { seq: seq + 1, prev: sha256_hex(line) };
            }
        }
        Chain { seq: 1, prev: GENESIS.into() }
    }
}

/// `audit.jsonl.N`.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut p = path.to_path_buf().into_os_string();
    p.push(format!(".{n}"));
    PathBuf::from(p)
}

/// A record's `seq`, if the line is a chained record (not a checkpoint).
fn record_seq(line: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("checkpoint").is_some() {
        return None;
    }
    v["seq"].as_u64()
}

/// How a key to pin must be given (`audit verify --public-key`).
const WANTED: &str = "the raw 32-byte Ed25519 public key in standard base64 (44 characters, as a checkpoint's \"key\"), e.g. \
                      `openssl pkey -in audit.pem -pubout -outform DER | tail -c 32 | base64`";

/// A key that cannot be used: the signing key of the export (`[audit] signing_key_file`), or a
/// key given to pin (`audit verify --public-key`).
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the audit signing key {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the audit signing key {} is not PEM", path.display())]
    NotPem {
        path: PathBuf,
        #[source]
        source: base64::DecodeError,
    },
    #[error("the audit signing key {} is not a PKCS#8 Ed25519 key", path.display())]
    NotEd25519 {
        path: PathBuf,
        #[source]
        source: aws_lc_rs::error::KeyRejected,
    },
    /// A pinned key that decodes to another length than an Ed25519 public key's 32 bytes.
    #[error("--public-key: {len} bytes once decoded; give {WANTED}")]
    PinnedLength { len: usize },
    #[error("--public-key: not base64; give {WANTED}")]
    PinnedNotBase64(#[source] base64::DecodeError),
}

/// The signer of checkpoints.
pub struct Signer {
    pair: Ed25519KeyPair,
}

impl Signer {
    /// From a PKCS#8 Ed25519 key, PEM or DER.
    pub fn load(path: &Path) -> Result<Signer, KeyError> {
        let bytes = std::fs::read(path).map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?;
        let der = match std::str::from_utf8(&bytes) {
            Ok(text) if text.contains("-----BEGIN") => {
                let body: String = text.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
                B64.decode(body).map_err(|source| KeyError::NotPem { path: path.to_path_buf(), source })?
            }
            _ => bytes,
        };
        let pair = Ed25519KeyPair::from_pkcs8(&der)
            .or_else(|_| Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der))
            .map_err(|source| KeyError::NotEd25519 { path: path.to_path_buf(), source })?;
        Ok(Signer { pair })
    }

    pub fn public_key(&self) -> String {
        B64.encode(self.pair.public_key().as_ref())
    }

    /// The checkpoint line for the record `seq` whose line hashes to `hash`.
    pub fn checkpoint(&self, seq: u64, hash: &str, ts_ms: u64) -> String {
        let sig = B64.encode(self.pair.sign(message(seq, hash).as_bytes()).as_ref());
        serde_json::json!({ "checkpoint": { "seq": seq, "hash": hash, "ts_ms": ts_ms }, "key": self.public_key(), "sig": sig }).to_string()
    }
}

/// A key given to pin (`audit verify --public-key`) as [`verify`] takes it: the raw 32-byte
/// Ed25519 public key in standard base64 (44 characters), as checkpoints name it. `Err` says
/// what it is instead, so a mistyped key is not taken for forged checkpoints.
pub fn pinned_key(text: &str) -> Result<String, KeyError> {
    let text = text.trim();
    match B64.decode(text) {
        Ok(k) if k.len() == 32 => Ok(text.to_string()),
        Ok(k) => Err(KeyError::PinnedLength { len: k.len() }),
        Err(e) => Err(KeyError::PinnedNotBase64(e)),
    }
}

fn message(seq: u64, hash: &str) -> String {
    format!("mcpgate-audit-checkpoint/v1\n{seq}\n{hash}")
}

/// Where the chain breaks, the first break `verify` met (`at` is `file:line`): what it looks like.
#[derive(Debug, thiserror::Error)]
pub enum Broken {
    #[error("{}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{at}: the last record is incomplete (a crash while writing?)")]
    LastIncomplete { at: String },
    #[error("{at}: not a JSON line ({source}): edited")]
    NotJson {
        at: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{at}: a checkpoint whose signature does not verify (forged or edited)")]
    Forged { at: String },
    #[error("{at}: the checkpoint for record {seq} names another line than the one kept: edited")]
    CheckpointElsewhere { at: String, seq: u64 },
    #[error("{at}: the checkpoint names record {seq}, which is not in the files: removed")]
    CheckpointUnknown { at: String, seq: u64 },
    #[error("{at}: a record without seq and prev: edited, or not a chained audit file")]
    NotChained { at: String },
    #[error("{at}: the first record does not start the chain: edited")]
    NoStart { at: String },
    #[error("{at}: record {seq} comes after record {after}: lines were swapped or repeated")]
    Repeated { at: String, seq: u64, after: u64 },
    #[error("{at}: record {seq} comes before record {before}: lines were swapped")]
    Swapped { at: String, seq: u64, before: u64 },
    #[error("{at}: records {from} to {to} are missing: removed")]
    Missing { at: String, from: u64, to: u64 },
    #[error("{at}: record {seq} does not follow record {prev} as written: record {prev} was edited")]
    Edited { at: String, seq: u64, prev: u64 },
    /// A checkpoint before the first record names one older than the files hold.
    #[error(
        "{at}: the checkpoint names record {named}, but the files start at record {first}: the oldest records, up to record {up_to}, were removed"
    )]
    HeadRemoved { at: String, named: u64, first: u64, up_to: u64 },
    /// A checkpoint before the first record names a record after it.
    #[error("{at}: the checkpoint names record {named}, which comes after it: lines were moved")]
    Moved { at: String, named: u64 },
    #[error("{at}: the checkpoint names record {named}, and no record is left: the records were removed")]
    NoRecordLeft { at: String, named: u64 },
    /// With a pinned key, records but no checkpoint.
    #[error(
        "no signed checkpoint in {}: nothing proves who wrote them (an export with a key signs every checkpoint_every records, at each rotation and at shutdown): the checkpoints were dropped (the chain may have been recomputed), the export does not sign, or a live file has not reached its first checkpoint yet",
        mcpgate_protocol::text::count(*records, "record", "records")
    )]
    Unsigned { records: u64 },
}

/// What `verify` found in files that hold together.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    pub checkpoints: u64,
    /// The first record's number (greater than 1 when older files were rotated away).
    pub first_seq: u64,
    pub last_seq: u64,
    /// The records after the last checkpoint (not covered by a signature yet).
    pub unsigned: u64,
    /// Lines a crash left incomplete, where the chain continues across them (`file:line`).
    pub incomplete: Vec<String>,
}

/// Checks `files`, oldest first, as one chain: each record's `prev` is the hash of the record
/// before it and its `seq` the next number; each checkpoint's signature is good (against `key`
/// when given, else the key it names, which is then only self-consistent) and names a record
/// seen with that hash. With `key`, at least one checkpoint must be there (a chain recomputed
/// with its checkpoints dropped would otherwise pass), and a checkpoint naming a record older than
/// the first one kept says the oldest records were removed. A line a crash left incomplete is
/// said to be one: the last line is an error (its record is lost), one the chain continues across
/// is reported. The first break is the error: where, and what it looks like.
pub fn verify(files: &[PathBuf], key: Option<&str>) -> Result<Verified, Broken> {
    let mut out = Verified::default();
    let mut last: Option<(u64, String)> = None;
    let mut seen: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    // A checkpoint read before any record: the record it names must be the first one's
    // predecessor or later, else the head was cut away.
    let mut head_checkpoint: Option<(u64, String)> = None;
    let mut signed_up_to = 0;
    for (f, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file).map_err(|source| Broken::Unreadable { path: file.clone(), source })?;
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().copied().enumerate() {
            let at = format!("{}:{}", file.display(), i + 1);
            let v: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                // A prefix of a JSON line: a write a crash cut short.
                Err(e) if e.is_eof() && !line.trim().is_empty() => {
                    if f + 1 == files.len() && i + 1 == lines.len() {
                        return Err(Broken::LastIncomplete { at });
                    }
                    out.incomplete.push(at);
                    continue;
                }
                Err(source) => return Err(Broken::NotJson { at, source }),
            };
            if let Some(cp) = v.get("checkpoint") {
                let (seq, hash) = (cp["seq"].as_u64().unwrap_or(0), cp["hash"].as_str().unwrap_or(""));
                let named = v["key"].as_str().unwrap_or("");
                let public = key.unwrap_or(named);
                let good = B64
                    .decode(public)
                    .ok()
                    .zip(B64.decode(v["sig"].as_str().unwrap_or("")).ok())
                    .is_some_and(|(k, sig)| UnparsedPublicKey::new(&ED25519, k).verify(message(seq, hash).as_bytes(), &sig).is_ok());
                if !good {
                    return Err(Broken::Forged { at });
                }
                match seen.get(&seq) {
                    Some(h) if h == hash => signed_up_to = signed_up_to.max(seq),
                    Some(_) => return Err(Broken::CheckpointElsewhere { at, seq }),
                    None if out.records == 0 => {
                        head_checkpoint.get_or_insert((seq, at));
                    }
                    None => return Err(Broken::CheckpointUnknown { at, seq }),
                }
                out.checkpoints += 1;
                continue;
            }
            let (Some(seq), Some(prev)) = (v["seq"].as_u64(), v["prev"].as_str()) else {
                return Err(Broken::NotChained { at });
            };
            match &last {
                None if seq == 1 && prev != GENESIS => return Err(Broken::NoStart { at }),
                None => {
                    if let Some((named, where_)) = head_checkpoint.take() {
                        return Err(head_removed(where_, named, seq));
                    }
                    out.first_seq = seq;
                }
                Some((n, _)) if seq <= *n => {
                    return Err(Broken::Repeated { at, seq, after: *n });
                }
                Some((n, _)) if seq > n + 1 => {
                    // The missing one just after: two lines changed places.
                    let next = lines[i + 1..].iter().find_map(|l| record_seq(l));
                    if next == Some(n + 1) {
                        return Err(Broken::Swapped { at, seq, before: n + 1 });
                    }
                    return Err(Broken::Missing { at, from: n + 1, to: seq - 1 });
                }
                Some((n, h)) if prev != h => {
                    return Err(Broken::Edited { at, seq, prev: *n });
                }
                Some(_) => {}
            }
            let hash = sha256_hex(line);
            seen.insert(seq, hash.clone());
            last = Some((seq, hash));
            out.records += 1;
            out.last_seq = seq;
        }
    }
    if let Some((named, where_)) = head_checkpoint {
        return Err(if out.records == 0 { Broken::NoRecordLeft { at: where_, named } } else { head_removed(where_, named, out.first_seq) });
    }
    if key.is_some() && out.checkpoints == 0 && out.records > 0 {
        return Err(Broken::Unsigned { records: out.records });
    }
    out.unsigned = out.last_seq.saturating_sub(signed_up_to.max(out.first_seq.saturating_sub(1)));
    Ok(out)
}

/// A checkpoint before the first record naming record `named`, when the files start at `first`.
fn head_removed(at: String, named: u64, first: u64) -> Broken {
    if named < first { Broken::HeadRemoved { at, named, first, up_to: first - 1 } } else { Broken::Moved { at, named } }
}

/// The files of an audit export, oldest first: `audit.jsonl.N` … `audit.jsonl.1`, `audit.jsonl`,
/// for a live file's path; any other list as given.
pub fn in_order(paths: &[PathBuf]) -> Vec<PathBuf> {
    let rank = |p: &PathBuf| -> u64 { p.extension().and_then(|e| e.to_str()).and_then(|e| e.parse::<u64>().ok()).map_or(0, |n| n) };
    let mut v = paths.to_vec();
    v.sort_by_key(|p| std::cmp::Reverse(rank(p)));
    v
}

#[cfg(test)]
mod tests;
