//! The built-in detectors' shapes, in three groups: `secrets` (cloud and SaaS credentials, private
//! keys, JWTs), `pii` (e-mail addresses, phone numbers, payment cards checked with Luhn, IBANs
//! checked with their mod-97 digits) and `injection` (invisible Unicode that hides text from a
//! person: the tag block, runs of zero-width characters, bidirectional overrides; and
//! instructions addressed to the model in the usual words of tool poisoning). Each shape has a
//! recognisable anchor, so ordinary text does not match; the ones with check digits are verified.

/// A shape: its name, its pattern, and the check a match must pass.
pub type Shape = (&'static str, &'static str, Option<fn(&str) -> bool>);

pub const SECRETS: &[Shape] = &[
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
    // The secret half of the pair, known by the name it is written beside.
    ("aws-secret-key", r#"(?i)\b(?:aws_?secret_?access_?key|aws_?secret_?key|secretaccesskey)["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}"#, None),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b", None),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}\b", None),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b", None),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", None),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}\b", None),
    // Before the generic `sk-` shape below, which would take it too.
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_\-]{32,}\b", None),
    ("openai-key", r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{32,}\b", None),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", None),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b", None),
    ("sendgrid-key", r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b", None),
    ("azure-storage-key", r"AccountKey=[A-Za-z0-9+/]{86}==", None),
    ("digitalocean-token", r"\bdo[pro]_v1_[a-f0-9]{64}\b", None),
    ("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", None),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", None),
    // With its END line, or, cut short, its body to where the base64 stops.
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[A-Za-z0-9+/=\s:,\-]*)",
        None,
    ),
];

pub const PII: &[Shape] = &[
    ("email", r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b", None),
    // International (+…), or grouped the way numbers are written; dates and versions do not match.
    ("phone", r"(?:\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{2,4}[ .\-]\d{2,4}[ .\-]?\d{2,4}|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4})\b", None),
    // ASCII word boundaries (`(?-u:\b)`): a Unicode one keeps the regex engine off its fast path
    // on text that is not all ASCII (20 times slower).
    ("card", r"(?-u:\b)[0-9](?:[ \-]?[0-9]){12,22}(?-u:\b)", Some(card)),
    ("iban", r"(?-u:\b)[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?-u:\b)", Some(iban)),
];

pub const INJECTION: &[Shape] = &[
    // Tag characters (text no one sees), two or more zero-width characters in a row (a binary
    // code hidden in text), and the overrides that reorder what a person reads.
    (
        "invisible-unicode",
        r"[\x{E0000}-\x{E007F}]+|[\x{200B}\x{200C}\x{200D}\x{2060}\x{FEFF}]{2,}|[\x{202A}-\x{202E}\x{2066}-\x{2069}]",
        None,
    ),
    (
        "model-instructions",
        r"(?i)(?:\bignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) (?:instructions|messages)|\bdisregard (?:all |any )?(?:the )?(?:previous|prior|above) |<\s*/?\s*(?:important|system|instructions?)\s*>|\bdo not (?:tell|inform|mention (?:this )?to|alert) the user\b|\bbefore using this tool,? (?:you must )?(?:read|open|send|fetch)\b|\byou are now (?:in )?(?:developer|admin|god) mode\b)",
        None,
    ),
    // A markdown image whose address carries a query or a fragment: a client that renders it
    // sends what the model put there to that host, unasked.
    ("markdown-image", r"!\[[^\]\n]{0,200}\]\(\s*<?https?://[^\s)>]+[?#][^\s)>]*>?(?:\s+[^)]{0,200})?\)", None),
];

/// A payment card number: written as cards are (one run of 13 to 19 digits, four groups of four,
/// 4-4-4-4-3, 4-6-5 or 4-6-4) and passing the Luhn check.
pub fn card(text: &str) -> bool {
    let groups: Vec<usize> = text.split([' ', '-']).map(str::len).collect();
    let layout = match groups.as_slice() {
        [n] => (13..=19).contains(n),
        [4, 4, 4, 4] | [4, 4, 4, 4, 3] | [4, 6, 5] | [4, 6, 4] => true,
        _ => false,
    };
    layout && luhn(text)
}

/// The Luhn check of a payment card number (its digits, separators ignored).
pub fn luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let d = d * 2;
                if d > 9 { d - 9 } else { d }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The ISO 13616 check of an IBAN: its mod-97 remainder is 1.
pub fn iban(text: &str) -> bool {
    let compact: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let rearranged = compact[4..].iter().chain(&compact[..4]);
    let mut remainder: u32 = 0;
    for c in rearranged {
        let Some(v) = c.to_digit(36) else { return false };
        let step = if v < 10 { 10 } else { 100 };
        remainder = (remainder * step + v) % 97;
    }
    remainder == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digits() {
        assert!(luhn("4111 1111 1111 1111") && luhn("5500-0000-0000-0004") && !luhn("4111 1111 1111 1112") && !luhn("1234"));
        assert!(iban("DE89 3704 0044 0532 0130 00") && iban("GB82WEST12345698765432") && !iban("DE89 3704 0044 0532 0130 01"));
        for (_, p, _) in SECRETS.iter().chain(PII).chain(INJECTION) {
            assert!(regex::Regex::new(p).is_ok(), "{p}");
        }
    }
}
