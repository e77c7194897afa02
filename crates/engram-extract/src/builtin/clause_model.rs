//! The clause model: a logistic regression over a clause's hashed words (`features`) that
//! says how likely a restated clause (`restate`) is to be a lasting fact about the
//! speaker, as annotators of human chat wrote them. The rules hear the forms they know;
//! this weighs the many they do not, from the words that made such clauses facts before.
//!
//! Its weights are `clause_model.bin`, built into the binary, trained by
//! `engram-bench train-extraction` on half of the Multi-Session Chat development split
//! (see docs/extraction.md), deterministic, and read once. The file format:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | `ENGRAMCM`, the magic |
//! | 4 | `BITS`, little-endian `u32` |
//! | 4 | threshold, little-endian `f32`: probabilities from it up are kept |
//! | 4 × 2^BITS | weights, little-endian `f32`; the bias is the weight of the `bias` feature |
//!
//! A file that does not parse (or a different `BITS`) leaves the extractor with its rules
//! alone rather than failing: the model only ever adds facts.

use std::sync::LazyLock;

use super::features::BITS;

const MAGIC: &[u8; 8] = b"ENGRAMCM";

/// The weights built into the binary.
static EMBEDDED: LazyLock<Option<ClauseModel>> =
    LazyLock::new(|| ClauseModel::decode(include_bytes!("clause_model.bin")));

/// A trained clause model.
pub struct ClauseModel {
    threshold: f32,
    weights: Vec<f32>,
}

impl ClauseModel {
    /// The model built into the binary, if its file parses.
    pub(super) fn embedded() -> Option<&'static ClauseModel> {
        EMBEDDED.as_ref()
    }

    /// A model from its weights (one per feature bucket) and the probability from which a
    /// clause is kept.
    pub fn new(weights: Vec<f32>, threshold: f32) -> Option<ClauseModel> {
        (weights.len() == 1 << BITS && weights.iter().all(|w| w.is_finite()) && threshold.is_finite())
            .then_some(ClauseModel { threshold, weights })
    }

    /// The probability that a clause with these `features` states a fact.
    pub fn probability(&self, features: &[u32]) -> f32 {
        let z: f32 = features.iter().map(|&f| self.weights[f as usize]).sum();
        1.0 / (1.0 + (-z).exp())
    }

    /// The probability from which a clause is kept.
    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// The confidence score of a kept clause with probability `p`: from the service's
    /// default `min_confidence` (0.7) at the threshold up to 0.9, so that an agent asking
    /// for more certainty drops the doubtful ones first.
    pub(super) fn score(&self, p: f32) -> f64 {
        let above = f64::from((p - self.threshold) / (1.0 - self.threshold).max(f32::EPSILON));
        ((0.7 + 0.2 * above.clamp(0.0, 1.0)) * 100.0).round() / 100.0
    }

    /// The file's bytes, in the format above.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 4 * self.weights.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&BITS.to_le_bytes());
        out.extend_from_slice(&self.threshold.to_le_bytes());
        for w in &self.weights {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The model in `bytes`, or `None` when they are not a model of this `BITS`.
    pub fn decode(bytes: &[u8]) -> Option<ClauseModel> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let word = |at: usize| -> Option<[u8; 4]> { rest.get(at..at + 4)?.try_into().ok() };
        if u32::from_le_bytes(word(0)?) != BITS || rest.len() != 8 + 4 * (1 << BITS) {
            return None;
        }
        let threshold = f32::from_le_bytes(word(4)?);
        let weights = rest[8..].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        ClauseModel::new(weights, threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_round_trips_and_a_bad_file_is_no_model() {
        let mut weights = vec![0.0; 1 << BITS];
        weights[3] = 2.0;
        let model = ClauseModel::new(weights, 0.6).expect("valid");
        let again = ClauseModel::decode(&model.encode()).expect("decodes");
        assert_eq!(again.threshold(), 0.6);
        assert!((again.probability(&[3]) - 0.8808).abs() < 1e-3);
        assert_eq!(again.probability(&[]), 0.5);
        assert!(ClauseModel::decode(b"ENGRAMCM").is_none());
        assert!(ClauseModel::decode(&model.encode()[..100]).is_none());
        assert!(ClauseModel::new(vec![0.0; 3], 0.5).is_none());
    }

    #[test]
    fn scores_run_from_the_default_threshold_up() {
        let model = ClauseModel::new(vec![0.0; 1 << BITS], 0.6).expect("valid");
        assert_eq!(model.score(0.6), 0.7);
        assert_eq!(model.score(1.0), 0.9);
        assert_eq!(model.score(0.8), 0.8);
    }

    #[test]
    fn the_embedded_model_parses() {
        assert!(ClauseModel::embedded().is_some());
    }
}
