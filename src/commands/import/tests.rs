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
    assert!(
        t.contains(
            "url = \"https://mcp.linear.app/mcp\"\n[upstream.headers]\nAuthorization = { env = \
        \"LINEAR_AUTHORIZATION\", prefix = \"Bearer \" }"
        ),
        "{t}"
    );
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
fn secret_arguments_come_from_the_environment_and_ids_are_unique() {
    let j = r#"{"mcpServers": {
      "a b": { "command": "server", "args": ["--api-key", "k-123", "--port", "3000", "--token=abc"] },
      "A-B": { "command": "server" }
    }}"#;
    let out = import(j, "x.json").unwrap();
    let t = &out.toml;
    assert!(!t.contains("k-123") && !t.contains("=abc"), "{t}");
    // "A-B" sorts first and keeps the id "a-b"; "a b" is "a-b-2".
    assert!(
        t.contains(
            "command = [\"sh\", \"-c\", \"exec server --api-key \\\"${A_B_2_API_KEY}\\\" --port 3000 --token=\\\"${A_B_2_TOKEN}\\\"\"]"
        ),
        "{t}"
    );
    assert!(t.contains("A_B_2_API_KEY = { env = \"A_B_2_API_KEY\" }\nA_B_2_TOKEN = { env = \"A_B_2_TOKEN\" }"), "{t}");
    assert!(t.contains("id = \"a-b\"") && t.contains("id = \"a-b-2\""), "{t}");
    assert_eq!(out.warnings.iter().filter(|w| w.contains("sh -c")).count(), 1, "{:?}", out.warnings);
    assert!(out.warnings.iter().any(|w| w.contains("argument 2 (value of --api-key) from A_B_2_API_KEY")), "{:?}", out.warnings);
}

#[test]
fn unusable_input_says_why() {
    assert!(import("{", "f.json").unwrap_err().to_string().contains("not JSON"));
    assert!(import("{}", "f.json").unwrap_err().to_string().contains("mcpServers"));
    assert!(import(r#"{"mcpServers": {"x": {"url": "https://u:p@h/mcp"}}}"#, "f.json").unwrap_err().to_string().contains("credentials"));
}

#[test]
fn secrets_are_told_apart_from_settings() {
    use secrets::is_secret;
    assert!(is_secret("API_KEY", "x"));
    assert!(is_secret("GITHUB_TOKEN", "YWJj"), "a short value under a secret name");
    assert!(is_secret("apiKey", "abc") && is_secret("X-Api-Key", "abc") && is_secret("access_token", "1"));
    assert!(is_secret("SLACK_BOT_TOKEN", "xoxb-1"));
    assert!(is_secret("Authorization", "Bearer abc") && is_secret("", "Bearer abc"));
    assert!(is_secret("X", "sk-proj-abc"));
    assert!(is_secret("", "sk-ak-Zt9QwErTy") && is_secret("", "AKIAIOSFODNN7EXAMPLE") && is_secret("", "glpat-Xx11Yy22Zz33"));
    assert!(is_secret("X", "a8f5f167f44f4964e6c998dee827110c"));
    assert!(is_secret("", "7c9e6679-7425-40de-944b-e07fc1f90ae7"));
    assert!(!is_secret("GITHUB_TOKEN", "${env:GITHUB_TOKEN}") && !is_secret("Authorization", "Bearer ${input:key}"));
    assert!(!is_secret("API_KEY", ""));
    assert!(!is_secret("LOG_LEVEL", "debug"));
    assert!(!is_secret("ALLOWED_DIR", "/home/me/projects/some-long-directory-name"));
    assert!(!is_secret("KEYBOARD_LAYOUT", "us"), "KEY only as a whole word or a word's end");
    assert!(!is_secret("GITHUB_TOKEN_FILE", "/run/secrets/gh"), "where the secret is, not the secret");
    assert!(!is_secret("compat", "1") && !is_secret("port", "8080"));
    for plain in [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/home/user/docs",
        "claude-3-5-sonnet-20241022",
        "GITHUB_PERSONAL_ACCESS_TOKEN",
        "2024-11-05",
        "sk-learn",
        "ASIA-PACIFIC-REGION-1",
        "hf_transfer",
        "eyJ",
    ] {
        assert!(!is_secret("", plain), "{plain}");
    }
}

#[test]
fn secrets_are_found_inside_urls_and_arguments() {
    let at = |name: &str, text: &str| -> Vec<(String, String)> {
        secrets::find(name, text).into_iter().map(|f| (text[f.range].to_string(), f.place)).collect()
    };
    let one = |s: &str, p: &str| vec![(s.to_string(), p.to_string())];
    assert_eq!(at("DATABASE_URL", "postgresql://app:hunter2@db:5432/app"), one("hunter2", "URL password"));
    assert!(at("DATABASE_URL", "postgresql://db:5432/app").is_empty());
    assert_eq!(at("", "https://h/mcp?a=1&api_key=sk-live-abc123#top"), one("sk-live-abc123", "query parameter api_key"));
    assert_eq!(at("", "https://h/api/mcp/s/sk-ak-Zt9QwErTy/sse"), one("sk-ak-Zt9QwErTy", "URL path"));
    assert_eq!(at("", "--url=https://h/mcp?token=t1"), one("t1", "query parameter token"));
    assert_eq!(at("", "--header=Authorization: Bearer abc"), one("abc", "header Authorization"));
    assert_eq!(at("", "API_KEY=abc"), one("abc", "value of API_KEY"));
    assert_eq!(at("", "{\"debug\":true,\"githubToken\":\"ghp_x\"}"), one("ghp_x", "JSON field githubToken"));
    assert_eq!(at("", "sk-live-abc123:x"), one("sk-live-abc123:x", "value"), "a secret is never a name");
    assert_eq!(at("", "--sk-live-abc123=1"), one("--sk-live-abc123=1", "value"));
    assert_eq!(at("", "https://h/mcp?sk-live-abc123=1"), one("sk-live-abc123=1", "URL query"));
    assert!(at("", "Authorization:${AUTH_HEADER}").is_empty());
    assert!(at("", "https://mcp.example.com/mcp").is_empty());
    assert!(at("", "--port=8080").is_empty());
    let args: Vec<String> = ["--api-key", "abc", "--no-auth", "--port", "3000"].map(String::from).to_vec();
    let found = secrets::find_in_args(&args);
    assert_eq!(found.iter().map(Vec::len).collect::<Vec<_>>(), [0, 1, 0, 0, 0], "{found:?}");
}

// ---- Security finding 6: credentials in URLs and arguments ----

/// Every secret of the client files below: none may appear in the output, the notes or the
/// variables' descriptions.
const SECRETS: [&str; 17] = [
    "sk-live-abc123",
    "tok_9f8e7d",
    "k3y-v4lue",
    "at-5551212",
    "auth-abc-999",
    "apik-777",
    "3f2a9c1e8b7d4e6fa1b2c3d4e5f60718",
    "sk-ak-Zt9QwErTy",
    "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "hunter2",
    "abc-def-secret",
    "xoxb-123-456-abc",
    "q9w8e7r6",
    "YWJj",
    "glpat-Xx11Yy22Zz33",
    "S3cr3tBearer",
];

fn assert_no_secret(out: &Imported) {
    let notes = format!("{:?} {:?}", out.warnings, out.variables);
    for s in SECRETS {
        assert!(!out.toml.contains(s), "{s} was copied:\n{}", out.toml);
        assert!(!notes.contains(s), "{s} was printed: {notes}");
    }
}

/// Loads the output as the gateway would, every variable it names set to `value_of(var)`.
fn load(out: &Imported, value_of: &dyn Fn(&str) -> String) -> mcpgate_config::Config {
    let vars: Vec<String> = out.variables.iter().map(|(v, _)| v.clone()).collect();
    let env = move |k: &str| vars.iter().any(|v| v == k).then(|| value_of(k));
    mcpgate_config::Config::parse(&out.toml, std::path::Path::new("gateway.toml"), None, &env)
        .unwrap_or_else(|e| panic!("{e}\n{}", out.toml))
}

/// The argv a stdio upstream's child would get: its command, run (when it goes through `sh -c`)
/// with the program replaced by `printf` so that the shell's expansion can be compared.
fn child_argv(cfg: &mcpgate_config::Config, id: &str) -> Vec<String> {
    let up = cfg.upstreams.iter().find(|u| u.id == id).unwrap_or_else(|| panic!("no upstream {id}"));
    let mcpgate_config::TransportConfig::Stdio { command, env, .. } = &up.transport else { panic!("{id} is not stdio") };
    if command.len() == 3 && command[0] == "sh" && command[1] == "-c" {
        let script = command[2].replacen("exec ", "exec printf '%s\\n' ", 1);
        let out = std::process::Command::new("sh").arg("-c").arg(&script).env_clear().envs(env).output().unwrap();
        assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    } else {
        command.clone()
    }
}

#[test]
fn credentials_in_http_urls_are_never_copied() {
    // Cursor's ~/.cursor/mcp.json with keys in query strings and paths (Zapier, Smithery).
    let cursor = r#"{
      "mcpServers": {
        "example": { "url": "https://mcp.example.com/mcp?api_key=sk-live-abc123" },
        "tok": { "url": "https://mcp.example.com/mcp?region=eu&token=tok_9f8e7d" },
        "key": { "url": "https://mcp.example.com/mcp?key=k3y-v4lue" },
        "access": { "url": "https://mcp.example.com/mcp?access_token=at-5551212#x" },
        "auth": { "type": "http", "url": "https://mcp.example.com/mcp?auth=auth-abc-999" },
        "apikey": { "url": "https://mcp.example.com/mcp?apikey=apik-777" },
        "opaque": { "url": "https://mcp.example.com/mcp?workspace=3f2a9c1e8b7d4e6fa1b2c3d4e5f60718" },
        "zapier": { "url": "https://mcp.zapier.com/api/mcp/s/sk-ak-Zt9QwErTy/sse" },
        "smithery": { "url": "https://server.smithery.ai/@acme/tools/mcp/7c9e6679-7425-40de-944b-e07fc1f90ae7" },
        "gh-user": { "url": "https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@mcp.example.com/mcp" },
        "plain": { "url": "https://mcp.example.com/mcp?region=eu&format=json" },
        "smithery-plain": { "url": "https://server.smithery.ai/@smithery-ai/github/mcp" }
      }
    }"#;
    let out = import(cursor, "mcp.json").unwrap();
    assert_no_secret(&out);
    assert_eq!(out.servers, 2, "only the servers without credentials are imported:\n{}", out.toml);
    for name in ["example", "tok", "key", "access", "auth", "apikey", "opaque", "zapier", "smithery", "gh-user"] {
        assert!(
            out.warnings.iter().any(|w| w.starts_with(&format!("server '{name}':")) && w.contains("credential") && w.contains("skipped")),
            "{name}: {:?}",
            out.warnings
        );
    }
    assert!(out.warnings.iter().any(|w| w.contains("query parameter api_key")), "the note says where: {:?}", out.warnings);
    assert!(out.toml.contains("url = \"https://mcp.example.com/mcp?region=eu&format=json\""), "{}", out.toml);
    assert!(out.toml.contains("url = \"https://server.smithery.ai/@smithery-ai/github/mcp\""), "{}", out.toml);
    load(&out, &|_| "x".into());
    // A file whose every server carries one: the error names no secret either.
    let err = import(r#"{"mcpServers": {"z": {"url": "https://mcp.zapier.com/api/mcp/s/sk-ak-Zt9QwErTy/mcp"}}}"#, "f.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("credential") && !err.contains("sk-ak-Zt9QwErTy"), "{err}");
}

#[test]
fn secret_urls_in_stdio_arguments_come_from_the_environment() {
    // Claude Desktop bridging remote servers through mcp-remote and similar launchers.
    let claude = r#"{
      "mcpServers": {
        "remote": { "command": "npx", "args": ["-y", "mcp-remote", "https://mcp.example.com/mcp?api_key=sk-live-abc123"] },
        "flag-eq": { "command": "uvx", "args": ["mcp-proxy", "--url=https://mcp.example.com/mcp?region=eu&token=tok_9f8e7d"] },
        "flag-sep": { "command": "npx", "args": ["-y", "mcp-remote", "--url", "https://mcp.zapier.com/api/mcp/s/sk-ak-Zt9QwErTy/mcp"] },
        "pg": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres", "postgresql://app:hunter2@db:5432/app"] }
      }
    }"#;
    let out = import(claude, "claude_desktop_config.json").unwrap();
    assert_no_secret(&out);
    assert_eq!(out.servers, 4, "{:?}", out.warnings);
    assert!(out.variables.iter().any(|(v, o)| v == "REMOTE_API_KEY" && o.contains("argument 3")), "{:?}", out.variables);
    assert!(
        out.warnings.iter().any(|w| w.contains("'remote'") && w.contains("REMOTE_API_KEY")),
        "the note names the variable: {:?}",
        out.warnings
    );
    let values = |v: &str| {
        match v {
            "REMOTE_API_KEY" => "sk-live-abc123",
            "FLAG_EQ_TOKEN" => "tok_9f8e7d",
            "FLAG_SEP_SECRET" => "sk-ak-Zt9QwErTy",
            "PG_PASSWORD" => "hunter2",
            other => panic!("unexpected variable {other}"),
        }
        .to_string()
    };
    let cfg = load(&out, &values);
    assert_eq!(child_argv(&cfg, "remote"), ["npx", "-y", "mcp-remote", "https://mcp.example.com/mcp?api_key=sk-live-abc123"]);
    assert_eq!(child_argv(&cfg, "flag-eq"), ["uvx", "mcp-proxy", "--url=https://mcp.example.com/mcp?region=eu&token=tok_9f8e7d"]);
    assert_eq!(child_argv(&cfg, "flag-sep"), ["npx", "-y", "mcp-remote", "--url", "https://mcp.zapier.com/api/mcp/s/sk-ak-Zt9QwErTy/mcp"]);
    assert_eq!(child_argv(&cfg, "pg"), ["npx", "-y", "@modelcontextprotocol/server-postgres", "postgresql://app:hunter2@db:5432/app"]);
}

#[test]
fn secret_key_value_and_flag_arguments_come_from_the_environment() {
    // VS Code's .vscode/mcp.json (`servers`), Docker and CLI-flag styles.
    let vscode = r#"{
      "servers": {
        "kv": { "type": "stdio", "command": "my-server", "args": ["API_KEY=abc-def-secret", "MODE=fast"] },
        "flags": { "type": "stdio", "command": "my-server", "args": ["--api-key=q9w8e7r6", "--token", "glpat-Xx11Yy22Zz33", "--port=8080"] },
        "hdr": { "type": "stdio", "command": "npx", "args": ["mcp-remote", "https://mcp.example.com/mcp", "--header=Authorization: Bearer S3cr3tBearer"] },
        "hdr2": { "type": "stdio", "command": "npx", "args": ["mcp-remote", "https://mcp.example.com/mcp", "--header", "X-Api-Key: YWJj"] },
        "docker": { "type": "stdio", "command": "docker", "args": ["run", "-i", "--rm", "-e", "SLACK_BOT_TOKEN=xoxb-123-456-abc", "-e", "SLACK_TEAM_ID", "mcp/slack"] },
        "ref": { "type": "stdio", "command": "npx", "args": ["mcp-remote", "https://mcp.example.com/mcp", "--header", "Authorization:${AUTH_HEADER}"], "env": { "AUTH_HEADER": "Bearer S3cr3tBearer" } }
      }
    }"#;
    let out = import(vscode, ".vscode/mcp.json").unwrap();
    assert_no_secret(&out);
    assert_eq!(out.servers, 6, "{:?}", out.warnings);
    let values = |v: &str| {
        match v {
            "KV_API_KEY" => "abc-def-secret",
            "FLAGS_API_KEY" => "q9w8e7r6",
            "FLAGS_TOKEN" => "glpat-Xx11Yy22Zz33",
            "HDR_AUTHORIZATION" => "S3cr3tBearer",
            "HDR2_X_API_KEY" => "YWJj",
            "DOCKER_SLACK_BOT_TOKEN" => "xoxb-123-456-abc",
            "AUTH_HEADER" => "Bearer S3cr3tBearer",
            other => panic!("unexpected variable {other}"),
        }
        .to_string()
    };
    let cfg = load(&out, &values);
    assert_eq!(child_argv(&cfg, "kv"), ["my-server", "API_KEY=abc-def-secret", "MODE=fast"]);
    assert_eq!(child_argv(&cfg, "flags"), ["my-server", "--api-key=q9w8e7r6", "--token", "glpat-Xx11Yy22Zz33", "--port=8080"]);
    assert_eq!(
        child_argv(&cfg, "hdr"),
        ["npx", "mcp-remote", "https://mcp.example.com/mcp", "--header=Authorization: Bearer S3cr3tBearer"]
    );
    assert_eq!(child_argv(&cfg, "hdr2"), ["npx", "mcp-remote", "https://mcp.example.com/mcp", "--header", "X-Api-Key: YWJj"]);
    assert_eq!(
        child_argv(&cfg, "docker"),
        ["docker", "run", "-i", "--rm", "-e", "SLACK_BOT_TOKEN=xoxb-123-456-abc", "-e", "SLACK_TEAM_ID", "mcp/slack"]
    );
    // mcp-remote expands `${AUTH_HEADER}` itself: the argument is a reference, kept as written.
    assert_eq!(child_argv(&cfg, "ref"), ["npx", "mcp-remote", "https://mcp.example.com/mcp", "--header", "Authorization:${AUTH_HEADER}"]);
}

#[test]
fn short_values_under_secret_names_are_secrets() {
    let claude = r#"{"mcpServers": {"github": {
      "command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_TOKEN": "YWJj", "MCP_URL": "https://mcp.example.com/mcp?token=tok_9f8e7d", "LOG_LEVEL": "info" }
    }}}"#;
    let out = import(claude, "claude_desktop_config.json").unwrap();
    assert_no_secret(&out);
    assert!(out.toml.contains("GITHUB_TOKEN = { env = \"GITHUB_TOKEN\" }"), "{}", out.toml);
    assert!(out.toml.contains("MCP_URL = { env = \"MCP_URL\" }"), "a URL with a key in it is a secret:\n{}", out.toml);
    assert!(out.toml.contains("LOG_LEVEL = \"info\""), "{}", out.toml);
}

#[test]
fn ordinary_arguments_and_urls_are_kept_as_written() {
    let claude = r#"{"mcpServers": {
      "fs": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/user/docs", "C:\\Users\\me\\Documents"] },
      "remote": { "command": "npx", "args": ["-y", "mcp-remote@0.1.29", "https://mcp.example.com/mcp", "--port=8080", "--transport=http-first"] },
      "gh": { "command": "docker", "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"] },
      "py": { "command": "uvx", "args": ["--from", "git+https://github.com/acme/mcp-tools@v1.2.3", "mcp-tools", "--model=claude-3-5-sonnet-20241022", "--no-auth", "--port", "3000", "LOG_LEVEL=debug", "--date=2024-11-05"] },
      "smithery": { "command": "npx", "args": ["-y", "@smithery/cli@latest", "run", "@smithery-ai/github", "--config", "{\"debug\":true}"] },
      "http": { "url": "https://mcp.example.com/mcp" }
    }}"#;
    let out = import(claude, "claude_desktop_config.json").unwrap();
    assert!(out.variables.is_empty(), "nothing here is a secret: {:?}", out.variables);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(!out.toml.contains("\"sh\", \"-c\""), "{}", out.toml);
    let cfg = load(&out, &|_| String::new());
    assert_eq!(
        child_argv(&cfg, "fs"),
        ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/user/docs", "C:\\Users\\me\\Documents"]
    );
    assert_eq!(
        child_argv(&cfg, "remote"),
        ["npx", "-y", "mcp-remote@0.1.29", "https://mcp.example.com/mcp", "--port=8080", "--transport=http-first"]
    );
    assert_eq!(child_argv(&cfg, "py")[4], "--model=claude-3-5-sonnet-20241022");
    assert!(out.toml.contains("url = \"https://mcp.example.com/mcp\""), "{}", out.toml);
}

#[test]
fn imported_command_servers_run_in_a_sandbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().display().to_string();
    let json = format!(
        r#"{{"mcpServers": {{
            "files": {{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "{root}"]}},
            "local": {{"command": "/opt/tools/server", "args": ["--verbose"]}},
            "boxed": {{"command": "docker", "args": ["run", "-i", "--rm", "mcp/time"]}}
        }}}}"#
    );
    let t = import(&json, "claude_desktop_config.json").expect("imported").toml;
    let files = t.split("[[upstream]]").find(|s| s.contains("\"files\"")).expect("files");
    assert!(files.contains("[upstream.sandbox]\nnetwork = \"open\""), "a package runner downloads: {files}");
    assert!(files.contains(&format!("write = [\"{root}\"]")), "its root is writable: {files}");
    let local = t.split("[[upstream]]").find(|s| s.contains("\"local\"")).expect("local");
    assert!(local.contains("[upstream.sandbox]") && !local.contains("network"), "no network by default: {local}");
    let boxed = t.split("[[upstream]]").find(|s| s.contains("\"boxed\"")).expect("boxed");
    assert!(!boxed.contains("[upstream.sandbox]"), "the container runtime isolates it: {boxed}");
    mcpgate_config::Config::parse(&t, std::path::Path::new("/tmp/imported/gateway.toml"), None, &|_| Some("x".into())).expect("loads");
}
