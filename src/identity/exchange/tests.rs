use super::*;
use std::cell::RefCell;

const NONCE: &str = r#"DPoP error="use_dpop_nonce", error_description="a nonce is required""#;
const EXPIRED: &str = r#"Bearer error="invalid_token""#;
const CONSENT: &str = "consent";

/// One scripted answer of a resource: its status and `WWW-Authenticate` value (if any).
type Answer = (u16, Option<&'static str>);

/// What the renewal answers, in order.
type Renewals = &'static [Result<bool, &'static str>];

/// A row of a table: its name, the answers, the renewal's answers (resources) or whether the
/// request carried a proof (token endpoints), what the exchange did, and how it ended.
type Row<A, With, End> = (&'static str, &'static [A], With, &'static [&'static str], End);

/// Plays an exchange against `answers` (in order) with a renewal that answers `renewals` (in
/// order): what was done, in order ("send", "send with <nonce>", "renew <status>", with
/// "(renewed)" when the refused credential was a renewed one), and the final answer.
async fn play<A: Clone + std::fmt::Debug>(
    answers: &[A],
    verdict: impl Fn(&A) -> Verdict,
    renewals: &[Result<bool, &'static str>],
) -> (Vec<String>, Result<A, &'static str>) {
    let log = RefCell::new(Vec::new());
    let (mut answers, mut renewals) = (answers.iter().cloned(), renewals.iter().copied());
    let end = Retries::default()
        .run(
            |nonce: Option<String>| {
                log.borrow_mut().push(nonce.map_or_else(|| "send".to_string(), |n| format!("send with {n}")));
                let next = answers.next().ok_or("more sends than answers");
                async move { next }
            },
            verdict,
            |refused: Refused| {
                let again = if refused.retried { " (renewed)" } else { "" };
                log.borrow_mut().push(format!("renew {}{again}", refused.status));
                let next = renewals.next().unwrap_or(Err("more renewals than scripted"));
                async move { next }
            },
        )
        .await;
    (log.into_inner(), end)
}

fn of_resource(&(status, challenge): &Answer) -> Verdict {
    let mut headers = http::HeaderMap::new();
    headers.insert("dpop-nonce", http::HeaderValue::from_static("n1"));
    if let Some(c) = challenge {
        headers.insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static(c));
    }
    Verdict::of_resource(status, &headers)
}

/// A resource's answers: a nonce challenge is answered first and once, a refused credential is
/// renewed once, and anything else is final. A change in the order or the number of attempts
/// changes a row.
#[tokio::test]
async fn a_resource_gets_one_nonce_retry_and_one_renewal() {
    let rows: &[Row<Answer, Renewals, Result<u16, &str>>] = &[
        ("success", &[(200, None)], &[], &["send"], Ok(200)),
        ("server error", &[(500, None)], &[], &["send"], Ok(500)),
        ("nonce asked", &[(401, Some(NONCE)), (200, None)], &[], &["send", "send"], Ok(200)),
        (
            "nonce asked twice: the second goes to the renewal",
            &[(401, Some(NONCE)), (401, Some(NONCE))],
            &[Ok(false)],
            &["send", "send", "renew 401"],
            Ok(401),
        ),
        ("a nonce challenge only counts on a 401", &[(400, Some(NONCE))], &[], &["send"], Ok(400)),
        (
            "a nonce error needs the DPoP scheme",
            &[(401, Some(r#"Bearer error="use_dpop_nonce""#)), (200, None)],
            &[Ok(true)],
            &["send", "renew 401", "send"],
            Ok(200),
        ),
        ("expired token renewed", &[(401, Some(EXPIRED)), (200, None)], &[Ok(true)], &["send", "renew 401", "send"], Ok(200)),
        ("nothing to renew", &[(401, Some(EXPIRED))], &[Ok(false)], &["send", "renew 401"], Ok(401)),
        ("forbidden asks the renewal too", &[(403, None)], &[Ok(false)], &["send", "renew 403"], Ok(403)),
        (
            "a renewed token refused: the renewal decides, once",
            &[(401, Some(EXPIRED)), (401, Some(EXPIRED))],
            &[Ok(true), Ok(false)],
            &["send", "renew 401", "send", "renew 401 (renewed)"],
            Ok(401),
        ),
        (
            "never a second renewal, whatever the renewal says",
            &[(401, Some(EXPIRED)), (401, Some(EXPIRED))],
            &[Ok(true), Ok(true)],
            &["send", "renew 401", "send", "renew 401 (renewed)"],
            Ok(401),
        ),
        (
            "nonce, then renewal",
            &[(401, Some(NONCE)), (401, Some(EXPIRED)), (401, Some(NONCE))],
            &[Ok(true), Ok(false)],
            &["send", "send", "renew 401", "send", "renew 401 (renewed)"],
            Ok(401),
        ),
        (
            "renewal, then nonce",
            &[(401, Some(EXPIRED)), (401, Some(NONCE)), (200, None)],
            &[Ok(true)],
            &["send", "renew 401", "send", "send"],
            Ok(200),
        ),
        ("consent needed ends the exchange", &[(401, Some(EXPIRED))], &[Err(CONSENT)], &["send", "renew 401"], Err(CONSENT)),
    ];
    for (name, answers, renewals, done, end) in rows {
        let (log, got) = play(answers, of_resource, renewals).await;
        assert_eq!(log, *done, "{name}");
        assert_eq!(got.map(|a| a.0), *end, "{name}");
    }
}

/// A token endpoint's answer: its `error` and `DPoP-Nonce`.
type Refusal = (Option<&'static str>, Option<&'static str>);

const USE_NONCE: Option<&str> = Some("use_dpop_nonce");

/// A token endpoint's `use_dpop_nonce` refusal is answered once, with the nonce it sent, when the
/// request carried a proof; nothing is renewed.
#[tokio::test]
async fn a_token_endpoint_gets_one_nonce_retry_with_its_nonce() {
    let rows: &[Row<Refusal, bool, Refusal>] = &[
        ("granted", &[(None, None)], true, &["send"], (None, None)),
        ("nonce asked", &[(USE_NONCE, Some("n1")), (None, None)], true, &["send", "send with n1"], (None, None)),
        (
            "nonce asked twice",
            &[(USE_NONCE, Some("n1")), (USE_NONCE, Some("n2"))],
            true,
            &["send", "send with n1"],
            (USE_NONCE, Some("n2")),
        ),
        ("no proof sent", &[(USE_NONCE, Some("n1"))], false, &["send"], (USE_NONCE, Some("n1"))),
        ("no nonce sent", &[(USE_NONCE, None)], true, &["send"], (USE_NONCE, None)),
        ("another error", &[(Some("invalid_grant"), Some("n1"))], true, &["send"], (Some("invalid_grant"), Some("n1"))),
    ];
    for (name, answers, proved, done, end) in rows {
        let verdict = |&(error, nonce): &Refusal| Verdict::of_token_endpoint(error, *proved, nonce.map(str::to_string));
        let (log, got) = play(answers, verdict, &[]).await;
        assert_eq!(log, *done, "{name}");
        assert_eq!(got, Ok(*end), "{name}");
    }
}

#[test]
fn steps_in_order_and_at_most_once_each() {
    let mut r = Retries::default();
    let asked = Verdict { nonce_asked: true, nonce: Some("n".into()), refused: None };
    assert_eq!(r.step(asked.clone()), Step::Nonce(Some("n".into())));
    assert_eq!(r.step(asked), Step::Done, "a second nonce challenge is final");
    let refused = Refused { status: 401, challenge: vec![], retried: false };
    assert_eq!(r.step(Verdict { refused: Some(refused.clone()), ..Verdict::default() }), Step::Renew(refused.clone()));
    assert!(r.renewed(true));
    assert!(!r.renewed(true), "renewed once");
    assert_eq!(r.step(Verdict { refused: Some(refused.clone()), ..Verdict::default() }), Step::Renew(Refused { retried: true, ..refused }));
}
