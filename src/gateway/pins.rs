//! Pinned tool definitions on the gateway (`[pins]`, docs/security.md): the approved definitions
//! (the lock file, re-read when it changes, so an approval applies without a restart), and the
//! screening of each upstream's tools before the catalogue is merged: with `enforce`, a tool whose
//! definition differs from its pin, or that has none, is held out (a problem of the catalogue,
//! logged once, shown by `mcpgate check`, counted in `/metrics`); with `record`, it is served and
//! the difference is logged once and counted. An approval from the console names the fingerprint
//! of the definition the person reviewed, and is refused if the upstream serves another one now.
//! Agent Skills are screened alike (their definition carries their files' digests): a held
//! skill leaves the skill list, and its files the resource list (reads of them are refused, see
//! `reads`). The `catalogue` guards (`[[guard]]` and the `[secrets]` detectors) read every tool,
//! prompt and skill definition here too: one they deny is held in every mode; one a built-in
//! guard flags is held under `enforce` like any unapproved definition, with the flag in its
//! reason (a person who approves it has seen it), and logged otherwise; one they modify is
//! served modified. An external guard's verdict comes from `Gateway::definition_verdict`: until
//! it has answered, the definition is held.

use super::Gateway;
use crate::upstream::{Upstream, UpstreamState};
use arc_swap::ArcSwap;
use mcpgate_config::guards::{GuardConfig, GuardKind};
use mcpgate_model::catalog::pins::{self, PinFile, PinMode, Standing};
use mcpgate_model::catalog::{Kind, Problem};
use mcpgate_model::policy::guards::{Point, Verdict, builtin};
use mcpgate_protocol::read;
use mcpgate_protocol::sync::lock;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How often the lock file is looked at for changes.
const WATCH: Duration = Duration::from_secs(1);
/// How a held tool's problem starts (the audit reason of a call that names it).
pub const HELD: &str = "held until approved";

mod approvals;

/// The approved definitions in effect.
#[derive(Default)]
pub struct Pins {
    /// The lock file with the state database's newer approvals in place (`approvals`).
    file: ArcSwap<PinFile>,
    /// The lock file as last read.
    base: Mutex<PinFile>,
    /// The approvals of the state database as last read, and the counter they reflect.
    approved: Mutex<(Option<u64>, Vec<approvals::Approved>)>,
    /// What the lock file looked like when it was last read: its modification time, `None` when
    /// there was none (`None` outside: never read).
    read: Mutex<Option<Option<SystemTime>>>,
    /// Differences already logged in `record` mode (upstream, tool, fingerprint).
    logged: Mutex<HashSet<(String, String, String)>>,
}

/// Why an approval was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    /// The upstream does not serve the tool now.
    #[error("{0}")]
    NotServed(String),
    /// The upstream serves another definition than the one reviewed.
    #[error("{0}")]
    Changed(String),
    /// The approval could not be kept in the state database.
    #[error("the state database: {0}")]
    Db(approvals::RecordError),
    /// The lock file could not be read.
    #[error("{0}")]
    File(PinFileError),
    /// The lock file could not be written.
    #[error("{}: {error}", path.display())]
    Write { path: std::path::PathBuf, error: std::io::Error },
}

/// How the catalogue guards' verdicts reach the gateway (which implements it).
pub trait Catalogue {
    /// A definition put to an external guard (`Gateway::definition_verdict`): the guard, the
    /// item's kind, name and upstream, its definition; `None` while it is being asked.
    fn ask(&self, g: &GuardConfig, kind: Kind, name: &str, upstream: &str, definition: &serde_json::Value) -> Option<Verdict>;
    /// A built-in guard's verdict on a definition (its text), or a refusal of a definition that
    /// cannot be read, counted and audited (`Gateway::catalogue_verdict`).
    fn record(&self, g: &GuardConfig, kind: Kind, name: &str, upstream: &str, text: &str, verdict: &Verdict);
}

impl Catalogue for Gateway {
    fn ask(&self, g: &GuardConfig, kind: Kind, name: &str, upstream: &str, definition: &serde_json::Value) -> Option<Verdict> {
        self.definition_verdict(g, kind, name, upstream, definition)
    }

    fn record(&self, g: &GuardConfig, kind: Kind, name: &str, upstream: &str, text: &str, verdict: &Verdict) {
        self.catalogue_verdict(g, kind, name, upstream, text, verdict)
    }
}

/// See [`Catalogue`].
pub type Ask<'a> = &'a dyn Catalogue;

/// An upstream's tools and skills after screening.
pub struct Screened {
    /// The tools to merge (`None`: all of them, nothing held).
    pub tools: Option<Vec<Box<RawValue>>>,
    /// The skills to merge (`None`: all of them).
    pub skills: Option<Vec<Box<RawValue>>>,
    /// The resources to merge (`None`: all of them): a held skill's files are left out.
    pub resources: Option<Vec<Box<RawValue>>>,
    /// The prompts to merge (`None`: all of them): the catalogue guards may hold or redact some.
    pub prompts: Option<Vec<Box<RawValue>>>,
    pub held: Vec<Problem>,
    /// `record` mode: tools served although they differ from their pin.
    pub drifted: usize,
}

/// Why a lock file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PinFileError {
    #[error("{}: not a pin file: {source}", path.display())]
    NotAPinFile { path: std::path::PathBuf, source: serde_json::Error },
    #[error("{}: {source}", path.display())]
    Io { path: std::path::PathBuf, source: std::io::Error },
}

/// Reads a lock file (`Ok(None)`: there is none).
pub fn read(path: &Path) -> Result<Option<PinFile>, PinFileError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|source| PinFileError::NotAPinFile { path: path.into(), source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PinFileError::Io { path: path.into(), source }),
    }
}

impl Pins {
    /// Re-reads the lock file if it changed since the last read, and the approvals in the state
    /// database `db` if they changed; whether the pins in effect did.
    pub fn refresh(&self, path: &Path, db: Option<&mcpgate_store::Db>) -> bool {
        let modified = match std::fs::metadata(path) {
            Ok(m) => m.modified().ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // Unreadable now: read (and report) it again.
            Err(_) => Some(SystemTime::UNIX_EPOCH),
        };
        // A file that is still absent, or not modified since, has not changed.
        let file_changed = if *lock(&self.read) == Some(modified) && modified != Some(SystemTime::UNIX_EPOCH) {
            false
        } else {
            match read(path) {
                Ok(file) => {
                    *lock(&self.read) = Some(modified);
                    *lock(&self.base) = file.unwrap_or_default();
                    true
                }
                Err(e) => {
                    // A broken file keeps the pins in effect (held tools stay held).
                    tracing::warn!(error = %e, "the pin file could not be read; the pins in effect stay");
                    *lock(&self.read) = Some(modified);
                    false
                }
            }
        };
        let db_changed = db.is_some_and(|db| {
            let seen = lock(&self.approved).0;
            match approvals::counter(db) {
                Ok(n) if Some(n) == seen => false,
                Ok(_) => match approvals::read(db) {
                    Ok((n, rows)) => {
                        *lock(&self.approved) = (Some(n), rows);
                        true
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "the pin approvals could not be read from the state database");
                        false
                    }
                },
                Err(e) => {
                    tracing::debug!(error = %e, "the pin approvals could not be read from the state database");
                    false
                }
            }
        });
        if file_changed || db_changed {
            let modified = lock(&self.read).flatten();
            let effective = approvals::overlay(&lock(&self.base), modified, &lock(&self.approved).1);
            self.file.store(Arc::new(effective));
        }
        file_changed || db_changed
    }

    /// Screens an upstream's tools and skills against its pins, in `mode`, and its tools, prompts
    /// and skills with the catalogue's `guards` (`config::guards::catalogue`).
    pub fn screen(&self, up: &Upstream, st: &UpstreamState, mode: PinMode, guards: &[GuardConfig], ask: Ask<'_>) -> Screened {
        let guards: Vec<&GuardConfig> = guards.iter().collect();
        if mode == PinMode::Off && guards.is_empty() {
            return Screened { tools: None, skills: None, resources: None, prompts: None, held: Vec::new(), drifted: 0 };
        }
        let (tools, mut held, mut drifted) = self.screen_kind(up, st, mode, Kind::Tool, &guards, ask);
        let (skills, held_skills, skills_drifted) = self.screen_kind(up, st, mode, Kind::Skill, &guards, ask);
        let (prompts, held_prompts, _) = self.screen_kind(up, st, PinMode::Off, Kind::Prompt, &guards, ask);
        held.extend(held_prompts);
        drifted += skills_drifted;
        // The files of a held skill are held with it.
        let dirs: Vec<&str> = held_skills.iter().filter_map(|p| p.item.strip_suffix("SKILL.md")).collect();
        let resources = (!dirs.is_empty()).then(|| {
            st.items(Kind::Resource)
                .iter()
                .filter(|raw| {
                    let uri = serde_json::from_str::<serde_json::Value>(raw.get()).ok().and_then(|v| v["uri"].as_str().map(str::to_string));
                    !uri.is_some_and(|u| dirs.iter().any(|d| u.starts_with(d)))
                })
                .cloned()
                .collect()
        });
        held.extend(held_skills);
        Screened { tools: Some(tools), skills: Some(skills), resources, prompts: Some(prompts), held, drifted }
    }

    /// Screens the items of `kind` (tools or skills): those kept, those held, and how many
    /// drifted (`record`).
    fn screen_kind(
        &self,
        up: &Upstream,
        st: &UpstreamState,
        mode: PinMode,
        kind: Kind,
        guards: &[&GuardConfig],
        ask: Ask<'_>,
    ) -> (Vec<Box<RawValue>>, Vec<Problem>, usize) {
        let file = self.file.load();
        let pinned = file.upstreams.get(up.id());
        let (mut kept, mut held, mut drifted) = (Vec::new(), Vec::new(), 0);
        for raw in st.items(kind) {
            let (redacted, flagged) = match self.guard(up, kind, raw, guards, ask) {
                Guarded::Pass(redacted, flagged) => (redacted, flagged),
                Guarded::Held(problem) => {
                    held.push(problem);
                    continue;
                }
            };
            let raw = redacted.as_ref().unwrap_or(raw);
            if mode == PinMode::Off {
                kept.push(raw.clone());
                continue;
            }
            let Some(current) = fingerprint(kind, raw.get()) else {
                // A definition that cannot be read cannot be compared with its pin.
                if mode == PinMode::Enforce && matches!(kind, Kind::Tool | Kind::Skill) {
                    let why = read::text_value(raw.get()).err().map_or_else(|| "it is not an object".to_string(), |e| e.to_string());
                    held.push(Problem {
                        upstream: up.id().to_string(),
                        kind,
                        item: name_of(raw.get(), if kind == Kind::Skill { "uri" } else { "name" }),
                        reason: format!("{HELD}: its definition cannot be read, so it cannot be compared with its pin ({why})"),
                    });
                } else {
                    kept.push(raw.clone());
                }
                continue;
            };
            let original = pins::pinned_name(&current.definition).unwrap_or("?").to_string();
            let standing = pins::standing(pinned, &original, &current);
            match (standing, mode) {
                (Standing::Pinned, _) => kept.push(raw.clone()),
                (s, PinMode::Enforce) => {
                    let label = kind.label();
                    let why = if s == Standing::New {
                        format!("a new {label}, not pinned yet")
                    } else {
                        "its definition differs from its pin".into()
                    };
                    let why = match &flagged {
                        Some(flag) => format!("{why}, and {flag}"),
                        None => why,
                    };
                    held.push(Problem {
                        upstream: up.id().to_string(),
                        kind,
                        item: original,
                        reason: format!("{HELD}: {why} (mcpgate pin shows the difference; mcpgate pin --approve approves it)"),
                    });
                }
                (s, _) => {
                    drifted += 1;
                    if lock(&self.logged).insert((up.id().to_string(), original.clone(), current.sha256.clone())) {
                        let changes = pinned.and_then(|p| p.get(&original)).map(|p| pins::diff(&p.definition, &current.definition));
                        tracing::warn!(upstream = %up.id(), item = %original, new = s == Standing::New, changes = ?changes.unwrap_or_default(), "a {} is served that differs from its pin (pins: record)", kind.label());
                    }
                    kept.push(raw.clone());
                }
            }
        }
        (kept, held, drifted)
    }
}

impl Gateway {
    /// Every upstream's lists screened against its pins and the catalogue's guards (`states` by
    /// upstream, as `all`): what is held stays out, as a problem.
    pub(super) fn screen_all(&self, all: &[Arc<Upstream>], states: &[Arc<UpstreamState>]) -> Vec<Screened> {
        let config = self.config();
        let guards = mcpgate_config::guards::catalogue(&config.guards, &config.secrets);
        all.iter().zip(states).map(|(u, st)| self.pins.screen(u, st, self.pin_mode(u), &guards, self)).collect()
    }
}

/// What the catalogue guards made of a definition.
enum Guarded {
    /// Served (redacted, when a guard redacted it), with what a guard flagged.
    Pass(Option<Box<RawValue>>, Option<String>),
    /// Blocked by a guard: held whatever the pins say.
    Held(Problem),
}

impl Pins {
    /// The catalogue guards' verdicts on one definition, in the order declared.
    fn guard(&self, up: &Upstream, kind: Kind, raw: &RawValue, guards: &[&GuardConfig], ask: Ask<'_>) -> Guarded {
        if guards.is_empty() {
            return Guarded::Pass(None, None);
        }
        let key = if kind == Kind::Skill { "uri" } else { "name" };
        let mut definition = match read::text_value(raw.get()) {
            Ok(definition) => definition,
            Err(why) => {
                let name = name_of(raw.get(), key);
                let Some(g) = guards.iter().find(|g| g.guards(Point::Catalogue, &name)) else { return Guarded::Pass(None, None) };
                ask.record(g, kind, &name, up.id(), raw.get(), &Verdict::Deny(crate::gateway::guards::unreadable(&why)));
                return Guarded::Held(Problem {
                    upstream: up.id().to_string(),
                    kind,
                    item: name,
                    reason: format!("held: guard '{}' cannot read its definition ({why})", g.name),
                });
            }
        };
        let name = definition.get(key).and_then(|n| n.as_str()).unwrap_or("?").to_string();
        let (mut redacted, mut flagged) = (false, None);
        for g in guards.iter().filter(|g| g.guards(Point::Catalogue, &name)) {
            let verdict = match &g.kind {
                GuardKind::Builtin { detectors } => {
                    let verdict = builtin(detectors, &mut definition.clone());
                    ask.record(g, kind, &name, up.id(), raw.get(), &verdict);
                    verdict
                }
                _ => match ask.ask(g, kind, &name, up.id(), &definition) {
                    Some(v) => v,
                    None => {
                        return Guarded::Held(Problem {
                            upstream: up.id().to_string(),
                            kind,
                            item: name,
                            reason: format!("held: guard '{}' is checking its definition", g.name),
                        });
                    }
                },
            };
            match verdict {
                Verdict::Allow => {}
                Verdict::Flag(found) => {
                    let flag = format!("flagged by guard '{}' ({})", g.name, found.join(", "));
                    if lock(&self.logged).insert((up.id().to_string(), name.clone(), flag.clone())) {
                        tracing::warn!(upstream = %up.id(), item = %name, guard = %g.name, found = ?found, "a {} definition was flagged by a catalogue guard", kind.label());
                    }
                    flagged.get_or_insert(flag);
                }
                Verdict::Modify { content, .. } => {
                    definition = content;
                    redacted = true;
                }
                Verdict::Deny(reason) => {
                    return Guarded::Held(Problem {
                        upstream: up.id().to_string(),
                        kind,
                        item: name,
                        reason: format!("held: guard '{}' {reason} in its definition (fix the upstream, or the guard)", g.name),
                    });
                }
            }
        }
        let redacted = redacted.then(|| serde_json::value::to_raw_value(&definition).ok()).flatten();
        Guarded::Pass(redacted, flagged)
    }
}

/// The name (`key`) of a definition that cannot be read, as far as a lenient reading finds it.
fn name_of(text: &str, key: &str) -> String {
    let v = serde_json::from_str::<serde_json::Value>(text).ok();
    v.as_ref().and_then(|v| v.get(key)).and_then(|n| n.as_str()).unwrap_or("?").to_string()
}

/// The pinned definition of an item of `kind` (tools and skills are pinned).
pub fn fingerprint(kind: Kind, raw: &str) -> Option<pins::Pin> {
    match kind {
        Kind::Tool => pins::definition(raw),
        Kind::Skill => pins::skill_definition(raw),
        _ => None,
    }
}

/// One upstream's served tools and skills as pins (see [`Gateway::served_pins`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ServedPins {
    pub upstream: String,
    /// Whether it answered its last probe; an upstream that did not has its pins left alone.
    pub ready: bool,
    pub items: Vec<pins::Pin>,
}

/// The kind of a pinned item from its name: skills are pinned under their URI.
pub fn pinned_kind(name: &str) -> Kind {
    if name.contains("://") { Kind::Skill } else { Kind::Tool }
}

impl Gateway {
    /// The pin mode of upstream `up` under the configuration in effect.
    pub fn pin_mode(&self, up: &Upstream) -> PinMode {
        self.config().pins.mode_for(&up.cfg)
    }

    /// Watches the lock file: a change (an approval) re-reads it and rebuilds the catalogue,
    /// which tells each listener once.
    pub(super) fn watch_pins(self: &Arc<Self>) {
        let gw = Arc::downgrade(self);
        self.tasks.spawn(async move {
            loop {
                tokio::time::sleep(WATCH).await;
                let Some(g) = gw.upgrade() else { return };
                let path: PathBuf = g.config().pins.file.clone();
                let g2 = g.clone();
                // Off the async workers: a shared state database is a network round trip.
                let changed = tokio::task::spawn_blocking(move || g2.pins.refresh(&path, g2.db.as_deref())).await.unwrap_or(false);
                let path: PathBuf = g.config().pins.file.clone();
                if changed {
                    tracing::info!(file = %path.display(), "pins changed; the catalogue is rebuilt");
                    g.rebuild();
                }
            }
        });
    }

    /// The definition upstream `upstream` serves now for its tool (or skill, by its URI) `tool`,
    /// with its fingerprint.
    /// What each live upstream serves now, as pins (its tools, and its skills under their
    /// URIs): what `mcpgate pin --url` compares with the lock file, from the running gateway.
    pub fn served_pins(&self) -> Vec<ServedPins> {
        self.live_upstreams()
            .iter()
            .map(|up| {
                let st = up.state();
                let ready = st.status == crate::upstream::Status::Ready;
                let items = [Kind::Tool, Kind::Skill]
                    .into_iter()
                    .flat_map(|kind| st.items(kind).iter().filter_map(move |raw| fingerprint(kind, raw.get())))
                    .collect();
                ServedPins { upstream: up.id().to_string(), ready, items }
            })
            .collect()
    }

    fn served_definition(&self, upstream: &str, tool: &str) -> Option<pins::Pin> {
        let up = self.live_upstreams().into_iter().find(|u| u.id() == upstream)?;
        let kind = pinned_kind(tool);
        up.state()
            .items(kind)
            .iter()
            .filter_map(|raw| fingerprint(kind, raw.get()))
            .find(|p| pins::pinned_name(&p.definition) == Some(tool))
    }

    /// Approves the definition a person reviewed, named by its fingerprint (`reviewed`), for tool
    /// `tool` of upstream `upstream`: written to the lock file, and applied at once (the
    /// catalogue is rebuilt, listeners hear it once). Refused when the upstream serves another
    /// definition now: what is pinned is always what was reviewed.
    pub fn approve_pin(&self, upstream: &str, tool: &str, reviewed: &str) -> Result<(), ApproveError> {
        let current = self.served_definition(upstream, tool).ok_or_else(|| {
            ApproveError::NotServed(format!("upstream '{upstream}' serves no {} '{tool}' now", pinned_kind(tool).label()))
        })?;
        if current.sha256 != reviewed {
            return Err(ApproveError::Changed(format!(
                "upstream '{upstream}' now serves another definition of '{tool}' (fingerprint {}) than the one reviewed ({reviewed}): \
                 nothing was approved; review the definition it serves now",
                current.sha256
            )));
        }
        let path = self.config().pins.file.clone();
        // Kept in the state database first, where every replica finds it.
        if let Some(db) = &self.db {
            approvals::record(db, upstream, tool, &current).map_err(ApproveError::Db)?;
        }
        let mut file = read(&path).map_err(ApproveError::File)?.unwrap_or_default();
        file.version = 1;
        file.upstreams.entry(upstream.to_string()).or_default().insert(tool.to_string(), current);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, file.render()).map_err(|error| ApproveError::Write { path: tmp.clone(), error })?;
        std::fs::rename(&tmp, &path).map_err(|error| ApproveError::Write { path: path.clone(), error })?;
        if self.pins.refresh(&path, self.db.as_deref()) {
            self.rebuild();
        }
        Ok(())
    }

    /// The tools and skills held now, each with the definition its upstream serves (in full), its
    /// fingerprint (what an approval names) and what differs from its pin (for the console;
    /// `tool` names a skill by its upstream URI).
    pub fn held_tools(&self) -> Vec<serde_json::Value> {
        let file = self.pins.file.load();
        self.catalog()
            .problems
            .iter()
            .filter(|p| matches!(p.kind, Kind::Tool | Kind::Skill) && p.reason.starts_with(HELD))
            .map(|p| {
                let current = self.served_definition(&p.upstream, &p.item);
                let pinned = file.upstreams.get(&p.upstream).and_then(|t| t.get(&p.item));
                let changes = match (pinned, &current) {
                    (Some(old), Some(new)) => pins::diff(&old.definition, &new.definition),
                    _ => vec![format!("a new {}, not pinned yet", p.kind.label())],
                };
                serde_json::json!({
                    "upstream": p.upstream,
                    "kind": p.kind.label(),
                    "tool": p.item,
                    "changes": changes,
                    "fingerprint": current.as_ref().map(|c| c.sha256.clone()),
                    "definition": current.map(|c| c.definition),
                })
            })
            .collect()
    }

    /// Whether `name` is a tool held by its pin (for the audit reason of a call that names it).
    pub fn held_tool(&self, name: &str) -> bool {
        let cat = self.catalog();
        let config = self.config();
        cat.problems.iter().filter(|p| p.kind == Kind::Tool && p.reason.starts_with(HELD)).any(|p| {
            self.upstreams().iter().find(|u| u.id() == p.upstream).is_some_and(|u| {
                let rename = u.cfg.rename.iter().find(|(from, _)| *from == p.item).map(|(_, to)| to.as_str());
                config.catalog.names.gateway_name(&u.cfg.prefix, &p.item, rename) == name
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_file_that_is_absent_or_unmodified_is_no_change() {
        let dir = std::env::temp_dir().join(format!("mcpgate-pins-refresh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pins.json");
        let _ = std::fs::remove_file(&path);
        let pins = Pins::default();
        assert!(pins.refresh(&path, None), "the first look reads it");
        assert!(!pins.refresh(&path, None), "still absent: no change (no rebuild every second)");
        std::fs::write(&path, r#"{"version":1,"upstreams":{}}"#).unwrap();
        assert!(pins.refresh(&path, None), "written: a change");
        assert!(!pins.refresh(&path, None), "not modified since: no change");
        std::fs::remove_file(&path).unwrap();
        assert!(pins.refresh(&path, None), "removed: a change");
        assert!(!pins.refresh(&path, None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
