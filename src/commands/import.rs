//! `mcpgate import`: turns the MCP server lists that desktop clients keep (`mcpServers` in Claude
//! Desktop, Claude Code's `.mcp.json` and Cursor; `servers` in VS Code's `mcp.json`, or `mcp.servers`
//! in its settings) into an equivalent `gateway.toml`. stdio servers keep their command, args and
//! environment; HTTP servers keep their URL and headers. Secrets are never copied: every header,
//! and every environment value or argument that is a credential (see [`secrets`] for what is),
//! becomes a reference to an environment variable, listed at the top of the output so the user
//! knows what to export. A stdio command with a secret in an argument runs through `sh -c`, which
//! takes the secret part from the environment; an HTTP server whose URL carries one is skipped,
//! since a URL cannot come from the environment. The servers a domain's AI Catalog or a registry
//! publishes are imported the same way ([`discover`]: fetching and asking; [`remote`]: one
//! card's remote as an upstream).

mod discover;
mod remote;
mod secrets;

pub use discover::{DiscoverError, discover, registry};
pub use remote::{plain, shown};
use secrets::Found;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The generated file, and what the user must do before running it.
#[derive(Debug, Default)]
pub struct Imported {
    pub toml: String,
    /// Environment variables the file refers to, each with where its value was found.
    pub variables: Vec<(String, String)>,
    /// Things that could not be carried over exactly.
    pub warnings: Vec<String>,
    pub servers: usize,
}

struct Server {
    id: String,
    original: String,
    body: String,
}

/// Why a client configuration could not be imported at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{source_name}: not JSON: {error}")]
    NotJson { source_name: String, error: serde_json::Error },
    #[error("{0}: no MCP servers found: expected an object under \"mcpServers\" (Claude, Cursor) or \"servers\" (VS Code)")]
    NoServers(String),
    /// Every server was skipped; `why` lists the warnings.
    #[error("{source_name}: none of its servers could be imported: {why}")]
    NoneImported { source_name: String, why: String },
}

/// Why one server of the configuration is skipped (a warning names it).
#[derive(Debug, thiserror::Error)]
enum Skipped {
    #[error(
        "its URL carries credentials ({0}) and gateway.toml takes a URL only as written, never from the \
         environment, so importing it would copy them. If the server also accepts them in a header, add it by hand: \
         its url without them, the header as {{ env = \"VAR\" }}"
    )]
    CredentialsInUrl(String),
    #[error("neither a command nor a url")]
    NeitherCommandNorUrl,
}

/// Converts client configuration JSON (`source` names it in comments) into `gateway.toml` text.
pub fn import(json_text: &str, source: &str) -> Result<Imported, ImportError> {
    let root: Value = serde_json::from_str(json_text).map_err(|error| ImportError::NotJson { source_name: source.to_string(), error })?;
    let servers = find_servers(&root).ok_or_else(|| ImportError::NoServers(source.to_string()))?;
    let mut out = Imported::default();
    let mut ids = BTreeSet::new();
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut converted = Vec::new();
    for (name, spec) in servers {
        let Some(spec) = spec.as_object() else {
            out.warnings.push(format!("server '{name}': not an object, skipped"));
            continue;
        };
        if spec.get("disabled").and_then(Value::as_bool) == Some(true) || spec.get("enabled").and_then(Value::as_bool) == Some(false) {
            out.warnings.push(format!("server '{name}': disabled in {source}, skipped"));
            continue;
        }
        let id = unique_id(name, &mut ids);
        if id != *name {
            out.warnings.push(format!("server '{name}' is upstream '{id}' (ids use lowercase letters, digits and '-')"));
        }
        let mut ctx = Ctx { id: &id, vars: &mut vars, warnings: &mut out.warnings };
        match convert(&mut ctx, name, spec) {
            Ok(body) => converted.push(Server { id, original: name.clone(), body }),
            Err(e) => out.warnings.push(format!("server '{name}': {e}; skipped")),
        }
    }
    if converted.is_empty() {
        return Err(ImportError::NoneImported { source_name: source.to_string(), why: out.warnings.join("; ") });
    }
    render(&mut out, vars, &converted, source, "");
    Ok(out)
}

/// The file, into `out`: where it came from (`from`), the variables to export (`vars`), the
/// notes, `[server]`, `extra` (sections the upstreams need, such as `[identity]`) and the
/// upstreams. Notes and names become plain comment lines ([`remote::plain`]).
fn render(out: &mut Imported, vars: BTreeMap<String, String>, converted: &[Server], from: &str, extra: &str) {
    out.servers = converted.len();
    out.variables = vars.into_iter().collect();
    let t = &mut out.toml;
    let _ = writeln!(
        t,
        "# gateway.toml imported by `mcpgate import` from {} ({}).",
        remote::plain(from),
        mcpgate_protocol::text::count_of(converted.len(), "server", "servers")
    );
    if !out.variables.is_empty() {
        let _ = writeln!(t, "# Secrets were not copied. Export these environment variables before `mcpgate run`:");
        for (var, origin) in &out.variables {
            let _ = writeln!(t, "#   {var:<32} {}", remote::plain(origin));
        }
    }
    for w in &out.warnings {
        let _ = writeln!(t, "# NOTE: {}", remote::plain(w));
    }
    let _ = writeln!(t, "\n[server]\nlisten = \"127.0.0.1:8811\"\npath = \"/mcp\"");
    t.push_str(extra);
    for s in converted {
        let _ = writeln!(t, "\n# {}", remote::plain(&s.original));
        let _ = writeln!(t, "[[upstream]]\nid = {}", quote(&s.id));
        t.push_str(&s.body);
    }
}

fn find_servers(root: &Value) -> Option<&Map<String, Value>> {
    root.get("mcpServers")
        .or_else(|| root.get("servers"))
        .or_else(|| root.get("mcp").and_then(|m| m.get("servers")))
        .and_then(Value::as_object)
}

struct Ctx<'a> {
    id: &'a str,
    vars: &'a mut BTreeMap<String, String>,
    warnings: &'a mut Vec<String>,
}

impl Ctx<'_> {
    /// The environment variable that will hold a secret value found at `origin`: `wanted` when
    /// free, else prefixed with the upstream id (two servers may hold different values), else
    /// numbered. Names in `avoid` (the server's own environment) are not free either.
    fn fresh(&mut self, wanted: &str, origin: String, avoid: &BTreeSet<String>) -> String {
        let taken = |vars: &BTreeMap<String, String>, n: &str| vars.contains_key(n) || avoid.contains(n);
        let base = env_name(wanted);
        let prefixed = env_name(&format!("{}_", self.id));
        let mut name = if taken(self.vars, &base) && !base.starts_with(&prefixed) { format!("{prefixed}{base}") } else { base };
        let stem = name.clone();
        let mut n = 2;
        while taken(self.vars, &name) {
            name = format!("{stem}_{n}");
            n += 1;
        }
        self.vars.insert(name.clone(), origin);
        name
    }

    /// A variable the client's file already named: the same one wherever it is used.
    fn named(&mut self, var: &str, origin: String) -> String {
        self.vars.entry(var.to_string()).and_modify(|o| *o = format!("{o}; {origin}")).or_insert(origin);
        var.to_string()
    }
}

fn convert(ctx: &mut Ctx, name: &str, spec: &Map<String, Value>) -> Result<String, Skipped> {
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or("");
    let mut body = String::new();
    if let Some(url) = spec.get("url").or_else(|| spec.get("serverUrl")).and_then(Value::as_str) {
        let found = secrets::find("url", url);
        if mcpgate_config::cluster::url_userinfo(url).is_some() || !found.is_empty() {
            let places = if found.is_empty() { "user name".to_string() } else { places(&found) };
            return Err(Skipped::CredentialsInUrl(places));
        }
        if kind == "sse" || url.trim_end_matches('/').ends_with("/sse") {
            ctx.warnings.push(format!(
                "server '{name}' uses the deprecated HTTP+SSE transport, which mcpgate does not speak: point its url at the \
                    server's Streamable HTTP endpoint (often /mcp instead of /sse)"
            ));
        }
        let _ = writeln!(body, "url = {}", quote(url));
        if let Some(headers) = spec.get("headers").and_then(Value::as_object).filter(|h| !h.is_empty()) {
            let _ = writeln!(body, "[upstream.headers]");
            for (h, v) in headers {
                let value = arg_text(v);
                let (prefix, rest) = split_scheme(&value);
                let origin = format!("server '{name}', header {h}");
                let var = match reference(rest) {
                    Some(named) => ctx.named(&named, origin),
                    None => ctx.fresh(&format!("{}_{h}", ctx.id), origin, &BTreeSet::new()),
                };
                match prefix {
                    Some(p) => {
                        let _ = writeln!(body, "{} = {{ env = {}, prefix = {} }}", key(h), quote(&var), quote(p));
                    }
                    None => {
                        let _ = writeln!(body, "{} = {{ env = {} }}", key(h), quote(&var));
                    }
                }
            }
        }
        return Ok(body);
    }
    let Some(command) = spec.get("command").and_then(Value::as_str) else {
        return Err(Skipped::NeitherCommandNorUrl);
    };
    let mut argv = vec![command.to_string()];
    argv.extend(spec.get("args").and_then(Value::as_array).map(|a| a.iter().map(arg_text).collect::<Vec<_>>()).unwrap_or_default());
    let env = spec.get("env").and_then(Value::as_object).cloned().unwrap_or_default();
    // The variables of secret arguments join [upstream.env]: not under a name it already uses.
    let env_names: BTreeSet<String> = env.iter().flat_map(|(k, v)| [Some(k.clone()), reference(&arg_text(v))]).flatten().collect();
    let (command_line, arg_vars) = command_line(ctx, name, &argv, &env_names);
    body.push_str(&command_line);
    if let Some(cwd) = spec.get("cwd").and_then(Value::as_str) {
        let _ = writeln!(body, "cwd = {}", quote(cwd));
    }
    if spec.get("envFile").is_some() {
        ctx.warnings.push(format!("server '{name}': envFile is not imported: list its variables under [upstream.env]"));
    }
    sandbox(&mut body, &argv);
    if !env.is_empty() || !arg_vars.is_empty() {
        let _ = writeln!(body, "[upstream.env]");
        for (k, v) in &env {
            let value = arg_text(v);
            if let Some(var) = reference(&value) {
                let var = ctx.named(&var, format!("server '{name}', env {k}"));
                let _ = writeln!(body, "{} = {{ env = {} }}", key(k), quote(&var));
            } else if !secrets::find(k, &value).is_empty() {
                let var = ctx.fresh(k, format!("server '{name}', env {k}"), &BTreeSet::new());
                let _ = writeln!(body, "{} = {{ env = {} }}", key(k), quote(&var));
            } else {
                let _ = writeln!(body, "{} = {}", key(k), quote(&value));
            }
        }
        for var in &arg_vars {
            let _ = writeln!(body, "{} = {{ env = {} }}", key(var), quote(var));
        }
    }
    Ok(body)
}

/// The `command = [...]` line of a stdio server, as written when no argument carries a secret.
/// Otherwise the command runs through `sh -c`: each secret part of an argument becomes `"${VAR}"`,
/// which the shell expands from the child's environment (where `[upstream.env]` puts VAR, read
/// from the gateway's), and the rest is single-quoted. Returns the line and the variables.
/// An imported server runs in a sandbox (docs/isolation.md): the folders its arguments name are
/// writable (a filesystem server's roots); a package runner (`npx`, `uvx`, …) gets the network,
/// since it downloads the package at start; anything else gets none.
fn sandbox(body: &mut String, argv: &[String]) {
    let program = argv.first().and_then(|p| std::path::Path::new(p).file_name()).and_then(|n| n.to_str()).unwrap_or("");
    // A server the container runtime starts is isolated by it (and needs its socket).
    if matches!(program, "docker" | "podman") {
        return;
    }
    let runner = matches!(program, "npx" | "uvx" | "bunx" | "pnpx" | "pipx" | "uv" | "pnpm" | "yarn" | "deno");
    let folders: Vec<&String> = argv.iter().skip(1).filter(|a| a.starts_with('/') && std::path::Path::new(a.as_str()).is_dir()).collect();
    // The folders of programs and scripts the arguments name: readable even when the command is
    // run through `sh -c` (secret arguments), where the sandbox cannot see them.
    let mut programs: Vec<String> = argv
        .iter()
        .filter(|a| a.starts_with('/') && std::path::Path::new(a.as_str()).is_file())
        .filter_map(|a| std::path::Path::new(a.as_str()).parent().map(|p| p.display().to_string()))
        .collect();
    programs.dedup();
    let _ = writeln!(body, "[upstream.sandbox]");
    if runner {
        let _ = writeln!(body, "network = \"open\"   # the package runner downloads the server at start");
    }
    if !folders.is_empty() {
        let _ = writeln!(body, "write = [{}]", folders.iter().map(|f| quote(f)).collect::<Vec<_>>().join(", "));
    }
    if !programs.is_empty() {
        let _ = writeln!(body, "read = [{}]", programs.iter().map(|f| quote(f)).collect::<Vec<_>>().join(", "));
    }
}

fn command_line(ctx: &mut Ctx, name: &str, argv: &[String], avoid: &BTreeSet<String>) -> (String, Vec<String>) {
    let found = secrets::find_in_args(argv);
    if found.iter().all(Vec::is_empty) {
        return (format!("command = [{}]\n", argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(", ")), Vec::new());
    }
    let mut words = Vec::new();
    let mut vars = Vec::new();
    let mut told = Vec::new();
    for (i, (arg, found)) in argv.iter().zip(&found).enumerate() {
        let at = if i == 0 { "the command".to_string() } else { format!("argument {i}") };
        let mut word = String::new();
        let mut from = 0;
        for f in found {
            // Ranges are in order, apart and on character boundaries (see `secrets::find_in_args`).
            word.push_str(&sh_quote(arg.get(from..f.range.start).unwrap_or(""), false));
            // Named after the upstream and what holds the secret: `REMOTE_API_KEY`, `CALC_TOKEN`.
            let label = if f.name.is_empty() { "SECRET".to_string() } else { env_name(&secrets::words(&f.name).join("_")) };
            let prefix = env_name(&format!("{}_", ctx.id));
            let wanted = if label.starts_with(&prefix) { label } else { format!("{prefix}{label}") };
            let var = ctx.fresh(&wanted, format!("server '{name}', {at} ({})", f.place), avoid);
            let _ = write!(word, "\"${{{var}}}\"");
            told.push(format!("{at} ({}) from {var}", f.place));
            vars.push(var);
            from = f.range.end;
        }
        word.push_str(&sh_quote(arg.get(from..).unwrap_or(""), word.is_empty()));
        words.push(word);
    }
    ctx.warnings.push(format!(
        "server '{name}': secrets in its command line were not copied: it runs through `sh -c`, which takes {} (export them for \
            the gateway; [upstream.env] passes them on)",
        told.join(", ")
    ));
    let script = format!("exec {}", words.join(" "));
    let line = format!(
        "# Runs through sh so that its secret arguments come from the environment.\ncommand = [\"sh\", \"-c\", {}]\n",
        quote(&script)
    );
    (line, vars)
}

/// `s` for a POSIX shell: as is when it holds only characters the shell leaves alone, else
/// single-quoted. An empty `s` is `''` only when it is the whole word (`whole`).
fn sh_quote(s: &str, whole: bool) -> String {
    if s.is_empty() {
        return if whole { "''".into() } else { String::new() };
    }
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Where secrets were found, for a note: `query parameter api_key, URL path`.
fn places(found: &[Found]) -> String {
    let mut places: Vec<&str> = found.iter().map(|f| f.place.as_str()).collect();
    places.dedup();
    places.join(", ")
}

fn arg_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value that already names a variable: `${VAR}`, `${env:VAR}`, or VS Code's `${input:id}`
/// (which becomes a variable named after the input). Not a bare `$VAR`, which no client expands
/// and which may well be a password that starts with `$`.
fn reference(value: &str) -> Option<String> {
    let rest = value.trim();
    let inner = rest.strip_prefix("${").and_then(|r| r.strip_suffix('}'))?;
    let name = inner.strip_prefix("env:").or_else(|| inner.strip_prefix("input:")).unwrap_or(inner);
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')).then(|| env_name(name))
}

/// `Bearer abc` → (Some("Bearer "), "abc").
fn split_scheme(value: &str) -> (Option<&'static str>, &str) {
    for p in ["Bearer ", "bearer ", "Basic ", "token ", "Token "] {
        if let Some(rest) = value.strip_prefix(p) {
            return (Some(p), rest);
        }
    }
    (None, value)
}

/// An environment variable name: uppercase letters, digits and `_`.
fn env_name(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A valid upstream id from a server name, unique among `taken`.
fn unique_id(name: &str, taken: &mut BTreeSet<String>) -> String {
    let mut id = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.ends_with('-') && !id.is_empty() {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-').to_string();
    let base = if id.is_empty() { "server".to_string() } else { id };
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{base}-{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// A TOML basic string (JSON string escapes are valid TOML escapes).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A TOML key: bare when it can be, quoted otherwise.
fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') { k.to_string() } else { quote(k) }
}

#[cfg(test)]
mod tests;
