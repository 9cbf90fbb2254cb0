//! Code mode's child process on the gateway's side: [`start`] runs this binary as `mcpgate
//! code-run` under a strict policy (`Policy::for_program`: no file, no network, no socket, no other
//! process, a lower priority, memory and CPU backstops above the interpreter's own limits), passed
//! as an inherited memory file, with an empty environment, `/` as its folder, and nothing inherited
//! but its three pipes and the policy's descriptor. The child confines itself before it reads the
//! program (`main.rs`), so program code never runs unconfined. A [`Program`] moves the lines of
//! `mcpgate_coderun::wire` and checks the child's: a line that does not read, a call out of turn,
//! or a line over its cap is a protocol error; the wall clock is the caller's deadline on each
//! read. Dropping a `Program` kills the process (SIGKILL), and so does the gateway's death
//! (`PR_SET_PDEATHSIG`). One fresh process per program (`dispatch::code` drives it).

use super::child::{log_stderr, own_binary};
use super::error::UpstreamError;
use super::lines::{Line, LineReader};
use mcpgate_coderun::Answer;
use mcpgate_coderun::wire::{Answered, FromChild, Limits, Start, ToChild};
use mcpgate_sandbox::exec::{self, Policy};
use nix::sys::signal::Signal;
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

/// The address space left above the interpreter's heap: the binary's own mappings count too.
const MEMORY_ROOM: u64 = 512 << 20;
/// What a child line may carry besides the program's value and its logs.
const LINE_ROOM: usize = 64 << 10;

/// One program's process, from its start line to how it ended.
pub struct Program {
    child: Child,
    stdin: ChildStdin,
    stdout: LineReader<ChildStdout>,
    limits: Limits,
    /// The id of the last call the child made.
    last: u64,
    /// The call waiting for its answer.
    pending: Option<u64>,
}

/// Starts a program's process (this binary, `mcpgate code-run`).
pub fn start(limits: &Limits) -> Result<Program, UpstreamError> {
    let me = own_binary().ok_or_else(|| UpstreamError::Unreachable("code mode runs programs through the mcpgate binary itself".into()))?;
    start_from(&me, limits)
}

/// Starts a program's process from the mcpgate binary at `binary` (tests name it).
pub fn start_from(binary: &Path, limits: &Limits) -> Result<Program, UpstreamError> {
    let memory = u64::try_from(limits.heap).unwrap_or(u64::MAX).saturating_add(MEMORY_ROOM);
    let policy = Policy::for_program(memory, limits.cpu_ms.div_ceil(1000).saturating_add(1));
    let json = serde_json::to_string(&policy).map_err(|e| UpstreamError::Unreachable(format!("cannot write the program's policy: {e}")))?;
    let policy = exec::policy_file(&json).map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
    let mut cmd = Command::new(binary);
    cmd.args(["code-run", "--policy-fd", &exec::POLICY_FD.to_string()])
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A session of its own, SIGKILL when the gateway dies, the policy moved to POLICY_FD; every
    // other descriptor of the gateway is close-on-exec.
    mcpgate_sandbox::spawn::detach(cmd.as_std_mut(), Signal::SIGKILL, Some(policy));
    let spawned = cmd.spawn();
    // This process's copy of the policy descriptor (held by `cmd`) is closed now.
    drop(cmd);
    let mut child = spawned.map_err(|e| UpstreamError::Unreachable(format!("cannot start a program's process: {e}")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
        return Err(UpstreamError::Unreachable("the program's process has no stdio pipes".into()));
    };
    tokio::spawn(log_stderr(stderr, format!("program-{}", child.id().unwrap_or(0))));
    let cap = limits.output.saturating_add(limits.logs).saturating_add(LINE_ROOM);
    Ok(Program { child, stdin, stdout: LineReader::new(stdout, cap), limits: *limits, last: 0, pending: None })
}

impl Program {
    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends the start line: what to run and the tools it sees (the limits are those it started with).
    pub async fn send_start(&mut self, program: &str, tools: &[String]) -> Result<(), UpstreamError> {
        let start = ToChild::Start(Start { program: program.to_owned(), tools: tools.to_vec(), limits: self.limits });
        self.write(&start).await
    }

    /// Answers the call the child waits on.
    pub async fn answer(&mut self, id: u64, answer: Answer) -> Result<(), UpstreamError> {
        if self.pending != Some(id) {
            return Err(UpstreamError::Protocol(format!("call {id} is not waiting for an answer")));
        }
        self.pending = None;
        self.write(&ToChild::Answer(Answered::new(id, answer))).await
    }

    /// The child's next line, read before `deadline`: a call (numbered 1, 2, 3… in turn, one at a
    /// time), or how the program ended.
    pub async fn next(&mut self, deadline: Instant) -> Result<FromChild, UpstreamError> {
        if let Some(id) = self.pending {
            return Err(UpstreamError::Protocol(format!("call {id} is still waiting for its answer")));
        }
        let waited = Instant::now();
        let line = match tokio::time::timeout_at(deadline, self.stdout.next_line()).await {
            Err(_) => return Err(UpstreamError::Timeout { after: waited.elapsed() }),
            Ok(Err(e)) => return Err(UpstreamError::Protocol(format!("cannot read the program's output: {e}"))),
            Ok(Ok(None)) => return Err(UpstreamError::Protocol("the program's process ended without saying how the program did".into())),
            Ok(Ok(Some(Line::TooLong(n)))) => {
                return Err(UpstreamError::Protocol(format!("the program's process wrote a line of {n} bytes, over its cap")));
            }
            Ok(Ok(Some(Line::Full(bytes)))) => bytes,
        };
        let read: FromChild = serde_json::from_slice(&line)
            .map_err(|e| UpstreamError::Protocol(format!("the program's process wrote a line that does not read: {e}")))?;
        if let FromChild::Call(call) = &read {
            if call.id != self.last + 1 {
                return Err(UpstreamError::Protocol(format!("the program's process numbered a call {} after {}", call.id, self.last)));
            }
            self.last = call.id;
            self.pending = Some(call.id);
        }
        Ok(read)
    }

    async fn write(&mut self, line: &ToChild) -> Result<(), UpstreamError> {
        let mut text = serde_json::to_vec(line).map_err(|e| UpstreamError::Protocol(format!("cannot write a line: {e}")))?;
        text.push(b'\n');
        self.stdin.write_all(&text).await.map_err(|e| UpstreamError::Protocol(format!("cannot write to the program's process: {e}")))?;
        self.stdin.flush().await.map_err(|e| UpstreamError::Protocol(format!("cannot write to the program's process: {e}")))
    }
}
