//! Built-in fact extractor: deterministic English rules and a small built-in clause model that
//! need no download, no embeddings and no network.
//!
//! It turns the user's own first-person statements ("I live in Paris", "My name is Alice")
//! into short third-person facts ("Lives in Paris", "Name is Alice"), each with a confidence
//! score and category tags. It favours precision over recall: questions, hypotheticals and
//! statements about other people are skipped rather than guessed at, a negation is kept
//! only in forms that state a lasting fact ("I don't eat meat"), and every pattern that can misfire scores below the service's default `min_confidence`
//! (0.7), so only the reliable patterns are stored unless an agent lowers its threshold.
//!
//! The pipeline, one module per step: `tokens` cuts a message into sentences and words,
//! `clauses` drops questions and hypotheticals and splits sentences into clauses, `rules`
//! and `verbs` match each clause against patterns whose word lists live in `lexicon`, and
//! `phrase` turns what a rule captured into the fact's text. A clause no rule reads, or a
//! rule's fact it doubts, is restated (`restate`) and weighed by a small trained model
//! (`features`, `clause_model`): people state facts about themselves in more forms than
//! rules can list, and which of them are lasting facts is learnt from human chat. The
//! model only adds facts; without its weights the rules stand alone.

mod being;
mod clause_model;
mod clauses;
mod features;
mod lexicon;
mod mentions;
mod names;
mod phrase;
mod restate;
mod rules;
mod statement;
mod tokens;
pub mod training;
mod verbs;
mod wants;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use super::{ExtractedFact, ExtractionRequest};
use crate::domain::{message::Role, search_query::STOP_WORDS};
use clause_model::ClauseModel;
use clauses::{
    denies, implied_subject, is_hypothetical, is_question, place_answer, question_after_statement, short_answer,
    skip_lead, split_clauses, statements,
};
use mentions::Whose;
use rules::match_clause;
use tokens::{Tok, split_sentences, tokenize};

/// Extracts facts from the user turns with `seq > from_seq`, in order of appearance,
/// deduplicated case-insensitively.
pub fn extract(request: &ExtractionRequest) -> Vec<ExtractedFact> {
    read(request, ClauseModel::embedded(), None)
}

/// The service's default `min_confidence`: a rule's fact from it up is kept as it is; one
/// below it the clause model may raise.
const DEFAULT_MIN_CONFIDENCE: f64 = 0.7;

/// A clause no rule read (or a rule's doubted fact), restated, with what the clause model
/// sees of it.
pub struct Candidate {
    /// The restatement ("Coaches their niece's chess club").
    pub text: String,
    /// Its hashed features (`features::of`).
    pub features: Vec<u32>,
}

/// The facts of `request`: the rules' and, where no rule read a clause, its restatement
/// when `model` keeps it; a rule's doubted fact the model keeps is raised to the model's
/// score. Each restated clause is also put in `candidates` when asked, for
/// training a model.
fn read(
    request: &ExtractionRequest,
    model: Option<&ClauseModel>,
    mut candidates: Option<&mut Vec<Candidate>>,
) -> Vec<ExtractedFact> {
    let mut found = Found::default();
    let mut mentioned = Vec::new();
    // The last yes-no question asked ("Do you have pets?"), which a short answer completes.
    let mut asked: Option<Vec<Tok>> = None;
    // Whether the other person's last turn asked anything.
    let mut questioned = false;
    // Relatives, pets and things the other person's last turn called the user's ("How is
    // your daughter?"): the user has them when the answer takes them up and denies nothing.
    let mut offered = Vec::new();
    // Where the user lives, said in passing ("cold here in Boston"), if no fact says it.
    let mut home = None;
    for turn in &request.turns {
        if turn.role != Role::User || turn.seq <= request.from_seq {
            let sentences = split_sentences(&turn.text);
            questioned = sentences.iter().any(|s| s.question);
            asked = sentences.last().filter(|s| s.question).map(|s| tokenize(s.text));
            offered = match turn.role {
                Role::Assistant => sentences
                    .iter()
                    .map(|s| tokenize(s.text))
                    .filter(|tokens| !is_hypothetical(tokens))
                    .flat_map(|tokens| mentions::of(&tokens, Whose::Listener))
                    .collect(),
                _ => Vec::new(),
            };
            continue;
        }
        let sentences = split_sentences(&turn.text);
        if !offered.is_empty() && !sentences.first().is_some_and(|s| denies(&tokenize(s.text))) {
            let answer: Vec<Tok> = sentences.iter().flat_map(|s| tokenize(s.text)).collect();
            mentioned.extend(offered.drain(..).filter(|m| m.taken_up(&answer)).map(|m| m.said_in(turn.seq)));
        }
        offered.clear();
        // "Hi! I'm Bob": the greeting makes the next sentence an introduction.
        let mut greeted = false;
        // "I live in the country. Just drive my truck": the subject carries on.
        let mut about_self = false;
        for sentence in sentences {
            let mut tokens = tokenize(sentence.text);
            let (mut start, greeting) = skip_lead(&tokens, 0);
            if about_self && let Some(with_subject) = implied_subject(&tokens, start) {
                (tokens, start) = (with_subject, 0);
            }
            if let Some(statement) = asked
                .take()
                .and_then(|question| short_answer(&question, &tokens).or_else(|| place_answer(&question, &tokens)))
            {
                (tokens, start) = (statement, 0);
            }
            if sentence.question {
                asked = Some(tokens.clone());
            }
            about_self = tokens.get(start).is_some_and(|t| t.is("i")) && !sentence.question;
            let after_greeting = greeted;
            greeted = greeting && start == tokens.len();
            if is_question(&tokens[start..]) || is_hypothetical(&tokens[start..]) {
                continue;
            }
            if sentence.question {
                let Some(end) = question_after_statement(&tokens, start) else { continue };
                tokens.truncate(end);
            }
            mentioned.extend(mentions::of(&tokens[start..], Whose::Speaker).into_iter().map(|m| m.said_in(turn.seq)));
            home = home.or_else(|| mentions::home(&tokens[start..]).map(|fact| said_in(fact, turn.seq)));
            for (n, clause) in split_clauses(&tokens).into_iter().enumerate() {
                let (lead, _) = skip_lead(clause, 0);
                for part in statements(clause, lead) {
                    let context = features::Context { asked: questioned, opens_sentence: n == 0 };
                    // The rules' decision stands where they read the clause; the clause
                    // model weighs a restatement of those they do not.
                    let (text, doubted) = match match_clause(&part, after_greeting) {
                        Some(fact)
                            if fact.score >= DEFAULT_MIN_CONFIDENCE || !restate::may_reweigh(&part, &fact.fact) =>
                        {
                            found.add(said_in(fact, turn.seq));
                            continue;
                        }
                        Some(fact) => (fact.fact.clone(), Some(fact)),
                        None => match restate::restate(&part) {
                            Some(text) => (text, None),
                            None => continue,
                        },
                    };
                    let (lead, _) = skip_lead(&part, 0);
                    let features = features::of(&part[lead..], context, doubted.is_some());
                    let p = model.map(|m| (m, m.probability(&features))).filter(|(m, p)| *p >= m.threshold());
                    let fact = match (p, doubted) {
                        (Some((m, p)), Some(fact)) => Some(ExtractedFact { score: m.score(p), ..fact }),
                        (None, doubted) => doubted,
                        (Some((m, p)), None) => {
                            let tags = phrase::tags_for(&phrase::lower_words(&part, lead), "personal");
                            Some(phrase::fact(&text, m.score(p), &tags))
                        }
                    };
                    if let Some(fact) = fact {
                        found.add(said_in(fact, turn.seq));
                    }
                    if let Some(out) = candidates.as_deref_mut() {
                        out.push(Candidate { text, features });
                    }
                }
            }
        }
        questioned = false;
    }
    // Relatives, pets and possessions named in passing come last, and only those no fact
    // already tells of (`mentions::covered_by`).
    if let Some(home) = home.filter(|_| !found.facts.iter().any(|f| f.fact.starts_with("Lives "))) {
        found.add(home);
    }
    let mut covered: HashSet<&str> = found.facts.iter().flat_map(|f| mentions::covered_by(&f.fact)).collect();
    for mention in mentioned {
        if covered.insert(mention.noun) {
            found.add(mention.fact);
        }
    }
    let mut facts = found.facts;
    facts.retain(|f| names_something(&f.fact));
    facts
}

/// `fact`, read from the user message `seq`.
fn said_in(fact: ExtractedFact, seq: i64) -> ExtractedFact {
    ExtractedFact { said_in: vec![seq], ..fact }
}

/// The facts read so far, in order, each text once (case-insensitively), with every
/// message it was read from. A fact said again
/// more surely takes the surer reading: "I'm Jean-Luc by the way" is a doubted name, and
/// "My name is Jean-Luc" after it used to be dropped as its duplicate, leaving the doubt.
#[derive(Default)]
struct Found {
    facts: Vec<ExtractedFact>,
    at: HashMap<String, usize>,
}

impl Found {
    fn add(&mut self, fact: ExtractedFact) {
        match self.at.entry(fact.fact.to_lowercase()) {
            Entry::Occupied(at) => {
                let kept = &mut self.facts[*at.get()];
                let mut said_in = std::mem::take(&mut kept.said_in);
                let more: Vec<i64> = fact.said_in.iter().copied().filter(|seq| !said_in.contains(seq)).collect();
                said_in.extend(more);
                if fact.score > kept.score {
                    *kept = fact;
                }
                kept.said_in = said_in;
            }
            Entry::Vacant(at) => {
                at.insert(self.facts.len());
                self.facts.push(fact);
            }
        }
    }
}

/// Whether a fact tells a memory something: not stop words alone ("I have a few", "I'm
/// from [city]" with its placeholder, "I've only been once" leave "Has a few", "Is from",
/// "Has only been once"), and not ending on a verb that needs what the conversation
/// around it said ("I want to go", "I try to be", "I have time to do": "Wants to go").
fn names_something(fact: &str) -> bool {
    let words: Vec<String> =
        fact.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    let dangles = matches!(&words[..], [.., to, verb] if to == "to" && lexicon::in_list(NEEDS_AN_OBJECT, verb));
    !dangles && words.iter().any(|w| !STOP_WORDS.contains(&w.as_str()))
}

/// Verbs that say nothing without what follows them.
const NEEDS_AN_OBJECT: &[&str] = &["go", "do", "be", "have", "see", "try", "get", "make", "spend", "know"];

#[cfg(test)]
mod tests;
