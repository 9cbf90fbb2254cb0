use super::*;

fn doc<'a>(name: &'a str, description: &'a str) -> Doc<'a> {
    Doc { name, title: "", description }
}

#[test]
fn words_split_names_and_prose_alike() {
    assert_eq!(words("github__createPullRequest"), ["github", "create", "pull", "request"]);
    assert_eq!(words("Lists the open issues of a repository"), ["list", "open", "issue", "repository"]);
    assert_eq!(words("searching branches"), ["search", "branch"]);
}

#[test]
fn the_tool_for_a_purpose_ranks_first() {
    let docs = [
        doc("payments__create_charge", "Create a new charge in Payments."),
        doc("payments__refund_charge", "Give a customer their money back: refunds all or part of a card charge."),
        doc("payments__list_customers", "List customers in Payments, newest first."),
        doc("calendar__find_free_time", "Find a time when all attendees are free for a meeting of a given length."),
        doc("calendar__create_meeting", "Create a new meeting in Calendar."),
    ];
    assert_eq!(rank(&docs, "give a customer their money back", 3)[0].0, 1);
    assert_eq!(rank(&docs, "when is everyone free for a meeting", 3)[0].0, 3);
    assert_eq!(rank(&docs, "calend", 5).len(), 2, "a prefix finds longer words");
    assert!(rank(&docs, "the of a", 5).is_empty(), "stop words alone match nothing");
    assert!(rank(&docs, "zebra", 5).is_empty());
    assert_eq!(rank(&docs, "charge", 1).len(), 1, "limit");
}

/// The ranking as it was before the index (a scan of every word of every tool per query word),
/// to check the index ranks normal queries exactly as it did.
fn scanned(docs: &[Doc], query: &str, limit: usize) -> Vec<(usize, f64)> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let idx: Vec<(Vec<(String, f64)>, f64)> = docs
        .iter()
        .map(|d| {
            let (mut terms, mut len): (Vec<(String, f64)>, f64) = (Vec::new(), 0.0);
            for (text, weight) in [(d.name, 3.0), (d.title, 2.0), (d.description, 1.0)] {
                for w in words(text) {
                    len += weight;
                    match terms.iter_mut().find(|(t, _)| *t == w) {
                        Some((_, n)) => *n += weight,
                        None => terms.push((w, weight)),
                    }
                }
            }
            (terms, len)
        })
        .collect();
    let mut q = words(query);
    q.dedup();
    let avg = (idx.iter().map(|d| d.1).sum::<f64>() / idx.len() as f64).max(1.0);
    let n = idx.len() as f64;
    let tf = |d: &(Vec<(String, f64)>, f64), w: &str| -> f64 {
        d.0.iter()
            .map(|(t, c)| {
                if t == w {
                    *c
                } else if w.len() >= 4 && t.starts_with(w) {
                    c * 0.5
                } else {
                    0.0
                }
            })
            .sum()
    };
    let idf: Vec<f64> = q
        .iter()
        .map(|w| {
            let df = idx.iter().filter(|d| tf(d, w) > 0.0).count() as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    let mut scored: Vec<(usize, f64)> = idx
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let s: f64 = q
                .iter()
                .zip(&idf)
                .map(|(w, idf)| {
                    let f = tf(d, w);
                    if f == 0.0 { 0.0 } else { idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * d.1 / avg)) }
                })
                .sum();
            (s > 0.0).then_some((i, s))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
}

/// 500 tools in the shape of the end-to-end tests' domains: 5 domains × 20 nouns × 5 verbs.
fn domain_tools() -> Vec<(String, String, String)> {
    let nouns = [
        "repository",
        "pull request",
        "issue",
        "meeting",
        "attendee",
        "calendar",
        "document",
        "spreadsheet",
        "charge",
        "refund",
        "invoice",
        "customer",
        "payment method",
        "lead",
        "deal",
        "pipeline",
        "meeting note",
        "time slot",
        "folder",
        "card",
    ];
    let verbs = [
        ("create", "Create a new {n} in {d}."),
        ("get", "Fetch one {n} by its id from {d}."),
        ("list", "List {n}s in {d}, newest first, with paging."),
        ("update", "Change fields of an existing {n} in {d}."),
        ("delete", "Permanently delete a {n} from {d}."),
    ];
    let mut out = Vec::new();
    for d in ["code", "calendar", "files", "payments", "crm"] {
        for n in nouns {
            for (v, text) in verbs {
                let title = if n.len() % 3 == 0 { format!("{v} {n}") } else { String::new() };
                out.push((format!("{d}__{v}_{}", n.replace(' ', "_")), title, text.replace("{n}", n).replace("{d}", d)));
            }
        }
    }
    out.push((
        "payments__refund_charge".into(),
        String::new(),
        "Give a customer their money back: refunds all or part of a card charge.".into(),
    ));
    out.push(("calendar__find_free_time".into(), "Free time".into(), "Find a time when all attendees are free for a meeting.".into()));
    out
}

#[test]
fn the_index_ranks_normal_queries_exactly_as_the_scan_did() {
    let tools = domain_tools();
    let docs: Vec<Doc> = tools.iter().map(|(n, t, d)| Doc { name: n, title: t, description: d }).collect();
    let index = ToolIndex::of_docs(docs.iter().copied());
    let all: Vec<usize> = (0..docs.len()).collect();
    // Every other tool visible, as a policy would leave it: scores are over what the caller sees.
    let some: Vec<usize> = (0..docs.len()).filter(|i| i % 2 == 1).collect();
    let some_docs: Vec<Doc> = some.iter().map(|&i| docs[i]).collect();
    for query in [
        "give a customer their money back",
        "when is everyone free for a meeting",
        "merge an approved pull request",
        "refund a card charge",
        "calend",
        "paym refun invoic",
        "list meeting notes newest first",
        "createPullRequest",
        "the of a",
        "zebra",
        "delete",
    ] {
        let q = Query::parse(query).expect("a normal query");
        assert_eq!(index.rank(&all, &q, 50), scanned(&docs, query, 50), "{query}");
        let expected: Vec<(usize, f64)> = scanned(&some_docs, query, 50).into_iter().map(|(i, s)| (some[i], s)).collect();
        assert_eq!(index.rank(&some, &q, 50), expected, "{query}, half visible");
    }
}

#[test]
fn queries_over_the_limits_are_refused() {
    let long = "refund ".repeat(200);
    assert_eq!(Query::parse(&long), Err(QueryError::TooLong { bytes: 1400 }));
    assert_eq!(Query::parse(&"a".repeat(MAX_QUERY_BYTES + 1)), Err(QueryError::TooLong { bytes: MAX_QUERY_BYTES + 1 }));
    let message = QueryError::TooLong { bytes: 1400 }.to_string();
    assert!(message.contains("1400 bytes") && message.contains("at most 1024 bytes"), "{message}");

    let distinct: Vec<String> = (0..MAX_QUERY_WORDS + 1).map(|i| format!("word{i}")).collect();
    assert_eq!(Query::parse(&distinct.join(" ")), Err(QueryError::TooManyWords { words: 33 }));
    let message = QueryError::TooManyWords { words: 33 }.to_string();
    assert!(message.contains("33 different words") && message.contains("at most 32"), "{message}");

    // Repeats count once (and are ranked once); stop words do not count.
    let repeated = Query::parse(&"refund the charges ".repeat(50)).expect("two distinct words");
    assert_eq!(repeated.words(), ["refund", "charge"]);
    assert_eq!(Query::parse(&distinct[..MAX_QUERY_WORDS].join(" ")).map(|q| q.words().len()), Ok(MAX_QUERY_WORDS));
    assert_eq!(Query::parse(&"a".repeat(MAX_QUERY_BYTES)).map(|q| q.words().len()), Ok(1));
}

#[test]
fn a_long_description_adds_a_bounded_number_of_words() {
    // 40,000 distinct words (about 390 KB): only the first 16 KB are read, and at most
    // MAX_TERMS_PER_TOOL distinct words are kept.
    let description: String = (0..40_000).map(|i| format!("word{i} ")).collect();
    let index = ToolIndex::of_docs([doc("big", &description), doc("small", "Refund a charge.")].into_iter());
    assert_eq!(index.docs[0].terms(), MAX_TERMS_PER_TOOL);
    assert_eq!(index.docs[0].length(), 3.0 + MAX_TERMS_PER_TOOL as f64 - 1.0, "the name, then new description words until the cap");
    assert_eq!(index.docs[1].terms(), 3);
    assert_eq!(index.words(), MAX_TERMS_PER_TOOL + 3);
    let q = |text: &str| Query::parse(text).expect("query");
    assert_eq!(index.rank(&[0, 1], &q("word5"), 10).len(), 1, "an early word is found");
    assert!(index.rank(&[0, 1], &q("word39999"), 10).is_empty(), "a word past the cap is not");

    // One word over and over: the weighted count stops at what the first 16 KB hold.
    let same = "charge ".repeat(40_000);
    let index = ToolIndex::of_docs(std::iter::once(doc("big", &same)));
    assert_eq!(index.docs[0].terms(), 2);
    assert_eq!(index.docs[0].length(), 3.0 + (MAX_FIELD_BYTES / "charge ".len()) as f64);
}

#[test]
fn a_cut_falls_between_words() {
    assert_eq!(head("hello world", 100), "hello world");
    assert_eq!(head("hello world", 8), "hello", "'wo' is not indexed as a word");
    assert_eq!(head("hello world", 6), "hello");
    assert_eq!(head("ééé", 3), "é", "a cut inside a character moves back to its start");
    assert_eq!(head("aaaaaaaa", 3), "aaa", "a first word longer than the cap is cut");
    assert_eq!(
        words(head(&format!("{} tail", "x ".repeat(MAX_FIELD_BYTES / 2 - 1)), MAX_FIELD_BYTES)).last().map(String::as_str),
        Some("x")
    );
}

#[test]
fn a_query_word_is_looked_up_not_compared_with_every_word() {
    // 5,000 tools with three distinct words each: 15,000 indexed words.
    let names: Vec<(String, String)> = (0..5_000).map(|i| (format!("tool{i}"), format!("gadget{i} widget{i}"))).collect();
    let index = ToolIndex::of_docs(names.iter().map(|(n, d)| doc(n, d)));
    assert_eq!(index.words(), 15_000);
    let all: Vec<usize> = (0..5_000).collect();
    let work = |query: &str| {
        WORK.with(|w| w.set(0));
        let found = index.rank(&all, &Query::parse(query).expect("query"), 10);
        (found, WORK.with(std::cell::Cell::get))
    };
    // Two binary searches per word (log2 15,000 < 14, plus one), and nothing else when no
    // tool matches: a scan would compare each of the 32 words with 15,000 words.
    let nothing: Vec<String> = (0..MAX_QUERY_WORDS).map(|i| format!("zebra{i}")).collect();
    let (found, done) = work(&nothing.join(" "));
    assert!(found.is_empty());
    assert!(done <= MAX_QUERY_WORDS * 2 * 15, "{done} steps");
    // A match adds the tools it visits: "gadget4999" is one word of one tool; the prefix
    // "gadget499" starts 11 words ("gadget499", "gadget4990"…"gadget4999"), one tool each.
    let (found, done) = work("gadget4999");
    assert_eq!(found.len(), 1);
    assert!(done <= 2 * 15 + 1, "{done} steps");
    let (found, done) = work("gadget499");
    assert_eq!(found.len(), 10);
    assert_eq!(found[0].0, 499, "the exact match first");
    assert!(done <= 2 * 15 + 11, "{done} steps");
}
