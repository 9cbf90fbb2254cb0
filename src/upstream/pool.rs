//! An HTTP upstream as a pool of endpoints (replicas, regions) that serve the same tools, with
//! routing rules on mirrored arguments: an endpoint is chosen when every `when` entry matches the
//! call's `x-mcp-header` values (read from the validated body, never from unvalidated headers);
//! otherwise the default endpoint (the one without `when`). The default (or the first) endpoint
//! feeds the catalogue. A plain `url` upstream is a pool of one.

use super::http::HttpTransport;
use mcpgate_config::EndpointConfig;

pub struct Pool {
    endpoints: Vec<(EndpointConfig, HttpTransport)>,
    default: usize,
}

/// The endpoint for mirrored `values` (`(lower-cased header name, value)`), or `None` when no
/// rule matches and there is no default.
pub fn pick(rules: &[&[(String, String)]], values: &[(String, String)]) -> Option<usize> {
    let matches =
        |when: &[(String, String)]| !when.is_empty() && when.iter().all(|(name, want)| values.iter().any(|(n, v)| n == name && v == want));
    rules.iter().position(|w| matches(w)).or_else(|| rules.iter().position(|w| w.is_empty()))
}

/// Why no endpoint fits a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no endpoint matches {shown} and the pool has no default endpoint")]
pub struct NoRoute {
    shown: String,
}

impl Pool {
    pub fn new(endpoints: Vec<(EndpointConfig, HttpTransport)>) -> Pool {
        let default = endpoints.iter().position(|(e, _)| e.when.is_empty()).unwrap_or(0);
        Pool { endpoints, default }
    }

    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    pub fn default_index(&self) -> usize {
        self.default
    }

    /// The index a call's endpoint choice stands for (`None` or out of range: the default).
    pub fn index(&self, i: Option<usize>) -> usize {
        i.filter(|i| *i < self.endpoints.len()).unwrap_or(self.default)
    }

    pub fn url(&self, i: usize) -> String {
        self.endpoints.get(i).map(|(_, t)| t.url()).unwrap_or_default()
    }

    pub fn at(&self, i: Option<usize>) -> &HttpTransport {
        &self.endpoints[self.index(i)].1
    }

    /// The endpoint for a call's mirrored values.
    pub fn route(&self, values: &[(String, String)]) -> Result<usize, NoRoute> {
        let rules: Vec<&[(String, String)]> = self.endpoints.iter().map(|(e, _)| e.when.as_slice()).collect();
        pick(&rules, values).ok_or_else(|| {
            let shown: Vec<String> = values.iter().map(|(n, v)| format!("{n}={v}")).collect();
            NoRoute { shown: if shown.is_empty() { "a call without routing values".into() } else { shown.join(", ") } }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::pick;

    fn w(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn picks_the_first_matching_rule_else_the_default() {
        let west = w(&[("region", "us-west1")]);
        let east = w(&[("region", "us-east1"), ("tier", "gold")]);
        let default = w(&[]);
        let rules: Vec<&[(String, String)]> = vec![&west, &east, &default];
        assert_eq!(pick(&rules, &w(&[("region", "us-west1")])), Some(0));
        assert_eq!(pick(&rules, &w(&[("region", "us-east1"), ("tier", "gold")])), Some(1));
        assert_eq!(pick(&rules, &w(&[("region", "us-east1")])), Some(2), "all conditions must match");
        assert_eq!(pick(&rules, &w(&[])), Some(2));
        let no_default: Vec<&[(String, String)]> = vec![&west];
        assert_eq!(pick(&no_default, &w(&[("region", "eu")])), None);
    }
}
