//! What of an extractor's answer is kept: facts at or above the agent's confidence,
//! cleaned and capped, tags bounded, duplicates within the batch dropped (duplicates of
//! stored facts are dropped by the database's unique key).

use std::collections::HashSet;

use super::fact_text::{clean, normalize};
use crate::extract::ExtractedFact;

pub const MAX_FACT_CHARS: usize = 1000;
pub const MAX_TAGS: usize = 20;
pub const MAX_TAG_CHARS: usize = 64;

/// A fact ready to store: display text, its duplicate key, tags and score.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptFact {
    pub fact: String,
    pub normalized: String,
    pub tags: Vec<String>,
    pub score: f64,
}

pub fn select(facts: Vec<ExtractedFact>, min_confidence: f64) -> Vec<KeptFact> {
    let mut seen = HashSet::new();
    facts
        .into_iter()
        .filter(|f| f.score.is_finite() && f.score >= min_confidence)
        .filter_map(|f| {
            let fact: String = clean(&f.fact).chars().take(MAX_FACT_CHARS).collect();
            let fact = fact.trim_end().to_owned();
            let normalized = normalize(&fact);
            if normalized.is_empty() || !seen.insert(normalized.clone()) {
                return None;
            }
            let mut tag_seen = HashSet::new();
            let tags = f
                .tags
                .iter()
                .map(|t| clean(t).chars().take(MAX_TAG_CHARS).collect::<String>())
                .filter(|t| !t.is_empty() && tag_seen.insert(t.clone()))
                .take(MAX_TAGS)
                .collect();
            Some(KeptFact { fact, normalized, tags, score: f.score.clamp(0.0, 1.0) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(text: &str, score: f64) -> ExtractedFact {
        ExtractedFact { fact: text.into(), score, tags: vec![] }
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
        let texts: Vec<_> = kept.iter().map(|k| k.fact.as_str()).collect();
        assert_eq!(texts, ["Name is Alice", "Lives in Paris"]);
    }

    #[test]
    fn caps_text_and_tags() {
        let mut long = fact(&"a".repeat(1500), 0.9);
        long.tags = (0..30).map(|i| format!("tag{i}")).chain(["x".repeat(100)]).collect();
        let kept = select(vec![long, fact("   ", 0.9), fact("nan", f64::NAN)], 0.5);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].fact.chars().count(), MAX_FACT_CHARS);
        assert_eq!(kept[0].tags.len(), MAX_TAGS);
    }
}
