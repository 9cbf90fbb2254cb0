//! The `Resolve` step: how each method finds the item it acts on in the caller's view (a tool,
//! a prompt, a resource by URI or bare name, a completion's reference, a skill, a skill's
//! directory, a task by the gateway's id), or why it does not. An item the caller may not use
//! answers exactly like a missing one; one its token lacks the scopes for answers the 403
//! challenge. What the upstream is asked is prepared here too: the member carrying the upstream's
//! own name, a completion's reference rewritten, a skills request bridged to a modern upstream.

use super::{Call, Target, Then};
use crate::dispatch::bare::{self, Bare};
use crate::dispatch::forward::{canonical_uri, needs_scope, string_param};
use crate::dispatch::refusal::Refusal;
use crate::dispatch::{Served, skills, tasks};
use mcpgate_model::catalog::{Kind, uris, view};
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::rawobj::RawObject;
use serde_json::json;

pub(super) fn resolve<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    match call.req.method {
        Method::ToolsCall => super::tool::resolve(gw, call),
        Method::PromptsGet => prompt(gw, call),
        Method::ResourcesRead => resource(gw, call),
        Method::CompletionComplete => completion(gw, call),
        Method::SkillsGet => skill(gw, call),
        Method::ResourcesDirectoryRead => directory(gw, call),
        _ => task(gw, call),
    }
}

fn prompt<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    call.subject.item = string_param(&call.req, "name").map_err(Refusal::Malformed)?;
    let name = &call.subject.item;
    let Some(prompt) = view::find(&gw.view, Kind::Prompt, name, &call.req.caller.grants, call.id_of) else {
        if let Some(e) = needs_scope(gw, &call.req, Kind::Prompt, name) {
            return Err(Refusal::InsufficientScope(e));
        }
        return Err(Refusal::UnknownItem(RpcError::invalid_params(format!("Unknown prompt: {name}"))));
    };
    let target =
        Target { kind: Kind::Prompt, upstream: prompt.upstream, rewrite: Some(("name", prompt.original.clone())), entry: Some(prompt) };
    call.resolved(target, Some(prompt.policy_name()));
    Ok(())
}

fn resource<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    let (req, cat) = (&call.req, &gw.view);
    let mut uri = string_param(req, "uri").map_err(Refusal::Malformed)?;
    let mut routed = gw.route_uri_in(cat, &req.caller, &req.caller.grants, &uri);
    if routed.is_none() && gw.config.catalog.bare_names {
        match bare::resolve(cat, Kind::Resource, &uri, &req.caller.grants, call.id_of) {
            Bare::One(gateway_uri) => {
                uri = gateway_uri;
                routed = gw.route_uri_in(cat, &req.caller, &req.caller.grants, &uri);
            }
            Bare::Ambiguous(candidates) => {
                call.subject.item = uri;
                return Err(Refusal::AmbiguousBareName { kind: Kind::Resource, candidates });
            }
            Bare::Unknown => {}
        }
    }
    call.subject.item = canonical_uri(&uri);
    let Some((upstream, original)) = routed else {
        if let Some(e) = needs_scope(gw, req, Kind::Resource, &uri) {
            return Err(Refusal::InsufficientScope(e));
        }
        return Err(Refusal::UnknownResource(uri));
    };
    // A skill's file is checked against what the skill's listing promised.
    if let Some(promise) = skills::promise(gw, req, upstream, &uri) {
        call.then = Then::SkillFile(skills::Check::new(promise));
    }
    call.resolved(Target { kind: Kind::Resource, upstream, rewrite: Some(("uri", original)), entry: None }, None);
    Ok(())
}

/// A completion's reference (a prompt, or a resource template or resource), rewritten to the
/// upstream's own name.
fn completion<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    let req = &mut call.req;
    let Some(Ok(mut reference)) = req.params.parse::<RawObject>("ref") else {
        return Err(Refusal::Malformed(RpcError::invalid_params("completion/complete needs params.ref")));
    };
    let text = |r: &RawObject, key: &str| r.parse::<String>(key).and_then(Result::ok).unwrap_or_default();
    let kind = text(&reference, "type");
    let grants = &req.caller.grants;
    let (key, target) = match kind.as_str() {
        "ref/prompt" => {
            call.subject.item = text(&reference, "name");
            let prompt = view::find(&gw.view, Kind::Prompt, &call.subject.item, grants, call.id_of);
            ("name", prompt.map(|p| (Kind::Prompt, p.upstream, p.original.clone(), Some(p.policy_name()), Some(p))))
        }
        "ref/resource" => {
            call.subject.item = text(&reference, "uri");
            let name = &call.subject.item;
            let template = view::find(&gw.view, Kind::Template, name, grants, call.id_of).map(|t| (t.upstream, t.original.clone()));
            let routed = template.or_else(|| gw.route_uri_in(&gw.view, &req.caller, grants, name));
            ("uri", routed.map(|(up, original)| (Kind::Resource, up, original, None, None)))
        }
        _ => return Err(Refusal::Malformed(RpcError::invalid_params(format!("Unknown completion reference type: {kind:?}")))),
    };
    let Some((kind, upstream, original, catalogue, entry)) = target else {
        return Err(Refusal::UnknownItem(RpcError::invalid_params("Unknown completion reference")));
    };
    if reference.set_json(key, &original).is_err() || req.params.set_json("ref", &reference).is_err() {
        return Err(Refusal::Malformed(RpcError::internal("cannot rewrite the completion reference")));
    }
    call.resolved(Target { kind, upstream, rewrite: None, entry }, catalogue);
    Ok(())
}

/// `skills/get`: a skill the caller may see, asked of its owner.
fn skill<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    let uri = string_param(&call.req, "uri").map_err(Refusal::Malformed)?;
    let canonical = canonical_uri(&uri);
    let grants = &call.req.caller.grants;
    let found = view::find(&gw.view, Kind::Skill, &uri, grants, call.id_of)
        .or_else(|| view::find(&gw.view, Kind::Skill, &canonical, grants, call.id_of));
    let Some(skill) = found else {
        call.subject.item = canonical;
        return Err(Refusal::UnknownItem(RpcError::invalid_params(format!("Unknown skill URI: {uri}")).with_data(json!({ "uri": uri }))));
    };
    skills::bridge(gw, &mut call.req, skill.upstream);
    call.subject.item = skill.name.clone();
    let target = Target { kind: Kind::Skill, upstream: skill.upstream, rewrite: Some(("uri", skill.original.clone())), entry: Some(skill) };
    call.resolved(target, Some(skill.policy_name()));
    Ok(())
}

/// `resources/directory/read`: a directory inside a skill the caller may see (its owner answers
/// -32602 for a URI that is no directory, and -32601 if it does not implement the method).
fn directory<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    let uri = string_param(&call.req, "uri").map_err(Refusal::Malformed)?;
    call.subject.item = uris::canonical(&uri).map_or_else(|_| uri.clone(), |c| c.into_owned());
    let Some((upstream, original)) = gw.route_uri_in(&gw.view, &call.req.caller, &call.req.caller.grants, &uri) else {
        return Err(Refusal::UnknownItem(RpcError::invalid_params(format!("Not a directory: {uri}")).with_data(json!({ "uri": uri }))));
    };
    skills::bridge(gw, &mut call.req, upstream);
    call.resolved(Target { kind: Kind::Resource, upstream, rewrite: Some(("uri", original)), entry: None }, None);
    Ok(())
}

/// A task, by the gateway's id: routed to the upstream that created it, with its own id.
fn task(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    call.subject.item = "-".into();
    let task = tasks::resolve(gw, &call.req)?;
    call.subject.item = task.id.clone();
    call.then = Then::TaskId { id: task.id, prefix: task.prefix };
    call.resolved(Target { kind: Kind::Tool, upstream: task.upstream, rewrite: Some(("taskId", task.own)), entry: None }, None);
    Ok(())
}
