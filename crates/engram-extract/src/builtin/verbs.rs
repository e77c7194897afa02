//! Rules for clauses that start with "I", one per verb ("I live in", "I have", "I like"),
//! with "I am" and "I was" in `being`. Each rule's score says how far its pattern can be trusted:
//! below the default `min_confidence` (0.7) where it can misfire.

use super::being::{
    FAMILY_STATUSES, LASTING_STATES, in_group, is_past_participle, lasting_state_tag, match_am, match_was, place,
    plan_in_making,
};
use super::clauses::AUXILIARIES;
use super::lexicon::*;
use super::mentions;
use super::phrase::{
    fact, lower_words, mentions_job, object, object_end, preference, tags_for, third_person, with_object,
};
use super::statement::plain_statement;
use super::tokens::Tok;
use super::wants::match_want;
use crate::ExtractedFact;

/// A clause that starts with "I": adverbs are skipped, negations go to their own few
/// rules, and the verb picks the rule.
pub(super) fn match_i(c: &[Tok], greeting: bool) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let mut k = 1;
    while let Some(word) = w.get(k) {
        let emphatic_do = *word == "do" && w.get(k + 1).is_some_and(|v| is_emphasisable(v));
        match hedge_len(&w[k..]) {
            0 if emphatic_do => k += 1,
            0 => break,
            n => k += n,
        }
    }
    let verb = *w.get(k)?;
    if matches!(
        (verb, w.get(k + 1).copied()),
        ("do" | "did" | "have" | "am" | "was" | "will" | "can" | "could" | "would" | "should", Some("not"))
            | ("never" | "hardly" | "barely" | "rarely" | "seldom" | "not" | "no", _)
    ) {
        return match_negated(c, k);
    }
    let rest = k + 1;
    match verb {
        "am" => match_am(c, rest, greeting),
        "was" => match_was(c, rest),
        "got" | "get" if matches!(w.get(rest), Some(&("married" | "divorced"))) => {
            Some(fact(&format!("Got {}", w[rest]), 0.8, &["family"]))
        }
        // "I got out of class", "I got outvoted", "I got really into running": events, not
        // possessions (an adverb between changes nothing).
        "got"
            if w[rest..]
                .iter()
                .find(|x| !in_list(ADVERBS, x))
                .is_some_and(|x| in_list(PARTICLES, x) || x.ends_with("ed")) =>
        {
            None
        }
        "have" | "has" | "got" => match_have(c, rest),
        "turned" if w.get(rest).is_some_and(|x| is_number(x)) => {
            Some(fact(&format!("Is {} years old", c[rest].text), 0.8, &["age"]))
        }
        "like" => preference(c, rest, "Likes", 0.8, &["preference"]),
        "love" | "adore" => preference(c, rest, "Loves", 0.8, &["preference"]),
        "enjoy" => preference(c, rest, "Enjoys", 0.8, &["preference"]),
        "hate" | "detest" | "despise" | "loathe" => preference(c, rest, "Hates", 0.8, &["preference"]),
        "dislike" => preference(c, rest, "Dislikes", 0.8, &["preference"]),
        "prefer" => preference(c, rest, "Prefers", 0.8, &["preference"]),
        "live" | "reside" => match_live(c, rest),
        "come" if w.get(rest) == Some(&"from") => with_object(place(c), rest + 1, "Is from", 0.85, &["location"]),
        "grew" if w.get(rest) == Some(&"up") => {
            let at = if w.get(rest + 1).is_some_and(|p| matches!(*p, "in" | "on" | "near" | "outside")) {
                rest + 1
            } else {
                return None;
            };
            with_object(c, at, "Grew up", 0.8, &["location"])
        }
        "moved" | "relocated" => {
            let at = if matches!(w.get(rest), Some(&"here" | &"back" | &"away")) { rest + 1 } else { rest };
            if !matches!(w.get(at), Some(&"to" | &"from")) {
                return None;
            }
            with_object(c, rest, "Moved", 0.75, &["location"])
        }
        "bought" | "purchased" => {
            let obj = object(c, rest)?;
            let tags = tags_for(&lower_words(c, rest), "possession");
            Some(fact(&format!("Bought {obj}"), 0.7, &tags))
        }
        "work" | "works" => match_work(c, rest),
        "workout" => Some(fact("Works out", 0.75, &["hobby"])),
        "teach" => with_object(c, rest, "Teaches", 0.8, &["work"]),
        "study" | "major" => with_object(c, rest, &third_person(verb), 0.8, &["education"]),
        "graduated" => with_object(c, rest, "Graduated", 0.8, &["education"]),
        "volunteer" => with_object(c, rest, "Volunteers", 0.8, &["hobby"])
            .or_else(|| (object_end(c, rest) == rest).then(|| fact("Volunteers", 0.75, &["hobby"]))),
        "own" => {
            let obj = object(c, rest)?;
            let tags = tags_for(&lower_words(c, rest), "possession");
            Some(fact(&format!("Owns {obj}"), 0.8, &tags))
        }
        "drive" => with_object(c, rest, "Drives", 0.8, &["vehicle"]),
        "ride" => with_object(c, rest, "Rides", 0.75, &["hobby"]),
        "use" => with_object(c, rest, "Uses", 0.75, &["device"]),
        "code" | "program" if w.get(rest) == Some(&"in") => with_object(c, rest, &third_person(verb), 0.8, &["work"]),
        "speak" => match_language(c, rest, 0.85),
        "play" => {
            if w.get(rest).is_some_and(|x| matches!(*x, "with" | "around" | "along" | "it")) {
                return None;
            }
            with_object(c, rest, "Plays", 0.8, &["hobby"])
        }
        "go" => match_go(c, rest),
        "eat" | "drink" => with_object(c, rest, &third_person(verb), 0.7, &["diet"]),
        "lost" if matches!(w.get(rest..rest + 2), Some(["my", "job" | "jobs"])) => {
            Some(fact("Lost their job", 0.75, &["work"]))
        }
        "plan" if matches!(w.get(rest), Some(&"to" | &"on")) => with_object(c, rest, "Plans", 0.8, &["goal"]),
        "intend" if w.get(rest) == Some(&"to") => with_object(c, rest, "Intends", 0.75, &["goal"]),
        "want" => match_want(c, rest),
        // "I would love to learn Spanish", "I'd like to be a lawyer": a wish, read as "I
        // want to …" with the same refusals ("I'd love to hear more", "I'd like to try it").
        "would" => match w.get(rest..rest + 2)? {
            ["love" | "like", "to"] => match_want(c, rest + 1),
            ["really" | "so", "love" | "like"] if w.get(rest + 2) == Some(&"to") => match_want(c, rest + 2),
            _ => None,
        },
        "hope" if w.get(rest) == Some(&"to") => with_object(c, rest, "Hopes", 0.7, &["goal"]),
        "dream" if matches!(w.get(rest), Some(&"of" | &"about")) => with_object(c, rest, "Dreams", 0.7, &["goal"]),
        "can" => match w.get(rest) {
            Some(&"speak") => match_language(c, rest + 1, 0.8),
            Some(v)
                if !in_list(AUXILIARIES, v)
                    && !in_list(&["see", "tell", "imagine", "relate", "understand", "help", "try", "go", "not"], v) =>
            {
                // "I can cook enchiladas" is a skill; "I can get you one" an offer.
                let score = if in_list(SKILL_VERBS, v) { 0.75 } else { 0.6 };
                with_object(c, rest, "Can", score, &["hobby"]).or_else(|| {
                    (in_list(SKILL_VERBS, v) && object_end(c, rest + 1) == rest + 1)
                        .then(|| fact(&format!("Can {v}"), score, &["hobby"]))
                })
            }
            _ => None,
        },
        "retired" if !matches!(w.get(rest), Some(&"from" | &"to")) || mentions_job(&w[rest..]) => {
            Some(fact("Is retired", 0.8, &["work"]))
        }
        "won" => with_object(c, rest, "Won", 0.7, &["hobby"]),
        // "I played football in college": a sport in one's history, not last night's game.
        "played"
            if w[rest..]
                .windows(2)
                .any(|p| matches!(p, ["in" | "for" | "at", "college" | "high" | "school" | "university"])) =>
        {
            with_object(c, rest, "Played", 0.75, &["hobby"])
        }
        "started" | "began" => {
            if mentions_job(&w[rest..]) {
                with_object(c, rest, "Started", 0.75, &["work"])
            } else {
                with_object(c, rest, "Started", 0.7, &["hobby"])
            }
        }
        "do" => {
            let practice = w.get(rest).is_some_and(|x| in_list(PRACTICES, x));
            with_object(c, rest, "Does", if practice { 0.75 } else { 0.6 }, &["hobby"])
        }
        "attend" => with_object(c, rest, "Attends", 0.75, &["education"]),
        v if in_list(HOBBY_VERBS, v) => {
            let prefix = third_person(v);
            if object_end(c, rest) == rest {
                return in_list(BARE_HOBBIES, v).then(|| fact(&prefix, 0.7, &["hobby"]));
            }
            with_object(c, rest, &prefix, 0.75, &["hobby"])
        }
        // "I sell cars", "I fix bikes": what one does for a living, said as a habit.
        "sell" | "fix" | "repair" | "tutor" | "babysit" => with_object(c, rest, &third_person(verb), 0.75, &["work"]),
        "wake" if w.get(rest) == Some(&"up") && w.get(rest + 1).is_some_and(|x| *x == "at" || *x == "every") => {
            with_object(c, rest, "Wakes", 0.75, &["habit"])
        }
        _ => plain_statement(c, k),
    }
}

/// Verbs whose rules in [`match_i`] refuse the clauses they do not turn into facts on
/// purpose: an event ("I got outvoted", "I lost my gloves", "I retired to bed"), talk ("I
/// speak to my mom"), a plan or wish, where one comes from only with "from", a place one
/// lives only with a preposition ("we live and learn"). What they refuse is no fact, and
/// the clause model (`restate`) is not asked about it; other verbs' rules only do not know
/// every complement ("I work odd shifts"), and the model weighs those.
#[rustfmt::skip]
pub(super) const DECIDED_VERBS: &[&str] = &[
    "speak", "retired", "wake", "got", "get", "lost", "turned", "can", "come", "plan", "intend",
    "hope", "dream", "want", "live", "reside", "code", "program", "won", "played",
];

/// What one "has" in the conversation rather than in life ("I have a question", "a good
/// feeling about it", "a blast").
#[rustfmt::skip]
pub(super) const CONVERSATIONAL_HAVES: &[&str] = &[
    "question", "feeling", "good", "great", "lot", "few", "suggestion", "bit", "little", "couple",
    "blast", "look", "idea", "wonderful", "nice",
];

/// "a lot of new clients", "a few friends", "a couple of horses" (the words after "I have
/// a"): things one has, counted, unlike "a lot of work", "a few questions", "a couple of
/// days off".
fn counted_possession(w: &[&str]) -> bool {
    let noun = match w {
        ["lot" | "few" | "couple", "of", rest @ ..] | ["few" | "couple", rest @ ..] => rest,
        _ => return false,
    };
    let noun = noun.iter().find(|x| !in_list(&["new", "good", "great", "close", "old", "really", "very"], x));
    noun.is_some_and(|x| x.len() > 2 && !in_list(PASSING_AMOUNTS, x))
}

/// What one has "a lot of" or "a few" of for the day or the conversation.
#[rustfmt::skip]
const PASSING_AMOUNTS: &[&str] = &[
    "work", "homework", "things", "stuff", "questions", "time", "fun", "errands", "chores", "days",
    "hours", "minutes", "weeks", "months", "ideas", "thoughts", "options", "plans", "free", "spare",
    "reading", "studying", "cleaning", "catching", "energy", "bills", "more", "left", "other",
    "different", "extra", "people", "guests", "projects", "assignments", "tests", "exams",
    "favorite", "favorites", "favourite", "favourites", "advice", "memories", "each", "life",
    "experience", "respect", "them", "those", "these", "fond",
];

/// Verbs whose negation has a rule of its own ("I don't like onions", "I don't have a boat").
pub(super) const NEGATED_RULE_VERBS: &[&str] =
    &["like", "enjoy", "love", "eat", "drink", "smoke", "drive", "swim", "cook", "have", "stand", "fan", "good"];

/// Verbs besides the pastimes that may follow an emphatic "do" ("I do love tea").
const EMPHASISABLE: &[&str] =
    &["like", "love", "enjoy", "have", "live", "work", "speak", "play", "prefer", "teach", "volunteer", "wear"];

/// Whether `word` may follow an emphatic "do" ("I do love tea", "I do watch a lot of
/// news"): "do" before any other word is the verb itself ("I do electrical work").
fn is_emphasisable(word: &str) -> bool {
    in_list(EMPHASISABLE, word) || in_list(HOBBY_VERBS, word)
}

/// Only some negations state a fact; "I don't live in Paris anymore" says nothing about
/// where the user lives now, while "I don't like onions" is a dislike and "I don't watch
/// tv" a habit one does not have ([`negated_habit`]).
fn match_negated(c: &[Tok], k: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let (aux, neg) = (w[k], w.get(k + 1).copied().unwrap_or(""));
    if aux == "never" {
        // "I never drink alcohol": a habit stated as a rule, as sure as "I don't drink".
        return match neg {
            "eat" | "drink" => with_object(c, k + 2, &format!("Never {}", third_person(neg)), 0.75, &["diet"]),
            "smoke" if object_end(c, k + 2) == k + 2 => Some(fact("Never smokes", 0.8, &["health"])),
            _ => None,
        };
    }
    if aux != "do" || neg != "not" {
        // "I'm not a (big) fan of mushrooms".
        let fan_of = match w.get(k + 2..) {
            Some(["a", "fan", "of", ..]) => Some(k + 5),
            Some(["a", "big" | "huge" | "great" | "real", "fan", "of", ..]) => Some(k + 6),
            _ => None,
        };
        if aux == "am"
            && let Some(at) = fan_of
        {
            return with_object(c, at, "Dislikes", 0.7, &["preference"]);
        }
        // "I'm not married (yet)": a status, as "I'm married" is.
        if aux == "am"
            && let Some(status) = w.get(k + 2).filter(|x| in_list(FAMILY_STATUSES, x))
            && w.get(k + 3).is_none_or(|x| matches!(*x, "yet" | "anymore" | "and" | "but" | "either"))
        {
            return Some(fact(&format!("Is not {status}"), 0.75, &["family"]));
        }
        // "I'm not (very) good at swimming".
        let good = if w.get(k + 2).is_some_and(|x| in_list(ADVERBS, x) || *x == "that") { k + 3 } else { k + 2 };
        if aux == "am" && matches!(w.get(good..good + 2), Some(["good", "at"])) {
            return with_object(c, good + 2, "Is not good at", 0.7, &["hobby"]);
        }
        if aux == "can" && w.get(k + 2) == Some(&"stand") {
            return with_object(c, k + 3, "Dislikes", 0.8, &["preference"]);
        }
        if aux == "can"
            && let Some(skill) = w.get(k + 2).filter(|v| in_list(SKILL_VERBS, v))
        {
            // "I can't swim": a skill the user lacks.
            let bare = object_end(c, k + 3) == k + 3;
            return if bare {
                Some(fact(&format!("Cannot {skill}"), 0.75, &["hobby"]))
            } else {
                with_object(c, k + 3, &format!("Cannot {skill}"), 0.7, &["hobby"])
            };
        }
        return None;
    }
    let mut v = k + 2;
    while v < w.len() && in_list(&["really", "even", "usually", "generally"], w[v]) {
        v += 1;
    }
    match w.get(v).copied()? {
        "like" | "enjoy" | "love" => preference(c, v + 1, "Dislikes", 0.75, &["preference"]),
        // "I don't care for physical sports", "much for": a distaste, said politely.
        "care" => {
            let at = if w.get(v + 1) == Some(&"much") { v + 2 } else { v + 1 };
            if w.get(at) != Some(&"for") {
                return None;
            }
            with_object(c, at + 1, "Dislikes", 0.7, &["preference"])
        }
        "eat" => with_object(c, v + 1, "Does not eat", 0.8, &["diet"]),
        "drink" => with_object(c, v + 1, "Does not drink", 0.8, &["diet"]),
        "smoke" if object_end(c, v + 1) == v + 1 => Some(fact("Does not smoke", 0.8, &["health"])),
        // "I don't drive": a habit stated plainly, with nothing after it; "I don't work", a
        // status as plain as "I'm unemployed".
        habit @ ("drive" | "swim" | "cook" | "work") if object_end(c, v + 1) == v + 1 => {
            let tag = match habit {
                "drive" => "vehicle",
                "work" => "work",
                _ => "hobby",
            };
            Some(fact(&format!("Does not {habit}"), 0.75, &[tag]))
        }
        "have" => {
            // "I don't have any pets" / "a car": a possession the person lacks, said plainly.
            // "I don't have kids" says as much as "any kids".
            let kin = w.get(v + 1).is_some_and(|x| {
                in_list(&["pets", "animals", "family", "friends"], x) || mentions::nouns_in(x).next().is_some()
            });
            let article = w.get(v + 1).is_some_and(|a| matches!(*a, "any" | "a" | "an"));
            if kin {
                let tags = tags_for(&lower_words(c, v + 1), "possession");
                return Some(fact(&format!("Has no {}", object(c, v + 1)?), 0.75, &tags));
            }
            let thing = if article { v + 2 } else { v + 1 };
            if in_list(ABSTRACT_LACKS, w.get(thing)?) {
                return None;
            }
            let tags = tags_for(&lower_words(c, thing), "possession");
            if article {
                return Some(fact(&format!("Has no {}", object(c, thing)?), 0.8, &tags));
            }
            Some(fact(&format!("Does not have {}", object(c, v + 1)?), 0.6, &tags))
        }
        _ => negated_habit(c, v),
    }
}

/// Verbs besides the pastimes whose negation states a habit ("I don't use facebook",
/// "I don't speak Italian").
const NEGATABLE_HABITS: &[&str] = &["play", "use", "speak", "wear", "gamble", "party", "vote", "celebrate"];

/// "I don't watch tv", "I don't travel much": a habit the person does not have, as sure
/// as one they have. The clause is read as if it were positive, so that every refusal of
/// the positive rules holds ("I don't watch it", "I don't play around much"), and only
/// what those rules keep is negated, at the threshold's floor.
fn negated_habit(c: &[Tok], v: usize) -> Option<ExtractedFact> {
    let verb = c.get(v)?.lower.as_str();
    if !in_list(HOBBY_VERBS, verb) && !in_list(NEGATABLE_HABITS, verb) {
        return None;
    }
    let positive: Vec<Tok> = c[..1].iter().chain(&c[v..]).cloned().collect();
    let said = match_i(&positive, false).filter(|f| f.score >= 0.7)?;
    let conjugated = third_person(verb);
    let rest = said.fact.get(conjugated.len()..).filter(|_| said.fact.to_lowercase().starts_with(&conjugated))?;
    Some(ExtractedFact { fact: format!("Does not {verb}{rest}"), score: 0.7, ..said })
}

/// "I used to be a pilot", "I used to work in finance": the work one did, from a clause
/// that opens "I used to be" or "I used to work". Other things one used to do or be ("I
/// used to live in Paris", "I used to be happier") say nothing about now and are not kept:
/// on Synthetic-Persona-Chat they matched a persona line 4 % of the time. Former work is
/// what a memory is asked about ("what did they do before retiring?"); it matched half
/// the time on the development split.
pub(super) fn match_former_work(c: &[Tok]) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let trade = match w.get(3..5)? {
        ["be", "a" | "an"] => {
            !in_list(MOMENTARY, w.get(5)?) && !w[5..].iter().any(|x| in_list(&["lot", "bit", "fan"], x))
        }
        ["work", "as" | "at" | "in" | "for"] => true,
        _ => false,
    };
    if !trade {
        return None;
    }
    with_object(c, 2, "Used", 0.7, &["work"])
}

pub(super) fn match_live(c: &[Tok], mut rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    // "I live right by the beach", "out in the Olympics", "directly on the coast": where
    // follows all the same.
    let at = rest + w[rest..].iter().take_while(|x| in_list(ADVERBS, x) || in_list(PLACE_LEADS, x)).count();
    if w.get(at).is_some_and(|x| in_list(PLACE_PREPOSITIONS, x)) {
        rest = at;
    }
    match w.get(rest).copied() {
        Some(p) if in_list(PLACE_PREPOSITIONS, p) => with_object(place(c), rest, "Lives", 0.85, &["location"]),
        Some("with") => with_object(c, rest, "Lives", 0.75, &["family"]),
        Some("alone" | "abroad") => Some(fact(&format!("Lives {}", w[rest]), 0.8, &["location"])),
        // "I live up north", "out west".
        Some("up" | "out" | "down" | "back")
            if w.get(rest + 1).is_some_and(|x| matches!(*x, "north" | "south" | "east" | "west")) =>
        {
            Some(fact(&format!("Lives {} {}", w[rest], w[rest + 1]), 0.8, &["location"]))
        }
        _ => None,
    }
}

/// What "I live" names a place with ("in Ohio", "by the lake", "downtown").
const PLACE_PREPOSITIONS: &[&str] = &["in", "on", "near", "at", "by", "outside", "downtown"];

/// Words that may come between "I live" and its preposition ("right by", "out in").
const PLACE_LEADS: &[&str] = &["right", "directly", "out", "up", "down"];

fn match_work(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    match w.get(rest).copied() {
        Some("as" | "at" | "for") => with_object(c, rest, "Works", 0.85, &["work"]),
        Some(
            "in" | "with" | "from" | "part" | "full" | "nights" | "remotely" | "full-time" | "part-time" | "fulltime"
            | "parttime",
        ) => with_object(c, rest, "Works", 0.8, &["work"]),
        Some("on") => with_object(c, rest, "Works", 0.65, &["work"]),
        Some("out") => Some(fact("Works out", 0.75, &["hobby"])),
        // "I work construction", "I work retail": a trade named without "in".
        Some(trade) if in_list(TRADES, trade) => with_object(c, rest, "Works", 0.8, &["work"]),
        // "I work the night shift at a bar", "I work two jobs", "I work a lot".
        Some("the") if w.get(rest + 1..rest + 3).is_some_and(|s| s.contains(&"shift")) => {
            with_object(c, rest, "Works", 0.75, &["work"])
        }
        Some(n) if is_number(n) && matches!(w.get(rest + 1), Some(&"jobs" | &"shifts")) => {
            with_object(c, rest, "Works", 0.75, &["work"])
        }
        Some("a") if matches!(w.get(rest + 1), Some(&"lot")) => Some(fact("Works a lot", 0.7, &["work"])),
        _ => None,
    }
}

/// Trades said as the object of "work" ("I work construction").
const TRADES: &[&str] =
    &["construction", "retail", "security", "maintenance", "landscaping", "sales", "customer", "hospitality"];

fn match_language(c: &[Tok], rest: usize, score: f64) -> Option<ExtractedFact> {
    let w = lower_words(c, rest);
    let first = *w.first()?;
    let fluent = ["fluent", "fluently", "some", "a", "little", "basic", "conversational"];
    if !in_list(LANGUAGES, first) && !in_list(&fluent, first) {
        return None;
    }
    with_object(c, rest, "Speaks", score, &["language"])
}

fn match_go(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let next = *w.get(rest)?;
    if next.ends_with("ing") && next.len() > 4 {
        return with_object(c, rest, "Goes", 0.8, &["hobby"]);
    }
    if next == "to" {
        // "I go to the gym every day" is a habit; "I go to the store later" an errand.
        let at = if w.get(rest + 1) == Some(&"the") { rest + 2 } else { rest + 1 };
        let score = if w.get(at).is_some_and(|x| in_list(REGULAR_DESTINATIONS, x)) { 0.8 } else { 0.65 };
        return with_object(c, rest, "Goes", score, &["hobby"]);
    }
    None
}

/// What "I've been …ing" says of the moment rather than of what one has taken up.
#[rustfmt::skip]
const PASSING_ACTIVITIES: &[&str] = &[
    "feeling", "thinking", "wondering", "meaning", "waiting", "looking", "going", "getting",
    "having", "doing", "sitting", "sleeping", "resting", "trying", "hoping", "talking",
    "saying", "telling", "asking", "dying", "wanting", "planning", "considering", "missing",
];

/// Words that make "I've been …ing" a spell of the day ("I've been baking all day today")
/// rather than what one has taken up. What one has been doing of late ("baking a lot
/// lately") is kept: on the Multi-Session Chat development split such facts matched what
/// annotators wrote two times in three.
const LATELY: &[&str] = &["today", "tonight", "yesterday"];

fn match_have(c: &[Tok], mut rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    while w
        .get(rest)
        .is_some_and(|x| matches!(*x, "got" | "also" | "always" | "just" | "recently" | "still" | "actually"))
    {
        rest += 1;
    }
    let next = w.get(rest).copied()?;
    let conversational =
        matches!(next, "a" | "an") && w.get(rest + 1).is_some_and(|x| in_list(CONVERSATIONAL_HAVES, x));
    if conversational && !counted_possession(&w[rest + 1..]) {
        return None;
    }
    // "I have some questions", "some free time", "some fun": the day's, not one's own.
    if next == "some" && w.get(rest + 1).is_some_and(|x| in_list(PASSING_AMOUNTS, x)) {
        return None;
    }
    match next {
        "never" => match_never_done(c, rest + 1),
        "to" | "not" | "heard" | "seen" | "done" | "tried" | "read" => None,
        "been" => match w.get(rest + 1).copied()? {
            d if in_list(DIETS, d) => with_object(c, rest + 1, "Is", 0.85, &["diet"]),
            s if in_list(LASTING_STATES, s) => with_object(c, rest + 1, "Has been", 0.8, &[lasting_state_tag(s)]),
            "in" if w.get(rest + 2..).is_some_and(|g| g.iter().take(4).any(|x| in_group(x).is_some())) => {
                with_object(c, rest + 1, "Has been", 0.8, &["hobby"])
            }
            // "I've been awake since four" is about today.
            m if states_duration(&w[rest..]) && !in_list(AWAKE_OR_AWAY, m) => {
                with_object(c, rest + 1, "Has been", 0.75, &["hobby"])
            }
            // "I've been volunteering at the shelter": what one has taken up, unless it is
            // said of the day or of the listener.
            // "I've been thinking about changing jobs" is a plan in the making.
            g if g.ends_with("ing")
                && (!in_list(PASSING_ACTIVITIES, g) || plan_in_making(g, &w[rest + 2..]))
                && !w.iter().any(|x| in_list(SECOND_PERSON, x) || in_list(LATELY, x)) =>
            {
                with_object(c, rest + 1, "Has been", 0.7, &tags_for(&w[rest + 1..], "hobby"))
            }
            _ => with_object(c, rest + 1, "Has been", 0.6, &["hobby"]),
        },
        // "I have lived in Berlin for five years", "I've had my dog since 2015": how long
        // something has lasted says that it lasts.
        p if is_past_participle(p) && states_duration(&w[rest..]) => {
            with_object(c, rest, "Has", 0.75, &tags_for(&w[rest..], "hobby"))
        }
        "had" => None,
        "wanted" => with_object(c, rest + 1, "Wants", 0.7, &["goal"]),
        "no" => {
            let noun = w.get(rest + 1).copied()?;
            if matches!(
                noun,
                "idea"
                    | "clue"
                    | "problem"
                    | "doubt"
                    | "time"
                    | "plans"
                    | "complaints"
                    | "regrets"
                    | "reason"
                    | "choice"
                    | "words"
            ) {
                return None;
            }
            let tags = tags_for(&lower_words(c, rest), "possession");
            with_object(c, rest, "Has", 0.7, &tags)
        }
        _ => {
            let obj = object(c, rest)?;
            let words = lower_words(c, rest);
            let end = object_end(c, rest) - rest;
            if mentions_job(&words[..end.min(words.len())]) {
                return Some(fact(&format!("Has {obj}"), 0.75, &["work"]));
            }
            let span = &words[..end.min(words.len())];
            // "I have a fear of heights": a trait, not a possession.
            if span.iter().take(3).any(|x| matches!(*x, "fear" | "phobia")) {
                return Some(fact(&format!("Has {obj}"), 0.8, &["personality"]));
            }
            let tags = tags_for(span, "possession");
            // "I have worked hard today": a perfect tense, not something one has.
            let perfect = span.first().is_some_and(|x| x.ends_with("ed"));
            let score = match tags[0] {
                "pets" | "family" => 0.85,
                "device" | "vehicle" | "health" => 0.8,
                _ if perfect => 0.6,
                _ => 0.7,
            };
            Some(fact(&format!("Has {obj}"), score, &tags))
        }
    }
}

/// Words after "got" that make it an event ("got out of class", "got back home").
const PARTICLES: &[&str] = &["out", "off", "back", "home", "up", "in", "into", "to", "over", "through", "away", "lost"];

/// Places one goes to as a habit rather than as an errand.
#[rustfmt::skip]
const REGULAR_DESTINATIONS: &[&str] = &[
    "gym", "church", "school", "college", "university", "temple", "mosque", "synagogue", "mass",
    "therapy", "rehab", "yoga", "pilates", "classes", "class", "practice", "concerts", "camp",
];

/// "for ten years", "for a decade", "since 2015", "since I was a kid": the clause says how
/// long something has lasted.
fn states_duration(words: &[&str]) -> bool {
    words.iter().enumerate().any(|(i, w)| match *w {
        "since" => words.get(i + 1).is_some_and(|x| {
            is_number(x) || matches!(*x, "i" | "childhood" | "high" | "college" | "birth" | "forever")
        }),
        "for" => words
            .iter()
            .skip(i + 1)
            .take(4)
            .any(|x| matches!(*x, "years" | "year" | "decades" | "decade" | "months" | "ages" | "life" | "while")),
        _ => false,
    })
}

/// "I have never been married" is a lasting state, and "I've never had a cat", "I've never
/// left my home state" what one has or has not lived, kept at the default threshold; "I've
/// never been to a casino" is true but more often an answer to the other person than what
/// one would say about oneself (on Synthetic-Persona-Chat such facts almost never matched a
/// persona line), so it scores below. What one has heard of or thought about is no fact
/// at all.
fn match_never_done(c: &[Tok], mut at: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    while w.get(at).is_some_and(|x| in_list(ADVERBS, x)) {
        at += 1;
    }
    let verb = *w.get(at)?;
    // Participles of noticing and trying: "heard", "seen" and "thought" are no past
    // participles to `is_past_participle` and never get this far.
    let conversational = ["tried", "noticed", "realized", "considered", "imagined", "wondered", "asked", "done"];
    if !is_past_participle(verb) && verb != "been" || in_list(&conversational, verb) {
        return None;
    }
    let rest = object(c, at + 1)?;
    let state = w.get(at + 1).filter(|s| verb == "been" && in_list(LASTING_STATES, s));
    let (score, tags) = match state {
        Some(s) => (0.8, vec![lasting_state_tag(s)]),
        None if verb != "been" => (0.7, tags_for(&w[at..], "identity")),
        None => (0.65, tags_for(&w[at..], "identity")),
    };
    Some(fact(&format!("Has never {verb} {rest}"), score, &tags))
}

/// Skills "I can …" states ("I can cook enchiladas", "I can't swim"), as opposed to what
/// one can do for the other person right now ("I can send you the link").
#[rustfmt::skip]
const SKILL_VERBS: &[&str] = &[
    "cook", "bake", "sew", "knit", "crochet", "sing", "dance", "swim", "draw", "paint", "play",
    "fix", "build", "drive", "ride", "juggle", "code", "program", "surf", "ski", "skate",
    "snowboard", "climb", "lift", "run", "fly", "type", "write", "carve", "weld", "dive", "fish",
];

/// What one "does" as a sport or practice ("I do karate", "I do yoga every morning"), as
/// opposed to "I do a lot of cleaning".
#[rustfmt::skip]
const PRACTICES: &[&str] = &[
    "yoga", "karate", "pilates", "judo", "taekwondo", "jiu-jitsu", "crossfit", "ballet",
    "gymnastics", "archery", "boxing", "kickboxing", "photography", "pottery", "woodworking",
    "crosswords", "triathlons", "marathons", "aerobics", "zumba", "meditation", "martial",
    "parkour", "track", "wrestling", "fencing", "mma", "taichi", "calligraphy",
];

/// Where one "has been since …" today rather than for a stretch of life.
const AWAKE_OR_AWAY: &[&str] = &["up", "awake", "busy", "here", "there", "away", "out", "home", "sick", "tired"];
