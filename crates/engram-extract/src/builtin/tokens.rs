//! Sentences and tokens: the text of a message cut into sentences, and each sentence into
//! words and punctuation, with contractions expanded so the rules see one spelling.

/// A sentence's text, trimmed, and whether it ended with a question mark.
pub(super) struct Sentence<'a> {
    pub(super) text: &'a str,
    pub(super) question: bool,
}

/// Abbreviations whose trailing period does not end a sentence.
const ABBREVIATIONS: &[&str] = &["mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "prof", "mt", "ft", "approx"];

/// Cuts at sentence terminators and line breaks; a run of terminators ends one sentence,
/// which is a question when any of them is a question mark.
pub(super) fn split_sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut sentences = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut chunks = ChunkScan::default();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let terminator = match c {
            '!' | '?' | '\n' | '\r' => true,
            '.' | '…' => !period_is_internal(text, &chars, i, &mut chunks),
            _ => false,
        };
        if !terminator {
            i += 1;
            continue;
        }
        let mut question = c == '?';
        let mut j = i + 1;
        while j < chars.len() && matches!(chars[j].1, '.' | '!' | '?' | '…' | '\n' | '\r') {
            question |= chars[j].1 == '?';
            j += 1;
        }
        push_sentence(&mut sentences, &text[start..pos], question);
        start = chars.get(j).map_or(text.len(), |&(p, _)| p);
        i = j;
    }
    push_sentence(&mut sentences, &text[start..], false);
    sentences
}

fn push_sentence<'a>(sentences: &mut Vec<Sentence<'a>>, text: &'a str, question: bool) {
    let text = text.trim();
    if !text.is_empty() {
        sentences.push(Sentence { text, question });
    }
}

/// Longest entry of [`ABBREVIATIONS`], in characters.
const LONGEST_ABBREVIATION: usize = 6;

/// The whitespace-delimited chunk before a character, found by one forward pass over the
/// text: looking back from every period instead was quadratic on text without spaces
/// (64 KiB of `a.-a.-…`).
#[derive(Default)]
struct ChunkScan {
    /// Characters looked at so far.
    scanned: usize,
    /// Byte offset where the current chunk starts.
    start: usize,
    /// Whether the current chunk holds a period.
    period: bool,
}

impl ChunkScan {
    /// The chunk that ends before character `i` (after the last whitespace before it), and
    /// whether it holds a period. `i` never decreases between calls.
    fn before<'a>(&mut self, text: &'a str, chars: &[(usize, char)], i: usize) -> (&'a str, bool) {
        for &(pos, c) in &chars[self.scanned.min(i)..i] {
            if c.is_whitespace() {
                (self.start, self.period) = (pos + c.len_utf8(), false);
            } else if c == '.' {
                self.period = true;
            }
        }
        self.scanned = self.scanned.max(i);
        (&text[self.start..chars[i].0], self.period)
    }
}

/// A period inside "3.5", "U.S." or "e.g.", after "Dr" or after an initial ("J. K.") does
/// not end the sentence.
fn period_is_internal(text: &str, chars: &[(usize, char)], i: usize, chunks: &mut ChunkScan) -> bool {
    if chars[i].1 != '.' {
        return false;
    }
    if chars.get(i + 1).is_some_and(|&(_, c)| c.is_alphanumeric()) {
        return true;
    }
    let (chunk, has_period) = chunks.before(text, chars, i);
    let initial = chunk.len() == 1 && chunk != "I" && chunk.starts_with(char::is_uppercase);
    // Lowercasing never makes fewer characters, and a character is at most 4 bytes: a
    // longer chunk cannot be an abbreviation, and is not lowercased (that is linear too).
    let abbreviation =
        chunk.len() <= 4 * LONGEST_ABBREVIATION && ABBREVIATIONS.contains(&chunk.to_lowercase().as_str());
    has_period || initial || abbreviation
}

/// A word or a punctuation mark.
#[derive(Debug, Clone)]
pub(super) struct Tok {
    /// Original spelling, kept so that names and places keep their capitals.
    pub(super) text: String,
    pub(super) lower: String,
    pub(super) word: bool,
}

impl Tok {
    fn word(text: &str) -> Self {
        Tok { text: text.to_string(), lower: text.to_lowercase(), word: true }
    }

    fn punct(c: char) -> Self {
        Tok { text: c.to_string(), lower: c.to_string(), word: false }
    }

    pub(super) fn is(&self, word: &str) -> bool {
        self.lower == word
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '$' | '%' | '#' | '+' | '&')
}

/// Splits into words and punctuation, expanding contractions so that the rules only have
/// to know one spelling ("I'm" and "I am", "don't" and "do not").
pub(super) fn tokenize(text: &str) -> Vec<Tok> {
    let normalised: String = text
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '`' => '\'',
            '\u{201c}' | '\u{201d}' => '"',
            '\u{2013}' | '\u{2014}' => '-',
            other => other,
        })
        .collect();
    let chars: Vec<char> = normalised.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if !is_word_char(c) {
            tokens.push(Tok::punct(c));
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() {
            let c = chars[i];
            let joiner =
                matches!(c, '\'' | '-' | '.') && i > start && chars.get(i + 1).is_some_and(|&n| is_word_char(n));
            if is_word_char(c) || joiner {
                i += 1;
            } else {
                break;
            }
        }
        // Initials keep their period: "J. Cole" and "the U.S." are names, not sentence ends.
        let letters = &chars[start..i];
        let initials = letters.iter().step_by(2).all(|c| c.is_alphabetic())
            && letters.iter().skip(1).step_by(2).all(|&c| c == '.')
            && letters != ['I'];
        if initials && letters.len() % 2 == 1 && chars.get(i) == Some(&'.') {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        push_word(&mut tokens, &word);
    }
    tokens
}

/// Auxiliaries whose negation is often written without the apostrophe ("dont", "didnt",
/// "isnt"); none is an English word with "nt" after it.
const UNMARKED_NEGATABLE: &[&str] =
    &["do", "does", "did", "is", "was", "are", "were", "has", "have", "had", "would", "could", "should"];

fn push_word(tokens: &mut Vec<Tok>, word: &str) {
    let lower = word.to_lowercase();
    let expansion: Option<&[&str]> = match lower.as_str() {
        "i'm" | "im" => Some(&["I", "am"]),
        "i've" => Some(&["I", "have"]),
        "i'd" => Some(&["I", "would"]),
        "i'll" => Some(&["I", "will"]),
        "can't" | "cant" | "cannot" => Some(&["can", "not"]),
        "won't" => Some(&["will", "not"]),
        "ain't" => Some(&["is", "not"]),
        "ive" => Some(&["I", "have"]),
        "wont" => Some(&["will", "not"]),
        "it's" => Some(&["it", "is"]),
        "that's" => Some(&["that", "is"]),
        "there's" => Some(&["there", "is"]),
        "what's" => Some(&["what", "is"]),
        "he's" => Some(&["he", "is"]),
        "she's" => Some(&["she", "is"]),
        "name's" => Some(&["name", "is"]),
        "you're" => Some(&["you", "are"]),
        "we're" => Some(&["we", "are"]),
        "they're" => Some(&["they", "are"]),
        "you've" => Some(&["you", "have"]),
        "we've" => Some(&["we", "have"]),
        "they've" => Some(&["they", "have"]),
        // Informal spellings of chat: "i wanna be a doctor" is "I want to be a doctor".
        "wanna" => Some(&["want", "to"]),
        "gonna" => Some(&["going", "to"]),
        "gotta" => Some(&["got", "to"]),
        "kinda" => Some(&["kind", "of"]),
        "alot" => Some(&["a", "lot"]),
        "tho" => Some(&["though"]),
        "cuz" | "coz" => Some(&["because"]),
        "luv" => Some(&["love"]),
        _ => None,
    };
    // "I m", "I ve": a contraction whose apostrophe became a space.
    let after_i = tokens.last().is_some_and(|t| t.is("i"));
    let split_contraction = match lower.as_str() {
        "m" if after_i => Some("am"),
        "ve" if after_i => Some("have"),
        _ => None,
    };
    // "didnt", "wasnt": a negated auxiliary written without its apostrophe.
    let unmarked_negation = lower.strip_suffix("nt").filter(|stem| UNMARKED_NEGATABLE.contains(stem));
    if let Some(parts) = expansion {
        tokens.extend(parts.iter().map(|p| Tok::word(p)));
    } else if let Some(word) = split_contraction {
        tokens.push(Tok::word(word));
    } else if let Some(stem) = lower.strip_suffix("n't").or(unmarked_negation) {
        tokens.push(Tok::word(stem));
        tokens.push(Tok::word("not"));
    } else {
        tokens.push(Tok::word(word));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_abbreviation_is_known() {
        assert_eq!(ABBREVIATIONS.iter().map(|a| a.chars().count()).max(), Some(LONGEST_ABBREVIATION));
    }

    #[test]
    fn contractions_written_without_their_apostrophe_are_expanded() {
        let words = |text: &str| tokenize(text).into_iter().map(|t| t.lower).collect::<Vec<_>>();
        assert_eq!(words("Ulla, I m the welder")[2..4], ["i", "am"]);
        assert_eq!(words("i ve got ferrets")[..2], ["i", "have"]);
        assert_eq!(words("ive got ferrets")[..2], ["i", "have"]);
        let negated = words("Ulla wasnt born in Oslo, I wont move, Bo didnt, Al dont");
        let nots: Vec<&str> = negated.windows(2).filter(|w| w[1] == "not").map(|w| w[0].as_str()).collect();
        assert_eq!(nots, ["was", "will", "did", "do"]);
        assert_eq!(
            words("Jim m meters isnt"),
            ["jim", "m", "meters", "is", "not"],
            "a lone m after another word stays"
        );
    }

    #[test]
    fn informal_spellings_are_read_as_said() {
        let words = |text: &str| tokenize(text).into_iter().map(|t| t.lower).collect::<Vec<_>>();
        assert_eq!(words("i wanna be a doctor"), ["i", "want", "to", "be", "a", "doctor"]);
        assert_eq!(
            words("Im gonna move, I kinda like it alot tho"),
            ["i", "am", "going", "to", "move", ",", "i", "kind", "of", "like", "it", "a", "lot", "though"]
        );
    }

    #[test]
    fn sentences_end_at_terminators_not_at_abbreviations() {
        assert_eq!(split_sentences("I live in the U.S. now. Dr. Who? Yes").len(), 3);
        assert!(split_sentences("Really?")[0].question);
    }
}
