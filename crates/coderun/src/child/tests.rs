use super::*;
use crate::wire::{Answered, Limit, Limits};
use serde_json::{Value, json};

/// The start line of `program`, with small limits.
fn start(program: &str, tools: &[&str], limits: Limits) -> String {
    let start = ToChild::Start(Start { program: program.to_owned(), tools: tools.iter().map(|t| (*t).to_owned()).collect(), limits });
    serde_json::to_string(&start).expect("writes")
}

fn small() -> Limits {
    Limits { heap: 16 << 20, stack: 256 << 10, cpu_ms: 500, calls: 5, output: 1 << 16, logs: 1 << 10 }
}

fn answer(id: u64, value: Value) -> String {
    serde_json::to_string(&ToChild::Answer(Answered::new(id, Answer::Ok(value)))).expect("writes")
}

/// Run the child over `lines` (the gateway's side, scripted); its status and its lines.
fn exchange(lines: &[String]) -> (u8, Vec<FromChild>) {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut output = Vec::new();
    let status = run(input.as_bytes(), &mut output);
    let text = String::from_utf8(output).expect("utf-8");
    let read = text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    (status, read)
}

fn call(id: u64, tool: &str, arguments: Value) -> FromChild {
    FromChild::Call(Call { id, tool: tool.to_owned(), arguments })
}

#[test]
fn two_calls_answered_from_the_pipe_make_the_programs_value() {
    let program = "const a = await tools.alpha({x: 1}); const b = await tools.call('beta', {y: 2}); return {a, b, sum: a.n + b.n};";
    let (status, lines) = exchange(&[start(program, &["alpha", "beta"], small()), answer(1, json!({"n": 1})), answer(2, json!({"n": 2}))]);
    assert_eq!(status, EXIT_ENDED);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], call(1, "alpha", json!({"x": 1})));
    assert_eq!(lines[1], call(2, "beta", json!({"y": 2})));
    let FromChild::Done(done) = &lines[2] else { panic!("{lines:?}") };
    assert_eq!(done.value, json!({"a": {"n": 1}, "b": {"n": 2}, "sum": 3}));
}

#[test]
fn a_refused_call_is_a_tool_error_inside_the_program() {
    let failure = ToolFailure { reason: "denied_by_rule".into(), code: Some(-32001), message: "no".into(), result: None };
    let refused = serde_json::to_string(&ToChild::Answer(Answered::new(1, Answer::Error(failure)))).expect("writes");
    let program = "try { await tools.alpha(); return 'ran'; } catch (e) { return [e instanceof ToolError, e.reason, e.code, e.message]; }";
    let (status, lines) = exchange(&[start(program, &["alpha"], small()), refused]);
    assert_eq!(status, EXIT_ENDED);
    let Some(FromChild::Done(done)) = lines.last() else { panic!("{lines:?}") };
    assert_eq!(done.value, json!([true, "denied_by_rule", -32001, "no"]));
}

#[test]
fn a_line_out_of_protocol_ends_the_program_even_when_it_catches() {
    let program = "for (const t of ['alpha', 'beta']) { try { await tools.call(t, {}); } catch (e) {} } return 'went on';";
    let bad = [
        r#"{"answer":{"id":1,"ok":1,"caller":"root"}}"#.to_owned(),
        answer(2, json!(1)),
        r#"{"answer":{"id":1,"ok":1,"error":{"reason":"r","message":"m"}}}"#.to_owned(),
        start("return 2", &[], small()),
        "not json".to_owned(),
    ];
    for line in bad {
        let (status, lines) = exchange(&[start(program, &["alpha", "beta"], small()), line.clone(), answer(2, json!(2))]);
        assert_eq!(status, EXIT_PROTOCOL, "{line}");
        assert_eq!(lines.len(), 2, "{line}: {lines:?}");
        assert_eq!(lines[0], call(1, "alpha", json!({})));
        let FromChild::Failed(failed) = &lines[1] else { panic!("{line}: {lines:?}") };
        assert_eq!(failed.kind, FailKind::Protocol, "{line}");
    }
    // The pipe ending while a call waits is the same.
    let (status, lines) = exchange(&[start(program, &["alpha"], small())]);
    assert_eq!(status, EXIT_PROTOCOL);
    assert!(matches!(&lines[1], FromChild::Failed(f) if f.kind == FailKind::Protocol && f.message.contains("ended")), "{lines:?}");
}

#[test]
fn the_first_line_must_be_a_start() {
    for lines in [vec![answer(1, json!(1))], vec!["{\"start\":{}}".to_owned()], vec![]] {
        let (status, out) = exchange(&lines);
        assert_eq!(status, EXIT_PROTOCOL, "{lines:?}");
        assert!(matches!(out.as_slice(), [FromChild::Failed(f)] if f.kind == FailKind::Protocol), "{out:?}");
    }
}

#[test]
fn a_limit_ends_the_program_in_its_own_right() {
    let limits = Limits { calls: 1, ..small() };
    let program = "await tools.alpha(); await tools.alpha(); return 'two';";
    let (status, lines) = exchange(&[start(program, &["alpha"], limits), answer(1, json!(null))]);
    assert_eq!(status, EXIT_ENDED);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let FromChild::Failed(failed) = &lines[1] else { panic!("{lines:?}") };
    assert_eq!((failed.kind, failed.limit), (FailKind::Limit, Some(Limit::Calls)));
}

#[test]
fn a_line_over_the_cap_does_not_read() {
    let long = vec![b'x'; usize::try_from(MAX_LINE).expect("fits") + 2];
    let mut input = long.as_slice();
    assert!(matches!(read_line(&mut input), Err(PipeError::TooLong)));
    let mut input: &[u8] = b"a\r\nb";
    assert_eq!(read_line(&mut input).expect("reads").as_deref(), Some("a"));
    assert_eq!(read_line(&mut input).expect("reads").as_deref(), Some("b"));
    assert_eq!(read_line(&mut input).expect("reads"), None);
}
