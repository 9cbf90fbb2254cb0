//! `scripts/test` runs every target whatever fails, and names what failed. The suite cannot run
//! itself, so this runs the script's runner (`scripts/lib/steps.sh`) on a throwaway crate with one
//! failing and one passing test binary, and a step after it; and it checks that `scripts/test`
//! runs each of its steps through that runner, every `cargo test` with `--no-fail-fast`.

use crate::harness::*;
use std::process::Command;

/// A crate with no dependencies: `tests/a.rs` fails, `tests/b.rs` passes and leaves a mark.
fn failing_crate(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    std::fs::create_dir_all(dir.join("tests")).expect("mkdir");
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"one-fails\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n")
        .expect("write");
    std::fs::write(dir.join("src/lib.rs"), "").expect("write");
    std::fs::write(dir.join("tests/a.rs"), "#[test]\nfn deliberately_fails() {\n    panic!(\"deliberately\");\n}\n").expect("write");
    std::fs::write(
        dir.join("tests/b.rs"),
        "#[test]\nfn passes_and_leaves_a_mark() {\n    std::fs::write(std::env::var(\"MARK\").unwrap(), \"b ran\").unwrap();\n}\n",
    )
    .expect("write");
}

#[test]
fn one_failing_test_binary_stops_nothing_and_is_named_at_the_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let krate = dir.path().join("crate");
    failing_crate(&krate);
    let (mark, after) = (dir.path().join("b-ran"), dir.path().join("the-next-step-ran"));
    // The very cargo invocation scripts/test makes, on the throwaway crate, then a later step.
    let script = format!(
        "set -euo pipefail\nsource {lib:?}\ncd {krate:?}\nstep \"every test binary\" cargo test --no-fail-fast --tests\nstep \"a later step\" touch {after:?}\nsteps_summary\n",
        lib = repo().join("scripts/lib/steps.sh"),
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("MARK", &mark)
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run bash");
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "a failing test must make the run fail:\n{printed}");
    assert!(mark.exists(), "the passing test binary did not run after the failing one:\n{printed}");
    assert!(after.exists(), "the step after the failing one did not run:\n{printed}");
    let summary = printed.split("== summary:").nth(1).unwrap_or_else(|| panic!("no summary at the end:\n{printed}"));
    for named in ["2 steps run, 1 failed", "FAILED STEP: every test binary", "failed test: deliberately_fails", "failed target: `--test a`"]
    {
        assert!(summary.contains(named), "the summary does not say {named:?}:\n{summary}");
    }
    assert!(!summary.contains("FAILED STEP: a later step"), "{summary}");
}

#[test]
fn a_run_where_everything_passes_exits_zero() {
    let script =
        format!("set -euo pipefail\nsource {:?}\nstep one true\nstep two true\nsteps_summary\n", repo().join("scripts/lib/steps.sh"));
    let out = Command::new("bash").arg("-c").arg(&script).output().expect("run bash");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && printed.contains("2 steps run, 0 failed"), "{printed}");
}

#[test]
fn scripts_test_runs_every_step_through_the_runner_and_never_stops_at_a_test_binary() {
    let script = std::fs::read_to_string(repo().join("scripts/test")).expect("scripts/test");
    let commands: Vec<&str> =
        script.lines().map(str::trim).filter(|l| !l.starts_with('#') && (l.contains("cargo ") || l.contains("scripts/install"))).collect();
    assert!(commands.len() >= 3, "scripts/test's commands: {commands:?}");
    for c in &commands {
        assert!(c.starts_with("step \""), "scripts/test: `{c}` is not run as a step, so a failure would stop the run or go unreported");
        if c.contains("cargo test") {
            assert!(c.contains("--no-fail-fast"), "scripts/test: `{c}` would stop at the first failing test binary");
        }
    }
    assert!(script.trim_end().ends_with("steps_summary"), "scripts/test must end with the summary, whose status is the run's");
}
