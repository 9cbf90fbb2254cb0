//! The pipe between the gateway and a program's process: one JSON object per line, stdin carrying
//! [`ToChild`] (the program to start, then one answer per call) and stdout carrying [`FromChild`]
//! (calls, then how the program ended); stderr is for logs only. Both ends use these types, so a
//! field named on one side is the field read on the other. Every type refuses unknown fields, and
//! an answer must carry exactly one of `ok` and `error` ([`Answered::answer`]): a line that does
//! not read ends the program rather than being guessed at. [`Answer`] is also what the engine's
//! host returns, so the process only moves lines.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A line the gateway writes to the program's stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ToChild {
    /// The first line: what to run, which tools it sees, and its limits.
    Start(Start),
    /// The answer to the call with the same id.
    Answer(Answered),
}

/// A line the program's process writes to its stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FromChild {
    /// An inner call; the process waits for its answer before running on.
    Call(Call),
    /// The program returned a value.
    Done(Done),
    /// The program threw, or went over a limit.
    Failed(Failed),
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// The body of an async function: it may `await` and `return`.
    pub program: String,
    /// The names the program sees as `tools.<name>` (the caller's view, as presented).
    pub tools: Vec<String>,
    pub limits: Limits,
}

/// The limits of one program. The gateway sets every one; the defaults are `[code_mode]`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The interpreter's heap, in bytes.
    pub heap: usize,
    /// The interpreter's stack, in bytes.
    pub stack: usize,
    /// Time spent running the program, in milliseconds (time waiting for an answer is not counted).
    pub cpu_ms: u64,
    /// Inner calls the program may ask for.
    pub calls: u32,
    /// The program's value written as JSON, in bytes.
    pub output: usize,
    /// Console lines kept, in bytes; the rest is dropped with a "…truncated" line.
    pub logs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { heap: 64 << 20, stack: 512 << 10, cpu_ms: 5_000, calls: 50, output: 1 << 20, logs: 64 << 10 }
    }
}

/// An inner call: the program chooses the tool and its arguments, nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// 1, 2, 3… in the order the program asked.
    pub id: u64,
    pub tool: String,
    /// The arguments as the program gave them (an object unless the program passed something else;
    /// the gateway's checks decide).
    pub arguments: Value,
}

/// The answer to call `id`, as it travels: exactly one of `ok` and `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answered {
    pub id: u64,
    /// The value the call returns to the program (`null` included, which is why it is read with
    /// [`present`]).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub ok: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolFailure>,
}

/// A field that is there, even as `null`, is `Some`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Answered {
    pub fn new(id: u64, answer: Answer) -> Self {
        match answer {
            Answer::Ok(value) => Answered { id, ok: Some(value), error: None },
            Answer::Error(failure) => Answered { id, ok: None, error: Some(failure) },
        }
    }

    /// The answer, when the line carries exactly one of `ok` and `error`.
    pub fn answer(self) -> Result<Answer, WireError> {
        match (self.ok, self.error) {
            (Some(value), None) => Ok(Answer::Ok(value)),
            (None, Some(failure)) => Ok(Answer::Error(failure)),
            (Some(_), Some(_)) => Err(WireError::BothOutcomes { id: self.id }),
            (None, None) => Err(WireError::NoOutcome { id: self.id }),
        }
    }
}

/// What an inner call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The call's value (what the gateway made of the tool's result).
    Ok(Value),
    /// The call failed or was refused; the program sees a thrown `ToolError`.
    Error(ToolFailure),
}

/// Why a call failed, as the program's `ToolError` carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFailure {
    /// The audit's label (`denied_by_rule`, `quota_exceeded`, `tool_error`, …).
    pub reason: String,
    /// The JSON-RPC error code, when the call was answered with one.
    #[serde(default)]
    pub code: Option<i64>,
    /// The text the caller would have seen by hand.
    pub message: String,
    /// The tool's own result, when it answered with `isError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// The program's value, and what it logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Done {
    pub value: Value,
    #[serde(default)]
    pub logs: Vec<String>,
}

/// How the program failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failed {
    pub kind: FailKind,
    /// Which limit, when `kind` is `limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    pub message: String,
    /// The JavaScript stack of an exception, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// What the program logged before it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailKind {
    /// The program threw (or its value is not JSON).
    Exception,
    /// The program went over one of its [`Limits`].
    Limit,
    /// A line on the pipe did not read, or came out of turn.
    Protocol,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Cpu,
    Heap,
    Stack,
    Calls,
    Output,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Cpu => "cpu",
            Limit::Heap => "heap",
            Limit::Stack => "stack",
            Limit::Calls => "calls",
            Limit::Output => "output",
        }
    }
}

/// A line that reads as JSON but not as the protocol allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the answer to call {id} has both \"ok\" and \"error\"")]
    BothOutcomes { id: u64 },
    #[error("the answer to call {id} has neither \"ok\" nor \"error\"")]
    NoOutcome { id: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_lines_of_the_design_read_and_write_back() {
        let lines = [
            r#"{"start":{"program":"return 1","tools":["fs__read_text_file"],"limits":{"heap":67108864,"stack":524288,"cpu_ms":5000,"calls":50,"output":1048576,"logs":65536}}}"#,
            r#"{"answer":{"id":1,"ok":{"a":1}}}"#,
            r#"{"answer":{"id":1,"error":{"reason":"denied_by_rule","code":null,"message":"no","result":{"isError":true}}}}"#,
        ];
        for line in lines {
            let read: ToChild = serde_json::from_str(line).expect(line);
            let again: ToChild = serde_json::from_str(&serde_json::to_string(&read).expect("writes")).expect("reads back");
            assert_eq!(read, again);
        }
        let start: ToChild = serde_json::from_str(lines[0]).expect("start");
        assert_eq!(
            start,
            ToChild::Start(Start { program: "return 1".into(), tools: vec!["fs__read_text_file".into()], limits: Limits::default() })
        );
        for line in [
            r#"{"call":{"id":1,"tool":"fs__read_text_file","arguments":{"path":"/x"}}}"#,
            r#"{"done":{"value":{"n":2},"logs":["hi"]}}"#,
            r#"{"failed":{"kind":"limit","limit":"cpu","message":"over","stack":"at f"}}"#,
        ] {
            let read: FromChild = serde_json::from_str(line).expect(line);
            assert_eq!(serde_json::to_string(&read).expect("writes"), line);
        }
    }

    #[test]
    fn an_answer_carries_exactly_one_outcome_and_null_is_a_value() {
        let read = |line: &str| match serde_json::from_str::<ToChild>(line) {
            Ok(ToChild::Answer(a)) => a.answer(),
            other => panic!("{line}: {other:?}"),
        };
        assert_eq!(read(r#"{"answer":{"id":3,"ok":null}}"#), Ok(Answer::Ok(Value::Null)));
        assert_eq!(read(r#"{"answer":{"id":3}}"#), Err(WireError::NoOutcome { id: 3 }));
        let both = r#"{"answer":{"id":3,"ok":1,"error":{"reason":"r","code":1,"message":"m"}}}"#;
        assert_eq!(read(both), Err(WireError::BothOutcomes { id: 3 }));
        let answered = Answered::new(4, Answer::Ok(json!(null)));
        assert_eq!(serde_json::to_value(&answered).expect("writes"), json!({"id": 4, "ok": null}));
    }

    #[test]
    fn unknown_fields_and_variants_are_refused() {
        for line in [
            r#"{"answer":{"id":1,"ok":1,"caller":"root"}}"#,
            r#"{"start":{"program":"","tools":[],"limits":{"heap":1,"stack":1,"cpu_ms":1,"calls":1,"output":1,"logs":1,"net":1}}}"#,
            r#"{"exec":{"cmd":"sh"}}"#,
            r#"{"answer":{"id":1,"ok":1},"start":{}}"#,
        ] {
            assert!(serde_json::from_str::<ToChild>(line).is_err(), "{line}");
        }
        for line in [r#"{"call":{"id":1,"tool":"t","arguments":{},"method":"tools/list"}}"#, r#"{"failed":{"kind":"oops","message":"m"}}"#]
        {
            assert!(serde_json::from_str::<FromChild>(line).is_err(), "{line}");
        }
    }
}
