//! Facts stated in passing: people, animals and a few kinds of things the user calls
//! theirs anywhere in a sentence ("my twin sister runs marathons", "walking my two dogs",
//! "my truck broke down") say that the user has them, even when the sentence is about
//! something else. In chat this is how family, pets and possessions come up far more often
//! than "I have a sister"; so does the other person's "How is your daughter?", answered,
//! and where one lives ("so hot here in Alabama").

use super::clauses::YES;
use super::lexicon::{PASSING_PLACES, in_list, is_number};
use super::phrase::fact;
use super::tokens::Tok;
use crate::ExtractedFact;

/// Relatives one has or not (everyone has parents, so "my mom" states nothing), the people
/// one lives with, and pets. Nouns as often used for something else ("lab", "mouse",
/// "baby" as an endearment) are left out.
#[rustfmt::skip]
const KIN_AND_PETS: &[(&str, &str, &str)] = &[
    // (singular, plural, tag)
    ("husband", "husbands", "family"), ("wife", "wives", "family"),
    ("boyfriend", "boyfriends", "family"), ("girlfriend", "girlfriends", "family"),
    ("fiance", "fiances", "family"), ("fiancee", "fiancees", "family"), ("fiancé", "fiancés", "family"),
    ("son", "sons", "family"), ("daughter", "daughters", "family"), ("kid", "kids", "family"),
    ("child", "children", "family"), ("brother", "brothers", "family"), ("sister", "sisters", "family"),
    ("sibling", "siblings", "family"), ("grandson", "grandsons", "family"),
    ("granddaughter", "granddaughters", "family"), ("grandchild", "grandchildren", "family"),
    ("grandkid", "grandkids", "family"), ("stepson", "stepsons", "family"),
    ("stepdaughter", "stepdaughters", "family"), ("roommate", "roommates", "family"),
    ("aunt", "aunts", "family"), ("uncle", "uncles", "family"),
    ("cousin", "cousins", "family"), ("niece", "nieces", "family"), ("nephew", "nephews", "family"),
    ("dog", "dogs", "pets"), ("cat", "cats", "pets"), ("puppy", "puppies", "pets"),
    ("kitten", "kittens", "pets"), ("horse", "horses", "pets"), ("rabbit", "rabbits", "pets"),
    ("bunny", "bunnies", "pets"), ("hamster", "hamsters", "pets"), ("parrot", "parrots", "pets"),
    ("turtle", "turtles", "pets"), ("snake", "snakes", "pets"), ("lizard", "lizards", "pets"),
    ("goldfish", "goldfish", "pets"), ("ferret", "ferrets", "pets"), ("pony", "ponies", "pets"),
];

/// Things people call theirs in passing ("my truck broke down", "weeding my garden") as
/// often as they say they have them. Nouns as often said of what is not one's own ("my
/// house" for where one is, "my job" for today's work) are left out.
#[rustfmt::skip]
const POSSESSIONS: &[(&str, &str, &str)] = &[
    ("garden", "gardens", "hobby"), ("farm", "farms", "personal"), ("ranch", "ranches", "personal"),
    ("cabin", "cabins", "personal"), ("car", "cars", "vehicle"), ("truck", "trucks", "vehicle"),
    ("bike", "bikes", "vehicle"), ("motorcycle", "motorcycles", "vehicle"), ("boat", "boats", "vehicle"),
    ("guitar", "guitars", "hobby"), ("band", "bands", "hobby"), ("camera", "cameras", "hobby"),
];

/// The entry of [`KIN_AND_PETS`] or [`POSSESSIONS`] whose singular or plural `word` is.
fn owned(word: &str) -> Option<&'static (&'static str, &'static str, &'static str)> {
    KIN_AND_PETS.iter().chain(POSSESSIONS).find(|(s, p, _)| *s == word || *p == word)
}

/// Words that say what was called one's own is gone ("we sold our boat", "my dog died
/// last spring", "the storm wrecked my truck"): no fact that the user has it.
#[rustfmt::skip]
const LOSS: &[&str] = &[
    "sold", "selling", "lost", "losing", "died", "passed", "stolen", "totaled", "totalled",
    "wrecked", "crashed", "miss", "missed", "former",
];

/// Words that may stand between "my" and the noun and are kept in the fact ("my twin
/// sister"); a count ("my two cats") is kept too. Anything else ("my ex wife", "my late
/// husband", "my friend's dog") ends the match.
const KEPT_MODIFIERS: &[&str] =
    &["twin", "little", "big", "older", "younger", "oldest", "youngest", "elder", "eldest", "baby", "identical"];

/// Modifiers that may stand there but say nothing lasting ("my new puppy" is still a puppy).
const DROPPED_MODIFIERS: &[&str] = &["a", "an", "new", "only", "two-year-old", "sweet", "beautiful", "lovely", "own"];

/// A relative or pet the user has, and the fact that says so.
pub(super) struct Mention {
    /// The singular, which identifies the mention for deduplication.
    pub(super) noun: &'static str,
    pub(super) fact: ExtractedFact,
}

impl Mention {
    /// The mention, taken from the user message `seq`.
    pub(super) fn said_in(self, seq: i64) -> Mention {
        Mention { fact: super::said_in(self.fact, seq), ..self }
    }
}

/// Whose relatives, pets and things a turn's words are about.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Whose {
    /// The user's own words: "my", "our", "we have".
    Speaker,
    /// The other person's words to the user: "your" ("How is your daughter?"). What they
    /// call the user's is less certain than what the user says, so it scores lower.
    Listener,
}

/// Pronouns by which an answer takes up someone the question named ("How is your
/// daughter?" "She loves the dorm").
const TAKEN_UP_BY: &[&str] = &["he", "she", "they", "it", "him", "her", "them", "his", "their", "its"];

impl Mention {
    /// Whether `answer` speaks of what was named again, by its noun or a pronoun, or says
    /// yes: an answer that goes on about something else has not said the other person was
    /// right.
    pub(super) fn taken_up(&self, answer: &[Tok]) -> bool {
        answer.iter().any(|t| {
            let word = t.lower.strip_suffix("'s").unwrap_or(&t.lower);
            in_list(TAKEN_UP_BY, word) || in_list(YES, word) || owned(word).is_some_and(|(s, _, _)| *s == self.noun)
        })
    }
}

/// Each relative, pet or possession the words call "my" or "our" or say "we have" (or, in
/// the other person's words, "your"), as a fact that the user has them; "and" carries the
/// "my" on ("my husband and daughter"). None in a sentence that says it is gone, or in
/// which the other person is sorry.
pub(super) fn of(words: &[Tok], whose: Whose) -> Vec<Mention> {
    // The other person's sympathy ("sorry about your husband") says the same.
    let gone = |t: &Tok| in_list(LOSS, &t.lower) || whose == Whose::Listener && t.is("sorry");
    if words.iter().any(gone) {
        return Vec::new();
    }
    let score = match whose {
        Whose::Speaker => 0.75,
        Whose::Listener => 0.7,
    };
    let mut out = Vec::new();
    // Where the last mention's noun was, so that "and" right after it starts another.
    let mut last_noun = None;
    for (i, tok) in words.iter().enumerate() {
        let continues = tok.is("and") && last_noun.is_some_and(|n: usize| n + 1 == i);
        let opens = match whose {
            Whose::Speaker => tok.is("my") || tok.is("our") || tok.is("have") && i > 0 && words[i - 1].is("we"),
            Whose::Listener => tok.is("your"),
        };
        if !(opens || continues) {
            continue;
        }
        let mut kept: Vec<&str> = Vec::new();
        let mut count = None;
        let mut j = i + 1;
        // At most three words between "my" and the noun, so the scan stays linear.
        while let Some(next) = words.get(j).filter(|_| j <= i + 3) {
            let word = next.lower.as_str();
            if is_number(word) && count.is_none() && kept.is_empty() {
                count = Some(next.text.as_str());
            } else if in_list(KEPT_MODIFIERS, word) {
                kept.push(word);
            } else if !in_list(DROPPED_MODIFIERS, word) {
                break;
            }
            j += 1;
        }
        let Some(word) = words.get(j).map(|t| t.lower.as_str()) else { continue };
        let word = word.strip_suffix("'s").unwrap_or(word);
        let Some(&(singular, _, tag)) = owned(word) else {
            continue;
        };
        last_noun = Some(j);
        let mut phrase: Vec<&str> = Vec::new();
        match count {
            Some(n) => phrase.push(n),
            None if word == singular => {
                let next = kept.first().copied().unwrap_or(word);
                phrase.push(if next.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" })
            }
            None => {}
        }
        phrase.extend(&kept);
        phrase.push(word);
        out.push(Mention { noun: singular, fact: fact(&format!("Has {}", phrase.join(" ")), score, &[tag]) });
    }
    out
}

/// The singular of each relative, pet or possession a fact's text names.
pub(super) fn nouns_in(text: &str) -> impl Iterator<Item = &'static str> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter_map(|w| {
        let w = w.to_lowercase();
        owned(&w).map(|(s, _, _)| *s)
    })
}

/// The singular of each relative, pet or possession a fact already tells of, so that a
/// mention adds nothing then ("Has a dog named Rex" beats "Has a dog"). A possession named
/// in any fact is that fact's detail ("Rides their bike to work"); a relative or pet is a
/// fact of its own beside what the user does with them ("Calls their son every night" and
/// "Has a son"), unless the fact already says the user has them.
pub(super) fn covered_by(fact: &str) -> impl Iterator<Item = &'static str> + '_ {
    let has = fact.starts_with("Has ");
    nouns_in(fact).filter(move |noun| has || POSSESSIONS.iter().any(|(s, _, _)| s == noun))
}

/// Words that end the name of a place after "here in" ("here in Boston and it's cold").
#[rustfmt::skip]
const PLACE_ENDS: &[&str] = &[
    "and", "but", "so", "or", "because", "where", "with", "for", "at", "on", "by", "near", "is", "are",
    "was", "it", "its", "we", "i", "they", "right", "now", "today", "too", "lol", "haha", "during",
    "this", "these", "every", "all", "since", "though", "yet", "either", "as", "of", "to",
];

/// Words that make where one is "here" a visit, not a home ("on vacation here in Maui").
const VISITS: &[&str] = &["visit", "visiting", "vacation", "trip", "holiday", "hotel", "staying", "tour"];

/// "It is so hot here in Alabama", "the winters here in the tundra": where the speaker
/// lives, said in passing. The place is the one to three words after "here in" (with "the"
/// kept), up to a word that ends it; none when they name a time, an amount or the speaker's
/// own rooms, or the sentence speaks of a visit.
pub(super) fn home(words: &[Tok]) -> Option<ExtractedFact> {
    if words.iter().any(|t| in_list(VISITS, &t.lower)) {
        return None;
    }
    let at = words.windows(2).position(|p| p[0].is("here") && p[1].is("in"))? + 2;
    let the = words.get(at).is_some_and(|t| t.is("the"));
    let from = at + usize::from(the);
    let place: Vec<&Tok> = words[from..]
        .iter()
        .take(3)
        .take_while(|t| t.word && !in_list(PLACE_ENDS, &t.lower) && t.lower.chars().all(char::is_alphabetic))
        .collect();
    if place.is_empty() || place.iter().any(|t| in_list(PASSING_PLACES, &t.lower) || is_number(&t.lower)) {
        return None;
    }
    let name: Vec<&str> = place.iter().map(|t| t.text.as_str()).collect();
    let the = if the { "the " } else { "" };
    Some(fact(&format!("Lives in {the}{}", name.join(" ")), 0.7, &["location"]))
}
