//! A full-text query over facts, checked once at the edge and prepared for either
//! backend.
//!
//! Both backends look for the same words, made here: words split on anything that is
//! not a letter or digit, lowercased, stop words dropped (PostgreSQL's English list,
//! which FTS5 lacks), repeats (by stem) dropped. FTS5 gets each one quoted as an FTS5
//! string and PostgreSQL all of them quoted as tsquery text; as they hold only letters
//! and digits, no character of a query is ever read as `OR`, `NEAR`, `*`, `&`, `:*` or
//! any other syntax. Each backend then stems them like its indexed text.

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

    /// The query's distinct meaningful words, each quoted as an FTS5 string (see the
    /// module docs). Empty when every word is a stop word.
    pub fn fts5_terms(&self) -> Vec<String> {
        self.terms().iter().map(|term| format!("\"{}\"", term.replace('"', "\"\""))).collect()
    }

    /// The same words as one PostgreSQL tsquery text, `'w1' | 'w2' | …`, for
    /// `to_tsquery('english', …)` (which stems each like the indexed text) and, read as a
    /// document by `to_tsvector`, for the list of the query's lexemes. Every word is
    /// letters and digits only, so quoting is enough to keep the query out of tsquery
    /// syntax. Empty when every word is a stop word.
    pub fn tsquery_terms(&self) -> String {
        self.terms().iter().map(|term| format!("'{term}'")).collect::<Vec<_>>().join(" | ")
    }

    /// The query's words, lowercased, without stop words and without repeats (by stem),
    /// so that both backends look for the same words.
    fn terms(&self) -> Vec<String> {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut stems: Vec<String> = Vec::new();
        let mut terms = Vec::new();
        for word in words(&self.0) {
            let word = word.to_lowercase();
            if STOP_WORDS.contains(&word.as_str()) {
                continue;
            }
            let stem = stemmer.stem(&word).into_owned();
            if !stems.contains(&stem) {
                stems.push(stem);
                terms.push(word);
            }
        }
        terms
    }
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
        assert_eq!(kept.fts5_terms().len(), MAX_QUERY_TERMS);
    }

    fn terms(q: &str) -> Vec<String> {
        SearchQuery::parse(q).unwrap().fts5_terms()
    }

    #[test]
    fn blank_queries_are_refused() {
        for blank in ["", " ", "\t\n"] {
            assert!(SearchQuery::parse(blank).is_err(), "{blank:?}");
        }
    }

    #[test]
    fn stop_words_and_punctuation_are_dropped() {
        assert_eq!(terms("what does she drink, tea?"), [r#""drink""#, r#""tea""#]);
        assert_eq!(terms("allergies peanut"), [r#""allergies""#, r#""peanut""#]);
        assert!(terms("what is it?").is_empty());
    }

    #[test]
    fn fts5_syntax_cannot_get_through() {
        let garbage = terms(r#"'":&|!() NEAR(a b) x* -y ^z OR AND"#);
        assert_eq!(garbage, [r#""near""#, r#""b""#, r#""x""#, r#""y""#, r#""z""#]);
        for term in &garbage {
            let inner = &term[1..term.len() - 1];
            assert!(inner.chars().all(char::is_alphanumeric), "{term}");
        }
    }

    #[test]
    fn tsquery_terms_are_quoted_words_or_nothing() {
        let query = SearchQuery::parse(r#"what's 'tea' | !coffee:* <-> \\ café"#).unwrap();
        assert_eq!(query.tsquery_terms(), "'tea' | 'coffee' | 'café'");
        assert_eq!(SearchQuery::parse("what is it?").unwrap().tsquery_terms(), "");
    }

    #[test]
    fn words_with_the_same_stem_count_once() {
        assert_eq!(terms("Drinks drink DRINKING tea teas"), [r#""drinks""#, r#""tea""#]);
    }

    #[test]
    fn non_latin_words_are_kept() {
        assert_eq!(terms("café Évora 東京"), [r#""café""#, r#""évora""#, r#""東京""#]);
    }
}
