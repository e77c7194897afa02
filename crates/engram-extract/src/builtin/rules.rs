//! Clause rules: the entry point for one clause, which sends it to the rules for its subject,
//! and the rules for clauses that do not start with "I" ("My name is Alice", "Pizza is my
//! favorite food", "Everyone calls me Al").

use super::clauses::skip_lead;
use super::lexicon::*;
use super::names::{name_fact, name_words};
use super::phrase::{fact, lower_words, object_end, render, with_object};
use super::tokens::Tok;
use super::verbs::{match_former_work, match_i, match_live};
use crate::ExtractedFact;

/// The fact one clause states about the user, if any. `after_greeting` says the sentence
/// before was a bare greeting ("Hi! I'm Bob."), which makes a capitalised word a name.
pub(super) fn match_clause(clause: &[Tok], after_greeting: bool) -> Option<ExtractedFact> {
    let (start, greeting) = skip_lead(clause, 0);
    let greeting = greeting || after_greeting;
    let c = &clause[start..];
    let w = lower_words(c, 0);
    let first = *w.first()?;
    if in_list(NON_FACTUAL_OPENERS, first) {
        return None;
    }
    // "I used to be a pilot": a former trade is part of one's history, kept as such.
    if let ["i", "used", "to", "be" | "work", ..] = w.as_slice() {
        return match_former_work(c);
    }
    let no_longer_true = w.contains(&"anymore")
        || w.contains(&"formerly")
        || w.windows(2).any(|p| matches!(p, ["no", "longer"] | ["used", "to"] | ["any", "more"]));
    if no_longer_true {
        return None;
    }
    if let Some(i) = after_setting(&w) {
        return match_i(&c[i..], greeting);
    }
    match first {
        "i" => match_i(c, greeting),
        // "We live on a farm": the user's household lives there, and so do they.
        "we" if w.get(1) == Some(&"live") => match_live(c, 2),
        "my" => match_my(c),
        _ => match_other(c),
    }
}

/// Clauses that do not start with "I" or "my" but still describe the user:
/// "Pizza is my favorite food", "Everyone calls me Al".
fn match_other(c: &[Tok]) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    if let Some(p) = w.iter().position(|&x| x == "call" || x == "calls")
        && w.get(p + 1) == Some(&"me")
        && p <= 3
        && !w[..p].contains(&"not")
        && !w[..p].contains(&"i")
    {
        return name_fact(c, p + 2, 0.85);
    }
    let copula = w.iter().position(|&x| x == "is" || x == "are")?;
    // "Hunting is one of my favorite hobbies" says as much as "… is my favorite hobby".
    let one_of = w.get(copula + 1..copula + 3) == Some(&["one", "of"]);
    let my = if one_of { copula + 3 } else { copula + 1 };
    if copula == 0 || copula > 5 || w.get(my) != Some(&"my") {
        return None;
    }
    if in_list(CONTEXTUAL_STARTS, w[0]) || in_list(SUBJECT_PRONOUNS, w[0]) {
        return None;
    }
    let subject = render(&c[..copula], false);
    let what = w.get(my + 1)?;
    match *what {
        "favorite" | "favourite" if one_of => Some(fact(&format!("Likes {subject}"), 0.8, &["preference"])),
        "favorite" | "favourite" => {
            let end = object_end(c, copula + 3);
            if end > copula + 3 && end - (copula + 3) <= 3 {
                let category = render(&c[copula + 3..end], false);
                let verb = w[copula];
                Some(fact(&format!("Favorite {category} {verb} {subject}"), 0.8, &["preference"]))
            } else {
                // "Bob Dylan is my favorite": more than a liking, as "My favorite is pizza".
                Some(fact(&format!("Favorite is {subject}"), 0.8, &["preference"]))
            }
        }
        "passion" | "hobby" | "life" => Some(fact(&format!("Loves {subject}"), 0.75, &["hobby"])),
        _ => None,
    }
}

fn match_my(c: &[Tok]) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let second = *w.get(1)?;
    let third = w.get(2).copied().unwrap_or("");
    match (second, third) {
        ("name", "is") => return name_fact(c, 3, 0.9),
        ("favorite" | "favourite", _) => {
            let copula = w.iter().position(|&x| matches!(x, "is" | "are" | "was" | "were"))?;
            if !(3..=6).contains(&copula) {
                return None;
            }
            let category = render(&c[2..copula], false);
            let verb = w[copula];
            return with_object(c, copula + 1, &format!("Favorite {category} {verb}"), 0.85, &["preference"]);
        }
        ("birthday", "is") => {
            let at = if w.get(3) == Some(&"on") { 4 } else { 3 };
            return with_object(c, at, "Birthday is", 0.9, &["age"]);
        }
        // "My job is a lot quieter" compares; it does not say what the job is.
        ("job" | "profession" | "occupation" | "career", "is") if !compares(&w[3..]) => {
            return with_object(c, 3, &format!("{second} is"), 0.8, &["work"]);
        }
        ("goal" | "dream" | "plan" | "ambition", "is") => {
            return with_object(c, 3, &format!("{second} is"), 0.8, &["goal"]);
        }
        ("hobby" | "hobbies", "is" | "are" | "include") => {
            return with_object(c, 3, &format!("{second} {third}"), 0.8, &["hobby"]);
        }
        ("native" | "first", "language") | ("mother", "tongue") if w.get(3) == Some(&"is") => {
            return with_object(c, 4, "Native language is", 0.85, &["language"]);
        }
        _ => {}
    }
    let noun = second.strip_suffix("'s").unwrap_or(second);
    let possessive = noun.len() != second.len();
    let pet = in_list(PETS, noun);
    let relative = in_list(RELATIVES, noun);
    if !pet && !relative {
        return None;
    }
    let named = (possessive && third == "name" && w.get(3) == Some(&"is"))
        || (third == "is" && matches!(w.get(3), Some(&"named" | &"called")));
    if named {
        let name = name_words(c, 4)?;
        return Some(if pet {
            fact(&format!("Has a {noun} named {name}"), 0.85, &["pets"])
        } else {
            fact(&format!("{noun}'s name is {name}"), 0.8, &["family"])
        });
    }
    // "me and my wife are taking the boys": a plural verb after a singular noun has a
    // longer subject than the relative.
    let agrees = third == "is" || noun.ends_with('s') || noun == "children";
    if relative && !possessive && agrees && matches!(third, "is" | "are") && w.get(3).is_none_or(|x| *x != "not") {
        return with_object(c, 3, &format!("{noun} {third}"), 0.7, &["family"]);
    }
    // "My dad was a violinist": what a relative was is part of the family's story ("My dad
    // was sick" is not, nor anything past but "a" or "an").
    if relative && !possessive && third == "was" && matches!(w.get(3), Some(&"a" | &"an")) {
        return with_object(c, 3, &format!("{noun} was"), 0.7, &["family"]);
    }
    None
}

/// "a lot quieter", "much better than mine", "way more fun": a comparison.
fn compares(words: &[&str]) -> bool {
    words.contains(&"than")
        || matches!(words, ["a", "lot" | "bit" | "little", ..] | ["much" | "way" | "even" | "more" | "less", ..])
}

/// Words that open a phrase saying when or how often, before the user says what they do:
/// "During the summer I work as a lifeguard", "for my hobby I like to do canning".
#[rustfmt::skip]
const SETTING_OPENERS: &[&str] = &[
    "in", "on", "at", "during", "for", "every", "most", "these", "nowadays", "lately", "around",
    "outside", "besides", "over", "weekdays", "weekends", "mornings", "evenings", "nights",
    "twice", "sometimes", "usually", "often", "always", "growing",
];

/// Where "I" starts after a short setting phrase ("in my free time I paint", "twice a week
/// I swim", "growing up I lived on a farm" -> at "I"), if the clause opens with one. The
/// phrase may hold no other subject ("on Sunday she said I …" is about her).
fn after_setting(w: &[&str]) -> Option<usize> {
    let first = *w.first()?;
    // "5 days a week I dance"; "one day I'll …" is a wish and "one time I …" a story.
    let how_often = is_number(first) && first != "one";
    if !in_list(SETTING_OPENERS, first) && !how_often {
        return None;
    }
    let i = w.iter().take(7).position(|x| *x == "i")?;
    let others = w[..i].iter().any(|x| *x != "my" && in_list(SUBJECT_PRONOUNS, x));
    (!others).then_some(i)
}
