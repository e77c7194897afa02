//! The rule for "I want to", shared by "I want" and "I am wanting", with the words that
//! after it name no goal.

use super::lexicon::*;
use super::phrase::{lower_words, object_end, with_object};
use super::tokens::Tok;
use crate::ExtractedFact;

pub(super) fn match_want(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    if w.get(rest) == Some(&"to") {
        let conversational = [
            "know", "hear", "see", "say", "ask", "tell", "thank", "talk", "chat", "try", "check", "read", "share",
            "make", "go", "let", "get", "do", "hang", "come", "meet", "join",
        ];
        // "I want to go to college in New York" is a goal; "I want to go" is not.
        let schooling = w.get(rest + 1..rest + 4).is_some_and(|g| {
            matches!(g, ["go", "to" | "back", x] if in_list(&["college", "school", "university", "grad", "law", "med"], x))
        });
        // "I'd love to learn", "to visit sometime", "to be friends" name no goal.
        let end = object_end(c, rest + 2).max(rest + 2);
        let bare = w.get(rest + 2..end).unwrap_or_default().iter().all(|x| in_list(NO_GOAL, x))
            || w.get(rest + 1).is_none_or(|v| never_a_verb(v) || v.ends_with("ly") || *v == "however");
        if w.get(rest + 1).is_some_and(|v| in_list(&conversational, v)) && !schooling || bare {
            return with_object(c, rest, "Wants", 0.6, &["goal"]);
        }
        return with_object(c, rest, "Wants", 0.75, &["goal"]);
    }
    with_object(c, rest, "Wants", 0.6, &["goal"])
}

/// What alone after "I want to <verb>" names no goal: "to visit sometime", "to explore
/// more", "to be friends", "to play some".
#[rustfmt::skip]
pub(super) const NO_GOAL: &[&str] = &[
    "more", "some", "sometime", "someday", "there", "again", "too", "a", "few", "one", "out",
    "around", "like", "much", "it", "that", "soon", "friends", "together", "along", "in",
];
