//! Ranked search over tools for the tool-search mode: BM25 over the words of each tool's name,
//! title and description (the name counts three times, the title twice), with light stemming,
//! stop words dropped, and partial credit for a query word that starts a longer one ("calend" →
//! "calendar"). Pure: a snapshot's tools are indexed once ([`ToolIndex`]), and each search ranks
//! the ones the caller may see.

/// One searchable tool.
pub struct Doc<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub description: &'a str,
}

const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in", "is", "it", "its", "me", "my", "of",
    "on", "or", "please", "some", "that", "the", "their", "them", "there", "this", "to", "want", "what", "when", "which", "who", "with",
    "you", "your",
];

/// The words of `text`: split on anything that is not a letter or digit and at camelCase
/// boundaries, lower-cased, stop words dropped, stemmed.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            let w = std::mem::take(cur);
            if !STOP.contains(&w.as_str()) {
                out.push(stem(&w));
            }
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                flush(&mut cur, &mut out);
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// A light English stemmer: plurals, -ing, -ed.
fn stem(w: &str) -> String {
    let n = w.len();
    if n > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..n - 3]);
    }
    if n > 4 && (w.ends_with("ses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes")) {
        return w[..n - 2].to_string();
    }
    if n > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return w[..n - 1].to_string();
    }
    if n > 5 && w.ends_with("ing") {
        return w[..n - 3].to_string();
    }
    if n > 4 && w.ends_with("ed") && !w.ends_with("eed") {
        return w[..n - 2].to_string();
    }
    w.to_string()
}

pub struct Indexed {
    /// (word, weighted count)
    terms: Vec<(String, f64)>,
    len: f64,
}

/// Every tool of one catalogue snapshot, parsed and indexed, in section order.
pub struct ToolIndex {
    /// Each tool as served (its JSON).
    pub items: Vec<serde_json::Value>,
    pub docs: Vec<Indexed>,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ToolIndex({} tools)", self.items.len())
    }
}

impl ToolIndex {
    /// Indexes tools given as their served JSON.
    pub fn build<'a>(tools: impl Iterator<Item = &'a str>) -> ToolIndex {
        let items: Vec<serde_json::Value> = tools.map(|t| serde_json::from_str(t).unwrap_or(serde_json::Value::Null)).collect();
        let text = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or("").to_string();
        let docs = items
            .iter()
            .map(|v| {
                let (name, title, description) = (text(v, "name"), text(v, "title"), text(v, "description"));
                index(&Doc { name: &name, title: &title, description: &description })
            })
            .collect();
        ToolIndex { items, docs }
    }
}

fn index(d: &Doc) -> Indexed {
    let mut terms: Vec<(String, f64)> = Vec::new();
    let mut len = 0.0;
    for (text, weight) in [(d.name, 3.0), (d.title, 2.0), (d.description, 1.0)] {
        for w in words(text) {
            len += weight;
            match terms.iter_mut().find(|(t, _)| *t == w) {
                Some((_, n)) => *n += weight,
                None => terms.push((w, weight)),
            }
        }
    }
    Indexed { terms, len }
}

/// The best `limit` documents for `query`, best first, as (index, score); documents that match
/// no query word are left out.
pub fn rank(docs: &[Doc], query: &str, limit: usize) -> Vec<(usize, f64)> {
    let idx: Vec<Indexed> = docs.iter().map(index).collect();
    rank_indexed(&idx.iter().collect::<Vec<_>>(), query, limit)
}

/// [`rank`] over documents already indexed.
pub fn rank_indexed(idx: &[&Indexed], query: &str, limit: usize) -> Vec<(usize, f64)> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let q: Vec<String> = {
        let mut q = words(query);
        q.dedup();
        q
    };
    if q.is_empty() || idx.is_empty() {
        return Vec::new();
    }
    let avg = (idx.iter().map(|d| d.len).sum::<f64>() / idx.len() as f64).max(1.0);
    let n = idx.len() as f64;
    // How well document `d` holds word `w`: exactly, or (half) as the start of a longer word.
    let tf = |d: &Indexed, w: &str| -> f64 {
        d.terms
            .iter()
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
                    if f == 0.0 { 0.0 } else { idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * d.len / avg)) }
                })
                .sum();
            (s > 0.0).then_some((i, s))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
}

#[cfg(test)]
mod tests {
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
}
