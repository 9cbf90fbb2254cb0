//! `[code_mode]` and `[[endpoint]] code_mode`: whether an endpoint serves code mode (a small
//! surface — search the tools, run a JavaScript program over them — instead of its catalogue),
//! and the limits every program runs under: the interpreter's heap and stack, CPU and wall-clock
//! time, inner calls, the program's size, its output and console logs, and how many programs run
//! at once. What is written is checked here with the line it is on.

use super::{ConfigError, Locator};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// `[code_mode]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeModeSection {
    /// The root endpoint serves code mode (default false); each `[[endpoint]]` says it for itself.
    pub enabled: Option<Spanned<bool>>,
    pub heap: Option<Spanned<String>>,
    pub stack: Option<Spanned<String>>,
    pub cpu: Option<Spanned<String>>,
    pub wall_clock: Option<Spanned<String>>,
    pub calls: Option<Spanned<u64>>,
    pub program_size: Option<Spanned<String>>,
    pub output: Option<Spanned<String>>,
    pub logs: Option<Spanned<String>>,
    pub programs: Option<Spanned<u64>>,
    pub programs_per_caller: Option<Spanned<u64>>,
}

/// The resolved `[code_mode]`: the root endpoint's switch and the limits of every program.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeModeConfig {
    /// The root endpoint serves code mode.
    pub enabled: bool,
    /// The interpreter's heap, in bytes.
    pub heap: usize,
    /// The interpreter's stack, in bytes.
    pub stack: usize,
    /// Time a program may run on a CPU (waiting for an inner call's answer does not count).
    pub cpu: Duration,
    /// Time a program may take from start to end, besides time paused for a person's answer.
    pub wall_clock: Duration,
    /// Inner tool calls one program may make.
    pub calls: u32,
    /// The largest program accepted, in bytes (checked before anything runs).
    pub program_size: usize,
    /// The largest value a program may return (as JSON), in bytes.
    pub output: usize,
    /// Console output kept per program, in bytes; the rest is cut with "…truncated".
    pub logs: usize,
    /// Programs running at once on this replica, and per caller.
    pub programs: usize,
    pub programs_per_caller: usize,
}

impl Default for CodeModeConfig {
    fn default() -> Self {
        CodeModeConfig {
            enabled: false,
            heap: 64 << 20,
            stack: 512 << 10,
            cpu: Duration::from_secs(5),
            wall_clock: Duration::from_secs(30),
            calls: 50,
            program_size: 64 << 10,
            output: 1 << 20,
            logs: 64 << 10,
            programs: 4,
            programs_per_caller: 2,
        }
    }
}

/// A size of `min..=max` bytes, or `default`.
fn size(at: &Locator, v: &Option<Spanned<String>>, key: &str, (min, max): (u64, u64), default: usize) -> Result<usize, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    match super::usage::parse_size(v.get_ref()).filter(|b| (min..=max).contains(b)).and_then(|b| usize::try_from(b).ok()) {
        Some(b) => Ok(b),
        None => Err(at.err(
            v,
            key,
            format!("{:?} is not a size from {} to {}", v.get_ref(), shown(min), shown(max)),
            "write e.g. \"64MiB\", \"512KiB\" or \"4096\" (bytes)",
        )),
    }
}

fn shown(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// A duration of `min..=max`, or `default`.
fn time(
    at: &Locator,
    v: &Option<Spanned<String>>,
    key: &str,
    (min, max): (Duration, Duration),
    default: Duration,
) -> Result<Duration, ConfigError> {
    let d = at.duration(v.as_ref(), key, default)?;
    match v {
        Some(v) if !(min..=max).contains(&d) => Err(at.err(
            v,
            key,
            format!("{:?} is outside {} to {}", v.get_ref(), humantime::format_duration(min), humantime::format_duration(max)),
            "write e.g. \"5s\" or \"500ms\"",
        )),
        _ => Ok(d),
    }
}

/// A count of `1..=max`, or `default`.
fn count(at: &Locator, v: &Option<Spanned<u64>>, key: &str, max: u64, default: u64) -> Result<u64, ConfigError> {
    match v {
        None => Ok(default),
        Some(n) if (1..=max).contains(n.get_ref()) => Ok(*n.get_ref()),
        Some(n) => Err(at.err(n, key, format!("{} is not a number from 1 to {max}", n.get_ref()), "write e.g. 4")),
    }
}

/// The largest interpreter stack a configuration may ask for: a program runs on its process's
/// main thread, whose stack is usually 8 MiB, and an interpreter limit above what the thread has
/// would end deep recursion with a crash instead of the `stack` limit.
pub const MAX_STACK: u64 = 4 << 20;

/// Resolves `[code_mode]`.
pub(super) fn resolve(at: &Locator, s: CodeModeSection) -> Result<CodeModeConfig, ConfigError> {
    let d = CodeModeConfig::default();
    let heap = size(at, &s.heap, "code_mode.heap", (1 << 20, 4 << 30), d.heap)?;
    let stack = size(at, &s.stack, "code_mode.stack", (64 << 10, MAX_STACK), d.stack)?;
    if let Some(v) = s.stack.as_ref().filter(|_| stack >= heap) {
        return Err(at.err(
            v,
            "code_mode.stack",
            format!("{:?} is not smaller than the heap", v.get_ref()),
            "make the stack smaller than heap",
        ));
    }
    let cpu = time(at, &s.cpu, "code_mode.cpu", (Duration::from_millis(10), Duration::from_secs(600)), d.cpu)?;
    let wall_clock = time(at, &s.wall_clock, "code_mode.wall_clock", (Duration::from_millis(10), Duration::from_secs(3600)), d.wall_clock)?;
    let named = s.wall_clock.as_ref().map(|w| (w, "code_mode.wall_clock")).or(s.cpu.as_ref().map(|c| (c, "code_mode.cpu")));
    if let Some((v, key)) = named.filter(|_| wall_clock < cpu) {
        return Err(at.err(v, key, "wall_clock is shorter than cpu".to_string(), "give wall_clock at least as long as cpu"));
    }
    let programs = count(at, &s.programs, "code_mode.programs", 1024, d.programs as u64)? as usize;
    let per_caller = count(at, &s.programs_per_caller, "code_mode.programs_per_caller", 1024, d.programs_per_caller as u64)? as usize;
    if per_caller > programs {
        let v = s.programs_per_caller.as_ref().or(s.programs.as_ref());
        if let Some(v) = v {
            return Err(at.err(
                v,
                "code_mode.programs_per_caller",
                format!("{per_caller} programs per caller is more than the {programs} of the whole replica"),
                "make programs_per_caller at most programs",
            ));
        }
    }
    Ok(CodeModeConfig {
        enabled: s.enabled.is_some_and(|e| e.into_inner()),
        heap,
        stack,
        cpu,
        wall_clock,
        calls: count(at, &s.calls, "code_mode.calls", 10_000, u64::from(d.calls))? as u32,
        program_size: size(at, &s.program_size, "code_mode.program_size", (1 << 10, 16 << 20), d.program_size)?,
        output: size(at, &s.output, "code_mode.output", (1 << 10, 64 << 20), d.output)?,
        logs: size(at, &s.logs, "code_mode.logs", (0, 16 << 20), d.logs)?,
        programs,
        programs_per_caller: per_caller,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("gateway.toml"), None, &|_| None)
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn defaults_are_the_designed_limits() {
        let cfg = parse("").unwrap();
        assert_eq!(cfg.code_mode, CodeModeConfig::default());
        assert!(!cfg.code_mode.enabled);
        assert_eq!((cfg.code_mode.heap, cfg.code_mode.stack, cfg.code_mode.calls), (64 << 20, 512 << 10, 50));
        assert_eq!((cfg.code_mode.cpu, cfg.code_mode.wall_clock), (Duration::from_secs(5), Duration::from_secs(30)));
        assert_eq!((cfg.code_mode.program_size, cfg.code_mode.output, cfg.code_mode.logs), (64 << 10, 1 << 20, 64 << 10));
        assert_eq!((cfg.code_mode.programs, cfg.code_mode.programs_per_caller), (4, 2));
    }

    #[test]
    fn limits_are_read_as_written() {
        let cfg = parse(
            "[code_mode]\nenabled = false\nheap = \"128MiB\"\nstack = \"1MiB\"\ncpu = \"2s\"\nwall_clock = \"1m\"\ncalls = 200\n\
             program_size = \"16KiB\"\noutput = \"256KiB\"\nlogs = \"0\"\nprograms = 8\nprograms_per_caller = 8\n",
        )
        .unwrap();
        let c = cfg.code_mode;
        assert_eq!((c.heap, c.stack, c.cpu, c.wall_clock), (128 << 20, 1 << 20, Duration::from_secs(2), Duration::from_secs(60)));
        assert_eq!((c.calls, c.program_size, c.output, c.logs, c.programs, c.programs_per_caller), (200, 16 << 10, 256 << 10, 0, 8, 8));
        let cfg = parse("[[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"*\"]\ncode_mode = false\n").unwrap();
        assert!(!cfg.endpoints[0].code_mode);
    }

    #[test]
    fn code_mode_is_switched_on_for_the_root_and_for_each_endpoint() {
        let cfg = parse("[server]\npath = \"/mcp\"\n\n[code_mode]\nenabled = true\n").unwrap();
        assert!(cfg.code_mode.enabled);
        let cfg = parse("[[endpoint]]\npath = \"/mcp/code\"\ninclude = [\"*\"]\ncode_mode = true\n").unwrap();
        assert!(cfg.endpoints[0].code_mode && !cfg.code_mode.enabled);
    }

    #[test]
    fn bad_limits_name_their_line_and_key() {
        // (the lines after `[code_mode]`, the line of the error, what it says)
        let cases = [
            ("heap = \"512KiB\"", 3, "code_mode.heap: \"512KiB\" is not a size from 1MiB to 4GiB"),
            ("heap = \"lots\"", 3, "code_mode.heap: \"lots\" is not a size"),
            ("stack = \"1KiB\"", 3, "code_mode.stack: \"1KiB\" is not a size from 64KiB to 4MiB"),
            ("stack = \"8MiB\"", 3, "code_mode.stack: \"8MiB\" is not a size from 64KiB to 4MiB"),
            ("heap = \"1MiB\"\nstack = \"2MiB\"", 4, "code_mode.stack: \"2MiB\" is not smaller than the heap"),
            ("cpu = \"1ms\"", 3, "code_mode.cpu: \"1ms\" is outside 10ms to 10m"),
            ("cpu = \"soon\"", 3, "code_mode.cpu: 'soon' is not a duration"),
            ("cpu = \"10s\"\nwall_clock = \"5s\"", 4, "code_mode.wall_clock: wall_clock is shorter than cpu"),
            ("cpu = \"1m\"", 3, "code_mode.cpu: wall_clock is shorter than cpu"),
            ("calls = 0", 3, "code_mode.calls: 0 is not a number from 1 to 10000"),
            ("program_size = \"100MiB\"", 3, "code_mode.program_size: \"100MiB\" is not a size from 1KiB to 16MiB"),
            ("output = \"1\"", 3, "code_mode.output: \"1\" is not a size from 1KiB to 64MiB"),
            ("logs = \"1GiB\"", 3, "code_mode.logs: \"1GiB\" is not a size from 0 bytes to 16MiB"),
            ("programs = 2\nprograms_per_caller = 3", 4, "code_mode.programs_per_caller: 3 programs per caller is more than the 2"),
            ("programs = 1", 3, "code_mode.programs_per_caller: 2 programs per caller is more than the 1"),
        ];
        for (body, line, want) in cases {
            let e = error(&format!("# limits\n[code_mode]\n{body}\n"));
            assert!(e.starts_with(&format!("gateway.toml:{line}: {want}")), "{body}: {e}");
            assert!(e.contains(". Fix: "), "{e}");
        }
        let e = error("[code_mode]\ncalls = 1\nbogus = 1\n");
        assert!(e.contains("bogus"), "{e}");
        // Each error is on the line of the key it names.
        let e = error("[code_mode]\nheap = \"64MiB\"\ncalls = 50\noutput = \"2\"\n");
        assert!(e.starts_with("gateway.toml:4: code_mode.output"), "{e}");
    }
}
