//! A full-text query over facts, checked once at the edge and prepared for either
//! backend.
//!
//! Both backends look for the same words, made here: words split on anything that is
//! not a letter or digit, lowercased, stop words dropped (PostgreSQL's English list),
//! repeats (by stem) dropped. PostgreSQL gets them quoted as tsquery text and stems them
//! like its indexed text; SQLite's word index gets their stems, made here by the same
//! rules as a fact's ([`stems`]). As they hold only letters and digits, no character of
//! a query is ever read as `OR`, `NEAR`, `*`, `&`, `:*` or any other syntax.

use std::collections::HashSet;

use rust_stemmers::{Algorithm, Stemmer};

/// PostgreSQL's `english` stop words (the Snowball list it ships), so both backends
/// ignore the same words.
pub const STOP_WORDS: [&str; 127] = [
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "should",
    "now",
];

/// Longest query, in characters: a question or a topic, not a document. The cost of a
/// search grows with the query, so an unbounded one would let one request hold a
/// database connection for as long as it likes.
pub const MAX_QUERY_CHARS: usize = 1000;

/// Most words (runs of letters and digits) of a query that are looked for, for the
/// same reason; the words after them are ignored.
pub const MAX_QUERY_TERMS: usize = 64;

/// A non-blank search query of bounded size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery(String);

impl SearchQuery {
    /// Refuses an empty or whitespace-only query (it cannot match anything, so it is a
    /// client mistake rather than a search with no results) and one over
    /// [`MAX_QUERY_CHARS`]; keeps its first [`MAX_QUERY_TERMS`] words.
    pub fn parse(text: &str) -> Result<SearchQuery, String> {
        if text.trim().is_empty() {
            return Err("the search query must not be empty".into());
        }
        if text.chars().nth(MAX_QUERY_CHARS).is_some() {
            return Err(format!("the search query must be at most {MAX_QUERY_CHARS} characters"));
        }
        if words(text).nth(MAX_QUERY_TERMS).is_some() {
            return Ok(SearchQuery(words(text).take(MAX_QUERY_TERMS).collect::<Vec<_>>().join(" ")));
        }
        Ok(SearchQuery(text.to_owned()))
    }

    /// The query as the caller wrote it (capped), for the embedder: a model reads the
    /// whole sentence, stop words included.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The stems of the query's words (see [`stems`]): what the word index is asked for,
    /// without stop words and without repeats, in the order the words come.
    pub fn stems(&self) -> Vec<String> {
        stems(&self.0)
    }
}

/// The distinct stems of `text`'s meaningful words (lowercased, not stop words), in the
/// order they first appear: what the word index holds for a fact, made by the same rules
/// as a query's [`SearchQuery::stems`], so that a word and the same word in a query
/// always meet. The stemmer is Snowball English, the one PostgreSQL's `english`
/// configuration uses. Linear in `text`: the stems seen are a set.
pub fn stems(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    let mut seen = HashSet::new();
    words(text)
        .filter_map(|word| {
            let word = word.to_lowercase();
            if STOP_WORDS.contains(&word.as_str()) {
                return None;
            }
            let stem = stemmer.stem(&word).into_owned();
            seen.insert(stem.clone()).then_some(stem)
        })
        .collect()
}

/// The runs of letters and digits of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_queries_are_refused() {
        assert!(SearchQuery::parse(&"a".repeat(MAX_QUERY_CHARS)).is_ok());
        assert!(SearchQuery::parse(&"a".repeat(MAX_QUERY_CHARS + 1)).is_err());
        let many: Vec<String> = (0..MAX_QUERY_TERMS + 10).map(|i| format!("w{i}")).collect();
        let kept = SearchQuery::parse(&many.join(", ")).unwrap();
        assert_eq!(kept.text(), many[..MAX_QUERY_TERMS].join(" "));
        assert_eq!(kept.stems().len(), MAX_QUERY_TERMS);
    }

    fn terms(q: &str) -> Vec<String> {
        SearchQuery::parse(q).unwrap().stems()
    }

    #[test]
    fn blank_queries_are_refused() {
        for blank in ["", " ", "\t\n"] {
            assert!(SearchQuery::parse(blank).is_err(), "{blank:?}");
        }
    }

    #[test]
    fn stop_words_and_punctuation_are_dropped() {
        assert_eq!(terms("what does she drink, tea?"), ["drink", "tea"]);
        assert_eq!(terms("allergies peanut"), ["allergi", "peanut"]);
        assert!(terms("what is it?").is_empty());
    }

    #[test]
    fn query_syntax_cannot_get_through() {
        for query in [r#"'":&|!() NEAR(a b) x* -y ^z OR AND"#, r#"what's 'tea' | !coffee:* <-> \\ café"#] {
            for stem in SearchQuery::parse(query).unwrap().stems() {
                assert!(!stem.is_empty() && stem.chars().all(char::is_alphanumeric), "{stem}");
            }
        }
        assert_eq!(terms(r#"'":&|!() NEAR(a b) x* -y ^z OR AND"#), ["near", "b", "x", "y", "z"]);
        assert_eq!(terms(r#"what's 'tea' | !coffee:* <-> \\ café"#), ["tea", "coffe", "café"]);
    }

    #[test]
    fn words_with_the_same_stem_count_once() {
        assert_eq!(terms("Drinks drink DRINKING tea teas"), ["drink", "tea"]);
    }

    #[test]
    fn a_fact_and_a_query_give_the_same_stems() {
        let fact = "Caroline's sister drinks TEA, not coffee; she's hiking in Évora.";
        assert_eq!(stems(fact), ["carolin", "sister", "drink", "tea", "coffe", "hike", "évora"]);
        assert_eq!(SearchQuery::parse(fact).unwrap().stems(), stems(fact));
        assert!(stems("what is it? and so on").is_empty());
    }

    #[test]
    fn non_latin_words_are_kept() {
        assert_eq!(terms("café Évora 東京"), ["café", "évora", "東京"]);
    }
}
