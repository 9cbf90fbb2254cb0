//! The assertion grants: a token got by presenting a JWT instead of a secret or a consent.
//! Workload identity (SEP-1933) presents the gateway's own workload JWT with the RFC 7523
//! JWT-bearer grant. Enterprise-managed authorization (SEP-990) first exchanges an identity
//! assertion (an ID token of the enterprise identity provider) at that provider for an Identity
//! Assertion JWT Authorization Grant (ID-JAG, RFC 8693 token exchange, `audience` the upstream's
//! authorization server, `resource` the upstream), then presents the ID-JAG with the same grant.
//! This module builds those requests and checks what comes back; where the assertion comes from
//! (a rotating file, a caller's token) is its callers' business. An assertion goes only where its
//! audience says ([`check_audience`]): before the gateway presents a JWT it holds (its workload
//! JWT, an ID-JAG) at a token endpoint, the JWT's `aud` must name that authorization server, so
//! a server an upstream's metadata points at never receives an assertion meant for another.

use super::client::{ClientAuth, IdentityError, OAuthHttp};

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

/// Why the audiences of an assertion cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum AudienceError {
    #[error("the assertion is not a JWT (three base64url parts)")]
    NotAJwt,
    #[error("the assertion's claims are not base64url")]
    NotBase64,
    #[error("the assertion's claims are not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("the assertion's aud holds a value that is not a string")]
    NotAString,
    #[error("the assertion names no audience (aud)")]
    None,
}

/// The audiences a JWT names (its `aud` claim: one string or a list of strings), read without
/// verifying it (the gateway is not its audience, only its bearer).
pub fn audiences(jwt: &str) -> Result<Vec<String>, AudienceError> {
    let mut parts = jwt.split('.');
    let (Some(_), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(AudienceError::NotAJwt);
    };
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload.trim_end_matches('='))
        .map_err(|_| AudienceError::NotBase64)?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).map_err(AudienceError::NotJson)?;
    match claims.get("aud") {
        Some(serde_json::Value::String(a)) => Ok(vec![a.clone()]),
        Some(serde_json::Value::Array(list)) if !list.is_empty() => {
            list.iter().map(|a| a.as_str().map(str::to_string).ok_or(AudienceError::NotAString)).collect()
        }
        _ => Err(AudienceError::None),
    }
}

/// Whether `aud` names the authorization server whose issuer is `issuer` (when known) and whose
/// token endpoint is `token_endpoint`: the issuer or the token endpoint exactly (RFC 7523 §3; no
/// normalisation, as for `iss`), or, when the issuer is not known (a configured `token_url`), a
/// URL the token endpoint lies under (same scheme, host and port, and the token endpoint's path
/// continues the audience's at a `/`), as an issuer is.
fn names(aud: &str, issuer: Option<&str>, token_endpoint: &str) -> bool {
    if Some(aud) == issuer || aud == token_endpoint {
        return true;
    }
    if issuer.is_some() {
        return false;
    }
    let (Ok(a), Ok(t)) = (aud.parse::<http::Uri>(), token_endpoint.parse::<http::Uri>()) else { return false };
    let origin = |u: &http::Uri| (u.scheme_str().map(str::to_ascii_lowercase), u.authority().map(|x| x.as_str().to_ascii_lowercase()));
    let prefix = a.path().trim_end_matches('/');
    a.query().is_none()
        && origin(&a) == origin(&t)
        && a.scheme_str().is_some()
        && t.path().strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Refuses to present `assertion` (`what` it is, for the message) at `token_endpoint` of the
/// authorization server `issuer` unless its audience names that server (see [`names`]).
pub fn check_audience(what: &str, assertion: &str, issuer: Option<&str>, token_endpoint: &str) -> Result<(), IdentityError> {
    let auds = audiences(assertion).map_err(|why| IdentityError::Audience(format!("{why}: the {what} is not sent to {token_endpoint}")))?;
    if auds.iter().any(|a| names(a, issuer, token_endpoint)) {
        return Ok(());
    }
    let server = issuer.map_or_else(|| token_endpoint.to_string(), |i| format!("{i} (token endpoint {token_endpoint})"));
    Err(IdentityError::Audience(format!(
        "the {what} is meant for {} (aud), not for the authorization server {server}: not sent",
        auds.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ")
    )))
}

/// The body of a JWT-bearer token request (RFC 7523 §2.1), before client authentication.
pub fn jwt_bearer_body(assertion: &str, scope: Option<&str>, resource: Option<&str>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("grant_type", JWT_BEARER);
    q.append_pair("assertion", assertion);
    if let Some(scope) = scope {
        q.append_pair("scope", scope);
    }
    if let Some(resource) = resource {
        q.append_pair("resource", resource);
    }
    q.finish()
}

/// The body of the token exchange that turns an identity assertion into an ID-JAG for the
/// authorization server `audience` (its issuer) and the protected resource `resource`.
pub fn id_jag_request_body(id_token: &str, audience: &str, resource: &str, scope: Option<&str>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("grant_type", TOKEN_EXCHANGE);
    q.append_pair("requested_token_type", ID_JAG);
    q.append_pair("audience", audience);
    q.append_pair("resource", resource);
    if let Some(scope) = scope {
        q.append_pair("scope", scope);
    }
    q.append_pair("subject_token", id_token);
    q.append_pair("subject_token_type", ID_TOKEN);
    q.finish()
}

/// An ID-JAG from the identity provider's token endpoint `idp_token_url`; the answer must say it
/// issued one (`issued_token_type`), so an access token is never presented as a grant.
pub async fn id_jag(
    http: &OAuthHttp,
    idp_token_url: &str,
    idp: &ClientAuth,
    id_token: &str,
    audience: &str,
    resource: &str,
    scope: Option<&str>,
) -> Result<String, IdentityError> {
    let body = id_jag_request_body(id_token, audience, resource, scope);
    let t = http.token_at(idp_token_url, idp, body, None).await?;
    if t.issued_token_type.as_deref() != Some(ID_JAG) {
        return Err(IdentityError::Fetch {
            url: idp_token_url.into(),
            reason: format!(
                "the identity provider issued {:?}, not an ID-JAG",
                t.issued_token_type.as_deref().unwrap_or("an unnamed token")
            ),
        });
    }
    Ok(t.access_token)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::identity::reach::Rules;
    use crate::identity::testserver::server;

    fn form(body: &str) -> std::collections::BTreeMap<String, String> {
        form_urlencoded::parse(body.as_bytes()).into_owned().collect()
    }

    #[test]
    fn the_requests_carry_what_the_grants_need() {
        let b = form(&jwt_bearer_body("a.b.c", Some("read"), Some("https://mcp.example.com/mcp")));
        assert_eq!(b["grant_type"], JWT_BEARER);
        assert_eq!((b["assertion"].as_str(), b["scope"].as_str()), ("a.b.c", "read"));
        assert!(!form(&jwt_bearer_body("a.b.c", None, None)).contains_key("scope"));
        let x = form(&id_jag_request_body("id.tok.en", "https://as.example.com", "https://mcp.example.com/mcp", None));
        assert_eq!(x["grant_type"], TOKEN_EXCHANGE);
        assert_eq!(x["requested_token_type"], ID_JAG);
        assert_eq!(x["subject_token_type"], ID_TOKEN);
        assert_eq!((x["audience"].as_str(), x["resource"].as_str()), ("https://as.example.com", "https://mcp.example.com/mcp"));
    }

    /// A JWT with these claims (unsigned: only its audience is read).
    pub(crate) fn jwt(claims: serde_json::Value) -> String {
        let b64 = |v: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v);
        format!("{}.{}.sig", b64(br#"{"alg":"ES256","typ":"JWT"}"#), b64(claims.to_string().as_bytes()))
    }

    #[test]
    fn an_assertion_goes_only_to_the_server_its_audience_names() {
        let honest = "https://honest-as.example.com";
        let token = "https://honest-as.example.com/oauth/token";
        let to = |aud: serde_json::Value, issuer: Option<&str>, endpoint: &str| {
            check_audience("workload assertion", &jwt(serde_json::json!({ "aud": aud, "sub": "w" })), issuer, endpoint)
        };
        // Discovered: the issuer or the token endpoint, exactly; a list names any of its items.
        assert!(to(honest.into(), Some(honest), token).is_ok());
        assert!(to(token.into(), Some(honest), token).is_ok());
        assert!(to(serde_json::json!(["https://other", honest]), Some(honest), token).is_ok());
        let hostile = to(honest.into(), Some("https://hostile-as.example"), "https://hostile-as.example/token");
        let why = hostile.expect_err("a hostile server").to_string();
        assert!(why.contains("honest-as.example.com") && why.contains("hostile-as.example") && why.contains("not sent"), "{why}");
        assert!(to(format!("{honest}/").into(), Some(honest), token).is_err(), "no normalisation");
        assert!(to("https://honest-as.example.com.evil".into(), Some(honest), token).is_err());
        // Configured token URL, issuer unknown: the token URL, or a URL it lies under.
        assert!(to(token.into(), None, token).is_ok());
        assert!(to(honest.into(), None, token).is_ok());
        assert!(to("https://honest-as.example.com/oauth".into(), None, token).is_ok());
        assert!(to("https://honest-as.example.com/oa".into(), None, token).is_err(), "at a / only");
        assert!(to("http://honest-as.example.com".into(), None, token).is_err(), "another scheme");
        assert!(to("https://honest-as.example.com:8443".into(), None, token).is_err(), "another port");
        // What names no audience, or is no JWT, is not sent.
        assert!(check_audience("workload assertion", &jwt(serde_json::json!({ "sub": "w" })), Some(honest), token).is_err());
        assert!(to(serde_json::json!([1]), Some(honest), token).is_err());
        assert!(check_audience("workload assertion", "not-a-jwt", Some(honest), token).is_err());
    }

    #[tokio::test]
    async fn only_an_id_jag_is_taken_from_the_identity_provider() {
        let (base, seen) = server(|_| {
            vec![
                (
                    "/jag",
                    200,
                    vec![],
                    r#"{"access_token":"j.w.t","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A"}"#.into(),
                ),
                (
                    "/access",
                    200,
                    vec![],
                    r#"{"access_token":"a-t","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer"}"#
                        .into(),
                ),
            ]
        })
        .await;
        let http = OAuthHttp::new(Rules { loopback: true });
        let idp = ClientAuth::Basic { client_id: "gw".into(), secret: "s".into() };
        let got = id_jag(&http, &format!("{base}/jag"), &idp, "id.tok.en", "https://as", "https://mcp/mcp", None).await;
        assert_eq!(got.as_deref(), Ok("j.w.t"));
        let wrong = id_jag(&http, &format!("{base}/access"), &idp, "id.tok.en", "https://as", "https://mcp/mcp", None).await;
        assert!(wrong.is_err(), "an access token is not a grant");
        let first = seen.lock().unwrap()[0].clone();
        assert!(first.contains("subject_token=id.tok.en") && first.to_ascii_lowercase().contains("authorization: basic"), "{first}");
    }
}
