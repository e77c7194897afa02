//! Text rules for user facts: the display form a fact is stored under
//! ([`clean`]) and the duplicate key two facts are compared by
//! ([`normalize`]).
//!
//! Both are pure and cheap so that every write path (extraction, manual
//! insert, import) can apply them before touching storage, and so that the
//! dedup key can be recomputed from stored text at any time.

/// The English words for the whole numbers one to ninety (hyphenated ones, "twenty-one",
/// are made of them): the builtin extractor reads ages and counts with them, and
/// near-duplicates compare the numbers facts hold.
#[rustfmt::skip]
pub const NUMBER_WORDS: [&str; 27] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// Characters that render as a dot/comma-like sentence ending. A fact that
/// differs from another only by how it was punctuated at the end says the same
/// thing, so these are stripped from the duplicate key.
const TRAILING_PUNCTUATION: [char; 7] = ['.', ',', ';', ':', '!', '?', '…'];

/// Unicode general category `Cf` (format characters), as of Unicode 16.
///
/// These are invisible (zero-width spaces, joiners, bidi overrides, BOM, tag
/// characters), so two strings that look identical can differ only by them;
/// they are also a classic way to smuggle hidden instructions into a prompt.
/// The standard library has no category lookup, hence the table.
const FORMAT_RANGES: [(char, char); 21] = [
    ('\u{00AD}', '\u{00AD}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{06DD}', '\u{06DD}'),
    ('\u{070F}', '\u{070F}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08E2}', '\u{08E2}'),
    ('\u{180E}', '\u{180E}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFF9}', '\u{FFFB}'),
    ('\u{110BD}', '\u{110BD}'),
    ('\u{110CD}', '\u{110CD}'),
    ('\u{13430}', '\u{1343F}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0001}', '\u{E0001}'),
    ('\u{E0020}', '\u{E007F}'),
];

/// Whether `c` is an invisible format character (category `Cf`); shared with
/// the prompt builder, which must not let such characters reach a model.
pub(crate) fn is_format_char(c: char) -> bool {
    FORMAT_RANGES.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// The form a fact is stored and shown in.
///
/// Facts arrive from LLM extraction and from API clients, often with stray
/// newlines, tabs or escape sequences; storing them verbatim would leak those
/// into every prompt and UI that shows the fact. Control characters (category
/// `Cc`) become spaces, every run of Unicode whitespace becomes one space, and
/// the ends are trimmed. Case and punctuation are kept: this is what a person
/// reads.
pub fn clean(fact: &str) -> String {
    let spaced: String = fact.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    collapse_whitespace(&spaced)
}

/// The duplicate key: two facts with the same key are "the same fact".
///
/// The key ignores differences a reader would not count as a different
/// statement: letter case (Unicode lowercasing), invisible format characters
/// (removed, so `te\u{200B}a` keys as `tea`), control characters and
/// whitespace runs (one space, trimmed), and trailing sentence punctuation
/// (`. , ; : ! ? …`, stripped repeatedly together with any whitespace between
/// them). Leading and inner punctuation is kept, because it can carry meaning
/// ("A.C.M.E", "C#", "-5°C").
///
/// `normalize(normalize(x)) == normalize(x)` and
/// `normalize(clean(x)) == normalize(x)`, so keys can be computed from either
/// raw or stored text.
pub fn normalize(fact: &str) -> String {
    let visible: String = fact.chars().filter(|&c| !is_format_char(c)).collect();
    let lowered = clean(&visible).to_lowercase();
    lowered.trim_end_matches(|c: char| TRAILING_PUNCTUATION.contains(&c) || c.is_whitespace()).to_owned()
}

/// Joins the whitespace-separated words of `text` with single spaces, which
/// both collapses inner runs and trims the ends.
fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn clean_trims_and_collapses_whitespace() {
        assert_eq!(clean("  Prefers   tea \t over coffee.  "), "Prefers tea over coffee.");
    }

    #[test]
    fn clean_replaces_control_characters_with_space() {
        assert_eq!(clean("Name\nis\r\nAlice"), "Name is Alice");
        assert_eq!(clean("a\u{0}b\u{1b}[31mc\u{7f}d"), "a b [31mc d");
        assert_eq!(clean("a\u{85}b"), "a b");
    }

    #[test]
    fn clean_keeps_case_and_punctuation() {
        assert_eq!(clean("Works at A.C.M.E!!"), "Works at A.C.M.E!!");
    }

    #[test]
    fn clean_of_blank_is_empty() {
        assert_eq!(clean(" \n\t\u{0} "), "");
    }

    #[test]
    fn normalize_examples() {
        assert_eq!(normalize("Prefers tea over coffee."), "prefers tea over coffee");
        assert_eq!(normalize("  prefers TEA over   coffee"), "prefers tea over coffee");
        assert_eq!(normalize("Likes tea!!! "), "likes tea");
        assert_eq!(normalize("Likes tea . ! …"), "likes tea");
        assert_eq!(normalize("Works at A.C.M.E."), "works at a.c.m.e");
        assert_eq!(normalize("...hello"), "...hello");
        assert_eq!(normalize("?!."), "");
    }

    #[test]
    fn normalize_removes_invisible_format_characters() {
        assert_eq!(normalize("li\u{200B}kes\u{FEFF} tea"), "likes tea");
        assert_eq!(normalize("likes \u{200B} tea"), "likes tea");
    }

    #[test]
    fn pairs_that_must_be_equal() {
        let pairs = [
            ("Prefers tea over coffee.", "  prefers TEA over   coffee"),
            ("Likes tea!!! ", "likes tea"),
            ("likes tea", "LIKES TEA…"),
            ("likes\ttea", "likes  tea"),
            ("likes\ntea", "likes tea"),
            ("likes tea.", "likes tea ."),
            ("likes tea;:", "likes tea,"),
            ("Lives in ÉVORA", "lives in évora"),
            ("likes\u{00A0}tea", "likes tea"),
            ("likes tea\u{200B}", "likes tea"),
        ];
        for (a, b) in pairs {
            assert_eq!(normalize(a), normalize(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn pairs_that_must_differ() {
        let pairs = [
            ("likes tea", "likes teal"),
            ("likes tea", "dislikes tea"),
            ("likes tea", "likes-tea"),
            ("Works at A.C.M.E", "Works at ACME"),
            ("score is 5", "score is -5"),
            ("likes tea?", "likes tea? no"),
            ("likes C", "likes C#"),
        ];
        for (a, b) in pairs {
            assert_ne!(normalize(a), normalize(b), "{a:?} vs {b:?}");
        }
    }

    /// Arbitrary text biased towards the characters the rules care about.
    fn fact_text() -> impl Strategy<Value = String> {
        let interesting = prop::sample::select(vec![
            ' ', '\t', '\n', '\r', '\u{0}', '\u{85}', '\u{A0}', '\u{2028}', '\u{200B}', '\u{FEFF}', '.', ',', ';', ':',
            '!', '?', '…', 'A', 'a', 'Σ', 'ς', 'İ', 'ß', 'É',
        ]);
        let ch = prop_oneof![interesting, any::<char>()];
        prop::collection::vec(ch, 0..40).prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn normalize_is_idempotent(s in fact_text()) {
            let once = normalize(&s);
            prop_assert_eq!(normalize(&once), once);
        }

        #[test]
        fn normalize_ignores_cleaning(s in fact_text()) {
            prop_assert_eq!(normalize(&clean(&s)), normalize(&s));
        }

        #[test]
        fn clean_is_idempotent_and_tidy(s in fact_text()) {
            let c = clean(&s);
            prop_assert_eq!(clean(&c), c.clone());
            prop_assert!(!c.chars().any(char::is_control));
            prop_assert!(!c.contains("  "));
            prop_assert_eq!(c.trim(), c.as_str());
        }
    }
}
