//! Vectors of facts and how recall by meaning ranks with them: their storage format and
//! the hybrid ranking that fuses full-text matches with vector similarity.
//!
//! **Storage.** A vector is stored as its `f32` values, little-endian, one after the other
//! (no database extension needed), with its dimensions and its model's tag.
//!
//! **Hybrid ranking.** A query gets two candidate lists: the full-text matches with their
//! weight, and the facts whose vectors are most similar to the query's. A full-text
//! match weighs the rarity of the query words it holds (the sum, over them, of one over
//! the number of the owner's matching facts that hold the word: what full text itself
//! ranks by after the count of words), so that a name found in half the facts does not
//! outweigh the one fact that holds the rare word. Each list's scores are normalised to
//! [0, 1] so that its best candidate scores 1, whatever the scale: the weight divided by
//! the best one, similarity read above the floor ([`MIN_SIMILARITY`] scores 0). A fact's
//! fused relevance is `TEXT_WEIGHT × text + (1 − TEXT_WEIGHT) × vector`, 0 for a list it
//! is absent from. Fusing by score, not by rank, keeps how much better one candidate is
//! than the next: plain reciprocal-rank fusion measured no gain over full text on LoCoMo.
//! Without vector candidates there is nothing to fuse and recall answers with the
//! full-text result as it is.
//! Vector similarities below [`MIN_SIMILARITY`] are not candidates: every text is somewhat
//! similar to every other, and without a floor the nearest unrelated fact would always
//! be recalled.

use std::collections::HashMap;

use uuid::Uuid;

/// Weight of the full-text score in the fused relevance; the vector similarity has the
/// rest. Above one half: the best word match beats a fact found by meaning alone, and
/// meaning orders the facts that words leave tied or do not find. Measured on LoCoMo
/// (`engram-bench locomo --embedding-model-dir …`, recall@10 of categories 1–5), when the
/// full-text score was still the share of query words matched: 0.4 gave 57.6 %, below
/// full text alone (59.4 %), because the model ranks facts about the named person first
/// when a question names the wrong one (category 5); 0.6 gave 61.3 %, 0.7 61.5 % at the
/// cost of categories 1–3; BM25 60.1 %. Weighing words by rarity, 0.6 gives 63.5 %.
pub const TEXT_WEIGHT: f64 = 0.6;

/// Cosine similarity under which a fact is not a vector candidate. MiniLM gives unrelated
/// short sentences about 0 to 0.2 and paraphrases about 0.4 and more.
pub const MIN_SIMILARITY: f32 = 0.25;

/// The stored form of a vector: its values as little-endian `f32`.
pub fn to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector, or `None` when the bytes are not `dims` values.
pub fn from_bytes(bytes: &[u8], dims: usize) -> Option<Vec<f32>> {
    if bytes.len() != dims * 4 {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The cosine similarity of two L2-normalised vectors (their dot product); 0 when their
/// lengths differ (vectors of different models are never comparable).
pub fn similarity(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The `limit` facts most similar to `query` among `vectors`, at least [`MIN_SIMILARITY`],
/// best first (ties by id, so the order is the same on every backend).
pub fn nearest(query: &[f32], vectors: &[(Uuid, Vec<f32>)], limit: usize) -> Vec<(Uuid, f64)> {
    let mut scored: Vec<(Uuid, f64)> = vectors
        .iter()
        .map(|(id, v)| (*id, similarity(query, v)))
        .filter(|(_, s)| *s >= MIN_SIMILARITY)
        .map(|(id, s)| (id, f64::from(s)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scored.truncate(limit);
    scored
}

/// Fuses the full-text candidates (`text`: id and weight, in the order full text ranked
/// them) with the vector candidates (`vector`: id and similarity) as the module doc says.
/// Returns ids with their fused relevance in [0, 1], best first; ties keep full text's
/// order, then the newer id first.
pub fn fuse(text: &[(Uuid, f64)], vector: &[(Uuid, f64)]) -> Vec<(Uuid, f64)> {
    let best = |list: &[(Uuid, f64)]| list.iter().map(|(_, s)| *s).fold(0.0f64, f64::max);
    let (text_best, vector_best) = (best(text), best(vector));
    let norm = |score: f64, best: f64| if best > 0.0 { (score / best).clamp(0.0, 1.0) } else { 0.0 };
    // Similarities are read above the floor, where candidates start: divided by the best
    // alone, every candidate of a dense list would score near 1 and the vector part would
    // add nearly the same to all of them.
    let floor = f64::from(MIN_SIMILARITY);
    let vector_norm = |similarity: f64| {
        if vector_best > floor { ((similarity - floor) / (vector_best - floor)).clamp(0.0, 1.0) } else { 1.0 }
    };
    let mut fused: Vec<(Uuid, f64, usize)> = Vec::with_capacity(text.len() + vector.len());
    let mut at: HashMap<Uuid, usize> = HashMap::new();
    for (rank, (id, score)) in text.iter().enumerate() {
        at.insert(*id, fused.len());
        fused.push((*id, TEXT_WEIGHT * norm(*score, text_best), rank));
    }
    for (id, score) in vector {
        let part = (1.0 - TEXT_WEIGHT) * vector_norm(*score);
        match at.get(id) {
            Some(&i) => fused[i].1 += part,
            None => {
                at.insert(*id, fused.len());
                fused.push((*id, part, usize::MAX));
            }
        }
    }
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(b.0.cmp(&a.0)));
    fused.into_iter().map(|(id, score, _)| (id, score.clamp(0.0, 1.0))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn vectors_round_trip_through_their_stored_form() {
        let v = vec![0.6f32, -0.8, 1e-7];
        assert_eq!(to_bytes(&v).len(), 12);
        assert_eq!(from_bytes(&to_bytes(&v), 3), Some(v));
        assert_eq!(from_bytes(&[0; 11], 3), None);
    }

    #[test]
    fn a_rare_word_outweighs_common_ones() {
        // Fact 1 holds two words that each of 10 facts hold (weight 2 × 1/10); fact 2 the
        // one word only it holds (weight 1). Meaning finds both alike.
        let fused = fuse(&[(id(1), 0.2), (id(2), 1.0)], &[(id(1), 0.6), (id(2), 0.6)]);
        assert_eq!(fused.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![id(2), id(1)]);
        assert!((fused[0].1 - 1.0).abs() < 1e-9, "{fused:?}");
        assert!((fused[1].1 - (0.6 * 0.2 + 0.4)).abs() < 1e-9, "{fused:?}");
    }

    #[test]
    fn meaning_orders_what_words_leave_tied() {
        // Ids 1 and 2 match the same words; 2 is also close in meaning, 3 only that.
        let fused = fuse(&[(id(1), 0.5), (id(2), 0.5)], &[(id(2), 0.85), (id(3), 0.55)]);
        assert_eq!(fused.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![id(2), id(1), id(3)]);
        assert!((fused[0].1 - 1.0).abs() < 1e-9, "{fused:?}");
        // 0.55 is half-way from the floor (0.25) to the best (0.85).
        assert!((fused[2].1 - 0.4 * 0.5).abs() < 1e-9, "{fused:?}");
        assert!(fused.iter().all(|(_, s)| (0.0..=1.0).contains(s)));
    }

    #[test]
    fn a_fact_found_both_ways_scores_highest_and_relevance_stays_in_range() {
        let fused = fuse(&[(id(1), 3.0), (id(2), 2.0)], &[(id(1), 0.9), (id(3), 0.8)]);
        assert_eq!(fused.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![id(1), id(2), id(3)]);
        assert!((fused[0].1 - 1.0).abs() < 1e-9);
        assert!(fused.iter().all(|(_, s)| (0.0..=1.0).contains(s)));
    }

    #[test]
    fn nearest_keeps_similar_vectors_only_best_first() {
        let q = vec![1.0f32, 0.0];
        let vectors =
            vec![(id(1), vec![0.0, 1.0]), (id(2), vec![0.8, 0.6]), (id(3), vec![1.0, 0.0]), (id(4), vec![1.0])];
        let found = nearest(&q, &vectors, 10);
        assert_eq!(found.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![id(3), id(2)]);
        assert_eq!(nearest(&q, &vectors, 1).len(), 1);
    }
}
