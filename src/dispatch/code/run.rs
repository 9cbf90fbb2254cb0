//! One `run_code` call: the program checked (its size; the sandbox this kernel enforces, else no
//! program runs), a place taken (`gateway::programs`), its process started with the names of the
//! tools the caller may see, and its lines driven to the end within the wall clock. Each call the
//! program asks for becomes the caller's own `tools/call` ([`inner_request`]: the program chooses
//! the tool and the arguments, never the caller, the endpoint, `_meta`, headers or the method),
//! takes the caller's own rate limit as a request would, then goes through the whole call chain
//! (`chain::serve_as`) with the program's id on every record; its reply becomes the program's
//! answer, a refusal a `ToolError` with the same text and code as by hand and the audit's label as
//! `reason`. A call that needs a person's answer stops the driving ([`Driven::Asked`]) for the
//! program to be paused (`paused.rs`). However the
//! program ends, the run is audited under its id, and a program stopped by a limit or an error
//! lists the calls it made (their effects stand).

use super::super::{Request, Served, chain, search};
use super::{PROGRAM_META, RUN};
use crate::audit::Subject;
use crate::gateway::programs::Slot;
use crate::upstream::UpstreamError;
use crate::upstream::program::{self, Program};
use mcpgate_coderun::Answer;
use mcpgate_coderun::wire::{Done, FailKind, Failed, FromChild, Limits, ToolFailure};
use mcpgate_model::catalog::{Kind, view};
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A program on its way: its process, its place, and what it did so far.
pub(super) struct Run {
    pub id: Arc<str>,
    pub program: Program,
    pub slot: Slot,
    /// Each inner call: the tool as the program named it, and how it ended.
    pub calls: Vec<(String, String)>,
    /// Time run so far before the current request (a resumed program's earlier requests).
    pub ran: Duration,
    /// How many times it paused for a person's answer.
    pub rounds: u32,
    /// The run's record if it is dropped before it ends or pauses.
    pub unended: Unended,
}

/// A run's record while it has none: written as `abandoned` when the run is dropped before it
/// ended or paused (its client went away, its request was cancelled), so every run is audited.
pub(super) struct Unended {
    audit: Arc<crate::audit::Audit>,
    subject: Option<Subject>,
    since: std::time::Instant,
}

impl Unended {
    pub fn new(gw: &Served<'_>, req: &Request, id: &Arc<str>) -> Unended {
        let mut subject = Subject::asked(&req.caller, Method::ToolsCall, RUN);
        subject.request = req.request_id.clone();
        subject.program = Some(Arc::clone(id));
        Unended { audit: Arc::clone(&gw.audit), subject: Some(subject), since: std::time::Instant::now() }
    }

    /// The run ended or paused: its record is written there.
    pub fn disarm(&mut self) {
        self.subject = None;
    }
}

impl Drop for Unended {
    fn drop(&mut self) {
        if let Some(subject) = self.subject.take() {
            self.audit.program(&subject, "abandoned", self.since.elapsed());
        }
    }
}

/// A tool's name as a program's list of calls keeps it: cleaned and cut as the audit writes it
/// (a program may name a tool with a megabyte of text).
pub(super) fn shown(tool: &str) -> String {
    crate::audit::clean(tool).into_owned()
}

/// What became of one inner call.
pub(super) enum Inner {
    /// The program's answer, and how the call ended (the audit's words).
    Answer(Answer, String),
    /// The call needs a person's answer first: its `input_required` result.
    Ask(Value),
}

/// Where driving a program got to.
pub(super) enum Driven {
    /// It ended: the outer result.
    Ended(Reply),
    /// It waits on call (id, tool, arguments), whose result asks for a person's answer.
    Asked(Box<Run>, (u64, String, Value), Value),
}

impl From<Reply> for Driven {
    fn from(reply: Reply) -> Self {
        Driven::Ended(reply)
    }
}

/// How a program ended.
enum Ending {
    Done(Done),
    Failed(Failed),
    /// Over a limit the gateway keeps (the wall clock, the rounds of questions): which, and why.
    Over(&'static str, String),
    /// The process misbehaved or went away.
    Broken(String),
}

/// `run_code`: runs the program in `code`.
pub(super) async fn run(gw: &Served<'_>, req: &Request) -> Driven {
    let args = match search::arguments(req) {
        Ok(a) => a,
        Err(e) => return Reply::error(e).into(),
    };
    let Some(code) = args.get("code").and_then(Value::as_str) else {
        return search::tool_error("run_code needs `code`: the body of an async JavaScript function that calls tools and returns a value.")
            .into();
    };
    let cfg = &gw.config.code_mode;
    if code.len() > cfg.program_size {
        return search::tool_error(&format!(
            "The program was not run: it is {} bytes, and this gateway runs programs of at most {} bytes.",
            code.len(),
            cfg.program_size
        ))
        .into();
    }
    if let Some(why) = program::unconfinable() {
        return search::tool_error(&format!("The program was not run: code mode needs a sandbox this machine does not enforce ({why})."))
            .into();
    }
    let slot = match gw.programs.enter(&req.caller.id, cfg.programs, cfg.programs_per_caller) {
        Ok(slot) => slot,
        Err(busy) => return search::tool_error(&format!("The program was not run: {busy}; try again once one has ended.")).into(),
    };
    let id_of = |i: usize| gw.upstream_id(i);
    let tools: Vec<String> = view::visible(&gw.view, Kind::Tool, &req.caller.grants, &id_of).iter().map(|e| e.name.clone()).collect();
    let limits = Limits {
        heap: cfg.heap,
        stack: cfg.stack,
        cpu_ms: u64::try_from(cfg.cpu.as_millis()).unwrap_or(u64::MAX),
        calls: cfg.calls,
        output: cfg.output,
        logs: cfg.logs,
    };
    let id: Arc<str> = format!("prg-{}", mcpgate_protocol::toolbox::random_hex(8)).into();
    let deadline = Instant::now() + cfg.wall_clock;
    let started = match program::start(&limits) {
        Ok(mut p) => match tokio::time::timeout_at(deadline, p.send_start(code, &tools)).await {
            Ok(sent) => sent.map(|()| p),
            Err(_) => Err(UpstreamError::Timeout { after: cfg.wall_clock }),
        },
        Err(e) => Err(e),
    };
    match started {
        Ok(program) => {
            let unended = Unended::new(gw, req, &id);
            drive(gw, req, Run { id, program, slot, calls: Vec::new(), ran: Duration::ZERO, rounds: 0, unended }, None).await
        }
        Err(e) => {
            audit_run(gw, req, &id, "error", Duration::ZERO);
            search::tool_error(&format!("The program was not run: its process did not start ({e}).")).into()
        }
    }
}

/// Runs the program's lines to its end, or to a pause. `first`: the answer to give first (to the
/// call a resumed program waits on: its id, the tool, the answer and how the call ended).
pub(super) async fn drive(gw: &Served<'_>, req: &Request, mut run: Run, first: Option<(u64, String, Answer, String)>) -> Driven {
    let began = Instant::now();
    let deadline = began + gw.config.code_mode.wall_clock.saturating_sub(run.ran);
    let mut answer = first;
    loop {
        if let Some((n, tool, value, outcome)) = answer.take() {
            run.calls.push((shown(&tool), outcome));
            // A child that stops reading is stopped by the wall clock too.
            match tokio::time::timeout_at(deadline, run.program.answer(n, value)).await {
                Err(_) => return ended(gw, req, run, began, wall_clock(gw)).into(),
                Ok(Err(e)) => return ended(gw, req, run, began, Ending::Broken(e.to_string())).into(),
                Ok(Ok(())) => {}
            }
        }
        let line = run.program.next(deadline).await;
        match line {
            Ok(FromChild::Call(call)) if run.calls.len() >= gw.config.code_mode.calls as usize => {
                // The child counts its calls too; one more than allowed is its process misbehaving.
                let why = format!("the program's process asked for call {} past its limit of {}", call.id, gw.config.code_mode.calls);
                return ended(gw, req, run, began, Ending::Broken(why)).into();
            }
            Ok(FromChild::Call(call)) => {
                let made = tokio::time::timeout_at(deadline, make(gw, req, &run.id, call.id, &call.tool, &call.arguments, None)).await;
                match made {
                    Err(_) => {
                        run.calls.push((shown(&call.tool), "abandoned".into()));
                        return ended(gw, req, run, began, wall_clock(gw)).into();
                    }
                    Ok(Inner::Ask(question)) => {
                        run.ran += began.elapsed();
                        return Driven::Asked(Box::new(run), (call.id, call.tool, call.arguments), question);
                    }
                    Ok(Inner::Answer(value, outcome)) => answer = Some((call.id, call.tool, value, outcome)),
                }
            }
            Ok(FromChild::Done(done)) => return ended(gw, req, run, began, Ending::Done(done)).into(),
            Ok(FromChild::Failed(failed)) => return ended(gw, req, run, began, Ending::Failed(failed)).into(),
            Err(UpstreamError::Timeout { .. }) => return ended(gw, req, run, began, wall_clock(gw)).into(),
            Err(e) => return ended(gw, req, run, began, Ending::Broken(e.to_string())).into(),
        }
    }
}

/// The `tools/call` of call `n` of `program`, as the caller of `outer` would send it by hand:
/// the same caller (so the same endpoint and grants), era and `_meta` (without a progress token:
/// the program's calls report no progress), the tool and arguments the program chose, and, on a
/// retry, the question's state and the person's answers.
pub(super) fn inner_request(
    outer: &Request,
    program: &str,
    n: u64,
    tool: &str,
    arguments: &Value,
    retry: Option<(&Value, &Value)>,
) -> Result<Request, RpcError> {
    let mut params = RawObject::default();
    let cannot = |e: serde_json::Error| RpcError::internal(format!("cannot build the program's call: {e}"));
    params.set_json("name", tool).map_err(cannot)?;
    params.set_json("arguments", arguments).map_err(cannot)?;
    if let Some((state, answers)) = retry {
        if !state.is_null() {
            params.set_json("requestState", state).map_err(cannot)?;
        }
        params.set_json("inputResponses", answers).map_err(cannot)?;
    }
    let mut meta = outer.meta.clone();
    meta.fields.remove(mcpgate_protocol::keys::PROGRESS_TOKEN);
    Ok(Request {
        id: Json::to_json(&format!("{program}-{n}")).map_err(cannot)?,
        method: Method::ToolsCall,
        params,
        meta,
        param_headers: None,
        caller: Arc::clone(&outer.caller),
        legacy: outer.legacy.clone(),
        request_id: outer.request_id.clone(),
    })
}

/// Makes call `n` of `program`: the caller's own rate limit, then the whole call chain (with, on
/// a retry, the question's state and the person's answers).
pub(super) async fn make(
    gw: &Served<'_>,
    outer: &Request,
    program: &Arc<str>,
    n: u64,
    tool: &str,
    arguments: &Value,
    retry: Option<(&Value, &Value)>,
) -> Inner {
    let caller = &outer.caller;
    // A retry's own request took the caller's rate at its admission: the call it resumes is not
    // charged again.
    if let Some(rate) = caller.rate.filter(|_| retry.is_none())
        && let Err(wait) = gw.limiter.check(&format!("caller:{}", caller.id), rate).await
    {
        let reason = crate::telemetry::reasons::Refused::RateLimited;
        gw.metrics.refused(reason);
        let mut subject = Subject::asked(caller, Method::ToolsCall, tool);
        subject.program = Some(Arc::clone(program));
        gw.audit.refused(&subject, reason.as_str());
        let e = super::super::rate_limited(&caller.id, wait);
        return Inner::Answer(Answer::Error(failure(reason.as_str(), Some(e.code), e.message, None)), reason.as_str().into());
    }
    let req = match inner_request(outer, program, n, tool, arguments, retry) {
        Ok(r) => r,
        Err(e) => return Inner::Answer(Answer::Error(failure("error", Some(e.code), e.message, None)), "error".into()),
    };
    let (reply, refused) = chain::serve_as(gw, req, Some(Arc::clone(program))).await;
    let outcome = match reply {
        Reply::Single(o) => o,
        Reply::Stream(s) => s.outcome().await,
    };
    answer_of(outcome, refused)
}

fn failure(reason: &str, code: Option<i64>, message: String, result: Option<Value>) -> ToolFailure {
    ToolFailure { reason: reason.to_string(), code, message, result }
}

/// What the program gets for a call that ended with `outcome` (`refused`: the audit's label of
/// the refusal that stopped it, if one did).
fn answer_of(outcome: Outcome, refused: Option<&'static str>) -> Inner {
    match outcome {
        Outcome::Result(raw) => {
            let Ok(v) = serde_json::from_str::<Value>(raw.get()) else {
                return Inner::Answer(
                    Answer::Error(failure("error", None, "the tool's result does not read".into(), None)),
                    "error".into(),
                );
            };
            if v["resultType"] == "input_required" {
                return Inner::Ask(v);
            }
            // Anything but a complete result (a task, a kind this gateway does not know) is not a
            // value a program can use: it fails, rather than passing for an empty success.
            if let Some(kind) = v["resultType"].as_str().filter(|k| *k != "complete") {
                let message = format!("the tool answered with a {kind:?} result, which a program cannot use");
                return Inner::Answer(Answer::Error(failure("unsupported_result", None, message, Some(v))), "unsupported_result".into());
            }
            if v["isError"] == true {
                let reason = refused.unwrap_or("tool_error");
                return Inner::Answer(Answer::Error(failure(reason, None, text_of(&v), Some(v))), reason.into());
            }
            let value = match v.get("structuredContent") {
                Some(s) if !s.is_null() => s.clone(),
                _ => json!({ "content": v.get("content").cloned().unwrap_or(json!([])), "text": text_of(&v), "isError": false }),
            };
            Inner::Answer(Answer::Ok(value), "ok".into())
        }
        Outcome::Error(e) => {
            let label = refused.map_or_else(|| format!("error {}", e.code), str::to_string);
            let reason = refused.unwrap_or("error");
            Inner::Answer(Answer::Error(failure(reason, Some(e.code), e.message, None)), label)
        }
        Outcome::UpstreamError(raw) => {
            let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
            let code = v["code"].as_i64();
            let message = v["message"].as_str().unwrap_or("the upstream answered with an error").to_string();
            Inner::Answer(Answer::Error(failure("upstream_error", code, message, None)), format!("upstream_error {}", code.unwrap_or(0)))
        }
    }
}

/// The text blocks of a tool result, one per line.
fn text_of(result: &Value) -> String {
    let blocks = result["content"].as_array().map(Vec::as_slice).unwrap_or_default();
    blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// Audits the run of program `id` of `req`'s caller.
pub(super) fn audit_run(gw: &Served<'_>, req: &Request, id: &Arc<str>, outcome: &str, took: Duration) {
    let mut subject = Subject::asked(&req.caller, Method::ToolsCall, RUN);
    subject.request = req.request_id.clone();
    subject.program = Some(Arc::clone(id));
    gw.audit.program(&subject, outcome, took);
}

fn wall_clock(gw: &Served<'_>) -> Ending {
    let wall = humantime::format_duration(gw.config.code_mode.wall_clock);
    Ending::Over("wall_clock", format!("the program ran past its wall clock of {wall}"))
}

/// Stops `run` over a limit the gateway keeps (`limit`, `message`): its result, audited.
pub(super) fn over(gw: &Served<'_>, req: &Request, run: Run, limit: &'static str, message: String) -> Reply {
    ended(gw, req, run, Instant::now(), Ending::Over(limit, message))
}

/// The result of a program that ended, audited.
fn ended(gw: &Served<'_>, req: &Request, run: Run, began: Instant, ending: Ending) -> Reply {
    let took = run.ran + began.elapsed();
    let Run { id, program, calls, mut unended, .. } = run;
    unended.disarm();
    // The process goes now, whatever it was doing.
    drop(program);
    let outcome = match &ending {
        Ending::Done(_) => "ok".to_string(),
        Ending::Failed(f) if f.kind == FailKind::Limit => format!("limit_{}", f.limit.map_or("unknown", |l| l.as_str())),
        Ending::Failed(f) if f.kind == FailKind::Protocol => "protocol".to_string(),
        Ending::Failed(_) => "exception".to_string(),
        Ending::Over(limit, _) => format!("limit_{limit}"),
        Ending::Broken(_) => "protocol".to_string(),
    };
    audit_run(gw, req, &id, &outcome, took);
    let meta = json!({ PROGRAM_META: &*id });
    let result = match ending {
        Ending::Done(done) => done_result(done, meta),
        Ending::Failed(f) => failed_result(&f.message, f.kind, f.limit.map(|l| l.as_str()), f.stack.as_deref(), &f.logs, &calls, meta),
        Ending::Over(limit, message) => failed_result(&message, FailKind::Limit, Some(limit), None, &[], &calls, meta),
        Ending::Broken(why) => failed_result(&why, FailKind::Protocol, None, None, &[], &calls, meta),
    };
    search::result(result)
}

/// The result of a program that returned: its value as JSON text (and as `structuredContent`
/// when it is an object), then what it logged.
fn done_result(done: Done, meta: Value) -> Value {
    let mut content = vec![json!({ "type": "text", "text": done.value.to_string() })];
    if !done.logs.is_empty() {
        content.push(json!({ "type": "text", "text": format!("console:\n{}", done.logs.join("\n")) }));
    }
    let mut r = json!({ "resultType": "complete", "content": content, "isError": false, "_meta": meta });
    if done.value.is_object() {
        r["structuredContent"] = done.value;
    }
    r
}

/// The tool error of a program that did not finish: why, and the calls it made.
fn failed_result(
    message: &str,
    kind: FailKind,
    limit: Option<&str>,
    stack: Option<&str>,
    logs: &[String],
    calls: &[(String, String)],
    meta: Value,
) -> Value {
    let head = match (kind, limit) {
        (FailKind::Limit, Some(limit)) => format!("The program was stopped at its {limit} limit: {message}"),
        (FailKind::Protocol, _) => format!("The program's process failed: {message}"),
        _ => format!("The program failed: {message}"),
    };
    let mut text = head;
    if let Some(stack) = stack.filter(|s| !s.is_empty()) {
        text.push_str(&format!("\n{stack}"));
    }
    if calls.is_empty() {
        text.push_str("\nIt made no tool call.");
    } else {
        text.push_str("\nThe tool calls it made before it stopped (their effects stand):");
        for (tool, outcome) in calls {
            text.push_str(&format!("\n- {tool}: {outcome}"));
        }
    }
    let mut content = vec![json!({ "type": "text", "text": text })];
    if !logs.is_empty() {
        content.push(json!({ "type": "text", "text": format!("console:\n{}", logs.join("\n")) }));
    }
    let listed: Vec<Value> = calls.iter().map(|(tool, outcome)| json!({ "tool": tool, "outcome": outcome })).collect();
    let kind = match kind {
        FailKind::Exception => "exception",
        FailKind::Limit => "limit",
        FailKind::Protocol => "protocol",
    };
    json!({
        "resultType": "complete",
        "content": content,
        "isError": true,
        "structuredContent": { "error": { "kind": kind, "limit": limit, "message": message }, "calls": listed },
        "_meta": meta,
    })
}
