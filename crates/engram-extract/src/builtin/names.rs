//! People's names: "Name is …" from the words that spell one, with titles, particles and
//! capitals as people write them. Both the subject rules ("my name is") and the verb rules
//! ("I'm called", "I am Anna") come here, so neither uses the other for it.

use super::lexicon::*;
use super::phrase::fact;
use super::tokens::Tok;
use crate::ExtractedFact;

const TITLES: &[&str] = &["dr", "mr", "mrs", "ms", "miss", "prof"];

/// "Name is …" from the name words at `start`.
pub(super) fn name_fact(c: &[Tok], start: usize, score: f64) -> Option<ExtractedFact> {
    let name = name_words(c, start)?;
    Some(fact(&format!("Name is {name}"), score, &["identity"]))
}

/// Lowercase words that join the parts of a name ("Ludwig van Beethoven", "Ana de la
/// Cruz", "Leonardo da Vinci"): kept only between two name words.
const NAME_PARTICLES: &[&str] =
    &["al", "bin", "da", "de", "del", "della", "der", "di", "dos", "du", "el", "ibn", "la", "le", "van", "von"];

/// Up to three name words (particles between them do not count), capitalised ("alice
/// smith" -> "Alice Smith", "jean-luc" -> "Jean-Luc"). Letters of any script, with
/// hyphens and apostrophes inside ("Mary-Jane", "O'Brien", "D'Angelo").
pub(super) fn name_words(c: &[Tok], start: usize) -> Option<String> {
    // "User 1", "Agent 7": placeholders rather than names.
    let followed_by_number =
        c.iter().skip(start).find(|t| !(t.word && is_name_spelling(&t.text))).is_some_and(|t| is_number(&t.lower));
    if followed_by_number {
        return None;
    }
    let titled =
        c.get(start).is_some_and(|t| in_list(TITLES, &t.lower)) && c.get(start + 1).is_some_and(|t| t.text == ".");
    let words: Vec<&Tok> =
        c.iter().skip(start).enumerate().filter(|&(i, _)| !(titled && i == 1)).map(|(_, t)| t).collect();
    let mut names: Vec<String> = Vec::new();
    let mut proper = 0;
    for (i, t) in words.iter().enumerate() {
        if !t.word || !is_name_spelling(&t.text) || in_list(OBJECT_BOUNDARIES, &t.lower) || t.is("and") || t.is("but") {
            break;
        }
        // In "my name is john smith nice to meet you" only the first word is safe.
        if i == 0 || t.text.starts_with(char::is_uppercase) {
            if proper == 3 {
                break;
            }
            names.push(capitalised(&t.text));
            proper += 1;
        } else if in_list(NAME_PARTICLES, &t.lower)
            && words.get(i + 1).is_some_and(|n| n.word && n.text.starts_with(char::is_uppercase))
        {
            names.push(t.lower.clone());
        } else {
            break;
        }
    }
    if names.is_empty() || in_list(CONTEXTUAL_STARTS, &names[0].to_lowercase()) {
        return None;
    }
    Some(names.join(" "))
}

/// Letters, with single hyphens or apostrophes between them.
fn is_name_spelling(text: &str) -> bool {
    text.split(['-', '\'']).all(|part| !part.is_empty() && part.chars().all(char::is_alphabetic))
}

/// The word with a capital first letter; a word typed all in lowercase also gets one
/// after each hyphen and after an apostrophe that follows one letter ("o'brien").
fn capitalised(word: &str) -> String {
    let all_lower = !word.chars().any(char::is_uppercase);
    let mut out = String::with_capacity(word.len());
    let mut upper_next = true;
    let mut letters_in_part = 0;
    for ch in word.chars() {
        if upper_next {
            out.extend(ch.to_uppercase());
        } else {
            out.push(ch);
        }
        letters_in_part += usize::from(ch.is_alphabetic());
        upper_next = all_lower && (ch == '-' || (ch == '\'' && letters_in_part == 1));
        if !ch.is_alphabetic() {
            letters_in_part = 0;
        }
    }
    out
}
