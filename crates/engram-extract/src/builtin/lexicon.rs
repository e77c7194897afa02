//! Word lists: the vocabulary the rules match against, and the two lookups over it. Kept
//! apart from the rules so that widening a category is an edit to a list, not to a rule.

use crate::domain::fact_text::NUMBER_WORDS;

/// Adverbs that may sit between "I" and the verb without changing the fact.
#[rustfmt::skip]
pub(super) const ADVERBS: &[&str] = &[
    "really", "also", "just", "still", "actually", "absolutely", "totally", "definitely", "truly",
    "usually", "always", "often", "sometimes", "currently", "now", "recently", "mostly",
    "especially", "generally", "kinda", "mainly", "basically", "honestly", "personally",
    "literally", "seriously", "certainly", "even", "already", "normally", "typically",
    "occasionally", "frequently", "regularly", "constantly", "so", "simply", "finally", "only",
    "originally", "pretty", "very", "too",
];

/// Verbs that end in "-ly": after "I", any other "-ly" word is an adverb ("I completely
/// agree", "I naturally moved on"), whether or not [`ADVERBS`] lists it.
#[rustfmt::skip]
const LY_VERBS: &[&str] = &[
    "apply", "reply", "supply", "rely", "comply", "imply", "multiply", "fly", "bully", "rally",
    "tally", "ally", "dally", "sully",
];

/// Adverbs that all but deny the verb after them ("I rarely eat fish"): the negation rules
/// read them, and a restatement keeps them.
pub(super) const SCARCELY: &[&str] = &["rarely", "seldom", "hardly", "barely", "scarcely"];

/// Words between the subject and its verb that hedge or stress it without changing what
/// is stated: [`ADVERBS`], "sure", "much", "once" and "both" ("I sure do", "I much prefer",
/// "my wife and I both love"), any "-ly" word of five letters or more that is neither a
/// verb nor one of [`SCARCELY`], and "sort of" / "kind of" (two words: the count to skip is
/// returned). 0 when `words` does not open with one. Skipped, they leave the verb where a
/// rule looks for it, rather than a hedge read as the verb ("Completelies agree", "Boths
/// love"). "Much of a" is no hedge: "I'm not much of a hiker" is not "not of a hiker".
pub(super) fn hedge_len(words: &[&str]) -> usize {
    match words {
        ["sort" | "kind", "of", ..] => 2,
        ["much", "of", ..] => 0,
        [word, ..] if in_list(ADVERBS, word) || matches!(*word, "sure" | "much" | "once" | "both") => 1,
        [word, ..]
            if word.len() >= 5 && word.ends_with("ly") && !in_list(LY_VERBS, word) && !in_list(SCARCELY, word) =>
        {
            1
        }
        _ => 0,
    }
}

/// Subordinate openers after which the clause states no fact.
pub(super) const NON_FACTUAL_OPENERS: &[&str] = &[
    "if", "when", "whenever", "unless", "once", "before", "after", "until", "till", "whether", "imagine", "suppose",
    "maybe", "perhaps", "probably",
];

/// Objects that only make sense with the conversation around them ("I love that").
#[rustfmt::skip]
pub(super) const CONTEXTUAL_STARTS: &[&str] = &[
    "it", "its", "that", "this", "those", "these", "them", "they", "you", "your", "yours", "what",
    "how", "why", "where", "when", "who", "which", "whatever", "so", "too", "there", "here",
    "everything", "everyone", "anything", "nothing", "stuff", "him", "her", "he", "she", "we", "us",
    "not",
];

pub(super) const CONTEXTUAL_ENDS: &[&str] = &[
    "it", "that", "this", "them", "those", "these", "one", "there", "him", "her", "so", "to", "of", "a", "an", "the",
    "with", "and", "or", "in", "at", "for", "on", "about", "as", "my", "their", "both",
];

/// Verbs that, after "and", start a new predicate about the user.
pub(super) const PREDICATE_VERBS: &[&str] =
    &["own", "have", "like", "love", "enjoy", "work", "live", "am", "want", "hate", "plan"];

/// Hedges at the start of an object ("my favorite genre is probably action").
#[rustfmt::skip]
pub(super) const HEDGES: &[&str] = &[
    "probably", "definitely", "usually", "mostly", "currently", "always", "really", "just",
    "actually", "still", "honestly",
];

/// Sides of something under discussion ("I love the food", "the ending", "the feeling of
/// it"): a preference for "the" one is a reaction to what was just said, not a taste.
#[rustfmt::skip]
pub(super) const ASPECTS: &[&str] = &[
    "feeling", "feel", "taste", "flavor", "flavors", "sound", "look", "colors",
    "atmosphere", "vibe", "energy", "view", "views", "scenery", "food", "people", "culture",
    "story", "stories", "plot", "ending", "characters", "character", "cast", "acting",
    "dialogue", "writing", "lyrics", "music", "beat", "humor", "imagery", "design", "style",
    "idea", "way", "process", "challenge", "competition", "thrill", "rush", "adrenaline",
    "fresh", "peace", "support", "kind", "version", "attention", "name", "show", "movie",
    "film", "book", "song", "game", "episode", "series", "album",
];

/// Words that point into the conversation; an object holding one cannot stand alone.
pub(super) const DEICTIC: &[&str] = &["it", "them", "those", "these", "this", "theirs", "hers", "his", "ours"];

/// Verbs that start the items of an activity list ("to read, swim, and play chess").
#[rustfmt::skip]
pub(super) const LIST_VERBS: &[&str] = &[
    "play", "go", "watch", "read", "listen", "spend", "hang", "learn", "try", "explore", "visit",
    "eat", "relax", "take", "work", "travel", "cook", "bake", "see", "make", "shop", "tan", "mow",
    "grill", "gamble", "write", "sing", "dance", "ride", "drive", "fish", "hike", "swim", "run",
    "paint", "draw", "knit", "sew", "collect", "build", "garden", "camp", "climb", "surf", "ski",
    "skate", "bike", "walk", "jog", "hunt", "meet", "help", "teach", "sleep", "drink", "party",
    "volunteer", "study", "practice", "craft", "bowl", "sail",
];

/// Facts that mention the person the user is talking to are about the conversation.
pub(super) const SECOND_PERSON: &[&str] = &["you", "your", "yours", "yourself", "u", "ur"];

/// Words that end a captured object when they appear after its first token.
#[rustfmt::skip]
pub(super) const OBJECT_BOUNDARIES: &[&str] = &[
    "but", "because", "cause", "since", "although", "though", "while", "whereas", "unless", "if",
    "so", "which", "who", "whom", "whose", "when", "whenever", "where", "until", "till", "that",
    "except", "lol", "haha", "hahaha", "especially", "although", "yet", "cuz", "anyway", "too",
    "either", "right", "who's", "whos",
];

pub(super) const SUBJECT_PRONOUNS: &[&str] = &[
    "i", "you", "he", "she", "it", "we", "they", "my", "your", "his", "her", "their", "our", "there", "this", "that",
    "then", "these", "those",
];

/// Words that are never the verb right after "I": pronouns, articles and possessives.
/// Typed in a hurry ("yeah I its quite hard", "I the dog runs"), such a word was taken for
/// the verb and conjugated into facts like "Itses quite hard" or "Thes dog runs".
pub(super) fn never_a_verb(word: &str) -> bool {
    in_list(SUBJECT_PRONOUNS, word) || in_list(&["a", "an", "the", "its", "thats", "me", "him", "us", "them"], word)
}

/// Filler at the end of an object ("I love tea a lot", "I like dogs too").
pub(super) const TAIL_FILLERS: &[&[&str]] = &[
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
    &["at", "all"],
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
pub(super) const PETS: &[&str] = &[
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
pub(super) const FAMILY: &[&str] = &[
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
pub(super) const RELATIVES: &[&str] = &[
    "mom", "mother", "mum", "dad", "father", "parents", "wife", "husband", "son", "daughter",
    "brother", "sister", "kids", "children", "grandma", "grandmother", "grandpa", "grandfather",
    "grandparents", "aunt", "uncle", "partner", "boyfriend", "girlfriend", "fiance", "fiancee",
    "siblings", "brothers", "sisters", "sons", "daughters", "twin", "stepmom", "stepdad",
    "stepfather", "stepmother", "family", "spouse",
];

#[rustfmt::skip]
pub(super) const DEVICES: &[&str] = &[
    "laptop", "computer", "pc", "macbook", "mac", "iphone", "ipad", "android", "phone",
    "smartphone", "tablet", "kindle", "playstation", "ps4", "ps5", "xbox", "nintendo", "camera",
    "windows", "linux", "chromebook", "pixel", "samsung", "thinkpad", "vim", "emacs", "vscode",
    "drone", "console", "printer", "smartwatch", "watch", "headphones",
];

#[rustfmt::skip]
pub(super) const VEHICLES: &[&str] = &[
    "car", "truck", "motorcycle", "motorbike", "van", "suv", "jeep", "tesla", "prius", "minivan",
    "scooter", "bike", "bicycle", "boat", "rv", "sedan", "convertible", "pickup",
];

#[rustfmt::skip]
pub(super) const HEALTH: &[&str] = &[
    "diabetes", "asthma", "cancer", "arthritis", "allergy", "allergies", "adhd", "autism",
    "anxiety", "depression", "epilepsy", "migraines", "insomnia", "ptsd", "celiac", "ocd",
    "disability", "illness", "disease", "syndrome", "injury", "condition", "surgery", "transplant",
    "scoliosis", "dyslexia", "disorder", "blind", "deaf", "pain",
];

#[rustfmt::skip]
pub(super) const DIETS: &[&str] = &[
    "vegetarian", "vegan", "pescatarian", "pescetarian", "kosher", "halal", "keto", "paleo",
    "gluten-free", "dairy-free", "teetotal", "teetotaler", "carnivore",
];

#[rustfmt::skip]
pub(super) const OCCUPATIONS: &[&str] = &[
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
pub(super) const LANGUAGES: &[&str] = &[
    "english", "french", "spanish", "german", "italian", "portuguese", "chinese", "mandarin",
    "cantonese", "japanese", "korean", "russian", "arabic", "hindi", "bengali", "urdu", "dutch",
    "swedish", "norwegian", "danish", "finnish", "polish", "greek", "turkish", "hebrew",
    "vietnamese", "thai", "indonesian", "tagalog", "swahili", "persian", "farsi", "czech",
    "hungarian", "romanian", "ukrainian", "latin", "sign", "asl", "irish", "welsh", "punjabi",
    "tamil", "gujarati", "malay", "catalan", "basque", "esperanto",
];

/// Verbs of pastimes; "I knit", "I paint landscapes" are hobby facts as they stand.
#[rustfmt::skip]
pub(super) const HOBBY_VERBS: &[&str] = &[
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
pub(super) const BARE_HOBBIES: &[&str] = &[
    "paint", "draw", "knit", "sew", "crochet", "cook", "bake", "sing", "dance", "run", "jog",
    "swim", "hike", "bike", "cycle", "surf", "ski", "skate", "snowboard", "fish", "hunt", "garden",
    "write", "read", "climb", "travel", "camp", "sail", "golf", "box", "meditate", "exercise",
    "blog", "vlog", "sketch", "bowl", "kayak", "row", "lift", "quilt",
];

/// Adjectives that describe the moment of the conversation rather than the person.
#[rustfmt::skip]
pub(super) const MOMENTARY: &[&str] = &[
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

pub(super) fn is_number(word: &str) -> bool {
    (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit()))
        || word.split('-').all(|part| NUMBER_WORDS.contains(&part))
}

pub(super) fn in_list(list: &[&str], word: &str) -> bool {
    list.contains(&word)
}

/// What "I don't have a/any …" lacks in the moment rather than in life ("any idea", "a
/// clue", "a choice"): no fact.
pub(super) const ABSTRACT_LACKS: &[&str] = &[
    "answer",
    "chance",
    "choice",
    "clue",
    "complaints",
    "doubt",
    "energy",
    "experience",
    "favorite",
    "favourite",
    "idea",
    "ideas",
    "interest",
    "luck",
    "opinion",
    "particular",
    "plans",
    "preference",
    "problem",
    "problems",
    "questions",
    "reason",
    "say",
    "time",
    "words",
];

/// Whether `verb` is a past form ("moved", "went"), which takes no "-s" ("Went to Peru",
/// not "Wents"); "need", "feed" are not.
pub(super) fn is_past(verb: &str) -> bool {
    verb.ends_with("ed") && !verb.ends_with("eed") || in_list(IRREGULAR_PAST, verb)
}

/// Past forms that do not end in "-ed" ([`is_past`]).
#[rustfmt::skip]
pub(super) const IRREGULAR_PAST: &[&str] = &[
    "went", "grew", "took", "made", "built", "bought", "wrote", "ran", "swam", "rode", "drove",
    "began", "became", "taught", "met", "left", "lost", "won", "spent", "sold", "kept", "fell",
    "broke", "gave", "came", "read", "sang", "flew", "caught", "fought", "brought", "stood",
    "sat", "found", "ate", "drank", "slept", "wore", "spoke", "chose", "paid", "sent", "threw",
    "woke", "held", "fed", "led", "dug", "drew", "hung", "shot", "quit", "hurt", "put", "got",
];

/// Words after "in" that make it where or how one is for the moment, or when, rather than
/// a place, a field or a state one lives in: "I'm in bed", "in no rush", "in the kitchen",
/// "here in the next few days", "here in two weeks", against "I'm in finance", "here in
/// Alabama". Read by the rule for "I'm in …" and by where one lives said in passing.
#[rustfmt::skip]
pub(super) const PASSING_PLACES: &[&str] = &[
    "the", "a", "an", "my", "our", "their", "your", "his", "her", "its", "this", "that", "some",
    "no", "to", "so", "such", "just", "quite", "kind", "sort", "bed", "town", "pain", "trouble",
    "shock", "awe", "line", "traffic", "tears", "heaven", "luck", "time", "favor", "doubt",
    "person", "public", "place", "touch", "hurry", "rush", "mood", "shape", "denial", "front",
    "there", "here", "between", "fact", "case", "general", "particular", "order", "charge",
    "control", "agreement", "disbelief", "good", "bad", "great", "tune", "it", "next", "last",
    "past", "coming", "few", "more", "most", "same", "meantime", "middle", "summer", "winter",
    "spring", "fall", "autumn", "morning", "evening", "afternoon", "night", "day", "days",
    "week", "weeks", "month", "months", "year", "years", "moment", "while", "future",
    "traction", "spirit", "hospital", "office", "house",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hedges_are_told_from_verbs() {
        assert_eq!(hedge_len(&["sort", "of", "knit"]), 2);
        assert_eq!(hedge_len(&["kind", "of", "adore"]), 2);
        assert_eq!(hedge_len(&["sure", "do"]), 1);
        assert_eq!(hedge_len(&["wholeheartedly"]), 1, "an -ly word no list names");
        assert_eq!(hedge_len(&["supply"]), 0, "a verb in -ly");
        assert_eq!(hedge_len(&["rarely"]), 0, "a near denial is the negation rules'");
        assert_eq!(hedge_len(&["fly"]), 0);
        assert_eq!(hedge_len(&["knit"]), 0);
        assert_eq!(hedge_len(&[]), 0);
    }
}
