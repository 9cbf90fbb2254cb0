//! The loop of `mcpgate code-run`, the process that runs one program: it reads the `start` line,
//! runs the [`Engine`] with a [`Host`] that writes each inner call as a `call` line and blocks on
//! its `answer` line, and writes how the program ended (`done` or `failed`). It is pure over its
//! two streams (stdin and stdout in production, memory in tests); confining the process before
//! any of this runs is the caller's job (`main.rs`: `confine_self` first). A line that does not
//! read as the protocol allows, an answer to another call, a line over [`MAX_LINE`] or the end of
//! the input ends the program as `protocol`: the pipe is never guessed at.

use crate::engine::{Engine, Host};
use crate::wire::{Answer, Call, FailKind, Failed, FromChild, Start, ToChild, ToolFailure};
use std::io::{BufRead, Read, Write};

/// The longest line the gateway may write (the start line, or an answer carrying a tool's result).
pub const MAX_LINE: u64 = 64 << 20;

/// The exit status when the program ended (with its value, or failing in its own right).
pub const EXIT_ENDED: u8 = 0;
/// The exit status when the output could not be written (the gateway is gone).
pub const EXIT_OUTPUT: u8 = 1;
/// The exit status after a protocol violation.
pub const EXIT_PROTOCOL: u8 = 2;
/// The exit status when the process could not confine itself (nothing was run).
pub const EXIT_CONFINE: u8 = 3;

/// Why the pipe could not be read as the protocol allows.
#[derive(Debug, thiserror::Error)]
pub enum PipeError {
    #[error("cannot read the pipe: {0}")]
    Read(#[source] std::io::Error),
    #[error("cannot write to the pipe: {0}")]
    Write(#[source] std::io::Error),
    #[error("the pipe ended before {0}")]
    Ended(&'static str),
    #[error("a line is over {MAX_LINE} bytes")]
    TooLong,
    #[error("a line does not read: {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error("expected the start line, got another")]
    NotStart,
    #[error("expected the answer to call {expected}, got {got}")]
    Unexpected { expected: u64, got: String },
    #[error(transparent)]
    Wire(#[from] crate::wire::WireError),
}

/// One line of the input, without its end; `None` at the end of the input.
pub fn read_line(input: &mut impl BufRead) -> Result<Option<String>, PipeError> {
    let mut line = String::new();
    let n = input.by_ref().take(MAX_LINE + 1).read_line(&mut line).map_err(PipeError::Read)?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with('\n') && n as u64 > MAX_LINE {
        return Err(PipeError::TooLong);
    }
    while line.ends_with('\n') || line.ends_with('\r') {
        line.pop();
    }
    Ok(Some(line))
}

/// Run the program the input starts, answering its calls from the input; returns the exit status.
pub fn run(mut input: impl BufRead, mut output: impl Write) -> u8 {
    let start = match read_line(&mut input) {
        Ok(Some(line)) => match serde_json::from_str::<ToChild>(&line) {
            Ok(ToChild::Start(start)) => Ok(start),
            Ok(ToChild::Answer(_)) => Err(PipeError::NotStart),
            Err(e) => Err(PipeError::Unreadable(e)),
        },
        Ok(None) => Err(PipeError::Ended("the start line")),
        Err(e) => Err(e),
    };
    let Start { program, tools, limits } = match start {
        Ok(start) => start,
        Err(e) => return protocol(&mut output, &e),
    };
    let mut host = PipeHost { input: &mut input, output: &mut output, last: 0, broken: None };
    let ended = Engine::run(&program, &tools, &limits, &mut host);
    let broken = host.broken.is_some();
    let status = if broken { EXIT_PROTOCOL } else { EXIT_ENDED };
    match write_line(&mut output, &FromChild::from(ended)) {
        Ok(()) => status,
        Err(_) => EXIT_OUTPUT,
    }
}

/// Tell the gateway the pipe broke, and end.
fn protocol(output: &mut impl Write, error: &PipeError) -> u8 {
    let failed = Failed { kind: FailKind::Protocol, limit: None, message: error.to_string(), stack: None, logs: Vec::new() };
    let _ = write_line(output, &FromChild::Failed(failed));
    EXIT_PROTOCOL
}

fn write_line(output: &mut impl Write, line: &FromChild) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(line).map_err(std::io::Error::other)?;
    text.push(b'\n');
    output.write_all(&text)?;
    output.flush()
}

/// The calls go out as lines and their answers come back as lines, one at a time.
struct PipeHost<'a, R, W> {
    input: &'a mut R,
    output: &'a mut W,
    /// The id of the last call written.
    last: u64,
    /// Why the pipe can carry no more; once set, the program ends.
    broken: Option<String>,
}

impl<R: BufRead, W: Write> PipeHost<'_, R, W> {
    fn exchange(&mut self, tool: &str, arguments: serde_json::Value) -> Result<Answer, PipeError> {
        self.last += 1;
        let id = self.last;
        let call = FromChild::Call(Call { id, tool: tool.to_owned(), arguments });
        write_line(self.output, &call).map_err(PipeError::Write)?;
        let line = read_line(self.input)?.ok_or(PipeError::Ended("the answer"))?;
        match serde_json::from_str::<ToChild>(&line).map_err(PipeError::Unreadable)? {
            ToChild::Answer(answered) if answered.id == id => Ok(answered.answer()?),
            ToChild::Answer(answered) => Err(PipeError::Unexpected { expected: id, got: format!("the answer to call {}", answered.id) }),
            ToChild::Start(_) => Err(PipeError::Unexpected { expected: id, got: "a start line".to_owned() }),
        }
    }
}

impl<R: BufRead, W: Write> Host for PipeHost<'_, R, W> {
    fn call(&mut self, tool: &str, arguments: &str) -> Answer {
        let failure = |message: String| Answer::Error(ToolFailure { reason: "protocol".to_owned(), code: None, message, result: None });
        if let Some(why) = &self.broken {
            return failure(why.clone());
        }
        let arguments = match serde_json::from_str(arguments) {
            Ok(value) => value,
            Err(e) => {
                return Answer::Error(ToolFailure {
                    reason: "invalid_arguments".to_owned(),
                    code: None,
                    message: format!("the arguments are not JSON: {e}"),
                    result: None,
                });
            }
        };
        match self.exchange(tool, arguments) {
            Ok(answer) => answer,
            Err(e) => {
                let why = e.to_string();
                self.broken = Some(why.clone());
                failure(why)
            }
        }
    }

    fn broken(&self) -> Option<String> {
        self.broken.clone()
    }
}

#[cfg(test)]
mod tests;
