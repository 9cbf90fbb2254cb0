//! The methods a client may call, parsed once at the edge: the request path branches on
//! [`Method`], not on text. A method the gateway does not know stays [`Method::Other`] with its
//! name, so it can still be answered (-32601) and logged as it was sent.

use std::fmt;

macro_rules! methods {
    ($($variant:ident => $name:literal,)*) => {
        /// A JSON-RPC method name.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum Method {
            $($variant,)*
            /// Any other name.
            Other(String),
        }

        impl Method {
            pub fn parse(name: &str) -> Method {
                match name {
                    $($name => Method::$variant,)*
                    other => Method::Other(other.to_string()),
                }
            }

            pub fn as_str(&self) -> &str {
                match self {
                    $(Method::$variant => $name,)*
                    Method::Other(name) => name,
                }
            }

            /// `name` when it is a method the gateway knows, borrowed for as long as the program runs.
            pub fn parse_known(name: &str) -> Option<&'static str> {
                match name {
                    $($name => Some($name),)*
                    _ => None,
                }
            }

            /// The name of a method the gateway knows, borrowed for as long as the program runs
            /// (a metric label without a copy); `None` for any other.
            pub fn known(&self) -> Option<&'static str> {
                match self {
                    $(Method::$variant => Some($name),)*
                    Method::Other(_) => None,
                }
            }
        }
    };
}

methods! {
    Discover => "server/discover",
    ToolsList => "tools/list",
    ToolsCall => "tools/call",
    PromptsList => "prompts/list",
    PromptsGet => "prompts/get",
    ResourcesList => "resources/list",
    ResourceTemplatesList => "resources/templates/list",
    ResourcesRead => "resources/read",
    ResourcesSubscribe => "resources/subscribe",
    ResourcesUnsubscribe => "resources/unsubscribe",
    CompletionComplete => "completion/complete",
    SubscriptionsListen => "subscriptions/listen",
    TasksGet => "tasks/get",
    TasksUpdate => "tasks/update",
    TasksCancel => "tasks/cancel",
    SkillsList => "skills/list",
    SkillsGet => "skills/get",
    ResourcesDirectoryRead => "resources/directory/read",
    Initialize => "initialize",
    Ping => "ping",
    LoggingSetLevel => "logging/setLevel",
}

impl Method {
    /// Whether its result may ask for input with `input_required` (MCP 2026-07-28
    /// `basic/patterns/mrtr`).
    pub fn may_ask_input(&self) -> bool {
        matches!(self, Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Method {
    fn from(name: &str) -> Method {
        Method::parse(name)
    }
}

impl From<String> for Method {
    fn from(name: String) -> Method {
        Method::parse(&name)
    }
}

impl PartialEq<str> for Method {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_kept() {
        for name in super::super::MODERN_METHODS {
            let m = Method::parse(name);
            assert!(!matches!(m, Method::Other(_)), "{name} is known");
            assert_eq!(m.as_str(), *name);
        }
        assert_eq!(Method::parse("tools/call"), Method::ToolsCall);
        assert_eq!(Method::parse("x/y"), Method::Other("x/y".into()));
        assert_eq!(Method::parse("x/y").to_string(), "x/y");
        assert!(Method::ToolsCall.may_ask_input() && !Method::ToolsList.may_ask_input());
        assert!(Method::ToolsCall == "tools/call");
    }
}
