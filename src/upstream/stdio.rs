//! The stdio upstream transport: one child process per upstream, shared by every caller. It only
//! moves messages and knows no protocol era: request ids are allocated by the gateway and
//! progress tokens are rewritten to gateway-unique ones (and back on the way out), so concurrent
//! callers never collide; messages the child sends unasked go to [`Inbound`]. stderr goes to the
//! gateway's log with the upstream id; if the process dies, its in-flight calls fail at once with
//! an error naming it, and the next call starts a new process, which first replays the
//! [`Preamble`] an era adapter registered (the legacy handshake).

use super::Call;
use super::child;
use super::error::UpstreamError;
use super::inbound::Inbound;
use super::lines::{Line, LineReader};
use super::progress;
use mcpgate_config::UpstreamConfig;
use mcpgate_protocol::jsonrpc::{Kind, Message};
use mcpgate_protocol::keys;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Background;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

struct Pending {
    events: mpsc::Sender<Event>,
    client_token: Option<Value>,
    /// The request opted into `notifications/message` (its `_meta` has a log level).
    wants_logs: bool,
    /// The upstream requests its caller can answer (see `Call::accepts_input`).
    accepts: Vec<String>,
    /// The gateway's own `subscriptions/listen`: open for as long as the child lives, and never
    /// the cause of the child's requests or logs.
    listen: bool,
}

struct Proc {
    id: String,
    /// The child's process group, stopped when the child is unusable or the reader ends.
    group: Mutex<child::Group>,
    inbound: Arc<Inbound>,
    tasks: Background,
    tx: mpsc::Sender<Vec<u8>>,
    pending: Mutex<HashMap<u64, Pending>>,
    alive: AtomicBool,
}

impl Proc {
    fn take(&self, id: u64) -> Option<Pending> {
        lock(&self.pending).remove(&id)
    }

    /// Stops the child's process group (SIGTERM, then SIGKILL after a grace period).
    fn kill(&self) {
        lock(&self.group).stop();
    }

    /// Delivers a request's final event without ever waiting: one slow caller must not stall
    /// the upstream's other callers, and a caller whose channel is full of progress still gets it.
    fn finish(&self, p: Pending, outcome: Outcome) {
        if let Err(mpsc::error::TrySendError::Full(ev)) = p.events.try_send(Event::Done(outcome)) {
            self.tasks.spawn(async move {
                let _ = p.events.send(ev).await;
            });
        }
    }

    fn fail_all(&self, reason: &str) {
        self.alive.store(false, Ordering::SeqCst);
        let drained: Vec<Pending> = lock(&self.pending).drain().map(|(_, v)| v).collect();
        for p in drained {
            let err = UpstreamError::Unreachable(reason.to_string()).into_rpc(&self.id);
            self.finish(p, Outcome::Error(err));
        }
    }
}

/// Cancels the upstream request when the caller stops listening before it finished.
struct CancelOnDrop {
    proc: Weak<Proc>,
    id: u64,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(p) = self.proc.upgrade() else { return };
        if p.take(self.id).is_some() {
            let note = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the client went away"}}}}"#,
                self.id
            );
            let _ = p.tx.try_send(note.into_bytes());
        }
    }
}

/// What every freshly started process is sent before any call: a request with id 0 (answered
/// before anything else is written) and then a notification.
#[derive(Debug, Clone)]
pub struct Preamble {
    pub request: Vec<u8>,
    pub then: Vec<u8>,
}

pub struct StdioTransport {
    id: String,
    program: Result<PathBuf, UpstreamError>,
    command: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    max_line: usize,
    proc: tokio::sync::Mutex<Option<Arc<Proc>>>,
    preamble: Mutex<Option<Preamble>>,
    inbound: Arc<Inbound>,
    timeout: std::time::Duration,
    tasks: Background,
    restarts: Arc<Mutex<child::Restarts>>,
    /// What the process may reach; `None`: what the gateway can.
    sandbox: Option<mcpgate_config::sandbox::SandboxConfig>,
}

impl StdioTransport {
    /// Whether a request is waiting for the child's answer (the gateway's own listen stream and
    /// the handshake aside); a child being started counts as busy.
    pub fn busy(&self) -> bool {
        let Ok(proc) = self.proc.try_lock() else { return true };
        proc.as_ref().is_some_and(|p| lock(&p.pending).iter().any(|(id, p)| *id != 0 && !p.listen))
    }

    pub fn new(
        cfg: &UpstreamConfig,
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        sandbox: Option<mcpgate_config::sandbox::SandboxConfig>,
        inbound: Arc<Inbound>,
        tasks: Background,
    ) -> Self {
        StdioTransport {
            id: cfg.id.clone(),
            program: resolve(&command),
            command,
            env,
            cwd,
            max_line: cfg.max_message_bytes,
            proc: tokio::sync::Mutex::new(None),
            preamble: Mutex::new(None),
            inbound,
            timeout: cfg.timeout,
            tasks,
            restarts: Arc::default(),
            sandbox,
        }
    }

    /// Every process started from now on gets `preamble` first.
    pub fn set_preamble(&self, preamble: Option<Preamble>) {
        *lock(&self.preamble) = preamble;
    }

    /// Whether a process is running now (without starting one).
    pub fn is_live(&self) -> bool {
        self.proc.try_lock().is_ok_and(|p| p.as_ref().is_some_and(|p| p.alive.load(Ordering::SeqCst)))
    }

    /// Writes one message (a notification) to the process, starting it if needed.
    pub async fn write(&self, line: Vec<u8>) -> Result<(), UpstreamError> {
        let proc = self.ensure().await?;
        proc.tx.send(line).await.map_err(|_| not_accepting())
    }

    /// Replays the preamble on a freshly started process (request id 0 is reserved for it).
    async fn replay(&self, proc: &Arc<Proc>, preamble: Preamble) -> Result<(), UpstreamError> {
        let (tx, mut rx) = mpsc::channel(4);
        lock(&proc.pending).insert(0, Pending { events: tx, client_token: None, wants_logs: false, accepts: Vec::new(), listen: false });
        proc.tx.send(preamble.request).await.map_err(|_| not_accepting())?;
        match tokio::time::timeout(self.timeout, rx.recv()).await {
            Ok(Some(Event::Done(Outcome::Result(_)))) => {}
            Err(_) => return Err(UpstreamError::Timeout { after: self.timeout }),
            Ok(_) => return Err(UpstreamError::Protocol("the restarted process refused the preamble".into())),
        }
        proc.tx.send(preamble.then).await.map_err(|_| not_accepting())?;
        tracing::info!(upstream = %self.id, "replayed the handshake on the restarted process");
        Ok(())
    }

    pub async fn send(&self, id: u64, call: &Call, deadline: Instant) -> Result<Reply, UpstreamError> {
        let proc = self.ensure().await?;
        let mut call = call.clone();
        let client_token = progress::swap(&mut call.meta, id);
        let line = call.encode(id)?;
        let (etx, erx) = mpsc::channel(32);
        let wants_logs = call.logs || call.meta.contains_key(keys::LOG_LEVEL);
        let listen = call.method == "subscriptions/listen";
        lock(&proc.pending).insert(id, Pending { events: etx, client_token, wants_logs, accepts: call.accepts_input.clone(), listen });
        let sent = tokio::time::timeout_at(deadline, proc.tx.send(line)).await;
        if !matches!(sent, Ok(Ok(()))) {
            proc.take(id);
            return Err(not_accepting());
        }
        Ok(Reply::Stream(EventStream::new(erx).with_guard(CancelOnDrop { proc: Arc::downgrade(&proc), id })))
    }

    async fn ensure(&self) -> Result<Arc<Proc>, UpstreamError> {
        let mut slot = self.proc.lock().await;
        if let Some(p) = slot.as_ref()
            && p.alive.load(Ordering::SeqCst)
        {
            return Ok(p.clone());
        }
        let restarts = lock(&self.restarts).may_start();
        if let Err(wait) = restarts {
            let crashes = lock(&self.restarts).crashes();
            return Err(UpstreamError::Unreachable(format!(
                "the process exited {crashes} times soon after starting; next start in {} ms",
                wait.as_millis()
            )));
        }
        let p = self.spawn()?;
        lock(&self.restarts).started();
        *slot = Some(p.clone());
        let preamble = lock(&self.preamble).clone();
        if let Some(preamble) = preamble
            && let Err(e) = self.replay(&p, preamble).await
        {
            // Not usable without its handshake: kill it (its exit releases every task it holds);
            // the next call starts a fresh process.
            p.alive.store(false, Ordering::SeqCst);
            p.kill();
            lock(&self.restarts).exited();
            *slot = None;
            return Err(UpstreamError::Handshake(Box::new(e)));
        }
        Ok(p)
    }

    fn spawn(&self) -> Result<Arc<Proc>, UpstreamError> {
        let mut program = self.program.clone()?;
        let mut sandbox = match &self.sandbox {
            None => None,
            Some(cfg) => {
                // The program as it will be started (`mcpgate` is this binary), so its own tree is readable.
                let resolved: Vec<String> =
                    std::iter::once(program.display().to_string()).chain(self.command[1..].iter().cloned()).collect();
                let prepared = mcpgate_sandbox::exec::prepare(cfg, &self.id, &resolved, self.cwd.as_deref());
                Some(prepared.map_err(|e| UpstreamError::Unreachable(format!("upstream '{}': {e}", self.id)))?)
            }
        };
        // `{instance_dir}` in the arguments and the environment: the process's own folder.
        let (mut args, env) = match &sandbox {
            Some((_, dir)) => {
                let dir = dir.display().to_string();
                let put = |s: &String| s.replace("{instance_dir}", &dir);
                (self.command[1..].iter().map(put).collect::<Vec<_>>(), self.env.iter().map(|(k, v)| (k.clone(), put(v))).collect())
            }
            None => (self.command[1..].to_vec(), self.env.clone()),
        };
        // In a container, the runtime is the process, and the command runs in the image.
        if let (Some(cfg), Some((_, dir))) = (&self.sandbox, &sandbox)
            && let Some(c) = &cfg.container
        {
            let inside: Vec<String> = std::iter::once(self.command[0].clone()).chain(args).collect();
            let (runtime, run) =
                mcpgate_sandbox::exec::container_command(cfg, &c.image, c.runtime.as_deref(), &inside, &env, self.cwd.as_deref(), dir)
                    .map_err(|e| UpstreamError::Unreachable(format!("upstream '{}': {e}", self.id)))?;
            (program, args) = (runtime, run);
            sandbox = None;
        }
        let spec = child::Spec {
            id: &self.id,
            program: &program,
            args: &args,
            env: &env,
            cwd: self.cwd.as_ref(),
            sandbox: sandbox.as_ref().map(|(policy, private)| (policy.clone(), private)),
        };
        let child::Started { mut child, mut stdin, stdout, group } = child::start(&spec, &self.tasks)?;
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
        let proc = Arc::new(Proc {
            id: self.id.clone(),
            group: Mutex::new(group),
            inbound: self.inbound.clone(),
            tasks: self.tasks.clone(),
            tx,
            pending: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
        });

        self.tasks.spawn(async move {
            while let Some(mut line) = rx.recv().await {
                line.push(b'\n');
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });

        let reader = proc.clone();
        let max_line = self.max_line;
        let restarts = self.restarts.clone();
        let cpu_limit = self.sandbox.as_ref().filter(|s| s.container.is_none()).and_then(|s| s.cpu_seconds);
        self.tasks.spawn(async move {
            // However this task ends (the child exited, or the gateway stops), the group goes.
            let _stop = StopOnDrop(reader.clone());
            let mut lines = LineReader::new(stdout, max_line);
            loop {
                match lines.next_line().await {
                    Ok(Some(Line::Full(line))) => on_line(&reader, &line),
                    Ok(Some(Line::TooLong(n))) => {
                        tracing::warn!(upstream = %reader.id, bytes = n, limit = max_line, "skipping a stdout line over the size limit")
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(upstream = %reader.id, error = %e, "reading stdout failed");
                        break;
                    }
                }
            }
            let status = match child.wait().await {
                // The shell conventions for a command that could not run.
                Ok(s) if s.code() == Some(127) => format!("{s}: the command was not found"),
                Ok(s) if s.code() == Some(126) => format!("{s}: the command is not executable"),
                // The supervisor's 128 + signal: RLIMIT_CPU sends SIGXCPU at `cpu_seconds`.
                Ok(s) if s.code() == Some(128 + nix::sys::signal::Signal::SIGXCPU as i32) && cpu_limit.is_some() => {
                    format!("{s}: stopped: CPU time limit (cpu_seconds = {}) reached (SIGXCPU)", cpu_limit.unwrap_or_default())
                }
                Ok(s) if s.code().is_some_and(|c| c > 128 && c < 128 + 65) => {
                    format!("{s}: ended by signal {}", s.code().unwrap_or_default() - 128)
                }
                Ok(s) => s.to_string(),
                Err(e) => e.to_string(),
            };
            tracing::warn!(upstream = %reader.id, %status, "stdio upstream exited");
            lock(&restarts).exited();
            reader.fail_all(&format!("the process exited ({status})"));
            reader.inbound.channel_lost();
        });
        Ok(proc)
    }
}

/// Stops a child's process group when dropped.
struct StopOnDrop(Arc<Proc>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}

fn not_accepting() -> UpstreamError {
    UpstreamError::Unreachable("the process is not accepting input".into())
}

/// The program to start: `mcpgate` means this very binary, resolved once at startup so that a
/// binary replaced on disk later (an upgrade, a rebuild) does not break restarts.
fn resolve(command: &[String]) -> Result<PathBuf, UpstreamError> {
    match command.first().map(String::as_str) {
        Some("mcpgate") => {
            std::env::current_exe().map_err(|e| UpstreamError::Unreachable(format!("cannot locate the mcpgate binary: {e}")))
        }
        Some(p) => Ok(PathBuf::from(p)),
        None => Err(UpstreamError::Unreachable("the command is empty".into())),
    }
}

fn on_line(proc: &Arc<Proc>, line: &[u8]) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let msg = match Message::parse(line) {
        Ok(m) => m,
        Err(_) => {
            tracing::warn!(upstream = %proc.id, line = %String::from_utf8_lossy(&line[..line.len().min(200)]), "ignoring \
                non-JSON-RPC output on stdout");
            return;
        }
    };
    match msg.kind() {
        Ok(Kind::Response) => {
            let Some(id) = msg.id.as_ref().and_then(|i| i.get().parse::<u64>().ok()) else {
                return;
            };
            if let Some(p) = proc.take(id) {
                proc.finish(p, super::http::final_outcome(msg));
            }
        }
        Ok(Kind::Notification) if msg.method.as_deref() == Some("notifications/progress") => relay_progress(proc, &msg),
        Ok(Kind::Notification) if msg.method.as_deref() == Some("notifications/message") => relay_log(proc, line),
        Ok(Kind::Notification) => proc.inbound.notification(&msg),
        Ok(Kind::Request) => {
            if !ask(proc, &msg, line)
                && let Some(reply) = proc.inbound.answer(&msg)
            {
                let _ = proc.tx.try_send(reply);
            }
        }
        Err(_) => {
            tracing::warn!(upstream = %proc.id, "ignoring an invalid JSON-RPC message on stdout")
        }
    }
}

/// The one request in flight on the child, when there is exactly one (the handshake and the
/// gateway's listen stream aside).
/// stdio does not say which request a server's own request or log line belongs to: it can only
/// be attributed when no other request could have caused it.
fn only_request(pending: &HashMap<u64, Pending>) -> Option<&Pending> {
    let mut calls = pending.iter().filter(|(id, p)| **id != 0 && !p.listen).map(|(_, p)| p);
    match (calls.next(), calls.next()) {
        (Some(p), None) => Some(p),
        _ => None,
    }
}

/// Hands a request the upstream sent (asking for input) to the call it belongs to: the only
/// request in flight, if its caller can answer it; otherwise it is refused (`false`), so it can
/// never reach a caller it was not meant for.
fn ask(proc: &Arc<Proc>, msg: &Message, line: &[u8]) -> bool {
    let Some(method) = msg.method.as_deref() else { return false };
    let pending = lock(&proc.pending);
    match only_request(&pending) {
        Some(p) if p.accepts.iter().any(|a| a == method) => p.events.try_send(Event::Ask(line.to_vec())).is_ok(),
        _ => false,
    }
}

/// A log message goes to the caller only when its request is the only one in flight and asked
/// for logs, so it can never reach a caller it was not meant for.
fn relay_log(proc: &Arc<Proc>, line: &[u8]) {
    let pending = lock(&proc.pending);
    match only_request(&pending) {
        Some(p) if p.wants_logs => {
            let _ = p.events.try_send(Event::Notification(line.to_vec()));
        }
        _ => tracing::debug!(upstream = %proc.id, "log message from stdio upstream not attributable to one request"),
    }
}

/// Routes a progress notification to the caller whose request carries the token, with the
/// caller's own token put back.
fn relay_progress(proc: &Arc<Proc>, msg: &Message) {
    let Some(id) = progress::request_of(msg) else { return };
    let pending = lock(&proc.pending);
    let Some(p) = pending.get(&id) else { return };
    let Some(client) = &p.client_token else { return };
    let Some(restored) = progress::restore(msg, client) else { return };
    // Progress is advisory: a caller that does not keep up loses some, never blocks the others.
    let _ = p.events.try_send(Event::Notification(restored));
}
