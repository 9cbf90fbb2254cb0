//! Resource URIs inside results, mapped into the gateway's URI space: the `uri` of every
//! `resource_link` and embedded `resource` in a tool result's `content` or a prompt's `messages`,
//! every `contents[].uri` of a read, and the UI resource an MCP App's tool or result points at
//! (`_meta.ui.resourceUri`, and the deprecated flat `_meta["ui/resourceUri"]`), and an Agent Skill's
//! entry (its `uri` and each `resources[].uri`, in `skills/get` and in listings) and the children a
//! `resources/directory/read` lists. A client can then `resources/read` what a prefixed
//! upstream pointed it at, and the read routes back by the prefix. Only the blocks that carry a
//! URI are rewritten (member by member); every other byte of the result is kept.

use super::uris;
use crate::protocol::json::Json;
use crate::protocol::rawobj::RawObject;

/// The result with its resource URIs in gateway form, or `None` when nothing changes.
pub fn to_gateway(method: &str, result: &Json, prefix: &str) -> Option<Json> {
    let text = result.get();
    let uris_everywhere = matches!(method, "resources/read" | "skills/get" | "resources/directory/read");
    if prefix.is_empty() || (!uris_everywhere && !text.contains("\"resource") && !text.contains("ui/resourceUri")) {
        return None;
    }
    let mut obj = RawObject::from_json(result).ok()?;
    match method {
        "tools/call" => {
            let content = obj.get("content").and_then(|c| map_items(c, |b| block(b, prefix)));
            let mapped = content.is_some();
            if let Some(content) = content {
                obj.set("content", content);
            }
            if !ui_meta(&mut obj, prefix) && !mapped {
                return None;
            }
        }
        "prompts/get" => {
            let messages = map_items(obj.get("messages")?, |m| {
                let mut msg = RawObject::from_json(m).ok()?;
                let content = block(msg.get("content")?, prefix)?;
                msg.set("content", content);
                Some(msg.to_json())
            })?;
            obj.set("messages", messages);
        }
        "resources/read" => {
            let contents = map_items(obj.get("contents")?, |c| with_uri(c, prefix))?;
            obj.set("contents", contents);
        }
        "skills/get" => {
            let mut skill = RawObject::from_json(obj.get("skill")?).ok()?;
            skill_entry(&mut skill, prefix)?;
            obj.set("skill", skill.to_json());
        }
        "resources/directory/read" => {
            let children = map_items(obj.get("resources")?, |c| with_uri(c, prefix))?;
            obj.set("resources", children);
        }
        _ => return None,
    }
    Some(obj.to_json())
}

/// Maps a skill entry's `uri` and every `resources[].uri` into the gateway's URI space (digests
/// and sizes are kept: the bytes are the upstream's); `None` when it has no string `uri`.
pub fn skill_entry(skill: &mut RawObject, prefix: &str) -> Option<()> {
    let uri = skill.parse::<String>("uri")?.ok()?;
    skill.set_json("uri", &uris::to_gateway(prefix, &uri)).ok()?;
    // `resources` may also be the string "dynamic".
    if let Some(files) = skill.get("resources").and_then(|r| map_items(r, |f| with_uri(f, prefix))) {
        skill.set("resources", files);
    }
    Some(())
}

/// The URIs a skill entry lists in its `resources` (none when they are `"dynamic"`).
pub fn skill_files(skill: &Json) -> Vec<String> {
    let Ok(obj) = RawObject::from_json(skill) else { return Vec::new() };
    let Some(Ok(files)) = obj.get("resources").map(|r| r.items()) else { return Vec::new() };
    files.iter().filter_map(|f| RawObject::from_json(f).ok()?.parse::<String>("uri")?.ok()).collect()
}

/// Maps the UI resource an object's `_meta` points at (`ui.resourceUri`, and the deprecated flat
/// `ui/resourceUri`) into the gateway's URI space; `false` when it points at none.
pub fn ui_meta(obj: &mut RawObject, prefix: &str) -> bool {
    let Some(meta) = obj.get("_meta").filter(|m| !prefix.is_empty() && m.get().contains("resourceUri")) else {
        return false;
    };
    let Ok(mut meta) = RawObject::from_json(meta) else { return false };
    let mut changed = false;
    if let Some(Ok(uri)) = meta.parse::<String>("ui/resourceUri") {
        changed |= meta.set_json("ui/resourceUri", &uris::to_gateway(prefix, &uri)).is_ok();
    }
    if let Some(mut ui) = meta.get("ui").and_then(|u| RawObject::from_json(u).ok())
        && let Some(Ok(uri)) = ui.parse::<String>("resourceUri")
        && ui.set_json("resourceUri", &uris::to_gateway(prefix, &uri)).is_ok()
    {
        meta.set("ui", ui.to_json());
        changed = true;
    }
    if changed {
        obj.set("_meta", meta.to_json());
    }
    changed
}

/// The UI resource an object's `_meta` points at (`ui.resourceUri`, else the flat key).
pub fn ui_uri(obj: &RawObject) -> Option<String> {
    let meta = RawObject::from_json(obj.get("_meta").filter(|m| m.get().contains("resourceUri"))?).ok()?;
    let nested = meta.get("ui").and_then(|u| RawObject::from_json(u).ok()).and_then(|u| u.parse::<String>("resourceUri")?.ok());
    nested.or_else(|| meta.parse::<String>("ui/resourceUri")?.ok())
}

/// The object without the UI resource its `_meta` points at (for a caller who may not read it).
pub fn without_ui(json: &Json) -> Option<Json> {
    let mut obj = RawObject::from_json(json).ok()?;
    let mut meta = RawObject::from_json(obj.get("_meta")?).ok()?;
    meta.remove("ui");
    meta.remove("ui/resourceUri");
    obj.set("_meta", meta.to_json());
    Some(obj.to_json())
}

/// A content block with its URI mapped, or `None` when it carries none.
fn block(b: &Json, prefix: &str) -> Option<Json> {
    if !b.get().contains("\"resource") {
        return None;
    }
    let mut obj = RawObject::from_json(b).ok()?;
    match obj.parse::<String>("type")?.ok()?.as_str() {
        "resource_link" => with_uri(b, prefix),
        "resource" => {
            let resource = with_uri(obj.get("resource")?, prefix)?;
            obj.set("resource", resource);
            Some(obj.to_json())
        }
        _ => None,
    }
}

/// An object with its string `uri` member in gateway form.
fn with_uri(item: &Json, prefix: &str) -> Option<Json> {
    let mut obj = RawObject::from_json(item).ok()?;
    let uri = obj.parse::<String>("uri")?.ok()?;
    obj.set_json("uri", &uris::to_gateway(prefix, &uri)).ok()?;
    Some(obj.to_json())
}

/// The array with `f` applied to each item (items it returns `None` for are kept as they are),
/// or `None` when no item changed.
fn map_items(array: &Json, f: impl Fn(&Json) -> Option<Json>) -> Option<Json> {
    let mut items = array.items().ok()?;
    let mut changed = false;
    for item in &mut items {
        if let Some(new) = f(item) {
            *item = new;
            changed = true;
        }
    }
    changed.then(|| Json::array(&items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> Json {
        Json::from_string(s.into()).unwrap()
    }

    #[test]
    fn tool_results_get_gateway_uris_and_keep_everything_else() {
        let r = json(
            r#"{"content":[{"type":"text","text":"see \"resource\""},{"type":"resource_link","uri":"file:///a b","name":"a"},{"type":"resource","resource":{"uri":"mem://x","text":"t"}, "annotations":{"p":1}}],"isError":false}"#,
        );
        let out = to_gateway("tools/call", &r, "fs").unwrap();
        assert_eq!(
            out.get(),
            r#"{"content":[{"type":"text","text":"see \"resource\""},{"type":"resource_link","uri":"fs+file:///a b","name":"a"},{"type":"resource","resource":{"uri":"fs+mem://x","text":"t"},"annotations":{"p":1}}],"isError":false}"#
        );
    }

    #[test]
    fn skill_entries_and_directory_children_are_mapped_with_their_digests_kept() {
        let got = json(
            r#"{"skill":{"uri":"skill://code-review/SKILL.md","frontmatter":{"name":"code-review"},"resources":[{"uri":"skill://code-review/SKILL.md","digest":"sha256:ab","size":3},{"uri":"skill://code-review/refs/F.md","digest":"sha256:cd","size":1}]},"ttlMs":0}"#,
        );
        let out = to_gateway("skills/get", &got, "a").unwrap();
        assert_eq!(
            out.get(),
            r#"{"skill":{"uri":"skill://a/code-review/SKILL.md","frontmatter":{"name":"code-review"},"resources":[{"uri":"skill://a/code-review/SKILL.md","digest":"sha256:ab","size":3},{"uri":"skill://a/code-review/refs/F.md","digest":"sha256:cd","size":1}]},"ttlMs":0}"#
        );
        let skill = json(r#"{"uri":"skill://a/x/SKILL.md","resources":[{"uri":"skill://a/x/SKILL.md"},{"uri":"skill://a/x/y.md"}]}"#);
        assert_eq!(skill_files(&skill), ["skill://a/x/SKILL.md", "skill://a/x/y.md"]);
        assert!(skill_files(&json(r#"{"uri":"skill://a/x/SKILL.md","resources":"dynamic"}"#)).is_empty());
        let dynamic = json(r#"{"skill":{"uri":"skill://x/SKILL.md","resources":"dynamic"}}"#);
        assert_eq!(
            to_gateway("skills/get", &dynamic, "a").unwrap().get(),
            r#"{"skill":{"uri":"skill://a/x/SKILL.md","resources":"dynamic"}}"#
        );
        let dir = json(r#"{"resources":[{"uri":"skill://x/refs/","mimeType":"inode/directory"}]}"#);
        assert!(to_gateway("resources/directory/read", &dir, "a").unwrap().get().contains(r#""uri":"skill://a/x/refs/""#));
    }

    #[test]
    fn prompt_messages_and_reads_are_mapped() {
        let r = json(r#"{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"test://static-text","text":"x"}}}]}"#);
        let out = to_gateway("prompts/get", &r, "fx").unwrap();
        assert!(out.get().contains(r#""uri":"fx+test://static-text""#), "{out}");
        let read = json(r#"{"contents":[{"uri":"test://a","text":"x"}],"ttlMs":0}"#);
        assert_eq!(
            to_gateway("resources/read", &read, "fx").unwrap().get(),
            r#"{"contents":[{"uri":"fx+test://a","text":"x"}],"ttlMs":0}"#
        );
    }

    #[test]
    fn nothing_changes_without_a_prefix_or_a_link() {
        let r = json(r#"{"content":[{"type":"resource_link","uri":"file:///a"}]}"#);
        assert!(to_gateway("tools/call", &r, "").is_none());
        assert!(to_gateway("tools/call", &json(r#"{"content":[{"type":"text","text":"hi"}]}"#), "fs").is_none());
        assert!(to_gateway("tools/call", &json(r#"{"content":"resource"}"#), "fs").is_none(), "malformed results pass as they are");
    }

    #[test]
    fn ui_resources_of_apps_keep_their_scheme() {
        let r = json(
            r#"{"content":[{"type":"text","text":"12:00"}],"_meta":{"ui":{"resourceUri":"ui://t/app.html","visibility":["app"]},"ui/resourceUri":"ui://t/app.html"}}"#,
        );
        let out = to_gateway("tools/call", &r, "app").unwrap();
        assert_eq!(
            out.get(),
            r#"{"content":[{"type":"text","text":"12:00"}],"_meta":{"ui":{"resourceUri":"ui://app/t/app.html","visibility":["app"]},"ui/resourceUri":"ui://app/t/app.html"}}"#
        );
        let read = json(r#"{"contents":[{"uri":"ui://t/app.html","mimeType":"text/html;profile=mcp-app","text":"<html>"}]}"#);
        assert!(to_gateway("resources/read", &read, "app").unwrap().get().contains(r#""uri":"ui://app/t/app.html""#));
        assert!(to_gateway("tools/call", &r, "").is_none());
    }
}
