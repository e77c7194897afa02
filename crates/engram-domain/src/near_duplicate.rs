//! Near-duplicates: a new fact that says again, in other words, what a stored fact of the
//! same user says ("Enjoys tea" after "Likes tea") refreshes that fact instead of adding a
//! second one. Only with embeddings on: two facts are the same when their vectors' cosine
//! similarity is at least [`SAME_MEANING`] and none of the guards below tells them apart.
//! Without vectors the duplicate rule is the exact one (the normalised text).
//!
//! Embeddings place a statement and its opposite, or the same statement with another
//! number, very close together ("Likes tea" / "Does not like tea", "Has two kids" / "Has
//! three kids"), so similarity alone would merge facts that contradict each other. Facts
//! are therefore never the same when
//! - one is negated and the other is not (`not`, `no`, `never`, `n't`…), or one states a
//!   dislike and the other does not;
//! - they hold different numbers (digits or number words);
//! - they hold the same words in another order ("Prefers tea over coffee" / "Prefers
//!   coffee over tea": 0.995);
//! - either fills a single-valued [`Slot`]: those are replaced by the slot rule, which
//!   keeps the old value readable as superseded, never merged into the new one.
//!
//! A missed duplicate costs a second fact; a wrong merge loses what the person said, so
//! the threshold is high and the guards strict.

use uuid::Uuid;

use super::{extracted::Candidate, fact::NewFact, fact_text::NUMBER_WORDS, slot::Slot, vector};

/// Cosine similarity (all-MiniLM-L6-v2, L2-normalised) from which two facts that pass the
/// guards are the same fact. Measured on that model: paraphrases score 0.85 to 0.98
/// ("Likes tea" / "Enjoys tea" 0.86, / "Loves drinking tea" 0.89, "Likes jazz" / "Loves
/// jazz music" 0.90, "Is afraid of heights" / "Is scared of heights" 0.97), and some
/// lower ("Likes to cook" / "Enjoys cooking" 0.79: those stay two facts); different facts
/// about one subject stay below: "Has a sister" / "Has a brother" 0.82, "Likes red wine" /
/// "Likes white wine" 0.81, "Favorite color is blue" / "… red" 0.78, "Likes tea" / "Likes
/// coffee" 0.68.
pub const SAME_MEANING: f32 = 0.85;

/// Words that negate a statement.
const NEGATORS: &[&str] = &["not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "without", "cannot"];

/// Verbs that state a dislike: "Dislikes tea" is the opposite of "Likes tea", not a
/// paraphrase.
const DISLIKES: &[&str] = &[
    "dislike", "dislikes", "disliked", "hate", "hates", "hated", "detest", "detests", "loathe", "loathes", "avoid",
    "avoids",
];

/// Words that count besides [`NUMBER_WORDS`], compared like digits too.
const OTHER_COUNTS: &[&str] = &["zero", "hundred", "thousand", "once", "twice", "both"];

/// What the guards compare of a fact: its polarity and its numbers. Linear in its length.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    negated: bool,
    dislike: bool,
    numbers: Vec<String>,
}

/// A fact's lowercased words, in order.
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `a` and `b` are the same words in another order.
fn reordered(a: &[String], b: &[String]) -> bool {
    if a == b {
        return false;
    }
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

fn shape(words: &[String]) -> Shape {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let negated = words.iter().any(|w| NEGATORS.contains(w) || w.ends_with("n't") || w.ends_with("n’t"));
    let dislike = words.iter().any(|w| DISLIKES.contains(w));
    let mut numbers: Vec<String> = words
        .iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()) || NUMBER_WORDS.contains(w) || OTHER_COUNTS.contains(w))
        .map(|w| (*w).to_owned())
        .collect();
    numbers.sort();
    numbers.dedup();
    Shape { negated, dislike, numbers }
}

/// A fact as near-duplicates are looked for: its text and vector.
pub struct Known<'a> {
    pub id: Uuid,
    pub text: &'a str,
    pub vector: &'a [f32],
}

/// Whether facts `a` and `b` (texts and vectors) say the same thing.
pub fn same(a: &str, a_vector: &[f32], b: &str, b_vector: &[f32]) -> bool {
    if vector::similarity(a_vector, b_vector) < SAME_MEANING || Slot::of(a).is_some() || Slot::of(b).is_some() {
        return false;
    }
    let (a, b) = (words(a), words(b));
    shape(&a) == shape(&b) && !reordered(&a, &b)
}

/// The facts an extraction will store, in the order given (best first): each with its
/// vector, if any, and the stored fact (of `stored`, the user's current facts with
/// vectors) it repeats, the most similar one. A fact that repeats an earlier fact of the
/// same batch is dropped: the earlier one is the better scored. Facts without a vector
/// repeat nothing. Costs new facts × stored facts comparisons, both bounded (per job and
/// per user).
pub fn plan(new: Vec<(NewFact, Option<Vec<f32>>)>, stored: &[Known<'_>]) -> Vec<Candidate> {
    let mut planned: Vec<Candidate> = Vec::with_capacity(new.len());
    for (fact, vector) in new {
        let Some(values) = vector else {
            planned.push(Candidate::plain(fact));
            continue;
        };
        let text = fact.text.text();
        let said_in_batch = planned
            .iter()
            .any(|earlier| earlier.vector.as_deref().is_some_and(|v| same(earlier.fact.text.text(), v, text, &values)));
        if said_in_batch {
            continue;
        }
        let repeats = stored
            .iter()
            .filter(|known| same(known.text, known.vector, text, &values))
            .max_by(|a, b| vector::similarity(a.vector, &values).total_cmp(&vector::similarity(b.vector, &values)))
            .map(|known| known.id);
        planned.push(Candidate { fact, vector: Some(values), repeats });
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::FactText;

    fn new(text: &str, vector: Option<Vec<f32>>) -> (NewFact, Option<Vec<f32>>) {
        let fact = NewFact {
            text: FactText::parse(text).expect("valid"),
            tags: vec![],
            score: Some(0.9),
            observed_at: None,
            expires_at: None,
            said_in: vec![],
        };
        (fact, vector)
    }

    /// A unit vector at `degrees` in the plane: the cosine of two is the cosine of the angle
    /// between them.
    fn at(degrees: f32) -> Vec<f32> {
        let r = degrees.to_radians();
        vec![r.cos(), r.sin()]
    }

    #[test]
    fn similar_facts_of_the_same_shape_are_the_same() {
        assert!(same("Likes tea", &at(0.0), "Enjoys tea", &at(20.0)));
        // cos 40° ≈ 0.77: below the threshold.
        assert!(!same("Likes tea", &at(0.0), "Likes coffee", &at(40.0)));
    }

    #[test]
    fn negations_dislikes_numbers_and_slots_are_never_merged() {
        let v = at(0.0);
        for (a, b) in [
            ("Likes tea", "Does not like tea"),
            ("Likes tea", "Doesn't like tea"),
            ("Has pets", "Has no pets"),
            ("Likes tea", "Dislikes tea"),
            ("Has two kids", "Has three kids"),
            ("Has 2 kids", "Has 3 kids"),
            ("Has a cat", "Has 2 cats"),
            ("Lives in Lyon", "Lives in Paris"),
            ("Works as a nurse", "Works as a nurse practitioner"),
            ("Prefers tea over coffee", "Prefers coffee over tea"),
        ] {
            assert!(!same(a, &v, b, &v), "{a} / {b}");
        }
        assert!(same("Has two kids", &v, "Has two children", &v));
        assert!(same("Does not eat meat", &v, "Never eats meat", &v));
        assert!(same("Plays the guitar", &v, "Plays guitar", &v));
    }

    #[test]
    fn a_plan_refreshes_the_nearest_stored_fact_and_drops_repeats_within_the_batch() {
        let (tea, jazz) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let (tea_vector, jazz_vector, near_tea) = (at(0.0), at(90.0), at(10.0));
        let stored = [
            Known { id: jazz, text: "Likes jazz", vector: &jazz_vector },
            Known { id: tea, text: "Likes tea", vector: &tea_vector },
            Known { id: Uuid::from_u128(3), text: "Likes green tea", vector: &near_tea },
        ];
        let plan = plan(
            vec![
                new("Enjoys tea", Some(at(4.0))),
                new("Loves drinking tea", Some(at(6.0))),
                new("Plays chess", Some(at(180.0))),
                new("Speaks Norwegian", None),
            ],
            &stored,
        );
        let texts: Vec<(&str, Option<Uuid>)> = plan.iter().map(|c| (c.fact.text.text(), c.repeats)).collect();
        assert_eq!(texts, [("Enjoys tea", Some(tea)), ("Plays chess", None), ("Speaks Norwegian", None)]);
        assert!(plan[0].vector.is_some() && plan[2].vector.is_none());
    }
}
