//! Sentence-level filters and clause splitting: filler at the start of a sentence, questions
//! and hypotheticals (which state no fact), and the cut of a sentence into clauses that
//! each state at most one fact.

use super::lexicon::{ADVERBS, CONTEXTUAL_STARTS, HOBBY_VERBS, MOMENTARY, in_list, is_past};
use super::tokens::Tok;

/// Words that open a message without carrying content ("Oh, well, I live in Paris").
#[rustfmt::skip]
pub(super) const LEAD_WORDS: &[&str] = &[
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
pub(super) fn skip_lead(tokens: &[Tok], mut i: usize) -> (usize, bool) {
    let mut greeting = false;
    while let Some(tok) = tokens.get(i) {
        if !tok.word || LEAD_WORDS.contains(&tok.lower.as_str()) {
            greeting |= GREETINGS.contains(&tok.lower.as_str());
            i += 1;
        } else if greeting && (tok.is("there") || tok.is("everyone") || tok.is("all")) {
            i += 1;
        } else if let Some(n) = reaction_before_i(tokens, i).or_else(|| belief_before_own(tokens, i)) {
            i += n;
        } else {
            break;
        }
    }
    (i, greeting)
}

/// Words of a reaction to the partner ("that's great", "no worries", "how sad").
#[rustfmt::skip]
const REACTIONS: &[&str] = &[
    "ok", "okay", "fine", "good", "great", "cool", "nice", "awesome", "amazing", "interesting",
    "funny", "fun", "sad", "neat", "wonderful", "fantastic", "true", "alright", "sweet", "lovely",
    "understandable", "impressive", "terrible", "crazy", "worries", "problem", "shame", "pity",
];

/// The length of a reaction typed without a comma before one's own clause ("that's ok i
/// don't drink", "no worries I have two", "thats great i have a cat"). Only when "I"
/// follows it: "that's great food" is a clause of its own.
fn reaction_before_i(tokens: &[Tok], i: usize) -> Option<usize> {
    let w = |k: usize| tokens.get(i + k).map(|t| t.lower.as_str());
    let mut k = match (w(0), w(1)) {
        (Some("that" | "it" | "this"), Some("is" | "was" | "sounds")) => 2,
        (Some("that" | "thats" | "its" | "sounds" | "how" | "what"), _) => 1,
        _ => 0,
    };
    // Two intensifiers at most ("so very sad"): a bounded look, whatever the text.
    for _ in 0..2 {
        if !matches!(w(k), Some("very" | "really" | "so" | "pretty" | "a")) {
            break;
        }
        k += 1;
    }
    (w(k).is_some_and(|x| REACTIONS.contains(&x)) && w(k + 1) == Some("i")).then_some(k + 1)
}

/// The length of "I think", "I guess (that)", "I believe" before a clause about oneself
/// ("I think I'd like to move to London", "I guess my favorite is rock"): a hedge on the
/// clause, which states the fact. Only when "I" or "my" follows: "I think the movie was
/// great" is an opinion.
fn belief_before_own(tokens: &[Tok], i: usize) -> Option<usize> {
    let w = |k: usize| tokens.get(i + k).map(|t| t.lower.as_str());
    if w(0) != Some("i") || !matches!(w(1), Some("think" | "guess" | "believe" | "suppose")) {
        return None;
    }
    let k = if w(2) == Some("that") { 3 } else { 2 };
    matches!(w(k), Some("i" | "my")).then_some(k)
}

/// Verbs that open a subjectless clause about oneself after a first-person sentence ("I
/// live in the mountains. Just drive my old van and listen to jazz"): activities and
/// tastes, in the form "I" takes. Verbs of talk ("tell", "let", "see") are left out, since
/// those open requests to the listener.
const CARRIED_VERBS: &[&str] = &[
    "love",
    "like",
    "enjoy",
    "hate",
    "work",
    "live",
    "play",
    "drive",
    "listen",
    "watch",
    "read",
    "cook",
    "bake",
    "paint",
    "run",
    "swim",
    "hike",
    "fish",
    "hunt",
    "collect",
    "teach",
    "study",
    "volunteer",
    "own",
    "write",
    "sing",
    "dance",
    "ride",
    "garden",
    "knit",
    "sew",
    "travel",
    "spend",
    "walk",
    "jog",
    "grow",
    "raise",
];

/// Where the words from `at` on stop being adverbs ("I also really work …").
fn past_adverbs(words: &[Tok], mut at: usize) -> usize {
    while words.get(at).is_some_and(|t| in_list(ADVERBS, &t.lower)) {
        at += 1;
    }
    at
}

/// The sentence with "I" put back before its first verb when it has no subject and opens
/// with one of [`CARRIED_VERBS`], possibly after adverbs ("Just drive my truck"); `start`
/// is where its words begin.
pub(super) fn implied_subject(tokens: &[Tok], start: usize) -> Option<Vec<Tok>> {
    let k = past_adverbs(tokens, start);
    if !tokens.get(k).is_some_and(|t| in_list(CARRIED_VERBS, &t.lower)) {
        return None;
    }
    let mut out = vec![Tok { text: "I".into(), lower: "i".into(), word: true }];
    out.extend_from_slice(&tokens[start..]);
    Some(out)
}

/// "Do you have pets?" "No.", "Are you a nurse?" "Yes, I am.", "Have you ever been to
/// Japan?" "Never!": a bare answer about oneself to a yes-no question, as the statement it
/// stands for ("I do not have pets", "I am a nurse", "I have never been to Japan"), for the
/// rules to read. The answer is a yes or a no ("yes", "of course", "nope", "never") or the
/// question's own verb given back ("I do", "I'm not", "I haven't"), and nothing more; the
/// question is "do you …", "are you …" or "have you …" with the listener's words turned to
/// the speaker's.
pub(super) fn short_answer(question: &[Tok], answer: &[Tok]) -> Option<Vec<Tok>> {
    let (q, _) = skip_lead(question, 0);
    let verb = question.get(q).filter(|t| in_list(&["do", "are", "have"], &t.lower))?;
    let mut asked = question.get(q + 2..).filter(|_| question[q + 1].is("you"))?;
    let ever = asked.first().is_some_and(|t| t.is("ever"));
    if ever {
        asked = &asked[1..];
    }
    if asked.first().is_none_or(|t| asks_a_stance(verb, t)) {
        return None;
    }
    let words: Vec<&str> = answer.iter().filter(|t| t.word).map(|t| t.lower.as_str()).collect();
    let own = if verb.is("are") { "am" } else { verb.lower.as_str() };
    let negated = answer_polarity(&words, own)?;
    let word = |text: &str| Tok { text: text.into(), lower: text.to_lowercase(), word: true };
    let mut out = vec![word("I")];
    match (own, negated) {
        ("do", false) => {}
        ("have", true) if ever => out.extend([word("have"), word("never")]),
        (_, false) => out.push(word(own)),
        (_, true) => out.extend([word(own), word("not")]),
    }
    out.extend(asked.iter().map(|t| match t.lower.as_str() {
        "your" => word("my"),
        "you" => word("me"),
        "yourself" => word("myself"),
        _ => t.clone(),
    }));
    Some(out)
}

/// "Where do you live?" "Chicago, in a tiny flat.", "Where are you from?" "Canada!": a
/// place given alone as the answer, as the statement it stands for ("I live in Chicago, in
/// a tiny flat", "I am from Canada"), for the rules to read. Only a short answer that
/// opens with neither a subject nor a word that answers something else ("That's nice",
/// "Yes", "Good question", "Nowhere really") is a place.
pub(super) fn place_answer(question: &[Tok], answer: &[Tok]) -> Option<Vec<Tok>> {
    let (q, _) = skip_lead(question, 0);
    let mut asked: Vec<&str> = question[q..].iter().filter(|t| t.word).map(|t| t.lower.as_str()).collect();
    if asked.last() == Some(&"now") {
        asked.pop();
    }
    let said: &[&str] = match asked.as_slice() {
        ["where", "do" | "did", "you" | "u", "live"] => &["I", "live", "in"],
        ["where", "are" | "r", "you" | "u", "from"] => &["I", "am", "from"],
        _ => return None,
    };
    let (mut a, _) = skip_lead(answer, 0);
    if answer.get(a).is_some_and(|t| in_list(&["in", "from", "near"], &t.lower)) {
        a += 1;
    }
    let first = answer.get(a).filter(|t| t.word)?;
    let words = answer[a..].iter().filter(|t| t.word).count();
    const NO_PLACE: &[&str] = &["nowhere", "anywhere", "somewhere", "everywhere", "around", "close", "far", "near"];
    let no_place =
        [SUBJECTS, CONTEXTUAL_STARTS, MOMENTARY, NO, NO_PLACE].iter().any(|list| in_list(list, &first.lower));
    if words > 8 || no_place {
        return None;
    }
    let word = |text: &str| Tok { text: text.into(), lower: text.to_lowercase(), word: true };
    Some(said.iter().map(|w| word(w)).chain(answer[a..].iter().cloned()).collect())
}

/// Whether "do/are/have you" followed by `first` asks for an opinion, a plan or a state of
/// the moment rather than a lasting fact ("Do you think so?", "Are you sure?", "Are you
/// going to the fair?", "Have you eaten?"): a "yes" to it states nothing to keep.
fn asks_a_stance(verb: &Tok, first: &Tok) -> bool {
    let word = first.lower.as_str();
    if verb.is("do") {
        return in_list(&["think", "mean", "know", "want", "remember", "agree", "mind", "need"], word);
    }
    if verb.is("are") {
        return word.ends_with("ing")
            || in_list(
                &[
                    "sure", "serious", "ok", "okay", "alright", "there", "still", "ready", "able", "free", "busy",
                    "home", "back",
                ],
                word,
            );
    }
    in_list(&["had", "heard", "thought", "decided", "eaten", "finished", "done", "seen", "tried"], word)
}

/// Words that answer yes.
pub(super) const YES: &[&str] =
    &["yes", "yeah", "yep", "yup", "yea", "ya", "sure", "absolutely", "definitely", "certainly"];

/// Words that answer no.
const NO: &[&str] = &["no", "nope", "nah", "never"];

/// Whether an answer's first sentence says no to what it answers ("No, she moved out",
/// "I don't have a dog"): then nothing the question took for granted is the user's.
pub(super) fn denies(first: &[Tok]) -> bool {
    first.iter().any(|t| in_list(NO, &t.lower) || t.is("not"))
}

/// Whether a bare answer says no (`Some(true)`), yes (`Some(false)`), or is more than a
/// yes or a no (`None`). `own` is the question's verb as the speaker says it ("do", "am",
/// "have"): "I do", "I am not", "I have never" give it back.
fn answer_polarity(words: &[&str], own: &str) -> Option<bool> {
    const FILLERS: &[&str] = &["oh", "well", "actually", "indeed", "of", "course", "too", "either", "haha", "lol"];
    let core = words.iter().rposition(|w| *w == "i");
    let (lead, tail) = match core {
        Some(i) => (&words[..i], &words[i + 1..]),
        None => (words, &[][..]),
    };
    if !lead.iter().all(|w| YES.contains(w) || NO.contains(w) || FILLERS.contains(w)) {
        return None;
    }
    let tail: Vec<&str> = tail.iter().copied().filter(|w| !FILLERS.contains(w)).collect();
    let said_no = lead.iter().any(|w| NO.contains(w));
    let said_yes = lead.iter().any(|w| YES.contains(w)) || lead.ends_with(&["of", "course"]);
    match (core.is_some(), tail.as_slice()) {
        (true, [verb]) if *verb == own => Some(false).filter(|_| !said_no),
        (true, [verb, "not" | "never"]) if *verb == own => Some(true).filter(|_| !said_yes),
        (true, _) => None,
        (false, _) if said_no != said_yes => Some(said_no),
        (false, _) => None,
    }
}

/// "I have a cat, do you?", "I love my new boots, will you come shopping?": where the
/// question that a first-person statement leads to starts, so that the statement before it
/// is read like any other. `None` when the sentence does not open with "I" or "my" or no
/// question to the listener follows (then the whole sentence is a question, "I live in
/// Paris?").
pub(super) fn question_after_statement(tokens: &[Tok], start: usize) -> Option<usize> {
    if !tokens.get(start).is_some_and(|t| t.is("i") || t.is("my")) {
        return None;
    }
    let listener = |t: Option<&Tok>| t.is_some_and(|t| in_list(&["you", "u", "your", "yours", "ya"], &t.lower));
    let asks = |j: usize| {
        let (word, next) = (tokens[j].lower.as_str(), tokens.get(j + 1));
        (AUXILIARIES.contains(&word) && listener(next))
            || (matches!(word, "what" | "how") && next.is_some_and(|n| n.is("about") || n.is("abt")))
            || (WH_WORDS.contains(&word) && next.is_some_and(|n| AUXILIARIES.contains(&n.lower.as_str())))
            || (matches!(word, "and" | "or") && listener(next))
    };
    // After a comma, a question about the thing just named asks too ("I have never played
    // baseball, is it fun?").
    let asks_about_it = |j: usize| {
        AUXILIARIES.contains(&tokens[j].lower.as_str())
            && tokens.get(j + 1).is_some_and(|t| in_list(&["it", "that", "this", "there", "they"], &t.lower))
    };
    (start + 2..tokens.len()).find(|&j| {
        tokens[j].word && asks(j)
            || tokens[j].text == "," && j + 1 < tokens.len() && (asks(j + 1) || asks_about_it(j + 1))
    })
}

const WH_WORDS: &[&str] = &["what", "who", "where", "when", "why", "how", "which", "whose"];
pub(super) const AUXILIARIES: &[&str] = &[
    "do", "does", "did", "is", "are", "am", "was", "were", "can", "could", "would", "will", "should", "have", "has",
    "had", "shall", "may", "might",
];
const SUBJECTS: &[&str] = &["i", "you", "we", "they", "he", "she", "it", "my", "your", "there", "u"];

/// Catches questions whose question mark was left off ("what is my name").
pub(super) fn is_question(tokens: &[Tok]) -> bool {
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
pub(super) fn is_hypothetical(tokens: &[Tok]) -> bool {
    let words: Vec<&str> = tokens.iter().take(2).map(|t| t.lower.as_str()).collect();
    matches!(
        words.as_slice(),
        ["if" | "imagine" | "suppose" | "supposing" | "pretend" | "hypothetically" | "unless", ..]
            | ["what" | "even" | "as", "if"]
            | ["let's" | "lets", "say" | "imagine" | "pretend"]
    )
}

/// Words after which "I", "my" or "we" opens a new clause ("…, which is why I became a bee
/// farmer").
const CONJUNCTIONS: &[&str] = &[
    "and", "but", "so", "because", "cause", "since", "although", "though", "while", "plus", "also", "then", "or",
    "yet", "whereas", "now", "as", "why",
];

/// Words that always open a new clause.
const CONTRASTS: &[&str] = &["but", "because", "although", "though", "whereas"];

/// Splits a sentence where a new first-person clause starts, so that
/// "I'm a nurse and I live in Paris" yields two clauses.
pub(super) fn split_clauses(tokens: &[Tok]) -> Vec<&[Tok]> {
    let mut clauses = Vec::new();
    let mut start = 0;
    for j in 1..tokens.len() {
        let tok = &tokens[j];
        let hard = !tok.word && matches!(tok.text.as_str(), ";" | ":");
        let prev = &tokens[j - 1];
        let subject = tok.is("i") || tok.is("my") || tok.is("we");
        let soft = subject && (prev.text == "," || CONJUNCTIONS.contains(&prev.lower.as_str()))
            // "I love opera but old maps are my favorite read": what follows a contrast or
            // a reason is a clause of its own, whatever its subject (objects end there too).
            || in_list(CONTRASTS, &tok.lower);
        // "Hi, I'm Bob" stays one clause so that the greeting is seen with the name. Only
        // asked at a soft split: the scan stops at token `j` at the latest, and at most one
        // soft split per `start` fails, so a sentence costs linear time (asked at every
        // token, it was quadratic on a long run of punctuation).
        let only_lead = || skip_lead(tokens, start).0 >= j;
        if hard || (soft && !only_lead()) {
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

/// Verbs that state what a person does, for splitting "I play the guitar and sing in a
/// band": both sides must be one of these, in the form "I" takes. Preference and plan verbs
/// are left out (in "I like to read and write" the second verb is still liked, not done),
/// and so are words as often nouns ("golf", "fish", "garden": "I play tennis and golf").
const ACTION_VERBS: &[&str] = &[
    "play",
    "work",
    "live",
    "own",
    "drive",
    "teach",
    "study",
    "speak",
    "volunteer",
    "go",
    "ride",
    "coach",
    "collect",
    "practice",
    "paint",
    "draw",
    "knit",
    "sew",
    "cook",
    "bake",
    "sing",
    "dance",
    "swim",
    "hike",
    "write",
    "climb",
    "travel",
    "meditate",
    "restore",
    "grow",
    "raise",
];

/// Where "and" joins a second verb phrase to a first-person clause whose own verb is an
/// action ("I play the guitar and sing in a band" -> at "and"), so that each side can be
/// read as its own clause. `start` is where the clause's words begin (after lead words).
fn verb_coordination(clause: &[Tok], start: usize) -> Option<usize> {
    let words = clause.get(start..)?;
    let v = past_adverbs(words, 1);
    let first = words.get(v)?.lower.as_str();
    // "I'm 25 and live with my parents", "I'm a nurse and have two kids", "I play tennis
    // and have a dog": the first verb may also be "am", the second one of having or liking.
    let acting = first == "am" || ACTION_VERBS.contains(&first);
    // "I just started third grade and love to write poetry", "I like tea and have a cat":
    // after what one did or likes, only having or liking is a second statement.
    // "I love to dance and have fun" likes both; so does "I like to read and write".
    let infinitive = words.get(v + 1).is_some_and(|t| t.is("to"));
    let other = (in_list(SECOND_PREDICATES, first) && !infinitive) || is_past(first);
    if !words.first()?.is("i") || !(acting || other) {
        return None;
    }
    let at = words.iter().skip(v + 1).position(|t| t.is("and"))? + v + 1;
    let next = words.get(at + 1)?.lower.as_str();
    let second = acting && ACTION_VERBS.contains(&next) || SECOND_PREDICATES.contains(&next);
    second.then_some(start + at)
}

/// Verbs of having or liking that after "I am … and" or "I play … and" start a second
/// statement about the user.
const SECOND_PREDICATES: &[&str] = &["have", "own", "like", "love", "enjoy", "hate"];

/// A clause as the rules read it, cut into the statements it joins: "I play the guitar and
/// sing in a band" and "I'm a nurse who loves gardening" each state two facts. (Lists of
/// activities, "I like to read books, bake, and watch old movies", stay one statement: cut
/// into one fact per item they matched persona lines less than a quarter as often as the
/// extractor's other facts on spc-valid.) `start` is where the clause's words
/// begin (after lead words).
pub(super) fn statements(clause: &[Tok], start: usize) -> Vec<Vec<Tok>> {
    // The second statement is the subject, what it repeats of the first (nothing after a
    // second verb, the taste verb before a second taste) and what follows "and".
    let joined = verb_coordination(clause, start)
        .map(|and| (start + 1..start + 1, and))
        .or_else(|| gerund_coordination(clause, start));
    if let Some((repeated, and)) = joined {
        let mut second = vec![clause[start].clone()];
        second.extend_from_slice(&clause[repeated]);
        second.extend_from_slice(&clause[and + 1..]);
        return vec![clause[..and].to_vec(), second];
    }
    let mut out = vec![clause.to_vec()];
    out.extend(relative_clause(clause, start));
    out
}

/// "I love eating burgers and watching war films": two tastes, each a gerund with its
/// object, are two facts (on the development split and spc-valid each side matches a
/// persona line more often than the two joined did), where "I like hiking and biking"
/// stays one; so are two pastimes after "to" ("I like to watch tv and go to the gym"), and
/// two things one is doing ("I'm living in Ohio and working at a supermarket", which was
/// stored whole as "Lives in Ohio and working at a supermarket"). Returns where the taste
/// verb (with its "to") or the "am" and the "and" are.
fn gerund_coordination(clause: &[Tok], start: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let words = clause.get(start..)?;
    let v = past_adverbs(words, 1);
    let taste = words.get(v)?;
    let progressive = taste.is("am");
    if !words.first()?.is("i") || !(progressive || in_list(GERUND_TASTES, &taste.lower)) {
        return None;
    }
    // "to" and a verb of pastime ("I like to watch tv and go to the gym") or a gerund, with
    // at least one word of its own after it.
    let infinitive = !progressive && words.get(v + 1).is_some_and(|t| t.is("to"));
    let opens = |at: usize| {
        let verb = words.get(at).is_some_and(|t| match infinitive {
            true => in_list(HOBBY_VERBS, &t.lower) || ACTION_VERBS.contains(&t.lower.as_str()),
            false => is_gerund(&t.lower),
        });
        verb && words.get(at + 1).is_some_and(|t| t.word && !t.is("and"))
    };
    let first = v + 1 + usize::from(infinitive);
    if !opens(first) {
        return None;
    }
    let at = words.iter().skip(first + 1).position(|t| !t.word || t.is("and"))? + first + 1;
    // "I'm considering getting a boat and spending …", "planning on moving and …": a
    // gerund before the "and" means the second one continues that plan, not what one is
    // doing.
    let within_plan = progressive && words[first + 1..at].iter().any(|t| is_gerund(&t.lower));
    (words[at].is("and") && opens(at + 1) && !within_plan).then_some((start + v..start + first, start + at))
}

/// Verbs of taste that take a gerund ("I enjoy baking bread").
const GERUND_TASTES: &[&str] = &["like", "love", "enjoy", "adore", "hate", "prefer", "dislike"];

/// Whether `word` is a verb's "-ing" form, not a noun or an adjective that ends like one.
fn is_gerund(word: &str) -> bool {
    word.len() > 4 && word.ends_with("ing") && !in_list(NOT_GERUNDS, word)
}

/// Words in "-ing" that are no verb's gerund.
#[rustfmt::skip]
const NOT_GERUNDS: &[&str] = &[
    "anything", "something", "nothing", "everything", "morning", "evening", "during",
    "spring", "string", "wedding", "building", "clothing", "ceiling", "sibling", "pudding",
    "amazing", "interesting", "exciting", "challenging", "relaxing", "boring", "fascinating",
    "inspiring", "rewarding", "surprising", "upcoming", "ongoing", "outstanding", "entertaining",
    "refreshing", "satisfying", "charming", "stunning",
];

/// "I'm a little girl who lives in the cloud": the relative clause is a second statement
/// about the user, read as "I live in the cloud".
fn relative_clause(clause: &[Tok], start: usize) -> Option<Vec<Tok>> {
    let words = clause.get(start..)?;
    let described =
        words.first()?.is("i") && words.get(1)?.is("am") && words.get(2).is_some_and(|t| t.is("a") || t.is("an"));
    if !described {
        return None;
    }
    let who = words.iter().take(8).position(|t| t.is("who"))?;
    let v = past_adverbs(words, who + 1);
    let base = base_form(&words.get(v)?.lower)?;
    let mut out = vec![words[0].clone(), Tok { text: base.clone(), lower: base, word: true }];
    out.extend_from_slice(&words[v + 1..]);
    Some(out)
}

/// The form "I" takes of a verb in the form "she" takes: "lives" -> "live", "is" -> "am",
/// "watches" -> "watch", "studies" -> "study". `None` for words that are not such a form.
fn base_form(verb: &str) -> Option<String> {
    let irregular = match verb {
        "is" => Some("am"),
        "has" => Some("have"),
        "does" => Some("do"),
        "goes" => Some("go"),
        _ => None,
    };
    if let Some(base) = irregular {
        return Some(base.to_string());
    }
    if let Some(stem) = verb.strip_suffix("ies") {
        return (!stem.is_empty()).then(|| format!("{stem}y"));
    }
    if ["ches", "shes", "sses", "xes", "zes"].iter().any(|s| verb.ends_with(s)) {
        return Some(verb[..verb.len() - 2].to_string());
    }
    let stem = verb.strip_suffix('s')?;
    (stem.len() > 1 && !stem.ends_with(['s', 'u', 'i'])).then(|| stem.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokenize;
    use super::{base_form, question_after_statement, reaction_before_i};

    #[test]
    fn a_reaction_is_a_lead_only_before_i() {
        assert_eq!(reaction_before_i(&tokenize("that's ok i have a kayak"), 0), Some(3));
        assert_eq!(reaction_before_i(&tokenize("no worries I have two"), 1), Some(1));
        // Without "I" after it, the reaction opens the clause and stays in it.
        assert_eq!(reaction_before_i(&tokenize("That's great news about the kayak"), 0), None);
        assert_eq!(reaction_before_i(&tokenize("Fine wine is my thing"), 0), None);
    }

    #[test]
    fn a_contrast_opens_a_clause_whatever_its_subject() {
        let tokens = tokenize("I keep geese but duck eggs are my favorite");
        let clauses = super::split_clauses(&tokens);
        assert_eq!(clauses.len(), 2);
        assert!(clauses[1][0].is("but"));
    }

    #[test]
    fn a_reason_given_with_why_opens_a_clause() {
        let tokens = tokenize("I like isolation, which is why I became a bee farmer");
        let clauses = super::split_clauses(&tokens);
        assert_eq!(clauses.len(), 2);
        assert!(clauses[1][0].is("i") && clauses[1][1].is("became"));
    }

    #[test]
    fn a_statement_before_a_question_is_found() {
        let at = |text: &str| question_after_statement(&tokenize(text), 0);
        assert_eq!(at("I keep geese, do you?"), Some(3));
        assert_eq!(at("I keep geese what about you?"), Some(3));
        assert_eq!(at("my geese are loud, and yours?"), Some(4));
        assert_eq!(at("I keep geese, which do you keep?"), Some(3));
        assert_eq!(at("I keep geese?"), None);
        // After a comma, a question about what was just named.
        assert_eq!(at("I have never kept geese, is it hard?"), Some(5));
        assert_eq!(at("I keep geese is it hard?"), None);
        assert_eq!(at("Do you keep geese?"), None);
    }

    #[test]
    fn base_forms_of_third_person_verbs() {
        assert_eq!(base_form("lives").as_deref(), Some("live"));
        assert_eq!(base_form("studies").as_deref(), Some("study"));
        assert_eq!(base_form("watches").as_deref(), Some("watch"));
        assert_eq!(base_form("is").as_deref(), Some("am"));
        assert_eq!(base_form("has").as_deref(), Some("have"));
        assert_eq!(base_form("painted"), None);
        assert_eq!(base_form("bus"), None);
    }
}
