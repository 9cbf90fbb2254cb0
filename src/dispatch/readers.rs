//! Who reads a call: which of the gateway's deciders need the arguments of a request that acts on
//! one item, or its result, found once when the call path has resolved the item (from the
//! configuration, the item, and what the caller's grants remember of their rules: nothing is
//! scanned per call). A call that nothing reads takes the pass-through path: its arguments are
//! never read into values (they go upstream as the client wrote them, once their shape is known
//! to be an object) and its result is relayed as the upstream's bytes, read only for what the
//! gateway itself reports (the outcome, `resultType`). Every step of the call path asks this one
//! structure whether to read, so a call cannot skip a decider that needs what it carries, and a
//! decider added later is one more [`Reader`] here (docs/security.md, "A decider that cannot
//! read refuses").

/// One decider that reads a call's arguments or its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Reader {
    /// A `[[rule]]` whose condition reads `args`.
    Rules = 1,
    /// `validate_arguments` on the tool's upstream.
    Validation = 1 << 1,
    /// A `[[confirm]]`, or a rule that asks for a confirmation (a person is shown the
    /// arguments).
    Confirm = 1 << 2,
    /// A `[[guard]]` at the `request` point.
    RequestGuards = 1 << 3,
    /// The tool's `x-mcp-header` mirrors (values sent as headers, and the route they drive).
    Headers = 1 << 4,
    /// The endpoint's fixed arguments of the tool.
    Fixed = 1 << 5,
    /// `Mcp-Param-*` headers the client sent, to check against the arguments.
    ParamHeaders = 1 << 6,
    /// A `[secrets]` detector (every message from the upstream).
    Secrets = 1 << 7,
    /// A `[[guard]]` at the `result` point.
    ResultGuards = 1 << 8,
}

impl Reader {
    /// Every reader, in declaration order.
    pub const ALL: [Reader; 9] = [
        Reader::Rules,
        Reader::Validation,
        Reader::Confirm,
        Reader::RequestGuards,
        Reader::Headers,
        Reader::Fixed,
        Reader::ParamHeaders,
        Reader::Secrets,
        Reader::ResultGuards,
    ];

    /// Whether it reads the call's arguments (else the result).
    pub const fn reads_arguments(self) -> bool {
        !matches!(self, Reader::Secrets | Reader::ResultGuards)
    }
}

/// What the configuration, the item and the grants say about one call: the facts
/// [`Readers::of`] decides from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    pub rules_read_arguments: bool,
    pub validates: bool,
    pub confirms: bool,
    pub request_guards: bool,
    pub headers: bool,
    pub fixed: bool,
    pub param_headers: bool,
    pub secrets: bool,
    pub result_guards: bool,
}

/// The deciders that read one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Readers(u16);

impl Readers {
    pub fn of(f: &Facts) -> Readers {
        let set = [
            (f.rules_read_arguments, Reader::Rules),
            (f.validates, Reader::Validation),
            (f.confirms, Reader::Confirm),
            (f.request_guards, Reader::RequestGuards),
            (f.headers, Reader::Headers),
            (f.fixed, Reader::Fixed),
            (f.param_headers, Reader::ParamHeaders),
            (f.secrets, Reader::Secrets),
            (f.result_guards, Reader::ResultGuards),
        ];
        Readers(set.iter().filter(|(on, _)| *on).fold(0, |bits, (_, r)| bits | *r as u16))
    }

    /// Every reader: what a call whose item is not resolved yet must assume.
    pub fn all() -> Readers {
        Readers(Reader::ALL.iter().fold(0, |bits, r| bits | *r as u16))
    }

    pub fn reads(self, r: Reader) -> bool {
        self.0 & r as u16 != 0
    }

    /// Whether some decider reads the arguments (they are read, strictly, once).
    pub fn arguments(self) -> bool {
        Reader::ALL.iter().any(|r| r.reads_arguments() && self.reads(*r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn facts(bits: u16) -> Facts {
        let on = |i: u16| bits & (1 << i) != 0;
        Facts {
            rules_read_arguments: on(0),
            validates: on(1),
            confirms: on(2),
            request_guards: on(3),
            headers: on(4),
            fixed: on(5),
            param_headers: on(6),
            secrets: on(7),
            result_guards: on(8),
        }
    }

    proptest! {
        /// For every mix of deciders, a call passes through exactly when none of them is
        /// configured for it; each configured decider is a reader of what it reads, and no
        /// other is.
        #[test]
        fn a_call_passes_through_only_when_no_decider_reads_it(bits in 0u16..(1 << 9)) {
            let f = facts(bits);
            let r = Readers::of(&f);
            let wanted = [
                f.rules_read_arguments, f.validates, f.confirms, f.request_guards, f.headers, f.fixed, f.param_headers,
                f.secrets, f.result_guards,
            ];
            for (reader, on) in Reader::ALL.iter().zip(wanted) {
                prop_assert_eq!(r.reads(*reader), on, "{:?}", reader);
            }
            let arguments = wanted[..7].iter().any(|b| *b);
            prop_assert_eq!(r.arguments(), arguments);
            // Nothing configured: the call passes through, its arguments and result unread.
            prop_assert_eq!(r == Readers::default(), !wanted.iter().any(|b| *b));
            // The reader that cannot be resolved yet is every reader.
            prop_assert!(Readers::all().reads(Reader::ALL[(bits % 9) as usize]));
        }
    }
}
