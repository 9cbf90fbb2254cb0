//! The assertion grants: a token got by presenting a JWT instead of a secret or a consent.
//! Workload identity (SEP-1933) presents the gateway's own workload JWT with the RFC 7523
//! JWT-bearer grant. Enterprise-managed authorization (SEP-990) first exchanges an identity
//! assertion (an ID token of the enterprise identity provider) at that provider for an Identity
//! Assertion JWT Authorization Grant (ID-JAG, RFC 8693 token exchange, `audience` the upstream's
//! authorization server, `resource` the upstream), then presents the ID-JAG with the same grant.
//! This module builds those requests and checks what comes back; where the assertion comes from
//! (a rotating file, a caller's token) is its callers' business.

use super::client::{ClientAuth, IdentityError, OAuthHttp};

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

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
mod tests {
    use super::*;
    use crate::identity::guard::Rules;
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
