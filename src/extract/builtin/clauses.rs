//! Sentence-level filters and clause splitting: filler at the start of a sentence, questions
//! and hypotheticals (which state no fact), and the cut of a sentence into clauses that
//! each state at most one fact.

use super::tokens::Tok;

/// Words that open a message without carrying content ("Oh, well, I live in Paris").
#[rustfmt::skip]
pub(super) const LEAD_WORDS: &[&str] = &[
    "oh", "well", "yeah", "yes", "yep", "yup", "no", "nope", "haha", "hahaha", "lol", "wow", "hi",
    "hello", "hey", "ok", "okay", "sure", "also", "actually", "honestly", "personally", "anyway",
    "anyways", "um", "uh", "hmm", "ah", "aw", "cool", "great", "nice", "right", "true", "and",
    "but", "so", "plus", "then", "because", "cause", "since", "although", "though", "while",
    "whereas", "or", "yet", "as", "really", "besides", "fortunately", "luckily", "sadly",
    "unfortunately", "btw", "and", "awesome", "indeed",
];

const GREETINGS: &[&str] = &["hi", "hello", "hey"];

/// Skips punctuation and filler words; reports whether a greeting was among them, which
/// makes "Hi, I'm Alice" an introduction rather than a description.
pub(super) fn skip_lead(tokens: &[Tok], mut i: usize) -> (usize, bool) {
    let mut greeting = false;
    while let Some(tok) = tokens.get(i) {
        if !tok.word || LEAD_WORDS.contains(&tok.lower.as_str()) {
            greeting |= GREETINGS.contains(&tok.lower.as_str());
            i += 1;
        } else if greeting && (tok.is("there") || tok.is("everyone") || tok.is("all")) {
            i += 1;
        } else {
            break;
        }
    }
    (i, greeting)
}

const WH_WORDS: &[&str] = &["what", "who", "where", "when", "why", "how", "which", "whose"];
pub(super) const AUXILIARIES: &[&str] = &[
    "do", "does", "did", "is", "are", "am", "was", "were", "can", "could", "would", "will", "should", "have", "has",
    "had", "shall", "may", "might",
];
const SUBJECTS: &[&str] = &["i", "you", "we", "they", "he", "she", "it", "my", "your", "there", "u"];

/// Catches questions whose question mark was left off ("what is my name").
pub(super) fn is_question(tokens: &[Tok]) -> bool {
    let first = tokens.first().map(|t| t.lower.as_str());
    let second = tokens.get(1).map(|t| t.lower.as_str());
    match (first, second) {
        (Some(a), Some(b)) if WH_WORDS.contains(&a) => AUXILIARIES.contains(&b),
        (Some(a), Some(b)) if AUXILIARIES.contains(&a) => SUBJECTS.contains(&b),
        _ => false,
    }
}

/// A sentence that opens a hypothetical frame states nothing about the user, in any of its
/// clauses ("If I lived in Paris, I would walk everywhere").
pub(super) fn is_hypothetical(tokens: &[Tok]) -> bool {
    let words: Vec<&str> = tokens.iter().take(2).map(|t| t.lower.as_str()).collect();
    matches!(
        words.as_slice(),
        ["if" | "imagine" | "suppose" | "supposing" | "pretend" | "hypothetically" | "unless", ..]
            | ["what" | "even" | "as", "if"]
            | ["let's" | "lets", "say" | "imagine" | "pretend"]
    )
}

const CONJUNCTIONS: &[&str] = &[
    "and", "but", "so", "because", "cause", "since", "although", "though", "while", "plus", "also", "then", "or",
    "yet", "whereas", "now", "as",
];

/// Splits a sentence where a new first-person clause starts, so that
/// "I'm a nurse and I live in Paris" yields two clauses.
pub(super) fn split_clauses(tokens: &[Tok]) -> Vec<&[Tok]> {
    let mut clauses = Vec::new();
    let mut start = 0;
    for j in 1..tokens.len() {
        let tok = &tokens[j];
        let hard = !tok.word && matches!(tok.text.as_str(), ";" | ":");
        let prev = &tokens[j - 1];
        let soft = (tok.is("i") || tok.is("my")) && (prev.text == "," || CONJUNCTIONS.contains(&prev.lower.as_str()));
        // "Hi, I'm Bob" stays one clause so that the greeting is seen with the name. Only
        // asked at a soft split: the scan stops at token `j` at the latest, and at most one
        // soft split per `start` fails, so a sentence costs linear time (asked at every
        // token, it was quadratic on a long run of punctuation).
        let only_lead = || skip_lead(tokens, start).0 >= j;
        if hard || (soft && !only_lead()) {
            if j > start {
                clauses.push(&tokens[start..j]);
            }
            start = if hard { j + 1 } else { j };
        }
    }
    if start < tokens.len() {
        clauses.push(&tokens[start..]);
    }
    clauses
}

/// Verbs that state what a person does, for splitting "I play the guitar and sing in a
/// band": both sides must be one of these, in the form "I" takes. Preference and plan verbs
/// are left out (in "I like to read and write" the second verb is still liked, not done),
/// and so are words as often nouns ("golf", "fish", "garden": "I play tennis and golf").
const ACTION_VERBS: &[&str] = &[
    "play",
    "work",
    "live",
    "own",
    "drive",
    "teach",
    "study",
    "speak",
    "volunteer",
    "go",
    "ride",
    "coach",
    "collect",
    "practice",
    "paint",
    "draw",
    "knit",
    "sew",
    "cook",
    "bake",
    "sing",
    "dance",
    "swim",
    "hike",
    "write",
    "climb",
    "travel",
    "meditate",
    "restore",
    "grow",
    "raise",
];

/// Where "and" joins a second verb phrase to a first-person clause whose own verb is an
/// action ("I play the guitar and sing in a band" -> at "and"), so that each side can be
/// read as its own clause. `start` is where the clause's words begin (after lead words).
pub(super) fn verb_coordination(clause: &[Tok], start: usize) -> Option<usize> {
    let words = clause.get(start..)?;
    if !words.first()?.is("i") || !ACTION_VERBS.contains(&words.get(1)?.lower.as_str()) {
        return None;
    }
    let at = words.iter().skip(2).position(|t| t.is("and"))? + 2;
    let next = words.get(at + 1)?;
    (next.word && ACTION_VERBS.contains(&next.lower.as_str())).then_some(start + at)
}
