//! A synthetic catalogue for the benchmarks (`benches/micro.rs`, `examples/bench_suite.rs`):
//! `upstreams` upstreams `u0`… with `tools` tools `t0`… each, merged as the gateway merges them.

use mcpgate_model::catalog::Catalog;
use mcpgate_model::catalog::merge::{Naming, UpstreamLists, build};
use mcpgate_model::catalog::names::NamePolicy;
use serde_json::value::RawValue;

pub struct Synthetic {
    pub tools: Vec<Vec<Box<RawValue>>>,
    pub ids: Vec<String>,
}

impl Synthetic {
    pub fn new(upstreams: usize, tools: usize) -> Result<Synthetic, serde_json::Error> {
        let one = |t: usize| {
            RawValue::from_string(format!(
                r#"{{"name":"t{t}","description":"Benchmark tool.","inputSchema":{{"type":"object","properties":{{"text":{{"type":"string"}}}}}}}}"#
            ))
        };
        let tools = (0..upstreams).map(|_| (0..tools).map(one).collect()).collect::<Result<_, _>>()?;
        Ok(Synthetic { tools, ids: (0..upstreams).map(|i| format!("u{i}")).collect() })
    }

    /// The catalogue, merged with the default name policy (each upstream prefixed by its id).
    pub fn build(&self) -> Catalog {
        let inputs: Vec<UpstreamLists> = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| UpstreamLists {
                upstream: i,
                id: &self.ids[i],
                prefix: &self.ids[i],
                items: [t, &[], &[], &[], &[]],
                ttl_ms: [Some(0); 5],
                listed_at: None,
                private: [false; 5],
                has_resources: false,
                rename: &[],
                validate: true,
            })
            .collect();
        let spaces: Vec<(usize, String)> = self.ids.iter().cloned().enumerate().collect();
        build(&inputs, &Naming { policy: &NamePolicy::default(), namespaces: &spaces })
    }
}
