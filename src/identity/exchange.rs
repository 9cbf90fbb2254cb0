//! One outbound HTTP exchange with a credential (not RFC 8693's token exchange): the request is
//! sent, and what the answer says about the credential and DPoP proof it carried decides whether
//! it is sent again, the same way for every HTTP transport to an upstream and for every request to
//! a token endpoint. A server that asks for a DPoP proof with its nonce (RFC 9449 §8: a token
//! endpoint's `use_dpop_nonce` error, with its `DPoP-Nonce`; §9: a resource's 401 with a `DPoP`
//! challenge naming that error) gets one more attempt with it; a refused credential (a resource's
//! 401 or 403) is handed to the caller's renewal, and sent once more when that renewed it. Each
//! happens at most once per exchange, in that order of precedence; every other answer is final.
//! This module owns those decisions ([`Retries`]) and reading answers for them ([`Verdict`]);
//! building each attempt's request, keeping nonces and renewing credentials stay with the caller.

use std::future::Future;

/// What an answer says about the credential and DPoP proof it was sent with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The server asks for a DPoP proof with its nonce.
    pub nonce_asked: bool,
    /// The nonce the next proof is to carry, where the caller does not keep it itself (a token
    /// endpoint's, from its answer).
    pub nonce: Option<String>,
    /// The credential was refused, and may be renewed.
    pub refused: Option<Refused>,
}

/// A refused credential, as the caller's renewal is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The HTTP status (401 or 403).
    pub status: u16,
    /// The answer's `WWW-Authenticate` values.
    pub challenge: Vec<String>,
    /// Whether the credential refused is a renewed one: the exchange renews once.
    pub retried: bool,
}

impl Verdict {
    /// A resource's answer (an upstream, MCP or REST): a 401 whose `DPoP` challenge names
    /// `use_dpop_nonce` asks for the nonce (which the caller keeps from every answer's
    /// `DPoP-Nonce`), and a 401 or 403 refuses the credential.
    pub fn of_resource(status: u16, headers: &http::HeaderMap) -> Verdict {
        let challenge = www_authenticate(headers);
        Verdict {
            nonce_asked: status == 401 && super::challenge::dpop_nonce_asked(challenge.iter().map(String::as_str)),
            nonce: None,
            refused: matches!(status, 401 | 403).then(|| Refused { status, challenge, retried: false }),
        }
    }

    /// A token endpoint's refusal, by its `error`: `use_dpop_nonce` asks for the nonce when the
    /// request carried a proof (`proved`) and the answer sent one (`nonce`). A token request has no
    /// credential to renew.
    pub fn of_token_endpoint(error: Option<&str>, proved: bool, nonce: Option<String>) -> Verdict {
        let nonce = nonce.filter(|_| proved && error == Some("use_dpop_nonce"));
        Verdict { nonce_asked: nonce.is_some(), nonce, refused: None }
    }
}

/// The `WWW-Authenticate` values of an answer.
pub fn www_authenticate(headers: &http::HeaderMap) -> Vec<String> {
    headers.get_all(http::header::WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
}

/// What an exchange does after an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Sends again, the proof with the server's nonce (the one given, or the one the caller keeps).
    Nonce(Option<String>),
    /// Asks the caller's renewal about the refused credential.
    Renew(Refused),
    /// The answer is final.
    Done,
}

/// The retries one exchange has had: at most one with the server's DPoP nonce and one with a
/// renewed credential. A caller that follows redirects keeps one `Retries` across the hops, so
/// they share the bounds.
#[derive(Debug, Default)]
pub struct Retries {
    nonce: bool,
    renewed: bool,
}

impl Retries {
    /// The next step after an answer: the nonce asked for first (once), then a refusal.
    pub fn step(&mut self, verdict: Verdict) -> Step {
        if verdict.nonce_asked && !self.nonce {
            self.nonce = true;
            return Step::Nonce(verdict.nonce);
        }
        match verdict.refused {
            Some(refused) => Step::Renew(Refused { retried: self.renewed, ..refused }),
            None => Step::Done,
        }
    }

    /// Whether to send again after the renewal answered `renewed` (a new credential was
    /// obtained): once only.
    pub fn renewed(&mut self, renewed: bool) -> bool {
        let again = renewed && !self.renewed;
        self.renewed |= again;
        again
    }

    /// Runs the exchange: `send` makes and sends one attempt (given the nonce its proof is to
    /// carry when the server just sent one), `verdict` reads its answer, and `renew` renews a
    /// refused credential (`Ok(true)`: renewed, send again; an `Err` ends the exchange with it).
    /// Returns the final answer.
    pub async fn run<A, E, S, SF, R, RF>(&mut self, mut send: S, verdict: impl Fn(&A) -> Verdict, mut renew: R) -> Result<A, E>
    where
        S: FnMut(Option<String>) -> SF,
        SF: Future<Output = Result<A, E>>,
        R: FnMut(Refused) -> RF,
        RF: Future<Output = Result<bool, E>>,
    {
        let mut nonce = None;
        loop {
            let answer = send(nonce.take()).await?;
            match self.step(verdict(&answer)) {
                Step::Nonce(n) => nonce = n,
                Step::Renew(refused) => {
                    let renewed = renew(refused).await?;
                    if !self.renewed(renewed) {
                        return Ok(answer);
                    }
                }
                Step::Done => return Ok(answer),
            }
        }
    }
}

/// The renewal of an exchange that has no credential to renew (a token request).
pub async fn no_renewal<E>(_: Refused) -> Result<bool, E> {
    Ok(false)
}

#[cfg(test)]
mod tests;
