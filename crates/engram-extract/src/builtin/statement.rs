//! The last resort for a first-person clause no rule knows: "I volunteer at the shelter",
//! "I collect vinyl records", "I went to college for nursing". People state lasting facts
//! about themselves with far more verbs than the rules can list one by one; on human chat
//! (Multi-Session Chat) the rules alone heard one persona sentence in six.
//!
//! The clause is kept as it was said, in the third person ("Volunteers at the shelter"),
//! when its form is that of a statement about oneself: "I", optional adverbs, then a main
//! verb with an object that stands without the conversation around it. Forms that state a
//! stance or a moment rather than a fact are refused: verbs of thinking and saying ("I
//! think …", "I guess …", "I hear you"), modals and auxiliaries (the rules own "I am",
//! "I have", "I can", and the future is not yet a fact), and clauses anchored in the
//! present moment ("today", "right now", "last night").

use super::clauses::AUXILIARIES;
use super::lexicon::{in_list, is_past, never_a_verb};
use super::phrase::{fact, lower_words, object, tags_for, third_person};
use super::tokens::Tok;
use crate::ExtractedFact;

/// The score of such a fact: the service's default `min_confidence`, so that it is stored
/// by default and dropped first by an agent that asks for more certainty. Measured on the
/// Multi-Session Chat development split, these facts matched a persona sentence about as
/// often as the rules' facts scored 0.7.
const SCORE: f64 = 0.7;

/// Verbs whose clause says what the speaker thinks, perceives, says or wants in the
/// conversation rather than who they are, and verbs whose rules already decided (a clause
/// "I love that" that the preference rule refused stays refused).
#[rustfmt::skip]
const STANCE_VERBS: &[&str] = &[
    "think", "thought", "know", "knew", "guess", "hope", "hoped", "bet", "feel", "felt", "smell",
    "believe", "wonder", "mean", "meant", "agree", "understand", "hear", "heard", "imagine",
    "suppose", "doubt", "see", "saw", "assume", "say", "said", "wish", "tell", "told", "love",
    "like", "enjoy", "hate", "prefer", "want", "need", "appreciate", "remember", "forgot",
    "forget", "figured", "figure", "noticed", "notice", "find", "recommend", "suggest", "totally",
    "gotta", "got", "get", "let", "retired", "played", "come", "grew", "lost", "plan", "intend",
    "dream", "code", "program", "turned", "wake", "speak", "would", "will", "shall", "must", "may", "might", "ought", "better",
    "not", "never", "no", "am", "had", "were", "been", "thank", "miss", "wanted", "needed",
    "loved", "liked", "enjoyed", "hated", "try", "tried", "trying", "'d", "'ll",
];

/// Words that tie a clause to the moment of the conversation: an event, not a fact.
#[rustfmt::skip]
const MOMENT_WORDS: &[&str] = &[
    "today", "tonight", "yesterday", "tomorrow", "later", "soon", "morning", "afternoon",
    "evening", "weekend", "earlier", "lately", "anymore", "yet",
];

/// A fact from a first-person clause `c` whose verb, at `k` after "I" and adverbs, no rule
/// knows; `None` when the clause does not have the form of a lasting statement about the
/// speaker. A past verb stays as it was said ("Went to college for nursing"): on the
/// Multi-Session Chat development split such facts matched a persona sentence half the
/// time, as often as the present ones.
pub(super) fn plain_statement(c: &[Tok], k: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let verb = *w.get(k)?;
    let is_word = c[k].word && verb.chars().all(|ch| ch.is_alphabetic());
    let past = is_past(verb);
    if !is_word || in_list(STANCE_VERBS, verb) || in_list(AUXILIARIES, verb) || never_a_verb(verb) {
        return None;
    }
    if w.iter().any(|x| in_list(MOMENT_WORDS, x)) {
        return None;
    }
    let obj = object(c, k + 1)?;
    let tags = tags_for(&w[k + 1..], "personal");
    let said = if past { verb.to_owned() } else { third_person(verb) };
    Some(fact(&format!("{said} {obj}"), SCORE, &tags))
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokenize;
    use super::*;

    /// The statement read from `text`, its verb right after "I" and any adverbs.
    fn said(text: &str) -> Option<String> {
        let c = tokenize(text);
        let k = 1 + c.iter().skip(1).take_while(|t| in_list(super::super::lexicon::ADVERBS, &t.lower)).count();
        plain_statement(&c, k).map(|f| f.fact)
    }

    #[test]
    fn a_first_person_clause_with_any_verb_is_a_fact() {
        assert_eq!(said("I volunteer at the animal shelter").as_deref(), Some("Volunteers at the animal shelter"));
        assert_eq!(said("I really collect vinyl records").as_deref(), Some("Collects vinyl records"));
        assert_eq!(said("I watch horror movies").as_deref(), Some("Watches horror movies"));
        assert_eq!(said("I breed rabbits").as_deref(), Some("Breeds rabbits"));
        assert_eq!(said("I went to college for nursing").as_deref(), Some("Went to college for nursing"));
        assert_eq!(said("I stood in for the actor").as_deref(), Some("Stood in for the actor"));
        assert_eq!(said("I trained dogs").as_deref(), Some("Trained dogs"));
        assert!(plain_statement(&tokenize("I raise chickens"), 1).is_some_and(|f| f.score >= 0.7));
    }

    #[test]
    fn a_pronoun_or_an_article_after_i_is_no_verb() {
        assert_eq!(said("I its quite hard"), None);
        assert_eq!(said("I the dog runs"), None);
        assert_eq!(said("I that works"), None);
        assert_eq!(said("I it is hard"), None);
    }

    #[test]
    fn stances_moments_events_and_context_are_not_facts() {
        assert_eq!(said("I think the movie was great"), None);
        assert_eq!(said("I hear you"), None);
        assert_eq!(said("I smell like coffee all the time"), None);
        // "I (had) better go" is a modal, not "Betters go".
        assert_eq!(said("I better get back on the road"), None);
        assert_eq!(said("I will bake a pie"), None);
        assert_eq!(said("I bake pies today"), None);
        assert_eq!(said("I do that"), None);
        assert_eq!(said("I watch your show"), None);
        assert_eq!(said("I 100 percent agree"), None);
    }
}
