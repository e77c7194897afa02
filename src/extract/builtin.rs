//! Built-in fact extractor: deterministic English rules that need no model and no network.
//!
//! It turns the user's own first-person statements ("I live in Paris", "My name is Alice")
//! into short third-person facts ("Lives in Paris", "Name is Alice"), each with a confidence
//! score and category tags. It favours precision over recall: questions, hypotheticals,
//! negated statements and statements about other people are skipped rather than guessed at,
//! and every pattern that can misfire scores below the service's default `min_confidence`
//! (0.7), so only the reliable patterns are stored unless an agent lowers its threshold.

use std::collections::HashSet;

use super::{ExtractedFact, ExtractionRequest};
use crate::domain::message::Role;

/// Facts are meant to be glanced at in a prompt; anything longer is a paraphrase of a whole
/// message rather than a fact.
const MAX_FACT_CHARS: usize = 120;

/// Long objects are usually run-on sentences that swallowed a second clause.
const MAX_OBJECT_TOKENS: usize = 14;

/// Extracts facts from the user turns with `seq > from_seq`, in order of appearance,
/// deduplicated case-insensitively.
pub fn extract(request: &ExtractionRequest) -> Vec<ExtractedFact> {
    let mut seen = HashSet::new();
    let mut facts = Vec::new();
    let turns = request.turns.iter().filter(|turn| turn.role == Role::User && turn.seq > request.from_seq);
    for turn in turns {
        // "Hi! I'm Bob": the greeting makes the next sentence an introduction.
        let mut greeted = false;
        for sentence in split_sentences(&turn.text) {
            let tokens = tokenize(sentence.text);
            let (start, greeting) = skip_lead(&tokens, 0);
            let after_greeting = greeted;
            greeted = greeting && start == tokens.len();
            if sentence.question || is_question(&tokens[start..]) || is_hypothetical(&tokens[start..]) {
                continue;
            }
            for clause in split_clauses(&tokens) {
                if let Some(fact) = match_clause(clause, after_greeting)
                    && seen.insert(fact.fact.to_lowercase())
                {
                    facts.push(fact);
                }
            }
        }
    }
    facts
}

// ---------------------------------------------------------------------------------------
// Sentences and tokens
// ---------------------------------------------------------------------------------------

struct Sentence<'a> {
    text: &'a str,
    question: bool,
}

/// Abbreviations whose trailing period does not end a sentence.
const ABBREVIATIONS: &[&str] = &["mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "prof", "mt", "ft", "approx"];

fn split_sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut sentences = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let terminator = match c {
            '!' | '?' | '\n' | '\r' => true,
            '.' | '…' => !period_is_internal(text, &chars, i),
            _ => false,
        };
        if !terminator {
            i += 1;
            continue;
        }
        let mut question = c == '?';
        let mut j = i + 1;
        while j < chars.len() && matches!(chars[j].1, '.' | '!' | '?' | '…' | '\n' | '\r') {
            question |= chars[j].1 == '?';
            j += 1;
        }
        push_sentence(&mut sentences, &text[start..pos], question);
        start = chars.get(j).map_or(text.len(), |&(p, _)| p);
        i = j;
    }
    push_sentence(&mut sentences, &text[start..], false);
    sentences
}

fn push_sentence<'a>(sentences: &mut Vec<Sentence<'a>>, text: &'a str, question: bool) {
    let text = text.trim();
    if !text.is_empty() {
        sentences.push(Sentence { text, question });
    }
}

/// A period inside "3.5", "U.S." or "e.g.", after "Dr" or after an initial ("J. K.") does
/// not end the sentence.
fn period_is_internal(text: &str, chars: &[(usize, char)], i: usize) -> bool {
    if chars[i].1 != '.' {
        return false;
    }
    if chars.get(i + 1).is_some_and(|&(_, c)| c.is_alphanumeric()) {
        return true;
    }
    let before = &text[..chars[i].0];
    let chunk = before.rsplit(char::is_whitespace).next().unwrap_or_default();
    let initial = chunk.len() == 1 && chunk != "I" && chunk.starts_with(char::is_uppercase);
    chunk.contains('.') || initial || ABBREVIATIONS.contains(&chunk.to_lowercase().as_str())
}

#[derive(Debug, Clone)]
struct Tok {
    /// Original spelling, kept so that names and places keep their capitals.
    text: String,
    lower: String,
    word: bool,
}

impl Tok {
    fn word(text: &str) -> Self {
        Tok { text: text.to_string(), lower: text.to_lowercase(), word: true }
    }

    fn punct(c: char) -> Self {
        Tok { text: c.to_string(), lower: c.to_string(), word: false }
    }

    fn is(&self, word: &str) -> bool {
        self.lower == word
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '$' | '%' | '#' | '+' | '&')
}

/// Splits into words and punctuation, expanding contractions so that the rules only have
/// to know one spelling ("I'm" and "I am", "don't" and "do not").
fn tokenize(text: &str) -> Vec<Tok> {
    let normalised: String = text
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '`' => '\'',
            '\u{201c}' | '\u{201d}' => '"',
            '\u{2013}' | '\u{2014}' => '-',
            other => other,
        })
        .collect();
    let chars: Vec<char> = normalised.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if !is_word_char(c) {
            tokens.push(Tok::punct(c));
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() {
            let c = chars[i];
            let joiner =
                matches!(c, '\'' | '-' | '.') && i > start && chars.get(i + 1).is_some_and(|&n| is_word_char(n));
            if is_word_char(c) || joiner {
                i += 1;
            } else {
                break;
            }
        }
        // Initials keep their period: "J. Cole" and "the U.S." are names, not sentence ends.
        let letters = &chars[start..i];
        let initials = letters.iter().step_by(2).all(|c| c.is_alphabetic())
            && letters.iter().skip(1).step_by(2).all(|&c| c == '.')
            && letters != ['I'];
        if initials && letters.len() % 2 == 1 && chars.get(i) == Some(&'.') {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        push_word(&mut tokens, &word);
    }
    tokens
}

fn push_word(tokens: &mut Vec<Tok>, word: &str) {
    let lower = word.to_lowercase();
    let expansion: Option<&[&str]> = match lower.as_str() {
        "i'm" | "im" => Some(&["I", "am"]),
        "i've" => Some(&["I", "have"]),
        "i'd" => Some(&["I", "would"]),
        "i'll" => Some(&["I", "will"]),
        "can't" | "cant" | "cannot" => Some(&["can", "not"]),
        "won't" => Some(&["will", "not"]),
        "ain't" => Some(&["is", "not"]),
        "dont" => Some(&["do", "not"]),
        "didnt" => Some(&["did", "not"]),
        "doesnt" => Some(&["does", "not"]),
        "it's" => Some(&["it", "is"]),
        "that's" => Some(&["that", "is"]),
        "there's" => Some(&["there", "is"]),
        "what's" => Some(&["what", "is"]),
        "he's" => Some(&["he", "is"]),
        "she's" => Some(&["she", "is"]),
        "name's" => Some(&["name", "is"]),
        "you're" => Some(&["you", "are"]),
        "we're" => Some(&["we", "are"]),
        "they're" => Some(&["they", "are"]),
        "you've" => Some(&["you", "have"]),
        "we've" => Some(&["we", "have"]),
        "they've" => Some(&["they", "have"]),
        _ => None,
    };
    if let Some(parts) = expansion {
        tokens.extend(parts.iter().map(|p| Tok::word(p)));
    } else if let Some(stem) = lower.strip_suffix("n't") {
        tokens.push(Tok::word(stem));
        tokens.push(Tok::word("not"));
    } else {
        tokens.push(Tok::word(word));
    }
}

// ---------------------------------------------------------------------------------------
// Sentence-level filters and clause splitting
// ---------------------------------------------------------------------------------------

/// Words that open a message without carrying content ("Oh, well, I live in Paris").
#[rustfmt::skip]
const LEAD_WORDS: &[&str] = &[
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
fn skip_lead(tokens: &[Tok], mut i: usize) -> (usize, bool) {
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
const AUXILIARIES: &[&str] = &[
    "do", "does", "did", "is", "are", "am", "was", "were", "can", "could", "would", "will", "should", "have", "has",
    "had", "shall", "may", "might",
];
const SUBJECTS: &[&str] = &["i", "you", "we", "they", "he", "she", "it", "my", "your", "there", "u"];

/// Catches questions whose question mark was left off ("what is my name").
fn is_question(tokens: &[Tok]) -> bool {
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
fn is_hypothetical(tokens: &[Tok]) -> bool {
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
fn split_clauses(tokens: &[Tok]) -> Vec<&[Tok]> {
    let mut clauses = Vec::new();
    let mut start = 0;
    for j in 1..tokens.len() {
        let tok = &tokens[j];
        let hard = !tok.word && matches!(tok.text.as_str(), ";" | ":");
        let prev = &tokens[j - 1];
        let soft = (tok.is("i") || tok.is("my")) && (prev.text == "," || CONJUNCTIONS.contains(&prev.lower.as_str()));
        // "Hi, I'm Bob" stays one clause so that the greeting is seen with the name.
        let only_lead = skip_lead(tokens, start).0 >= j;
        if hard || (soft && !only_lead) {
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

// ---------------------------------------------------------------------------------------
// Word lists
// ---------------------------------------------------------------------------------------

/// Adverbs that may sit between "I" and the verb without changing the fact.
#[rustfmt::skip]
const ADVERBS: &[&str] = &[
    "really", "also", "just", "still", "actually", "absolutely", "totally", "definitely", "truly",
    "usually", "always", "often", "sometimes", "currently", "now", "recently", "mostly",
    "especially", "generally", "kinda", "mainly", "basically", "honestly", "personally",
    "literally", "seriously", "certainly", "even", "already", "normally", "typically",
    "occasionally", "frequently", "regularly", "constantly", "so", "simply", "finally", "only",
    "originally", "pretty", "very", "too",
];

/// Subordinate openers after which the clause states no fact.
const NON_FACTUAL_OPENERS: &[&str] = &[
    "if", "when", "whenever", "unless", "once", "before", "after", "until", "till", "whether", "imagine", "suppose",
    "maybe", "perhaps", "probably",
];

/// Objects that only make sense with the conversation around them ("I love that").
#[rustfmt::skip]
const CONTEXTUAL_STARTS: &[&str] = &[
    "it", "its", "that", "this", "those", "these", "them", "they", "you", "your", "yours", "what",
    "how", "why", "where", "when", "who", "which", "whatever", "so", "too", "there", "here",
    "everything", "everyone", "anything", "nothing", "stuff", "him", "her", "he", "she", "we", "us",
    "not",
];

const CONTEXTUAL_ENDS: &[&str] = &[
    "it", "that", "this", "them", "those", "these", "one", "there", "him", "her", "so", "to", "of", "a", "an", "the",
    "with", "and", "or", "in", "at", "for", "on", "about", "as", "my", "their", "both",
];

/// Verbs that, after "and", start a new predicate about the user.
const PREDICATE_VERBS: &[&str] =
    &["own", "have", "like", "love", "enjoy", "work", "live", "am", "want", "hate", "plan"];

/// Hedges at the start of an object ("my favorite genre is probably action").
#[rustfmt::skip]
const HEDGES: &[&str] = &[
    "probably", "definitely", "usually", "mostly", "currently", "always", "really", "just",
    "actually", "still", "honestly",
];

/// Words that point into the conversation; an object holding one cannot stand alone.
const DEICTIC: &[&str] = &["it", "them", "those", "these", "this", "theirs", "hers", "his", "ours"];

/// Verbs that start the items of an activity list ("to read, swim, and play chess").
#[rustfmt::skip]
const LIST_VERBS: &[&str] = &[
    "play", "go", "watch", "read", "listen", "spend", "hang", "learn", "try", "explore", "visit",
    "eat", "relax", "take", "work", "travel", "cook", "bake", "see", "make", "shop", "tan", "mow",
    "grill", "gamble", "write", "sing", "dance", "ride", "drive", "fish", "hike", "swim", "run",
    "paint", "draw", "knit", "sew", "collect", "build", "garden", "camp", "climb", "surf", "ski",
    "skate", "bike", "walk", "jog", "hunt", "meet", "help", "teach", "sleep", "drink", "party",
    "volunteer", "study", "practice", "craft", "bowl", "sail",
];

/// Facts that mention the person the user is talking to are about the conversation.
const SECOND_PERSON: &[&str] = &["you", "your", "yours", "yourself", "u", "ur"];

/// Words that end a captured object when they appear after its first token.
#[rustfmt::skip]
const OBJECT_BOUNDARIES: &[&str] = &[
    "but", "because", "cause", "since", "although", "though", "while", "whereas", "unless", "if",
    "so", "which", "who", "whom", "whose", "when", "whenever", "where", "until", "till", "that",
    "except", "lol", "haha", "hahaha", "especially", "although", "yet", "cuz", "anyway", "too",
    "either", "right", "who's", "whos",
];

const SUBJECT_PRONOUNS: &[&str] = &[
    "i", "you", "he", "she", "it", "we", "they", "my", "your", "his", "her", "their", "our", "there", "this", "that",
    "then", "these", "those",
];

/// Filler at the end of an object ("I love tea a lot", "I like dogs too").
const TAIL_FILLERS: &[&[&str]] = &[
    &["as", "well"],
    &["a", "lot"],
    &["so", "much"],
    &["very", "much"],
    &["a", "ton"],
    &["right", "now"],
    &["these", "days"],
    &["all", "the", "time"],
    &["by", "the", "way"],
    &["of", "course"],
    &["to", "be", "honest"],
    &["honestly"],
    &["btw"],
    &["too"],
    &["also"],
    &["now"],
    &["though"],
    &["anyway"],
    &["really"],
    &["actually"],
    &["lots"],
    &["myself"],
    &["and"],
    &["or"],
];

#[rustfmt::skip]
const PETS: &[&str] = &[
    "dog", "dogs", "cat", "cats", "puppy", "puppies", "kitten", "kittens", "hamster", "hamsters",
    "rabbit", "rabbits", "bunny", "bunnies", "parrot", "parrots", "bird", "birds", "fish",
    "goldfish", "turtle", "turtles", "snake", "snakes", "lizard", "lizards", "horse", "horses",
    "pony", "ponies", "ferret", "ferrets", "pig", "pigs", "cow", "cows", "goat", "goats",
    "chickens", "gecko", "iguana", "pet", "pets", "parakeet", "cockatiel", "tortoise", "shepherd",
    "retriever", "labrador", "lab", "poodle", "beagle", "pug", "husky", "chihuahua", "terrier",
    "bulldog", "collie", "dachshund", "corgi", "mouse", "mice", "rat", "rats", "duck", "ducks",
    "sheep", "llama", "alpaca",
];

#[rustfmt::skip]
const FAMILY: &[&str] = &[
    "kid", "kids", "child", "children", "son", "sons", "daughter", "daughters", "brother",
    "brothers", "sister", "sisters", "sibling", "siblings", "wife", "husband", "spouse", "partner",
    "boyfriend", "girlfriend", "fiance", "fiancee", "fiancé", "twin", "twins", "baby", "babies",
    "grandchild", "grandchildren", "grandkids", "grandson", "grandsons", "granddaughter",
    "granddaughters", "niece", "nieces", "nephew", "nephews", "cousin", "cousins", "stepson",
    "stepdaughter", "stepchildren", "toddler", "toddlers", "family", "mom", "mother", "dad",
    "father", "parents", "grandparents", "grandmother", "grandfather", "aunt", "uncle", "stepmom",
    "stepdad", "teenagers", "boys", "girls",
];

/// Relatives whose description ("My mother is a dentist") is a fact worth keeping about the
/// user's family; friends and colleagues are deliberately absent.
#[rustfmt::skip]
const RELATIVES: &[&str] = &[
    "mom", "mother", "mum", "dad", "father", "parents", "wife", "husband", "son", "daughter",
    "brother", "sister", "kids", "children", "grandma", "grandmother", "grandpa", "grandfather",
    "grandparents", "aunt", "uncle", "partner", "boyfriend", "girlfriend", "fiance", "fiancee",
    "siblings", "brothers", "sisters", "sons", "daughters", "twin", "stepmom", "stepdad",
    "stepfather", "stepmother", "family", "spouse",
];

#[rustfmt::skip]
const DEVICES: &[&str] = &[
    "laptop", "computer", "pc", "macbook", "mac", "iphone", "ipad", "android", "phone",
    "smartphone", "tablet", "kindle", "playstation", "ps4", "ps5", "xbox", "nintendo", "camera",
    "windows", "linux", "chromebook", "pixel", "samsung", "thinkpad", "vim", "emacs", "vscode",
    "drone", "console", "printer", "smartwatch", "watch", "headphones",
];

#[rustfmt::skip]
const VEHICLES: &[&str] = &[
    "car", "truck", "motorcycle", "motorbike", "van", "suv", "jeep", "tesla", "prius", "minivan",
    "scooter", "bike", "bicycle", "boat", "rv", "sedan", "convertible", "pickup",
];

#[rustfmt::skip]
const HEALTH: &[&str] = &[
    "diabetes", "asthma", "cancer", "arthritis", "allergy", "allergies", "adhd", "autism",
    "anxiety", "depression", "epilepsy", "migraines", "insomnia", "ptsd", "celiac", "ocd",
    "disability", "illness", "disease", "syndrome", "injury", "condition", "surgery", "transplant",
    "scoliosis", "dyslexia", "disorder", "blind", "deaf", "pain",
];

#[rustfmt::skip]
const DIETS: &[&str] = &[
    "vegetarian", "vegan", "pescatarian", "pescetarian", "kosher", "halal", "keto", "paleo",
    "gluten-free", "dairy-free", "teetotal", "teetotaler", "carnivore",
];

#[rustfmt::skip]
const OCCUPATIONS: &[&str] = &[
    "nurse", "teacher", "doctor", "engineer", "developer", "programmer", "lawyer", "accountant",
    "student", "chef", "cook", "waiter", "waitress", "writer", "author", "artist", "musician",
    "designer", "manager", "scientist", "professor", "mechanic", "electrician", "plumber",
    "carpenter", "farmer", "pilot", "firefighter", "officer", "soldier", "veteran", "dentist",
    "pharmacist", "therapist", "librarian", "cashier", "barista", "bartender", "driver", "salesman",
    "consultant", "analyst", "architect", "photographer", "journalist", "editor", "actor",
    "actress", "singer", "dancer", "athlete", "coach", "trainer", "surgeon", "vet", "veterinarian",
    "receptionist", "secretary", "clerk", "janitor", "banker", "baker", "butcher", "tailor",
    "contractor", "freelancer", "entrepreneur", "ceo", "owner", "intern", "researcher", "miner",
    "fisherman", "lifeguard", "paramedic", "mailman", "wrestler", "model", "babysitter", "nanny",
    "housewife", "homemaker", "coder", "assistant", "cop", "policeman", "detective", "worker",
    "employee", "teller", "beekeeper", "rancher", "welder", "technician", "administrator",
    "professional", "specialist", "instructor", "counselor", "psychologist", "physician",
    "attorney", "judge", "politician", "salesperson", "realtor", "agent", "producer", "director",
    "comedian", "youtuber", "streamer", "blogger", "nun", "priest", "pastor", "sailor", "marine",
    "volunteer", "mom", "dad", "mother", "father", "retiree", "graduate", "freshman", "sophomore",
    "junior", "senior", "undergrad", "apprentice", "hairdresser", "stylist", "gardener",
    "landscaper", "guard", "dj", "programmer", "golfer",
];

#[rustfmt::skip]
const LANGUAGES: &[&str] = &[
    "english", "french", "spanish", "german", "italian", "portuguese", "chinese", "mandarin",
    "cantonese", "japanese", "korean", "russian", "arabic", "hindi", "bengali", "urdu", "dutch",
    "swedish", "norwegian", "danish", "finnish", "polish", "greek", "turkish", "hebrew",
    "vietnamese", "thai", "indonesian", "tagalog", "swahili", "persian", "farsi", "czech",
    "hungarian", "romanian", "ukrainian", "latin", "sign", "asl", "irish", "welsh", "punjabi",
    "tamil", "gujarati", "malay", "catalan", "basque", "esperanto",
];

/// Verbs of pastimes; "I knit", "I paint landscapes" are hobby facts as they stand.
#[rustfmt::skip]
const HOBBY_VERBS: &[&str] = &[
    "collect", "practice", "paint", "draw", "knit", "sew", "crochet", "cook", "bake", "sing",
    "dance", "run", "jog", "swim", "hike", "bike", "cycle", "surf", "ski", "skate", "snowboard",
    "fish", "hunt", "garden", "write", "read", "watch", "listen", "climb", "travel", "camp", "sail",
    "golf", "box", "meditate", "exercise", "train", "compete", "build", "brew", "skydive", "walk",
    "blog", "vlog", "sketch", "bowl", "kayak", "row", "workout", "lift", "perform", "compose",
    "produce", "restore", "grow", "raise", "craft", "quilt", "scrapbook", "spend", "donate",
    "visit", "coach", "help",
];

/// Hobby verbs that are a fact even without an object ("I knit").
#[rustfmt::skip]
const BARE_HOBBIES: &[&str] = &[
    "paint", "draw", "knit", "sew", "crochet", "cook", "bake", "sing", "dance", "run", "jog",
    "swim", "hike", "bike", "cycle", "surf", "ski", "skate", "snowboard", "fish", "hunt", "garden",
    "write", "read", "climb", "travel", "camp", "sail", "golf", "box", "meditate", "exercise",
    "blog", "vlog", "sketch", "bowl", "kayak", "row", "lift", "quilt",
];

/// Adjectives that describe the moment of the conversation rather than the person.
#[rustfmt::skip]
const MOMENTARY: &[&str] = &[
    "sorry", "glad", "sure", "fine", "good", "ok", "okay", "well", "great", "happy", "excited",
    "thrilled", "interested", "curious", "afraid", "kidding", "jealous", "impressed", "here",
    "back", "done", "ready", "free", "busy", "tired", "bored", "hungry", "thirsty", "sleepy",
    "down", "up", "in", "out", "on", "off", "aware", "open", "game", "grateful", "thankful",
    "welcome", "honored", "flattered", "new", "lucky", "right", "wrong", "confused", "surprised",
    "shocked", "amazed", "sad", "upset", "worried", "nervous", "scared", "alright", "all", "about",
    "with", "at", "just", "still", "always", "looking", "feeling", "getting", "having", "trying",
    "thinking", "going", "doing", "wondering", "not", "there", "sick", "late", "early", "positive",
    "certain", "totally", "also", "more", "less", "like", "pumped", "stoked", "proud", "relieved",
    "blessed", "home", "awesome", "fantastic", "wonderful", "jk", "serious", "agreed", "that",
    "too", "hoping", "planning", "glad", "appreciative", "touched",
];

#[rustfmt::skip]
const NUMBER_WORDS: &[&str] = &[
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

fn is_number(word: &str) -> bool {
    (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit()))
        || word.split('-').all(|part| NUMBER_WORDS.contains(&part))
}

fn in_list(list: &[&str], word: &str) -> bool {
    list.contains(&word)
}

// ---------------------------------------------------------------------------------------
// Objects and fact text
// ---------------------------------------------------------------------------------------

/// The end (exclusive) of the object that starts at `start`: cut at clause boundaries,
/// at punctuation and at commas that do not continue a short list.
fn object_end(c: &[Tok], start: usize) -> usize {
    let mut end = start;
    while end < c.len() {
        let tok = &c[end];
        if !tok.word {
            if tok.text == "," && comma_continues_list(c, end) {
                end += 1;
                continue;
            }
            if matches!(tok.text.as_str(), "'" | "&" | "/") {
                end += 1;
                continue;
            }
            break;
        }
        if end > start {
            // A capitalised "Who" in "The Who" is a name, not a relative pronoun.
            let proper = tok.text.starts_with(char::is_uppercase);
            if in_list(OBJECT_BOUNDARIES, &tok.lower) && !proper {
                break;
            }
            let next = c.get(end + 1).map_or("", |t| t.lower.as_str());
            if (tok.is("and") || tok.is("or")) && in_list(SUBJECT_PRONOUNS, next) {
                break;
            }
            if tok.is("and") && (next == "then" || next == "now" || next == "also") {
                break;
            }
            // "I'm an engineer and own a studio": a second predicate, not part of the object.
            if tok.is("and") && in_list(PREDICATE_VERBS, next) {
                break;
            }
            if end - start >= MAX_OBJECT_TOKENS {
                break;
            }
        }
        end += 1;
    }
    strip_tail(c, start, end)
}

fn comma_continues_list(c: &[Tok], comma: usize) -> bool {
    let mut i = comma + 1;
    if c.get(i).is_some_and(|t| t.is("and") || t.is("or")) {
        i += 1;
    }
    let Some(next) = c.get(i) else {
        return false;
    };
    if !next.word
        || in_list(SUBJECT_PRONOUNS, &next.lower)
        || in_list(OBJECT_BOUNDARIES, &next.lower)
        || in_list(CONTEXTUAL_STARTS, &next.lower)
        || in_list(ADVERBS, &next.lower)
        || in_list(LEAD_WORDS, &next.lower)
    {
        return false;
    }
    let item = c[i..].iter().take_while(|t| t.word && !in_list(OBJECT_BOUNDARIES, &t.lower)).count();
    item <= 4
}

fn strip_tail(c: &[Tok], start: usize, mut end: usize) -> usize {
    loop {
        let before = end;
        while end > start && (!c[end - 1].word) {
            end -= 1;
        }
        for filler in TAIL_FILLERS {
            let n = filler.len();
            if end >= start + n && c[end - n..end].iter().zip(filler.iter()).all(|(t, w)| t.is(w)) {
                end -= n;
                break;
            }
        }
        if end == before {
            return end;
        }
    }
}

/// The object as text, or `None` when it is empty or only makes sense in context.
fn object(c: &[Tok], start: usize) -> Option<String> {
    object_span(c, start).map(|span| render(span, false))
}

fn object_span(c: &[Tok], mut start: usize) -> Option<&[Tok]> {
    while c.get(start).is_some_and(|t| in_list(HEDGES, &t.lower)) {
        start += 1;
    }
    let end = object_end(c, start);
    let span = c.get(start..end)?;
    let first = span.first()?;
    let last = span.last()?;
    if in_list(CONTEXTUAL_STARTS, &first.lower)
        || in_list(CONTEXTUAL_ENDS, &last.lower)
        || span.iter().any(|t| in_list(SECOND_PERSON, &t.lower) || in_list(DEICTIC, &t.lower))
        || (span.len() >= 2
            && first.is("the")
            && matches!(
                span[1].lower.as_str(),
                "idea" | "sound" | "way" | "fact" | "same" | "thought" | "most" | "best"
            ))
    {
        return None;
    }
    Some(span)
}

/// Joins tokens back into text, turning the user's own pronouns into third person.
/// With `gerunds`, the object is a list of activities given as bare verbs ("to play chess,
/// read, and swim"), which reads as "playing chess, reading, and swimming".
fn render(span: &[Tok], gerunds: bool) -> String {
    let mut out = String::new();
    for (i, tok) in span.iter().enumerate() {
        let after_separator = i > 0 && (span[i - 1].text == "," || span[i - 1].is("and") || span[i - 1].is("or"));
        let verb = i == 0 || (after_separator && in_list(LIST_VERBS, &tok.lower));
        let gerund_form;
        let text = match tok.lower.as_str() {
            _ if gerunds && verb => {
                gerund_form = gerund(&tok.lower);
                gerund_form.as_str()
            }
            "my" => "their",
            "me" => "them",
            "myself" => "themselves",
            "mine" => "theirs",
            "i" => "they",
            _ => tok.text.as_str(),
        };
        let glue = !tok.word && matches!(tok.text.as_str(), "," | "'" | "/");
        if !out.is_empty() && !glue && !out.ends_with(['\'', '/']) {
            out.push(' ');
        }
        out.push_str(text);
    }
    out
}

fn fact(text: &str, score: f64, tags: &[&str]) -> ExtractedFact {
    let mut text = text.trim().trim_end_matches([',', '!', ';', ':']).to_string();
    let last_word = text.rsplit(' ').next().unwrap_or_default();
    let ends_with_initials = last_word.trim_end_matches('.').contains('.') || last_word.len() == 2;
    if !ends_with_initials {
        text = text.trim_end_matches('.').to_string();
    }
    if text.chars().count() > MAX_FACT_CHARS {
        let cut: String = text.chars().take(MAX_FACT_CHARS).collect();
        text = match cut.rfind(' ') {
            Some(space) => cut[..space].to_string(),
            None => cut,
        };
    }
    let mut chars = text.chars();
    let fact = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    ExtractedFact { fact, score, tags: tags.iter().map(|t| t.to_string()).collect() }
}

/// `prefix` followed by the object at `start`, if there is a usable one.
fn with_object(c: &[Tok], start: usize, prefix: &str, score: f64, tags: &[&str]) -> Option<ExtractedFact> {
    object(c, start).map(|obj| fact(&format!("{prefix} {obj}"), score, tags))
}

/// A preference for "the colors" or "the feeling of it" points at something in the
/// conversation; "The Beatles" (capitalised) is a name and stands alone.
fn definite_reference(obj: &str) -> bool {
    obj.strip_prefix("the ").is_some_and(|rest| rest.starts_with(|c: char| c.is_lowercase()))
}

fn third_person(verb: &str) -> String {
    match verb {
        "have" => return "has".to_string(),
        "do" => return "does".to_string(),
        "go" => return "goes".to_string(),
        "be" => return "is".to_string(),
        "workout" => return "works out".to_string(),
        _ => {}
    }
    if ["s", "x", "z", "ch", "sh", "o"].iter().any(|s| verb.ends_with(s)) {
        format!("{verb}es")
    } else if let Some(stem) = verb.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{verb}s")
    }
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

/// "bake" -> "baking", "swim" -> "swimming", "play" -> "playing".
fn gerund(verb: &str) -> String {
    if verb.ends_with("ing") && verb.len() > 5 {
        return verb.to_string();
    }
    if let Some(stem) = verb.strip_suffix("ie") {
        return format!("{stem}ying");
    }
    if verb.len() > 2 && verb.ends_with('e') && !verb.ends_with("ee") && !verb.ends_with("ye") && !verb.ends_with("oe")
    {
        return format!("{}ing", &verb[..verb.len() - 1]);
    }
    let chars: Vec<char> = verb.chars().collect();
    let vowel_groups =
        chars.iter().enumerate().filter(|&(i, &c)| is_vowel(c) && (i == 0 || !is_vowel(chars[i - 1]))).count();
    if let [.., a, b, c] = chars.as_slice()
        && vowel_groups == 1
        && !is_vowel(*a)
        && is_vowel(*b)
        && !is_vowel(*c)
        && !matches!(c, 'w' | 'x' | 'y')
    {
        return format!("{verb}{c}ing");
    }
    format!("{verb}ing")
}

/// "like to bake cookies" reads better as "likes baking cookies".
fn preference(c: &[Tok], start: usize, verb: &str, score: f64, tags: &[&str]) -> Option<ExtractedFact> {
    let obj = if c.get(start).is_some_and(|t| t.is("to")) {
        render(object_span(c, start + 1)?, true)
    } else {
        object(c, start)?
    };
    let score = if definite_reference(&obj) { 0.6 } else { score };
    Some(fact(&format!("{verb} {obj}"), score, tags))
}

/// "got a new job", "started a job as a nurse": employment news rather than possessions.
fn mentions_job(words: &[&str]) -> bool {
    words.iter().take(5).any(|w| matches!(*w, "job" | "career" | "position" | "internship"))
}

fn tags_for(words: &[&str], default: &'static str) -> Vec<&'static str> {
    let mut tags = Vec::new();
    let any = |list: &[&str]| words.iter().any(|w| list.contains(w));
    if any(PETS) {
        tags.push("pets");
    }
    if any(FAMILY) {
        tags.push("family");
    }
    if any(DEVICES) {
        tags.push("device");
    }
    if any(VEHICLES) {
        tags.push("vehicle");
    }
    if any(HEALTH) {
        tags.push("health");
    }
    if any(LANGUAGES) && default == "language" {
        tags.push("language");
    }
    if tags.is_empty() {
        tags.push(default);
    }
    tags
}

fn lower_words(c: &[Tok], start: usize) -> Vec<&str> {
    c.iter().skip(start).map(|t| t.lower.as_str()).collect()
}

// ---------------------------------------------------------------------------------------
// Clause rules
// ---------------------------------------------------------------------------------------

fn match_clause(clause: &[Tok], after_greeting: bool) -> Option<ExtractedFact> {
    let (start, greeting) = skip_lead(clause, 0);
    let greeting = greeting || after_greeting;
    let c = &clause[start..];
    let w = lower_words(c, 0);
    let first = *w.first()?;
    if in_list(NON_FACTUAL_OPENERS, first) {
        return None;
    }
    let no_longer_true = w.contains(&"anymore")
        || w.contains(&"formerly")
        || w.windows(2).any(|p| matches!(p, ["no", "longer"] | ["used", "to"] | ["any", "more"]));
    if no_longer_true {
        return None;
    }
    match first {
        "i" => match_i(c, greeting),
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
    if copula == 0 || copula > 5 || w.get(copula + 1) != Some(&"my") {
        return None;
    }
    if in_list(CONTEXTUAL_STARTS, w[0]) || in_list(SUBJECT_PRONOUNS, w[0]) {
        return None;
    }
    let subject = render(&c[..copula], false);
    let what = w.get(copula + 2)?;
    match *what {
        "favorite" | "favourite" => {
            let end = object_end(c, copula + 3);
            if end > copula + 3 && end - (copula + 3) <= 3 {
                let category = render(&c[copula + 3..end], false);
                let verb = w[copula];
                Some(fact(&format!("Favorite {category} {verb} {subject}"), 0.8, &["preference"]))
            } else {
                Some(fact(&format!("Likes {subject}"), 0.8, &["preference"]))
            }
        }
        "passion" | "hobby" | "life" => Some(fact(&format!("Loves {subject}"), 0.75, &["hobby"])),
        _ => None,
    }
}

const TITLES: &[&str] = &["dr", "mr", "mrs", "ms", "miss", "prof"];

fn name_fact(c: &[Tok], start: usize, score: f64) -> Option<ExtractedFact> {
    let name = name_words(c, start)?;
    Some(fact(&format!("Name is {name}"), score, &["identity"]))
}

/// Up to three name words, capitalised ("alice smith" -> "Alice Smith").
fn name_words(c: &[Tok], start: usize) -> Option<String> {
    // "User 1", "Agent 7": placeholders rather than names.
    let followed_by_number = c
        .iter()
        .skip(start)
        .find(|t| !(t.word && t.text.chars().all(char::is_alphabetic)))
        .is_some_and(|t| is_number(&t.lower));
    if followed_by_number {
        return None;
    }
    let titled =
        c.get(start).is_some_and(|t| in_list(TITLES, &t.lower)) && c.get(start + 1).is_some_and(|t| t.text == ".");
    let words = c.iter().skip(start).enumerate().filter(|&(i, _)| !(titled && i == 1)).map(|(_, t)| t);
    let names: Vec<String> = words
        .enumerate()
        .take_while(|(i, t)| {
            // In "my name is john smith nice to meet you" only the first word is safe.
            let capitalised = *i == 0 || t.text.starts_with(char::is_uppercase);
            t.word && capitalised && t.text.chars().all(char::is_alphabetic)
        })
        .map(|(_, t)| t)
        .take_while(|t| !in_list(OBJECT_BOUNDARIES, &t.lower) && !t.is("and") && !t.is("but"))
        .take(3)
        .map(|t| {
            let mut chars = t.text.chars();
            chars.next().map(|f| f.to_uppercase().chain(chars).collect()).unwrap_or_default()
        })
        .collect();
    if names.is_empty() || in_list(CONTEXTUAL_STARTS, &names[0].to_lowercase()) {
        return None;
    }
    Some(names.join(" "))
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
        ("job" | "profession" | "occupation" | "career", "is") => {
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
    if relative && !possessive && matches!(third, "is" | "are") && w.get(3).is_none_or(|x| *x != "not") {
        return with_object(c, 3, &format!("{noun} {third}"), 0.7, &["family"]);
    }
    None
}

fn match_i(c: &[Tok], greeting: bool) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let mut k = 1;
    while let Some(word) = w.get(k) {
        let emphatic_do = *word == "do" && w.get(k + 1).is_some_and(|v| is_emphasisable(v));
        if !in_list(ADVERBS, word) && !emphatic_do {
            break;
        }
        k += 1;
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
        "got" | "get" if w.get(rest) == Some(&"married") => Some(fact("Got married", 0.8, &["family"])),
        "have" | "has" | "got" => match_have(c, rest),
        "like" => preference(c, rest, "Likes", 0.8, &["preference"]),
        "love" | "adore" => preference(c, rest, "Loves", 0.8, &["preference"]),
        "enjoy" => preference(c, rest, "Enjoys", 0.8, &["preference"]),
        "hate" | "detest" | "despise" | "loathe" => preference(c, rest, "Hates", 0.8, &["preference"]),
        "dislike" => preference(c, rest, "Dislikes", 0.8, &["preference"]),
        "prefer" => preference(c, rest, "Prefers", 0.8, &["preference"]),
        "live" | "reside" => match_live(c, rest),
        "come" if w.get(rest) == Some(&"from") => with_object(c, rest + 1, "Is from", 0.85, &["location"]),
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
        "eat" | "drink" => with_object(c, rest, &third_person(verb), 0.65, &["diet"]),
        "plan" if matches!(w.get(rest), Some(&"to" | &"on")) => with_object(c, rest, "Plans", 0.8, &["goal"]),
        "intend" if w.get(rest) == Some(&"to") => with_object(c, rest, "Intends", 0.75, &["goal"]),
        "want" => match_want(c, rest),
        "hope" if w.get(rest) == Some(&"to") => with_object(c, rest, "Hopes", 0.7, &["goal"]),
        "dream" if matches!(w.get(rest), Some(&"of" | &"about")) => with_object(c, rest, "Dreams", 0.7, &["goal"]),
        "can" => match w.get(rest) {
            Some(&"speak") => match_language(c, rest + 1, 0.8),
            Some(v)
                if !in_list(AUXILIARIES, v)
                    && !in_list(&["see", "tell", "imagine", "relate", "understand", "help", "try", "go", "not"], v) =>
            {
                with_object(c, rest, "Can", 0.6, &["hobby"])
            }
            _ => None,
        },
        "won" => with_object(c, rest, "Won", 0.7, &["hobby"]),
        "started" | "began" => {
            if mentions_job(&w[rest..]) {
                with_object(c, rest, "Started", 0.75, &["work"])
            } else {
                with_object(c, rest, "Started", 0.6, &["hobby"])
            }
        }
        "do" => with_object(c, rest, "Does", 0.6, &["hobby"]),
        "attend" => with_object(c, rest, "Attends", 0.75, &["education"]),
        v if in_list(HOBBY_VERBS, v) => {
            let prefix = third_person(v);
            if object_end(c, rest) == rest {
                return in_list(BARE_HOBBIES, v).then(|| fact(&prefix, 0.7, &["hobby"]));
            }
            with_object(c, rest, &prefix, 0.75, &["hobby"])
        }
        _ => None,
    }
}

/// Verbs that may follow an emphatic "do" ("I do love tea").
fn is_emphasisable(word: &str) -> bool {
    matches!(word, "like" | "love" | "enjoy" | "have" | "live" | "work" | "speak" | "play" | "prefer")
}

/// Only a few negations state a fact; "I don't live in Paris anymore" says nothing about
/// where the user lives now, while "I don't like onions" is a dislike.
fn match_negated(c: &[Tok], k: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    let (aux, neg) = (w[k], w.get(k + 1).copied().unwrap_or(""));
    if aux != "do" || neg != "not" {
        if aux == "am" && w.get(k + 2..k + 5) == Some(&["a", "fan", "of"]) {
            return with_object(c, k + 5, "Dislikes", 0.7, &["preference"]);
        }
        if aux == "can" && w.get(k + 2) == Some(&"stand") {
            return with_object(c, k + 3, "Dislikes", 0.8, &["preference"]);
        }
        return None;
    }
    let mut v = k + 2;
    while v < w.len() && in_list(&["really", "even", "usually", "generally"], w[v]) {
        v += 1;
    }
    match w.get(v).copied()? {
        "like" | "enjoy" | "love" => preference(c, v + 1, "Dislikes", 0.75, &["preference"]),
        "eat" => with_object(c, v + 1, "Does not eat", 0.8, &["diet"]),
        "drink" => with_object(c, v + 1, "Does not drink", 0.8, &["diet"]),
        "smoke" if object_end(c, v + 1) == v + 1 => Some(fact("Does not smoke", 0.8, &["health"])),
        "have" => {
            let obj = object(c, v + 1)?;
            let tags = tags_for(&lower_words(c, v + 1), "possession");
            Some(fact(&format!("Does not have {obj}"), 0.6, &tags))
        }
        _ => None,
    }
}

fn match_live(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    match w.get(rest).copied() {
        Some("in" | "on" | "near" | "at" | "by" | "outside" | "downtown") => {
            with_object(c, rest, "Lives", 0.85, &["location"])
        }
        Some("with") => with_object(c, rest, "Lives", 0.75, &["family"]),
        Some("alone" | "abroad") => Some(fact(&format!("Lives {}", w[rest]), 0.8, &["location"])),
        _ => None,
    }
}

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
        _ => None,
    }
}

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
        return with_object(c, rest, "Goes", 0.65, &["hobby"]);
    }
    None
}

fn match_want(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    if w.get(rest) == Some(&"to") {
        let conversational = [
            "know", "hear", "see", "say", "ask", "tell", "thank", "talk", "chat", "try", "check", "read", "share",
            "make", "go", "let", "get", "do",
        ];
        if w.get(rest + 1).is_some_and(|v| in_list(&conversational, v)) {
            return with_object(c, rest, "Wants", 0.6, &["goal"]);
        }
        return with_object(c, rest, "Wants", 0.75, &["goal"]);
    }
    with_object(c, rest, "Wants", 0.6, &["goal"])
}

fn match_have(c: &[Tok], mut rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    while w
        .get(rest)
        .is_some_and(|x| matches!(*x, "got" | "also" | "always" | "just" | "recently" | "still" | "actually"))
    {
        rest += 1;
    }
    let next = w.get(rest).copied()?;
    let conversational = matches!(next, "a" | "an")
        && w.get(rest + 1).is_some_and(|x| {
            matches!(
                *x,
                "question"
                    | "feeling"
                    | "good"
                    | "great"
                    | "lot"
                    | "few"
                    | "suggestion"
                    | "bit"
                    | "little"
                    | "couple"
                    | "blast"
                    | "look"
                    | "idea"
                    | "wonderful"
                    | "nice"
            )
        });
    if conversational {
        return None;
    }
    match next {
        "to" | "had" | "never" | "not" | "heard" | "seen" | "done" | "tried" | "read" => None,
        "been" => match w.get(rest + 1).copied()? {
            "married" => with_object(c, rest + 1, "Has been", 0.8, &["family"]),
            d if in_list(DIETS, d) => with_object(c, rest + 1, "Is", 0.85, &["diet"]),
            _ => with_object(c, rest + 1, "Has been", 0.6, &["hobby"]),
        },
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
            let tags = tags_for(&words[..end.min(words.len())], "possession");
            let score = match tags[0] {
                "pets" | "family" => 0.85,
                "device" | "vehicle" | "health" => 0.8,
                _ => 0.6,
            };
            Some(fact(&format!("Has {obj}"), score, &tags))
        }
    }
}

fn match_was(c: &[Tok], rest: usize) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    match (w.get(rest).copied()?, w.get(rest + 1).copied()) {
        ("born", Some("in")) if w.get(rest + 2).is_some_and(|x| is_number(x)) => {
            with_object(c, rest + 1, "Was born", 0.85, &["age"])
        }
        ("born", Some("on")) => with_object(c, rest + 2, "Birthday is", 0.85, &["age"]),
        ("born" | "raised", Some("in" | "and")) => with_object(c, rest, "Was", 0.85, &["location"]),
        ("a" | "an", _) => with_object(c, rest, "Was", 0.6, &["identity"]),
        _ => None,
    }
}

fn match_am(c: &[Tok], mut rest: usize, greeting: bool) -> Option<ExtractedFact> {
    let w = lower_words(c, 0);
    while w.get(rest).is_some_and(|x| in_list(ADVERBS, x)) {
        rest += 1;
    }
    let next = *w.get(rest)?;
    let after = w.get(rest + 1).copied();
    if is_number(next) {
        return match (after, w.get(rest + 2).copied()) {
            (Some("years" | "year" | "yrs"), Some("old")) | (None, _) => {
                let score = if after.is_some() { 0.9 } else { 0.8 };
                Some(fact(&format!("Is {} years old", c[rest].text), score, &["age"]))
            }
            _ => None,
        };
    }
    match next {
        "from" => return with_object(c, rest + 1, "Is from", 0.85, &["location"]),
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
        "married" | "divorced" | "single" | "engaged" | "widowed" | "pregnant" | "separated" => {
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
        "hoping" if after == Some("to") => {
            return with_object(c, rest + 1, "Hopes", 0.7, &["goal"]);
        }
        "saving" => return with_object(c, rest, "Is", 0.7, &["goal"]),
        "going" if after == Some("to") => return with_object(c, rest, "Is", 0.6, &["goal"]),
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
        return with_object(c, rest, "Is", 0.5, &["personality"]);
    }
    None
}

/// Groups one belongs to rather than places one happens to be in ("in the army", not "in
/// the kitchen").
fn in_group(word: &str) -> Option<&'static str> {
    match word {
        "army" | "navy" | "military" | "marines" | "force" | "guard" | "business" | "industry" => Some("work"),
        "band" | "choir" | "orchestra" | "club" | "team" | "league" => Some("hobby"),
        "relationship" | "love" => Some("family"),
        "grade" | "class" | "college" | "school" | "university" | "program" => Some("education"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::Turn;

    fn request(turns: &[(Role, &str)], from_seq: i64) -> ExtractionRequest {
        ExtractionRequest {
            turns: turns
                .iter()
                .enumerate()
                .map(|(i, (role, text))| Turn { seq: i as i64 + 1, role: *role, text: text.to_string() })
                .collect(),
            from_seq,
            instructions: None,
        }
    }

    fn facts(text: &str) -> Vec<String> {
        extract(&request(&[(Role::User, text)], 0)).into_iter().map(|f| f.fact).collect()
    }

    fn one(text: &str) -> ExtractedFact {
        let out = extract(&request(&[(Role::User, text)], 0));
        assert_eq!(out.len(), 1, "{text:?} gave {out:?}");
        out.into_iter().next().expect("one fact")
    }

    fn assert_fact(text: &str, expected: &str, tag: &str) {
        let f = one(text);
        assert_eq!(f.fact, expected, "{text:?}");
        assert!(f.tags.iter().any(|t| t == tag), "{text:?} tags {:?}", f.tags);
        assert!(f.score >= 0.7, "{text:?} score {}", f.score);
    }

    #[test]
    fn identity() {
        assert_fact("My name is Alice.", "Name is Alice", "identity");
        assert_fact("Hi, I'm Bob!", "Name is Bob", "identity");
        assert_fact("my name's alice", "Name is Alice", "identity");
        assert_fact("My name is John Smith, nice to meet you", "Name is John Smith", "identity");
        assert_fact("my name is john nice to meet you", "Name is John", "identity");
        assert!(facts("I am User 1").is_empty());
        assert_fact("Everyone calls me Al.", "Name is Al", "identity");
        assert!(one("My name is Alice.").score >= 0.9);
    }

    #[test]
    fn location() {
        assert_fact("I live in Paris.", "Lives in Paris", "location");
        assert_fact("I'm from Spain", "Is from Spain", "location");
        assert_fact("I come from a small town in Ohio.", "Is from a small town in Ohio", "location");
        assert_fact("I grew up in Texas", "Grew up in Texas", "location");
        assert_fact("I live in Paris, France, and I love it.", "Lives in Paris, France", "location");
    }

    #[test]
    fn work() {
        assert_fact("I work as a nurse.", "Works as a nurse", "work");
        assert_fact("I work at Acme.", "Works at Acme", "work");
        assert_fact("I'm a software engineer.", "Is a software engineer", "work");
        assert_fact("I am retired", "Is retired", "work");
        assert_fact("I teach math at a high school.", "Teaches math at a high school", "work");
    }

    #[test]
    fn family_and_pets() {
        assert_fact("I have two kids.", "Has two kids", "family");
        assert_fact("I'm married", "Is married", "family");
        assert_fact("I have a dog named Rex.", "Has a dog named Rex", "pets");
        assert_fact("My dog's name is Rex", "Has a dog named Rex", "pets");
        assert_fact("My mother is a dentist.", "Mother is a dentist", "family");
    }

    #[test]
    fn preferences() {
        assert_fact("I like hiking.", "Likes hiking", "preference");
        assert_fact("I love to bake cookies.", "Loves baking cookies", "preference");
        assert_fact("I really love swimming in the ocean", "Loves swimming in the ocean", "preference");
        assert_fact("I hate onions", "Hates onions", "preference");
        assert_fact("I dislike onions", "Dislikes onions", "preference");
        assert_fact("I don't like onions.", "Dislikes onions", "preference");
        assert_fact("I prefer tea over coffee.", "Prefers tea over coffee", "preference");
        assert_fact("My favorite color is blue.", "Favorite color is blue", "preference");
        assert_fact("Pizza is my favorite food.", "Favorite food is Pizza", "preference");
        assert_fact("I like dogs too.", "Likes dogs", "preference");
    }

    #[test]
    fn diet_and_health() {
        assert_fact("I'm vegetarian.", "Is vegetarian", "diet");
        assert_fact("I am a vegan", "Is a vegan", "diet");
        assert_fact("I'm allergic to peanuts", "Is allergic to peanuts", "health");
        assert_fact("I don't eat meat", "Does not eat meat", "diet");
        assert_fact("I have diabetes.", "Has diabetes", "health");
    }

    #[test]
    fn hobbies_and_sports() {
        assert_fact("I play tennis on weekends.", "Plays tennis on weekends", "hobby");
        assert_fact("I go hiking every Sunday", "Goes hiking every Sunday", "hobby");
        assert_fact("I collect stamps.", "Collects stamps", "hobby");
        assert_fact("I knit.", "Knits", "hobby");
    }

    #[test]
    fn languages() {
        assert_fact("I speak French.", "Speaks French", "language");
        assert_fact("I speak English and Spanish", "Speaks English and Spanish", "language");
        assert_fact("I'm fluent in German", "Is fluent in German", "language");
        assert!(facts("I speak to my mom every day").is_empty());
    }

    #[test]
    fn age_and_birthday() {
        assert_fact("I'm 34 years old.", "Is 34 years old", "age");
        assert_fact("I am 34", "Is 34 years old", "age");
        assert_fact("My birthday is May 3.", "Birthday is May 3", "age");
        assert_fact("My birthday is on May 3rd", "Birthday is May 3rd", "age");
    }

    #[test]
    fn devices() {
        assert_fact("I use a MacBook for work.", "Uses a MacBook for work", "device");
        assert_fact("I have an iPhone", "Has an iPhone", "device");
        assert_fact("I drive a Honda Civic", "Drives a Honda Civic", "vehicle");
    }

    #[test]
    fn plans_and_goals() {
        assert_fact("I plan to visit Japan next year.", "Plans to visit Japan next year", "goal");
        assert_fact("I want to learn guitar.", "Wants to learn guitar", "goal");
        assert_fact("I'm planning to run a marathon", "Plans to run a marathon", "goal");
        assert_fact("My dream is to open a bakery", "Dream is to open a bakery", "goal");
    }

    #[test]
    fn several_clauses_and_sentences() {
        assert_eq!(
            facts("Hi! I'm a nurse and I live in Boston. I have a cat, but I'm allergic to dogs."),
            vec!["Is a nurse", "Lives in Boston", "Has a cat", "Is allergic to dogs"]
        );
    }

    #[test]
    fn objects_are_cut_at_clause_boundaries() {
        assert_eq!(facts("I love hiking because it is relaxing"), vec!["Loves hiking"]);
        assert_eq!(facts("I live in Rome, but I travel a lot"), vec!["Lives in Rome", "Travels"]);
        assert_eq!(facts("Great. I prefer tea over coffee, by the way."), vec!["Prefers tea over coffee"]);
        assert_eq!(facts("I prefer tea over coffee, honestly."), vec!["Prefers tea over coffee"]);
        assert_eq!(facts("I like hiking, biking, and swimming"), vec!["Likes hiking, biking, and swimming"]);
        assert_eq!(facts("I love spending time with my family"), vec!["Loves spending time with their family"]);
        let long = format!("I like {}", "very long words ".repeat(20));
        assert!(facts(&long).iter().all(|f| f.chars().count() <= MAX_FACT_CHARS));
    }

    #[test]
    fn groups_lists_and_names_in_objects() {
        assert_fact("I'm in the army.", "Is in the army", "work");
        assert!(one("I'm in the kitchen").score < 0.7);
        assert_fact(
            "I like to play video games, read, and watch movies.",
            "Likes playing video games, reading, and watching movies",
            "preference",
        );
        assert_fact("I love Kendrick Lamar and J. Cole", "Loves Kendrick Lamar and J. Cole", "preference");
        assert_fact("My favorite band is The Who.", "Favorite band is The Who", "preference");
        assert_fact("I'm from the U.S. now", "Is from the U.S.", "location");
        assert_fact("I'm an engineer and own a studio", "Is an engineer", "work");
        assert!(one("I love the colors").score < 0.7);
        assert_fact("I just got a new job as a nurse", "Has a new job as a nurse", "work");
        assert_fact("I've always wanted a pet turtle", "Wants a pet turtle", "goal");
    }

    #[test]
    fn questions_are_ignored() {
        assert!(facts("Do you like tea?").is_empty());
        assert!(facts("What is my name?").is_empty());
        assert!(facts("what is my name").is_empty());
        assert!(facts("I live in Paris?").is_empty());
        assert!(facts("Am I allergic to peanuts").is_empty());
    }

    #[test]
    fn hypotheticals_are_ignored() {
        assert!(facts("If I lived in Paris, I would walk everywhere.").is_empty());
        assert!(facts("I would love to visit Japan.").is_empty());
        assert!(facts("I wish I had a dog.").is_empty());
        assert!(facts("Imagine I lived in Rome.").is_empty());
        assert!(facts("I'd like to be a pilot").is_empty());
        assert!(facts("Maybe I will learn French").is_empty());
        assert!(facts("I think I like tea").is_empty());
    }

    #[test]
    fn negations_are_not_facts() {
        assert!(facts("I don't live in Paris anymore.").is_empty());
        assert!(facts("I no longer work at Acme.").is_empty());
        assert!(facts("I never liked tea.").is_empty());
        assert!(facts("I'm not vegetarian.").is_empty());
        assert!(facts("I used to live in Paris").is_empty());
        assert!(facts("I don't work at Acme").is_empty());
        assert!(facts("I live in Paris, not Rome").iter().all(|f| f == "Lives in Paris"));
    }

    #[test]
    fn other_people_are_not_the_user() {
        assert!(facts("My friend lives in Rome.").is_empty());
        assert!(facts("You like tea.").is_empty());
        assert!(facts("He works at Acme and she loves dogs").is_empty());
        assert!(facts("My friend's name is Bob").is_empty());
        assert!(facts("My sister lives in Rome").is_empty());
        assert_eq!(facts("You like tea and I like coffee."), vec!["Likes coffee"]);
    }

    #[test]
    fn conversational_filler_is_ignored() {
        assert!(facts("I love that!").is_empty());
        assert!(facts("I like your idea.").is_empty());
        assert!(facts("I'm glad you like it.").is_empty());
        assert!(facts("I'm not sure.").is_empty());
        assert!(facts("I'm a big fan of both of them").is_empty());
        assert!(facts("I have to go now").is_empty());
        assert!(facts("I have a question").is_empty());
    }

    #[test]
    fn only_new_user_turns_are_read() {
        let req = request(
            &[
                (Role::User, "I live in Paris."),
                (Role::Assistant, "I love tea."),
                (Role::User, "I play chess."),
                (Role::System, "I am a system prompt."),
                (Role::Tool, "I speak French."),
            ],
            1,
        );
        let out: Vec<String> = extract(&req).into_iter().map(|f| f.fact).collect();
        assert_eq!(out, vec!["Plays chess"]);
    }

    #[test]
    fn output_is_deduplicated_and_ordered() {
        let req = request(
            &[(Role::User, "I like tea. I live in Oslo."), (Role::User, "i like TEA!"), (Role::User, "I LIKE tea")],
            0,
        );
        let out: Vec<String> = extract(&req).into_iter().map(|f| f.fact).collect();
        assert_eq!(out, vec!["Likes tea", "Lives in Oslo"]);
        assert_eq!(extract(&req), extract(&req));
    }

    #[test]
    fn vague_patterns_score_below_default_threshold() {
        assert!(one("I have blonde hair.").score < 0.7);
        assert!(one("I am shy").score < 0.7);
        assert!(one("I'm going to the store later").score < 0.7);
    }

    #[test]
    fn helpers() {
        assert_eq!(gerund("bake"), "baking");
        assert_eq!(gerund("swim"), "swimming");
        assert_eq!(gerund("play"), "playing");
        assert_eq!(gerund("read"), "reading");
        assert_eq!(gerund("visit"), "visiting");
        assert_eq!(gerund("see"), "seeing");
        assert_eq!(gerund("lie"), "lying");
        assert_eq!(third_person("watch"), "watches");
        assert_eq!(third_person("study"), "studies");
        assert_eq!(third_person("play"), "plays");
        assert_eq!(split_sentences("I live in the U.S. now. Dr. Who? Yes").len(), 3);
        assert!(split_sentences("Really?")[0].question);
    }
}
