//! The extensions the gateway relays, as one table: for each extension it knows, when it is
//! advertised to clients on the upstreams' behalf, in which eras, and what upstreams are told
//! about it on the client side. Everything else in the gateway asks this module: `server/discover`
//! (per caller view), the legacy `initialize` (which filters discover's answer for its era), the
//! `_meta` of modern upstream requests, and the `initialize` of a legacy client's own upstream
//! session. An extension that is not in [`EXTENSIONS`] is never advertised on an upstream's
//! behalf and never declared to an upstream on a client's behalf: the gateway would pass on a
//! promise it cannot keep (results, ids or methods it does not map, bind or govern). To relay a
//! new extension, add its row to [`EXTENSIONS`] and document it in docs/protocol.md.

use serde_json::{Map, Value};

/// The era a client is served in (or an upstream is spoken to in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28.
    Modern,
    /// 2025-11-25, 2025-06-18, 2025-03-26.
    Legacy,
}

/// When the gateway advertises an extension to its clients on its upstreams' behalf.
#[derive(Clone, Copy, Debug)]
pub enum Advertise {
    /// When an upstream of the caller's view declares it.
    Declared,
    /// When an upstream of the caller's view declares it, or serves resources under this URI
    /// scheme without declaring it.
    DeclaredOrServes(&'static str),
    /// When an upstream of the caller's view that the gateway speaks 2026-07-28 to declares it
    /// (the gateway tells only such upstreams that the client takes part).
    DeclaredByModern,
}

/// What upstreams are told about an extension on the client side.
#[derive(Clone, Copy, Debug)]
pub enum Declare {
    /// The gateway declares it with these settings on its own upstream requests and in its own
    /// upstream sessions (it relays the extension for every client); a client's own declaration
    /// passes to every upstream.
    Always(fn() -> Value),
    /// Only a client's own declaration, and only to an upstream that declares the extension too
    /// (so no other upstream answers in the extension's shapes).
    ToDeclaring,
}

/// One extension the gateway relays.
#[derive(Debug)]
pub struct Extension {
    /// The key under `capabilities.extensions`.
    pub key: &'static str,
    pub advertise: Advertise,
    pub declare: Declare,
    /// Whether it is relayed to and from legacy clients too (`false`: 2026-07-28 only).
    pub legacy: bool,
    /// The advertised settings, from those of every upstream of the view that offers it (in
    /// configuration order, never empty): [`first`], or a rule of the extension's own (a flag
    /// advertised only when every contributing upstream supports it, say).
    pub merge: fn(&[Value]) -> Value,
}

/// The first contributing upstream's settings.
pub fn first(settings: &[Value]) -> Value {
    settings.first().cloned().unwrap_or_else(|| Value::Object(Map::new()))
}

/// The extensions the gateway relays.
pub const EXTENSIONS: &[Extension] = &[
    // MCP Apps (SEP-1865): `ui://` resources keep their scheme (`catalog::uris`), `_meta.ui` is
    // mapped, an app's bare tool names resolve; nothing era-specific.
    Extension {
        key: super::UI_EXTENSION,
        advertise: Advertise::DeclaredOrServes("ui://"),
        declare: Declare::Always(super::ui_client_capability),
        legacy: true,
        merge: first,
    },
    // Tasks (SEP-2663): task ids are replaced by sealed gateway ids and `tasks/*` routed back
    // (`dispatch::tasks`); the `resultType: "task"` discriminator and the tasks methods exist
    // only at 2026-07-28.
    Extension {
        key: super::TASKS_EXTENSION,
        advertise: Advertise::DeclaredByModern,
        declare: Declare::ToDeclaring,
        legacy: false,
        merge: first,
    },
    // Agent Skills (SEP-2640): skills are a catalogue kind of their own (`skills/list` merged,
    // `skill://<prefix>/…` URIs mapped, `skills/get` and `resources/directory/read` routed to the
    // owner, a legacy client's requests bridged to a modern owner: `dispatch::skills`);
    // `directoryRead` only when every contributing upstream declares it.
    Extension {
        key: super::SKILLS_EXTENSION,
        advertise: Advertise::Declared,
        declare: Declare::Always(empty),
        legacy: true,
        merge: super::skills_settings,
    },
];

/// No settings (`{}`).
fn empty() -> Value {
    Value::Object(Map::new())
}

/// The row of a known extension.
pub fn known(key: &str) -> Option<&'static Extension> {
    EXTENSIONS.iter().find(|e| e.key == key)
}

/// What one upstream of the caller's view offers, as the rules need it.
pub struct Offer<'a> {
    /// The upstream's `capabilities.extensions`, if any.
    pub declared: Option<&'a Map<String, Value>>,
    /// Whether the gateway speaks 2026-07-28 to it.
    pub modern: bool,
    /// The URI schemes of [`schemes`] it serves resources under (in the caller's view).
    pub serves: &'a [&'static str],
}

/// The URI schemes the rules look at ([`Advertise::DeclaredOrServes`]).
pub fn schemes() -> impl Iterator<Item = &'static str> {
    EXTENSIONS.iter().filter_map(|e| match e.advertise {
        Advertise::DeclaredOrServes(scheme) => Some(scheme),
        _ => None,
    })
}

impl Extension {
    fn relayed_in(&self, era: Era) -> bool {
        era == Era::Modern || self.legacy
    }

    /// The settings advertised on `offer`'s behalf (the upstream's own, `{}` when it serves
    /// without declaring), or `None`.
    fn offered_by(&self, offer: &Offer<'_>) -> Option<Value> {
        let declared = offer.declared.and_then(|d| d.get(self.key)).filter(|v| !v.is_null());
        match self.advertise {
            Advertise::Declared => declared.cloned(),
            Advertise::DeclaredOrServes(scheme) => {
                declared.cloned().or_else(|| offer.serves.contains(&scheme).then(|| Value::Object(Map::new())))
            }
            Advertise::DeclaredByModern => declared.filter(|_| offer.modern).cloned(),
        }
    }
}

/// The `capabilities.extensions` advertised to a client served in `era`, from the offers of the
/// upstreams of its view, in order (each extension's settings merged by its rule).
pub fn advertised(offers: &[Offer<'_>], era: Era) -> Map<String, Value> {
    let mut out = Map::new();
    for ext in EXTENSIONS.iter().filter(|e| e.relayed_in(era)) {
        let settings: Vec<Value> = offers.iter().filter_map(|o| ext.offered_by(o)).collect();
        if !settings.is_empty() {
            out.insert(ext.key.into(), (ext.merge)(&settings));
        }
    }
    out
}

/// Keeps in `extensions` (advertised or declared) only what the gateway relays in `era`.
pub fn retain_for_era(extensions: &mut Map<String, Value>, era: Era) {
    extensions.retain(|key, _| known(key).is_some_and(|e| e.relayed_in(era)));
}

/// The client's `extensions` an upstream is told, when the gateway speaks `era` to it and the
/// upstream declares `upstream` (its `capabilities.extensions`): the known ones whose rule lets
/// them through; never an unknown one.
pub fn for_upstream(client: &Map<String, Value>, upstream: Option<&Map<String, Value>>, era: Era) -> Map<String, Value> {
    client.iter().filter(|(key, _)| relayed(key, upstream, era)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Whether the client's extension `key` is relayed to an upstream that declares `upstream`,
/// spoken to in `era`.
fn relayed(key: &str, upstream: Option<&Map<String, Value>>, era: Era) -> bool {
    known(key).is_some_and(|e| {
        e.relayed_in(era)
            && match e.declare {
                Declare::Always(_) => true,
                Declare::ToDeclaring => upstream.and_then(|u| u.get(key)).is_some_and(|v| !v.is_null()),
            }
    })
}

/// What the gateway declares for itself to upstreams spoken to in `era` (its own requests and
/// its own upstream sessions).
pub fn gateway_declares(era: Era) -> Map<String, Value> {
    EXTENSIONS
        .iter()
        .filter(|e| e.relayed_in(era))
        .filter_map(|e| match e.declare {
            Declare::Always(settings) => Some((e.key.to_string(), settings())),
            Declare::ToDeclaring => None,
        })
        .collect()
}

/// Rewrites the `extensions` of a capabilities object (a client's `capabilities`, or the value
/// of `_meta["io.modelcontextprotocol/clientCapabilities"]`) for an upstream, see
/// [`for_upstream`]; an empty result removes the member.
pub fn filter_client_capabilities(capabilities: &mut Value, upstream: Option<&Map<String, Value>>, era: Era) {
    let Some(caps) = capabilities.as_object_mut() else { return };
    // In place: this runs for every forwarded request.
    let empty = match caps.get_mut("extensions") {
        Some(Value::Object(client)) => {
            client.retain(|key, _| relayed(key, upstream, era));
            client.is_empty()
        }
        Some(_) => true,
        None => return,
    };
    if empty {
        caps.remove("extensions");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TASKS_EXTENSION as TASKS, UI_EXTENSION as UI};
    use serde_json::json;

    const UNKNOWN: &str = "com.example/unknown";

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn keys(m: &Map<String, Value>) -> Vec<&str> {
        let mut k: Vec<&str> = m.keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn only_known_extensions_are_advertised_in_the_eras_they_are_relayed_in() {
        let declared = map(json!({ UNKNOWN: {}, TASKS: { "x": 1 }, UI: { "mimeTypes": ["text/html;profile=mcp-app"] } }));
        let no: &[&str] = &[];
        let modern = Offer { declared: Some(&declared), modern: true, serves: no };
        let out = advertised(&[modern], Era::Modern);
        assert_eq!(keys(&out), [TASKS, UI], "the unknown one never");
        assert_eq!(out[TASKS], json!({ "x": 1 }), "the upstream's settings pass");
        let modern = Offer { declared: Some(&declared), modern: true, serves: no };
        assert_eq!(keys(&advertised(&[modern], Era::Legacy)), [UI], "tasks are 2026-07-28 only");
        let legacy_upstream = Offer { declared: Some(&declared), modern: false, serves: no };
        assert_eq!(keys(&advertised(&[legacy_upstream], Era::Modern)), [UI], "a legacy upstream is never told about tasks");
        assert!(advertised(&[], Era::Modern).is_empty());
    }

    #[test]
    fn ui_is_advertised_for_an_upstream_serving_ui_resources_and_the_first_settings_win() {
        let serves_ui: &[&str] = &["ui://"];
        let no: &[&str] = &[];
        assert_eq!(schemes().collect::<Vec<_>>(), ["ui://"]);
        let first = map(json!({ UI: { "a": 1 } }));
        let second = map(json!({ UI: { "b": 2 } }));
        let offers = [
            Offer { declared: None, modern: true, serves: no },
            Offer { declared: Some(&first), modern: false, serves: no },
            Offer { declared: Some(&second), modern: true, serves: no },
        ];
        assert_eq!(advertised(&offers, Era::Modern)[UI], json!({ "a": 1 }));
        let offers = [Offer { declared: None, modern: true, serves: serves_ui }];
        assert_eq!(advertised(&offers, Era::Legacy)[UI], json!({}), "serving without declaring");
        let null = map(json!({ TASKS: null }));
        assert!(advertised(&[Offer { declared: Some(&null), modern: true, serves: no }], Era::Modern).is_empty(), "null is not declared");
    }

    #[test]
    fn the_first_settings_are_the_default_merge() {
        assert_eq!(first(&[json!({ "a": 1 }), json!({ "b": 2 })]), json!({ "a": 1 }));
        assert_eq!(first(&[]), json!({}));
        let mut rows: Vec<&str> = EXTENSIONS.iter().map(|e| e.key).collect();
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), EXTENSIONS.len(), "one row per key");
    }

    #[test]
    fn retaining_for_an_era_drops_unknown_and_out_of_era_extensions() {
        let mut m = map(json!({ UNKNOWN: {}, TASKS: {}, UI: {} }));
        retain_for_era(&mut m, Era::Modern);
        assert_eq!(keys(&m), [TASKS, UI]);
        retain_for_era(&mut m, Era::Legacy);
        assert_eq!(keys(&m), [UI]);
    }

    #[test]
    fn upstreams_hear_of_known_extensions_only_as_their_rule_says() {
        let client = map(json!({ UNKNOWN: {}, TASKS: {}, UI: { "mimeTypes": [] } }));
        let with_tasks = map(json!({ TASKS: {} }));
        assert_eq!(keys(&for_upstream(&client, Some(&with_tasks), Era::Modern)), [TASKS, UI]);
        assert_eq!(keys(&for_upstream(&client, None, Era::Modern)), [UI], "tasks only to an upstream that declares them");
        assert_eq!(keys(&for_upstream(&client, Some(&with_tasks), Era::Legacy)), [UI], "tasks never in a legacy era");
        let mut caps = json!({ "elicitation": {}, "extensions": { UNKNOWN: {} } });
        filter_client_capabilities(&mut caps, None, Era::Modern);
        assert_eq!(caps, json!({ "elicitation": {} }), "nothing left: the member goes");
        let mut caps = json!({ "extensions": { UNKNOWN: {}, UI: {} } });
        filter_client_capabilities(&mut caps, None, Era::Legacy);
        assert_eq!(caps, json!({ "extensions": { UI: {} } }));
        let mut odd = json!({ "extensions": [1] });
        filter_client_capabilities(&mut odd, None, Era::Modern);
        assert_eq!(odd, json!({}));
    }

    #[test]
    fn the_gateway_declares_what_it_relays_for_everyone() {
        for era in [Era::Modern, Era::Legacy] {
            let own = gateway_declares(era);
            assert_eq!(keys(&own), [crate::SKILLS_EXTENSION, UI], "{era:?}");
            assert_eq!(own[UI], crate::ui_client_capability());
            assert_eq!(own[crate::SKILLS_EXTENSION], json!({}));
        }
    }
}
