//! The grants `[upstream.oauth]` can get the gateway's own token with: client credentials, the
//! JWT-bearer grant with a workload JWT, or an identity assertion exchanged for an ID-JAG; and
//! where their assertions are read.

use std::path::PathBuf;

/// The grant `[upstream.oauth]` asks the upstream's authorization server for a token with.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum OAuthGrant {
    /// RFC 6749 §4.4 client credentials.
    #[default]
    ClientCredentials,
    /// RFC 7523 §2.1 JWT bearer with the gateway's workload JWT as the assertion (workload
    /// identity federation).
    JwtBearer { assertion: Assertion },
    /// Enterprise-managed authorization: the identity assertion (an ID token) is exchanged at the
    /// enterprise identity provider for an ID-JAG (RFC 8693), which is the JWT-bearer assertion.
    IdJag { assertion: Assertion, idp: IdpClient },
}

/// Where an assertion is read: a file read again at each token request (it rotates: a
/// Kubernetes projected service-account token), or a value from the environment.
#[derive(Clone, PartialEq)]
pub enum Assertion {
    File(PathBuf),
    Value(String),
}

impl std::fmt::Debug for Assertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Assertion::File(p) => write!(f, "File({})", p.display()),
            Assertion::Value(_) => f.write_str("Value(<assertion>)"),
        }
    }
}

/// The gateway as a client of the enterprise identity provider's token endpoint.
#[derive(Clone, PartialEq)]
pub struct IdpClient {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for IdpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdpClient").field("token_url", &self.token_url).field("client_id", &self.client_id).finish_non_exhaustive()
    }
}
