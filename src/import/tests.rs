//! Unit tests of `mcpgate import` on the shapes each client writes.

use super::*;

const CLAUDE_DESKTOP: &str = r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "LOG_LEVEL": "info" }
    },
    "Filesystem Tools": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"] },
    "linear": { "type": "http", "url": "https://mcp.linear.app/mcp", "headers": { "Authorization": "Bearer lin_api_0123456789abcdef" } },
    "old": { "disabled": true, "command": "x" }
  }
}"#;

#[test]
fn stdio_and_http_servers_become_upstreams_without_their_secrets() {
    let out = import(CLAUDE_DESKTOP, "claude_desktop_config.json").unwrap();
    let t = &out.toml;
    assert_eq!(out.servers, 3);
    assert!(!t.contains("ghp_abc") && !t.contains("lin_api_0123"), "no secret is copied:\n{t}");
    assert!(t.contains("id = \"github\"\ncommand = [\"npx\", \"-y\", \"@modelcontextprotocol/server-github\"]"), "{t}");
    assert!(t.contains("GITHUB_PERSONAL_ACCESS_TOKEN = { env = \"GITHUB_PERSONAL_ACCESS_TOKEN\" }"), "{t}");
    assert!(t.contains("LOG_LEVEL = \"info\""), "plain settings stay literal:\n{t}");
    assert!(t.contains("id = \"filesystem-tools\""), "{t}");
    assert!(t.contains("url = \"https://mcp.linear.app/mcp\"\n[upstream.headers]\nAuthorization = { env = \"LINEAR_AUTHORIZATION\", prefix = \"Bearer \" }"), "{t}");
    assert!(out.variables.iter().any(|(v, _)| v == "LINEAR_AUTHORIZATION"));
    assert!(out.warnings.iter().any(|w| w.contains("'old': disabled")));
    let parsed: toml::Value = toml::from_str(t).unwrap();
    assert_eq!(parsed["upstream"].as_array().unwrap().len(), 3);
}

#[test]
fn vscode_servers_inputs_and_env_references_stay_references() {
    let vscode = r#"{
      "inputs": [{ "type": "promptString", "id": "api-key", "password": true }],
      "servers": {
        "perplexity": { "type": "stdio", "command": "npx", "args": ["-y", "server-perplexity"], "env": { "PERPLEXITY_API_KEY": "${input:api-key}" } },
        "gh": { "type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": { "Authorization": "Bearer ${env:GITHUB_TOKEN}" } },
        "legacy": { "type": "sse", "url": "http://localhost:3000/sse" }
      }
    }"#;
    let out = import(vscode, ".vscode/mcp.json").unwrap();
    let t = &out.toml;
    assert!(t.contains("PERPLEXITY_API_KEY = { env = \"API_KEY\" }"), "{t}");
    assert!(t.contains("Authorization = { env = \"GITHUB_TOKEN\", prefix = \"Bearer \" }"), "{t}");
    assert!(out.warnings.iter().any(|w| w.contains("'legacy'") && w.contains("HTTP+SSE")), "{:?}", out.warnings);
}

#[test]
fn secret_arguments_are_removed_and_ids_are_unique() {
    let j = r#"{"mcpServers": {
      "a b": { "command": "server", "args": ["--api-key", "k-123", "--port", "3000", "--token=abc"] },
      "A-B": { "command": "server" }
    }}"#;
    let out = import(j, "x.json").unwrap();
    let t = &out.toml;
    assert!(!t.contains("k-123") && !t.contains("abc\""), "{t}");
    assert!(t.contains("\"--port\", \"3000\""), "{t}");
    assert!(t.contains("id = \"a-b\"") && t.contains("id = \"a-b-2\""), "{t}");
    assert_eq!(out.warnings.iter().filter(|w| w.contains("looks like a secret")).count(), 2, "{:?}", out.warnings);
}

#[test]
fn unusable_input_says_why() {
    assert!(import("{", "f.json").unwrap_err().contains("not JSON"));
    assert!(import("{}", "f.json").unwrap_err().contains("mcpServers"));
    assert!(import(r#"{"mcpServers": {"x": {"url": "https://u:p@h/mcp"}}}"#, "f.json").unwrap_err().contains("credentials"));
}

#[test]
fn secrets_are_told_apart_from_settings() {
    assert!(looks_secret("API_KEY", "x"));
    assert!(looks_secret("SLACK_BOT_TOKEN", "xoxb-1"));
    assert!(looks_secret("X", "sk-proj-abc"));
    assert!(looks_secret("X", "a8f5f167f44f4964e6c998dee827110c"));
    assert!(looks_secret("DATABASE_URL", "postgresql://app:hunter2@db:5432/app"));
    assert!(!looks_secret("DATABASE_URL", "postgresql://db:5432/app"));
    assert!(!looks_secret("LOG_LEVEL", "debug"));
    assert!(!looks_secret("ALLOWED_DIR", "/home/me/projects/some-long-directory-name"));
    assert!(!looks_secret("KEYBOARD_LAYOUT", "us"), "KEY only as a whole word");
}
