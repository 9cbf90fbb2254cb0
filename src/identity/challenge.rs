//! Reading an upstream's `WWW-Authenticate` header (RFC 9110 §11.6.1, RFC 6750 §3): the `Bearer`
//! (or, for DPoP-bound tokens, `DPoP`) challenge's parameters the MCP authorization spec uses, `resource_metadata` (RFC 9728 §5.1),
//! `scope` and `error` (`invalid_token`, `insufficient_scope`). The header may hold several
//! challenges, each with `token68` or `auth-param`s whose values are tokens or quoted strings.

use std::collections::BTreeMap;

/// The `Bearer` challenge of a 401 or 403.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    /// The scopes the upstream asks for, in its order, without repeats.
    pub scopes: Vec<String>,
    pub error: Option<String>,
    /// The upstream offered the `DPoP` scheme (RFC 9449 §7.1): it takes DPoP-bound tokens.
    pub dpop: bool,
}

impl Challenge {
    /// Whether the upstream says the token lacks scope (a step-up is due).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The `Bearer` challenge among the header values, if any (the scheme is case-insensitive; a
/// parameter named twice keeps its first value).
pub fn bearer<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    let all: Vec<(String, BTreeMap<String, String>)> = values.into_iter().flat_map(challenges).collect();
    // A server of DPoP-bound tokens challenges with `DPoP` (RFC 9449 §7.1), the same parameters.
    let found = all
        .iter()
        .find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .or_else(|| all.iter().find(|(scheme, _)| scheme.eq_ignore_ascii_case("dpop")))
        .cloned();
    let dpop = all.iter().any(|(scheme, _)| scheme.eq_ignore_ascii_case("dpop"));
    found.map(|(_, params)| {
        let mut scopes: Vec<String> = Vec::new();
        for s in params.get("scope").map(String::as_str).unwrap_or("").split_ascii_whitespace() {
            if !scopes.iter().any(|x| x == s) {
                scopes.push(s.to_string());
            }
        }
        Challenge { resource_metadata: params.get("resource_metadata").cloned(), scopes, error: params.get("error").cloned(), dpop }
    })
}

/// Whether a `DPoP` challenge among the header values asks for a proof with the server's nonce
/// (`error="use_dpop_nonce"`, RFC 9449 §9).
pub fn dpop_nonce_asked<'a>(values: impl IntoIterator<Item = &'a str>) -> bool {
    values
        .into_iter()
        .flat_map(challenges)
        .any(|(scheme, params)| scheme.eq_ignore_ascii_case("dpop") && params.get("error").is_some_and(|e| e == "use_dpop_nonce"))
}

/// Every challenge of one header value: its scheme and its parameters (names lower-cased).
fn challenges(value: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let mut p = Parser { s: value.as_bytes(), i: 0 };
    loop {
        p.skip_separators();
        let Some(word) = p.token() else { break };
        p.skip_spaces();
        // `name=` continues the current challenge's parameters; a bare word starts a challenge.
        if p.peek() == Some(b'=') && !out.is_empty() && !p.is_token68_tail() {
            p.i += 1;
            p.skip_spaces();
            let value = p.value();
            if let Some((_, params)) = out.last_mut() {
                params.entry(word.to_ascii_lowercase()).or_insert(value);
            }
            continue;
        }
        out.push((word, BTreeMap::new()));
        // A token68 right after the scheme (`Basic abc==`) is skipped.
        let save = p.i;
        if let Some(_t68) = p.token() {
            p.skip_spaces();
            if p.peek() == Some(b'=') && !p.is_token68_tail() {
                p.i = save;
            } else {
                while p.peek() == Some(b'=') {
                    p.i += 1;
                }
            }
        }
    }
    out
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.i += 1;
        }
    }

    /// Whether the `=` at the cursor ends a token68 (`==`, or `=` followed by a separator or the
    /// end) rather than starting a parameter value.
    fn is_token68_tail(&self) -> bool {
        let mut j = self.i;
        while self.s.get(j) == Some(&b'=') {
            j += 1;
        }
        j - self.i > 1 || matches!(self.s.get(j), None | Some(b',' | b' ' | b'\t'))
    }

    /// An RFC 9110 token (also covers the token68 characters it is used for here).
    fn token(&mut self) -> Option<String> {
        let start = self.i;
        while let Some(c) = self.peek() {
            let tchar = c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/".contains(&c);
            if !tchar {
                break;
            }
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// A parameter value: a quoted string (with `\` escapes) or a token.
    fn value(&mut self) -> String {
        if self.peek() != Some(b'"') {
            return self.token().unwrap_or_default();
        }
        self.i += 1;
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    if let Some(n) = self.peek() {
                        out.push(n);
                        self.i += 1;
                    }
                }
                _ => out.push(c),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_dpop_challenge_and_its_nonce_request() {
        let v = [r#"DPoP error="use_dpop_nonce", resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp""#];
        assert!(dpop_nonce_asked(v));
        assert!(bearer(v).is_some_and(|c| c.dpop) && !bearer([r#"Bearer scope="a""#]).is_some_and(|c| c.dpop));
        assert_eq!(
            bearer(v).and_then(|c| c.resource_metadata).as_deref(),
            Some("https://rs.example/.well-known/oauth-protected-resource/mcp")
        );
        assert!(!dpop_nonce_asked([r#"Bearer error="use_dpop_nonce""#, r#"DPoP error="invalid_token""#]));
        // Where both are offered, the Bearer challenge is the one read.
        assert_eq!(bearer([r#"DPoP scope="a", Bearer scope="b""#]).map(|c| c.scopes), Some(vec!["b".to_string()]));
    }

    #[test]
    fn reads_the_bearer_challenge_of_the_mcp_spec() {
        let c = bearer([
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write""#,
        ])
        .expect("a challenge");
        assert_eq!(c.resource_metadata.as_deref(), Some("https://mcp.example.com/.well-known/oauth-protected-resource"));
        assert_eq!(c.scopes, ["files:read", "files:write"]);
        assert!(!c.insufficient_scope());
        let c = bearer([r#"Bearer error="insufficient_scope", scope="a b a", error_description="need \"b\"""#]).expect("challenge");
        assert!(c.insufficient_scope());
        assert_eq!(c.scopes, ["a", "b"]);
    }

    #[test]
    fn finds_bearer_among_other_challenges_and_values() {
        let c = bearer(["Basic realm=\"x\", Bearer realm=\"y\", error=invalid_token", "Negotiate abc=="]).expect("challenge");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        let c = bearer(["Negotiate YII==", "bearer scope=read"]).expect("challenge");
        assert_eq!(c.scopes, ["read"]);
        assert_eq!(bearer(["Basic realm=\"x\""]), None);
        assert_eq!(bearer([""]), None);
        let c = bearer(["Bearer"]).expect("a bare challenge");
        assert_eq!(c, Challenge::default());
    }

    #[test]
    fn hostile_headers_do_not_break_it() {
        for h in ["Bearer scope=\"unterminated", "Bearer ===", "Bearer ,,, = ,", "\"", "Bearer scope=\"a\\", "Bearer a=b=c"] {
            let _ = bearer([h]);
        }
        let c = bearer(["Bearer scope=\"unterminated"]).expect("challenge");
        assert_eq!(c.scopes, ["unterminated"]);
    }
}
