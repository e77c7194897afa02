//! Rules for "I am" and "I was", one per complement ("I am a nurse", "I am allergic to",
//! "I was born in"). Each rule's score says how far its pattern can be trusted, as in
//! [`super::verbs`].

use super::lexicon::*;
use super::names::name_fact;
use super::phrase::{fact, lower_words, mentions_job, object_end, with_object};
use super::tokens::Tok;
use super::wants::match_want;
use crate::ExtractedFact;

pub(super) fn match_was(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    match (w.get(rest).copied()?, w.get(rest + 1).copied()) {
        ("born", Some("in")) if w.get(rest + 2).is_some_and(|x| is_number(x)) => {
            with_object(c, rest + 1, "Was born", 0.85, &["age"])
        }
        ("born", Some("on")) => with_object(c, rest + 2, "Birthday is", 0.85, &["age"]),
        ("born" | "raised", Some("in" | "and")) => with_object(c, rest, "Was", 0.85, &["location"]),
        ("raised", Some("by")) => with_object(c, rest, "Was", 0.8, &["family"]),
        // "I was a marine": a past occupation is part of one's story.
        ("a" | "an", _) if w[rest..].iter().take(4).any(|x| in_list(OCCUPATIONS, x)) => {
            with_object(c, rest, "Was", 0.75, &["work"])
        }
        ("a" | "an", _) => with_object(c, rest, "Was", 0.6, &["identity"]),
        _ => None,
    }
}

pub(super) fn match_am(c: &[Tok], mut rest: usize, greeting: bool) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    loop {
        // "I'm kind of a nerd", "a bit of a feminist" hedge what follows without changing it.
        match w.get(rest..rest + 2) {
            Some(["sort" | "kind", "of"]) => rest += 2,
            Some(["a", "bit"]) if matches!(w.get(rest + 2..rest + 4), Some(["of", "a" | "an"])) => rest += 3,
            _ if w.get(rest).is_some_and(|x| in_list(ADVERBS, x)) => rest += 1,
            _ => break,
        }
    }
    let next = *w.get(rest)?;
    let after = w.get(rest + 1).copied();
    if is_number(next) {
        return match (after, w.get(rest + 2).copied()) {
            (Some("years" | "year" | "yrs"), Some("old")) | (None | Some("and" | "but" | ","), _) => {
                let score = if matches!(after, Some("years" | "year" | "yrs")) { 0.9 } else { 0.8 };
                Some(fact(&format!("Is {} years old", c[rest].text), score, &["age"]))
            }
            _ => None,
        };
    }
    match next {
        "from" => return with_object(place(c), rest + 1, "Is from", 0.85, &["location"]),
        "living" | "based" | "located" | "staying"
            if after.is_some_and(|p| matches!(p, "in" | "on" | "near" | "outside")) =>
        {
            let score = if next == "staying" { 0.6 } else { 0.8 };
            return with_object(c, rest + 1, "Lives", score, &["location"]);
        }
        "allergic" if after == Some("to") => {
            return with_object(c, rest + 1, "Is allergic", 0.9, &["health"]);
        }
        "lactose" | "gluten" if after == Some("intolerant") => {
            return Some(fact(&format!("Is {next} intolerant"), 0.85, &["diet", "health"]));
        }
        "diabetic" | "celiac" | "asthmatic" | "epileptic" | "deaf" | "blind" | "disabled" => {
            return Some(fact(&format!("Is {next}"), 0.85, &["health"]));
        }
        "married" | "engaged" if after == Some("to") => {
            return with_object(c, rest, "Is", 0.85, &["family"]);
        }
        s if in_list(FAMILY_STATUSES, s) => {
            return Some(fact(&format!("Is {next}"), 0.85, &["family"]));
        }
        "retired" | "unemployed" | "self-employed" => {
            return Some(fact(&format!("Is {next}"), 0.85, &["work"]));
        }
        "employed" if matches!(after, Some("by" | "at" | "as")) => {
            return with_object(c, rest, "Is", 0.85, &["work"]);
        }
        "working" if matches!(after, Some("as" | "at" | "for" | "in")) => {
            return with_object(c, rest + 1, "Works", 0.8, &["work"]);
        }
        // "I'm working on my masters degree": a long piece of work, not a task of the day.
        "working" if after == Some("on") && w[rest + 2..].iter().take(3).any(|x| in_list(LONG_WORKS, x)) => {
            return with_object(c, rest, "Is", 0.75, &["education"]);
        }
        "studying" | "majoring" => {
            return with_object(
                c,
                rest + 1,
                if next == "studying" { "Studies" } else { "Majors" },
                0.8,
                &["education"],
            );
        }
        "in" if after
            .is_some_and(|x| matches!(x, "college" | "school" | "university" | "grad" | "high" | "med" | "law")) =>
        {
            return with_object(c, rest, "Is", 0.8, &["education"]);
        }
        "in" => {
            let words = lower_words(c, rest);
            let end = (object_end(c, rest) - rest).min(words.len());
            let (score, tag) = match words[..end].iter().find_map(|x| in_group(x)) {
                Some(tag) => (0.8, tag),
                None if lasting_in(&words[1..end], &w) => (0.7, "identity"),
                None => (0.5, "identity"),
            };
            return with_object(c, rest, "Is", score, &[tag]);
        }
        "expecting" => return with_object(c, rest, "Is", 0.8, &["family"]),
        "getting" if after == Some("married") => {
            return with_object(c, rest, "Is", 0.8, &["family"]);
        }
        "looking" if after == Some("for") && mentions_job(&w[rest..]) => {
            return with_object(c, rest, "Is", 0.75, &["work"]);
        }
        "learning" => {
            let tag = if after.is_some_and(|x| in_list(LANGUAGES, x)) { "language" } else { "hobby" };
            return with_object(c, rest + 1, "Is learning", 0.75, &[tag]);
        }
        "fluent" | "bilingual" | "trilingual" => {
            return with_object(c, rest, "Is", 0.85, &["language"]);
        }
        "planning" if matches!(after, Some("to" | "on")) => {
            return with_object(c, rest + 1, "Plans", 0.8, &["goal"]);
        }
        // "I am wanting to be an attorney" says "I want to …".
        "wanting" if after == Some("to") => return match_want(c, rest + 1),
        // "I'm considering retiring", "thinking about getting a dog": a plan in the making.
        "considering" | "thinking" if plan_in_making(next, &w[rest + 1..]) => {
            return with_object(c, rest, "Is", 0.7, &["goal"]);
        }
        "hoping" if after == Some("to") => {
            return with_object(c, rest + 1, "Hopes", 0.7, &["goal"]);
        }
        "saving" => return with_object(c, rest, "Is", 0.7, &["goal"]),
        "training" if after == Some("for") => return with_object(c, rest, "Is", 0.75, &["hobby"]),
        "moving" if after == Some("to") => return with_object(c, rest, "Is", 0.7, &["location", "goal"]),
        "taking" if w.get(rest + 1..).is_some_and(|o| o.iter().take(3).any(|x| in_list(COURSES, x))) => {
            return with_object(c, rest, "Is", 0.75, &["education"]);
        }
        "going" if after == Some("to") => {
            let score = if planned(&w[rest + 2..]) { 0.7 } else { 0.6 };
            return with_object(c, rest, "Is", score, &["goal"]);
        }
        "trying" if after == Some("to") => return with_object(c, rest, "Is", 0.6, &["goal"]),
        "into" => return with_object(c, rest, "Is", 0.75, &["preference"]),
        "interested" | "passionate" | "obsessed" | "addicted" | "crazy"
            if matches!(after, Some("in" | "about" | "with")) =>
        {
            return with_object(c, rest, "Is", 0.75, &["preference"]);
        }
        "afraid" | "scared" | "terrified" | "frightened" | "fearful" if after == Some("of") => {
            return with_object(c, rest, "Is", 0.8, &["personality"]);
        }
        "good" | "great" | "bad" | "terrible" | "skilled" | "talented" if after == Some("at") => {
            return with_object(c, rest, "Is", 0.7, &["hobby"]);
        }
        "on" => {
            let words = lower_words(c, rest);
            let end = object_end(c, rest) - rest;
            let span = &words[..end.min(words.len())];
            let (score, tag) = if span.contains(&"team") || span.contains(&"squad") {
                (0.75, "hobby")
            } else if span.contains(&"diet") {
                (0.85, "diet")
            } else {
                (0.5, "identity")
            };
            return with_object(c, rest, "Is", score, &[tag]);
        }
        "called" | "named" => return name_fact(c, rest + 1, 0.85),
        "a" | "an" | "the" => return match_am_noun(c, rest),
        d if in_list(DIETS, d) => return Some(fact(&format!("Is {d}"), 0.9, &["diet"])),
        _ => {}
    }
    let tok = &c[rest];
    let ends_clause = object_end(c, rest) == rest + 1;
    let capitalised = tok.text.starts_with(char::is_uppercase) && tok.lower != "i";
    if ends_clause && capitalised && greeting {
        return name_fact(c, rest, 0.85);
    }
    if ends_clause && capitalised {
        // "I'm Canadian" or "I'm Brian": a nationality or a name, and only a guess either way.
        let demonym = in_list(LANGUAGES, next) || ["an", "ese", "ish", "ch", "i"].iter().any(|s| next.ends_with(s));
        if !demonym {
            return name_fact(c, rest, 0.6);
        }
        return with_object(c, rest, "Is", 0.6, &["identity"]);
    }
    if ends_clause && !in_list(MOMENTARY, next) && !next.ends_with("ing") && !next.ends_with("ed") {
        return with_object(c, rest, "Is", 0.7, &["personality"]);
    }
    None
}

/// Where one stands in family life: "I'm married", and as surely "I'm not married (yet)".
pub(super) const FAMILY_STATUSES: &[&str] =
    &["married", "divorced", "single", "engaged", "widowed", "pregnant", "separated"];

/// Whether "thinking" or "considering" and the words after it (`rest`) are a plan in the
/// making ("considering retiring", "thinking about getting a dog"), not what is on one's
/// mind right now ("thinking about it", "about my mom", "about going to bed now").
pub(super) fn plan_in_making(verb: &str, rest: &[&str]) -> bool {
    let plan = match (verb, rest) {
        ("thinking", ["about" | "of", plan @ ..]) | ("considering", plan) => plan,
        _ => return false,
    };
    plan.first().is_some_and(|g| g.ends_with("ing") && g.len() > 4) && !plan.iter().any(|x| in_list(SOON, x))
}

/// What one is "going to" do on the way out of a conversation or on an errand ("going to
/// grab lunch", "going to get some sleep", "going to the movies"), not a plan for one's life.
#[rustfmt::skip]
const ERRANDS: &[&str] = &[
    "get", "grab", "make", "go", "hit", "do", "take", "have", "head", "try", "check", "watch",
    "eat", "sleep", "call", "let", "see", "say", "tell", "ask", "give", "keep", "guess", "look",
    "need", "think", "put", "run", "pick", "bring", "leave", "stop", "buy", "cook", "order",
    "clean", "finish", "wash", "send", "text", "email", "read", "relax", "rest", "nap", "shower",
    "visit", "meet", "stay", "the", "a", "an", "my", "their",
];

/// Whether what follows "I'm going to" (`plan`) is a plan worth keeping ("retire in a few
/// years", "business school", "study physical therapy"): not an errand, and not for today
/// or the weekend.
fn planned(plan: &[&str]) -> bool {
    plan.first().is_some_and(|first| !in_list(ERRANDS, first)) && !plan.iter().any(|x| in_list(SOON, x))
}

/// Words that tie "I'm going to …" or "I'm in …" to the day or the days ahead ("going to
/// bake tonight", "in Paris this week"): a plan for the moment, a place one is passing
/// through.
#[rustfmt::skip]
const SOON: &[&str] = &[
    "today", "tonight", "tomorrow", "later", "soon", "now", "right", "week", "weekend", "moment",
    "morning", "afternoon", "evening", "shortly",
];

/// Whether "I'm in <object>" (the words after "in") says something lasting about the
/// speaker: a bare noun that is no passing state, in a clause not tied to the day.
fn lasting_in(object: &[&str], clause: &[&str]) -> bool {
    let Some(first) = object.first() else { return false };
    !clause.iter().any(|x| in_list(SOON, x))
        && !in_list(PASSING_PLACES, first)
        && !first.ends_with("ed")
        && !first.ends_with("ing")
        && !is_number(first)
}

/// Groups one belongs to rather than places one happens to be in ("in the army", not "in
/// the kitchen").
pub(super) fn in_group(word: &str) -> Option<&'static str> {
    match word {
        "army" | "navy" | "military" | "marines" | "force" | "guard" | "business" | "industry" => Some("work"),
        "band" | "choir" | "orchestra" | "club" | "team" | "league" | "scouts" => Some("hobby"),
        "relationship" | "love" => Some("family"),
        "grade" | "class" | "college" | "school" | "university" | "program" => Some("education"),
        // "I'm in my early thirties": an age group.
        "teens" | "twenties" | "thirties" | "forties" | "fifties" | "sixties" | "seventies" | "eighties"
        | "nineties" => Some("age"),
        _ => None,
    }
}

/// "I am a nurse", "I'm a big fan of jazz", "I am the oldest of five".
fn match_am_noun(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let article = w[rest];
    let next = *w.get(rest + 1)?;
    if matches!(next, "little" | "bit" | "lot" | "huge" | "big" | "total" | "great") && w.get(rest + 2) == Some(&"fan")
        || next == "fan"
    {
        return with_object(c, rest, "Is", 0.8, &["preference"]);
    }
    if matches!(next, "little" | "bit" | "lot" | "few" | "couple" | "firm" | "strong" | "believer") {
        return None;
    }
    let end = object_end(c, rest);
    let span = w.get(rest..end)?;
    if span.iter().any(|x| in_list(DIETS, x)) && span.len() <= 3 {
        return with_object(c, rest, "Is", 0.9, &["diet"]);
    }
    if article == "the" {
        return with_object(c, rest, "Is", 0.6, &["identity"]);
    }
    if span.iter().any(|x| *x == "year" || *x == "years") && span.contains(&"old") {
        return with_object(c, rest, "Is", 0.85, &["age", "identity"]);
    }
    if span.iter().take(5).any(|x| in_list(OCCUPATIONS, x)) {
        return with_object(c, rest, "Is", 0.85, &["work"]);
    }
    with_object(c, rest, "Is", 0.7, &["identity"])
}

/// States that "I have been …" keeps true ("I've been divorced twice", "sober for ten years").
pub(super) const LASTING_STATES: &[&str] =
    &["married", "divorced", "widowed", "engaged", "single", "sober", "retired", "unemployed", "clean"];

pub(super) fn lasting_state_tag(state: &str) -> &'static str {
    match state {
        "retired" | "unemployed" => "work",
        "sober" | "clean" => "health",
        _ => "family",
    }
}

/// What one takes as a course ("I'm taking online classes", "taking piano lessons").
const COURSES: &[&str] = &["class", "classes", "lessons", "course", "courses"];

/// Past participles "have" takes in a statement of how long something has lasted.
pub(super) fn is_past_participle(word: &str) -> bool {
    (word.len() > 4 && word.ends_with("ed"))
        || matches!(
            word,
            "had"
                | "known"
                | "taught"
                | "done"
                | "driven"
                | "ridden"
                | "grown"
                | "run"
                | "sung"
                | "written"
                | "left"
                | "met"
                | "flown"
                | "gone"
                | "eaten"
                | "broken"
                | "won"
                | "taken"
                | "swum"
                | "worn"
        )
}

/// Words that start what comes after a place ("I'm from india and the traffic there …"):
/// "and" or "but" before one of them opens a new clause rather than naming a second place.
const CLAUSE_OPENERS: &[&str] = &["the", "a", "an", "my", "our", "his", "her", "their", "everyone", "people"];

/// The clause up to where a place named in it ends.
pub(super) fn place(c: &[Tok]) -> &[Tok] {
    let cut = c.windows(2).position(|p| (p[0].is("and") || p[0].is("but")) && in_list(CLAUSE_OPENERS, &p[1].lower));
    &c[..cut.unwrap_or(c.len())]
}

/// What one works on for months or years.
#[rustfmt::skip]
const LONG_WORKS: &[&str] = &[
    "masters", "master's", "phd", "degree", "doctorate", "thesis", "dissertation", "novel",
    "book", "album", "diploma", "certification", "mba",
];
