//! docs/cli.md's command table against the real CLI: every command `mcpgate --help` lists (and
//! every subcommand of one that has them) has a row, and a command that takes `-c` shows it in
//! its row's synopsis, so nobody has to guess which commands read a configuration file.

use std::process::Command;

/// The subcommands a `--help` lists (its "Commands:" section), `help` left out.
fn subcommands(path: &[String]) -> Vec<String> {
    let help = help_of(path);
    let Some(start) = help.find("Commands:") else { return Vec::new() };
    let section = &help[start + "Commands:".len()..];
    let end = section.find("\n\n").unwrap_or(section.len());
    section[..end]
        .lines()
        // A command's line starts two spaces in; its wrapped description, further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn help_of(path: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(path).arg("--help").output().expect("run mcpgate --help");
    assert!(out.status.success(), "{path:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Every leaf command, as the words after `mcpgate`.
fn commands(path: Vec<String>) -> Vec<Vec<String>> {
    let subs = subcommands(&path);
    if subs.is_empty() && !path.is_empty() {
        return vec![path];
    }
    subs.into_iter()
        .flat_map(|s| {
            let mut p = path.clone();
            p.push(s);
            commands(p)
        })
        .collect()
}

#[test]
fn every_command_has_a_row_and_shows_c_when_it_takes_a_configuration() {
    let doc = std::fs::read_to_string(crate::harness::repo().join("docs/cli.md")).expect("docs/cli.md");
    let all = commands(Vec::new());
    assert!(all.len() >= 15, "{all:?}");
    let mut problems = Vec::new();
    for path in all {
        let name = format!("mcpgate {}", path.join(" "));
        // The synopsis is the row's first code span, e.g. `mcpgate usage [-c FILE] …`.
        let Some(synopsis) = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .find(|s| *s == name || s.starts_with(&format!("{name} ")))
        else {
            problems.push(format!("{name}: no row in docs/cli.md"));
            continue;
        };
        let takes_c = help_of(&path).lines().any(|l| l.trim_start().starts_with("-c, --config"));
        if takes_c != synopsis.contains("-c FILE") {
            problems.push(format!("{name}: takes -c: {takes_c}, but its row reads `{synopsis}`"));
        }
    }
    assert!(problems.is_empty(), "docs/cli.md's command table:\n{}", problems.join("\n"));
}
