//! Property: for random catalogues and random policies, a name is in the caller's list exactly
//! when the caller's call to it is allowed — never one without the other.

#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use crate::catalog::merge::{UpstreamLists, build};
use crate::policy::Grants;
use proptest::prelude::*;
use serde_json::value::RawValue;

const IDS: [&str; 3] = ["calc", "text", "gh"];

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_*?]{1,8}",
        prop::sample::select(IDS.to_vec()).prop_map(|u| format!("upstream:{u}")),
        prop::sample::select(IDS.to_vec()).prop_map(|u| format!("{u}__*")),
        Just("*__delete_*".to_string()),
        Just("*".to_string()),
    ]
}

fn names() -> impl Strategy<Value = Vec<Vec<String>>> {
    prop::collection::vec(prop::collection::vec("(delete_)?[a-z_]{1,6}", 0..6), 3)
}

proptest! {
    #[test]
    fn listed_iff_callable(tools in names(), allow in prop::collection::vec(pattern(), 0..4), deny in prop::collection::vec(pattern(), 0..3), prefixed in any::<bool>()) {
        let raws: Vec<Vec<Box<RawValue>>> = tools
            .iter()
            .map(|list| list.iter().map(|n| RawValue::from_string(format!(r#"{{"name":"{n}","inputSchema":{{"type":"object"}}}}"#)).unwrap()).collect())
            .collect();
        let inputs: Vec<UpstreamLists> = raws
            .iter()
            .enumerate()
            .map(|(i, t)| UpstreamLists {
                upstream: i,
                id: IDS[i],
                prefix: if prefixed { IDS[i] } else { "" },
                items: [t, &[], &[], &[], &[]],
                ttl_ms: [Some(0); 5],
                listed_at: None,
                private: [false; 5],
                rename: &[],
                validate: true,
                has_resources: false,
            })
            .collect();
        let cat = build(&inputs, &crate::catalog::merge::Naming { policy: &Default::default(), namespaces: &[] });
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        let deny: Vec<&str> = deny.iter().map(String::as_str).collect();
        let grants = Grants::from_patterns(&allow, &deny);
        let id_of = |i: usize| IDS[i];
        let listed: Vec<String> = visible(&cat, Kind::Tool, &grants, &id_of).iter().map(|e| e.name.clone()).collect();
        for (i, list) in tools.iter().enumerate() {
            for n in list {
                let name = if prefixed { format!("{}__{n}", IDS[i]) } else { n.clone() };
                let callable = find(&cat, Kind::Tool, &name, &grants, &id_of).is_some();
                prop_assert_eq!(listed.contains(&name), callable, "{} listed/callable disagree", name);
            }
        }
        // And nothing is listed that cannot be called.
        for name in &listed {
            prop_assert!(find(&cat, Kind::Tool, name, &grants, &id_of).is_some());
        }
    }
}
