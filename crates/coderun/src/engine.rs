//! One program run to its end inside QuickJS, with every limit of [`Limits`] applied: the heap
//! (`set_memory_limit`), the stack (`set_max_stack_size`), the time spent running (an interrupt
//! handler with a deadline: uncatchable, and polled by regex backtracking too; time waiting for an
//! answer moves the deadline, so only running counts), the inner calls, the output and the logs.
//! The program sees what `prelude.js` builds and nothing of the host: `tools` (frozen, null
//! prototype; `tools.<name>(args)` and `tools.call(name, args)`), `ToolError` and a bounded
//! `console`. Each call goes to the [`Host`] one at a time, in the order asked, and comes back as a
//! value or a thrown `ToolError`; a call still queued once the program's value is settled is never
//! made, and a host whose pipe broke ends the program as `protocol`. The program's value is written
//! as JSON inside the interpreter (BigInt and cycles are a clear error) and read again here.
//! Nothing here runs unconfined in production: the process that calls [`Engine::run`] has confined
//! itself first (docs/security.md); the interpreter's own limits are defence in depth.

use crate::wire::{Answer, Done, FailKind, Failed, FromChild, Limit, Limits};
use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{Coerced, Context, Ctx, Exception, Function, Object, Promise, Runtime, Value};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[cfg(test)]
mod tests;

/// The JavaScript that builds the program's surface (see the file's own comment).
const PRELUDE: &str = include_str!("prelude.js");

/// The line that ends the logs once they are over their limit.
pub const TRUNCATED: &str = "…truncated";

/// The most bytes of a thrown error's message, and of its stack, that a failure carries (a
/// program could throw a string as large as its heap).
pub const THROWN_TEXT: usize = 4096;

/// Who answers the program's calls: the process's pipe in production, a fake in tests.
pub trait Host {
    /// Make one call; `arguments` is the JSON text the program gave.
    fn call(&mut self, tool: &str, arguments: &str) -> Answer;

    /// Why no more call can be made (the pipe broke); the program then ends as `protocol`.
    fn broken(&self) -> Option<String> {
        None
    }
}

/// How a program ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    Done(Done),
    Failed(Failed),
}

impl From<Ended> for FromChild {
    fn from(ended: Ended) -> Self {
        match ended {
            Ended::Done(done) => FromChild::Done(done),
            Ended::Failed(failed) => FromChild::Failed(failed),
        }
    }
}

/// The interpreter, one fresh runtime per program.
pub struct Engine;

impl Engine {
    /// Run `program` (the body of an async function) with `tools` visible, to its end.
    pub fn run(program: &str, tools: &[String], limits: &Limits, host: &mut dyn Host) -> Ended {
        let shared = Rc::new(Shared::new(*limits));
        let rt = match Runtime::new() {
            Ok(rt) => rt,
            Err(e) => return shared.failed(FailKind::Exception, None, format!("the interpreter did not start: {e}"), None),
        };
        rt.set_memory_limit(limits.heap);
        rt.set_max_stack_size(limits.stack);
        let handler = Rc::clone(&shared);
        rt.set_interrupt_handler(Some(Box::new(move || handler.interrupted())));
        let ctx = match Context::full(&rt) {
            Ok(ctx) => ctx,
            Err(_) => return shared.over(Limit::Heap),
        };
        ctx.with(|ctx| drive(&ctx, &shared, host, program, tools))
    }
}

/// What the runtime's callbacks (the interrupt handler, the native functions) share with the run.
struct Shared {
    limits: Limits,
    /// When running must stop; moved on by the time each call waited.
    deadline: Cell<Instant>,
    /// The limit that stopped the program; once set, the interrupt handler stops everything.
    stop: Cell<Option<Limit>>,
    /// Calls asked for so far.
    asked: Cell<u32>,
    queue: RefCell<VecDeque<Pending>>,
    logs: RefCell<Logs>,
}

/// A call asked for and not yet made.
struct Pending {
    id: u32,
    tool: String,
    arguments: String,
}

impl Shared {
    fn new(limits: Limits) -> Self {
        Shared {
            limits,
            deadline: Cell::new(Instant::now() + Duration::from_millis(limits.cpu_ms)),
            stop: Cell::new(None),
            asked: Cell::new(0),
            queue: RefCell::new(VecDeque::new()),
            logs: RefCell::new(Logs { lines: Vec::new(), bytes: 0, cap: limits.logs, truncated: false }),
        }
    }

    /// The interrupt handler: `true` stops the program with an uncatchable exception.
    fn interrupted(&self) -> bool {
        if self.stop.get().is_some() {
            return true;
        }
        if Instant::now() >= self.deadline.get() {
            self.stop.set(Some(Limit::Cpu));
            return true;
        }
        false
    }

    fn stop_for(&self, limit: Limit) {
        if self.stop.get().is_none() {
            self.stop.set(Some(limit));
        }
    }

    /// Queue a call; `None` (and the program stopped) past the limit of calls.
    fn ask(&self, tool: String, arguments: String) -> Option<u32> {
        let id = self.asked.get().saturating_add(1);
        if id > self.limits.calls {
            self.stop_for(Limit::Calls);
            return None;
        }
        self.asked.set(id);
        self.queue.borrow_mut().push_back(Pending { id, tool, arguments });
        Some(id)
    }

    fn logs(&self) -> Vec<String> {
        std::mem::take(&mut self.logs.borrow_mut().lines)
    }

    fn failed(&self, kind: FailKind, limit: Option<Limit>, message: String, stack: Option<String>) -> Ended {
        Ended::Failed(Failed { kind, limit, message, stack, logs: self.logs() })
    }

    /// The program went over `limit`.
    fn over(&self, limit: Limit) -> Ended {
        let l = &self.limits;
        let message = match limit {
            Limit::Cpu => format!("the program ran for more than {} ms", l.cpu_ms),
            Limit::Heap => format!("the program needed more than {} bytes of memory", l.heap),
            Limit::Stack => format!("the program nested deeper than its stack of {} bytes allows", l.stack),
            Limit::Calls => format!("the program asked for more than {} tool calls", l.calls),
            Limit::Output => format!("the program's value is over {} bytes of JSON", l.output),
        };
        self.failed(FailKind::Limit, Some(limit), message, None)
    }
}

/// Console lines, kept up to a number of bytes.
struct Logs {
    lines: Vec<String>,
    bytes: usize,
    cap: usize,
    truncated: bool,
}

impl Logs {
    /// Each line counts with its end (one byte), so that empty lines are bounded too.
    fn push(&mut self, mut line: String) {
        if self.truncated {
            return;
        }
        let room = self.cap.saturating_sub(self.bytes);
        if line.len() + 1 > room {
            let mut cut = room.saturating_sub(1).min(line.len());
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            if !line.is_empty() {
                self.lines.push(line);
            }
            self.lines.push(TRUNCATED.to_owned());
            self.truncated = true;
            return;
        }
        self.bytes += line.len() + 1;
        self.lines.push(line);
    }
}

/// The program from the prelude to its value.
fn drive<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>, host: &mut dyn Host, program: &str, tools: &[String]) -> Ended {
    let (settle, finish) = match prelude(ctx, shared, tools) {
        Ok(both) => both,
        Err(e) => return fault(ctx, shared, e),
    };
    shared.deadline.set(Instant::now() + Duration::from_millis(shared.limits.cpu_ms));
    // On the program's first line, so that its line numbers stay its own.
    let source = format!("(async () => {{ {program}\n}})()");
    let mut options = EvalOptions::default();
    options.strict = false;
    options.filename = Some("program".to_owned());
    let promise: Promise<'js> = match ctx.eval_with_options(source, options) {
        Ok(promise) => promise,
        Err(e) => return fault(ctx, shared, e),
    };
    loop {
        while shared.stop.get().is_none() && ctx.execute_pending_job() {}
        if let Some(limit) = shared.stop.get() {
            return shared.over(limit);
        }
        if !matches!(promise.state(), PromiseState::Pending) {
            break;
        }
        let next = shared.queue.borrow_mut().pop_front();
        let Some(next) = next else { break };
        let started = Instant::now();
        let answer = host.call(&next.tool, &next.arguments);
        shared.deadline.set(shared.deadline.get() + started.elapsed());
        if let Some(why) = host.broken() {
            return shared.failed(FailKind::Protocol, None, why, None);
        }
        if let Err(e) = answer_call(ctx, &settle, next.id, answer) {
            return fault(ctx, shared, e);
        }
    }
    match promise.state() {
        PromiseState::Pending => {
            shared.failed(FailKind::Exception, None, "the program waits for a promise that nothing is left to settle".to_owned(), None)
        }
        PromiseState::Rejected => fault(ctx, shared, rejection(&promise)),
        PromiseState::Resolved => match promise.result::<Value<'js>>() {
            Some(Ok(value)) => written(ctx, shared, &finish, value),
            Some(Err(e)) => fault(ctx, shared, e),
            None => shared.failed(FailKind::Exception, None, "the program's value is missing".to_owned(), None),
        },
    }
}

/// The rejection of a settled promise, left pending on the context for [`fault`] to catch.
fn rejection(promise: &Promise<'_>) -> rquickjs::Error {
    match promise.result::<Value<'_>>() {
        Some(Err(e)) => e,
        _ => rquickjs::Error::Exception,
    }
}

/// Build the program's surface; the engine keeps `settle` and `finish`.
fn prelude<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>, tools: &[String]) -> rquickjs::Result<(Function<'js>, Function<'js>)> {
    let mut options = EvalOptions::default();
    options.filename = Some("prelude".to_owned());
    let make: Function<'js> = ctx.eval_with_options(PRELUDE, options)?;
    let asks = Rc::clone(shared);
    let native_call = Function::new(ctx.clone(), move |ctx: Ctx<'js>, tool: String, arguments: String| -> rquickjs::Result<u32> {
        asks.ask(tool, arguments).ok_or_else(|| Exception::throw_internal(&ctx, "too many tool calls"))
    })?;
    let logs = Rc::clone(shared);
    let native_log = Function::new(ctx.clone(), move |line: String| logs.logs.borrow_mut().push(line))?;
    let names = ctx.json_parse(serde_json::Value::from(tools.to_vec()).to_string())?;
    let both: Object<'js> = make.call((native_call, native_log, names))?;
    Ok((both.get("settle")?, both.get("finish")?))
}

/// Hand call `id`'s answer to the program (a value, or the fields of a `ToolError`).
fn answer_call<'js>(ctx: &Ctx<'js>, settle: &Function<'js>, id: u32, answer: Answer) -> rquickjs::Result<()> {
    let (ok, payload) = match answer {
        Answer::Ok(value) => (true, value),
        Answer::Error(failure) => (
            false,
            serde_json::json!({"reason": failure.reason, "code": failure.code, "message": failure.message, "result": failure.result}),
        ),
    };
    let payload = ctx.json_parse(payload.to_string())?;
    settle.call::<_, ()>((id, ok, payload))
}

/// The program's value as JSON, within the output limit.
fn written<'js>(ctx: &Ctx<'js>, shared: &Shared, finish: &Function<'js>, value: Value<'js>) -> Ended {
    let text: String = match finish.call((value,)) {
        Ok(text) => text,
        Err(e) => {
            return match fault(ctx, shared, e) {
                Ended::Failed(Failed { kind: FailKind::Exception, limit, message, stack, logs }) => Ended::Failed(Failed {
                    kind: FailKind::Exception,
                    limit,
                    message: format!("the program's value cannot be written as JSON: {message}"),
                    stack,
                    logs,
                }),
                other => other,
            };
        }
    };
    if text.len() > shared.limits.output {
        let message = format!("the program's value is {} bytes of JSON, over the limit of {}", text.len(), shared.limits.output);
        return shared.failed(FailKind::Limit, Some(Limit::Output), message, None);
    }
    match serde_json::from_str(&text) {
        Ok(value) => Ended::Done(Done { value, logs: shared.logs() }),
        Err(e) => shared.failed(FailKind::Exception, None, format!("the program's value cannot be written as JSON: {e}"), None),
    }
}

/// The program ended by an error: a limit when one stopped it or the thrown value says so,
/// else the exception as the program would print it.
fn fault<'js>(ctx: &Ctx<'js>, shared: &Shared, error: rquickjs::Error) -> Ended {
    if let Some(limit) = shared.stop.get() {
        return shared.over(limit);
    }
    let thrown = match error {
        rquickjs::Error::Exception => ctx.catch(),
        rquickjs::Error::Allocation => return shared.over(Limit::Heap),
        other => return shared.failed(FailKind::Exception, None, other.to_string(), None),
    };
    let error = thrown.as_object().filter(|o| o.is_error());
    let Some(error) = error else {
        let shown = match ctx.json_stringify(thrown.clone()) {
            Ok(Some(text)) => text.to_string().unwrap_or_default(),
            _ => {
                let _ = ctx.catch();
                thrown.type_name().to_owned()
            }
        };
        return shared.failed(FailKind::Exception, None, format!("the program threw {shown}"), None);
    };
    let name = text_of(ctx, error, "name").unwrap_or_else(|| "Error".to_owned());
    let message = text_of(ctx, error, "message").unwrap_or_default();
    if let Some(limit) = shared.stop.get() {
        return shared.over(limit);
    }
    match (name.as_str(), message.as_str()) {
        ("InternalError", "out of memory") => return shared.over(Limit::Heap),
        ("RangeError", "Maximum call stack size exceeded") => return shared.over(Limit::Stack),
        _ => {}
    }
    let stack = text_of(ctx, error, "stack").filter(|s| !s.is_empty()).map(cut_thrown);
    let message = cut_thrown(if message.is_empty() { name } else { format!("{name}: {message}") });
    shared.failed(FailKind::Exception, None, message, stack)
}

/// A thrown error's text, cut to [`THROWN_TEXT`] bytes (at a character's edge, marked with `…`).
fn cut_thrown(mut text: String) -> String {
    if text.len() > THROWN_TEXT {
        let mut cut = THROWN_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// A property read as text; a getter that throws reads as nothing.
fn text_of<'js>(ctx: &Ctx<'js>, object: &Object<'js>, key: &str) -> Option<String> {
    match object.get::<_, Option<Coerced<String>>>(key) {
        Ok(text) => text.map(|t| t.0),
        Err(_) => {
            let _ = ctx.catch();
            None
        }
    }
}
