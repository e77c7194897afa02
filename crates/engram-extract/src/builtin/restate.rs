//! Any first-person clause restated as a fact ("I coach my son's soccer team" -> "Coaches
//! their son's soccer team", "my car is a hybrid" -> "Car is a hybrid"), for the clauses no
//! rule reads. Whether such a restatement is worth keeping is not decided here: the clause
//! model (`clause_model`) weighs it, since on human chat the same form states a lasting fact
//! in one clause and small talk in the next ("I went to Peru" / "I went to bed").
//!
//! What is refused here is refused whatever the model says, because it never states a
//! present fact about the speaker: clauses about the listener, negations and what is no
//! longer true (the rules own the few negations that are facts), modals and verbs of
//! thinking or saying (a stance, a plan or a hypothesis), and clauses tied to the day
//! ("yesterday", "tonight").

use super::being::FAMILY_STATUSES;
use super::clauses::skip_lead;
use super::lexicon::*;
use super::mentions;
use super::phrase::{lower_words, object, object_end, render, third_person};
use super::tokens::Tok;
use super::verbs::{CONVERSATIONAL_HAVES, DECIDED_VERBS, NEGATED_RULE_VERBS};
use super::wants::NO_GOAL;

/// Verbs after "I" that make a clause a stance, a courtesy or a modal frame rather than a
/// statement of fact.
#[rustfmt::skip]
const NOT_STATEMENTS: &[&str] = &[
    "would", "could", "should", "might", "may", "must", "shall", "think", "thought", "guess",
    "bet", "wonder", "mean", "meant", "suppose", "imagine", "agree", "understand", "hear",
    "heard", "wish", "doubt", "assume", "say", "said", "tell", "told", "figure", "figured",
    "forgot", "forget", "thank", "apologize", "gotta", "swear", "mind", "reckon", "totally",
    "had", "did", "does", "is", "been", "be", "will", "better",
];

/// Words that tie a clause to the day of the conversation: an event, not a fact.
#[rustfmt::skip]
const TODAY: &[&str] = &[
    "today", "tonight", "yesterday", "tomorrow", "later", "soon", "anymore", "yet", "formerly",
];

/// What follows "have" when the clause is not about what one has ("I have to dash", "I have
/// heard of it").
const NOT_POSSESSION: &[&str] = &["to", "heard", "seen", "read", "tried", "done", "no", "nothing", "any"];

/// The restatement of clause `c` (lead words included), or `None` when it has no form of a
/// statement about the speaker.
pub(super) fn restate(c: &[Tok]) -> Option<String> {
    let (start, _) = skip_lead(c, 0);
    let c = &c[start..];
    let w = lower_words(c, 0);
    let first = *w.first()?;
    if refused(&w) {
        return None;
    }
    match first {
        // "We bought an orchard": the household's, and so the speaker's.
        "i" | "we" => first_person(c, &w),
        "my" => possessed(c, &w),
        _ => about_oneself(c, &w),
    }
}

/// What makes a clause state no present fact, whoever reads it: a conditional or
/// uncertain opening, the day of the conversation, what is no longer so.
fn refused(w: &[&str]) -> bool {
    w.first().is_some_and(|first| in_list(NON_FACTUAL_OPENERS, first))
        || w.iter().any(|x| in_list(TODAY, x))
        || w.windows(2).any(|p| matches!(p, ["no", "longer"] | ["used", "to"] | ["last", "night"] | ["right", "now"]))
}

/// Whether a rule's fact scored below the default threshold (`fact`, read from clause
/// `c`) may be weighed by the clause model. The rules doubt for reasons the model cannot
/// see; those stand: a clause tied to the day or to the listener, a negation, "a lot" of
/// something (how much, not what), an object that points at something in the conversation
/// ("the colors", "the store"), a passing state ("I've been frazzled"), a wish that names
/// no goal ("I'd love to learn", "to visit sometime").
pub(super) fn may_reweigh(c: &[Tok], fact: &str) -> bool {
    let (start, _) = skip_lead(c, 0);
    let c = &c[start..];
    let w = lower_words(c, 0);
    let pointing = fact
        .split(' ')
        .collect::<Vec<_>>()
        .windows(2)
        .any(|p| p[0].eq_ignore_ascii_case("the") && p[1].starts_with(char::is_lowercase));
    // The want rule's wish with nothing but its verb and [`NO_GOAL`] words after it.
    let unnamed_goal =
        fact.strip_prefix("Wants to ").is_some_and(|goal| goal.split(' ').skip(1).all(|x| in_list(NO_GOAL, x)));
    if refused(&w)
        || pointing
        || unnamed_goal
        || w.iter().any(|x| in_list(SECOND_PERSON, x) || matches!(*x, "not" | "never"))
        || w.windows(2).any(|p| p == ["a", "lot"])
    {
        return false;
    }
    let k = verb_at(&w, 1);
    if w.first() != Some(&"i") || k >= w.len() {
        return true;
    }
    // "I've been frazzled" is "I am frazzled" in the perfect.
    let k = if w[k] == "have" && w.get(k + 1) == Some(&"been") { k + 1 } else { k };
    match w[k] {
        "been" => lasting_complement(c, &w, k, "am"),
        verb => lasting_complement(c, &w, k, verb),
    }
}

/// Where the verb of a clause is when its subject ends before `at`: past the hedges
/// ([`hedge_len`]) and [`SCARCELY`]'s adverbs.
fn verb_at(w: &[&str], mut at: usize) -> usize {
    loop {
        let rest = w.get(at..).unwrap_or_default();
        match hedge_len(rest) {
            0 if rest.first().is_some_and(|x| in_list(SCARCELY, x)) => at += 1,
            0 => return at,
            n => at += n,
        }
    }
}

/// "I [adverbs] verb object": the verb in the third person, the object as the rules cut it.
fn first_person(c: &[Tok], w: &[&str]) -> Option<String> {
    let k = verb_at(w, 1);
    let verb = *w.get(k)?;
    // "I rarely eat fish" says the opposite without its adverb: it is kept.
    let scarcely = w[1..k].iter().find(|x| in_list(SCARCELY, x));
    if verb == "never" || w.get(k + 1).is_some_and(|x| matches!(*x, "not" | "never")) {
        return negated(c, w, k);
    }
    // Where the rules of a verb refuse a clause on purpose ("I speak to my mom", "I got
    // outvoted", "we live and learn"), their refusal stands; where they only do not know
    // its complement ("I work odd shifts", "I grew up on boats"), the model weighs it.
    let decided = in_list(DECIDED_VERBS, verb) && (w[0] == "i" || matches!(verb, "live" | "reside"));
    if !c[k].word
        || !verb.chars().all(char::is_alphabetic)
        || in_list(NOT_STATEMENTS, verb)
        || never_a_verb(verb)
        || decided
    {
        return None;
    }
    if !lasting_complement(c, w, k, verb) {
        return None;
    }
    let said = match verb {
        "am" | "are" => "is".to_owned(),
        "was" | "were" => "was".to_owned(),
        v if is_past(v) || v.ends_with("ing") => v.to_owned(),
        v => third_person(v),
    };
    let said = match scarcely {
        Some(adverb) => format!("{adverb} {said}"),
        None => said,
    };
    let mut at = k + 1;
    while w.get(at).is_some_and(|x| in_list(ADVERBS, x)) {
        at += 1;
    }
    if object_end(c, at) == at {
        // "I knit", "I'm shy": nothing after the verb but the clause's end.
        // "I sure do" answers; it states nothing alone.
        return (!matches!(verb, "am" | "are" | "have" | "do") && at == c.len()).then_some(said);
    }
    let object = object(c, at)?;
    // "We have a dog and a cat": which relatives and pets one has, `mentions` says one by one.
    if verb == "have" && mentions::nouns_in(&object).next().is_some() {
        return None;
    }
    Some(format!("{said} {object}"))
}

/// Whether what follows "am", "are", "was" or "have" at `k` can describe the speaker
/// beyond the moment: not a passing state ("I'm sleepy", "I am so giddy"), not what one is
/// doing right now ("I'm working on dinner"), not a name or a number the rules did not take
/// as one ("I am User 1"), and not what one has in the conversation ("I have a question",
/// "I have to dash").
fn lasting_complement(c: &[Tok], w: &[&str], k: usize, verb: &str) -> bool {
    let mut at = k + 1;
    // "We're both tired": the state is still what follows.
    while w.get(at).is_some_and(|x| in_list(ADVERBS, x) || *x == "both") {
        at += 1;
    }
    let Some(next) = w.get(at).copied() else { return true };
    match verb {
        "am" | "are" | "was" | "were" => {
            let capitalised = c[at].text.starts_with(char::is_uppercase) && next != "i";
            !(in_list(MOMENTARY, next)
                || next.ends_with("ing")
                || next.ends_with("ed")
                || capitalised
                || is_number(next))
        }
        "have" => {
            let conversational =
                matches!(next, "a" | "an") && w.get(at + 1).is_some_and(|x| in_list(CONVERSATIONAL_HAVES, x));
            !(conversational || in_list(NOT_POSSESSION, next))
        }
        _ => true,
    }
}

/// Auxiliaries a negation may follow, as the third person says them.
const NEGATED: &[(&str, &str)] =
    &[("do", "does"), ("am", "is"), ("are", "is"), ("have", "has"), ("can", "can"), ("was", "was"), ("will", "will")];

/// Verbs that, denied, say where one is not or what one has not perceived ("I don't live
/// there", "I've never heard of that band"), which describes the speaker less than the topic.
#[rustfmt::skip]
const DENIED_IN_PASSING: &[&str] = &[
    "live", "work", "heard", "seen", "noticed", "thought", "said", "tried", "watched", "read",
    "know", "think", "mind", "care", "remember", "get", "see", "understand", "want", "need",
    "wait", "believe", "blame", "recall",
];

/// "I don't eat pork" -> "Does not eat pork", "I never skip breakfast" -> "Never skips
/// breakfast", "I've never been abroad" -> "Has never been abroad": what one lastingly does
/// not do or is not. Refused: a denied single word ("I'm not sure"), a past never ("I never
/// liked tea", which says nothing of now), [`DENIED_IN_PASSING`] and the family statuses
/// the rules read.
fn negated(c: &[Tok], w: &[&str], k: usize) -> Option<String> {
    let denied = |x: &str| {
        in_list(DENIED_IN_PASSING, x)
            || in_list(NEGATED_RULE_VERBS, x)
            || in_list(NOT_STATEMENTS, x) && !matches!(x, "been" | "be")
    };
    if w[k] == "never" {
        let verb = *w.get(k + 1)?;
        let past = verb.ends_with("ed") || in_list(IRREGULAR_PAST, verb);
        if past || denied(verb) {
            return None;
        }
        return Some(format!("never {} {}", third_person(verb), object(c, k + 2)?));
    }
    let aux = NEGATED.iter().find(|(aux, _)| *aux == w[k])?.1;
    let at = verb_at(w, k + 2);
    let next = *w.get(at)?;
    // The rules read "I'm not married (yet)"; "not married to the idea" is an idiom.
    if denied(next) || object_end(c, at) <= at + 1 || in_list(FAMILY_STATUSES, next) {
        return None;
    }
    let article = matches!(w.get(at + 1), Some(&"a" | &"an" | &"any"));
    if next == "have" && w.get(at + 1 + usize::from(article)).is_some_and(|x| in_list(ABSTRACT_LACKS, x)) {
        return None;
    }
    Some(format!("{aux} {} {}", w[k + 1], object(c, at)?))
}

/// "my car is a hybrid", "my hobbies are knitting and chess": what the speaker's things
/// are. Relatives, friends and pets are left to the rules and `mentions`, which keep that
/// the speaker has them and not what they do or are like; comparisons ("my job is a lot quieter") describe nothing alone.
fn possessed(c: &[Tok], w: &[&str]) -> Option<String> {
    let copula = w.iter().take(5).position(|x| matches!(*x, "is" | "are" | "was" | "were" | "has" | "have"))?;
    let owned = &w[1..copula];
    let personal = |x: &&str| {
        let noun = x.strip_suffix("'s").unwrap_or(x);
        in_list(RELATIVES, noun)
            || in_list(FAMILY, noun)
            || in_list(PETS, noun)
            || in_list(&["friend", "friends", "ex", "late"], noun)
    };
    if owned.is_empty() || owned.iter().any(personal) || !c[1..copula].iter().all(|t| t.word) {
        return None;
    }
    let comparison = w.get(copula + 1..).is_some_and(|rest| {
        rest.contains(&"than") || matches!(rest, ["a", "lot" | "bit" | "little", ..] | ["much" | "way" | "even", ..])
    });
    if comparison {
        return None;
    }
    object(c, copula + 1)?;
    let end = object_end(c, copula + 1);
    Some(render(&c[1..end], false))
}

/// Most words a clause with another subject may have ("old maps are my favorite read").
const MAX_OTHER_WORDS: usize = 12;

/// "old maps are my favorite read", "the lake near me freezes every winter": a clause with
/// another subject that still speaks of the speaker, kept as said with "my" made "their".
/// Its subject may not point into the conversation ("it", "that", "you").
fn about_oneself(c: &[Tok], w: &[&str]) -> Option<String> {
    let own = w.iter().any(|x| matches!(*x, "my" | "me" | "i" | "mine" | "myself"));
    let listener = w.iter().any(|x| in_list(SECOND_PERSON, x));
    let words = w.iter().filter(|x| x.chars().any(char::is_alphanumeric)).count();
    if !own
        || listener
        || words > MAX_OTHER_WORDS
        || in_list(CONTEXTUAL_STARTS, w[0])
        || in_list(SUBJECT_PRONOUNS, w[0])
    {
        return None;
    }
    if w.iter().any(|x| matches!(*x, "not" | "never")) {
        return None;
    }
    // "Drive my old van" has no subject: a request as often as a statement.
    let copula = w.iter().position(|x| matches!(*x, "is" | "are" | "was" | "were"))?;
    let end = object_end(c, 0);
    (copula > 0 && end > copula + 1 && c[..end].iter().any(|t| t.is("my") || t.is("me") || t.is("i")))
        .then(|| render(&c[..end], false))
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokenize;
    use super::*;

    fn said(text: &str) -> Option<String> {
        restate(&tokenize(text))
    }

    #[test]
    fn first_person_clauses_are_restated_in_the_third_person() {
        assert_eq!(said("Well, I coach my niece's chess club").as_deref(), Some("coaches their niece's chess club"));
        assert_eq!(said("I really went to Peru in May").as_deref(), Some("went to Peru in May"));
        assert_eq!(said("I'm pretty handy with engines").as_deref(), Some("is handy with engines"));
        assert_eq!(said("I whittle").as_deref(), Some("whittles"));
        assert_eq!(said("we bought an orchard").as_deref(), Some("bought an orchard"));
        // "both" is no verb ("Boths love wine"); "much of a" is no hedge ("Is not of a hiker").
        assert_eq!(said("I both brew cider").as_deref(), Some("brews cider"));
        assert_eq!(said("I'm not much of a skier").as_deref(), Some("is not much of a skier"));
    }

    #[test]
    fn a_pronoun_or_an_article_after_i_is_not_restated_as_a_verb() {
        assert_eq!(said("yeah I its quite not that hard to get"), None);
        assert_eq!(said("I the garden grows fast"), None);
        assert_eq!(said("I them all the time"), None);
        // "I (had) better go": a modal typed without "had", not a verb to conjugate.
        assert_eq!(said("well I better pick a hideout"), None);
    }

    #[test]
    fn hedges_before_the_verb_are_not_the_verb() {
        // An "-ly" word no list names, and "sort of", sit where the verb would.
        assert_eq!(said("I wholeheartedly agree, Ramon"), None, "a stance behind its hedge");
        assert_eq!(said("I wholeheartedly detest sprouts").as_deref(), Some("detests sprouts"));
        assert_eq!(said("we sort of fancy knitting socks").as_deref(), Some("fancies knitting socks"));
        assert_eq!(said("I eventually adopted three ferrets").as_deref(), Some("adopted three ferrets"));
        assert_eq!(said("I seldom bake rye loaves").as_deref(), Some("seldom bakes rye loaves"), "a near denial kept");
        // A verb that ends in "-ly" stays the verb.
        assert_eq!(said("I supply bakeries with rye").as_deref(), Some("supplies bakeries with rye"));
        assert_eq!(said("Well, we dutifully do"), None, "an answer alone states nothing");
    }

    #[test]
    fn doubted_rule_facts_are_reweighed_unless_the_rules_doubt_stands() {
        let may = |text: &str, fact: &str| may_reweigh(&tokenize(text), fact);
        assert!(may("I was a glazier", "Was a glazier"));
        assert!(!may("I was a glazier yesterday", "Was a glazier yesterday"));
        assert!(!may("I love the kites", "Loves the kites"));
        assert!(!may("I've been sleepy", "Has been sleepy"));
        assert!(!may("I fly kites a lot", "Flies kites"));
        assert!(!may("I have never flown a kite", "Has never flown a kite"));
    }

    #[test]
    fn lasting_negations_are_restated() {
        assert_eq!(said("I don't own a kite").as_deref(), Some("does not own a kite"));
        assert_eq!(said("I never skip breakfast").as_deref(), Some("never skips breakfast"));
        assert_eq!(said("I've never been to Oslo").as_deref(), Some("has never been to Oslo"));
        assert_eq!(said("I'm not a morning person").as_deref(), Some("is not a morning person"));
        // The rules' own negations stand.
        assert_eq!(said("I don't drive to Oslo"), None);
    }

    #[test]
    fn what_ones_things_are_is_restated() {
        assert_eq!(said("my van is a camper").as_deref(), Some("van is a camper"));
        assert_eq!(said("My hobbies are chess and kites").as_deref(), Some("hobbies are chess and kites"));
        assert_eq!(said("my van is way bigger than that"), None);
        assert_eq!(said("my cousin is a pilot"), None);
        assert_eq!(said("my parrot is chatty"), None);
        assert_eq!(said("we have a parrot and a ferret"), None);
    }

    #[test]
    fn clauses_about_oneself_with_another_subject_are_restated() {
        assert_eq!(said("Baking bread is my weekend ritual").as_deref(), Some("Baking bread is their weekend ritual"));
        assert_eq!(said("it is my pick"), None);
        assert_eq!(said("Bake my bread"), None);
        assert_eq!(said("Baking bread is your thing"), None);
    }

    #[test]
    fn stances_negations_the_listener_and_the_day_are_refused() {
        assert_eq!(said("I think kites are fun"), None);
        assert_eq!(said("I'm not certain"), None);
        assert_eq!(said("I never flew a kite"), None);
        assert_eq!(said("I've never heard of kites"), None);
        assert_eq!(said("I flew my kite yesterday"), None);
        assert_eq!(said("I like your kite"), None);
        assert_eq!(said("I used to fly kites"), None);
        assert_eq!(said("I have to fly"), None);
        assert_eq!(said("I will fly a kite"), None);
        assert_eq!(said("I'm so sleepy"), None);
        assert_eq!(said("we're both tired then"), None);
        assert_eq!(said("I'm flying a kite"), None);
        assert_eq!(said("I have a question"), None);
        assert_eq!(said("I speak to the kite club"), None, "the rules' refusal");
        assert_eq!(said("If I flew kites"), None);
    }
}
