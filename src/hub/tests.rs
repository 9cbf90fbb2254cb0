#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use mcpgate_model::catalog::merge::{UpstreamLists, build};
use mcpgate_model::policy::Grants;
use serde_json::value::RawValue;

fn catalog(tools: &[&str]) -> Catalog {
    let raws: Vec<Box<RawValue>> =
        tools.iter().map(|n| RawValue::from_string(format!(r#"{{"name":"{n}","inputSchema":{{"type":"object"}}}}"#)).unwrap()).collect();
    build(
        &[UpstreamLists {
            upstream: 0,
            id: "calc",
            prefix: "calc",
            items: [&raws, &[], &[], &[], &[]],
            ttl_ms: [Some(0); 5],
            listed_at: None,
            private: [false; 5],
            rename: &[],
            validate: true,
            has_resources: false,
        }],
        &mcpgate_model::catalog::merge::Naming { policy: &Default::default(), namespaces: &[] },
    )
}

fn caller(rule: &str, allow: &[&str]) -> Arc<Principal> {
    Arc::new(Principal {
        id: rule.into(),
        rules: vec![rule.into()],
        grants: Grants::from_patterns(allow, &[]),
        scopes: Vec::new(),
        rate: None,
        endpoint: None,
        subject_token: None,
    })
}

async fn next(s: &mut Subscription) -> Option<Change> {
    tokio::time::timeout(Duration::from_millis(300), s.next()).await.ok()
}

#[tokio::test]
async fn only_callers_whose_view_changed_are_told_once_per_burst() {
    let hub = Hub::new(Duration::from_millis(20));
    let id = |_: usize| "calc";
    let mut all = hub.subscribe(Principal::anonymous(), Filter::ALL, UriSet::default()).unwrap();
    let mut adder = hub.subscribe(caller("adder", &["calc__add"]), Filter::ALL, UriSet::default()).unwrap();
    let mut prompts_only = hub.subscribe(Principal::anonymous(), Filter { prompts: true, ..Filter::default() }, UriSet::default()).unwrap();
    let v1 = catalog(&["add"]);
    let v2 = catalog(&["add", "secret"]);
    let v3 = catalog(&["add", "secret", "more"]);
    // Two rebuilds in a burst: one notification.
    hub.catalog_changed(&v1, &v2, &id, None);
    hub.catalog_changed(&v2, &v3, &id, None);
    assert_eq!(next(&mut all).await, Some(Change::List(Kind::Tool)));
    assert_eq!(next(&mut all).await, None, "coalesced");
    assert_eq!(next(&mut adder).await, None, "a caller that cannot see the new tools hears nothing");
    assert_eq!(next(&mut prompts_only).await, None, "the filter is honoured");
    // A change the restricted caller can see reaches it.
    hub.catalog_changed(&v3, &catalog(&["secret", "more"]), &id, None);
    assert_eq!(next(&mut adder).await, Some(Change::List(Kind::Tool)));
    assert_eq!(hub.len(), 3);
    drop(all);
    assert_eq!(hub.len(), 2, "dropping a subscription unregisters it");
}

#[tokio::test]
async fn resource_updates_reach_only_their_subscribers_and_slow_ones_are_ended() {
    let hub = Hub::new(Duration::from_millis(10));
    let uris: UriSet = Arc::new(Mutex::new(["docs+file:///a".to_string()].into_iter().collect()));
    let mut follower = hub.subscribe(Principal::anonymous(), Filter::default(), uris.clone()).unwrap();
    let mut other = hub.subscribe(Principal::anonymous(), Filter::ALL, UriSet::default()).unwrap();
    let anyone = |_: &Principal| true;
    hub.resource_updated("docs+file:///a/b.txt", &anyone);
    hub.resource_updated("docs+file:///ab", &anyone);
    hub.resource_updated("docs+file:///a/secret", &|_| false);
    assert_eq!(next(&mut follower).await, Some(Change::Updated("docs+file:///a/b.txt".into())));
    assert_eq!(next(&mut follower).await, None, "file:///ab is not under file:///a");
    assert_eq!(next(&mut other).await, None);
    assert_eq!(hub.followed_uris().into_iter().collect::<Vec<_>>(), vec!["docs+file:///a".to_string()]);
    for i in 0..=MAX_QUEUED_UPDATES {
        hub.resource_updated(&format!("docs+file:///a/{i}"), &anyone);
    }
    assert_eq!(next(&mut follower).await, Some(Change::TooSlow));
    hub.end_all();
    assert_eq!(next(&mut other).await, Some(Change::Ended));
}

#[test]
fn sub_resources_are_covered() {
    assert!(covers("file:///a", "file:///a"));
    assert!(covers("file:///a", "file:///a/b"));
    assert!(covers("file:///a/", "file:///a/b"));
    assert!(covers("file:///a", "file:///a#frag"));
    assert!(!covers("file:///a", "file:///ab"));
    assert!(!covers("file:///a/b", "file:///a"));
}

#[test]
fn one_caller_may_hold_only_so_many_streams() {
    let hub = Hub::new(Duration::from_millis(10));
    let held: Vec<_> =
        (0..MAX_STREAMS_PER_CALLER).map(|_| hub.subscribe(caller("a", &["*"]), Filter::ALL, UriSet::default()).unwrap()).collect();
    assert!(hub.subscribe(caller("a", &["*"]), Filter::ALL, UriSet::default()).is_none());
    assert!(hub.subscribe(caller("b", &["*"]), Filter::ALL, UriSet::default()).is_some(), "others are not affected");
    drop(held);
    assert!(hub.subscribe(caller("a", &["*"]), Filter::ALL, UriSet::default()).is_some());
}

#[tokio::test]
async fn a_callers_own_changes_and_completed_consents_reach_only_that_caller() {
    let hub = Hub::new(Duration::from_millis(10));
    let mut alice = hub.subscribe(caller("alice", &["*"]), Filter::ALL, UriSet::default()).unwrap();
    let mut alice_prompts =
        hub.subscribe(caller("alice", &["*"]), Filter { prompts: true, ..Filter::default() }, UriSet::default()).unwrap();
    let mut bob = hub.subscribe(caller("bob", &["*"]), Filter::ALL, UriSet::default()).unwrap();
    hub.caller_changed("alice");
    let mut heard = vec![next(&mut alice).await, next(&mut alice).await, next(&mut alice).await];
    heard.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(heard, vec![Some(Change::List(Kind::Prompt)), Some(Change::List(Kind::Resource)), Some(Change::List(Kind::Tool))]);
    assert_eq!(next(&mut alice_prompts).await, Some(Change::List(Kind::Prompt)), "each filter honoured");
    assert_eq!(next(&mut bob).await, None, "another caller hears nothing");
    hub.completed("alice", "elicit-1");
    assert_eq!(next(&mut alice).await, Some(Change::Completed("elicit-1".into())));
    assert_eq!(next(&mut bob).await, None);
}

fn skills_catalog(skills: &[&str]) -> Catalog {
    let raws: Vec<Box<RawValue>> = skills
        .iter()
        .map(|n| {
            RawValue::from_string(format!(r#"{{"uri":"skill://{n}/SKILL.md","frontmatter":{{"name":"{n}"}},"resources":"dynamic"}}"#))
                .unwrap()
        })
        .collect();
    build(
        &[UpstreamLists {
            upstream: 0,
            id: "sk",
            prefix: "sk",
            items: [&[], &[], &[], &[], &raws],
            ttl_ms: [Some(0); 5],
            listed_at: None,
            private: [false; 5],
            rename: &[],
            validate: true,
            has_resources: true,
        }],
        &mcpgate_model::catalog::merge::Naming { policy: &Default::default(), namespaces: &[] },
    )
}

#[tokio::test]
async fn a_change_of_skills_is_announced_as_a_resource_list_change_to_those_who_see_it() {
    let hub = Hub::new(Duration::from_millis(20));
    let id = |_: usize| "sk";
    let mut all = hub.subscribe(Principal::anonymous(), Filter::ALL, UriSet::default()).unwrap();
    let mut review = hub.subscribe(caller("review", &["skill://sk/review/*"]), Filter::ALL, UriSet::default()).unwrap();
    let mut tools_only = hub.subscribe(Principal::anonymous(), Filter { tools: true, ..Filter::default() }, UriSet::default()).unwrap();
    hub.catalog_changed(&skills_catalog(&["review"]), &skills_catalog(&["review", "deploy"]), &id, None);
    assert_eq!(next(&mut all).await, Some(Change::List(Kind::Resource)));
    assert_eq!(Kind::Skill.list_changed_method(), "notifications/resources/list_changed");
    assert_eq!(next(&mut review).await, None, "a caller that cannot see the new skill hears nothing");
    assert_eq!(next(&mut tools_only).await, None, "skills are announced to resource listeners");
}
