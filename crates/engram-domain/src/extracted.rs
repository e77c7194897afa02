//! What of an extractor's answer is kept: facts at or above the agent's confidence,
//! cleaned and cut to the fact length limit, with the tags that are valid (an extractor's
//! stray tag drops the tag, not the fact), and duplicates within the batch dropped
//! (duplicates of stored facts are dropped by the database's unique key). And what an
//! extraction job hands the store: new facts, each perhaps repeating a stored one in other
//! words, and changes to stored facts.

use std::collections::HashSet;

use uuid::Uuid;

use super::fact::{FactText, MAX_FACT_CHARS, MAX_TAGS, NewFact, validate_tag};
use crate::fact_text::clean;

/// One fact as an extractor proposes it, before [`select`] decides what is kept.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExtractedFact {
    pub fact: String,
    pub score: f64,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The `seq`s of the user messages it was read from, when the extractor knows them
    /// (the builtin rules do; an LLM's facts are placed by their words afterwards).
    #[serde(skip)]
    pub said_in: Vec<i64>,
}

/// A change an LLM extractor asks for to one of the user's stored facts, named by the id
/// it was shown (already checked to be one of that user's facts).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The user said something that replaces the fact: the new fact supersedes it.
    Update { id: Uuid, fact: ExtractedFact },
    /// The user said the fact is no longer true, and nothing replaces it.
    Delete { id: Uuid },
}

/// A kept [`Change`]: the replacement validated as [`select`] validates new facts.
#[derive(Debug, Clone, PartialEq)]
pub enum Revision {
    Replace { id: Uuid, by: NewFact },
    Delete { id: Uuid },
}

/// A fact an extraction will store, with its vector when embeddings are on (stored with it,
/// so it is found by meaning at once) and the stored fact it says again in other words,
/// which is refreshed instead of adding a second (see [`super::near_duplicate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub fact: NewFact,
    pub vector: Option<Vec<f32>>,
    pub repeats: Option<Uuid>,
}

impl Candidate {
    /// A fact that repeats nothing known, without a vector.
    pub fn plain(fact: NewFact) -> Candidate {
        Candidate { fact, vector: None, repeats: None }
    }
}

pub fn select(facts: Vec<ExtractedFact>, min_confidence: f64) -> Vec<NewFact> {
    let mut seen = HashSet::new();
    facts
        .into_iter()
        .filter_map(|f| accept(f, min_confidence))
        .filter(|fact| seen.insert(fact.text.normalized().to_owned()))
        .collect()
}

/// The changes kept: deletions, and updates whose replacement [`select`] would keep.
pub fn revisions(changes: Vec<Change>, min_confidence: f64) -> Vec<Revision> {
    changes
        .into_iter()
        .filter_map(|change| match change {
            Change::Update { id, fact } => accept(fact, min_confidence).map(|by| Revision::Replace { id, by }),
            Change::Delete { id } => Some(Revision::Delete { id }),
        })
        .collect()
}

/// One fact as it is kept, or `None` when it is below `min_confidence` or says nothing.
fn accept(f: ExtractedFact, min_confidence: f64) -> Option<NewFact> {
    if !(f.score.is_finite() && f.score >= min_confidence) {
        return None;
    }
    let cut: String = clean(&f.fact).chars().take(MAX_FACT_CHARS).collect();
    let text = FactText::parse(&cut).ok()?;
    let mut tags: Vec<String> = Vec::new();
    for tag in f.tags {
        if validate_tag(&tag).is_ok() && !tags.contains(&tag) && tags.len() < MAX_TAGS {
            tags.push(tag);
        }
    }
    Some(NewFact {
        text,
        tags,
        score: Some(f.score.clamp(0.0, 1.0)),
        observed_at: None,
        expires_at: None,
        said_in: f.said_in,
    })
}

/// The `limit` highest-scored facts, best first (ties keep their order): what one job may
/// store, so that the facts it stores when room is short are its best.
pub fn best(mut facts: Vec<NewFact>, limit: usize) -> Vec<NewFact> {
    // Stable: equal scores keep the order the extractor gave.
    facts.sort_by(|a, b| b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)));
    facts.truncate(limit);
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(text: &str, score: f64) -> ExtractedFact {
        ExtractedFact { fact: text.into(), score, tags: vec![], said_in: vec![] }
    }

    #[test]
    fn drops_low_confidence_and_batch_duplicates() {
        let kept = select(
            vec![
                fact("Name is Alice", 0.9),
                fact("Maybe likes jazz", 0.4),
                fact("  name is ALICE.", 0.95),
                fact("Lives in Paris", 0.7),
            ],
            0.7,
        );
        let texts: Vec<_> = kept.iter().map(|k| k.text.text()).collect();
        assert_eq!(texts, ["Name is Alice", "Lives in Paris"]);
    }

    #[test]
    fn best_keeps_the_highest_scores_in_order() {
        let kept = select(
            vec![fact("Likes tea", 0.7), fact("Name is Alice", 0.9), fact("Likes jam", 0.7), fact("Is 34", 0.8)],
            0.5,
        );
        let texts: Vec<_> = best(kept.clone(), 3).into_iter().map(|k| k.text.text().to_owned()).collect();
        assert_eq!(texts, ["Name is Alice", "Is 34", "Likes tea"]);
        assert_eq!(best(kept, 10).len(), 4);
    }

    #[test]
    fn revisions_keep_deletions_and_the_updates_select_would_keep() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let kept = revisions(
            vec![
                Change::Update { id: a, fact: fact("Lives in Paris", 0.9) },
                Change::Update { id: b, fact: fact("Maybe likes jazz", 0.3) },
                Change::Update { id: b, fact: fact(" ?! ", 0.9) },
                Change::Delete { id: c },
            ],
            0.7,
        );
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(matches!(&kept[0], Revision::Replace { id, by } if *id == a && by.text.text() == "Lives in Paris"));
        assert_eq!(kept[1], Revision::Delete { id: c });
    }

    #[test]
    fn cuts_text_and_keeps_only_valid_tags() {
        let mut long = fact(&"a".repeat(1500), 0.9);
        long.tags = (0..30).map(|i| format!("tag{i}")).chain(["x".repeat(100), String::new()]).collect();
        let kept = select(vec![long, fact("   ", 0.9), fact("?!", 0.9), fact("nan", f64::NAN)], 0.5);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].text.text().chars().count(), MAX_FACT_CHARS);
        assert_eq!(kept[0].tags.len(), MAX_TAGS);
        assert!(kept[0].tags.iter().all(|t| t.starts_with("tag")));
    }
}
