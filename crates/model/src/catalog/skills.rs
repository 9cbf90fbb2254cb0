//! What a skill's listing promises about its files, and the check of a read against it. A skill
//! entry (`skills/list`, SEP-2640) lists each file with its SHA-256 `digest` and `size`; the
//! gateway keeps those bytes of the entry as the upstream gave them, and when it relays a read
//! of a listed file it checks that the bytes read are the bytes listed (size first, then digest),
//! and, for the skill's own `SKILL.md`, that its frontmatter says what the entry's `frontmatter`
//! says, field by field (see `frontmatter`), so a file changed after the listing (the listing
//! pinned, or shown to a person) never reaches the model as if it were the listed one. A file
//! the listing does not name is not reachable at all ([`reaches`]). Pure functions over JSON;
//! `dispatch` and the gateway's routing apply them.

use crate::protocol::json::Json;
use crate::protocol::rawobj::RawObject;
use base64::Engine;

/// A listed file's promise: its digest (`sha256:<hex>`) and size in bytes, and for the skill's
/// `SKILL.md`, the entry's frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub digest: String,
    pub size: u64,
    pub frontmatter: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What skill entry `skill` lists for file `uri` (both in the same URI space), if it lists it
/// with a digest and a size.
pub fn listed(skill: &Json, uri: &str) -> Option<Listed> {
    let obj = RawObject::from_json(skill).ok()?;
    let files = obj.get("resources")?.items().ok()?;
    let is_manifest = obj.parse::<String>("uri").and_then(Result::ok).is_some_and(|u| u == uri);
    files.iter().find_map(|f| {
        let f = RawObject::from_json(f).ok()?;
        if f.parse::<String>("uri")?.ok()? != uri {
            return None;
        }
        // A manifest listed without a frontmatter (or with an unreadable one) is still checked
        // byte for byte.
        let frontmatter =
            if is_manifest { obj.parse::<serde_json::Map<String, serde_json::Value>>("frontmatter").and_then(Result::ok) } else { None };
        Some(Listed { digest: f.parse::<String>("digest")?.ok()?, size: f.parse::<u64>("size")?.ok()?, frontmatter })
    })
}

/// The directory (gateway URI ending in `/`) of a skill named by its `SKILL.md` URI.
pub fn dir_of(skill_md: &str) -> Option<&str> {
    skill_md.strip_suffix("SKILL.md").filter(|d| d.ends_with('/'))
}

/// Whether directory `dir` holds `uri` (or is it, written without its last `/`).
fn holds(dir: &str, uri: &str) -> bool {
    uri.starts_with(dir) || uri == dir.trim_end_matches('/')
}

/// Which of one upstream's skills (`skills`: the canonical gateway URIs of their `SKILL.md`) owns
/// canonical gateway URI `uri`: the deepest one whose directory holds it, as a skill nested in
/// another's folder is its own; `None` when none holds it, or when a held skill (`held`: the same
/// URIs of the upstream's held skills) holds it deeper (a held skill is out of the catalogue, and
/// its files are not its parent's to give).
pub fn owner(skills: &[&str], held: &[String], uri: &str) -> Option<usize> {
    let depth = |name: &str| dir_of(name).filter(|d| holds(d, uri)).map(str::len);
    let (served, i) = skills.iter().enumerate().filter_map(|(i, s)| Some((depth(s)?, i))).max_by_key(|(d, _)| *d)?;
    (!held.iter().filter_map(|h| depth(h)).any(|d| d > served)).then_some(i)
}

/// Whether canonical gateway URI `uri` is something skill entry `skill` lets a caller reach: a
/// file it lists with a digest and a size (so a read of it is checked), or a directory on the
/// way to one (the skill's own directory included). A file the listing does not name (added
/// after it, or never listed) is not: it would reach the model with no digest to check and no
/// pin to hold it.
pub fn reaches(skill: &Json, uri: &str) -> bool {
    let canonical = |u: &str| super::uris::canonical(u).map(|c| c.into_owned()).ok();
    let files: Vec<String> =
        super::links::skill_files(skill).iter().filter(|f| listed(skill, f).is_some()).filter_map(|f| canonical(f)).collect();
    let dir = format!("{}/", uri.trim_end_matches('/'));
    files.iter().any(|f| f == uri || f.starts_with(&dir))
}

/// Why a read does not match its listing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("the read has {read} bytes, the skill's listing {listed}")]
    Size { read: u64, listed: u64 },
    #[error("the read's digest is {read}, the skill's listing {listed}")]
    Digest { read: String, listed: String },
    #[error("the read carries no content for the file")]
    NoContent,
    #[error("its frontmatter differs from the skill's listing in '{0}'")]
    Frontmatter(String),
    #[error("SKILL.md is not UTF-8")]
    NotUtf8,
    #[error(transparent)]
    NoFrontmatter(#[from] super::frontmatter::FrontmatterError),
}

/// Checks a `resources/read` result for `uri` against what the listing promised: the bytes of
/// its contents for that URI (text as UTF-8, blobs decoded), their length, then their SHA-256.
pub fn verify(result: &Json, uri: &str, promise: &Listed) -> Result<(), Mismatch> {
    let bytes = content_bytes(result, uri).ok_or(Mismatch::NoContent)?;
    let read = bytes.len() as u64;
    if read != promise.size {
        return Err(Mismatch::Size { read, listed: promise.size });
    }
    let digest = format!("sha256:{}", crate::toolbox::sha256_hex(&bytes));
    if !digest.eq_ignore_ascii_case(&promise.digest) {
        return Err(Mismatch::Digest { read: digest, listed: promise.digest.clone() });
    }
    if let Some(listed) = &promise.frontmatter {
        let text = std::str::from_utf8(&bytes).map_err(|_| Mismatch::NotUtf8)?;
        let file = super::frontmatter::parse(text)?;
        if let Some(field) = super::frontmatter::differs(&file, listed) {
            return Err(Mismatch::Frontmatter(field));
        }
    }
    Ok(())
}

/// The bytes of a read's contents for `uri` (a content without a `uri` counts as the file's);
/// `None` when there is none, or a blob is not base64.
fn content_bytes(result: &Json, uri: &str) -> Option<Vec<u8>> {
    let obj = RawObject::from_json(result).ok()?;
    let mut bytes = Vec::new();
    let mut found = false;
    for c in obj.get("contents")?.items().ok()? {
        let c = RawObject::from_json(&c).ok()?;
        if c.parse::<String>("uri").and_then(Result::ok).is_some_and(|u| u != uri) {
            continue;
        }
        if let Some(Ok(text)) = c.parse::<String>("text") {
            bytes.extend_from_slice(text.as_bytes());
        } else if let Some(Ok(blob)) = c.parse::<String>("blob") {
            bytes.extend(base64::engine::general_purpose::STANDARD.decode(blob).ok()?);
        } else {
            continue;
        }
        found = true;
    }
    found.then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> Json {
        Json::from_string(s.into()).unwrap()
    }

    const BODY: &str = "---\nname: r\n---\nbody\n";

    fn sha(s: &[u8]) -> String {
        format!("sha256:{}", crate::toolbox::sha256_hex(s))
    }

    #[test]
    fn a_read_matches_its_listing_or_says_how_it_does_not() {
        let entry = json(&format!(
            r#"{{"uri":"skill://a/r/SKILL.md","frontmatter":{{"name":"r"}},"resources":[{{"uri":"skill://a/r/SKILL.md","digest":"{}","size":{}}}]}}"#,
            sha(BODY.as_bytes()),
            BODY.len()
        ));
        let promise = listed(&entry, "skill://a/r/SKILL.md").unwrap();
        assert_eq!(listed(&entry, "skill://a/r/other.md"), None);
        let read = |text: &str| json(&serde_json::json!({ "contents": [{ "uri": "skill://a/r/SKILL.md", "text": text }] }).to_string());
        assert_eq!(verify(&read(BODY), "skill://a/r/SKILL.md", &promise), Ok(()));
        assert!(matches!(verify(&read(&format!("{BODY}x")), "skill://a/r/SKILL.md", &promise), Err(Mismatch::Size { .. })));
        let same_size = BODY.replace("body", "evil");
        assert!(matches!(verify(&read(&same_size), "skill://a/r/SKILL.md", &promise), Err(Mismatch::Digest { .. })));
        let blob = base64::engine::general_purpose::STANDARD.encode(BODY);
        let as_blob = json(&serde_json::json!({ "contents": [{ "uri": "skill://a/r/SKILL.md", "blob": blob }] }).to_string());
        assert_eq!(verify(&as_blob, "skill://a/r/SKILL.md", &promise), Ok(()));
        assert_eq!(verify(&json(r#"{"contents":[]}"#), "skill://a/r/SKILL.md", &promise), Err(Mismatch::NoContent));
    }

    /// Only what the listing names with a digest and a size, and the directories on the way to
    /// it, can be reached: a file added to the skill's folder after the listing cannot.
    #[test]
    fn only_listed_files_and_their_directories_are_reached() {
        let entry = json(&format!(
            r#"{{"uri":"skill://a/r/SKILL.md","resources":[{{"uri":"skill://a/r/SKILL.md","digest":"{d}","size":1}},{{"uri":"skill://a/r/refs/x.md","digest":"{d}","size":1}},{{"uri":"skill://a/r/undigested.md"}}]}}"#,
            d = sha(b"x")
        ));
        for (uri, reached) in [
            ("skill://a/r/SKILL.md", true),
            ("skill://a/r/refs/x.md", true),
            ("skill://a/r", true),
            ("skill://a/r/", true),
            ("skill://a/r/refs", true),
            ("skill://a/r/refs/", true),
            ("skill://a/r/added-later.md", false),
            ("skill://a/r/refs/y.md", false),
            ("skill://a/r/undigested.md", false),
            ("skill://a/r/other", false),
            ("skill://a/rx", false),
        ] {
            assert_eq!(reaches(&entry, uri), reached, "{uri}");
        }
    }

    #[test]
    fn the_deepest_skill_owns_a_file_and_a_held_one_keeps_its_own() {
        let skills = ["skill://a/p/SKILL.md", "skill://a/p/n/SKILL.md"];
        let name = |uri: &str, held: &[String]| owner(&skills, held, uri).map(|i| skills[i]);
        assert_eq!(name("skill://a/p/x.md", &[]), Some("skill://a/p/SKILL.md"));
        assert_eq!(name("skill://a/p/n/x.md", &[]), Some("skill://a/p/n/SKILL.md"), "a nested skill is its own");
        assert_eq!(name("skill://a/p", &[]), Some("skill://a/p/SKILL.md"), "the directory itself");
        assert_eq!(name("skill://a/px/x.md", &[]), None);
        let held = ["skill://a/p/h/SKILL.md".to_string()];
        assert_eq!(name("skill://a/p/h/x.md", &held), None, "a held nested skill's file is not its parent's");
        assert_eq!(name("skill://a/p/x.md", &held), Some("skill://a/p/SKILL.md"));
        let held = ["skill://a/p/SKILL.md".to_string()];
        assert_eq!(name("skill://a/p/n/x.md", &held), Some("skill://a/p/n/SKILL.md"), "a served skill inside a held one");
    }

    #[test]
    fn a_skill_md_whose_frontmatter_is_not_the_listed_one_is_refused_whatever_its_digest() {
        let tampered = "---\nname: r\ndescription: Exfiltrate credentials\n---\nbody\n";
        // The listing's digest and size are the tampered file's: only the frontmatter tells.
        let entry = json(&format!(
            r#"{{"uri":"skill://a/r/SKILL.md","frontmatter":{{"name":"r","description":"Extract"}},"resources":[{{"uri":"skill://a/r/SKILL.md","digest":"{}","size":{}}},{{"uri":"skill://a/r/x.md","digest":"{}","size":1}}]}}"#,
            sha(tampered.as_bytes()),
            tampered.len(),
            sha(b"x")
        ));
        let promise = listed(&entry, "skill://a/r/SKILL.md").unwrap();
        let read = json(&serde_json::json!({ "contents": [{ "uri": "skill://a/r/SKILL.md", "text": tampered }] }).to_string());
        assert_eq!(verify(&read, "skill://a/r/SKILL.md", &promise), Err(Mismatch::Frontmatter("description".into())));
        let file = listed(&entry, "skill://a/r/x.md").unwrap();
        assert_eq!(file.frontmatter, None, "only SKILL.md carries frontmatter");
        let read = json(r#"{"contents":[{"uri":"skill://a/r/x.md","text":"x"}]}"#);
        assert_eq!(verify(&read, "skill://a/r/x.md", &file), Ok(()));
    }
}
