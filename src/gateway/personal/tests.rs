//! The caller's token for a per-user upstream: which JWT a token exchange uses.

use super::*;
use crate::identity::{client::OAuthHttp, reach::Rules, service, vault::Vault};
use mcpgate_model::token::{KeySource, Sealer};

fn caller_token() -> CallerToken {
    let sealer = Arc::new(Sealer::from_keys(&[vec![9u8; 32]], KeySource::File).expect("key"));
    let settings = service::Settings {
        redirect_uri: "https://gw.example.com/oauth/callback".into(),
        client_metadata_url: "https://gw.example.com/oauth/client.json".into(),
        client_metadata_usable: true,
        consent_url: "https://gw.example.com/oauth/connect".into(),
        sign_in: None,
    };
    let identity = Identity::new(settings, sealer.clone(), Vault::in_memory(sealer), OAuthHttp::new(Rules::default()), Vec::new());
    CallerToken { identity: Arc::new(identity), caller: "alice".into(), upstream: "files".into(), exchange: Some(Weak::new()) }
}

#[tokio::test]
async fn a_token_exchange_uses_the_requests_own_jwt() {
    let t = caller_token();
    let gw = Weak::new();
    // Within a request: its own token, whatever the caller presented last elsewhere.
    let own = crate::auth::SubjectToken(Arc::from("jwt-of-this-request"));
    let chosen = REQUEST_SUBJECT.scope(own, async { t.subject(&gw) }).await;
    assert_eq!(chosen.as_deref(), Some("jwt-of-this-request"));
    // Outside any request (a probe, a list refresh): the latest valid one, here none.
    assert_eq!(t.subject(&gw), None);
}
