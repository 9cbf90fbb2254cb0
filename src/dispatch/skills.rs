//! Agent Skills (SEP-2640, extension `io.modelcontextprotocol/skills`) across upstreams. The
//! gateway offers the extension to a caller when an upstream it may use declares it, with
//! `directoryRead: true` only when every such upstream declares that too (a client that sees the
//! flag may call `resources/directory/read` on any skill it lists). `skills/list` is served from
//! the catalogue like every list (merged, filtered by the caller's view, paged with the gateway's
//! cursor); `skills/get` and `resources/directory/read` go through the call path
//! (`dispatch/chain`) to the skill's owner with the URI mapped back, and its answer mapped forward
//! (`catalog::links`), digests and sizes untouched.
//! A skill the caller may not see answers exactly like one that does not exist (-32602). A read
//! of a file a skill lists is checked against the listing's size and digest before it is
//! relayed (`catalog::skills`): what the model reads is what was listed (and pinned). A file
//! the listing does not name never gets here: the routing (`gateway::reads`) answers it as
//! unknown.

use super::{Request, Served, discover};
use crate::audit::Subject;
use crate::upstream::Status;
use mcpgate_model::catalog::{Kind, links, skills, uris, view};
use mcpgate_protocol::SKILLS_EXTENSION;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde_json::Value;
use std::sync::Arc;

/// The skills extension's settings to advertise to this caller, if any upstream it may use
/// declares the extension.
pub fn advertised(gw: &Served<'_>, req: &Request) -> Option<Value> {
    let mut contributing = Vec::new();
    for up in gw.live_upstreams() {
        let st = up.state();
        let declared = st.capabilities.as_ref().and_then(|c| c.get("extensions")).and_then(|e| e.get(SKILLS_EXTENSION));
        let Some(settings) = declared.filter(|v| !v.is_null()) else { continue };
        if st.status != Status::Ready || !discover::usable(gw, req, up.index) {
            continue;
        }
        contributing.push(settings.clone());
    }
    (!contributing.is_empty()).then(|| mcpgate_protocol::skills_settings(&contributing))
}

/// Whether the caller is offered the extension (the methods answer -32601 otherwise).
pub fn offered(gw: &Served<'_>, req: &Request) -> bool {
    advertised(gw, req).is_some()
}

/// The request as the skill's owner is asked it: the extension's methods are served by modern
/// servers (FastMCP binds them to 2026-07-28 only, and the skills the gateway lists were listed in
/// that era), so a legacy client's request goes to a modern upstream in the modern era (bridged),
/// not in the client's own legacy session with it.
pub fn bridge(gw: &Served<'_>, req: &mut Request, upstream: usize) {
    if gw.upstreams().get(upstream).is_some_and(|u| u.state().is_modern()) {
        req.legacy = None;
    }
}

/// What the caller's view lists for skill file `uri` of upstream `upstream` (a file of a skill
/// it may see), to check a read of it against.
pub fn promise(gw: &Served<'_>, req: &Request, upstream: usize, uri: &str) -> Option<(String, skills::Listed)> {
    if !uris::is_skill(uri) {
        return None;
    }
    let id_of = |i: usize| gw.upstream_id(i);
    let canonical = uris::canonical(uri).map_or_else(|_| uri.to_string(), |c| c.into_owned());
    view::visible(&gw.view, Kind::Skill, &req.caller.grants, &id_of).iter().filter(|s| s.upstream == upstream).find_map(|s| {
        let files = links::skill_files(&s.json);
        let listed = files.iter().find(|f| **f == uri || uris::canonical(f).is_ok_and(|c| c == canonical))?;
        skills::listed(&s.json, listed).map(|p| (listed.clone(), p))
    })
}

/// The check of a skill file's read against its listing: the file as the listing names it, and
/// what the listing promised.
pub struct Check {
    uri: String,
    promise: skills::Listed,
}

impl Check {
    pub fn new((uri, promise): (String, skills::Listed)) -> Check {
        Check { uri, promise }
    }

    /// The reply to the read `who` asked for, with every result checked against the file's
    /// listing: a file whose bytes are not the listed ones is not served, and the refusal is
    /// audited (naming the file as its listing does).
    pub fn apply(self, gw: &Served<'_>, who: &Arc<Subject>, reply: Reply) -> Reply {
        let (audit, metrics, who) = (gw.audit.clone(), gw.metrics.clone(), who.clone());
        reply.map_outcome(move |o| match o {
            // A question (`input_required`) is no read yet: the answer's read is checked.
            o if super::request_state::asks_input(&o) => o,
            Outcome::Result(raw) => match skills::verify(&raw, &self.uri, &self.promise) {
                Ok(()) => Outcome::Result(raw),
                Err(why) => {
                    let file = Subject { item: self.uri.clone(), presented: None, ..Subject::clone(&who) };
                    audit.refused(&file, "skill_file_mismatch");
                    metrics.refused(crate::telemetry::reasons::Refused::SkillFileMismatch);
                    tracing::warn!(uri = %self.uri, reason = %why, "a skill file read does not match its listing; not served");
                    Outcome::Error(RpcError::internal(format!(
                        "Skill file {} does not match the skill's listing ({why}): not served; list the skills again",
                        self.uri
                    )))
                }
            },
            other => other,
        })
    }
}
