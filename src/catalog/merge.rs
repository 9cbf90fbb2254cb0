//! Building the merged tool catalogue from each upstream's `tools/list`: prefixing names,
//! validating them and their `x-mcp-header` annotations, detecting collisions (reported, never
//! silently shadowed: the first upstream in config order keeps the name), in a deterministic
//! order (config order, then the upstream's own order). Every other tool field is kept verbatim.

use super::names;
use crate::protocol::rawobj::RawObject;
use crate::protocol::xheader::{self, HeaderPlan};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;

/// One upstream's contribution to a rebuild.
pub struct UpstreamTools<'a> {
    pub upstream: usize,
    pub id: &'a str,
    pub prefix: &'a str,
    pub tools: &'a [Box<RawValue>],
    pub ttl_ms: u64,
    pub private: bool,
}

/// A served tool and what routing needs to know about it.
#[derive(Debug)]
pub struct CatalogTool {
    pub name: String,
    pub upstream: usize,
    pub original: String,
    pub headers: HeaderPlan,
    pub json: Box<RawValue>,
}

/// A tool that could not be served, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub upstream: String,
    pub tool: String,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: Vec<CatalogTool>,
    index: HashMap<String, usize>,
    pub problems: Vec<Problem>,
    /// The smallest `ttlMs` any contributing upstream gave its list.
    pub ttl_ms: u64,
    /// Any contributing list was `cacheScope: "private"`.
    pub private: bool,
}

impl Catalog {
    pub fn tool(&self, name: &str) -> Option<&CatalogTool> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    pub fn count_for(&self, upstream: usize) -> usize {
        self.tools.iter().filter(|t| t.upstream == upstream).count()
    }
}

pub fn build(inputs: &[UpstreamTools], sep: &str) -> Catalog {
    let mut cat = Catalog {
        ttl_ms: u64::MAX,
        ..Default::default()
    };
    for input in inputs {
        cat.ttl_ms = cat.ttl_ms.min(input.ttl_ms);
        cat.private |= input.private;
        for raw in input.tools {
            match admit(input, raw, sep, &cat) {
                Ok(tool) => {
                    cat.index.insert(tool.name.clone(), cat.tools.len());
                    cat.tools.push(tool);
                }
                Err(problem) => cat.problems.push(problem),
            }
        }
    }
    if cat.ttl_ms == u64::MAX {
        cat.ttl_ms = 0;
    }
    cat
}

fn admit(
    input: &UpstreamTools,
    raw: &RawValue,
    sep: &str,
    cat: &Catalog,
) -> Result<CatalogTool, Problem> {
    let problem = |tool: &str, reason: String| Problem {
        upstream: input.id.to_string(),
        tool: tool.to_string(),
        reason,
    };
    let mut obj: RawObject = serde_json::from_str(raw.get())
        .map_err(|_| problem("?", "the tool definition is not a JSON object".into()))?;
    let original = match obj.parse::<String>("name") {
        Some(Ok(n)) => n,
        _ => return Err(problem("?", "the tool has no string \"name\"".into())),
    };
    let name = names::join(input.prefix, sep, &original);
    if let Some(reason) = names::tool_name_problem(&name) {
        return Err(problem(
            &original,
            format!("gateway name '{name}' is not servable: {reason}"),
        ));
    }
    if let Some(&other) = cat.index.get(&name) {
        let owner = &cat.tools[other];
        return Err(problem(
            &original,
            format!(
                "gateway name '{name}' collides with tool '{}' of an earlier upstream (#{}), which keeps it",
                owner.original,
                owner.upstream + 1
            ),
        ));
    }
    let headers = match obj.parse::<Value>("inputSchema") {
        Some(Ok(schema)) => xheader::plan(&schema).map_err(|reason| {
            problem(
                &original,
                format!("invalid x-mcp-header annotation: {reason}"),
            )
        })?,
        Some(Err(_)) | None => {
            return Err(problem(
                &original,
                "the tool has no valid \"inputSchema\"".into(),
            ));
        }
    };
    obj.set_json("name", &name)
        .map_err(|e| problem(&original, e.to_string()))?;
    let json = obj
        .to_raw()
        .map_err(|e| problem(&original, e.to_string()))?;
    Ok(CatalogTool {
        name,
        upstream: input.upstream,
        original,
        headers,
        json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(list: &[&str]) -> Vec<Box<RawValue>> {
        list.iter()
            .map(|s| RawValue::from_string((*s).to_string()).unwrap())
            .collect()
    }

    fn input<'a>(
        i: usize,
        id: &'a str,
        prefix: &'a str,
        t: &'a [Box<RawValue>],
    ) -> UpstreamTools<'a> {
        UpstreamTools {
            upstream: i,
            id,
            prefix,
            tools: t,
            ttl_ms: 1000 * (i as u64 + 1),
            private: false,
        }
    }

    #[test]
    fn prefixes_orders_and_keeps_fields_verbatim() {
        let a = tools(&[
            r#"{"name":"echo","inputSchema":{"type":"object","$defs":{"x":{"$anchor":"y"}}},"annotations":{"readOnlyHint":true}}"#,
        ]);
        let b = tools(&[
            r#"{"name":"echo","inputSchema":{"type":"object"}}"#,
            r#"{"name":"now","inputSchema":{"type":"object"}}"#,
        ]);
        let cat = build(
            &[input(0, "calc", "calc", &a), input(1, "text", "text", &b)],
            "__",
        );
        let names: Vec<_> = cat.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["calc__echo", "text__echo", "text__now"]);
        assert_eq!(
            cat.tools[0].json.get(),
            r#"{"name":"calc__echo","inputSchema":{"type":"object","$defs":{"x":{"$anchor":"y"}}},"annotations":{"readOnlyHint":true}}"#
        );
        assert_eq!(cat.tool("text__now").unwrap().original, "now");
        assert_eq!(cat.ttl_ms, 1000);
        assert!(cat.problems.is_empty());
    }

    #[test]
    fn reports_collisions_bad_names_and_bad_annotations() {
        let a = tools(&[r#"{"name":"search","inputSchema":{"type":"object"}}"#]);
        let b = tools(&[
            r#"{"name":"search","inputSchema":{"type":"object"}}"#,
            r#"{"name":"bad name","inputSchema":{"type":"object"}}"#,
            r#"{"name":"hdr","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}}"#,
            r#"{"name":"ok","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}"#,
        ]);
        let cat = build(&[input(0, "a", "", &a), input(1, "b", "", &b)], "__");
        let names: Vec<_> = cat.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["search", "ok"]);
        assert_eq!(cat.tool("search").unwrap().upstream, 0);
        assert_eq!(cat.tool("ok").unwrap().headers.len(), 1);
        let reasons: Vec<_> = cat
            .problems
            .iter()
            .map(|p| {
                (
                    p.tool.as_str(),
                    p.reason.contains("collides")
                        || p.reason.contains("not servable")
                        || p.reason.contains("x-mcp-header"),
                )
            })
            .collect();
        assert_eq!(
            reasons,
            [("search", true), ("bad name", true), ("hdr", true)]
        );
        assert!(cat.problems.iter().all(|p| p.upstream == "b"));
    }
}
