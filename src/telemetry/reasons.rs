//! The closed sets of label values two counters can take: why a request was refused before any
//! upstream (`mcpgate_refused_total{reason}`) and what became of a confirmation question
//! (`mcpgate_confirmations_total{outcome}`). Call sites name a variant, never a string, so the
//! values the binary can export are exactly [`Refused::ALL`] and [`Confirmation::ALL`], and the
//! operations guide's tables are checked against them.

/// One enum, its list of every value and their label strings, from one table (a value cannot be
/// left out of the list).
macro_rules! labels {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $label:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)+
        }

        impl $name {
            /// Every value, in the order the operations guide lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $label,)+
                }
            }
        }
    };
}

labels! {
    /// Why a request was refused before it reached an upstream (or, for the secret scanner, why
    /// an upstream's answer did not reach the caller whole).
    Refused {
        RateLimited => "rate_limited",
        QuotaExceeded => "quota_exceeded",
        UnknownOrDenied => "unknown_or_denied",
        AmbiguousBareName => "ambiguous_bare_name",
        InsufficientScope => "insufficient_scope",
        DeniedByRule => "denied_by_rule",
        NotAllowedByRule => "not_allowed_by_rule",
        GuardDenied => "guard_denied",
        NoRoute => "no_route",
        InvalidRequestState => "invalid_request_state",
        InvalidCursor => "invalid_cursor",
        UnknownTask => "unknown_task",
        HeldByPin => "held_by_pin",
        InvalidArguments => "invalid_arguments",
        ArgumentsTooCostly => "arguments_too_costly",
        Unreadable => "unreadable",
        ConsentNeeded => "consent_needed",
        ConfirmationDeclined => "confirmation_declined",
        ConfirmationSpent => "confirmation_spent",
        ConfirmationImpossible => "confirmation_impossible",
        ConfirmationUnavailable => "confirmation_unavailable",
        SkillFileMismatch => "skill_file_mismatch",
        SecretBlocked => "secret_blocked",
        SecretRedacted => "secret_redacted",
    }
}

labels! {
    /// What became of a confirmation question (`[[confirm]]`): asked, then confirmed, declined,
    /// or refused because its answer was already spent, it cannot be asked of this client, or the
    /// one-time store could not be reached. Only `asked` and `confirmed` are not also refusals.
    Confirmation {
        Asked => "asked",
        Confirmed => "confirmed",
        Declined => "declined",
        Spent => "spent",
        Impossible => "impossible",
        Unavailable => "unavailable",
    }
}

impl Confirmation {
    /// The refusal a confirmation that did not let its call run counts as.
    pub fn refusal(self) -> Option<Refused> {
        match self {
            Confirmation::Asked | Confirmation::Confirmed => None,
            Confirmation::Declined => Some(Refused::ConfirmationDeclined),
            Confirmation::Spent => Some(Refused::ConfirmationSpent),
            Confirmation::Impossible => Some(Refused::ConfirmationImpossible),
            Confirmation::Unavailable => Some(Refused::ConfirmationUnavailable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label values in the first column of the operations guide's table headed `heading`.
    fn documented(heading: &str) -> Vec<String> {
        let doc = include_str!("../../docs/operations.md");
        let Some(start) = doc.find(heading) else { panic!("docs/operations.md has no {heading:?}") };
        doc[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .filter_map(|l| l.split('|').nth(1))
            .map(|c| c.trim().trim_matches('`').to_string())
            .collect()
    }

    #[test]
    fn every_refusal_reason_is_documented_and_nothing_else() {
        let code: Vec<&str> = Refused::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(documented("Refusal reasons (`mcpgate_refused_total`)"), code);
    }

    #[test]
    fn every_confirmation_outcome_is_documented_and_nothing_else() {
        let code: Vec<&str> = Confirmation::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(documented("Confirmation outcomes (`mcpgate_confirmations_total`)"), code);
    }

    #[test]
    fn the_lists_hold_every_value_once() {
        let mut seen = std::collections::HashSet::new();
        assert!(Refused::ALL.iter().all(|r| seen.insert(r.as_str())));
        assert!(Confirmation::ALL.iter().all(|c| seen.insert(c.as_str())));
        assert!(Confirmation::ALL.iter().filter_map(|c| c.refusal()).all(|r| Refused::ALL.contains(&r)));
    }
}
