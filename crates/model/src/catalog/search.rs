//! Ranked search over tools for the tool-search mode: BM25 over the words of each tool's name,
//! title and description (the name counts three times, the title twice), with light stemming,
//! stop words dropped, and partial credit for a query word that starts a longer one ("calend" →
//! "calendar"). Pure: a snapshot's tools are indexed once ([`ToolIndex`]), and each search ranks
//! the ones the caller may see.
//!
//! Both halves are bounded, since callers write queries and upstreams write descriptions (and can
//! force a rebuild with `list_changed`). A query holds at most [`MAX_QUERY_BYTES`] bytes and
//! [`MAX_QUERY_WORDS`] distinct words, or it is refused ([`Query::parse`]); a tool contributes at
//! most the first [`MAX_FIELD_BYTES`] of each of its name, title and description, and at most
//! [`MAX_TERMS_PER_TOOL`] distinct words. The index is one sorted list of words, each with the
//! tools that hold it, built with hash maps (linear in the text read), so a query word finds its
//! exact and longer matches with two binary searches and then visits only the tools that match.

use std::collections::{HashMap, HashSet};

/// The most bytes a query may hold.
pub const MAX_QUERY_BYTES: usize = 1024;
/// The most distinct words a query may hold, stop words left out and repeats counted once.
pub const MAX_QUERY_WORDS: usize = 32;
/// The most bytes of each of a tool's name, title and description that are indexed (the rest
/// of a longer description is not searched).
pub const MAX_FIELD_BYTES: usize = 16 * 1024;
/// The most distinct words indexed for one tool (words past it that are new are not indexed).
pub const MAX_TERMS_PER_TOOL: usize = 1024;

/// One searchable tool.
#[derive(Clone, Copy)]
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
    each_word(text, |w| out.push(w));
    out
}

/// [`words`], handed over one at a time.
fn each_word(text: &str, mut f: impl FnMut(String)) {
    let mut cur = String::new();
    let mut prev_lower = false;
    let mut flush = |cur: &mut String| {
        if !cur.is_empty() {
            let w = std::mem::take(cur);
            if !STOP.contains(&w.as_str()) {
                f(stem(&w));
            }
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                flush(&mut cur);
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            flush(&mut cur);
        }
    }
    flush(&mut cur);
}

/// The start of `text`, at most `max` bytes, cut before a word rather than inside one (unless
/// the first word alone is longer).
fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let (kept, rest) = text.split_at(end);
    if rest.starts_with(char::is_alphanumeric)
        && let Some(i) = kept.rfind(|c: char| !c.is_alphanumeric())
    {
        return &kept[..i];
    }
    kept
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

/// Why a query is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// Over [`MAX_QUERY_BYTES`]: how many bytes it has.
    TooLong { bytes: usize },
    /// Over [`MAX_QUERY_WORDS`] distinct words: how many it has.
    TooManyWords { words: usize },
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::TooLong { bytes } => write!(f, "the query is {bytes} bytes long; a query may hold at most {MAX_QUERY_BYTES} bytes"),
            QueryError::TooManyWords { words } => {
                write!(f, "the query has {words} different words; a query may hold at most {MAX_QUERY_WORDS}")
            }
        }
    }
}

impl std::error::Error for QueryError {}

/// A query's distinct words, in the order they first appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    words: Vec<String>,
}

impl Query {
    /// The words of `text` (see [`words`]), each once; refused over [`MAX_QUERY_BYTES`] bytes
    /// (checked before any word is read) or [`MAX_QUERY_WORDS`] distinct words.
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        if text.len() > MAX_QUERY_BYTES {
            return Err(QueryError::TooLong { bytes: text.len() });
        }
        let mut seen = HashSet::new();
        let words: Vec<String> = words(text).into_iter().filter(|w| seen.insert(w.clone())).collect();
        if words.len() > MAX_QUERY_WORDS {
            return Err(QueryError::TooManyWords { words: words.len() });
        }
        Ok(Query { words })
    }

    /// The distinct words, in order.
    pub fn words(&self) -> &[String] {
        &self.words
    }
}

/// What the index knows of one tool as a whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Indexed {
    /// The weighted count of its indexed words (BM25's document length).
    length: f64,
    /// How many distinct words it has in the index.
    terms: usize,
}

impl Indexed {
    /// How many distinct words of the tool are indexed (at most [`MAX_TERMS_PER_TOOL`]).
    pub fn terms(&self) -> usize {
        self.terms
    }

    /// The weighted count of its indexed words (the name's count three times, the title's twice).
    pub fn length(&self) -> f64 {
        self.length
    }
}

/// One indexed word and the tools that hold it: (position, weighted count), by position.
struct Term {
    word: Box<str>,
    tools: Vec<(usize, f64)>,
}

/// Every tool of one catalogue snapshot, parsed and indexed, in section order.
pub struct ToolIndex {
    /// Each tool as served (its JSON).
    pub items: Vec<serde_json::Value>,
    /// Each tool's figures, by position.
    pub docs: Vec<Indexed>,
    /// Every indexed word, sorted.
    terms: Vec<Term>,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ToolIndex({} tools, {} words)", self.items.len(), self.terms.len())
    }
}

// The work a ranking does, counted in tests (comparisons of the word lookups, and tools visited).
#[cfg(test)]
thread_local!(static WORK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });

fn work() {
    #[cfg(test)]
    WORK.with(|w| w.set(w.get() + 1));
}

impl ToolIndex {
    /// Indexes tools given as their served JSON.
    pub fn build<'a>(tools: impl Iterator<Item = &'a str>) -> ToolIndex {
        let items: Vec<serde_json::Value> = tools.map(|t| serde_json::from_str(t).unwrap_or(serde_json::Value::Null)).collect();
        fn text<'v>(v: &'v serde_json::Value, k: &str) -> &'v str {
            v.get(k).and_then(serde_json::Value::as_str).unwrap_or("")
        }
        let docs = items.iter().map(|v| Doc { name: text(v, "name"), title: text(v, "title"), description: text(v, "description") });
        let mut index = ToolIndex::of_docs(docs);
        index.items = items;
        index
    }

    /// Indexes documents (with no served JSON).
    pub fn of_docs<'a>(docs: impl Iterator<Item = Doc<'a>>) -> ToolIndex {
        let mut postings: HashMap<String, Vec<(usize, f64)>> = HashMap::new();
        let mut figures = Vec::new();
        for (tool, d) in docs.enumerate() {
            let mut counts: HashMap<String, f64> = HashMap::new();
            let mut length = 0.0;
            for (text, weight) in [(d.name, 3.0), (d.title, 2.0), (d.description, 1.0)] {
                each_word(head(text, MAX_FIELD_BYTES), |w| {
                    if let Some(n) = counts.get_mut(&w) {
                        *n += weight;
                    } else if counts.len() < MAX_TERMS_PER_TOOL {
                        counts.insert(w, weight);
                    } else {
                        return;
                    }
                    length += weight;
                });
            }
            figures.push(Indexed { length, terms: counts.len() });
            for (w, n) in counts {
                postings.entry(w).or_default().push((tool, n));
            }
        }
        let mut terms: Vec<Term> = postings.into_iter().map(|(w, tools)| Term { word: w.into_boxed_str(), tools }).collect();
        terms.sort_unstable_by(|a, b| a.word.cmp(&b.word));
        ToolIndex { items: Vec::new(), docs: figures, terms }
    }

    /// How many distinct words the index holds.
    pub fn words(&self) -> usize {
        self.terms.len()
    }

    /// The indexed words `w` finds: itself, and (for a word of 4 bytes or more) the longer words
    /// it starts, which sort right after it.
    fn matching(&self, w: &str) -> &[Term] {
        let start = self.terms.partition_point(|t| {
            work();
            &*t.word < w
        });
        let rest = self.terms.get(start..).unwrap_or_default();
        let len = if w.len() >= 4 {
            rest.partition_point(|t| {
                work();
                t.word.starts_with(w)
            })
        } else {
            usize::from(rest.first().is_some_and(|t| &*t.word == w))
        };
        rest.get(..len).unwrap_or_default()
    }

    /// The best `limit` of the tools at positions `visible` for `query`, best first, as
    /// (position, score); tools that match no query word are left out, and equal scores keep
    /// the order of `visible`. Positions outside the index are ignored.
    pub fn rank(&self, visible: &[usize], query: &Query, limit: usize) -> Vec<(usize, f64)> {
        const K1: f64 = 1.2;
        const B: f64 = 0.75;
        let visible: Vec<usize> = visible.iter().copied().filter(|&p| p < self.docs.len()).collect();
        if query.words.is_empty() || visible.is_empty() {
            return Vec::new();
        }
        // Where each visible tool sits in `visible`.
        let mut slot = vec![None; self.docs.len()];
        for (s, &p) in visible.iter().enumerate() {
            slot[p] = Some(s);
        }
        let lengths: Vec<f64> = visible.iter().map(|&p| self.docs[p].length).collect();
        let n = visible.len() as f64;
        let avg = (lengths.iter().sum::<f64>() / n).max(1.0);
        // Per query word: how well each visible tool holds it, exactly or (half) as the start of
        // a longer word (accumulated in `tf`, recorded for the tools touched).
        let mut tf = vec![0.0; visible.len()];
        let mut scores = vec![0.0; visible.len()];
        let mut touched: Vec<usize> = Vec::new();
        for w in &query.words {
            for term in self.matching(w) {
                let part = if &*term.word == w.as_str() { 1.0 } else { 0.5 };
                for &(p, c) in &term.tools {
                    work();
                    if let Some(s) = slot[p] {
                        if tf[s] == 0.0 {
                            touched.push(s);
                        }
                        tf[s] += c * part;
                    }
                }
            }
            let df = touched.len() as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for s in touched.drain(..) {
                let f = std::mem::take(&mut tf[s]);
                scores[s] += idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * lengths[s] / avg));
            }
        }
        let mut scored: Vec<(usize, f64)> = scores.into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored.into_iter().map(|(s, score)| (visible[s], score)).collect()
    }
}

/// The best `limit` of `docs` for `query`, best first, as (index, score); documents that match
/// no query word are left out, and so is everything for a query [`Query::parse`] refuses.
pub fn rank(docs: &[Doc], query: &str, limit: usize) -> Vec<(usize, f64)> {
    let Ok(query) = Query::parse(query) else {
        return Vec::new();
    };
    let index = ToolIndex::of_docs(docs.iter().copied());
    index.rank(&(0..docs.len()).collect::<Vec<_>>(), &query, limit)
}

#[cfg(test)]
mod tests;
