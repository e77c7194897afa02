//! Objects and fact text: where the object a rule captured ends, whether it can stand
//! without the conversation around it, and how it is rendered as a short third-person fact
//! ("I love to bake cookies" -> "Loves baking cookies").

use super::clauses::LEAD_WORDS;
use super::lexicon::*;
use super::tokens::Tok;
use crate::ExtractedFact;

/// Longest fact these rules write. Facts are meant to be glanced at in a prompt; anything
/// longer is a paraphrase of a whole message rather than a fact. (The domain's own
/// `MAX_FACT_CHARS` is the much larger bound on any stored fact.)
pub(super) const MAX_BUILTIN_FACT_CHARS: usize = 120;

/// Long objects are usually run-on sentences that swallowed a second clause.
const MAX_OBJECT_TOKENS: usize = 14;

/// The end (exclusive) of the object that starts at `start`: cut at clause boundaries,
/// at punctuation and at commas that do not continue a short list.
pub(super) fn object_end(c: &[Tok], start: usize) -> usize {
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
            // Run-on chat: "my favorite band is the beatles what about you", "i love pizza
            // do you".
            let asks_back = matches!(next, "you" | "u" | "about")
                && matches!(tok.lower.as_str(), "what" | "how" | "do" | "did" | "are" | "have" | "and");
            if asks_back {
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
pub(super) fn object(c: &[Tok], start: usize) -> Option<String> {
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
        || vague(span)
        || span.iter().any(|t| in_list(SECOND_PERSON, &t.lower) || in_list(DEICTIC, &t.lower) && t.text != "IT")
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

/// Whether an object names nothing in particular: "the same things", "all sorts of
/// things", "other stuff" ("new things", "building things" and "the technology side of
/// things" do say something).
fn vague(span: &[Tok]) -> bool {
    let lower: Vec<&str> = span.iter().rev().take(3).map(|t| t.lower.as_str()).collect();
    match lower[..] {
        ["things" | "stuff"] => true,
        ["things" | "stuff", "of", amount, ..] => in_list(&["lot", "lots", "sorts", "kinds", "types", "bunch"], amount),
        ["things" | "stuff", before, ..] => {
            in_list(&["same", "similar", "different", "other", "many", "more", "such", "various"], before)
        }
        _ => false,
    }
}

/// Joins tokens back into text, turning the user's own pronouns into third person.
/// With `gerunds`, the object is a list of activities given as bare verbs ("to play chess,
/// read, and swim"), which reads as "playing chess, reading, and swimming".
pub(super) fn render(span: &[Tok], gerunds: bool) -> String {
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
            // "what I am doing" is "what they are doing", not "they am".
            "am" if i > 0 && span[i - 1].is("i") => "are",
            "was" if i > 0 && span[i - 1].is("i") => "were",
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

/// The finished fact: trailing punctuation dropped (but not the period of "J. Cole"), cut
/// at a word boundary to `MAX_BUILTIN_FACT_CHARS`, first letter capitalised.
pub(super) fn fact(text: &str, score: f64, tags: &[&str]) -> ExtractedFact {
    let mut text = text.trim().trim_end_matches([',', '!', ';', ':']).to_string();
    let last_word = text.rsplit(' ').next().unwrap_or_default();
    let ends_with_initials = last_word.trim_end_matches('.').contains('.') || last_word.len() == 2;
    if !ends_with_initials {
        text = text.trim_end_matches('.').to_string();
    }
    if text.chars().count() > MAX_BUILTIN_FACT_CHARS {
        let cut: String = text.chars().take(MAX_BUILTIN_FACT_CHARS).collect();
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
    ExtractedFact { fact, score, tags: tags.iter().map(|t| t.to_string()).collect(), said_in: vec![] }
}

/// `prefix` followed by the object at `start`, if there is a usable one.
pub(super) fn with_object(c: &[Tok], start: usize, prefix: &str, score: f64, tags: &[&str]) -> Option<ExtractedFact> {
    object(c, start).map(|obj| fact(&format!("{prefix} {obj}"), score, tags))
}

/// A preference for "the colors", "the feeling of it" or "the story and the characters"
/// points at something in the conversation: a side of a place, a dish or a work being
/// talked about ([`ASPECTS`]), or a list of them. "The Beatles" (capitalised) is a name,
/// and "the beach", "the outdoors", "the holidays" alone are tastes in general: on the
/// Multi-Session Chat development split such facts matched a persona sentence 65 times in
/// 100 (on spc-valid, whose persona lines are seeds, they never do).
fn definite_reference(obj: &str) -> bool {
    obj.strip_prefix("the ").is_some_and(|rest| {
        rest.starts_with(|c: char| c.is_lowercase())
            && (rest.contains(" and ")
                || rest.contains(',')
                || rest.split(' ').next().is_some_and(|w| in_list(ASPECTS, w)))
    })
}

/// "watch" -> "watches", "study" -> "studies", "have" -> "has".
pub(super) fn third_person(verb: &str) -> String {
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
pub(super) fn preference(c: &[Tok], start: usize, verb: &str, score: f64, tags: &[&str]) -> Option<ExtractedFact> {
    let obj = if c.get(start).is_some_and(|t| t.is("to")) {
        render(object_span(c, start + 1)?, true)
    } else {
        object(c, start)?
    };
    let score = if definite_reference(&obj) { 0.6 } else { score };
    Some(fact(&format!("{verb} {obj}"), score, tags))
}

/// "got a new job", "started a job as a nurse": employment news rather than possessions.
pub(super) fn mentions_job(words: &[&str]) -> bool {
    words.iter().take(5).any(|w| matches!(*w, "job" | "career" | "position" | "internship"))
}

/// The categories the words name (pets, family, device, …), or `default` when none.
pub(super) fn tags_for(words: &[&str], default: &'static str) -> Vec<&'static str> {
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

/// The lowercased tokens from `start` on, for matching against the word lists.
pub(super) fn lower_words(c: &[Tok], start: usize) -> Vec<&str> {
    c.iter().skip(start).map(|t| t.lower.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verb_forms() {
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
    }

    #[test]
    fn the_users_own_words_in_the_third_person() {
        let span = crate::builtin::tokens::tokenize("my loans I am paying back, which I was told");
        assert_eq!(render(&span, false), "their loans they are paying back, which they were told");
    }
}
