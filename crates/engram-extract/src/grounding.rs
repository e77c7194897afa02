//! Grounding: a fact an LLM extracted is kept only when the user's own new lines hold at
//! least one of its content words (stemmed, so "vegan" meets "veganism" and "daughters"
//! meets "daughter"). A fact the model copied from the prompt, or made up, shares no word
//! with what the user said and is dropped; a fact the user stated in other words keeps at
//! least the thing it is about ("Name is Alice" from "I'm Alice").
//!
//! The price: a fact that shares no word with its source ("Is vegetarian" from "I don't eat
//! meat") is dropped too. Memory that a person never stated is the worse mistake.

use std::collections::HashSet;

use rust_stemmers::{Algorithm, Stemmer};

use super::ExtractionRequest;
use crate::domain::search_query::STOP_WORDS;

/// The words facts are framed with ("Name is …", "Likes …", "Works as …"): they say what
/// kind of fact it is, not what the user said, so they never ground one.
const FRAME_WORDS: &[&str] = &[
    "name", "named", "called", "like", "likes", "love", "loves", "enjoy", "enjoys", "prefer", "prefers", "dislike",
    "dislikes", "hate", "hates", "want", "wants", "plan", "plans", "work", "works", "live", "lives", "user",
];

/// What the user said in the new lines of a request, as the content stems facts are
/// checked against.
pub struct Said {
    stemmer: Stemmer,
    stems: HashSet<String>,
}

impl Said {
    pub fn new(request: &ExtractionRequest) -> Said {
        let stemmer = Stemmer::create(Algorithm::English);
        let stems = request.new_user_turns().flat_map(|turn| content_stems(&stemmer, &turn.text)).collect();
        Said { stemmer, stems }
    }

    /// Whether the user's new lines hold one of the content words of `fact`.
    pub fn supports(&self, fact: &str) -> bool {
        content_stems(&self.stemmer, fact).iter().any(|s| self.stems.contains(s))
    }
}

/// Each of the user's new turns, as content stems: what tells which message a fact was
/// said in, so that it is stored as observed when that message was written.
pub struct Sources {
    stemmer: Stemmer,
    /// `(seq, stems)`, newest first.
    turns: Vec<(i64, HashSet<String>)>,
}

impl Sources {
    pub fn new(request: &ExtractionRequest) -> Sources {
        let stemmer = Stemmer::create(Algorithm::English);
        let turns = request
            .new_user_turns()
            .rev()
            .map(|turn| (turn.seq, content_stems(&stemmer, &turn.text).into_iter().collect()))
            .collect();
        Sources { stemmer, turns }
    }

    /// The `seq` of the newest new user turn holding one of the content words of `fact`
    /// (the latest time the person said it); `None` when no turn does.
    pub fn of(&self, fact: &str) -> Option<i64> {
        self.all_of(fact).last().copied()
    }

    /// The `seq`s of the new user turns holding one of the content words of `fact`,
    /// oldest first: the messages an LLM's fact is drawn from, by the rule that kept it.
    pub fn all_of(&self, fact: &str) -> Vec<i64> {
        let stems = content_stems(&self.stemmer, fact);
        self.turns
            .iter()
            .rev()
            .filter(|(_, said)| stems.iter().any(|s| said.contains(s)))
            .map(|(seq, _)| *seq)
            .collect()
    }

    /// The `seq`s of every new user turn, oldest first: what a fact none of them holds a
    /// word of (a replacement in other words) is drawn from.
    pub fn every(&self) -> Vec<i64> {
        self.turns.iter().rev().map(|(seq, _)| *seq).collect()
    }
}

/// The stems of the words of `text` that carry content: lowercased runs of letters and
/// digits, without stop words and frame words.
fn content_stems(stemmer: &Stemmer, text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()) && !FRAME_WORDS.contains(&w.as_str()))
        .map(|w| stemmer.stem(&w).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Turn, domain::message::Role};

    fn request(turns: &[(Role, &str)]) -> ExtractionRequest {
        let turns = turns
            .iter()
            .enumerate()
            .map(|(i, (role, text))| Turn { seq: i as i64 + 1, role: *role, text: (*text).to_owned() })
            .collect();
        ExtractionRequest { turns, from_seq: 0, instructions: None }
    }

    fn kept(facts: &[&str], turns: &[(Role, &str)]) -> Vec<String> {
        let said = Said::new(&request(turns));
        facts.iter().filter(|f| said.supports(f)).map(|f| (*f).to_owned()).collect()
    }

    #[test]
    fn facts_the_user_stated_in_other_words_are_kept() {
        let turns = [(Role::User, "Hi, I'm Alice! I have two daughters and I'd rather drink tea.")];
        assert_eq!(
            kept(&["Name is Alice", "Has a daughter", "Prefers tea over coffee"], &turns),
            ["Name is Alice", "Has a daughter", "Prefers tea over coffee"]
        );
    }

    #[test]
    fn a_parroted_or_invented_fact_is_dropped() {
        let turns = [(Role::User, "My name is Bob and I live in Oslo.")];
        assert_eq!(kept(&["Prefers tea over coffee", "Lives in Oslo", "Likes jazz"], &turns), ["Lives in Oslo"]);
    }

    #[test]
    fn a_fact_comes_from_the_newest_new_user_turn_that_says_it() {
        let turns = [
            (Role::User, "I live in Lyon."),
            (Role::User, "I have a cat."),
            (Role::Assistant, "Is the cat from Lyon?"),
            (Role::User, "My cat is grey. Tea, please."),
        ];
        let mut request = request(&turns);
        request.from_seq = 1;
        let sources = Sources::new(&request);
        assert_eq!(sources.of("Has a grey cat"), Some(4));
        assert_eq!(sources.of("Prefers tea"), Some(4));
        assert_eq!(sources.of("Lives in Lyon"), None, "turn 1 is not new, and the assistant does not count");
        assert_eq!(sources.all_of("Has a grey cat"), [2, 4], "every new user turn that holds its words");
        assert_eq!(sources.every(), [2, 4]);
    }

    #[test]
    fn only_the_users_new_lines_count() {
        let turns = [(Role::User, "old news"), (Role::Assistant, "Do you like jazz?"), (Role::User, "Not really.")];
        let mut request = request(&turns);
        request.from_seq = 1;
        let said = Said::new(&request);
        assert!(!said.supports("Likes jazz"));
        assert!(!said.supports("Old news"));
    }
}
