//! A program paused for a person's answer. When an inner call needs one (a `[[confirm]]`'s
//! question, or the upstream's own), its `input_required` result reaches the runner; the program's
//! process stays blocked on that call's answer (its wall clock stopped), is kept on this replica
//! under a fresh one-time key (`gateway::programs`), and the outer `run_code` answers
//! `input_required` with the inner call's questions verbatim and a `requestState` the gateway
//! seals, bound to the caller, its rules and the endpoint. The client's retry (a modern client's
//! own, or the legacy bridge's after a real `elicitation/create`) takes the program once, and the
//! inner call is made again with the question's own state and the person's answers, through the
//! whole chain: the confirmation redeems its own one-time entry, so a person is asked once and
//! the call runs once. A replayed retry finds nothing; a program not resumed within the input
//! timeout is dropped (its process killed) and audited as abandoned; a program that asks more
//! than [`MAX_ROUNDS`] times is stopped.

use super::super::{Request, Served, search};
use super::PROGRAM_META;
use super::run::{self, Driven, Inner, Run};
use crate::audit::Subject;
use crate::gateway::programs::Paused;
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::reply::Reply;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

const PURPOSE: &str = "mcpgate/program/v1";
/// The most times one program may pause for a person's answer.
pub const MAX_ROUNDS: u32 = 16;

/// What a paused program's `requestState` says: who may resume it, and its one-time key.
#[derive(Serialize, Deserialize)]
struct Held {
    c: String,
    r: Vec<String>,
    /// The endpoint path (`None`: the root).
    e: Option<String>,
    k: String,
}

/// The outer result of a program driven as far as it goes: its end, or its pause.
pub(super) fn settle(gw: &Served<'_>, req: &Request, driven: Driven) -> Reply {
    match driven {
        Driven::Ended(reply) => reply,
        Driven::Asked(run, call, question) => pause(gw, req, *run, call, question),
    }
}

/// Pauses `run` on `call` (its id, the tool, the arguments), whose result `question` asks for a
/// person's answer: the outer `input_required` result.
pub(super) fn pause(gw: &Served<'_>, req: &Request, mut run: Run, call: (u64, String, Value), question: Value) -> Reply {
    if run.rounds >= MAX_ROUNDS {
        let message = format!("{} asked for a person's answer more than {MAX_ROUNDS} times", call.1);
        return run::over(gw, req, run, "input_rounds", message);
    }
    let caller = &req.caller;
    let key = mcpgate_protocol::toolbox::random_hex(16);
    let held = Held { c: caller.id.clone(), r: caller.rules.clone(), e: caller.endpoint.as_deref().map(str::to_string), k: key.clone() };
    let Ok(sealed) = gw.sealer.seal(PURPOSE, &held) else {
        return run::over(gw, req, run, "input_rounds", "the program's state cannot be sealed".into());
    };
    let id = Arc::clone(&run.id);
    let asks = question.get("inputRequests").cloned().unwrap_or_else(|| json!({}));
    run.rounds += 1;
    let Run { id: _, program, slot, calls, ran, rounds, mut unended } = run;
    // Paused, not abandoned: the pause's own timer audits it if nobody answers.
    unended.disarm();
    let owner = (caller.id.clone(), caller.rules.clone(), caller.endpoint.clone());
    let state = question.get("requestState").cloned();
    let paused = Paused { program, slot, id: Arc::clone(&id), calls, call, state, ran, rounds, owner };
    if gw.programs.pause(key.clone(), paused).is_err() {
        // A key in use already (the random source failed): the program is not kept (its process
        // goes with it), and the run is audited as what it is.
        super::run::audit_run(gw, req, &id, "error", ran);
        return search::tool_error("The program could not be paused for a person's answer; run it again.");
    }
    // Not resumed in time: dropped (its process killed) and audited as abandoned.
    let (programs, audit, timeout) = (Arc::clone(&gw.programs), Arc::clone(&gw.audit), gw.config.server.input_timeout);
    let mut subject = Subject::asked(caller, Method::ToolsCall, super::RUN);
    subject.program = Some(Arc::clone(&id));
    tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        if let Some(p) = programs.resume(&key, |_| true) {
            audit.program(&subject, "abandoned", p.ran);
        }
    });
    search::result(json!({
        "resultType": "input_required",
        "inputRequests": asks,
        "requestState": sealed,
        "_meta": { PROGRAM_META: &*id },
    }))
}

/// The retry of a paused program's `run_code`: the inner call made again with the person's
/// answers, then the program goes on.
pub(super) async fn resume(gw: &Served<'_>, req: Request) -> Reply {
    let caller = &req.caller;
    let token = req.params.parse::<String>("requestState").and_then(Result::ok);
    let endpoint = caller.endpoint.as_deref().map(str::to_string);
    let max_age = gw.config.server.input_timeout;
    let held = token
        .as_deref()
        .and_then(|t| gw.sealer.open_aged::<Held>(PURPOSE, t))
        .filter(|(h, age)| *age <= max_age && h.c == caller.id && h.r == caller.rules && h.e == endpoint);
    let Some((held, _)) = held else {
        return Reply::error(RpcError::invalid_params(
            "Invalid requestState: this run_code retry does not continue a program of yours; run the program again.",
        ));
    };
    let owned_by = |p: &Paused| p.owner.0 == caller.id && p.owner.1 == caller.rules && p.owner.2 == caller.endpoint;
    let Some(paused) = gw.programs.resume(&held.k, owned_by) else {
        return search::tool_error(
            "The program is no longer waiting for this answer: it was answered already, it waited past the input timeout, \
             or it paused on another replica of this gateway. Run it again.",
        );
    };
    let answers = req.params.parse::<Value>("inputResponses").and_then(Result::ok).unwrap_or_else(|| json!({}));
    let Paused { program, slot, id, calls, call: (n, tool, arguments), state, ran, rounds, owner: _ } = paused;
    let unended = run::Unended::new(gw, &req, &id);
    let run = Run { id, program, slot, calls, ran, rounds, unended };
    let state = state.unwrap_or(Value::Null);
    let left = gw.config.code_mode.wall_clock.saturating_sub(run.ran);
    let began = tokio::time::Instant::now();
    let inner = tokio::time::timeout(left, run::make(gw, &req, &run.id, n, &tool, &arguments, Some((&state, &answers)))).await;
    let mut run = run;
    run.ran += began.elapsed();
    match inner {
        Err(_) => {
            run.calls.push((run::shown(&tool), "abandoned".into()));
            run::over(gw, &req, run, "wall_clock", "the program ran past its wall clock".into())
        }
        Ok(Inner::Ask(question)) => pause(gw, &req, run, (n, tool, arguments), question),
        Ok(Inner::Answer(value, outcome)) => settle(gw, &req, run::drive(gw, &req, run, Some((n, tool, value, outcome))).await),
    }
}
