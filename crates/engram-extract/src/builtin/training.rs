//! What `engram-bench train-extraction` needs to train the clause model and to score one
//! it has not yet built in: the restated clauses of a conversation with their features,
//! and extraction with a given model. Not part of the service's interface.

use super::clause_model::ClauseModel;
use super::{Candidate, read};
use crate::{ExtractedFact, ExtractionRequest};

pub use super::clause_model::ClauseModel as Model;
pub use super::features::BITS;

/// The rules' facts of `request` (no clause model) and every clause they left unread that
/// could be restated, in order.
pub fn candidates(request: &ExtractionRequest) -> (Vec<ExtractedFact>, Vec<Candidate>) {
    let mut out = Vec::new();
    let facts = read(request, None, Some(&mut out));
    (facts, out)
}

/// `builtin::extract` with `model` in place of the built-in one (`None`: the rules alone).
pub fn extract_with(request: &ExtractionRequest, model: Option<&ClauseModel>) -> Vec<ExtractedFact> {
    read(request, model, None)
}
