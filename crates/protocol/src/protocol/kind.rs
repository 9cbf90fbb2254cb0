//! The four kinds of catalogue item (tools, prompts, resources, resource templates) and the
//! protocol names that belong to each: the list method and result member, the member that
//! identifies an item, the capability that declares the kind and its change notification.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
    Template,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template];

    /// Whether items of this kind are named by URIs (resources, templates).
    pub fn is_uri(self) -> bool {
        matches!(self, Kind::Resource | Kind::Template)
    }

    /// The member holding the items in a list result.
    pub fn list_key(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => "resources",
            Kind::Template => "resourceTemplates",
        }
    }

    /// The member that identifies one item.
    pub fn id_key(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource => "uri",
            Kind::Template => "uriTemplate",
        }
    }

    /// The method that lists this kind.
    pub fn list_method(self) -> &'static str {
        match self {
            Kind::Tool => "tools/list",
            Kind::Prompt => "prompts/list",
            Kind::Resource => "resources/list",
            Kind::Template => "resources/templates/list",
        }
    }

    /// The notification announcing a change of this kind's list (templates share the
    /// resources one).
    pub fn list_changed_method(self) -> &'static str {
        match self {
            Kind::Tool => "notifications/tools/list_changed",
            Kind::Prompt => "notifications/prompts/list_changed",
            Kind::Resource | Kind::Template => "notifications/resources/list_changed",
        }
    }

    /// The server capability that declares this kind (`tools`, `prompts`, `resources`).
    pub fn capability(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource | Kind::Template => "resources",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::Template => "resource template",
        }
    }
}
