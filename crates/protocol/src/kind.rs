//! The five kinds of catalogue item (tools, prompts, resources, resource templates, and the
//! Agent Skills of SEP-2640) and the protocol names that belong to each: the list method and
//! result member, the member that identifies an item, the capability that declares the kind and
//! its change notification.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
    Template,
    /// An Agent Skill (SEP-2640, extension `io.modelcontextprotocol/skills`): named by the URI of
    /// its `SKILL.md`, listed by `skills/list`.
    Skill,
}

impl Kind {
    /// How many kinds there are (the length of every per-kind array).
    pub const COUNT: usize = 5;
    pub const ALL: [Kind; Kind::COUNT] = [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template, Kind::Skill];

    /// Whether items of this kind are named by URIs (resources, templates, skills).
    pub fn is_uri(self) -> bool {
        matches!(self, Kind::Resource | Kind::Template | Kind::Skill)
    }

    /// The member holding the items in a list result.
    pub fn list_key(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => "resources",
            Kind::Template => "resourceTemplates",
            Kind::Skill => "skills",
        }
    }

    /// The member that identifies one item.
    pub fn id_key(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource | Kind::Skill => "uri",
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
            Kind::Skill => "skills/list",
        }
    }

    /// The notification announcing a change of this kind's list (templates share the
    /// resources one, and so do skills: SEP-2640 defines no notification of its own, a skill's
    /// files being resources).
    pub fn list_changed_method(self) -> &'static str {
        match self {
            Kind::Tool => "notifications/tools/list_changed",
            Kind::Prompt => "notifications/prompts/list_changed",
            Kind::Resource | Kind::Template | Kind::Skill => "notifications/resources/list_changed",
        }
    }

    /// The server capability that declares this kind (`tools`, `prompts`, `resources`; skills
    /// need `resources` too, their files being read as resources, and are declared by the
    /// extension, see [`Kind::declared_by`]).
    pub fn capability(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource | Kind::Template | Kind::Skill => "resources",
        }
    }

    /// Whether a server's `capabilities` declare this kind (skills: the extension under
    /// `capabilities.extensions`).
    pub fn declared_by(self, capabilities: &serde_json::Value) -> bool {
        let declared = |v: Option<&serde_json::Value>| v.is_some_and(|v| !v.is_null());
        match self {
            Kind::Skill => declared(capabilities.get("extensions").and_then(|e| e.get(super::SKILLS_EXTENSION))),
            other => declared(capabilities.get(other.capability())),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::Template => "resource template",
            Kind::Skill => "skill",
        }
    }
}
